"""Fit the prediction intervals (dse/intervals.py) from the calibration files.

    PYTHONPATH=. .venv/bin/python scripts/fit_intervals.py            # data/validation
    PYTHONPATH=. .venv/bin/python scripts/fit_intervals.py --validation-dir DIR

Runs the predictor on ``calibration.csv``, ``vtrain.csv`` (training) and
``inference/calibration.csv`` (serving), and writes

* ``dse/data/interval_residuals.csv``: one row per prediction with a valid measurement
  (kind, file, id, source, cell, predicted, measured, residual = ln(predicted/measured));
* ``dse/data/intervals.json``: the 10th / 90th percentile of the residuals per cell and
  overall per kind, with the inputs' sha256.

Rerun it whenever the cost model or the calibration files change
(``tests/test_intervals.py`` re-predicts a sample of the stored rows and fails when the
stored residuals are stale).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TRAINING = ("calibration.csv", "vtrain.csv")
SERVING = ("inference/calibration.csv",)


def training_residuals(path: Path, name: str) -> pd.DataFrame:
    from dse.intervals import training_cell
    from dse.predict import positive_measure, predict_frame, read_csv
    p = predict_frame(read_csv(str(path)), str(path), intervals=False)
    ok = (p["status"] == "ok") & positive_measure(p["measured_iter_time_s"])
    d = p[ok]
    pred, meas = d["predicted_iter_time_s"].astype(float), d["measured_iter_time_s"].astype(float)
    return pd.DataFrame({"kind": "training", "file": name, "id": d["id"].astype(str),
                         "source": d["source"].astype(str),
                         "cell": [training_cell(r) for r in d.to_dict("records")],
                         "predicted": pred, "measured": meas, "residual": np.log(pred / meas)})


def serving_residuals(path: Path, name: str) -> pd.DataFrame:
    from dse.infer.predict_rows import measured_system_tok_s
    from dse.intervals import serving_cell
    from dse.predict import predict_frame, read_csv
    p = predict_frame(read_csv(str(path)), str(path), intervals=False)
    meas = measured_system_tok_s(p)
    pred = pd.to_numeric(p["predicted_output_tok_s"], errors="coerce")
    ok = p["status"].astype(str).str.startswith("ok") & (meas > 0) & (pred > 0)
    d = p[ok]
    return pd.DataFrame({"kind": "serving", "file": name, "id": d["id"].astype(str),
                         "source": d["source_id"].astype(str),
                         "cell": [serving_cell(r) for r in d.to_dict("records")],
                         "predicted": pred[ok], "measured": meas[ok],
                         "residual": np.log(pred[ok] / meas[ok])})


def main(argv=None) -> int:
    from dse.intervals import DATA, MIN_ROWS, QUANTILES, RESIDUALS, fit_cells
    from dse.jaxconfig import configure
    configure()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--validation-dir", default=str(ROOT / "data" / "validation"))
    a = ap.parse_args(argv)
    vd = Path(a.validation_dir)
    parts, inputs = [], {}
    for name in TRAINING + SERVING:
        path = vd / name
        inputs[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        fn = serving_residuals if name in SERVING else training_residuals
        parts.append(fn(path, name))
        print(f"{name}: {len(parts[-1])} residuals")
    res = pd.concat(parts, ignore_index=True)
    res["predicted"] = res["predicted"].round(6)
    res["residual"] = res["residual"].round(6)
    DATA.parent.mkdir(exist_ok=True)
    res.to_csv(RESIDUALS, index=False)
    cells = fit_cells(res)
    DATA.write_text(json.dumps({"generated_by": "scripts/fit_intervals.py", "inputs": inputs,
                                "min_rows": MIN_ROWS, "quantiles": list(QUANTILES),
                                "residual": "ln(predicted / measured)", "cells": cells},
                               indent=1) + "\n")
    for kind, cs in cells.items():
        for cell, c in cs.items():
            print(f"  {kind:8s} {cell:28s} n={c['n']:5d}  band x[{np.exp(-c['q90']):.3f}, "
                  f"{np.exp(-c['q10']):.3f}] of the prediction")
    print(f"wrote {DATA.relative_to(ROOT)} and {RESIDUALS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
