"""``kind = "variants"``: hardware design variants against a baseline (studies/hbm3d.toml).

Each ``[[variants]]`` entry derives a GPU from a catalog entry by overrides
(:mod:`dse.spec.variants`).  For every GPU count (and sequence length / global batch) of
the ``[workload]`` one sweep evaluates every valid layout on every variant at once; then
per variant:

* re-optimized:  ``speedup = t_best(baseline) / t_best(variant)``, each GPU's own fastest
  feasible layout;
* fixed layout:  ``speedup = t_best(baseline) / t_variant(L*)`` with ``L*`` the baseline's
  fastest layout, evaluated unchanged on the variant (same sweep grid, filtered).

Diagnostics at ``L*`` on the baseline: the step with unlimited HBM bandwidth and with
unlimited L2 capacity; the time each saves, as a share s of the step, is the HBM-bound
(resp. L2-capacity-bound) share.  For an r-fold faster HBM it brackets the gain: every
kernel is a roofline ``t = max(c, m)`` (or pure bandwidth, c = 0), and
``max(c, m/r) <= max(c, m) - (m - c)^+ (1 - 1/r)``, so
``1 / (1 - s (1 - 1/r)) <= speedup <= 1 / (1 - s)`` at a fixed layout.

An optional ``[inference]`` table runs :func:`dse.infer.sweep.sweep_inference` on every
variant (prefill and decode speedups) when that module is available; otherwise the
report says it was skipped.

:func:`run` returns a :class:`dse.report.results.VariantsResults`;
:mod:`dse.report.variants` writes ``results/<name>/``: ``sweep.parquet`` (every point),
``summary.csv``, ``sensitivity.csv``, ``speedup.png``, ``breakdown_<gpus>gpus.png``,
(``inference.png``), ``report.md`` and ``manifest.json``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from dse.errors import require
from dse.report.plots import BREAKDOWN_LABELS
from dse.report.results import StudyHeader, VariantsResults, VariantsStudy
from dse.spec.hardware import Hardware
from dse.spec.layout import RECOMPUTE, Workload
from dse.spec.study import study_keys
from dse.spec.variants import parse_variants
from dse.studies import elasticity
from dse.studies import variants_infer as infer
from dse.studies.common import check_keys, layout_label, parse_workload, results_dir
from dse.sweep.grid import FIELDS
from dse.sweep.run import MEM_MARGIN, sweep, sweep_points, to_dataframe

BREAKDOWN = list(BREAKDOWN_LABELS)
UNLIMITED = 1e6      # "unlimited" = this many times the nominal value


def parse(d: dict, path: Path) -> VariantsStudy:
    where = str(path)
    check_keys(d, study_keys("variants"), where, "")
    require("hardware" not in d.get("workload", {}), where, "workload.hardware",
            "must be absent in a variants study: the [[variants]] tables define the hardware")
    wl = parse_workload(d, where, hardware_required=False)
    hws = tuple(parse_variants(d.get("variants"), where))
    names = [h.name for h in hws]
    baseline = d.get("baseline", names[0])
    require(baseline in names, where, "baseline", f"must name one of the variants {names}, but got {baseline!r}")
    rep = d.get("report", {})
    require(isinstance(rep, dict), where, "report", "must be a table")
    check_keys(rep, study_keys("variants", "report"), where, "report.")
    bg = rep.get("breakdown_gpus", [wl.gpus[len(wl.gpus) // 2]])
    bg = (bg,) if isinstance(bg, int) else tuple(bg)
    for g in bg:
        require(g in wl.gpus, where, "report.breakdown_gpus",
                f"must be among workload.gpus {list(wl.gpus)}, but got {g!r}")
    pub = rep.get("published", [])
    require(isinstance(pub, list), where, "report.published", "must be an array of tables")
    for i, p in enumerate(pub):
        check_keys(p, study_keys("variants", "report", "published"), where, f"report.published[{i}].")
        require(p.get("variant") in names, where, f"report.published[{i}].variant",
                f"must name one of the variants {names}, but got {p.get('variant')!r}")
        s = p.get("speedup")
        require(isinstance(s, (int, float)) and not isinstance(s, bool) and s > 0, where,
                f"report.published[{i}].speedup", f"must be a number > 0, but got {s!r}")
    inf = infer.parse(d.get("inference"), where)
    return VariantsStudy(wl, hws, tuple(d["variants"]), baseline, bg, tuple(pub), inf)


def workload_label(seq: int, gbs: int) -> str:
    return f"train seq {seq}, global batch {gbs}"


def match_layout(df: pd.DataFrame, row) -> pd.Series:
    m = pd.Series(True, index=df.index)
    for f in FIELDS:
        m &= df[f] == row[f]
    return m


def training_table(full: pd.DataFrame, names: list[str], baseline: str) -> pd.DataFrame:
    """One row per (workload, GPU count, variant): best layout, the baseline's layout
    on the variant, and both speedups (NaN where the baseline has no feasible layout)."""
    rows = []
    for (wlab, gpus), g in full.groupby(["workload", "gpus"], sort=False):
        ok = g[g["feasible"]].sort_values("step_time_s", kind="stable")
        best = ok.groupby("hardware", sort=False).head(1).set_index("hardware")
        b = best.loc[baseline] if baseline in best.index else None
        t_base = float(b["step_time_s"]) if b is not None else np.nan
        for v in names:
            r = {"variant": v, "workload": wlab, "gpus": int(gpus), "metric": "training step time (s)"}
            if v in best.index:
                br = best.loc[v]
                r.update({f: br[f] for f in FIELDS})
                r.update(layout=layout_label(br), step_time_s=float(br["step_time_s"]),
                         mem_gib=float(br["mem_gib"]), hbm_gib=float(br["hbm_gib"]),
                         tokens_per_s=float(br["tokens_per_s"]), mfu=float(br["mfu"]),
                         **{c: float(br[c]) for c in BREAKDOWN})
            else:
                r.update(layout="", step_time_s=np.nan, mem_gib=np.nan,
                         hbm_gib=float(g[g["hardware"] == v]["hbm_gib"].iloc[0]))
            r["speedup_reoptimized"] = t_base / r["step_time_s"]
            if b is not None:
                fx = g[(g["hardware"] == v) & match_layout(g, b)].iloc[0]
                r.update(baseline_layout=layout_label(b),
                         step_time_at_baseline_layout_s=float(fx["step_time_s"]) if fx["feasible"] else np.nan,
                         mem_gib_at_baseline_layout=float(fx["mem_gib"]),
                         **{f"{c}_at_baseline_layout": float(fx[c]) for c in BREAKDOWN})
                r["speedup_at_baseline_layout"] = t_base / r["step_time_at_baseline_layout_s"]
            else:
                r.update(baseline_layout="", step_time_at_baseline_layout_s=np.nan,
                         speedup_at_baseline_layout=np.nan)
            r["status"] = ("baseline: no layout fits in HBM" if b is None and v != baseline
                           else "no layout fits in HBM" if not r["layout"]
                           else "baseline's layout does not fit" if not np.isfinite(r["step_time_at_baseline_layout_s"])
                           else "ok")
            rows.append(r)
    out = pd.DataFrame(rows)
    return out[[c for c in SUMMARY_COLS if c in out] + [c for c in out.columns if c not in SUMMARY_COLS]]


SUMMARY_COLS = ["variant", "workload", "gpus", "layout", "metric", "step_time_s", "speedup_reoptimized",
                "baseline_layout", "step_time_at_baseline_layout_s", "speedup_at_baseline_layout",
                "mem_gib", "mem_gib_at_baseline_layout", "hbm_gib", "tokens_per_s", "mfu", "status"]


def layout_cols(row) -> dict[str, np.ndarray]:
    """One layout (a sweep row) as the sweep's int32 column arrays."""
    cols = {}
    for f in FIELDS:
        v = row[f]
        v = RECOMPUTE[v] if f == "recompute" else int(v)
        cols[f] = np.asarray([v], dtype=np.int32)
    return cols


