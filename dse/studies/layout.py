"""``kind = "layout"``: the parallel-layout study (e.g. studies/llama70b.toml).

For every (hardware, GPU count, sequence length, global batch) of the workload: the full
sweep (every valid layout, status per point), the fastest feasible layout, and the pure
data-parallel ZeRO-3 baseline (TP = PP = CP = 1, ZeRO-3, best micro-batch and
recompute).  :func:`run` returns a :class:`dse.report.results.LayoutResults`;
:mod:`dse.report.layout` writes ``sweep.parquet`` (every point), ``best.csv``, the plots,
``report.md`` and ``manifest.json``.  Also: the configurations where memory decides
(:mod:`dse.studies.layout_memory`) and, at each published case, pure ZeRO-3 against the
best hybrid under every framework profile (:mod:`dse.studies.layout_frameworks`).
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from dse.errors import require
from dse.report.plots import BREAKDOWN_LABELS
from dse.report.results import LayoutResults, StudyHeader
from dse.spec.study import study_keys
from dse.studies.common import (check_keys, integer, layout_label, number, parse_workload,
                                results_dir, table)
from dse.studies.layout_frameworks import framework_table
from dse.studies.layout_memory import memory_limits
from dse.sweep.run import sweep

COLS = ["hardware", "gpus", "seq_len", "global_batch", "tp", "pp", "dp", "cp", "mbs", "vpp",
        "recompute", "zero", "sp", "step_time_s", "tokens_per_s", "mfu", "mem_gib"] + list(BREAKDOWN_LABELS)


def _pick(df, sel: dict):
    m = pd.Series(True, index=df.index)
    for k, v in sel.items():
        m &= df[k] == v
    return df[m]


def run(d: dict, path: Path) -> LayoutResults:
    where = str(path)
    check_keys(d, study_keys("layout"), where, "")
    wl = parse_workload(d, where)
    rep = table(d, "report", where)
    check_keys(rep, study_keys("layout", "report"), where, "report.")
    hm = table(rep, "heatmap", where, "report.")
    check_keys(hm, study_keys("layout", "report", "heatmap"), where, "report.heatmap.")
    bd = table(rep, "breakdown", where, "report.")
    check_keys(bd, study_keys("layout", "report", "breakdown"), where, "report.breakdown.")
    names = [h.name for h in wl.hardware]
    for t, sel in (("heatmap", hm), ("breakdown", bd)):
        require(sel.get("hardware", names[0]) in names, where, f"report.{t}.hardware",
                f"must be one of workload.hardware {names}, but got {sel.get('hardware')!r}")
        require(sel.get("gpus", wl.gpus[0]) in wl.gpus, where, f"report.{t}.gpus",
                f"must be one of workload.gpus {list(wl.gpus)}, but got {sel.get('gpus')!r}")
        require(sel.get("seq_len", wl.seq_lens[0]) in wl.seq_lens, where, f"report.{t}.seq_len",
                f"must be one of workload.seq_len {list(wl.seq_lens)}, but got {sel.get('seq_len')!r}")
    integer(bd, "top", where, "report.breakdown.", default=8)
    published = rep.get("published", [])
    require(isinstance(published, list) and all(isinstance(p, dict) for p in published), where,
            "report.published", "must be an array of tables [[report.published]]")
    for i, p in enumerate(published):
        f = f"report.published[{i}]."
        check_keys(p, study_keys("layout", "report", "published"), where, f)
        for k in ("gpus", "hardware", "layout", "speedup"):
            require(k in p, where, f"{f}{k}", "is required")
        integer(p, "gpus", where, f)
        number(p, "speedup", where, f, low=0, low_open=True)
        if "seq_len" in p:
            integer(p, "seq_len", where, f)
        for k in ("hardware", "layout", "source"):
            require(isinstance(p.get(k, ""), str), where, f"{f}{k}", f"must be a string, but got {p.get(k)!r}")
    out = results_dir(d["name"])
    t0 = time.perf_counter()
    frames = []
    for hw in wl.hardware:
        for gpus in wl.gpus:
            for seq in wl.seq_lens:
                for gbs in wl.global_batches:
                    frames.append(sweep(wl.model, [hw], gpus, gbs, seq, wl.precision))
    full = pd.concat([f for f in frames if len(f)], ignore_index=True)
    sweep_s = time.perf_counter() - t0

    keys = ["hardware", "gpus", "seq_len", "global_batch"]
    ok = full[full["feasible"]]
    best = ok.loc[ok.groupby(keys)["step_time_s"].idxmin()]
    base_all = ok[(ok.tp == 1) & (ok.pp == 1) & (ok.cp == 1) & (ok.zero == 3)]
    base = base_all.loc[base_all.groupby(keys)["step_time_s"].idxmin()] if len(base_all) else base_all
    summary = best[COLS].copy()
    summary["layout"] = [layout_label(r) for _, r in best.iterrows()]
    b = base.set_index(keys)["step_time_s"]
    summary["zero3_dp_step_time_s"] = [b.get(tuple(r[k] for k in keys), float("nan")) for _, r in best.iterrows()]
    summary["speedup_vs_zero3_dp"] = summary["zero3_dp_step_time_s"] / summary["step_time_s"]
    summary = summary.sort_values(keys).reset_index(drop=True)

    sel = {"hardware": hm.get("hardware", wl.hardware[0].name), "gpus": hm.get("gpus", wl.gpus[-1]),
           "seq_len": hm.get("seq_len", wl.seq_lens[0]), "global_batch": wl.global_batches[0]}
    sub = _pick(full, sel)
    require(len(sub) > 0, where, "report.heatmap", f"must select a swept point, but {sel} is not in the sweep")

    bsel = {"hardware": bd.get("hardware", sel["hardware"]), "gpus": bd.get("gpus", sel["gpus"]),
            "seq_len": bd.get("seq_len", sel["seq_len"]), "global_batch": wl.global_batches[0]}
    bsub = _pick(ok, bsel)
    top = bsub.nsmallest(int(bd.get("top", 8)), "step_time_s")
    top = top.drop_duplicates(subset=["step_time_s"]).head(int(bd.get("top", 8)))
    bbase = _pick(base, bsel)
    rows = pd.concat([top, bbase]) if len(bbase) else top
    labels = [layout_label(r) for _, r in top.iterrows()] + (["baseline: " + layout_label(r) for _, r in bbase.iterrows()])
    pub_rows = []
    for p in published:
        for seq in ([p["seq_len"]] if "seq_len" in p else wl.seq_lens):
            s = {"hardware": p["hardware"], "gpus": p["gpus"], "seq_len": seq, "global_batch": wl.global_batches[0]}
            r = _pick(summary, s)
            if len(r):
                r = r.iloc[0]
                pub_rows.append({**s, "published_layout": p["layout"], "published_speedup": p["speedup"],
                                 "our_layout": r["layout"], "our_speedup": r["speedup_vs_zero3_dp"],
                                 "source": p.get("source", "")})
    pub = pd.DataFrame(pub_rows)
    t1 = time.perf_counter()
    limits = memory_limits(full, summary, wl)
    frameworks = framework_table(wl, pub, full)
    sweep_s += time.perf_counter() - t1
    return LayoutResults(StudyHeader(d["name"], d.get("description", ""), path, out), wl, full, summary, pub,
                         sel, sub, bsel, rows, tuple(labels), sweep_s, limits, frameworks)
