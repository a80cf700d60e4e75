"""Pareto plots of a co-design search: one panel per pair of objectives, every trial, the
front (non-dominated over *all* the study's objectives), and the reference designs."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dse.report.atomic import save_fig  # noqa: E402

LABELS = {"step_time_s": "training step time (s)", "cluster_cost": "cluster cost proxy (study units, all GPUs)"}


def pareto_plot(trials: pd.DataFrame, refs: pd.DataFrame, title: str, path: Path,
                objectives=("step_time_s", "cluster_cost"), labels: dict | None = None) -> None:
    labels = {**LABELS, **(labels or {})}
    pairs = list(combinations(objectives, 2))
    fig, axes = plt.subplots(1, len(pairs), figsize=(6.2 * len(pairs) + 1.8, 5.2), squeeze=False)
    front = trials[trials["pareto"]]
    markers = "s^Dv<>pP*X"
    for ax, (yo, xo) in zip(axes[0], pairs):
        ax.scatter(trials[xo], trials[yo], s=10, c="0.75", label="trial (its best layout)")
        f = front.sort_values(xo)
        ax.scatter(f[xo], f[yo], s=22, color="C3", zorder=4,
                   label=f"Pareto front over all {len(objectives)} objectives")
        if len(objectives) == 2:
            ax.plot(f[xo], f[yo], "-", color="C3", lw=1)
        for i, (_, r) in enumerate(refs.iterrows()):
            if np.isfinite(r.get(yo, np.nan)) and np.isfinite(r.get(xo, np.nan)):
                ax.scatter(r[xo], r[yo], marker=markers[i % len(markers)], s=60, edgecolor="k", zorder=5,
                           label=str(r["name"]))
        if yo == "step_time_s":
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%.1f"))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%.1f"))
        ax.set_xlabel(labels.get(xo, xo))
        ax.set_ylabel(labels.get(yo, yo) + (" (log scale)" if yo == "step_time_s" else ""))
        ax.grid(True, which="both", alpha=0.3)
    h, lab = axes[0, 0].get_legend_handles_labels()
    fig.legend(h, lab, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 0.92), frameon=False)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    save_fig(fig, path, dpi=130, bbox_inches="tight")
    plt.close(fig)
