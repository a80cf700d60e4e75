"""Plots of the validation run: predicted vs measured with each row's 80 % interval,
signed error per row and per source (bias, linear axes), and error by GPU generation and
model size."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dse.row_status import has_prediction  # noqa: E402
from dse.report.atomic import save_fig  # noqa: E402


def _short(src, n: int = 38) -> str:
    """A source name short enough for a legend or tick label."""
    s = str(src)
    return s if len(s) <= n else s[: n - 1] + "…"


def _band_err(d: pd.DataFrame):
    """Each row's interval as signed error: measured inside [lo, hi] <=> (pred - measured) /
    measured inside [pred/hi - 1, pred/lo - 1] (NaN without a band)."""
    if "predicted_iter_time_lo_s" not in d:
        nan = np.full(len(d), np.nan)
        return nan, nan
    p = d["predicted_iter_time_s"].astype(float)
    return (p / d["predicted_iter_time_hi_s"].astype(float) - 1.0).to_numpy(), \
        (p / d["predicted_iter_time_lo_s"].astype(float) - 1.0).to_numpy()


def _inside(d: pd.DataFrame) -> np.ndarray:
    lo, hi = _band_err(d)
    e = d["error"].to_numpy(float)
    return (e >= lo) & (e <= hi)


def identity_band(ax, measured, predicted) -> tuple[float, float]:
    """On a predicted-against-measured axis: the ±10 % band and the line y = x over the
    figures' span (0.7x the least to 1.4x the largest, for log axes); returns that span."""
    lo = min(measured.min(), predicted.min()) * 0.7
    hi = max(measured.max(), predicted.max()) * 1.4
    x = np.geomspace(lo, hi, 50)
    ax.fill_between(x, x * 0.9, x * 1.1, color="0.88", label="±10 %")
    ax.plot(x, x, "k-", lw=1, label="predicted = measured")
    return lo, hi


def scatter(pred: pd.DataFrame, path: Path) -> None:
    """Left: predicted vs measured iteration time (log-log: times span three decades) with
    each row's 80 % interval as an error bar; right: signed error (linear, %) against the
    measured time, with each row's interval in error space (grey)."""
    d = pred[has_prediction(pred["status"])]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 6))
    lo, hi = identity_band(ax, d["measured_iter_time_s"], d["predicted_iter_time_s"])
    has_band = "predicted_iter_time_lo_s" in d
    elo, ehi = _band_err(d)
    for src, g in d.groupby("source"):
        mape = (g["error"].abs()).mean()
        bias = g["error"].mean()
        if has_band:
            yerr = np.vstack([g["predicted_iter_time_s"] - g["predicted_iter_time_lo_s"],
                              g["predicted_iter_time_hi_s"] - g["predicted_iter_time_s"]])
            ax.errorbar(g["measured_iter_time_s"], g["predicted_iter_time_s"], yerr=yerr, fmt="none",
                        ecolor="0.6", elinewidth=0.8, alpha=0.6)
        pts = ax.scatter(g["measured_iter_time_s"], g["predicted_iter_time_s"], s=22, alpha=0.85,
                         label=f"{_short(src)} (n={len(g)}, MAPE {mape:.1%}, bias {bias:+.1%})")
        sel = (d["source"] == src).to_numpy()
        ax2.vlines(g["measured_iter_time_s"], elo[sel] * 100, ehi[sel] * 100, color="0.75", lw=1.2)
        ax2.scatter(g["measured_iter_time_s"], g["error"] * 100, s=22, alpha=0.85,
                    color=pts.get_facecolor()[0])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured iteration time (s)")
    ax.set_ylabel("predicted iteration time (s), bars: 80 % interval")
    overall = d["error"].abs().mean()
    cov = f", {np.mean(_inside(d)):.0%} inside the interval" if has_band else ""
    ax.set_title(f"dse vs measured runs ({len(d)} rows, MAPE {overall:.1%}{cov})")
    # below the axes: inside, the legend hid the interval bars of the fast rows
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.11), ncol=2, frameon=False)
    ax.grid(True, which="both", alpha=0.3)
    ax2.axhline(0, color="k", lw=1)
    ax2.axhspan(-10, 10, color="0.93", zorder=0, label="±10 %")
    ax2.plot([], [], color="0.75", lw=1.2, label="80 % interval (as error)")
    ax2.set_xscale("log")
    ax2.set_xlabel("measured iteration time (s)")
    ax2.set_ylabel("signed error (predicted − measured) / measured (%)")
    ax2.set_title("signed error per row (> 0: predicted too slow)")
    ax2.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.11), ncol=2, frameon=False)
    ax2.grid(True, alpha=0.3)
    fig.tight_layout()
    save_fig(fig, path, dpi=130, bbox_inches="tight")
    plt.close(fig)


