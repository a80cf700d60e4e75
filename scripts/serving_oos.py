"""The out-of-sample serving error: every measured serving file in ``tests/data`` predicted by
``dse predict``'s code path, the error per file and metric and pooled over all of them.

    .venv/bin/python scripts/serving_oos.py            # ~1 min on 2 cores

Each row is scored on every measured figure it has (output tokens/s, TTFT, TPOT,
end-to-end latency: the mean of their absolute relative errors), as ``dse validate`` scores
the inference calibration file; the row mean is then taken per file and over every row
(``pooled``).  Bias is the mean signed error of the figures (> 0: predicted above the
measurement -- faster for throughput, slower for the latencies).  Writes one line per
(row, figure) to ``results/serving_oos.csv`` (via a temporary file).  The files are the
held-out serving proxies of docs/accuracy.md: no constant is chosen on them."""

from __future__ import annotations

import sys

from held_out import ROOT, predict_files, write_results

FILES = ("serving", "inferencex_gptoss", "mlperf_inf_newhw", "trtllm_online_v014", "trtllm_v017")


def main() -> int:
    import pandas as pd
    from dse.infer.predict_rows import error_long
    preds = predict_files(FILES, "file")
    if preds is None:
        return 2
    e = pd.concat([error_long(p).assign(file=name) for p, name in zip(preds, FILES)],
                  ignore_index=True)
    e["ape"] = e["error"].abs()
    rows = e.groupby(["file", "id"])["ape"].mean().rename("row_ape").reset_index()
    by_file = rows.groupby("file")["row_ape"].agg(rows="count", row_mape="mean")
    by_file["bias"] = e.groupby("file")["error"].mean()
    print(by_file.round(3).to_string())
    by_metric = e.groupby(["file", "metric"]).agg(n=("ape", "size"), mape=("ape", "mean"),
                                                  bias=("error", "mean"))
    print(by_metric.round(3).to_string())
    print(f"pooled: {len(rows)} rows, {len(e)} figures, row mean {rows['row_ape'].mean():.4f}, "
          f"figure mean {e['ape'].mean():.4f}, bias {e['error'].mean():.4f}")
    write_results(e[["file", "source", "id", "metric", "measured", "predicted", "error"]],
                  "serving_oos.csv", "figures")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
