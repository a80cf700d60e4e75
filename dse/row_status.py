"""The status a prediction row carries (``dse predict``, ``dse validate``): ``ok``, ``ok (...)``
with a note (an over-memory layout timed as if it fit, a power limit not applied), or why no
prediction was made (``infeasible: ...``, ``invalid: ...``, ``out of memory ...``).  One
reading of it for every caller, training and serving alike."""

from __future__ import annotations

import pandas as pd


def is_prediction(status) -> bool:
    """Whether one status says a prediction was made: it starts with ``ok``."""
    return str(status).startswith("ok")


def has_prediction(status: pd.Series) -> pd.Series:
    """:func:`is_prediction` of a status column (plain ``ok``, or ``ok (...)`` with a note)."""
    return status.astype(str).str.startswith("ok")
