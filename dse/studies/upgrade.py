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
global batch that then fits is ``B_max = dp * mbs_max * m``.  (The largest global batch
for which *some* layout fits is not a useful measure: gradient accumulation makes it
unbounded, since memory does not grow with m beyond pp in-flight micro-batches.)

Writes ``results/<name>/``: sweep.parquet, summary.csv, headroom.csv, speedup.png,
batch_headroom.png, breakdown_<gpus>gpus.png, report.md, manifest.json.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from dse.report.atomic import write_csv, write_parquet, write_text
from dse.errors import require
from dse.report.manifest import write_manifest
from dse.report.plots import BREAKDOWN_LABELS, breakdown_bars, grouped_bar_panels
from dse.spec.hardware import GIB, get_hardware
from dse.spec.layout import PRECISION_NAMES, Workload
from dse.spec.variants import parse_variants
from dse.studies.common import check_keys, int_list, layout_label, parse_workload, results_dir
from dse.studies.variants import match_layout, layout_cols
from dse.studies.variants_report import md_table, span
from dse.sweep.run import sweep, sweep_points, to_dataframe

BREAKDOWN = list(BREAKDOWN_LABELS)


def parse(d: dict, path: Path):
    where = str(path)
    check_keys(d, {"name", "kind", "description", "workload", "upgrade", "variants"}, where, "")
    require("hardware" not in d.get("workload", {}), where, "workload.hardware",
            "must be absent in an upgrade study: [upgrade] names the GPUs")
    wl = parse_workload(d, where, hardware_required=False)
    up = d.get("upgrade")
    require(isinstance(up, dict), where, "upgrade", "table is required")
    check_keys(up, {"from", "to", "breakdown_gpus", "headroom_mbs"}, where, "upgrade.")
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


def headroom(model, seq: int, gbs: int, precision: int, hws, row, mbs_list) -> pd.DataFrame:
    """Largest micro-batch (and global batch) that fits at ``row``'s layout on each GPU,
    with the micro-batches per step held at ``m = gbs / (dp * mbs)``."""
    dp, mbs0 = int(row["dp"]), int(row["mbs"])
    m = gbs // (dp * mbs0)
    fits = {h.name: [] for h in hws}
    mem = {h.name: {} for h in hws}          # per GPU: block recompute depends on its HBM
    for k in mbs_list:
        cols = layout_cols(row)
        cols["mbs"] = np.asarray([k], dtype=np.int32)
        sr = sweep_points(model, Workload(dp * k * m, seq, precision), list(hws), cols)
        for _, r in to_dataframe(sr).iterrows():
            mem[r["hardware"]][k] = float(r["mem_gib"])
            if r["feasible"]:
                fits[r["hardware"]].append(k)
    # memory is affine in mbs at a fixed layout and m (activations and logits scale with
    # it, model states do not): mem(k) = a + b k, so k_fit = (HBM - a) / b.  Not with block
    # recompute, which recomputes more layers as the micro-batch grows: no fit there.
    affine = row["recompute"] != "block" and len(mbs_list) > 1
    rows = []
    for h in hws:
        mh = mem[h.name]
        hbm = float(h.hbm_bytes) / GIB
        k = max(fits[h.name]) if fits[h.name] else np.nan
        if affine:
            b_gib = (mh[mbs_list[1]] - mh[mbs_list[0]]) / (mbs_list[1] - mbs_list[0])
            fit = (hbm - (mh[mbs_list[0]] - b_gib * mbs_list[0])) / b_gib
        else:
            fit = np.nan
        rows.append({"hardware": h.name, "hbm_gib": hbm, "micro_batches_per_step": m,
                     "max_mbs": k, "max_global_batch": dp * k * m if np.isfinite(k) else np.nan,
                     "mem_gib_at_max_mbs": mh.get(k, np.nan) if np.isfinite(k) else np.nan,
                     "mbs_fit_continuous": fit,
                     "free_gib_at_layout": hbm - mh.get(mbs0, float(row["mem_gib"])),
                     "mbs_tried": "/".join(map(str, mbs_list)),
                     "limit": (f"≥ {k} (largest tried)" if k == mbs_list[-1] else
                               f"mbs {mbs_list[mbs_list.index(int(k)) + 1]} needs "
                               f"{mh[mbs_list[mbs_list.index(int(k)) + 1]]:.1f} GiB") if np.isfinite(k) else
                     f"mbs {mbs_list[0]} needs {mh[mbs_list[0]]:.1f} GiB"})
    return pd.DataFrame(rows)


