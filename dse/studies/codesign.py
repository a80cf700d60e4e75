"""``kind = "codesign"``: multi-objective Optuna search over continuous hardware knobs.

Each trial is a hardware variant of ``base`` (knobs applied with
:func:`dse.spec.variants.apply_overrides`, so ``clock`` scales every peak and the L2
bandwidth); the *inner* optimization is the vectorized sweep, which picks the fastest
feasible layout for that hardware.  Trials are asked and evaluated ``batch`` at a time:
one ``sweep_points`` call covers (batch hardware x every layout).

Objectives (``[search] objectives``, any of :data:`OBJECTIVES`, all minimized; default
step time and cluster cost): step time (s); a per-cluster cost proxy declared in the study
file, ``cost = gpus x (base + sum_k coef_k x attribute_k)`` with attributes dense bf16
PFLOP/s, HBM TB/s, HBM GiB, L2 MiB, NVLink GB/s and NIC GB/s — a linear bill of materials
in arbitrary units ($k), to be replaced by the user's own numbers; energy per million
tokens (kWh) and cost per million tokens (USD, capex amortized plus electricity, prices in
``[tco]``), both from :mod:`dse.cost.energy` at the trial's best layout.

The report also gives the step-time elasticities of the base GPU at its fastest layout
(:mod:`dse.studies.elasticity`): which knob matters where the search starts.

:func:`run` returns a :class:`dse.report.results.CodesignResults`;
:mod:`dse.report.codesign` writes ``trials.csv``, ``reference_points.csv``,
``pareto.png``, ``report.md`` and ``manifest.json``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from dse.cost.energy import per_token, variant_tdp_w
from dse.errors import require
from dse.report.results import CodesignResults, StudyHeader
from dse.search.pareto import pareto_front, trials_dataframe
from dse.search.runner import Knob, run_search
from dse.search.storage import default_storage_url
from dse.spec.hardware import Hardware, get_hardware
from dse.spec.layout import RECOMPUTE_NAMES, Workload
from dse.spec.study import (CODESIGN_DEFAULT_OBJECTIVES, CODESIGN_KNOBS, CODESIGN_OBJECTIVES, COST_KEYS,
                            SAMPLERS, TCO_DEFAULTS, study_keys)
from dse.spec.variants import apply_overrides
from dse.studies import elasticity
from dse.studies.common import check_keys, integer, number, parse_workload, results_dir, table
from dse.sweep.grid import enumerate_layouts
from dse.sweep.run import sweep_points

# the knobs, [cost] terms and objectives are declared once, in the study schema
KNOB_UNITS = CODESIGN_KNOBS               # knob -> unit of a trial's override value
COST_TERMS = {k: (attr, div) for k, (_, attr, div) in COST_KEYS.items()}  # -> (attribute, SI per unit)
OBJECTIVES = CODESIGN_OBJECTIVES          # objective name -> axis label (all minimized)
DEFAULT_OBJECTIVES = list(CODESIGN_DEFAULT_OBJECTIVES)
STEP_TERMS = ("step_time_s", "compute_s", "recompute_s", "optimizer_s")


def gpu_cost(hw: Hardware, cost: dict) -> float:
    c = float(cost.get("base", 0.0))
    for key, (attr, div) in COST_TERMS.items():
        c += float(cost.get(key, 0.0)) * float(getattr(hw, attr)) / div
    return c


def _override(name: str, v: float) -> object:
    unit = KNOB_UNITS[name]
    if name == "num_sms":
        return int(round(v))
    if name == "throttle":
        return float(v)
    return f"{v:.6g}{unit}"


def run(d: dict, path: Path, storage: str | None = None, trials: int | None = None) -> CodesignResults:
    where = str(path)
    check_keys(d, study_keys("codesign"), where, "")
    wl_s = parse_workload(d, where, hardware_required=False)
    require(isinstance(d.get("base"), str), where, "base", f"must be a GPU name, but got {d.get('base')!r}")
    base = get_hardware(d["base"], where=f"{where}: base")
    knobs_raw = table(d, "knobs", where)
    require(bool(knobs_raw), where, "knobs", "table with at least one knob is required")
    space = {}
    for k, v in knobs_raw.items():
        require(k in KNOB_UNITS, where, f"knobs.{k}", f"must be one of {sorted(KNOB_UNITS)}")
        require(isinstance(v, dict), where, f"knobs.{k}", "must be a table {low, high, log}")
        check_keys(v, {"low", "high", "log"}, where, f"knobs.{k}.")     # dse.spec.study._knob
        for b in ("low", "high"):
            require(b in v, where, f"knobs.{k}.{b}", "is required")
        if k == "throttle":     # a fraction of the clock / bandwidth lost: [0, 1)
            lo = number(v, "low", where, f"knobs.{k}.", low=0, high=1, high_open=True)
            hi = number(v, "high", where, f"knobs.{k}.", low=0, high=1, high_open=True)
        else:                   # capacities, bandwidths, clocks, SM counts: > 0
            lo = number(v, "low", where, f"knobs.{k}.", low=0, low_open=True)
            hi = number(v, "high", where, f"knobs.{k}.", low=0, low_open=True)
        if k == "num_sms":      # rounded to a whole SM count
            require(lo >= 1, where, f"knobs.{k}.low", f"`low >= 1` must hold (a whole SM count), but got {lo}")
        require(lo <= hi, where, f"knobs.{k}", f"`low <= high` must hold, but got (low={lo}, high={hi})")
        log = v.get("log", False)
        require(isinstance(log, bool), where, f"knobs.{k}.log", f"must be true or false, but got {log!r}")
        require(not log or lo > 0, where, f"knobs.{k}.low", f"`low > 0` must hold for a log knob, but got {lo}")
        space[k] = Knob(low=lo, high=hi, log=log, unit=KNOB_UNITS[k])
    cost = table(d, "cost", where)
    check_keys(cost, study_keys("codesign", "cost"), where, "cost.")
    for key in cost:            # a bill of materials: no negative prices
        number(cost, key, where, "cost.", low=0)
    search = table(d, "search", where)
    check_keys(search, study_keys("codesign", "search"), where, "search.")
    obj = search.get("objectives", DEFAULT_OBJECTIVES)
    require(isinstance(obj, list) and len(obj) >= 2 and len(set(obj)) == len(obj)
            and all(o in OBJECTIVES for o in obj), where, "search.objectives",
            f"must be a list of at least two distinct names from {list(OBJECTIVES)}, but got {obj!r}")
    tco_raw = table(d, "tco", where)
    check_keys(tco_raw, study_keys("codesign", "tco"), where, "tco.")
    tco = {k: number(tco_raw, k, where, "tco.", default=v, low=1.0 if k == "pue" else 0.0,
                     low_open=k != "pue") for k, v in TCO_DEFAULTS.items()}
    n_trials = trials if trials is not None else integer(search, "trials", where, "search.", default=200)
    batch = integer(search, "batch", where, "search.", default=40)
    sampler = search.get("sampler", "nsga2")
    require(sampler in SAMPLERS, where, "search.sampler", f"must be one of {list(SAMPLERS)}, but got {sampler!r}")
    seed = search.get("seed")
    if seed is not None:
        seed = integer(search, "seed", where, "search.", low=0)
        require(seed < 2**32, where, "search.seed", f"must be an integer < 2**32, but got {seed}")
    cmp = table(d, "compare", where)
    check_keys(cmp, study_keys("codesign", "compare"), where, "compare.")
    cat = cmp.get("catalog", [])
    require(isinstance(cat, list) and all(isinstance(n, str) for n in cat), where, "compare.catalog",
            f"must be a list of GPU names, but got {cat!r}")
    ref_hws = [get_hardware(n, where=f"{where}: compare.catalog") for n in cat]
    vf = cmp.get("variants_from")
    if vf is not None:
        require(isinstance(vf, str) and Path(vf).is_file(), where, "compare.variants_from",
                f"must be the path of an existing study file with [[variants]], but got {vf!r}")
        from dse.io import load_toml
        from dse.spec.variants import parse_variants
        ref_hws += parse_variants(load_toml(Path(vf)).get("variants", []), vf)
    gpus, seq, gbs = wl_s.gpus[0], wl_s.seq_lens[0], wl_s.global_batches[0]
    model = wl_s.model
    wl = Workload(global_batch=gbs, seq_len=seq, precision=wl_s.precision)
    cols = enumerate_layouts(model, gpus, gbs, seq)
    out = results_dir(d["name"])
    url = storage or default_storage_url(out, d["name"])

    tokens = float(gbs * seq)

    def best_steps(hws: list[Hardware]) -> list[dict | None]:
        """Per hardware: the fastest feasible layout's step terms and index (None if none fits)."""
        sr = sweep_points(model, wl, hws, cols)
        t = np.where(sr.feasible, sr.result["step_time_s"], np.inf).reshape(len(hws), -1)
        out = []
        for i, j in enumerate(t.argmin(axis=1)):
            if not np.isfinite(t[i, j]):
                out.append(None)
                continue
            flat = i * t.shape[1] + j
            out.append({"layout_index": int(j), **{c: float(sr.result[c][flat]) for c in STEP_TERMS}})
        return out

    def metrics(hw: Hardware, step: dict) -> dict:
        c = gpu_cost(hw, cost)
        return {"step_time_s": step["step_time_s"], "cluster_cost": gpus * c,
                **per_token(step, variant_tdp_w(hw, base) if hw.name.startswith("trial") else float(hw.tdp_w),
                            c, gpus, tokens, tco)}

    def evaluate_batch(params: list[dict]) -> list:
        hws = [apply_overrides(base, {k: _override(k, v) for k, v in p.items()}, where, "trial").replace(
            name=f"trial{i}") for i, p in enumerate(params)]
        res = []
        for hw, st in zip(hws, best_steps(hws)):
            if st is None:
                res.append("no layout fits in memory")
            else:
                m = metrics(hw, st)
                res.append(tuple(m[o] for o in obj))
        return res

    # run_search opens the storage once and refuses a stored study with other objectives
    t0 = time.perf_counter()
    study = run_search(d["name"], url, space, evaluate_batch, ["minimize"] * len(obj), n_trials,
                       batch_size=batch, sampler=sampler, seed=seed, objective_names=list(obj))
    search_s = time.perf_counter() - t0

    df = trials_dataframe(study)
    done = df[df["state"] == "COMPLETE"].copy()
    done = done.rename(columns={f"values_{i}": o for i, o in enumerate(obj)})
    done["pareto"] = pareto_front(done, list(obj), ["minimize"] * len(obj)) if len(done) else []
    refs = []
    if ref_hws:
        for hw, st in zip(ref_hws, best_steps(ref_hws)):
            refs.append({"name": hw.name, **(metrics(hw, st) if st is not None else
                                             {"step_time_s": np.inf, "cluster_cost": gpus * gpu_cost(hw, cost)})})
    refs = pd.DataFrame(refs)
    # which knob matters where the search starts: elasticities of the base at its best layout
    st = best_steps([base])[0]
    elastic = pd.DataFrame()
    if st is not None:
        row = {f: v[st["layout_index"]] for f, v in cols.items()}
        row["recompute"] = RECOMPUTE_NAMES[int(row["recompute"])]
        elastic = elasticity.at_layout(model, wl, base, pd.Series(row), gpus=gpus)
    return CodesignResults(StudyHeader(d["name"], d.get("description", ""), path, out), df, done, refs, url, base,
                           model.name, gpus, seq, gbs, dict(KNOB_UNITS), search_s, tuple(obj),
                           {o: OBJECTIVES[o] for o in obj}, tco, elastic, elasticity.named(sorted(space)))
