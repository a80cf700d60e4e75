"""Study plots.  Every plot: labelled axes with units, a legend where there is more than
one series, and a title naming what was held fixed."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dse.report.atomic import save_fig  # noqa: E402

BREAKDOWN_LABELS = {
    "compute_s": "compute", "recompute_s": "recompute", "tp_comm_s": "TP comm (exposed)",
    "cp_comm_s": "CP comm (exposed)", "ep_comm_s": "EP all-to-all", "pp_comm_s": "PP p2p (exposed)",
    "bubble_s": "pipeline bubble", "dp_comm_s": "DP comm (exposed)", "optimizer_s": "optimizer step",
}


def heatmap_tp_pp(df: pd.DataFrame, title: str, path: Path) -> None:
    """Best step time over (TP, PP), minimised over every other layout field.  Cells
    whose layouts all run out of memory say OOM; (TP, PP) pairs the GPU count cannot
    form say n/a.  The colour scale spans the decision range -- the best cell to 1.5x it
    (slower cells saturate, their numbers still printed) -- and the best cell is boxed."""
    ok = df[df["feasible"]]
    best = ok.groupby(["tp", "pp"])["step_time_s"].min().unstack("pp")
    tps = sorted(df["tp"].unique())
    pps = sorted(df["pp"].unique())
    best = best.reindex(index=tps, columns=pps)
    exists = df.groupby(["tp", "pp"]).size().unstack("pp").reindex(index=tps, columns=pps).notna()
    fig, ax = plt.subplots(figsize=(2.5 + 0.8 * len(pps), 1.6 + 0.6 * len(tps)))
    cmap = plt.get_cmap("viridis_r").with_extremes(bad="0.85")
    lo = np.nanmin(best.values) if np.isfinite(best.values).any() else 0.0
    hi = lo * 1.5 if lo > 0 else 1.0
    im = ax.imshow(np.ma.masked_invalid(best.values), cmap=cmap, aspect="auto", vmin=lo, vmax=hi)
    med = (lo + hi) / 2
    for i in range(len(tps)):
        for j in range(len(pps)):
            v = best.values[i, j]
            if np.isnan(v):
                label, color = ("OOM" if exists.values[i, j] else "n/a"), "k"
            else:
                label, color = f"{v:.1f}", ("w" if v > med else "k")
            ax.text(j, i, label, ha="center", va="center", fontsize=8, color=color)
    if np.isfinite(best.values).any():
        bi, bj = np.unravel_index(np.nanargmin(best.values), best.values.shape)
        ax.add_patch(plt.Rectangle((bj - 0.5, bi - 0.5), 1, 1, fill=False, ec="red", lw=2.2,
                                   label=f"fastest: TP{tps[bi]} PP{pps[bj]}, {best.values[bi, bj]:.1f} s"))
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), fontsize=7, frameon=False)
    ax.set_xticks(range(len(pps)), pps)
    ax.set_yticks(range(len(tps)), tps)
    ax.set_xlabel("pipeline-parallel degree PP")
    ax.set_ylabel("tensor-parallel degree TP")
    fig.colorbar(im, ax=ax, label="step time (s), scale: best to 1.5x best", extend="max")
    ax.set_title(title + "\n(each cell: best over DP, CP, micro-batch, vpp, recompute, ZeRO, SP)",
                 fontsize=10)
    keys = []
    if (~exists.values).any():
        keys.append("n/a: no valid layout with this TP x PP on this GPU count")
    if (exists.values & np.isnan(best.values)).any():
        keys.append("OOM: every layout with this TP x PP runs out of memory")
    if keys:
        fig.text(0.01, 0.01, "; ".join(keys), fontsize=7, ha="left", va="bottom")
    fig.tight_layout()
    save_fig(fig, path, dpi=130)
    plt.close(fig)


def grouped_bars(table: pd.DataFrame, x: str, series: str, value: str, ylabel: str, title: str,
                 path: Path, ref_line: float | None = None, annotate: bool = True,
                 ratio_axis: bool = False, marks: list | None = None, notes: list | None = None,
                 xlabel: str | None = None) -> None:
    """Bars of ``value`` grouped by ``x`` (categorical), one colour per ``series``.
    ``ratio_axis``: the y-axis starts just below the smallest ratio (not at 0), so
    differences near 1x are visible; ``marks``: ``(x value, y, label)`` reference points
    (e.g. a published figure) drawn as stars; ``notes``: ``(x value, series, text)``
    written upright in that bar's slot (e.g. why a bar is missing or low)."""
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
    for xv, sv, txt in notes or []:
        if xv in xs and sv in ss:
            pos = xs.index(xv) + (ss.index(sv) - (len(ss) - 1) / 2) * w
            ax.text(pos, 0.01, txt, rotation=90, ha="center", va="bottom", fontsize=6,
                    transform=ax.get_xaxis_transform(), color="0.15",
                    bbox={"boxstyle": "square,pad=0.15", "fc": "white", "ec": "0.6", "lw": 0.5})
    for xv, yv, lbl in marks or []:
        if xv in xs:
            ax.plot([xs.index(xv)], [yv], marker="*", ms=13, color="crimson", ls="none", label=lbl)
    if ratio_axis:
        vals = table[value].to_numpy(dtype=float)
        vals = vals[np.isfinite(vals)]
        tops = [yv for _, yv, _ in (marks or [])]
        if len(vals):
            lo = min(vals.min(), ref_line if ref_line is not None else vals.min())
            hi = max([vals.max()] + tops)
            ax.set_ylim(lo - 0.1 * (hi - lo + 0.05), hi + 0.12 * (hi - lo + 0.05))
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_xlim(-0.6, len(xs) - 0.4)
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_fig(fig, path, dpi=130)
    plt.close(fig)


