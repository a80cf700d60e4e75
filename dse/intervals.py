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
or GPU generation the calibration files never saw) uses the new-source band below, and
``interval_basis`` says so.

The new-source band (:func:`new_source_quantiles`): a user's run comes from a cluster,
software stack and publisher the files do not hold, and the model's error has a part
shared by every run of one source (a source's mean residual: BLOOM's three 2021 runs
-22 %, NeMo's H100 table 0 %, vTrain +2 %) on top of the scatter within one.  The band is
the 10th / 90th percentile of "a source's mean plus a within-source deviation", every
source weighing the same, so it carries the spread between sources that the pooled
residuals hide (1,549 of the 1,613 training residuals are vTrain's one source).

A cell's band is never narrower than the new-source one (``q10 = min(cell, new)``,
``q90 = max(cell, new)``): the constants were fitted on some rows of the cells that
have many (the 41 Megatron H100 calibration rows hold the Hopper GEMM and attention
fits), so their in-sample spread understates the error on runs the fit did not see.
(Measured on the out-of-sample suites of ``tests/data``, never used to size either rule:
training coverage 55 % (cell alone) -> 60 % (cell or pooled) -> 78 % (cell or new
source); serving output tok/s 50 -> 52 -> 58 %; docs/accuracy.md.)

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
NEW_SOURCE = "new_source"


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
    """``{kind: {cell: {n, q10, q90}, "overall": {...}, "new_source": {...}}}`` from a
    frame with columns ``kind``, ``cell``, ``residual`` and ``source`` (the new-source
    band, :func:`new_source_quantiles`, needs the last)."""
    out = {}
    for kind, g in residuals.groupby("kind"):
        cells = {}
        for cell, c in g.groupby("cell"):
            cells[cell] = _quantiles(c["residual"])
        cells[OVERALL] = _quantiles(g["residual"])
        if "source" in g:
            cells[NEW_SOURCE] = new_source_quantiles(g["residual"], g["source"])
        out[kind] = dict(sorted(cells.items()))
    return out


def new_source_quantiles(residual: pd.Series, source: pd.Series) -> dict:
    """The 10th / 90th percentile of the residual of a run from a source the files do not
    hold: a one-way random-effects model of the residuals (Gelman and Hill, "Data Analysis
    Using Regression and Multilevel/Hierarchical Models", 2007, ch. 12: a new group's
    outcome is its group effect plus the within-group noise).  With ``S`` sources, source
    ``s`` holding ``n_s`` residuals of mean ``m_s`` and within-source deviations
    ``e_i = r_i - m_s(i)``, the new run's residual is distributed as

        m_s + e_i   for every source s and row i,   weight  (1 / S) x 1 / (S n_s(i))

    -- each source one draw of the source effect, and each source's rows together one
    share of the noise, so vTrain's 1,549 rows weigh as much as BLOOM's three.  The
    quantiles are the weighted ones (the smallest value whose cumulative weight reaches
    p).  Returns ``{n, sources, q10, q90}``."""
    r = residual.to_numpy(float)
    src = source.astype(str).to_numpy()
    names, idx, counts = np.unique(src, return_inverse=True, return_counts=True)
    means = np.bincount(idx, weights=r) / counts
    dev = r - means[idx]
    s = len(names)
    vals = (means[:, None] + dev[None, :]).ravel()
    wts = np.broadcast_to(1.0 / (s * s * counts[idx]), (s, len(r))).ravel()
    order = np.argsort(vals, kind="stable")
    cum = np.cumsum(wts[order])
    q10, q90 = (vals[order][min(np.searchsorted(cum, p - 1e-12), len(vals) - 1)] for p in QUANTILES)
    return {"n": int(len(r)), "sources": int(s), "q10": round(float(q10), 6),
            "q90": round(float(q90), 6)}


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
    """(q10, q90, basis) of one cell, never narrower than the kind's new-source band
    (module docstring, "A cell's band"; the pooled quantiles where a fit predates it),
    falling back to that band for a cell with too few rows."""
    cells = load().get(kind, {})
    c = cells.get(cell)
    o = cells.get(NEW_SOURCE) or cells.get(OVERALL)
    big = c is not None and c["n"] >= MIN_ROWS
    if o is None:
        return (c["q10"], c["q90"], f"{cell} (n={c['n']})") if big else (math.nan, math.nan, "no interval fit")
    floor = (f"new-source spread, {o['sources']} sources, n={o['n']}" if "sources" in o
             else f"overall, n={o['n']}")
    if big:
        q10, q90 = min(c["q10"], o["q10"]), max(c["q90"], o["q90"])
        wide = "" if (q10, q90) == (c["q10"], c["q90"]) else f"; widened to the {floor}"
        return q10, q90, f"{cell} (n={c['n']}{wide})"
    why = f"{cell} has {c['n']} rows < {MIN_ROWS}" if c is not None else f"{cell} not in the calibration files"
    return o["q10"], o["q90"], f"{floor} ({why})"


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
