"""How much of its datasheet peak each GPU reaches in published training runs, measured and
predicted: a check of the per-generation efficiency constants (dse/spec/efficiency.py)
against runs they were not fitted on.

    PYTHONPATH=. .venv/bin/python scripts/achieved_fraction.py                 # the tests/data suites
    PYTHONPATH=. .venv/bin/python scripts/achieved_fraction.py FILE.csv ...    # any training files

Per row with a prediction and a measured iteration time, the model FLOPs per GPU per second
(``predicted_mfu`` x the GPU's bf16 peak: ``dse predict``'s MFU is against the 16-bit peak)
are rescaled from the predicted to the measured time, and both are divided by the peak of
the row's GEMM precision (bf16 / fp16: the 16-bit peak; fp8 and mxfp8: the fp8 peak; nvfp4:
the fp4 peak).  Printed per GPU and precision: rows, the median measured and predicted
fraction of that peak, and the median error of the predicted iteration time (> 0 predicts
slow).  A GPU whose measured fraction sits below its predicted one by the same ratio across
sources and layouts points at a generation constant; one that moves with the layout points
at a missing term.  Out of sample: never use it to choose a constant.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SUITES = ("nemo", "moe", "fsdp", "bridge_catalog", "bridge_nvfp4", "amd_training", "other",
          "mlperf_training")
PEAK = {"bf16": "peak_bf16_flops_per_s", "fp16": "peak_bf16_flops_per_s",
        "fp8": "peak_fp8_flops_per_s", "mxfp8": "peak_fp8_flops_per_s", "nvfp4": "peak_fp4_flops_per_s"}


def fractions(pred: pd.DataFrame) -> pd.DataFrame:
    """One row per scored prediction: gpu, precision, measured / predicted fraction of the
    precision's peak, error of the predicted iteration time."""
    from dse.row_status import has_prediction
    from dse.spec.hardware import get_hardware
    p = pred[has_prediction(pred["status"]) & (pred["measured_iter_time_s"] > 0)]
    rows = []
    for _, r in p.iterrows():
        hw = get_hardware(str(r.gpu))
        prec = str(r.precision).strip().lower()
        flops_per_s = float(r.predicted_mfu) * float(hw.peak_bf16_flops_per_s)   # at the predicted time
        peak = float(getattr(hw, PEAK.get(prec, "peak_bf16_flops_per_s")))
        ratio = float(r.predicted_iter_time_s) / float(r.measured_iter_time_s)
        rows.append({"gpu": r.gpu, "precision": prec, "measured": flops_per_s * ratio / peak,
                     "predicted": flops_per_s / peak, "error": ratio - 1.0})
    return pd.DataFrame(rows)


def main(argv: list[str]) -> int:
    from dse.jaxconfig import configure
    from dse.predict import predict_frame, read_csv
    configure()
    files = argv or [str(ROOT / "tests" / "data" / f"published_{s}.csv") for s in SUITES]
    frames = [fractions(predict_frame(read_csv(f), f)) for f in files]
    f = pd.concat(frames, ignore_index=True)
    table = f.groupby(["gpu", "precision"]).agg(rows=("error", "size"), measured=("measured", "median"),
                                                predicted=("predicted", "median"),
                                                error=("error", "median"))
    print("median fraction of the GEMM precision's dense peak (model FLOPs), measured vs predicted;")
    print("error = predicted / measured iteration time - 1 (median)")
    print(table.round(3).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
