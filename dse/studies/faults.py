"""``kind = "faults"``: what single hardware faults do to the best layout, and whether
another layout is better once the fault is known (studies/faults.toml).

Flow: the vectorized sweep picks the healthy top layouts (``[study] candidates``,
distinct traces: ``selective`` recompute gives the same trace as ``none`` with
FlashAttention, the studies' attention, and is skipped) -- or ``[study] layouts`` pins
them (a list of layout tables, e.g. the 16k-GPU Llama-3.1-405B case of
``studies/faults-16k.toml``, where the replay uses rank symmetry and flow aggregation,
:mod:`dse.sim.engine`); each is turned into a trace (:mod:`dse.trace.generate`) and replayed by the
event-driven simulator (:mod:`dse.sim`) on a topology built from the hardware
(NVLink switch domains x ``scale_out``), healthy and under every ``[[scenario]]``'s
faults (the :mod:`dse.sim.faults` schema).  Per scenario: the step time of the best
healthy layout kept fixed, and of the layout re-chosen as the fastest simulated
candidate under the fault.  :func:`run` returns a :class:`dse.report.results.FaultsResults`;
:mod:`dse.report.faults` writes ``summary.csv``, ``simulations.csv``, ``faults.png``,
``report.md`` and ``manifest.json`` into ``results/<name>/``.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pandas as pd

from dse.errors import require
from dse.report.results import FaultsResults, StudyHeader
from dse.spec.layout import RECOMPUTE, Layout, Workload
from dse.spec.study import LAYOUT_KEYS, study_keys
from dse.studies.common import check_keys, layout_label, parse_workload, results_dir
from dse.sweep.run import sweep



def _layout(row) -> Layout:
    return Layout(**{k: int(row[k]) for k in LAYOUT_KEYS}, recompute=RECOMPUTE[row["recompute"]],
                  sp=int(bool(row["sp"])))


def candidates(df: pd.DataFrame, k: int, distinct: tuple[str, ...] = ()) -> pd.DataFrame:
    """The ``k`` fastest feasible rows with distinct traces; with ``distinct`` (layout
    columns) only the fastest row of each combination of those columns."""
    ok = df[df["feasible"]].copy()
    if distinct:
        ok["_key"] = [tuple(r[f] for f in distinct) for _, r in ok.iterrows()]
    else:
        ok["_key"] = [tuple(int(r[f]) for f in LAYOUT_KEYS) + (bool(r["sp"]),
                      r["recompute"] in ("full", "block"), r.get("recompute_layers", 0))
                     for _, r in ok.iterrows()]
    return ok.drop_duplicates("_key").head(k).drop(columns="_key")


PIN_KEYS = study_keys("faults", "study", "layouts")     # LAYOUT_KEYS + recompute, sp


def _pinned_layouts(raw, where: str) -> list[dict]:
    """``[study] layouts``: layout tables (tp, pp, dp required; cp, ep, mbs, vpp = 1,
    zero = 1, recompute = "none", sp = false by default)."""
    if raw is None:
        return []
    require(isinstance(raw, list) and raw and all(isinstance(x, dict) for x in raw), where,
            "study.layouts", "must be a non-empty array of layout tables")
    out = []
    for i, t in enumerate(raw):
        f = f"study.layouts[{i}]"
        check_keys(t, PIN_KEYS, where, f"{f}.")
        for key in ("tp", "pp", "dp"):
            require(key in t, where, f"{f}.{key}", "is required")
        row = {"cp": 1, "ep": 1, "mbs": 1, "vpp": 1, "zero": 1, "recompute": "none",
               "sp": False, **t}
        for key in LAYOUT_KEYS:
            v = row[key]
            require(isinstance(v, int) and not isinstance(v, bool) and v >= 0, where,
                    f"{f}.{key}", f"must be a non-negative integer, but got {v!r}")
        require(row["recompute"] in RECOMPUTE, where, f"{f}.recompute",
                f"must be one of {list(RECOMPUTE)}, but got {row['recompute']!r}")
        require(isinstance(row["sp"], bool), where, f"{f}.sp", "must be true or false")
        out.append(row)
    return out


def _pinned_rows(pinned: list[dict], model, wl, hw, gpus: int, where: str) -> pd.DataFrame:
    """The pinned layouts as sweep-like rows: step time and memory fit of each, one design
    point on the host as `dse estimate` runs it (:func:`dse.host_eval.host_design_point`: no
    XLA compile per layout)."""
    from dse.host_eval import host_design_point
    from dse.spec.layout_rules import check_layout
    from dse.train.step import train_step
    rows = []
    for i, row in enumerate(pinned):
        lay = _layout(row)
        check_layout(model, gpus, int(wl.global_batch), int(wl.seq_len), lay,
                     where=f"{where}: study.layouts[{i}]")
        res = host_design_point(train_step, model, wl, lay, hw)
        fits = float(res.mem_bytes) <= float(hw.hbm_bytes)
        require(fits, where, f"study.layouts[{i}]", "must fit in memory "
                f"({float(res.mem_bytes) / 2**30:.1f} GiB per GPU of "
                f"{float(hw.hbm_bytes) / 2**30:.1f}); try recompute or a larger vpp")
        rows.append({**row, "step_time_s": float(res.step_time_s), "feasible": True})
    return pd.DataFrame(rows)


def run(d: dict, path: Path) -> FaultsResults:
    from dse.sim import faults_from_dict, resolve, simulate
    from dse.sim.topology import topology_for_hardware
    from dse.trace.generate import generate_trace_set, rank_grid

    where = str(path)
    check_keys(d, study_keys("faults"), where, "")
    w = parse_workload(d, where)
    require(len(w.hardware) == 1 and len(w.gpus) == 1 and len(w.seq_lens) == 1
            and len(w.global_batches) == 1, where, "workload",
            "a faults study takes exactly one hardware, gpus, seq_len and global_batch")
    st = d.get("study", {})
    require(isinstance(st, dict), where, "study", "must be a table")
    check_keys(st, study_keys("faults", "study"), where, "study.")
    pinned = _pinned_layouts(st.get("layouts"), where)
    distinct = st.get("distinct", [])
    allowed = list(LAYOUT_KEYS) + ["recompute", "sp"]
    require(isinstance(distinct, list) and all(x in allowed for x in distinct), where,
            "study.distinct", f"must be a list of layout columns {allowed}, but got {distinct!r}")
    k = st.get("candidates", 5)
    require(isinstance(k, int) and not isinstance(k, bool) and k >= 1, where,
            "study.candidates", f"`candidates >= 1` must hold, but got {k!r}")
    scale_out = st.get("scale_out", "rail")
    require(scale_out in ("rail", "fat_tree"), where, "study.scale_out",
            f"must be 'rail' or 'fat_tree', but got {scale_out!r}")
    scen = d.get("scenario", [])
    require(isinstance(scen, list) and scen, where, "scenario",
            "must be a non-empty array of tables [[scenario]]")
    hw, gpus = w.hardware[0], w.gpus[0]
    seq, gbs = w.seq_lens[0], w.global_batches[0]
    topo = topology_for_hardware(hw, gpus, scale_out)
    scenarios = [("healthy", None, "none")]
    for i, s in enumerate(scen):
        f = f"scenario[{i}]"
        require(isinstance(s, dict), where, f, "must be a table")
        check_keys(s, study_keys("faults", "scenario"), where, f"{f}.")
        require(isinstance(s.get("name"), str), where, f"{f}.name", "must be a string")
        fs = faults_from_dict({"fault": s.get("fault", [])}, f"{where}: {f}")
        resolve(fs, topo)                         # names checked against the topology
        desc = "; ".join(", ".join(f"{a}={b}" for a, b in x.__dict__.items())
                         for x in fs.faults)
        scenarios.append((s["name"], fs, desc))

    out = results_dir(d["name"])
    t0 = time.perf_counter()
    wl = Workload(global_batch=gbs, seq_len=seq, precision=w.precision)
    if pinned:
        df = _pinned_rows(pinned, w.model, wl, hw, gpus, where)
    else:
        df = sweep(w.model, [hw], gpus, gbs, seq, w.precision)
    require(len(df) and df["feasible"].any(), where, "workload",
            "must have at least one feasible layout")
    cand = df[df["feasible"]] if pinned else candidates(df, k, tuple(distinct))
    traces = []
    for _, r in cand.iterrows():
        lay = _layout(r)
        traces.append((layout_label(r), lay, generate_trace_set(w.model, wl, lay, hw),
                       float(r["step_time_s"])))
    rows, sims = [], []
    for name, fs, desc in scenarios:
        times = []
        for label, lay, ts, vec in traces:
            res = simulate(ts, topo, fs, grid=rank_grid(lay), record_timeline=False)
            t = res.step_time_s if res.blocked is None else math.inf
            times.append(t)
            sims.append({"scenario": name, "layout": label, "vectorized_step_s": vec,
                         "simulated_step_s": t, "blocked": res.blocked or "",
                         "classes": res.num_classes, "events": res.num_events,
                         "wall_s": res.wall_s, "events_per_s": res.events_per_s})
        best = min(range(len(times)), key=lambda j: times[j])
        rows.append({"scenario": name, "faults": desc, "fixed_layout": traces[0][0],
                     "fixed_step_s": times[0], "rechosen_layout": traces[best][0],
                     "rechosen_step_s": times[best]})
    summ = pd.DataFrame(rows)
    h = summ["fixed_step_s"].iloc[0]
    summ["fixed_slowdown"] = summ["fixed_step_s"] / h
    summ["rechosen_slowdown"] = summ["rechosen_step_s"] / h
    summ["gain_from_rechoosing"] = summ["fixed_step_s"] / summ["rechosen_step_s"] - 1.0
    simdf = pd.DataFrame(sims)
    elapsed = time.perf_counter() - t0
    title = (f"{w.model.name} on {gpus} x {hw.name}, global batch {gbs} x {seq} tokens, "
             f"{topo.name}")
    plain = df[df["feasible"]].head(k)
    fams = [layout_label(r) for _, r in plain.iterrows()] if distinct else []
    same = (f"the plain top {len(plain)} are " + "; ".join(fams)) if fams else ""
    return FaultsResults(StudyHeader(d["name"], d.get("description", ""), path, out), summ, simdf, cand, title,
                         ', '.join(distinct) or 'trace', same, topo.name, elapsed, pinned=bool(pinned))