def evaluate_fixed(model, wl: Workload, hws: list[Hardware], row) -> pd.DataFrame:
    """One layout on several hardware specs (the sweep's compiled chunk, no recompile),
    under the sweep's memory margin: block recompute resolves to the same layer count as
    in the sweep the row came from (without it, the whole HBM would let fewer layers be
    recomputed and the probe would time another step than the one it explains)."""
    return to_dataframe(sweep_points(model, wl, hws, layout_cols(row), mem_margin=MEM_MARGIN))


def sensitivity(study: VariantsStudy, full: pd.DataFrame, base_hw: Hardware) -> pd.DataFrame:
    """At the baseline's best layout: the step on the baseline, with unlimited HBM
    bandwidth, and with unlimited L2 capacity; ``*_share = (t - t_unlimited) / t``."""
    probes = [base_hw,
              base_hw.replace(name="hbm_unlimited", hbm_bw_bytes_per_s=base_hw.hbm_bw_bytes_per_s * UNLIMITED),
              base_hw.replace(name="l2_unlimited", l2_bytes=base_hw.l2_bytes * UNLIMITED)]
    rows = []
    for (wlab, gpus, seq, gbs), g in full.groupby(["workload", "gpus", "seq_len", "global_batch"], sort=False):
        ok = g[g["feasible"] & (g["hardware"] == study.baseline)]
        if not len(ok):
            continue
        b = ok.iloc[0]
        ev = evaluate_fixed(study.wl.model, Workload(int(gbs), int(seq), study.wl.precision), probes, b)
        t, t_hbm, t_l2 = ev["step_time_s"].to_numpy()
        c, c_hbm = ev["compute_s"].iloc[0], ev["compute_s"].iloc[1]
        rows.append({"workload": wlab, "gpus": int(gpus), "baseline_layout": layout_label(b),
                     "step_time_s": t, "step_time_unlimited_hbm_bw_s": t_hbm,
                     "step_time_unlimited_l2_s": t_l2, "hbm_bound_share": (t - t_hbm) / t,
                     "l2_capacity_bound_share": (t - t_l2) / t,
                     "compute_s": c, "compute_hbm_bound_s": c - c_hbm,
                     "optimizer_s": ev["optimizer_s"].iloc[0]})
    return pd.DataFrame(rows)


