"""Pareto plot of a co-design search: every trial, the front, and reference designs."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from dse.report.atomic import save_fig  # noqa: E402


def pareto_plot(trials: pd.DataFrame, refs: pd.DataFrame, title: str, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(8, 5.5))
    ax.scatter(trials["cluster_cost"], trials["step_time_s"], s=12, c="0.7", label="trial (best layout)")
    front = trials[trials["pareto"]].sort_values("cluster_cost")
    ax.plot(front["cluster_cost"], front["step_time_s"], "o-", color="C3", ms=5, label="Pareto front")
    markers = "s^Dv<>pP*X"
    for i, (_, r) in enumerate(refs.iterrows()):
        ax.scatter(r["cluster_cost"], r["step_time_s"], marker=markers[i % len(markers)], s=70,
                   edgecolor="k", zorder=5, label=str(r["name"]))
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%.1f"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%.1f"))
    ax.set_xlabel("cluster cost proxy (study-defined units, all GPUs)")
    ax.set_ylabel("training step time (s, log scale)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    save_fig(fig, path, dpi=130)
    plt.close(fig)