def grouped_bar_panels(panels: list[tuple[pd.DataFrame, str]], x: str, series: str, value: str,
                       xlabel: str, ylabel: str, title: str, path: Path,
                       ref_line: float | None = None, missing: dict | None = None,
                       decimals: int = 2) -> None:
    """Panels of grouped bars stacked vertically (one per ``(table, subtitle)``) sharing
    the x categories, the y scale and one legend; one colour per ``series``, each bar
    labelled with its value.

    ``missing`` maps an ``x`` value to a short note drawn in that group of every panel
    where all its bars are NaN (e.g. "baseline: no layout fits")."""
    xs = list(dict.fromkeys(v for t, _ in panels for v in t[x]))
    ss = list(dict.fromkeys(v for t, _ in panels for v in t[series]))
    colors = plt.get_cmap("tab10").colors
    w = 0.8 / max(len(ss), 1)
    width = max(8.0, 0.3 * len(xs) * len(ss) + 2.0)
    fig, axes = plt.subplots(len(panels), 1, figsize=(width, 1.2 + 3.1 * len(panels)), sharey=True,
                             squeeze=False)
    finite = [t[value].to_numpy(dtype=float) for t, _ in panels]
    top = max([float(np.nanmax(v)) for v in finite if np.isfinite(v).any()] + [1.0])
    for ax, (table, subtitle) in zip(axes[:, 0], panels):
        for i, s in enumerate(ss):
            sub = table[table[series] == s].drop_duplicates(subset=[x]).set_index(x).reindex(xs)
            pos = np.arange(len(xs)) + (i - (len(ss) - 1) / 2) * w
            vals = sub[value].to_numpy(dtype=float)
            bars = ax.bar(pos, vals, w, label=str(s), color=colors[i % 10])
            for b, v in zip(bars, vals):
                if np.isfinite(v):
                    ax.text(b.get_x() + b.get_width() / 2, b.get_height() + 0.01 * top, f"{v:.{decimals}f}",
                            ha="center", va="bottom", fontsize=7, rotation=90)
        for j, xv in enumerate(xs):
            g = table[table[x] == xv][value].to_numpy(dtype=float)
            if missing and xv in missing and not np.isfinite(g).any():
                ax.text(j, 0.45 * top, missing[xv], ha="center", va="center", fontsize=8, color="0.25",
                        bbox={"boxstyle": "round", "fc": "0.93", "ec": "0.6"})
        if ref_line is not None:
            ax.axhline(ref_line, color="k", lw=0.9, ls="--")
        ax.set_xticks(range(len(xs)), [str(v) for v in xs])
        ax.set_xlim(-0.6, len(xs) - 0.4)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.set_title(subtitle, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        ax.set_ylim(0, top * 1.2)
    axes[-1, 0].set_xlabel(xlabel)
    axes[0, 0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_fig(fig, path, dpi=130, bbox_inches="tight")
    plt.close(fig)


def breakdown_bars(rows: pd.DataFrame, labels: list[str], title: str, path: Path,
                   xlabel: str = "time per training step (s)") -> None:
    """Stacked time breakdown (seconds per step) of the given rows, one horizontal bar
    per row, each bar's total printed at its end; the legend sits below the axes so it
    never covers a bar (for many or long rows)."""
    fig, ax = plt.subplots(figsize=(11, 1.9 + 0.42 * len(rows)))
    left = np.zeros(len(rows))
    ys = np.arange(len(rows))
    colors = plt.get_cmap("tab10").colors
    for i, (col, name) in enumerate(BREAKDOWN_LABELS.items()):
        v = rows[col].to_numpy(dtype=float)
        if np.nansum(v) <= 0:
            continue
        ax.barh(ys, v, left=left, color=colors[i % 10], label=name)
        left += np.nan_to_num(v)
    for y, t in zip(ys, left):
        ax.text(t, y, f" {t:.3g} s", va="center", fontsize=7)
    ax.set_xlim(0, left.max() * 1.12 if len(left) else 1)
    ax.set_yticks(ys, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    ax_h_in = fig.get_figheight() * ax.get_position().height
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.5 / ax_h_in), ncols=5, frameon=False)
    save_fig(fig, path, dpi=130, bbox_inches="tight")
    plt.close(fig)
