"""``kind = "upgrade"``: what moving a workload from one GPU to another buys
(studies/a100_to_h100.toml).

    [upgrade]
    from = "a100-sxm-80gb"                       # catalog name or a [[variants]] name
    to = ["h100-sxm-80gb", "h200-sxm-141gb"]     # first = the upgrade studied, rest = context
    breakdown_gpus = 256
    headroom_mbs = [1, 2, 4, 8, 16, 32, 64]

Per GPU count, one sweep over every valid layout on every GPU, then for each target:

* same layout:   ``speedup = t_from(L*) / t_to(L*)``, ``L*`` the source GPU's fastest
  layout evaluated unchanged on the target;
* re-optimized:  ``speedup = t_from(L*) / t_to(L_to*)``, the target's own fastest layout;
* per-term ratios of the step breakdown at ``L*`` (which part of the step got how much
  faster).

Batch headroom (memory model, :mod:`dse.train.memory`): at ``L*`` with every field but
the micro-batch size fixed and the number of micro-batches per step ``m = B/(dp*mbs)``
held (so the pipeline schedule and its in-flight micro-batches ``min(m, pp)`` are
unchanged), the largest ``mbs`` in ``headroom_mbs`` whose peak memory fits in HBM; the
global batch that then fits is ``B_max = dp * mbs_max * m`` -- with the layout's own
recompute mode, and with the recompute mode free (the mode that buys the largest batch
is reported with it, and the time per sequence it costs).  (The largest global batch
for which *some* layout fits is not a useful measure: gradient accumulation makes it
unbounded, since memory does not grow with m beyond pp in-flight micro-batches.)

:func:`run` returns a :class:`dse.report.results.UpgradeResults`; :mod:`dse.report.upgrade`
writes ``results/<name>/``: sweep.parquet, summary.csv, headroom.csv, speedup.png,
batch_headroom.png, breakdown_<gpus>gpus.png, report.md, manifest.json.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from dse.errors import require
from dse.report.plots import BREAKDOWN_LABELS
from dse.report.results import StudyHeader, UpgradeResults
from dse.spec.hardware import GIB, get_hardware
from dse.spec.layout import RECOMPUTE, Workload
from dse.spec.study import study_keys
from dse.spec.variants import parse_variants
from dse.studies.common import check_keys, int_list, layout_label, parse_workload, results_dir
from dse.studies.variants import match_layout, layout_cols
from dse.sweep.run import sweep, sweep_points, to_dataframe

BREAKDOWN = list(BREAKDOWN_LABELS)


def parse(d: dict, path: Path):
    where = str(path)
    check_keys(d, study_keys("upgrade"), where, "")
    require("hardware" not in d.get("workload", {}), where, "workload.hardware",
            "must be absent in an upgrade study: [upgrade] names the GPUs")
    wl = parse_workload(d, where, hardware_required=False)
    up = d.get("upgrade")
    require(isinstance(up, dict), where, "upgrade", "table is required")
    check_keys(up, study_keys("upgrade", "upgrade"), where, "upgrade.")
    variants = {h.name: h for h in parse_variants(d["variants"], where)} if "variants" in d else {}

    def hw(name, key):
        require(isinstance(name, str), where, key, f"must be a GPU name, but got {name!r}")
        return variants[name] if name in variants else get_hardware(name, where=f"{where}: {key}")

    src = hw(up.get("from"), "upgrade.from")
    to = up.get("to")
    to = [to] if isinstance(to, str) else to
    require(isinstance(to, list) and len(to) > 0, where, "upgrade.to", "must be a GPU name or a non-empty list of them")
    targets = [hw(t, f"upgrade.to[{i}]") for i, t in enumerate(to)]
    names = [src.name] + [t.name for t in targets]
    require(len(set(names)) == len(names), where, "upgrade.to", f"must name distinct GPUs, but got {names}")
    bg = up.get("breakdown_gpus", wl.gpus[len(wl.gpus) // 2])
    require(bg in wl.gpus, where, "upgrade.breakdown_gpus",
            f"must be among workload.gpus {list(wl.gpus)}, but got {bg!r}")
    mbs = int_list(up, "headroom_mbs", where, "upgrade.") if "headroom_mbs" in up else (1, 2, 4, 8, 16, 32, 64)
    return wl, src, targets, bg, tuple(sorted(mbs))


#: recompute modes tried for the headroom "with recompute free" (block picks its layers
#: from the HBM left, so it lies between selective and full and adds no larger batch)
HEADROOM_RECOMPUTE = ("none", "selective", "full")


def headroom(model, seq: int, gbs: int, precision: int, hws, row, mbs_list) -> pd.DataFrame:
    """Largest micro-batch (and global batch) that fits at ``row``'s layout on each GPU,
    with the micro-batches per step held at ``m = gbs / (dp * mbs)``: first with the
    layout's own recompute mode (``max_mbs``, ``max_global_batch``), then with the
    recompute mode free among :data:`HEADROOM_RECOMPUTE` (``max_global_batch_any_recompute``
    and ``recompute_for_max``, the mode that buys it: the one with the largest batch, the
    least recompute among ties)."""
    dp, mbs0 = int(row["dp"]), int(row["mbs"])
    m = gbs // (dp * mbs0)
    own = str(row["recompute"])
    modes = list(dict.fromkeys([own, *HEADROOM_RECOMPUTE]))
    fits = {(h.name, r): [] for h in hws for r in modes}
    mem = {(h.name, r): {} for h in hws for r in modes}   # per GPU: block depends on its HBM
    t_seq = {(h.name, r): {} for h in hws for r in modes}  # step time per sequence (s)
    for k in mbs_list:
        cols = layout_cols(row)
        cols = {f: np.repeat(v, len(modes)) for f, v in cols.items()}
        cols["mbs"] = np.full(len(modes), k, dtype=np.int32)
        cols["recompute"] = np.asarray([RECOMPUTE[r] for r in modes], dtype=np.int32)
        sr = sweep_points(model, Workload(dp * k * m, seq, precision), list(hws), cols)
        for _, r in to_dataframe(sr).iterrows():
            mem[(r["hardware"], r["recompute"])][k] = float(r["mem_gib"])
            t_seq[(r["hardware"], r["recompute"])][k] = float(r["step_time_s"]) / (dp * k * m)
            if r["feasible"]:
                fits[(r["hardware"], r["recompute"])].append(k)
    # memory is affine in mbs at a fixed layout and m (activations and logits scale with
    # it, model states do not): mem(k) = a + b k, so k_fit = (HBM - a) / b.  Not with block
    # recompute, which recomputes more layers as the micro-batch grows: no fit there.
    affine = own != "block" and len(mbs_list) > 1
    rows = []
    for h in hws:
        mh = mem[(h.name, own)]
        hbm = float(h.hbm_bytes) / GIB
        k = max(fits[(h.name, own)]) if fits[(h.name, own)] else np.nan
        if affine:
            b_gib = (mh[mbs_list[1]] - mh[mbs_list[0]]) / (mbs_list[1] - mbs_list[0])
            fit = (hbm - (mh[mbs_list[0]] - b_gib * mbs_list[0])) / b_gib
        else:
            fit = np.nan
        # recompute free: the largest batch over the modes, the first (least recompute) on ties
        kr = {r: max(fits[(h.name, r)]) if fits[(h.name, r)] else 0 for r in HEADROOM_RECOMPUTE}
        kr[own] = max(kr.get(own, 0), int(k) if np.isfinite(k) else 0)
        best_r = max(HEADROOM_RECOMPUTE, key=lambda r: (kr[r], -HEADROOM_RECOMPUTE.index(r)))
        if kr[own] >= kr[best_r]:
            best_r = own
        k_any = kr[best_r]
        rows.append({"hardware": h.name, "hbm_gib": hbm, "micro_batches_per_step": m, "recompute": own,
                     "max_mbs": k, "max_global_batch": dp * k * m if np.isfinite(k) else np.nan,
                     "mem_gib_at_max_mbs": mh.get(k, np.nan) if np.isfinite(k) else np.nan,
                     "mbs_fit_continuous": fit,
                     "free_gib_at_layout": hbm - mh.get(mbs0, float(row["mem_gib"])),
                     "mbs_tried": "/".join(map(str, mbs_list)),
                     "limit": (f"≥ {k} (largest tried)" if k == mbs_list[-1] else
                               f"mbs {mbs_list[mbs_list.index(int(k)) + 1]} needs "
                               f"{mh[mbs_list[mbs_list.index(int(k)) + 1]]:.1f} GiB") if np.isfinite(k) else
                     f"mbs {mbs_list[0]} needs {mh[mbs_list[0]]:.1f} GiB",
                     "recompute_for_max": best_r if k_any else "",
                     "max_mbs_any_recompute": k_any if k_any else np.nan,
                     "max_global_batch_any_recompute": dp * k_any * m if k_any else np.nan,
                     "mem_gib_at_max_any_recompute": mem[(h.name, best_r)].get(k_any, np.nan) if k_any else np.nan,
                     # time per sequence at the layout as run, and at the largest batch
                     "s_per_seq_at_layout": t_seq[(h.name, own)].get(mbs0, np.nan),
                     "s_per_seq_at_max_any_recompute": t_seq[(h.name, best_r)].get(k_any, np.nan) if k_any else np.nan,
                     **{f"max_global_batch_{r}": dp * kr[r] * m if kr[r] else np.nan for r in HEADROOM_RECOMPUTE}})
    return pd.DataFrame(rows)


def run(d: dict, path: Path) -> UpgradeResults:
    wl, src, targets, bg, mbs_list = parse(d, path)
    out = results_dir(d["name"])
    hws = [src] + targets
    seq, gbs = wl.seq_lens[0], wl.global_batches[0]
    t0 = time.perf_counter()
    frames, rows, heads = [], [], []
    for gpus in wl.gpus:
        df = sweep(wl.model, hws, gpus, gbs, seq, wl.precision)
        if not len(df):
            continue
        frames.append(df)
        ok = df[df["feasible"]]
        best = ok.groupby("hardware", sort=False).head(1).set_index("hardware")
        if src.name not in best.index:
            rows.append({"gpus": gpus, "from": src.name, "status": f"no layout fits on {src.name}"})
            continue
        b = best.loc[src.name]
        h = headroom(wl.model, seq, gbs, wl.precision, hws, b, list(mbs_list))
        h.insert(0, "gpus", gpus)
        h.insert(2, "layout", layout_label(b))
        heads.append(h)
        hb = h.set_index("hardware")
        for t in targets:
            fx = df[(df["hardware"] == t.name) & match_layout(df, b)].iloc[0]
            r = {"gpus": gpus, "from": src.name, "to": t.name, "from_layout": layout_label(b),
                 "from_step_time_s": float(b["step_time_s"]), "from_mfu": float(b["mfu"]),
                 "to_step_time_same_layout_s": float(fx["step_time_s"]) if fx["feasible"] else np.nan,
                 "speedup_same_layout": (float(b["step_time_s"]) / float(fx["step_time_s"])
                                         if fx["feasible"] else np.nan)}
            if t.name in best.index:
                tb = best.loc[t.name]
                r.update(to_layout=layout_label(tb), to_step_time_s=float(tb["step_time_s"]),
                         to_mfu=float(tb["mfu"]), to_mem_gib=float(tb["mem_gib"]),
                         speedup_reoptimized=float(b["step_time_s"]) / float(tb["step_time_s"]))
            r.update(from_mem_gib=float(b["mem_gib"]), from_hbm_gib=float(src.hbm_bytes) / GIB,
                     to_hbm_gib=float(t.hbm_bytes) / GIB,
                     from_max_global_batch_same_layout=hb.loc[src.name, "max_global_batch"],
                     to_max_global_batch_same_layout=hb.loc[t.name, "max_global_batch"],
                     batch_headroom_ratio=hb.loc[t.name, "max_global_batch"] / hb.loc[src.name, "max_global_batch"],
                     batch_headroom_ratio_any_recompute=hb.loc[t.name, "max_global_batch_any_recompute"]
                     / hb.loc[src.name, "max_global_batch_any_recompute"],
                     **{f"from_{c}": float(b[c]) for c in BREAKDOWN},
                     **{f"to_same_layout_{c}": float(fx[c]) for c in BREAKDOWN})
            r["status"] = "ok" if fx["feasible"] else f"{src.name}'s layout does not fit on {t.name}"
            rows.append(r)
    require(bool(frames), str(path), "workload", "must admit at least one valid layout")
    full = pd.concat(frames, ignore_index=True)
    summary = pd.DataFrame(rows)
    head = pd.concat(heads, ignore_index=True) if heads else pd.DataFrame()
    run_s = time.perf_counter() - t0
    rows, labels = breakdown_rows(full, src, targets, bg)
    return UpgradeResults(StudyHeader(d["name"], d.get("description", ""), path, out), wl, src, tuple(targets),
                          bg, full, summary, head, rows, labels, run_s)


def breakdown_rows(full: pd.DataFrame, src, targets, bg: int) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """The step breakdown at ``bg`` GPUs: the source's fastest layout, and per target that
    layout (where it fits) and the target's own fastest; (rows, labels), empty if nothing fits."""
    g = full[full["gpus"] == bg]
    okg = g[g["feasible"]]
    b = okg[okg["hardware"] == src.name].head(1)
    if not len(b):
        return pd.DataFrame(columns=BREAKDOWN), ()
    b = b.iloc[0]
    rows, labels = [b[BREAKDOWN]], [f"{src.name} | own best: {layout_label(b)}"]
    for t in targets:
        fx = g[(g["hardware"] == t.name) & match_layout(g, b)]
        if len(fx) and fx["feasible"].iloc[0]:
            rows.append(fx.iloc[0][BREAKDOWN])
            labels.append(f"{t.name} | {src.name}'s layout")
        tb = okg[okg["hardware"] == t.name].head(1)
        if len(tb):
            rows.append(tb.iloc[0][BREAKDOWN])
            labels.append(f"{t.name} | own best: {layout_label(tb.iloc[0])}")
    return pd.DataFrame(rows).reset_index(drop=True), tuple(labels)
