"""Cells a CSV writes as a missing-value word ("nan", "NA", "null", ...): pandas reads
them as blank, so a row would be searched or defaulted as if the cell were not stated.
In this project's schemas a blank cell means "not stated"; a written NA word is refused
per row (``invalid: <column>: ...``), every other row still predicted.

:func:`dse.predict.read_table` records the cells in ``DataFrame.attrs[NA_CELLS]`` keyed
by the row's position in the file (the frame's index label as read), and the row
predictors (:func:`dse.predict.predict_frame`,
:func:`dse.infer.predict_rows.predict_inference_frame`) ask :func:`na_word_status`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: the words pandas reads as a missing value besides a blank cell (pandas.read_csv's
#: default ``na_values``): in a file of this schema a blank cell means "not stated", and
#: a written "nan" / "NA" / "null" is refused per row instead of read as blank
NA_WORDS = frozenset({"#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
                      "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"})
#: free-text columns, where such a word is prose and blank and written are alike
FREE_TEXT = frozenset({"notes", "source", "source_id", "source_url_or_repo_path", "target_basis",
                       "hardware_as_written", "precision_as_written", "description"})
NA_CELLS = "dse_na_word_cells"       # DataFrame.attrs key: {row position: [(column, text)]}


def blank_cell(v) -> bool:
    """A cell the file left blank: None, a float NaN (how pandas reads an empty cell) or
    text that is empty once stripped -- "not stated" in every schema of this project."""
    return v is None or (isinstance(v, float) and np.isnan(v)) or str(v).strip() == ""


def na_word_cells(header: list[str], records: list[list[str]]) -> dict[int, list[tuple[str, str]]]:
    """Per row position, the cells outside :data:`FREE_TEXT` whose text is one of
    :data:`NA_WORDS` (exactly as pandas matches them)."""
    names = [h.strip() for h in header]
    out: dict[int, list[tuple[str, str]]] = {}
    for i, r in enumerate(records):
        hits = [(names[j], v.strip()) for j, v in enumerate(r)
                if v.strip() in NA_WORDS and names[j] not in FREE_TEXT]
        if hits:
            out[i] = hits
    return out


def na_word_status(df: pd.DataFrame, label) -> str | None:
    """The ``invalid:`` status of row ``label`` (its original position in the file is the
    label of a frame read by :func:`read_table`) if it holds an NA word, else None."""
    cells = df.attrs.get(NA_CELLS, {})
    hit = cells.get(label) if isinstance(label, (int, np.integer)) else None
    if not hit:
        return None
    col, text = hit[0]
    return (f"invalid: {col}: must be a value or blank (a blank cell means not stated), "
            f"but got {text!r}")
