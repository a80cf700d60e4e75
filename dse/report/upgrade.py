"""Files of an upgrade study (dse/studies/upgrade.py) from its
:class:`~dse.report.results.UpgradeResults`: sweep.parquet, summary.csv, headroom.csv,
speedup.png, batch_headroom.png, breakdown_<gpus>gpus.png, report.md, manifest.json.

Explanations in ``report.md`` (communication newly exposed, re-optimizing wins, no
larger batch, same compute) are stated only where the results show them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dse.report.atomic import write_csv, write_parquet, write_text
from dse.report.headroom_plot import headroom_plot
from dse.report.manifest import write_manifest
from dse.report.markdown import md_table, span
from dse.report.plots import BREAKDOWN_LABELS, breakdown_bars, grouped_bar_panels
from dse.report.results import UpgradeResults
from dse.spec.hardware import GIB
from dse.spec.layout import PRECISION_NAMES

BREAKDOWN = list(BREAKDOWN_LABELS)
#: comm terms of the breakdown: "newly exposed" communication is one of these growing
COMM = ("tp_comm_s", "cp_comm_s", "ep_comm_s", "pp_comm_s", "dp_comm_s")
#: re-optimizing "wins" when it beats the same layout by more than this (relative)
REOPT_WIN = 0.005


def write(res: UpgradeResults) -> Path:
    out = res.head.out
    write_parquet(res.full, out / "sweep.parquet", index=False)
    write_csv(res.summary, out / "summary.csv", index=False)
    write_csv(res.headroom, out / "headroom.csv", index=False)
    plot(res, out)
    write_text(out / "report.md", report(res))
    write_manifest(out, res.head.study_file, {"points": int(len(res.full)), "sweep_seconds": round(res.run_s, 2)})
    return out


def _title_wl(wl) -> str:
    return (f"{wl.model.name} training, seq {wl.seq_lens[0]}, global batch {wl.global_batches[0]}, "
            f"{PRECISION_NAMES[wl.precision]}")


def plot(res: UpgradeResults, out: Path) -> None:
    wl, src, targets, summary, head, bg = res.wl, res.src, res.targets, res.summary, res.headroom, res.breakdown_gpus
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
        headroom_plot(head, f"{_title_wl(wl)}: batch headroom at {src.name}'s fastest layout\n"
                      "(TP/PP/DP/CP/vpp/ZeRO and micro-batches per step held; micro-batch size grown in powers of "
                      "two until HBM is full, with the recompute mode free)", out / "batch_headroom.png")
    if len(res.breakdown_labels):
        breakdown_bars(res.breakdown, list(res.breakdown_labels),
                       f"{_title_wl(wl)}, {bg} GPUs: where a training step's time goes",
                       out / f"breakdown_{bg}gpus.png")


def _same_compute(a, b) -> bool:
    return (float(a.peak_bf16_flops_per_s) == float(b.peak_bf16_flops_per_s)
            and float(a.eff_gemm) == float(b.eff_gemm))


def context_note(t0, others) -> str:
    """How the context GPUs differ from the studied target, from their specs."""
    if not others:
        return ""
    same = all(_same_compute(t, t0) for t in others)
    more = all(float(t.hbm_bytes) > float(t0.hbm_bytes) for t in others)
    if same and more:
        what = "same compute, more HBM"
    else:
        what = "; ".join(f"{t.name}: bf16 peak {float(t.peak_bf16_flops_per_s) / float(t0.peak_bf16_flops_per_s):.2f}x"
                         f", HBM {float(t.hbm_bytes) / float(t0.hbm_bytes):.2f}x {t0.name}'s" for t in others)
    return f"; {', '.join(t.name for t in others)} shown for context ({what})"


def exposure_sentence(s0: pd.DataFrame, r, compute_ratio: float) -> str:
    """Why the step speedup is (or is not) below the compute ratio: "newly exposed
    communication" only when a communication term at the same layout grows."""
    sp = s0["speedup_same_layout"].to_numpy(dtype=float)
    sp = sp[np.isfinite(sp)]
    if not len(sp):
        return ""
    grew = [BREAKDOWN_LABELS[c] for c in COMM if r is not None and r[f"to_same_layout_{c}"] > r[f"from_{c}"] * (1 + 1e-9)
            and r[f"to_same_layout_{c}"] > 0]
    if sp.max() < compute_ratio and grew:
        s = ("Communication that the faster compute no longer hides (DP reduce overlapped with a now shorter "
             "backward) becomes exposed, so the step speedup is below the compute ratio"
             if grew == [BREAKDOWN_LABELS["dp_comm_s"]] else
             f"Communication that the faster compute no longer hides ({', '.join(grew)} grow at the same layout) "
             "becomes exposed, so the step speedup is below the compute ratio")
    elif sp.max() < compute_ratio:
        s = ("No exposed communication term grows at the same layout, but communication and the other terms "
             "speed up less than the GEMMs, so the step speedup is below the compute ratio")
    else:
        s = f"The step speedup reaches the compute ratio (up to {sp.max():.2f}x)"
    return s + (", and it falls with the GPU count as communication takes a larger share. "
                if s0["speedup_same_layout"].is_monotonic_decreasing else ". ")


