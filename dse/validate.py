"""`dse validate`: predicted vs measured iteration time (and memory) per source.

Prints a table per source (rows, MAPE, signed bias, max error, and the coverage of the
80 % prediction interval: the share of measurements inside ``[lo, hi]``,
:mod:`dse.intervals`) and overall, and writes to ``out``: ``predictions.csv`` (every
row, prediction, band, memory breakdown, error, chosen settings), ``scatter.png``
(predicted vs measured with the identity, a +-10 % band and each row's interval),
``error_breakdown.png`` (signed error by GPU generation and model size) and
``bias_by_source.png`` (signed error per source with the interval band).
"""

from __future__ import annotations


import pandas as pd

from dse.errors import InputError, require
from dse.predict import mape_table, positive_measure, predict_frame, read_csv, unusable_measures
from dse.row_status import has_prediction
from dse.report.atomic import check_output_dir, write_csv


VALIDATE_REQUIRED = ("measured_iter_time_s", "source")


def memory_error(pred: pd.DataFrame) -> pd.DataFrame:
    """Rows with a prediction and a measured peak memory that is a finite number > 0."""
    if "measured_mem_gib" not in pred.columns:
        return pred.iloc[:0].assign(mem_err=pd.Series(dtype=float))
    d = pred[has_prediction(pred["status"]) & positive_measure(pred["measured_mem_gib"])].copy()
    m = d["measured_mem_gib"].astype(float)
    d["mem_err"] = (d["predicted_mem_gib"].astype(float) - m).abs() / m
    return d


def _plain(v):
    """A numpy scalar as the Python value (for messages)."""
    return v.item() if hasattr(v, "item") else v


def check_measurements(pred: pd.DataFrame) -> pd.DataFrame:
    """Rows whose ``source`` is blank or whose ``measured_iter_time_s`` is not a finite
    number > 0 get status ``invalid: <column>: <rule>`` (their prediction is kept, they
    are left out of the MAPE)."""
    pred = pred.copy()
    src = pred["source"]
    blank = src.isna() | (src.astype(str).str.strip() == "")
    ok_time = positive_measure(pred["measured_iter_time_s"])
    predicted = has_prediction(pred["status"])
    for i in pred.index[predicted]:
        if blank[i]:
            pred.at[i, "status"] = "invalid: source: must be a non-empty name"
        elif not ok_time[i]:
            pred.at[i, "status"] = ("invalid: measured_iter_time_s: must be a finite number > 0, "
                                    f"but got {_plain(pred.at[i, 'measured_iter_time_s'])!r}")
    for c in ("measured_iter_time_s", "measured_mem_gib"):   # the reasons are in the status
        if c in pred.columns:
            pred[c] = pd.to_numeric(pred[c], errors="coerce").astype(float)
    return pred


def coverage_table(pred: pd.DataFrame) -> pd.DataFrame:
    """Per source and overall: rows with a band and a measurement, the share inside it,
    and the shares below / above it."""
    from dse.intervals import coverage
    d = pred[has_prediction(pred["status"]) & positive_measure(pred["measured_iter_time_s"])].copy()
    if "predicted_iter_time_lo_s" not in d or d.empty:
        return pd.DataFrame(columns=["rows", "inside", "below", "above"])
    m = d["measured_iter_time_s"].astype(float)
    d["inside"] = coverage(m, d["predicted_iter_time_lo_s"], d["predicted_iter_time_hi_s"])
    d = d[d["inside"].notna()]
    d["below"] = (m < d["predicted_iter_time_lo_s"]).astype(float)
    d["above"] = (m > d["predicted_iter_time_hi_s"]).astype(float)
    g = d.groupby("source")[["inside", "below", "above"]].mean()
    g.insert(0, "rows", d.groupby("source").size())
    g.loc["overall"] = [len(d), d["inside"].mean(), d["below"].mean(), d["above"].mean()]
    g["rows"] = g["rows"].astype(int)
    return g


