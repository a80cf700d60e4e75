"""``kind = "codesign"``: multi-objective Optuna search over continuous hardware knobs.

Each trial is a hardware variant of ``base`` (knobs applied with
:func:`dse.spec.variants.apply_overrides`, so ``clock`` scales every peak and the L2
bandwidth); the *inner* optimization is the vectorized sweep, which picks the fastest
feasible layout for that hardware.  Trials are asked and evaluated ``batch`` at a time:
one ``sweep_points`` call covers (batch hardware x every layout).

Objectives: step time (s) and a per-cluster cost proxy declared in the study file,
``cost = gpus x (base + sum_k coef_k x attribute_k)`` with attributes dense bf16 PFLOP/s,
HBM TB/s, HBM GiB, L2 MiB, NVLink GB/s and NIC GB/s — a linear bill of materials in
arbitrary units ($k), to be replaced by the user's own numbers.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from dse.report.atomic import write_csv, write_text
from dse.errors import require
from dse.report.manifest import write_manifest
from dse.search.pareto import pareto_front, trials_dataframe
from dse.search.runner import SAMPLERS, Knob, run_search
from dse.search.storage import default_storage_url
from dse.spec.hardware import Hardware, get_hardware
from dse.spec.layout import Workload
from dse.spec.variants import apply_overrides
from dse.studies.common import check_keys, integer, number, parse_workload, results_dir, table
from dse.sweep.grid import enumerate_layouts
from dse.sweep.run import sweep_points

KNOB_UNITS = {"hbm_bw": "TB/s", "hbm_capacity": "GiB", "l2": "MiB", "l2_bw": "TB/s",
              "nvlink_bw": "GB/s", "nic_bw": "GB/s", "clock": "GHz", "num_sms": "",
              "throttle": ""}
COST_TERMS = {  # study key -> (Hardware attribute, SI -> human unit divisor)
    "per_bf16_pflops": ("peak_bf16_flops_per_s", 1e15),
    "per_hbm_tb_s": ("hbm_bw_bytes_per_s", 1e12),
    "per_hbm_gib": ("hbm_bytes", 2.0**30),
    "per_l2_mib": ("l2_bytes", 2.0**20),
    "per_nvlink_gb_s": ("nvlink_bw_bytes_per_s", 1e9),
    "per_nic_gb_s": ("nic_bw_bytes_per_s", 1e9),
}


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


def run(d: dict, path: Path, storage: str | None = None, trials: int | None = None) -> Path:
    where = str(path)
    check_keys(d, {"name", "kind", "description", "base", "workload", "knobs", "cost", "search",
                   "compare"}, where, "")
    wl_s = parse_workload(d, where, hardware_required=False)
    require(isinstance(d.get("base"), str), where, "base", f"must be a GPU name, but got {d.get('base')!r}")
    base = get_hardware(d["base"], where=f"{where}: base")
    knobs_raw = table(d, "knobs", where)
    require(bool(knobs_raw), where, "knobs", "table with at least one knob is required")
    space = {}
    for k, v in knobs_raw.items():
        require(k in KNOB_UNITS, where, f"knobs.{k}", f"must be one of {sorted(KNOB_UNITS)}")
        require(isinstance(v, dict), where, f"knobs.{k}", "must be a table {low, high, log}")
        check_keys(v, {"low", "high", "log"}, where, f"knobs.{k}.")
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
    check_keys(cost, {"base"} | set(COST_TERMS), where, "cost.")
    for key in cost:            # a bill of materials: no negative prices
        number(cost, key, where, "cost.", low=0)
    search = table(d, "search", where)
    check_keys(search, {"trials", "batch", "sampler", "seed"}, where, "search.")
    n_trials = trials if trials is not None else integer(search, "trials", where, "search.", default=200)
    batch = integer(search, "batch", where, "search.", default=40)
    sampler = search.get("sampler", "nsga2")
    require(sampler in SAMPLERS, where, "search.sampler", f"must be one of {list(SAMPLERS)}, but got {sampler!r}")
    seed = search.get("seed")
    if seed is not None:
        seed = integer(search, "seed", where, "search.", low=0)
        require(seed < 2**32, where, "search.seed", f"must be an integer < 2**32, but got {seed}")
    cmp = table(d, "compare", where)
    check_keys(cmp, {"catalog", "variants_from"}, where, "compare.")
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

    def best_times(hws: list[Hardware]) -> np.ndarray:
        sr = sweep_points(model, wl, hws, cols)
        t = np.where(sr.feasible, sr.result["step_time_s"], np.inf).reshape(len(hws), -1)
        return t.min(axis=1)

    def evaluate_batch(params: list[dict]) -> list:
        hws = [apply_overrides(base, {k: _override(k, v) for k, v in p.items()}, where, "trial")
               for p in params]
        times = best_times(hws)
        res = []
        for hw, t in zip(hws, times):
            res.append("no layout fits in memory" if not np.isfinite(t) else (float(t), gpus * gpu_cost(hw, cost)))
        return res

    t0 = time.perf_counter()
    study = run_search(d["name"], url, space, evaluate_batch, ["minimize", "minimize"], n_trials,
                       batch_size=batch, sampler=sampler,
                       seed=seed, objective_names=["step_time_s", "cluster_cost"])
    search_s = time.perf_counter() - t0

    df = trials_dataframe(study)
    done = df[df["state"] == "COMPLETE"].copy()
    obj = ["step_time_s", "cluster_cost"]
    if "values_0" in done.columns:
        done = done.rename(columns={"values_0": obj[0], "values_1": obj[1]})
    done["pareto"] = pareto_front(done, obj, ["minimize", "minimize"]) if len(done) else []
    write_csv(df, out / "trials.csv", index=False)

    refs = []
    if ref_hws:
        times = best_times(ref_hws)
        for hw, t in zip(ref_hws, times):
            refs.append({"name": hw.name, "step_time_s": t, "cluster_cost": gpus * gpu_cost(hw, cost)})
    refs = pd.DataFrame(refs)
    write_csv(refs, out / "reference_points.csv", index=False)
    from dse.report.codesign_plots import pareto_plot
    pareto_plot(done, refs, f"{model.name} training on {gpus} GPUs (seq {seq}, global batch {gbs}): "
                f"\n{len(done)} hardware designs around {base.name}, each with its best layout", out / "pareto.png")
    write_report(out, d, done, refs, search_s, url, base, gpus)
    write_manifest(out, path, {"storage": url, "trials": int(len(df)), "search_seconds": round(search_s, 1)})
    return out


def write_report(out, d, done, refs, search_s, url, base, gpus):
    front = done[done["pareto"]].sort_values("cluster_cost")
    pcols = [c for c in done.columns if c in KNOB_UNITS]
    lines = [f"# {d['name']}: {d.get('description', '')}", "",
             f"{len(done)} completed trials in {search_s:.0f} s (Optuna, batched ask/tell; storage `{url}`). "
             f"Each trial is a variant of `{base.name}`; the layout is re-optimized for every trial by the "
             "vectorized sweep. Cost is the linear proxy declared in the study file (arbitrary units, "
             f"x {gpus} GPUs).", "", "![pareto](pareto.png)", "", "## Pareto front", "",
             "| step time (s) | cluster cost | " + " | ".join(f"{c} ({KNOB_UNITS[c]})" if KNOB_UNITS[c] else c
                                                   for c in pcols) + " |",
             "|---|---|" + "---|" * len(pcols)]
    for _, r in front.iterrows():
        lines.append(f"| {r['step_time_s']:.3f} | {r['cluster_cost']:.0f} | " +
                     " | ".join(f"{r[c]:.3g}" for c in pcols) + " |")
    if len(refs):
        lines += ["", "## Reference designs (same workload, same cost proxy)", "",
                  "| design | step time (s) | cluster cost |", "|---|---|---|"]
        for _, r in refs.iterrows():
            lines.append(f"| {r['name']} | {r['step_time_s']:.3f} | {r['cluster_cost']:.0f} |")
    lines += ["", f"Browse the trials: `make dashboard STUDY={d['name']}`. Resume or add trials: run "
              f"`make study STUDY={d['name']}` again (the study's trial target is study-wide); more workers: "
              f"`dse study studies/{d['name']}.toml --storage <same URL>` in another shell or machine.", ""]
    write_text(out / "report.md", "\n".join(lines))
