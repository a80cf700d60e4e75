"""Plots of a serving validation run (`dse validate` on the inference schema), as the training
run has its own (:mod:`dse.report.validation_plots`): predicted against measured per metric
(output tokens/s, TTFT, TPOT, end-to-end latency), signed error per source and metric on
linear axes, and each concurrency sweep's TPOT with the two lines of
:mod:`dse.infer.tpot_sweeps` (fixed per-step time + slope per request in flight)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dse.report.atomic import save_fig  # noqa: E402
from dse.report.validation_plots import _short, identity_band  # noqa: E402

METRICS = (("output_tok_s", "output tokens/s (system)"), ("ttft_ms", "time to first token (ms)"),
           ("tpot_ms", "time per output token (ms)"), ("e2e_latency_ms", "end-to-end latency (ms)"))
MAX_SWEEP_PANELS = 24


def scatter(errors: pd.DataFrame, path: Path) -> None:
    """One panel per metric with figures: predicted against measured (log-log: the figures
    span decades), the ±10 % band and y = x, one colour per source; the panel's title gives
    its figures' MAPE and bias.  ``errors``: :func:`dse.infer.predict_rows.error_long`."""
    present = [(k, lab) for k, lab in METRICS if (errors["metric"] == k).any()]
    fig, axes = plt.subplots(1, len(present), figsize=(4.6 * len(present), 4.8), squeeze=False)
    srcs = sorted(errors["source"].astype(str).unique())
    colours = {s: plt.get_cmap("tab20")(i % 20) for i, s in enumerate(srcs)}
    for ax, (k, lab) in zip(axes[0], present):
        e = errors[errors["metric"] == k]
        identity_band(ax, e["measured"], e["predicted"])
        for src, g in e.groupby(e["source"].astype(str)):
            ax.scatter(g["measured"], g["predicted"], s=12, color=colours[src],
                       label=_short(src, 30))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"measured {lab}")
        ax.set_ylabel(f"predicted {lab}")
        ax.set_title(f"{lab}: {len(e)} figures\nMAPE {e['error'].abs().mean():.1%}, "
                     f"bias {e['error'].mean():+.1%}", fontsize=9)
        ax.grid(True, which="both", alpha=0.25)
    # one legend for the figure, beside the panels (every panel has the same sources' colours)
    handles = {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), fontsize=7, loc="center right",
               title="source (figures)", title_fontsize=7)
    fig.suptitle("dse validate (serving): predicted against measured, per metric", fontsize=11)
    fig.tight_layout(rect=(0, 0, 0.84, 1))
    save_fig(fig, path, dpi=130)
    plt.close(fig)


def bias_by_source(errors: pd.DataFrame, path: Path) -> None:
    """Signed error of every figure per source (linear %), one marker per metric, with each
    source x metric mean (bias) as a bar."""
    srcs = sorted(errors["source"].astype(str).unique())
    present = [(k, lab) for k, lab in METRICS if (errors["metric"] == k).any()]
    fig, ax = plt.subplots(figsize=(max(7.0, 1.1 * len(srcs) + 3.0), 5.5))
    width = 0.8 / max(len(present), 1)
    rng = np.random.default_rng(0)
    handles = []
    for j, (k, lab) in enumerate(present):
        colour = plt.get_cmap("tab10")(j)
        for i, src in enumerate(srcs):
            g = errors[(errors["source"].astype(str) == src) & (errors["metric"] == k)]
            if g.empty:
                continue
            xc = i - 0.4 + width * (j + 0.5)
            ax.bar(xc, g["error"].mean() * 100, width * 0.9, color=colour, alpha=0.35)
            ax.scatter(xc + rng.uniform(-width / 3, width / 3, len(g)), g["error"] * 100, s=8,
                       color=colour)
        handles.append(Patch(facecolor=colour, alpha=0.6, label=f"{lab}: bias (bar), figures (dots)"))
    ax.axhline(0, color="k", lw=0.8, ls=":")
    rows = errors.groupby(["source", "id"])["error"].apply(lambda s: s.abs().mean()).reset_index()
    labels = [f"{_short(s, 18)}\nrows {int((rows['source'].astype(str) == s).sum())}\nrow MAPE "
              f"{rows.loc[rows['source'].astype(str) == s, 'error'].mean():.0%}" for s in srcs]
    ax.set_xticks(range(len(srcs)), labels, fontsize=7)
    ax.set_xlabel("source (rows scored, row-mean error)")
    ax.set_ylabel("signed error (predicted − measured) / measured (%)")
    ax.set_title(f"signed serving error per source and metric ({len(rows)} rows, {len(errors)} "
                 f"figures, bias {errors['error'].mean():+.1%})")
    ax.legend(handles=handles, fontsize=8, loc="best")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    save_fig(fig, path, dpi=130)
    plt.close(fig)


