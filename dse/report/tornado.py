"""Tornado chart of elasticities (:mod:`dse.sensitivity`): one horizontal bar per knob,
sorted by |elasticity|, the AD value as the bar and the +-1 % central finite difference
as a marker beside it, so kinks (where they disagree) show at a glance."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dse.report.atomic import save_fig  # noqa: E402

KIND_COLORS = {"rate": "tab:blue", "latency": "tab:orange", "capacity": "tab:green",
               "efficiency": "tab:purple", "discrete": "tab:gray", "derate": "tab:red",
               "composite": "tab:olive"}


def tornado(df: pd.DataFrame, title: str, path: Path, min_abs: float = 1e-3,
            xlabel: str = "elasticity d ln(step time) / d ln(knob)", ad_label: str = "jax.grad") -> Path:
    """Bars of ``elasticity_ad`` for the knobs whose AD or FD elasticity reaches
    ``min_abs`` (the others are counted in a footnote), largest at the top."""
    big = np.maximum(df["elasticity_ad"].abs(), df["elasticity_fd"].abs().fillna(0.0))
    show = (df[big >= min_abs].assign(_ad=df["elasticity_ad"].abs(), _big=big)
            .sort_values(["_ad", "_big"]))
    n = max(len(show), 1)
    fig, ax = plt.subplots(figsize=(10, 2.0 + 0.3 * n))
    y = np.arange(len(show))
    ad, fd = show["elasticity_ad"].to_numpy(), show["elasticity_fd"].to_numpy()
    # the axis spans the AD bars and the finite differences that agree with them; a
    # finite difference across a step (often -10 or worse for tile sizes) is drawn at the
    # edge with its value written beside it
    ref = np.abs(np.concatenate([ad, fd[~show["kink"].to_numpy()], [0.05]]))
    lim = 1.15 * np.nanmax(ref)
    colors = [KIND_COLORS.get(k, "tab:gray") for k in show["kind"]]
    ax.barh(y, ad, color=colors, height=0.65, zorder=2)
    fd_in = np.clip(fd, -lim, lim)
    out = np.abs(fd) > lim
    ax.scatter(fd_in[~out], y[~out], marker="D", s=22, color="black", zorder=3,
               label="central finite difference (+-1 %)")
    for yi, v in zip(y[out], fd[out]):
        ax.scatter([np.sign(v) * lim], [yi], marker="<" if v < 0 else ">", s=40, color="black",
                   zorder=3)
        ax.annotate(f"FD {v:+.2f}", (np.sign(v) * lim, yi), xytext=(6 if v > 0 else -6, 0),
                    textcoords="offset points", va="center", ha="left" if v > 0 else "right",
                    fontsize=7)
    ax.set_xlim(-lim * (1.25 if (fd < -lim).any() else 1.0), lim * (1.25 if (fd > lim).any() else 1.0))
    labels = [f"{k}  (kink)" if kink else k for k, kink in zip(show["knob"], show["kink"])]
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_ylim(-0.7, len(show) - 0.3)
    ax.axvline(0.0, color="black", lw=0.8)
    ax.grid(axis="x", alpha=0.3, zorder=0)
    ax.set_xlabel(xlabel + f"\n(bar: {ad_label}; -1 = time halves when the knob doubles)", fontsize=9)
    ax.set_ylabel("hardware knob (others held fixed)")
    ax.set_title(title, fontsize=9, loc="left")
    kinds = list(dict.fromkeys(show["kind"]))
    handles = [plt.Rectangle((0, 0), 1, 1, color=KIND_COLORS.get(k, "tab:gray")) for k in kinds]
    fd_handle = plt.Line2D([], [], marker="D", ls="", color="black",
                           label="central finite difference (+-1 %)")
    ax.legend(handles + [fd_handle], kinds + [fd_handle.get_label()], fontsize=7.5,
              loc="upper left", bbox_to_anchor=(1.01, 1.0), title="knob kind", title_fontsize=8)
    hidden = len(df) - len(show)
    if hidden:
        fig.text(0.01, 0.005, f"{hidden} knobs with |elasticity| < {min_abs:g} not shown "
                 f"(all are in the CSV)", fontsize=7, color="0.3")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    path = Path(path)
    save_fig(fig, path, dpi=130)
    plt.close(fig)
    return path