def run(d: dict, path: Path) -> VariantsResults:
    study = parse(d, path)
    wl = study.wl
    out = results_dir(d["name"])
    names = [h.name for h in study.hws]
    base_hw = study.hws[names.index(study.baseline)]
    t0 = time.perf_counter()
    frames = []
    for seq in wl.seq_lens:
        for gbs in wl.global_batches:
            for gpus in wl.gpus:
                df = sweep(wl.model, list(study.hws), gpus, gbs, seq, wl.precision)
                if len(df):
                    df.insert(1, "workload", workload_label(seq, gbs))
                    frames.append(df)
    require(bool(frames), str(path), "workload", "must admit at least one valid layout")
    full = pd.concat(frames, ignore_index=True)
    train = training_table(full, names, study.baseline)
    sens = sensitivity(study, full, base_hw)
    elastic = baseline_elasticities(study, full, base_hw)
    sweep_s = time.perf_counter() - t0

    t1 = time.perf_counter()
    inf_tab, inf_sens, inf_note = infer.run(study.inference, list(study.hws), study.baseline)
    infer_s = time.perf_counter() - t1
    summary = pd.concat([train, inf_tab], ignore_index=True) if inf_tab is not None else train
    summary = summary[[c for c in SUMMARY_COLS if c in summary] + [c for c in summary if c not in SUMMARY_COLS]]
    head = StudyHeader(d["name"], d.get("description", ""), path, out)
    keys = {k for t in study.tables for k in t} | {"hbm_bw", "hbm_capacity", "l2"}
    return VariantsResults(head, study, full, train, sens, summary, inf_tab, inf_sens, inf_note,
                           sweep_s, infer_s, elastic, elasticity.named(sorted(keys)))


def baseline_elasticities(study: VariantsStudy, full: pd.DataFrame, base_hw: Hardware) -> pd.DataFrame:
    """``jax.grad`` elasticities of the baseline's step time at its fastest layout, at each
    ``report.breakdown_gpus`` count of the first training workload where a layout fits
    (:mod:`dse.studies.elasticity`)."""
    frames = []
    first = full["workload"].iloc[0]
    for gpus in study.breakdown_gpus:
        g = full[(full["workload"] == first) & (full["gpus"] == gpus) & (full["hardware"] == study.baseline)
                 & full["feasible"]]
        if not len(g):
            continue
        b = g.sort_values("step_time_s", kind="stable").iloc[0]
        wl = Workload(int(b["global_batch"]), int(b["seq_len"]), study.wl.precision)
        frames.append(elasticity.at_layout(study.wl.model, wl, base_hw, b, gpus=int(gpus), workload=first))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
