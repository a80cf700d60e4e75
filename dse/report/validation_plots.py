"""Plots of the validation run: predicted-vs-measured scatter and error breakdowns."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dse.report.atomic import save_fig  # noqa: E402


def scatter(pred: pd.DataFrame, path: Path) -> None:
    d = pred[pred["status"] == "ok"]
    fig, ax = plt.subplots(figsize=(6.5, 6))
    lo = min(d["measured_iter_time_s"].min(), d["predicted_iter_time_s"].min()) * 0.7
    hi = max(d["measured_iter_time_s"].max(), d["predicted_iter_time_s"].max()) * 1.4
    x = np.geomspace(lo, hi, 50)
    ax.fill_between(x, x * 0.9, x * 1.1, color="0.88", label="±10 %")
    ax.plot(x, x, "k-", lw=1, label="predicted = measured")
    for src, g in d.groupby("source"):
        mape = (g["error"].abs()).mean()
        ax.scatter(g["measured_iter_time_s"], g["predicted_iter_time_s"], s=28,
                   label=f"{src} (n={len(g)}, MAPE {mape:.1%})", alpha=0.85)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured iteration time (s)")
    ax.set_ylabel("predicted iteration time (s)")
    overall = d["error"].abs().mean()
    ax.set_title(f"dse vs published training runs ({len(d)} rows, MAPE {overall:.1%})")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    save_fig(fig, path, dpi=130)
    plt.close(fig)


def _size_bucket(n_params: float) -> str:
    for lim, name in ((10e9, "<10B"), (50e9, "10-50B"), (200e9, "50-200B")):
        if n_params < lim:
            return name
    return ">=200B"


def error_breakdown(pred: pd.DataFrame, path: Path) -> None:
    d = pred[pred["status"] == "ok"].copy()
    d["generation"] = d["gpu"].str.extract(r"^([a-z]+\d+)")[0].str.upper()
    h, L, V = d["hidden_size"], d["num_layers"], d["vocab_size"]
    approx = 12 * L * h * h + 2 * V * h
    d["size"] = [_size_bucket(x) for x in approx]
    d["abs_err"] = d["error"].abs() * 100
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, col, order in ((axes[0], "generation", None),
                           (axes[1], "size", ["<10B", "10-50B", "50-200B", ">=200B"])):
        g = d.groupby(col)["abs_err"].agg(["mean", "max", "count"])
        if order:
            g = g.reindex([o for o in order if o in g.index])
        xs = np.arange(len(g))
        ax.bar(xs - 0.2, g["mean"], 0.4, label="mean |error|")
        ax.bar(xs + 0.2, g["max"], 0.4, label="max |error|")
        ax.set_xticks(xs, [f"{i}\n(n={c})" for i, c in zip(g.index, g["count"])])
        ax.set_ylabel("iteration-time error (%)")
        ax.axhline(10, color="k", ls="--", lw=0.8, label="10 %")
        ax.legend(fontsize=8)
    axes[0].set_title("error by GPU generation")
    axes[1].set_title("error by model size (parameters)")
    fig.tight_layout()
    save_fig(fig, path, dpi=130)
    plt.close(fig)
