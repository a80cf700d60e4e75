"""`dse validate`: predicted vs measured iteration time (and memory) per source.

Prints a table per source (rows, MAPE, max error) and overall, and writes to ``out``:
``predictions.csv`` (every row, prediction, error, chosen settings), ``scatter.png``
(log-log predicted vs measured with the identity and a +-10 % band, coloured by source)
and ``error_breakdown.png`` (error by GPU generation and by model size).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dse.predict import mape_table, predict_frame, read_csv


def _sha256(path: str) -> str:
    import hashlib
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def memory_error(pred: pd.DataFrame) -> pd.DataFrame:
    d = pred[(pred["status"] == "ok") & pred["measured_mem_gib"].notna()].copy()
    d["mem_err"] = (d["predicted_mem_gib"] - d["measured_mem_gib"]).abs() / d["measured_mem_gib"]
    return d


def run_validation(path: str, out: str | None) -> pd.DataFrame:
    pred = predict_frame(read_csv(path), path)
    pred["error"] = (pred["predicted_iter_time_s"] - pred["measured_iter_time_s"]) / pred["measured_iter_time_s"]
    table = mape_table(pred)
    print("iteration time: mean absolute percentage error per source")
    print(table.to_string(formatters={"mape": "{:.1%}".format, "max_err": "{:.1%}".format}))
    bad = pred[pred["status"] != "ok"]
    for _, r in bad.iterrows():
        print(f"  row id {r['id']}: no prediction: {r['status']}")
    mem = memory_error(pred)
    if len(mem):
        print(f"peak memory: {len(mem)} rows, MAPE {mem['mem_err'].mean():.1%}, "
              f"max {mem['mem_err'].max():.1%}")
    from dse.decision import print_decision
    print_decision(pred)
    if out:
        o = Path(out)
        o.mkdir(parents=True, exist_ok=True)
        pred.to_csv(o / "predictions.csv", index=False)
        table.to_csv(o / "mape_by_source.csv")
        from dse.report.validation_plots import error_breakdown, scatter
        scatter(pred, o / "scatter.png")
        error_breakdown(pred, o / "error_breakdown.png")
        from dse.report.manifest import write_manifest
        write_manifest(o, None, {"input": str(path), "input_sha256": _sha256(path)})
        print(f"wrote {o}/predictions.csv, scatter.png, error_breakdown.png, manifest.json")
    return pred
