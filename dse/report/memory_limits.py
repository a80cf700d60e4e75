"""Report text for the memory-limited configurations of a layout study
(:func:`dse.studies.layout_memory.memory_limits`): the note drawn on the MFU plot and
one report sentence each, both from the numbers of the row."""

from __future__ import annotations

import pandas as pd


def plot_note(r) -> str:
    """The short note drawn on the MFU plot for one memory-limited configuration."""
    if r["kind"] == "low MFU":
        return (f"MFU {r['best_mfu']:.2f}: {r['best_recompute']} recompute, "
                f"{r['best_mem_gib']:.1f}/{r['usable_gib']:.1f} GiB")
    s = f"no fit: needs ≥{r['least_mem_gib']:.1f} > {r['usable_gib']:.1f} GiB"
    if isinstance(r.get("no_margin_layout"), str):
        s += f"\n(no margin: {r['no_margin_recompute']} recompute, MFU {r['no_margin_mfu']:.2f})"
    return s


def sentence(r) -> str:
    """One report sentence per memory-limited configuration, from its numbers."""
    where = f"{r['gpus']} x {r['hardware']}, seq {r['seq_len']}"
    if r["kind"] == "low MFU":
        return (f"- **{where}**: the best layout {r['best_layout']} reaches MFU {r['best_mfu']:.2f} against a "
                f"median {r['series_median_mfu']:.2f} over this GPU's other counts; it needs "
                f"{r['best_mem_gib']:.1f} GiB of {r['usable_gib']:.1f} GiB usable and runs "
                f"{r['best_recompute']} recompute.")
    s = (f"- **{where}**: no layout fits. The least memory any layout needs is {r['least_mem_gib']:.1f} GiB per "
         f"GPU ({r['least_mem_layout']}), against {r['usable_gib']:.2f} GiB usable ({r['hbm_gib']:.2f} GiB HBM "
         f"less the {r['margin']:.0%} safety margin)")
    if isinstance(r.get("no_margin_layout"), str):
        s += (f". It fits the raw HBM by {r['hbm_gib'] - r['least_mem_gib']:.2f} GiB: without the margin "
              f"{int(r['no_margin_fitting'])} layout(s) fit, the fastest {r['no_margin_layout']} at "
              f"{r['no_margin_mem_gib']:.2f} GiB, {r['no_margin_step_time_s']:.1f} s per step, MFU "
              f"{r['no_margin_mfu']:.2f}: the memory cliff" + (
                  f" ({r['no_margin_recompute']} recompute is what lets it fit)"
                  if r["no_margin_recompute"] in ("full", "block") else ""))
    elif r["least_mem_gib"] > r["hbm_gib"]:
        s += f"; even the raw HBM is {r['least_mem_gib'] - r['hbm_gib']:.1f} GiB short"
    return s + "."


def note_positions(limits: pd.DataFrame) -> list[tuple[int, str, str]]:
    """``(gpus, series, note)`` for :func:`dse.report.plots.grouped_bars`' ``notes``."""
    if limits is None or not len(limits):
        return []
    return [(int(r["gpus"]), f"{r['hardware']}, seq {r['seq_len']}", plot_note(r)) for _, r in limits.iterrows()]
