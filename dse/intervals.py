"""Prediction intervals: the spread of the model's residuals on the calibration files.

For every calibration row with a prediction the residual is ``r = ln(predicted /
measured)`` (iteration time for training, output tokens/s of the whole system for
serving).  Rows are grouped in cells -- training by (``framework``, GPU generation),
serving by (engine, GPU generation) -- and each cell stores the 10th and 90th
percentile of its residuals (``dse/data/intervals.json``, written by
``scripts/fit_intervals.py``).  A prediction ``p`` then carries the band

    lo = p * exp(-q90),   hi = p * exp(-q10)

i.e. the range that held 80 % of the calibration measurements of its cell, relative to
the prediction.  A cell with fewer than :data:`MIN_ROWS` residuals (or none: a framework
or GPU generation the calibration files never saw) uses the pooled residuals of all
cells of its kind, and ``interval_basis`` says so.

A cell's band is never narrower than the overall one (``q10 = min(cell, overall)``,
``q90 = max(cell, overall)``): the constants were fitted on some rows of the cells that
have many (the 41 Megatron H100 calibration rows hold the Hopper GEMM and attention
fits), so their in-sample spread understates the error on runs the fit did not see, and
the spread over every framework and generation of the calibration files is the narrowest
claim the files support for a new run.  (Measured on the out-of-sample suites of
``tests/data``, never used to size it: training coverage 55 -> 60 %, serving output tok/s
50 -> 52 %; docs/accuracy.md.)

What the band is not: a guarantee out of sample.  The quantiles are in-sample (the
constants were fitted on some of these rows), so on runs the model has never seen the
measurement falls inside less often than 80 % -- ``docs/accuracy.md`` reports the
coverage on the held-out suites of ``tests/data``, the honest number.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

DATA = Path(__file__).parent / "data" / "intervals.json"
RESIDUALS = Path(__file__).parent / "data" / "interval_residuals.csv"
MIN_ROWS = 10
QUANTILES = (0.10, 0.90)
OVERALL = "overall"


def generation_of(gpu) -> str:
    """The catalog's GPU generation of a hardware name ("" when it is not in the catalog)."""
    from dse.errors import InputError
    from dse.spec.hardware import get_hardware
    try:
        return str(get_hardware(str(gpu).strip()).generation) or "unknown"
    except (InputError, Exception):    # noqa: BLE001 -- a band is never worth an error
        return "unknown"


def _blank(v) -> bool:
    """:func:`dse.na_cells.blank_cell`, or the text ``nan`` (a predicted frame's cell cast to
    str)."""
    from dse.na_cells import blank_cell
    return blank_cell(v) or str(v).strip() == "nan"


def training_cell_of(framework, generation: str) -> str:
    """The training cell ``<framework profile>/<generation>``: a blank framework is
    megatron, an alias its profile (:func:`dse.spec.layout.canonical_framework`: NeMo ->
    megatron, torchtitan -> fsdp2), so every caller names the cells the fit names."""
    from dse.spec.layout import canonical_framework
    return f"{'megatron' if _blank(framework) else canonical_framework(framework)}/{generation}"


def training_cell(row) -> str:
    return training_cell_of(row.get("framework"), generation_of(row.get("gpu")))


def serving_cell(row) -> str:
    eng = row.get("chosen_engine")
    return f"{'unknown' if _blank(eng) else str(eng).strip()}/{generation_of(row.get('hardware'))}"


def fit_cells(residuals: pd.DataFrame) -> dict:
    """``{kind: {cell: {n, q10, q90}, "overall": {...}}}`` from a frame with columns
    ``kind``, ``cell``, ``residual``."""
    out = {}
    for kind, g in residuals.groupby("kind"):
        cells = {}
        for cell, c in g.groupby("cell"):
            cells[cell] = _quantiles(c["residual"])
        cells[OVERALL] = _quantiles(g["residual"])
        out[kind] = dict(sorted(cells.items()))
    return out


def _quantiles(r: pd.Series) -> dict:
    lo, hi = np.quantile(r.to_numpy(float), QUANTILES)
    return {"n": int(len(r)), "q10": round(float(lo), 6), "q90": round(float(hi), 6)}


@lru_cache(maxsize=1)
def load() -> dict:
    """The stored fit (empty when the data file is absent: no band)."""
    if not DATA.exists():
        return {}
    return json.loads(DATA.read_text())["cells"]


