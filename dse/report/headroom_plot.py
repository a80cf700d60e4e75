"""Batch-headroom plot of an upgrade study (dse/studies/upgrade.py ``headroom``): per GPU
count and GPU, the largest global batch that fits at the source GPU's fastest layout,
with the recompute mode that buys it drawn on the bar (hatch and label) and the batch
that fits with the layout's own recompute mode as a black tick."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dse.report.atomic import save_fig  # noqa: E402

HATCH = {"none": "", "selective": "..", "full": "xx", "block": "//"}


def headroom_plot(head: pd.DataFrame, title: str, path: Path) -> None:
    xs = sorted(head["gpus"].unique())
    hws = list(dict.fromkeys(head["hardware"]))
    colors = plt.get_cmap("tab10").colors
    w = 0.8 / max(len(hws), 1)
    fig, ax = plt.subplots(figsize=(max(8.0, 0.5 * len(xs) * len(hws) + 3.0), 4.8))
    for i, h in enumerate(hws):
        sub = head[head["hardware"] == h].set_index("gpus").reindex(xs)
        pos = np.arange(len(xs)) + (i - (len(hws) - 1) / 2) * w
        v_any = sub["max_global_batch_any_recompute"].to_numpy(dtype=float)
        v_own = sub["max_global_batch"].to_numpy(dtype=float)
        for p, va, vo, mode in zip(pos, v_any, v_own, sub["recompute_for_max"].fillna("")):
            if np.isfinite(va):
                ax.bar(p, va, w, color=colors[i % 10], hatch=HATCH.get(mode, ""), edgecolor="0.2", lw=0.5)
                ax.text(p, va * 1.04, f"{int(va)}\n{mode}", ha="center", va="bottom", fontsize=6)
            if np.isfinite(vo):
                ax.plot([p - w / 2, p + w / 2], [vo, vo], color="k", lw=2.0)
    ax.set_yscale("log", base=2)
    vals = head[["max_global_batch", "max_global_batch_any_recompute"]].to_numpy(dtype=float)
    vals = vals[np.isfinite(vals)]
    if len(vals):
        ax.set_ylim(vals.min() / 2.5, vals.max() * 4)
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_xlim(-0.6, len(xs) - 0.4)
    ax.set_xlabel("number of GPUs")
    ax.set_ylabel("largest global batch that fits (sequences, log scale)")
    ax.set_title(title, fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    own = sorted(set(head["recompute"]))
    modes = [m for m in HATCH if m in set(head["recompute_for_max"])]
    handles = ([plt.Rectangle((0, 0), 1, 1, color=colors[i % 10]) for i in range(len(hws))]
               + [plt.Rectangle((0, 0), 1, 1, fc="white", ec="0.2", hatch=HATCH[m]) for m in modes]
               + [plt.Line2D([], [], color="k", lw=2.0)])
    labels = (hws + [f"bar: recompute {m} buys it" for m in modes]
              + [f"tick: recompute held at the layout's ({'/'.join(own)})"])
    ax.legend(handles, labels, fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    save_fig(fig, path, dpi=130, bbox_inches="tight")
    plt.close(fig)
