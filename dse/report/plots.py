"""Study plots.  Every plot: labelled axes with units, a legend where there is more than
one series, and a title naming what was held fixed."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

BREAKDOWN_LABELS = {
    "compute_s": "compute", "recompute_s": "recompute", "tp_comm_s": "TP comm (exposed)",
    "cp_comm_s": "CP comm (exposed)", "ep_comm_s": "EP all-to-all", "pp_comm_s": "PP p2p (exposed)",
    "bubble_s": "pipeline bubble", "dp_comm_s": "DP comm (exposed)", "optimizer_s": "optimizer step",
}


def heatmap_tp_pp(df: pd.DataFrame, title: str, path: Path) -> None:
    """Best step time over (TP, PP), minimised over every other layout field."""
    ok = df[df["feasible"]]
    best = ok.groupby(["tp", "pp"])["step_time_s"].min().unstack("pp")
    tps = sorted(df["tp"].unique())
    pps = sorted(df["pp"].unique())
    best = best.reindex(index=tps, columns=pps)
    fig, ax = plt.subplots(figsize=(1.0 + 0.75 * len(pps), 1.2 + 0.6 * len(tps)))
    im = ax.imshow(best.values, cmap="viridis_r", aspect="auto")
    for i in range(len(tps)):
        for j in range(len(pps)):
            v = best.values[i, j]
            ax.text(j, i, "OOM" if np.isnan(v) else f"{v:.1f}", ha="center", va="center",
                    fontsize=8, color="w" if np.isnan(v) or v > np.nanmedian(best.values) else "k")
    ax.set_xticks(range(len(pps)), pps)
    ax.set_yticks(range(len(tps)), tps)
    ax.set_xlabel("pipeline-parallel degree PP")
    ax.set_ylabel("tensor-parallel degree TP")
    fig.colorbar(im, ax=ax, label="step time (s), best over DP/CP/mbs/vpp/recompute/ZeRO")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def breakdown_bars(rows: pd.DataFrame, labels: list[str], title: str, path: Path) -> None:
    """Stacked time breakdown (seconds per step) of the given layouts."""
    fig, ax = plt.subplots(figsize=(9, 0.9 + 0.45 * len(rows)))
    left = np.zeros(len(rows))
    ys = np.arange(len(rows))
    colors = plt.get_cmap("tab10").colors
    for i, (col, name) in enumerate(BREAKDOWN_LABELS.items()):
        v = rows[col].to_numpy(dtype=float)
        if np.nansum(v) <= 0:
            continue
        ax.barh(ys, v, left=left, color=colors[i % 10], label=name)
        left += np.nan_to_num(v)
    ax.set_yticks(ys, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time per training step (s)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="lower right", ncols=2)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def grouped_bars(table: pd.DataFrame, x: str, series: str, value: str, ylabel: str, title: str,
                 path: Path, ref_line: float | None = None, annotate: bool = True) -> None:
    """Bars of ``value`` grouped by ``x`` (categorical), one colour per ``series``."""
    xs = list(dict.fromkeys(table[x]))
    ss = list(dict.fromkeys(table[series]))
    w = 0.8 / max(len(ss), 1)
    fig, ax = plt.subplots(figsize=(max(7, 0.9 * len(xs) * max(1, len(ss)) / 2), 4.2))
    for i, s in enumerate(ss):
        sub = table[table[series] == s].set_index(x).reindex(xs)
        pos = np.arange(len(xs)) + (i - (len(ss) - 1) / 2) * w
        bars = ax.bar(pos, sub[value].to_numpy(dtype=float), w, label=str(s))
        if annotate:
            for b, v in zip(bars, sub[value]):
                if np.isfinite(v):
                    ax.text(b.get_x() + b.get_width() / 2, b.get_height(), f"{v:.2f}",
                            ha="center", va="bottom", fontsize=6)
    if ref_line is not None:
        ax.axhline(ref_line, color="k", lw=0.8, ls="--")
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
