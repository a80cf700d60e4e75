"""Files of a layout study (dse/studies/layout.py) from its
:class:`~dse.report.results.LayoutResults`: ``sweep.parquet``, ``best.csv``, the heatmap,
breakdown, speedup and MFU plots, ``report.md`` and ``manifest.json``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dse.report.atomic import write_csv, write_parquet, write_text
from dse.report.layout_frameworks import section as framework_section
from dse.report.manifest import write_manifest
from dse.report.memory_limits import plot_note, sentence as memory_sentence
from dse.report.plots import BREAKDOWN_LABELS, breakdown_bars, grouped_bars, heatmap_tp_pp
from dse.report.results import LayoutResults

#: "compute dominates" the breakdown when compute holds at least this share of every
#: fastest layout's step
DOMINATES = 0.5


def write(res: LayoutResults) -> Path:
    out, wl, sel, bsel, summary = res.head.out, res.wl, res.heatmap_sel, res.breakdown_sel, res.summary
    write_parquet(res.full, out / "sweep.parquet", index=False)
    write_csv(summary, out / "best.csv", index=False)
    heatmap_tp_pp(res.heatmap, f"{wl.model.name} step time over (TP, PP): {sel['hardware']}, {sel['gpus']} GPUs,\n"
                  f"seq {sel['seq_len']}, global batch {sel['global_batch']}", out / "heatmap_tp_pp.png")
    breakdown_bars(res.breakdown, list(res.breakdown_labels),
                   f"{wl.model.name}: time breakdown of the fastest layouts and the ZeRO-3 DP "
                   f"baseline — {bsel['hardware']}, {bsel['gpus']} GPUs, seq {bsel['seq_len']}, "
                   f"global batch {bsel['global_batch']}", out / "breakdown.png")
    sp = summary.dropna(subset=["speedup_vs_zero3_dp"]).copy()
    sp["series"] = sp["hardware"] + ", seq " + sp["seq_len"].astype(str)
    grouped_bars(sp, "gpus", "series", "speedup_vs_zero3_dp", "speedup of best layout over ZeRO-3 DP (x)",
                 f"{wl.model.name}: best hybrid layout vs pure data parallel (ZeRO-3), global batch "
                 f"{wl.global_batches[0]} (bars only where ZeRO-3 DP fits)", out / "speedup_vs_zero3.png",
                 ref_line=1.0, ratio_axis=True, xlabel="number of GPUs",
                 marks=[(int(r["gpus"]), float(r["published_speedup"]),
                         f"published: {r['published_layout']} on {r['gpus']} x {r['hardware']}, "
                         f"{float(r['published_speedup']):.1f}x")
                        for _, r in res.published.drop_duplicates(["gpus", "hardware"]).iterrows()]
                 if len(res.published) else None)
    mfu_plot(res, out / "mfu.png")
    write_text(out / "report.md", report(res))
    write_manifest(out, res.head.study_file, {"points": int(len(res.full)), "sweep_seconds": round(res.sweep_s, 2)})
    return out


def mfu_plot(res: LayoutResults, path: Path) -> None:
    """MFU of the best layout per configuration; configurations where memory decides
    (nothing fits, or a low MFU) carry a note in their bar's slot with the numbers."""
    wl, summary = res.wl, res.summary
    lim = res.memory_limits if res.memory_limits is not None else pd.DataFrame()
    tput = summary[["hardware", "gpus", "seq_len", "mfu"]].copy()
    if len(lim):
        nofit = lim[lim["kind"] == "no layout fits"][["hardware", "gpus", "seq_len"]].assign(mfu=float("nan"))
        tput = pd.concat([tput, nofit], ignore_index=True)
    tput = tput.sort_values(["gpus", "hardware", "seq_len"], kind="stable")
    tput["series"] = tput["hardware"] + ", seq " + tput["seq_len"].astype(str)
    notes = [(int(r["gpus"]), f"{r['hardware']}, seq {r['seq_len']}", plot_note(r)) for _, r in lim.iterrows()]
    margin = f"{float(lim['margin'].iloc[0]):.0%}" if len(lim) else ""
    grouped_bars(tput, "gpus", "series", "mfu", "model FLOPs utilisation of the best layout",
                 f"{wl.model.name}: MFU of the fastest layout per GPU count, global batch {wl.global_batches[0]}"
                 + (f"\n(boxed notes: memory decides — least need vs HBM usable after the {margin} margin, "
                    "and what would run without the margin)" if notes else ""),
                 path, notes=notes, xlabel="number of GPUs")


