"""Pareto extraction and a flat table of a study's trials.

A point *dominates* another when it is no worse in every objective and strictly
better in at least one (Deb et al. 2002, NSGA-II).  Equal points do not dominate each
other, so duplicates of a front point are all on the front.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import optuna
import pandas as pd
from optuna.trial import TrialState

from dse.errors import require

_BLOCK = 512
#: ``reason`` shown for a FAIL trial that carries none (nor a ``fail_reason``): its worker
#: died before telling, in a study run before abandoned trials were marked.
ABANDONED = "abandoned: its worker stopped before reporting (heartbeat went stale)"


def pareto_front(df: pd.DataFrame, objectives: list[str], directions: Sequence[str]
                 ) -> np.ndarray:
    """Boolean mask of the rows of ``df`` not dominated by any other row.

    ``directions[i]`` (``minimize``/``maximize``) applies to column ``objectives[i]``.
    Rows with a NaN objective (failed trials) are never on the front and dominate
    nothing.  Cost: O(n log n) for two objectives, O(n * front size) otherwise.
    """
    require(len(objectives) == len(directions) and len(objectives) > 0, "pareto_front",
            "directions", f"one direction per objective must be given, but got "
                          f"(objectives={list(objectives)}, directions={list(directions)})")
    require(all(d in ("minimize", "maximize") for d in directions), "pareto_front",
            "directions", f"each must be minimize or maximize, but got {list(directions)}")
    sign = np.array([1.0 if d == "minimize" else -1.0 for d in directions])
    loss = df[list(objectives)].to_numpy(dtype=float) * sign
    mask = np.zeros(len(loss), dtype=bool)
    valid = ~np.isnan(loss).any(axis=1)
    if valid.any():
        unique, inverse = np.unique(loss[valid], axis=0, return_inverse=True)
        mask[valid] = _front_of_sorted_unique(unique)[inverse.reshape(-1)]
    return mask


def _front_of_sorted_unique(loss: np.ndarray) -> np.ndarray:
    """Front mask of lexicographically sorted, distinct rows (all minimized)."""
    n, m = loss.shape
    if m == 1:
        return np.arange(n) == 0
    if m == 2:  # a row is on the front iff its 2nd value beats every earlier row's
        prev_min = np.minimum.accumulate(np.concatenate([[np.inf], loss[:-1, 1]]))
        return loss[:, 1] < prev_min
    # Only an earlier row can dominate a later one, and (distinct rows) it does iff it is
    # <= everywhere.  Check each block of rows against the front found so far (enough,
    # by transitivity) and against the earlier rows of its own block, vectorized.
    on_front = np.zeros(n, dtype=bool)
    for start in range(0, n, _BLOCK):
        block = loss[start:start + _BLOCK]
        dominated = np.tril(_weakly_below(block, block), -1).any(axis=1)
        front = loss[:start][on_front[:start]]
        for f in range(0, len(front), 4 * _BLOCK):
            dominated |= _weakly_below(block, front[f:f + 4 * _BLOCK]).any(axis=1)
        on_front[start:start + len(block)] = ~dominated
    return on_front


def _weakly_below(rows: np.ndarray, others: np.ndarray) -> np.ndarray:
    """``[i, j] = all(others[j] <= rows[i])``, one objective at a time (fast in numpy)."""
    out = others[None, :, 0] <= rows[:, None, 0]
    for k in range(1, rows.shape[1]):
        out &= others[None, :, k] <= rows[:, None, k]
    return out


def trials_dataframe(study: optuna.Study) -> pd.DataFrame:
    """One row per trial: ``number``, ``state``, each knob, each objective, ``reason``.

    ``reason`` is why a FAIL trial failed: infeasible (user attr ``reason``), or not
    evaluated and re-run (``fail_reason``: its worker died or was stopped).

    Objective columns use the study's metric names when set, else ``value_<i>``;
    they are NaN for trials that did not complete.
    """
    names = study.metric_names or [f"value_{i}" for i in range(len(study.directions))]
    trials = study.get_trials(deepcopy=False)
    knobs = sorted({k for t in trials for k in t.params})
    rows = []
    for t in trials:
        values = t.values if t.state == TrialState.COMPLETE and t.values else [np.nan] * len(names)
        reason = t.user_attrs.get("reason", "") or t.user_attrs.get("fail_reason", "")
        if t.state == TrialState.FAIL and not reason:
            reason = ABANDONED
        rows.append({"number": t.number, "state": t.state.name,
                     **{k: t.params.get(k, np.nan) for k in knobs},
                     **dict(zip(names, values)), "reason": reason})
    columns = ["number", "state", *knobs, *names, "reason"]
    return pd.DataFrame(rows, columns=columns)
