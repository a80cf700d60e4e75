"""The report section "pure ZeRO-3 vs the best hybrid, per framework profile" of a layout
study (rows from :func:`dse.studies.layout_frameworks.framework_table`): a table and
sentences computed from its numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dse.report.markdown import md_table
from dse.report.plots import BREAKDOWN_LABELS


def _names(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _rng(v, sign: bool = True) -> str:
    f = "{:+.1f}" if sign else "{:.1f}"
    lo, hi = f.format(min(v)), f.format(max(v))
    return lo if lo == hi else f"{lo} to {hi}"


def table(rows: pd.DataFrame) -> pd.DataFrame:
    ok = rows[rows["status"] == "ok"]
    t = pd.DataFrame({
        "framework": ok["framework"], "seq": ok["seq_len"],
        "pure ZeRO-3 layout": ok["zero3_layout"], "ZeRO-3 s": ok["zero3_step_time_s"],
        "best hybrid layout": ok["hybrid_layout"], "hybrid s": ok["hybrid_step_time_s"],
        "ratio": ok["ratio"].map(lambda v: f"{v:.3f}x"),
        "published": ok["published_ratio"].map(lambda v: f"{v:.2g}x"),
        "gap s": ok["gap_s"],
        "largest term of the gap": [f"{BREAKDOWN_LABELS[c]} {d:+.1f} s" for c, d in
                                    zip(ok["top_term"], ok["top_term_delta_s"])],
        "hybrid pays back": [f"{BREAKDOWN_LABELS[c]} {d:+.1f} s" if d < 0 else "–" for c, d in
                             zip(ok["offset_term"], ok["offset_term_delta_s"])],
        "exposed DP comm ZeRO-3 / hybrid s": [f"{a:.1f} / {b:.1f}" for a, b in
                                              zip(ok["zero3_dp_comm_s"], ok["hybrid_dp_comm_s"])],
        "recompute ZeRO-3 / hybrid s": [f"{a:.1f} / {b:.1f}" for a, b in
                                        zip(ok["zero3_recompute_s"], ok["hybrid_recompute_s"])]})
    return t


def sentences(rows: pd.DataFrame) -> list[str]:
    """One paragraph per published case, every figure from ``rows``."""
    out = []
    for (hw, gpus, seq), g in rows.groupby(["hardware", "gpus", "seq_len"], sort=True):
        bad = g[g["status"] != "ok"]
        g = g[g["status"] == "ok"]
        if not len(g):
            out.append(f"{gpus} x {hw}, seq {seq}: {'; '.join(bad['framework'] + ': ' + bad['status'])}.")
            continue
        lo, hi = g.loc[g["ratio"].idxmin()], g.loc[g["ratio"].idxmax()]
        pub = float(g["published_ratio"].iloc[0])
        s = (f"**{gpus} x {hw}, seq {seq}**: pure ZeRO-3 is {lo['ratio']:.2f}x ({lo['framework']}) to "
             f"{hi['ratio']:.2f}x ({hi['framework']}) slower than the best hybrid layout, against the "
             f"published {pub:.2g}x.")
        for term, tg in g.groupby("top_term", sort=False):
            fws = list(tg["framework"])
            d, gap = tg["top_term_delta_s"].to_numpy(dtype=float), tg["gap_s"].to_numpy(dtype=float)
            s += (f" Under {_names(fws)} the term that differs most is {BREAKDOWN_LABELS[term]} "
                  f"({_rng(d)} s per step against a total gap of {_rng(gap)} s")
            off = tg[tg["offset_term_delta_s"] < 0]
            if len(off):
                labels = sorted(set(BREAKDOWN_LABELS[c] for c in off["offset_term"]))
                s += (f"; the hybrid gives part of it back in {' / '.join(labels)}, "
                      f"{_rng(-off['offset_term_delta_s'].to_numpy(dtype=float), sign=False)} s")
            s += ")"
            if term == "recompute_s":
                modes = sorted(set(tg["zero3_recompute"]))
                hmodes = sorted(set(tg["hybrid_recompute"]))
                s += (f": with TP = PP = CP = 1 every GPU holds a whole micro-batch's activations, and the "
                      f"fastest pure ZeRO-3 layout that fits runs {'/'.join(modes)} recompute, while the hybrid "
                      f"runs {'/'.join(hmodes)}")
            s += "."
        dp = g["delta_dp_comm_s"].to_numpy(dtype=float)
        s += (f" Exposed DP communication (the ZeRO-3 gathers and reduce-scatters left uncovered) differs by "
              f"{dp.min():+.1f} to {dp.max():+.1f} s per step across the profiles"
              if np.ptp(dp) >= 0.05 else f" Exposed DP communication differs by {dp[0]:+.1f} s per step")
        need = g["needed_extra_s"].to_numpy(dtype=float)
        zt = g["zero3_step_time_s"].to_numpy(dtype=float)
        s += (f"; for the published {pub:.2g}x the pure ZeRO-3 step would have to be {need.min():.0f}–"
              f"{need.max():.0f} s ({100 * (need / zt).min():.0f}–{100 * (need / zt).max():.0f} %) longer than "
              "any profile predicts." if np.isfinite(need).all() and (need > 0).all() else ".")
        if len(bad):
            s += " " + "; ".join(bad["framework"] + ": " + bad["status"]) + "."
        out.append(s)
    return out


def section(rows: pd.DataFrame | None) -> list[str]:
    """Markdown lines of the section (none without published cases)."""
    if rows is None or not len(rows):
        return []
    return ["### Pure ZeRO-3 against the best hybrid, per framework profile", "",
            "The same case under each framework profile of `dse/spec/frameworks.py` (gather/prefetch depth, "
            "bucket sizes, gradient-reduce precision, memory accounting), each with its own sweep. Pure ZeRO-3 = "
            "the fastest feasible TP = PP = CP = 1, ZeRO-3 layout (best micro-batch and recompute); best hybrid = "
            "the fastest feasible layout the framework can run (DeepSpeed's pipeline engine rejects ZeRO-2/3, "
            "so there PP > 1 implies ZeRO <= 1). Gap = ZeRO-3 minus hybrid step time; the largest term of the "
            "gap and what the hybrid pays back are the breakdown terms (ZeRO-3 minus hybrid, seconds per "
            "step) with the largest and the most negative difference.", "",
            md_table(table(rows)), "", *[p + "\n" for p in sentences(rows)]]
