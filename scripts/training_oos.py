"""The pooled out-of-sample training error: every ``tests/data/published_<suite>.csv``
training suite predicted by ``dse predict``'s code path, the error per suite and pooled.

    .venv/bin/python scripts/training_oos.py            # ~2.5 min on 2 cores

Prints mean absolute error, bias (predicted / measured - 1) and the share of measurements
inside the prediction's 80 % band (``dse.intervals``) per suite and over every row with a
prediction, and writes the rows to ``results/training_oos.csv`` (via a
temporary file).  The suites are the held-out proxies of docs/accuracy.md: no constant is
chosen on them."""

from __future__ import annotations

import sys

from held_out import ROOT, predict_files, write_results

SUITES = ("nemo", "fsdp", "moe", "other", "mlperf_training", "bridge_catalog", "bridge_nvfp4",
          "amd_training")


def main() -> int:
    import pandas as pd
    from dse.intervals import coverage
    frames = predict_files(SUITES, "suite")
    if frames is None:
        return 2
    p = pd.concat(frames, ignore_index=True)
    p["error"] = p["predicted_iter_time_s"] / p["measured_iter_time_s"] - 1.0
    p["in_band"] = coverage(p["measured_iter_time_s"], p["predicted_iter_time_lo_s"],
                            p["predicted_iter_time_hi_s"])
    scored = p[p["error"].notna()]
    by = scored.groupby("suite").agg(n=("error", "size"), mape=("error", lambda e: e.abs().mean()),
                                     bias=("error", "mean"), in_band=("in_band", "mean"))
    print(by.round(3).to_string())
    print(f"pooled: n={len(scored)} of {len(p)} rows, mape={scored['error'].abs().mean():.4f}, "
          f"bias={scored['error'].mean():.4f}, inside the 80 % band {scored['in_band'].mean():.3f}")
    cols = ["suite", "id", "gpu", "measured_iter_time_s", "predicted_iter_time_s", "error", "in_band",
            "status"]
    write_results(p[cols], "training_oos.csv", "rows")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