def breakdown_sentence(res: LayoutResults) -> str:
    """What the breakdown plot shows, from its rows: "compute dominates" only when compute
    is at least DOMINATES of every fastest layout's step; the terms the layouts differ in
    are those whose spread across them exceeds 1 % of the fastest step."""
    rows = res.breakdown.reset_index(drop=True)
    top = rows[[not str(lbl).startswith("baseline:") for lbl in res.breakdown_labels]]
    if not len(top):
        return "no layout fits."
    step = top[list(BREAKDOWN_LABELS)].sum(axis=1)
    share = top["compute_s"] / step
    head = ("compute dominates" if (share >= DOMINATES).all() else
            f"compute is {100 * share.min():.0f}–{100 * share.max():.0f} % of the step")
    why = {"tp_comm_s": "exposed TP communication (TP beyond one NVLink domain is expensive)",
           "bubble_s": "pipeline bubble ((PP-1)/vpp of a micro-batch's stage time)",
           "recompute_s": "recompute"}
    spread = {c: float(top[c].max() - top[c].min()) for c in BREAKDOWN_LABELS if c != "compute_s"}
    differ = [why.get(c, BREAKDOWN_LABELS[c]) for c, v in spread.items() if v > 0.01 * float(step.min())]
    if set(differ) == set(why.values()):      # the three of the original text, in its order
        differ = list(why.values())
    if not differ:
        return head + "; the fastest layouts differ by less than 1 % of the step in every other term."
    tail = differ[0] if len(differ) == 1 else ", ".join(differ[:-1]) + ", and " + differ[-1]
    return f"{head}; the layouts differ in {tail}."


def _md(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        cells = []
        for c in cols:
            v = r[c]
            cells.append(f"{v:.3g}" if isinstance(v, float) else str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(res: LayoutResults) -> str:
    wl, summary, full, pub, sel, bsel = res.wl, res.summary, res.full, res.published, res.heatmap_sel, \
        res.breakdown_sel
    n_ok = int(full["feasible"].sum())
    s = summary.copy()
    tbl = s[["hardware", "gpus", "seq_len", "layout", "step_time_s", "tokens_per_s", "mfu", "mem_gib",
             "speedup_vs_zero3_dp"]].copy()
    tbl["tokens_per_s"] = tbl["tokens_per_s"].round(0)
    lines = [f"# {res.head.name}: {res.head.description}", "",
             f"Model **{wl.model.name}** ({wl.model.num_params() / 1e9:.1f} B parameters), global batch "
             f"{', '.join(map(str, wl.global_batches))} sequences, sequence length "
             f"{', '.join(map(str, wl.seq_lens))}, on {', '.join(h.name for h in wl.hardware)} at "
             f"{', '.join(map(str, wl.gpus))} GPUs.",
             f"The sweep evaluated **{len(full):,}** (layout x hardware) points, {n_ok:,} of which fit in "
             "memory (run time in `manifest.json`). Every point is in `sweep.parquet` "
             "with its status; the best layout per configuration is in `best.csv`.", "",
             "## Fastest layout per configuration", "",
             "Layout notation: TP/PP/DP/CP degrees, micro-batch size, virtual stages (vpp), recompute mode, "
             "ZeRO stage, SP = sequence parallelism. `speedup_vs_zero3_dp` is the best layout's "
             "speed over the best pure data-parallel ZeRO-3 layout (blank where ZeRO-3 DP does not fit).", "",
             _md(tbl), ""]
    if len(pub):
        lines += ["## Against the published 32-GPU case", "",
                  "The published write-up trains Llama3-70B on 32 A100-80GB and reports the hybrid layout "
                  "below at the given throughput ratio over pure data parallelism (ZeRO-3).", "",
                  _md(pub), "",
                  "The write-up held its micro-batch, recompute and framework settings fixed; our layouts "
                  "are searched over all of them. The table below repeats the case under every framework "
                  "profile and names the step-time term that makes the difference.", ""]
        lines += framework_section(res.frameworks)
    lim = res.memory_limits
    if lim is not None and len(lim):
        lines += ["## Where memory decides", "",
                  "Configurations with no layout that fits, or whose best layout's MFU is below "
                  f"{float(lim['low_mfu_frac'].iloc[0]):.2f} of its GPU's median (annotated on the MFU plot):", "",
                  *[memory_sentence(r) for _, r in lim.iterrows()], ""]
    lines += ["## Plots", "",
              "![heatmap](heatmap_tp_pp.png)", "",
              f"Step time over (TP, PP) at {sel['hardware']}, {sel['gpus']} GPUs, seq {sel['seq_len']}: each cell "
              "is the best over all other fields; OOM cells have no layout that fits in memory.", "",
              "![breakdown](breakdown.png)", "",
              f"Where the time goes for the fastest layouts at {bsel['hardware']}, {bsel['gpus']} GPUs, seq "
              f"{bsel['seq_len']}: " + breakdown_sentence(res), "",
              "![speedup](speedup_vs_zero3.png)", "", "![mfu](mfu.png)", "",
              "## How to read this", "",
              "- Step time = micro-batches x heaviest-stage time + bubble + exposed PP/DP communication + "
              "optimizer step (see `dse/train/step.py` for the formulas and their sources).",
              "- Efficiency constants are global per GPU generation (`dse/spec/efficiency.py`).",
              "- Reproduce: `make study STUDY=" + res.head.name + "`; provenance in `manifest.json`.", ""]
    return "\n".join(lines)