def run_validation(path: str, out: str | None, mem_margin: float | None = None) -> pd.DataFrame:
    from dse.train.memory_parts import PREDICT_MEM_MARGIN
    mem_margin = PREDICT_MEM_MARGIN if mem_margin is None else mem_margin
    df = read_csv(path)
    if "scenario" in df.columns:
        from dse.validate_inference import run_inference_validation
        return run_inference_validation(df, path, out)
    for c in VALIDATE_REQUIRED:
        require(c in df.columns, path, c, "column is required by `dse validate`")
    if out is not None:
        o = check_output_dir(out, "--out")
    pred = predict_frame(df, path, mem_margin=mem_margin)
    bad_mem = unusable_measures(pred, "measured_mem_gib")   # named per row, before coercion
    pred = check_measurements(pred)
    valid = has_prediction(pred["status"])
    m = pred["measured_iter_time_s"]
    pred["error"] = (pred["predicted_iter_time_s"].astype(float) - m) / m
    pred.loc[~valid, "error"] = float("nan")
    table = mape_table(pred)
    cov = coverage_table(pred)
    if len(cov):
        table = table.join(cov["inside"].rename("in_band"))
    if valid.any():
        print("iteration time: mean absolute percentage error, signed bias (> 0 predicts slow) "
              "and the share of measurements inside the 80 % interval, per source")
        pct = "{:.1%}".format
        print(table.to_string(formatters={"mape": pct, "bias": "{:+.1%}".format, "max_err": pct,
                                          "in_band": pct}))
        if len(cov):
            o_ = cov.loc["overall"]
            print(f"interval coverage: {o_['inside']:.1%} of {int(o_['rows'])} measurements inside "
                  f"[lo, hi] (nominal 80 % in sample), {o_['below']:.1%} below (faster than lo), "
                  f"{o_['above']:.1%} above (slower than hi)")
    bad = pred[~valid]
    if len(bad):
        n_inv = int(bad["status"].str.startswith("invalid:").sum())
        print(f"excluded from the MAPE: {len(bad)} of {len(pred)} rows "
              f"({n_inv} invalid, {len(bad) - n_inv} without a feasible prediction)")
    for _, r in bad.iterrows():
        what = "excluded" if r["status"].startswith("invalid: measured") or \
            r["status"].startswith("invalid: source") else "no prediction"
        print(f"  row id {r['id']}: {what}: {r['status']}")
    mem = memory_error(pred)
    if not valid.any() and not len(mem):
        n_ok = int(has_prediction(pred["status"]).sum())
        raise InputError(path, "measured_iter_time_s", "at least one row must have a prediction "
                         "(status ok) and a measured time or memory that is a finite number > 0 "
                         f"to score, but got none ({n_ok} of {len(pred)} rows predicted; the "
                         "lines above give each excluded row's reason)")
    if not valid.any():
        print("iteration time: no row has both a prediction and a valid measured time: no MAPE")
    if len(mem):
        print(f"peak memory: {len(mem)} rows, MAPE {mem['mem_err'].mean():.1%}, "
              f"max {mem['mem_err'].max():.1%}")
    from dse.decision import print_decision
    print_decision(pred)
    for rid, raw in bad_mem:
        print(f"  row id {rid}: peak memory excluded: measured_mem_gib: must be a finite number "
              f"> 0 or blank, but got {raw!r}")
    if out is not None:
        write_csv(pred, o / "predictions.csv", index=False)
        write_csv(table, o / "mape_by_source.csv")
        if valid.any():
            from dse.report.validation_plots import bias_by_source, error_breakdown, scatter
            scatter(pred, o / "scatter.png")
            error_breakdown(pred, o / "error_breakdown.png")
            bias_by_source(pred, o / "bias_by_source.png")
            plots = "scatter.png, error_breakdown.png, bias_by_source.png, "
        else:
            plots = ""
        from dse.report.manifest import file_sha256, write_manifest
        write_manifest(o, None, {"input": str(path), "input_sha256": file_sha256(path)})
        print(f"wrote {o}/predictions.csv, mape_by_source.csv, {plots}manifest.json")
    return pred