def bias_by_source(pred: pd.DataFrame, path: Path) -> None:
    """Signed error of every row per source (linear %), the source's mean (bias) and MAPE,
    each row's 80 % interval in error space, and the share of rows inside it."""
    d = pred[has_prediction(pred["status"])].copy()
    srcs = sorted(d["source"].astype(str).unique())
    elo, ehi = _band_err(d)
    d["elo"], d["ehi"], d["inside"] = elo, ehi, _inside(d)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(srcs) + 2.5), 5))
    rng = np.random.default_rng(0)
    for i, src in enumerate(srcs):
        g = d[d["source"].astype(str) == src]
        xs = i + rng.uniform(-0.25, 0.25, len(g))
        ax.vlines(xs, g["elo"] * 100, g["ehi"] * 100, color="0.8", lw=1.0, zorder=1)
        ax.scatter(xs[g["inside"]], g["error"][g["inside"]] * 100, s=14, color="tab:blue", zorder=2)
        ax.scatter(xs[~g["inside"]], g["error"][~g["inside"]] * 100, s=14, color="tab:red", zorder=2)
        ax.plot([i - 0.35, i + 0.35], [g["error"].mean() * 100] * 2, color="k", lw=2.2, zorder=3)
    ax.scatter([], [], s=14, color="tab:blue", label="row inside its 80 % interval")
    ax.scatter([], [], s=14, color="tab:red", label="row outside it")
    ax.plot([], [], color="0.8", lw=1.0, label="row's interval (as error)")
    ax.plot([], [], color="k", lw=2.2, label="bias (mean signed error)")
    ax.axhline(0, color="k", lw=0.8, ls=":")
    labels = []
    for src in srcs:
        g = d[d["source"].astype(str) == src]
        labels.append(f"{_short(src, 16)}\nn={len(g)}\nMAPE {g['error'].abs().mean():.0%}\n"
                      f"in {g['inside'].mean():.0%}")
    ax.set_xticks(range(len(srcs)), labels, fontsize=7)
    ax.set_xlabel("source (rows, MAPE, share inside the interval)")
    ax.set_ylabel("signed error (predicted − measured) / measured (%)")
    ax.set_title(f"signed iteration-time error per source\n({len(d)} rows, bias "
                 f"{d['error'].mean():+.1%}, {d['inside'].mean():.0%} inside the 80 % interval)")
    ax.legend(fontsize=8, loc="best")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    save_fig(fig, path, dpi=130)
    plt.close(fig)


def _size_bucket(n_params: float) -> str:
    for lim, name in ((10e9, "<10B"), (50e9, "10-50B"), (200e9, "50-200B")):
        if n_params < lim:
            return name
    return ">=200B"


def error_breakdown(pred: pd.DataFrame, path: Path) -> None:
    d = pred[has_prediction(pred["status"])].copy()
    d["generation"] = d["gpu"].str.extract(r"^([a-z]+\d+)")[0].str.upper()
    h, L, V = d["hidden_size"], d["num_layers"], d["vocab_size"]
    approx = 12 * L * h * h + 2 * V * h
    d["size"] = [_size_bucket(x) for x in approx]
    d["abs_err"] = d["error"].abs() * 100
    d["signed"] = d["error"] * 100
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, col, order in ((axes[0], "generation", None),
                           (axes[1], "size", ["<10B", "10-50B", "50-200B", ">=200B"])):
        g = d.groupby(col).agg(mean=("abs_err", "mean"), bias=("signed", "mean"), count=("abs_err", "count"))
        if order:
            g = g.reindex([o for o in order if o in g.index])
        xs = np.arange(len(g))
        ax.bar(xs - 0.2, g["mean"], 0.4, label="mean |error| (MAPE)")
        ax.bar(xs + 0.2, g["bias"], 0.4, label="bias (mean signed error)")
        ax.set_xticks(xs, [f"{i}\n(n={c})" for i, c in zip(g.index, g["count"])])
        ax.set_ylabel("iteration-time error (%), > 0: predicted too slow")
        ax.axhline(0, color="k", lw=0.8)
        ax.axhline(10, color="k", ls="--", lw=0.8, label="±10 %")
        ax.axhline(-10, color="k", ls="--", lw=0.8)
        # head room above the +-10 % line and the tallest bar, so the legend covers neither
        top = max(10.0, float(np.nanmax(g[["mean", "bias"]].to_numpy()))) if len(g) else 10.0
        bottom = min(-10.0, float(np.nanmin(g["bias"].to_numpy()))) if len(g) else -10.0
        ax.set_ylim(bottom * 1.1, top * 1.6)
        ax.legend(fontsize=8, loc="upper right", ncol=2)
    axes[0].set_title("error by GPU generation")
    axes[1].set_title("error by model size (parameters)")
    fig.tight_layout()
    save_fig(fig, path, dpi=130)
    plt.close(fig)