def run(d: dict, path: Path) -> Path:
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
                     **{f"from_{c}": float(b[c]) for c in BREAKDOWN},
                     **{f"to_same_layout_{c}": float(fx[c]) for c in BREAKDOWN})
            r["status"] = "ok" if fx["feasible"] else f"{src.name}'s layout does not fit on {t.name}"
            rows.append(r)
    require(bool(frames), str(path), "workload", "must admit at least one valid layout")
    full = pd.concat(frames, ignore_index=True)
    summary = pd.DataFrame(rows)
    head = pd.concat(heads, ignore_index=True) if heads else pd.DataFrame()
    run_s = time.perf_counter() - t0
    write_parquet(full, out / "sweep.parquet", index=False)
    write_csv(summary, out / "summary.csv", index=False)
    write_csv(head, out / "headroom.csv", index=False)
    plot(d, wl, src, targets, summary, head, full, bg, out)
    write_report(out, d, wl, src, targets, summary, head, bg, run_s, len(full))
    write_manifest(out, path, {"points": int(len(full)), "sweep_seconds": round(run_s, 2)})
    return out


def _title_wl(wl) -> str:
    return (f"{wl.model.name} training, seq {wl.seq_lens[0]}, global batch {wl.global_batches[0]}, "
            f"{PRECISION_NAMES[wl.precision]}")


def plot(d, wl, src, targets, summary, head, full, bg, out: Path) -> None:
    ok = summary.dropna(subset=["speedup_same_layout"])
    long = pd.concat([
        ok.assign(series=ok["to"] + ": " + src.name + "'s layout kept", speedup=ok["speedup_same_layout"]),
        ok.assign(series=ok["to"] + ": layout re-optimized", speedup=ok["speedup_reoptimized"])])
    long = long.sort_values("to", key=lambda s: s.map({t.name: i for i, t in enumerate(targets)}), kind="stable")
    grouped_bar_panels([(long, "")], "gpus", "series", "speedup", "number of GPUs",
                       f"step-time speedup over {src.name} (x)",
                       f"{_title_wl(wl)}:\nspeedup of each GPU over {src.name} at the same GPU count "
                       "(dashed: 1.0 = no gain)", out / "speedup.png", ref_line=1.0)
    if len(head):
        grouped_bar_panels([(head, "")], "gpus", "hardware", "max_global_batch", "number of GPUs",
                           "largest global batch that fits (sequences)",
                           f"{_title_wl(wl)}: batch headroom at {src.name}'s fastest layout\n"
                           "(TP/PP/DP/CP/vpp/recompute/ZeRO and micro-batches per step held; micro-batch size grown "
                           "in powers of two until HBM is full)", out / "batch_headroom.png", decimals=0)
    g = full[full["gpus"] == bg]
    okg = g[g["feasible"]]
    b = okg[okg["hardware"] == src.name].head(1)
    if len(b):
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
        breakdown_bars(pd.DataFrame(rows).reset_index(drop=True), labels,
                                    f"{_title_wl(wl)}, {bg} GPUs: where a training step's time goes",
                                    out / f"breakdown_{bg}gpus.png")


