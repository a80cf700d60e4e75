"""Concurrency sweeps in a serving validation file: TPOT split into a fixed per-step time and
a per-request slope, measured against predicted.

A closed-loop sweep (``scenario = concurrency``) holds everything but the number of requests
in flight ``c``; its decode step -- and so its time per output token -- is to first order a
part every step pays whatever the batch (the weights of the dense layers streamed once, the
kernels' fixed costs, the collectives' latencies, the engine's per-step host time) plus a
part per running request (its KV cache read, the MoE experts its tokens touch, its share of
the GEMMs).  The least-squares line through a sweep's points (Legendre / Gauss; ``numpy.
polyfit`` of degree 1),

  ``TPOT(c) ~ a + b c``,

fitted to the measured and to the predicted TPOTs of the same rows, says which of the two
parts the model misses: ``a`` (ms, the intercept at ``c = 0``: the per-step fixed time) and
``b`` (ms per request in flight).  A line is a summary, not the model: past the KV pool or
into saturation the measured TPOT bends, and a sweep's ``a`` only means the per-step time
when its points are where the step is linear in the batch (the smallest concurrencies).

A sweep is the rows of one source that agree on every column but the concurrency and the
measured / predicted figures (:data:`SWEEP_KEY`), that have a prediction (status ok) and a
measured TPOT that is a finite number > 0, and that cover at least two distinct
concurrencies.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dse.row_status import has_prediction

#: the columns one sweep's rows share (those a file has); the concurrency varies
SWEEP_KEY = ("source_id", "model", "hardware", "precision", "engine", "gpus", "tp", "pp", "ep",
             "attn_dp", "replicas", "input_len", "output_len", "kv_precision", "dataset")
COLUMNS = ["source_id", "model", "hardware", "precision", "engine", "layout", "input_len",
           "output_len", "points", "c_min", "c_max", "fixed_ms_measured", "fixed_ms_predicted",
           "slope_ms_measured", "slope_ms_predicted", "ids"]


def _line(c: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """``(a, b)`` of the least-squares line ``t ~ a + b c``."""
    b, a = np.polyfit(c.astype(float), t.astype(float), 1)
    return float(a), float(b)


def _layout(r: pd.Series) -> str:
    """A row's ``tp / pp / ep / attn_dp`` as ``tp8 pp1 ep8`` (the columns it fills)."""
    v = pd.to_numeric(r.reindex(["tp", "pp", "ep", "attn_dp"]), errors="coerce")
    return " ".join(f"{col}{int(x)}" for col, x in v.items() if x == x)


def tpot_sweeps(pred: pd.DataFrame) -> pd.DataFrame:
    """One line per concurrency sweep of ``pred`` (the frame :func:`dse.infer.predict_rows.
    predict_inference_frame` returns): its points, its concurrency range and the fixed /
    per-request parts of the measured and the predicted TPOT (module docstring), ms and ms
    per request in flight, and the row ids of each sweep (``;``-joined).  Empty (with
    :data:`COLUMNS`) where the file has no sweep."""
    need = {"scenario", "batch_or_concurrency", "measured_tpot_ms", "predicted_tpot_ms"}
    if not need <= set(pred.columns):
        return pd.DataFrame(columns=COLUMNS)
    c = pd.to_numeric(pred["batch_or_concurrency"], errors="coerce")
    m = pd.to_numeric(pred["measured_tpot_ms"], errors="coerce")
    p = pd.to_numeric(pred["predicted_tpot_ms"], errors="coerce")
    scen = pred["scenario"].astype(str).str.strip().str.lower()
    use = (has_prediction(pred["status"]) & (scen == "concurrency") & np.isfinite(c) & (c > 0)
           & np.isfinite(m) & (m > 0) & np.isfinite(p))
    d = pred[use].assign(_c=c[use], _m=m[use], _p=p[use])
    key = [k for k in SWEEP_KEY if k in d.columns]
    rows = []
    # blank cells group together (dropna=False): a column a sweep leaves blank is shared
    for _, g in d.groupby(key, dropna=False, sort=True):
        if g["_c"].nunique() < 2:
            continue
        am, bm = _line(g["_c"].values, g["_m"].values)
        ap, bp = _line(g["_c"].values, g["_p"].values)
        r = g.iloc[0]
        rows.append([r.get("source_id"), r.get("model"), r.get("hardware"), r.get("precision"),
                     r.get("engine"), _layout(r), r.get("input_len"), r.get("output_len"),
                     len(g), int(g["_c"].min()), int(g["_c"].max()), am, ap, bm, bp,
                     ";".join(g["id"].astype(str)) if "id" in g else ""])
    out = pd.DataFrame(rows, columns=COLUMNS)
    for col in ("input_len", "output_len"):       # whole tokens, blank where the row says none
        out[col] = pd.to_numeric(out[col], errors="coerce").round().astype("Int64")
    return out


def sweep_summary(s: pd.DataFrame) -> str:
    """One sentence computed from :func:`tpot_sweeps`' table: the median gap of the fixed
    part (ms, predicted - measured) and of the slope (relative), and in how many sweeps the
    model's part is the smaller."""
    if s.empty:
        return "no concurrency sweep (rows that differ only in concurrency) to decompose"
    word = lambda x: "below" if x < 0 else "above"
    da = (s["fixed_ms_predicted"] - s["fixed_ms_measured"]).median()
    n_fixed = int((s["fixed_ms_predicted"] < s["fixed_ms_measured"]).sum())
    ok = s["slope_ms_measured"] > 0
    rb = s.loc[ok, "slope_ms_predicted"] / s.loc[ok, "slope_ms_measured"] - 1.0
    slope = (f"its per-request slope {abs(rb.median()):.0%} {word(rb.median())} (the model's "
             f"the smaller in {int((rb < 0).sum())} of {len(rb)})" if len(rb)
             else "no measured slope > 0 to compare")
    return (f"{len(s)} concurrency sweep(s), median over them: the model's fixed per-step TPOT "
            f"is {abs(da):.2f} ms {word(da)} the measured (the model's the smaller in {n_fixed} "
            f"of {len(s)}), {slope}")