def reopt_sentence(s0: pd.DataFrame) -> str:
    gain = (s0["speedup_reoptimized"] / s0["speedup_same_layout"]).to_numpy(dtype=float)
    gain = gain[np.isfinite(gain)]
    if len(gain) and gain.max() > 1 + REOPT_WIN:
        return "Re-optimizing can win a little more by trading TP/PP/DP for the new compute-to-network ratio."
    if len(gain):
        return (f"Re-optimizing wins nothing measurable here (at most {100 * (gain.max() - 1):.1f} % over the "
                "same layout).")
    return ""


def headroom_sentence(t0, src, h0: pd.Series, s0: pd.DataFrame) -> str:
    cap = float(t0.hbm_bytes) / float(src.hbm_bytes)
    s = (f"{t0.name} has {float(t0.hbm_bytes) / GIB:.2f} GiB against {float(src.hbm_bytes) / GIB:.2f} GiB "
         f"({cap:.3f}x): memory per GPU at a given layout does not depend on the GPU's speed, so the "
         f"upgrade fits a global batch {span(h0)} as large at the same layout")
    faster = bool((s0["speedup_same_layout"] > 1).any())
    if h0.max() <= 1.0 and cap <= 1.0 and faster:
        s += f" — no larger batch: the {t0.name}'s extra speed comes with no extra capacity."
    elif h0.max() <= 1.0:
        s += " — no larger batch."
    else:
        s += "."
    return s + " What the faster GPU changes is the time per step, not what fits."


def recompute_sentence(head: pd.DataFrame) -> str:
    """What freeing the recompute mode buys per GPU: the batch gain, the mode, and the
    time per sequence it costs (from the headroom table)."""
    parts = []
    for h, g in head.groupby("hardware", sort=False):
        gain = (g["max_global_batch_any_recompute"] / g["max_global_batch"]).to_numpy(dtype=float)
        cost = (g["s_per_seq_at_max_any_recompute"] / g["s_per_seq_at_layout"] - 1).to_numpy(dtype=float)
        modes = sorted(set(g["recompute_for_max"]) - {""})
        own = "/".join(sorted(set(g["recompute"])))
        if not len(gain) or not np.isfinite(gain).any() or np.nanmax(gain) <= 1.0:
            parts.append(f"on {h} no recompute mode fits a larger batch than {own}")
            continue
        c = cost[np.isfinite(cost)]
        parts.append(f"on {h} {'/'.join(modes)} recompute fits {span(gain)} the global batch of {own}"
                     + (f", at {100 * c.min():+.0f} to {100 * c.max():+.0f} % time per sequence" if len(c) else ""))
    return ("With the recompute mode free (everything else held): " + "; ".join(parts) + ". The batch headroom "
            "at a fixed layout is bought with recompute, not with the GPU's speed.")


def report(res: UpgradeResults) -> str:
    wl, src, targets, summary, head, bg = res.wl, res.src, list(res.targets), res.summary, res.headroom, \
        res.breakdown_gpus
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
    r = r.iloc[0] if len(r) else None
    if r is not None:
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
    lines = [f"# {res.head.name}: {res.head.description}", "",
             f"Workload: **{wl.model.name}** training, sequence length {wl.seq_lens[0]}, global batch "
             f"{wl.global_batches[0]}, {PRECISION_NAMES[wl.precision]}, on {', '.join(map(str, wl.gpus))} GPUs. "
             f"Upgrade studied: **{src.name} → {t0.name}**" + context_note(t0, targets[1:])
             + f". {len(res.full):,} (layout x GPU) points (run time in `manifest.json`).", "",
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
             "pipeline bubble follows the per-stage compute. " + exposure_sentence(s0, r, peak * eff)
             + reopt_sentence(s0), "",
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
                            "mbs_fit_continuous", "recompute_for_max", "max_global_batch_any_recompute",
                            "mem_gib_at_max_any_recompute"]]) if len(head) else "", "",
             "`free_gib_at_layout`: HBM left at the source layout as run (its own mbs); `mbs_fit_continuous`: "
             "memory is affine in the micro-batch size at a fixed layout (activations and logits grow with it, "
             "model states do not), so HBM would hold this many sequences per micro-batch if any size were "
             "allowed — the finer-grained headroom. `recompute_for_max`, `max_global_batch_any_recompute`: the same "
             "search with the recompute mode free (none, selective, full; the least recompute among ties) — the "
             "recompute that buys the larger batch, drawn as the bar's hatch in the plot.", ""]
    if len(head):
        h0 = summary[summary["to"] == t0.name]["batch_headroom_ratio"]
        lines += [headroom_sentence(t0, src, h0, s0)]
        for t in targets[1:]:
            ht = summary[summary["to"] == t.name]["batch_headroom_ratio"]
            same = (f", same compute as {t0.name}" if _same_compute(t, t0) else
                    f", bf16 peak {float(t.peak_bf16_flops_per_s) / float(t0.peak_bf16_flops_per_s):.2f}x "
                    f"{t0.name}'s")
            lines += ["", f"For contrast, {t.name} ({float(t.hbm_bytes) / GIB:.0f} GiB{same}) "
                      f"fits {span(ht)} the global batch at the same layout."]
        lines += ["", recompute_sentence(head)]
        lines += ["", "![batch headroom](batch_headroom.png)", ""]
    lines += ["## Reproduce", "", f"`make study STUDY={res.head.name}`; provenance in `manifest.json`; every point in "
              "`sweep.parquet`, the headroom search in `headroom.csv`.", ""]
    return "\n".join(lines)