def write_report(out, d, wl, src, targets, summary, head, bg, run_s, n_points) -> None:
    t0 = targets[0]
    s0 = summary[summary["to"] == t0.name]
    hw_rows = []
    for h in [src] + targets:
        hw_rows.append({"GPU": h.name, "bf16 TFLOP/s": float(h.peak_bf16_flops_per_s) / 1e12,
                        "HBM TB/s": float(h.hbm_bw_bytes_per_s) / 1e12, "HBM GiB": float(h.hbm_bytes) / GIB,
                        "L2 MiB": float(h.l2_bytes) / 2**20, "NVLink GB/s": float(h.nvlink_bw_bytes_per_s) / 1e9,
                        "NIC GB/s": float(h.nic_bw_bytes_per_s) / 1e9, "gemm efficiency": float(h.eff_gemm)})
    tab = summary[["gpus", "to", "from_layout", "from_step_time_s", "to_step_time_same_layout_s",
                   "speedup_same_layout", "to_layout", "to_step_time_s", "speedup_reoptimized"]].rename(
        columns={"from_layout": f"{src.name} best layout", "from_step_time_s": f"{src.name} s",
                 "to_step_time_same_layout_s": "same layout s", "speedup_same_layout": "speedup (same layout)",
                 "to_layout": "re-optimized layout", "to_step_time_s": "re-optimized s",
                 "speedup_reoptimized": "speedup (re-optimized)"})
    for c in ("speedup (same layout)", "speedup (re-optimized)"):
        tab[c] = tab[c].map(lambda v: f"{v:.2f}x" if np.isfinite(v) else "–")
    # per-term ratios at the breakdown GPU count
    r = summary[(summary["gpus"] == bg) & (summary["to"] == t0.name)]
    terms = []
    if len(r):
        r = r.iloc[0]
        for c in BREAKDOWN:
            a, h = r[f"from_{c}"], r[f"to_same_layout_{c}"]
            if a > 1e-3 * r["from_step_time_s"] or h > 1e-3 * r["from_step_time_s"]:
                terms.append({"term": BREAKDOWN_LABELS[c], f"{src.name} s": a, f"{t0.name} s": h,
                              f"share of {src.name} step %": 100 * a / r["from_step_time_s"],
                              "faster by": (f"{a / h:.2f}x" if a > 0 and h > 0 else
                                            "newly exposed" if h > 0 else "hidden now")})
    terms = pd.DataFrame(terms)
    peak = float(t0.peak_bf16_flops_per_s) / float(src.peak_bf16_flops_per_s)
    eff = float(t0.eff_gemm) / float(src.eff_gemm)
    lines = [f"# {d['name']}: {d.get('description', '')}", "",
             f"Workload: **{wl.model.name}** training, sequence length {wl.seq_lens[0]}, global batch "
             f"{wl.global_batches[0]}, {PRECISION_NAMES[wl.precision]}, on {', '.join(map(str, wl.gpus))} GPUs. "
             f"Upgrade studied: **{src.name} → {t0.name}**"
             + (f"; {', '.join(t.name for t in targets[1:])} shown for context (same compute, more HBM)"
                if len(targets) > 1 else "") + f". {n_points:,} (layout x GPU) points in {run_s:.1f} s.", "",
             "## The GPUs", "", md_table(pd.DataFrame(hw_rows)), "",
             "## Speedup", "",
             f"- **same layout**: {src.name}'s fastest layout at that GPU count, run unchanged on the new GPU;",
             "- **re-optimized**: the new GPU's own fastest layout.", "", md_table(tab), "",
             f"{t0.name}: {span(s0['speedup_same_layout'])} at the same layout, {span(s0['speedup_reoptimized'])} "
             "re-optimized. ![speedup](speedup.png)", "",
             f"### Where the speedup comes from ({bg} GPUs, {src.name}'s layout on both)", "",
             md_table(terms) if len(terms) else "(no feasible layout at that GPU count)", "",
             f"The tensor peak grows {peak:.2f}x ({float(src.peak_bf16_flops_per_s) / 1e12:.0f} → "
             f"{float(t0.peak_bf16_flops_per_s) / 1e12:.0f} TFLOP/s) but the achieved GEMM efficiency constant goes "
             f"{float(src.eff_gemm):.2f} → {float(t0.eff_gemm):.2f} (`dse/spec/efficiency.py`), so compute-bound "
             f"GEMMs get ~{peak * eff:.2f}x faster; the memory-bound kernels follow HBM bandwidth "
             f"({float(t0.hbm_bw_bytes_per_s) / float(src.hbm_bw_bytes_per_s):.2f}x), TP traffic NVLink "
             f"({float(t0.nvlink_bw_bytes_per_s) / float(src.nvlink_bw_bytes_per_s):.2f}x) and the DP gradient "
             f"traffic the NIC ({float(t0.nic_bw_bytes_per_s) / float(src.nic_bw_bytes_per_s):.2f}x), and the "
             "pipeline bubble follows the per-stage compute. Communication that the faster compute no longer "
             "hides (DP reduce overlapped with a now shorter backward) becomes exposed, so the step speedup is "
             "below the compute ratio"
             + (", and it falls with the GPU count as communication takes a larger share. "
                if s0["speedup_same_layout"].is_monotonic_decreasing else ". ") +
             "Re-optimizing can win a little more by trading TP/PP/DP for the new compute-to-network ratio.", "",
             f"![breakdown](breakdown_{bg}gpus.png)", "",
             "## How much larger a global batch fits", "",
             "Definition: at the source GPU's fastest layout, every field but the micro-batch size fixed "
             "(TP, PP, DP, CP, vpp, recompute, ZeRO, SP) and the number of micro-batches per step m = B/(DP·mbs) "
             "held (so the pipeline schedule and its in-flight micro-batches are unchanged), grow the micro-batch "
             f"through {head['mbs_tried'].iloc[0] if len(head) else ''} "
             "until the memory model (`dse/train/memory.py`: weights, gradients, optimizer states, activations of "
             "min(m, PP) in-flight micro-batches, logits, allocator reserve) exceeds HBM; the largest global batch "
             "is then DP x mbs_max x m. (The largest global batch for which *some* layout fits is unbounded: "
             "gradient accumulation adds micro-batches without adding memory.)", "",
             md_table(head[["gpus", "hardware", "layout", "hbm_gib", "micro_batches_per_step", "max_mbs",
                            "max_global_batch", "mem_gib_at_max_mbs", "limit", "free_gib_at_layout",
                            "mbs_fit_continuous"]]) if len(head) else "", "",
             "`free_gib_at_layout`: HBM left at the source layout as run (its own mbs); `mbs_fit_continuous`: "
             "memory is affine in the micro-batch size at a fixed layout (activations and logits grow with it, "
             "model states do not), so HBM would hold this many sequences per micro-batch if any size were "
             "allowed — the finer-grained headroom.", ""]
    if len(head):
        h0 = summary[summary["to"] == t0.name]["batch_headroom_ratio"]
        cap = float(t0.hbm_bytes) / float(src.hbm_bytes)
        lines += [f"{t0.name} has {float(t0.hbm_bytes) / GIB:.2f} GiB against {float(src.hbm_bytes) / GIB:.2f} GiB "
                  f"({cap:.3f}x): memory per GPU at a given layout does not depend on the GPU's speed, so the "
                  f"upgrade fits a global batch {span(h0)} as large at the same layout"
                  + (" — no larger batch: the H100 SXM's extra speed comes with no extra capacity." if h0.max() <= 1.0
                     else ".")
                  + " What the faster GPU changes is the time per step, not what fits."]
        for t in targets[1:]:
            ht = summary[summary["to"] == t.name]["batch_headroom_ratio"]
            lines += ["", f"For contrast, {t.name} ({float(t.hbm_bytes) / GIB:.0f} GiB, same compute as {t0.name}) "
                      f"fits {span(ht)} the global batch at the same layout."]
        lines += ["", "![batch headroom](batch_headroom.png)", ""]
    lines += ["## Reproduce", "", f"`make study STUDY={d['name']}`; provenance in `manifest.json`; every point in "
              "`sweep.parquet`, the headroom search in `headroom.csv`.", ""]
    write_text(out / "report.md", "\n".join(lines))
