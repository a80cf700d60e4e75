"""Decision quality of the predictions: does the model rank layouts as measured?

A *layout group* is a set of validation rows that describe the same training job and
differ only in how it is laid out over the GPUs: same model (and architecture columns),
gpu, num_gpus, global batch, sequence length, precision, framework, attention ... ; the
layout fields (:data:`LAYOUT_FIELDS`) vary.  Choosing within such a group is the decision
the tool exists for, so per group with at least :data:`MIN_ROWS` predicted rows:

* ``spearman`` -- Spearman rank correlation of predicted vs measured iteration time
  (Pearson correlation of the average ranks, ties averaged);
* ``regret`` -- how much slower the layout the model calls fastest really is than the
  measured fastest: ``measured[argmin predicted] / min(measured) - 1`` (ties in the
  prediction are broken by row order).

:func:`decision_report` gives the per-group table, :func:`summarize` its mean / median /
max, and :func:`print_decision` the lines ``dse validate`` prints.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

LAYOUT_FIELDS = ("tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch_size",
                 "sequence_parallel", "recompute", "zero_stage")
# columns that are neither the job's description nor its layout
NOT_JOB = ("id", "source", "measured_iter_time_s", "measured_mem_gib", "target_basis",
           "error", "status", "notes", "note")
MIN_ROWS = 3


def job_columns(df: pd.DataFrame) -> list[str]:
    """The input columns that define the job: every column the schema row carries except
    the layout fields, the identifiers/targets (:data:`NOT_JOB`) and prediction outputs
    (``predicted_*``, ``chosen_*``)."""
    return [c for c in df.columns
            if c not in LAYOUT_FIELDS and c not in NOT_JOB
            and not c.startswith(("predicted_", "chosen_"))]


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    rx = pd.Series(x).rank(method="average").to_numpy()
    ry = pd.Series(y).rank(method="average").to_numpy()
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def decision_report(pred: pd.DataFrame, min_rows: int = MIN_ROWS) -> pd.DataFrame:
    """One row per layout group with ``rows``, ``spearman``, ``regret`` and the ids of the
    predicted-best and measured-best rows.  Only rows with a prediction (``status`` ok
    where the column exists) and a measured time count."""
    d = pred
    if "status" in d.columns:
        d = d[d["status"] == "ok"]
    d = d[d["measured_iter_time_s"].notna() & d["predicted_iter_time_s"].notna()]
    keys = job_columns(d)
    out = []
    if d.empty:
        return pd.DataFrame(columns=["rows", "spearman", "regret", "predicted_best", "measured_best"])
    # blank job fields (NaN) must still group together
    grouped = d.fillna({k: "" for k in keys}).groupby(keys, sort=False, dropna=False) if keys \
        else [((), d)]
    for key, g in grouped:
        if len(g) < min_rows:
            continue
        meas = g["measured_iter_time_s"].to_numpy(float)
        prd = g["predicted_iter_time_s"].to_numpy(float)
        i = int(np.argmin(prd))
        ids = g["id"].to_numpy() if "id" in g.columns else np.arange(len(g))
        out.append({"rows": len(g), "spearman": _spearman(prd, meas),
                    "regret": float(meas[i] / meas.min() - 1.0),
                    "predicted_best": ids[i], "measured_best": ids[int(np.argmin(meas))]})
    return pd.DataFrame(out, columns=["rows", "spearman", "regret", "predicted_best", "measured_best"])


def summarize(report: pd.DataFrame) -> dict:
    """Mean, median and worst of the per-group metrics (worst rank correlation is the
    minimum, worst regret the maximum)."""
    s, r = report["spearman"].dropna(), report["regret"]
    nan = float("nan")
    return {"groups": len(report),
            "spearman_mean": float(s.mean()) if len(s) else nan,
            "spearman_median": float(s.median()) if len(s) else nan,
            "spearman_min": float(s.min()) if len(s) else nan,
            "regret_mean": float(r.mean()) if len(r) else nan,
            "regret_median": float(r.median()) if len(r) else nan,
            "regret_max": float(r.max()) if len(r) else nan}


def print_decision(pred: pd.DataFrame, min_rows: int = MIN_ROWS) -> dict | None:
    """Print the decision-quality lines of ``dse validate`` (nothing when no layout
    group has ``min_rows`` rows); returns :func:`summarize`'s dict or None."""
    rep = decision_report(pred, min_rows)
    if rep.empty:
        return None
    s = summarize(rep)
    print(f"layout decisions: {s['groups']} groups of >= {min_rows} runs differing only in layout")
    print(f"  rank correlation (Spearman): mean {s['spearman_mean']:.2f}, "
          f"median {s['spearman_median']:.2f}, min {s['spearman_min']:.2f}")
    print(f"  regret of the predicted-best layout: mean {s['regret_mean']:.1%}, "
          f"median {s['regret_median']:.1%}, max {s['regret_max']:.1%}")
    return s