def band_for(kind: str, cell: str) -> tuple[float, float, str]:
    """(q10, q90, basis) of one cell, never narrower than the kind's overall quantiles
    (module docstring, "A cell's band"), falling back to them for a cell with too few rows."""
    cells = load().get(kind, {})
    c = cells.get(cell)
    o = cells.get(OVERALL)
    if c is not None and c["n"] >= MIN_ROWS:
        if o is None:
            return c["q10"], c["q90"], f"{cell} (n={c['n']})"
        q10, q90 = min(c["q10"], o["q10"]), max(c["q90"], o["q90"])
        wide = "" if (q10, q90) == (c["q10"], c["q90"]) else f"; widened to the overall spread, n={o['n']}"
        return q10, q90, f"{cell} (n={c['n']}{wide})"
    if o is None:
        return math.nan, math.nan, "no interval fit"
    why = f"{cell} has {c['n']} rows < {MIN_ROWS}" if c is not None else f"{cell} not in the calibration files"
    return o["q10"], o["q90"], f"overall (n={o['n']}; {why})"


def apply_band(pred, q10, q90) -> tuple[float, float]:
    """(lo, hi) of a prediction for residual quantiles (module docstring)."""
    return pred * math.exp(-q90), pred * math.exp(-q10)


def _bands(df: pd.DataFrame, column: str, kind: str, cell) -> tuple[list, list, list]:
    """(lo, hi, basis) of ``column`` for every row (NaN and "" where it has no finite
    prediction); ``cell(row)`` names the row's residual cell of ``kind``."""
    lo, hi, basis = [], [], []
    for row in df.to_dict("records"):
        p = row.get(column)
        if p is None or not np.isfinite(p):
            lo.append(np.nan), hi.append(np.nan), basis.append("")
            continue
        q10, q90, b = band_for(kind, cell(row))
        a, z = apply_band(float(p), q10, q90)
        lo.append(a), hi.append(z), basis.append(b)
    return lo, hi, basis


def add_training_band(df: pd.DataFrame) -> pd.DataFrame:
    """``predicted_iter_time_lo_s`` / ``_hi_s`` and ``interval_basis`` for every row with
    a prediction (NaN otherwise)."""
    lo, hi, basis = _bands(df, "predicted_iter_time_s", "training", training_cell)
    return df.assign(predicted_iter_time_lo_s=lo, predicted_iter_time_hi_s=hi, interval_basis=basis)


def add_serving_band(df: pd.DataFrame) -> pd.DataFrame:
    """``predicted_output_tok_s_lo`` / ``_hi`` (and the per-GPU pair) and
    ``interval_basis`` for every serving row with a prediction."""
    lo, hi, basis = _bands(df, "predicted_output_tok_s", "serving", serving_cell)
    out = df.assign(predicted_output_tok_s_lo=lo, predicted_output_tok_s_hi=hi)
    per = pd.to_numeric(out.get("predicted_output_tok_s_per_gpu"), errors="coerce")
    ratio = per / pd.to_numeric(out["predicted_output_tok_s"], errors="coerce")
    return out.assign(predicted_output_tok_s_per_gpu_lo=out["predicted_output_tok_s_lo"] * ratio,
                      predicted_output_tok_s_per_gpu_hi=out["predicted_output_tok_s_hi"] * ratio,
                      interval_basis=basis)


def sweep_band(df: pd.DataFrame, framework: str, value_col: str = "step_time_s",
               kind: str = "training", suffix: tuple[str, str] = ("_lo", "_hi")) -> pd.DataFrame:
    """Band columns ``<value_col>_lo`` / ``_hi`` for a sweep or compare frame (cell from
    ``framework`` and each row's ``hardware``; a ``--vary`` variant ``name[...]`` uses its
    base's generation), plus ``interval_basis``."""
    if df.empty or value_col not in df:
        return df
    names = df["hardware"].astype(str).str.split("[", n=1, regex=False).str[0]
    cell = training_cell_of if kind == "training" else (lambda fw, gen: f"{fw}/{gen}")
    bands = {n: band_for(kind, cell(framework, generation_of(n))) for n in names.unique()}
    q10 = names.map(lambda n: bands[n][0]).astype(float)
    q90 = names.map(lambda n: bands[n][1]).astype(float)
    v = pd.to_numeric(df[value_col], errors="coerce")
    base = value_col[:-2] if value_col.endswith("_s") else value_col
    unit = "_s" if value_col.endswith("_s") else ""
    return df.assign(**{f"{base}{suffix[0]}{unit}": v * np.exp(-q90),
                        f"{base}{suffix[1]}{unit}": v * np.exp(-q10),
                        "interval_basis": names.map(lambda n: bands[n][2])})


def coverage(measured, lo, hi) -> pd.Series:
    """True where ``lo <= measured <= hi``, NaN where any is missing or the measurement is
    not a finite number > 0 (the rows the error tables leave out: dse.predict.mape_table,
    dse.infer.predict_rows.error_long), so coverage and error count the same rows."""
    m, a, z = (pd.to_numeric(x, errors="coerce").astype(float) for x in (measured, lo, hi))
    inside = ((m >= a) & (m <= z)).astype(float)
    return inside.where(np.isfinite(m) & (m > 0) & a.notna() & z.notna())
