"""The `dse compare` plot: four panels over the GPU count (log2 axis), one line per
hardware, each point the best feasible layout of its cell (:mod:`dse.compare`): step
time, tokens/s, cost (or GPU-hours) and energy per million tokens.  Cells where nothing
fits are marked with an x on the bottom edge of each panel."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402
import pandas as pd  # noqa: E402

from dse.report.atomic import save_fig  # noqa: E402


def compare_plot(df: pd.DataFrame, title: str, path: Path) -> Path:
    cost = ("usd_per_mtok", "cost per million tokens [USD]") if "usd_per_mtok" in df else \
        ("gpu_hours_per_mtok", "GPU-hours per million tokens\n(no --gpu-hour-usd given)")
    panels = [("step_time_s", "step time [s]", True),
              ("tokens_per_s", "throughput [tokens/s, whole job]", True),
              (cost[0], cost[1], False),
              ("energy_kwh_per_mtok", "energy per million tokens [kWh]", False)]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), sharex=True)
    gpus = sorted(df["gpus"].unique())
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    hws = list(dict.fromkeys(df["hardware"]))
    for ax, (col, label, log) in zip(axes.flat, panels):
        for i, hw in enumerate(hws):
            sub = df[df["hardware"] == hw].sort_values("gpus")
            ok = sub[sub["status"] == "ok"]
            c = colors[i % len(colors)]
            if col in ok:
                ax.plot(ok["gpus"], ok[col], "o-", color=c, label=hw)
            bad = sub[sub["status"] != "ok"]
            if len(bad):            # side by side, so every hardware's x shows
                shift = 2.0 ** (0.06 * (i - (len(hws) - 1) / 2))
                ax.plot(bad["gpus"] * shift, np.zeros(len(bad)), "x", color=c, ms=9, mew=2,
                        clip_on=False, transform=ax.get_xaxis_transform())
        ax.set_xscale("log", base=2)
        if log:
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.6g}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_xticks(gpus, [str(g) for g in gpus])
    for ax in axes[1]:
        ax.set_xlabel("GPUs")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if (df["status"] != "ok").any():
        handles.append(plt.Line2D([], [], marker="x", ls="", color="0.3", mew=2))
        labels.append("no layout fits (x on the axis)")
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), fontsize=9,
               bbox_to_anchor=(0.5, 0.0))
    fig.suptitle(title, fontsize=10)
    fig.text(0.5, 0.055, "energy: GPU power = idle + (TDP - idle) x utilization "
             "(dse/cost/energy.py); each point is the best layout of its cell",
             ha="center", fontsize=8, color="0.3")
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    save_fig(fig, Path(path), dpi=120)
    plt.close(fig)
    return Path(path)
