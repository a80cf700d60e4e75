"""`dse validate` for the inference schema: predicted vs measured serving figures.

Each row is scored on every measured figure it has (output tokens/s of the system --
``measured_output_tok_s`` or the per-GPU column x ``gpus`` --, TTFT, TPOT, end-to-end
latency).  Prints, per source and per metric, the number of figures, the mean absolute
percentage error (MAPE), the signed mean error (bias: > 0 predicts high) and the largest
error; then per source the row-mean error (each row: the mean of its figures' absolute
errors) and the overall row-mean and figure-mean; then, for every concurrency sweep (rows
that differ only in the concurrency), the fixed per-step and per-request parts of its TPOT,
measured and predicted (:mod:`dse.infer.tpot_sweeps`), with a sentence computed from them.
Writes to ``out``: ``predictions.csv`` (every row with its predictions, chosen settings and
status), ``errors.csv`` (one line per scored figure), ``mape_by_source.csv``,
``tpot_sweeps.csv``, the plots ``scatter.png`` (predicted against measured per metric),
``bias_by_source.png`` (signed error per source and metric) and, where the file has
concurrency sweeps, ``tpot_sweeps.png`` (:mod:`dse.report.serving_validation_plots`), and a
manifest.
"""

from __future__ import annotations

import pandas as pd

from dse.errors import InputError, require
from dse.infer.predict_rows import MEASURED, error_long, error_tables, predict_inference_frame
from dse.infer.tpot_sweeps import sweep_summary, tpot_sweeps
from dse.predict import unusable_measures
from dse.row_status import has_prediction
from dse.report.atomic import check_output_dir, make_output_dir, write_csv


def _pct(x):
    return f"{x:+.1%}" if x == x else "-"


def _bad_measurements(pred: pd.DataFrame) -> list:
    """Measured figures given (not blank) but not a finite number > 0: left out of every
    error table (error_long), listed here as ``(row id, column, raw value)`` so they are
    not dropped silently."""
    cols = [*MEASURED.values(), "measured_output_tok_s_per_gpu"]
    return [(rid, c, raw) for c in cols for rid, raw in unusable_measures(pred, c)]


def serving_coverage(pred: pd.DataFrame) -> pd.DataFrame:
    """Per source and overall: measured system output tokens/s inside ``[lo, hi]``."""
    from dse.infer.predict_rows import measured_system_tok_s
    from dse.intervals import coverage
    if "predicted_output_tok_s_lo" not in pred:
        return pd.DataFrame()
    inside = coverage(measured_system_tok_s(pred), pred["predicted_output_tok_s_lo"],
                      pred["predicted_output_tok_s_hi"])
    d = pd.DataFrame({"source": pred["source_id"], "inside": inside}).dropna()
    if d.empty:
        return d
    g = d.groupby("source")["inside"].agg(rows="count", inside="mean")
    g.loc["overall"] = [len(d), d["inside"].mean()]
    g["rows"] = g["rows"].astype(int)
    return g


def run_inference_validation(df: pd.DataFrame, path: str, out: str | None) -> pd.DataFrame:
    """Raises :class:`InputError` when the file has no ``source_id`` column (the error
    tables are per source, as training's ``source``) or when no row has both a prediction
    and a measured figure to score."""
    require("source_id" in df.columns, path, "source_id", "column is required by `dse validate` "
            "(the errors are reported per source)")
    if out is not None:
        o = check_output_dir(out, "--out", create=False)   # made once there is something to write
    pred = predict_inference_frame(df, path)
    src = pred["source_id"]
    blank = src.isna() | (src.astype(str).str.strip() == "")
    pred.loc[blank & has_prediction(pred["status"]), "status"] = "invalid: source_id: must be a non-empty name"
    errors = error_long(pred)                             # the figures scored
    by_sm, by_m, by_s, overall = error_tables(pred, errors)
    if overall["figures"] == 0:
        n_ok = int(has_prediction(pred["status"]).sum())
        raise InputError(path, "measured_*", "at least one row must have a prediction (status ok) "
                         "and a measured figure that is a finite number > 0 to score, but got "
                         f"none ({n_ok} of {len(pred)} rows predicted; dse predict shows their status)")
    fmt = {"mape": "{:.1%}".format, "bias": "{:+.1%}".format, "max_err": "{:.1%}".format,
           "row_mape": "{:.1%}".format}
    with pd.option_context("display.width", 200):
        print("serving: error per source and metric (bias = mean signed error, > 0 predicts high)")
        print(by_sm.to_string(formatters=fmt))
        print("\nper metric")
        print(by_m.to_string(formatters=fmt))
        print("\nper source (row_mape: each row scored on every figure it has)")
        print(by_s.to_string(formatters=fmt))
    print(f"\noverall: {overall['rows']} rows, row-mean error {overall['row_mape']:.1%}; "
          f"{overall['figures']} figures, figure-mean error {overall['figure_mape']:.1%}, "
          f"bias {_pct(overall['bias'])}")
    cov = serving_coverage(pred)
    if len(cov):
        print("\noutput tokens/s inside the 80 % interval (dse.intervals), per source")
        print(cov.to_string(formatters={"inside": "{:.1%}".format}))
    sweeps = tpot_sweeps(pred)
    if len(sweeps):
        print("\nTPOT of each concurrency sweep as fixed + slope x concurrency (least squares; "
              "ms, ms per request in flight; dse.infer.tpot_sweeps)")
        show = ["source_id", "hardware", "precision", "engine", "layout", "input_len", "output_len",
                "points", "c_min", "c_max", "fixed_ms_measured", "fixed_ms_predicted",
                "slope_ms_measured", "slope_ms_predicted"]
        table = sweeps[show].assign(engine=sweeps["engine"].astype(str).str.slice(0, 40))
        with pd.option_context("display.width", 250):
            print(table.to_string(index=False, float_format="{:.3g}".format))
        print(sweep_summary(sweeps))
    given_bad = _bad_measurements(pred)
    if given_bad:
        print(f"excluded from the errors: {len(given_bad)} measured figure(s) that are not "
              "finite numbers > 0")
        for rid, col, raw in given_bad:
            print(f"  row id {rid}: {col}: must be a finite number > 0 or blank, but got {raw!r}")
    bad = pred[~has_prediction(pred["status"])]
    if len(bad):
        print(f"not predicted: {len(bad)} of {len(pred)} rows")
        for _, r in bad.iterrows():
            print(f"  row id {r['id']}: {r['status']}")
    if out is not None:
        o = make_output_dir(o, "--out")
        write_csv(pred, o / "predictions.csv", index=False)
        write_csv(errors, o / "errors.csv", index=False)
        write_csv(by_sm, o / "mape_by_source.csv")
        write_csv(sweeps, o / "tpot_sweeps.csv", index=False)
        from dse.report import serving_validation_plots as svp
        svp.scatter(errors, o / "scatter.png")
        svp.bias_by_source(errors, o / "bias_by_source.png")
        plots = "scatter.png, bias_by_source.png, "
        if len(sweeps):
            svp.tpot_sweeps_plot(pred, sweeps, o / "tpot_sweeps.png")
            plots += "tpot_sweeps.png, "
        from dse.report.manifest import write_manifest
        from dse.report.manifest import file_sha256 as _sha256
        write_manifest(o, None, {"input": str(path), "input_sha256": _sha256(path)})
        print(f"wrote {o}/predictions.csv, errors.csv, mape_by_source.csv, tpot_sweeps.csv, "
              f"{plots}manifest.json")
    return pred