def engine_label(text) -> str:
    """A panel's short engine label: the engine text's first word and its own version
    (:func:`dse.infer.engines.version3`; ``"sglang (lmsysorg/sglang:v0.5.12-rocm700-mi30x)"``
    -> ``"sglang 0.5.12"``), the first word alone when it states none."""
    from dse.infer.engines import version3
    words = str(text).split()
    if not words:
        return ""
    v = version3(str(text))
    return words[0] if v is None else f"{words[0]} {v[0]}.{v[1]}.{v[2]}"


def tpot_sweeps_plot(pred: pd.DataFrame, sweeps: pd.DataFrame, path: Path) -> None:
    """One panel per concurrency sweep (:func:`dse.infer.tpot_sweeps.tpot_sweeps`; the
    :data:`MAX_SWEEP_PANELS` with the most points when there are more, the title says how
    many): measured and predicted TPOT against the concurrency, each with its least-squares
    line (fixed per-step time + slope per request in flight)."""
    from dse.infer.tpot_sweeps import SWEEP_KEY
    show = sweeps.sort_values("points", ascending=False, kind="stable").head(MAX_SWEEP_PANELS)
    n = len(show)
    cols = min(6, n)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.3 * cols, 2.9 * rows + 0.8), squeeze=False)
    ids = pred["id"].astype(str)
    for ax, (_, s) in zip(axes.flat, show.iterrows()):
        g = pred[ids.isin(str(s["ids"]).split(";"))]
        c = pd.to_numeric(g["batch_or_concurrency"], errors="coerce")
        ax.scatter(c, pd.to_numeric(g["measured_tpot_ms"], errors="coerce"), s=14, color="k",
                   label="measured")
        ax.scatter(c, pd.to_numeric(g["predicted_tpot_ms"], errors="coerce"), s=14, marker="x",
                   color="tab:red", label="predicted")
        x = np.linspace(0, float(s["c_max"]) * 1.05, 20)
        ax.plot(x, s["fixed_ms_measured"] + s["slope_ms_measured"] * x, "k-", lw=1,
                label="measured line")
        ax.plot(x, s["fixed_ms_predicted"] + s["slope_ms_predicted"] * x, "--", color="tab:red",
                lw=1, label="predicted line")
        lens = "" if s["input_len"] is pd.NA else f" {s['input_len']}/{s['output_len']}"
        ax.set_title(f"{_short(s['source_id'], 22)}, {engine_label(s['engine'])}\n{s['hardware']} "
                     f"{s['precision']} {s['layout']}{lens}", fontsize=7)
        ax.set_xlabel("requests in flight", fontsize=7)
        ax.set_ylabel("TPOT (ms)", fontsize=7)
        ax.tick_params(labelsize=6)
        ax.grid(True, alpha=0.25)
        ax.legend(fontsize=5, loc="upper left")
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    more = f" ({n} of {len(sweeps)} with the most points)" if len(sweeps) > n else ""
    fig.suptitle(f"TPOT of each concurrency sweep: fixed per-step time + slope x requests in flight"
                 f"{more}; sweep = rows that differ only in concurrency "
                 f"({', '.join(k for k in SWEEP_KEY[:5])}, ... equal)", fontsize=9)
    fig.tight_layout()
    save_fig(fig, path, dpi=110)
    plt.close(fig)

