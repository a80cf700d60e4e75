"""OUT-OF-SAMPLE serving suite: published serving measurements that are NOT in the
calibration file (data/validation/inference/calibration.csv) and never choose a constant.

Data: tests/data/published_serving.csv (the calibration file's schema, plus the two
optional columns `dse predict` documents for the inference schema, ``attn_dp`` and
``kv_precision``); provenance per source and per row in tests/data/published_serving.md.
Sources: TensorRT-LLM perf-overview tables (release 1.0, the developer guide, release 1.2
with B300/GB300 beta), MLPerf Inference v5.1 closed (B200, GB200, MI300X, MI325X),
dstack's DeepSeek-R1 concurrency sweep (vLLM, SGLang, TensorRT-LLM on 8x H200 and 8x
MI300X), NVIDIA NIM's Llama-3.3-70B concurrency sweep into saturation (2x H100), and AMD's
vLLM ROCm static-batch latencies of Llama-3.1-70B / 405B (8x MI300X), LMDeploy's TurboMind
tables on A100, dstack's TGI runs of Llama-3.1-405B on 8x MI300X and SemiAnalysis InferenceX's
DeepSeek-R1 concurrency sweeps (SGLang, TensorRT-LLM; H200 to B300, MI300X to MI355X).  Newer GPUs, FP4, MoE families (Qwen3, Llama-4, DeepSeek-R1, gpt-oss), other
engines (LMDeploy TurboMind on A100, TGI on MI300X) and concurrency sweeps into saturation: what the issue says we will be scored on.

Every row runs through the code path of `dse validate` / `dse predict`
(dse.predict.predict_frame -> dse.infer.predict_rows), and the error is printed per source,
metric, GPU and precision (``pytest -s`` shows it).

The bounds below are REGRESSION GUARDS, each a little above today's error, so that a
change that makes the out-of-sample error worse fails.  They are NOT the target: the
issue's target on unseen serving runs is <= 15 % (row mean), which today only the dense
rows come near (the MoE and early-2025 DeepSeek rows are far off; see the .md's
"Today's error" section).  Never tune a constant to these rows.
"""

import csv
from pathlib import Path

import pandas as pd
import pytest

from dse.infer.predict_rows import error_long, error_tables
from dse.predict import predict_frame, read_csv
from tests.helpers import validation_dir

DATA = Path(__file__).parent / "data"
CSV = DATA / "published_serving.csv"
MD = DATA / "published_serving.md"

# a little above today's error (row mean 24.3 % over 295 scored rows; per metric tok/s 29.3, TTFT 34.5,
# TPOT 23.1, e2e 22.8 %; the InferenceX DeepSeek-R1 rows 20.6 %; the 10 new-architecture rows,
# DeepSeek-V3.2 / Qwen3-Next / Qwen3.5, 30 %) -- the REAL target, from the
# issue, is <= 15 % on measured serving runs the model has not seen
ROW_MEAN_REGRESSION_GUARD = 0.26
METRIC_REGRESSION_GUARD = {"output_tok_s": 0.31, "ttft_ms": 0.36, "tpot_ms": 0.25,
                           "e2e_latency_ms": 0.24}
# dense models' throughput (today 9.7 %; the LMDeploy A100 rows' 70B TP4 cells at concurrency 64 are
# +41 / +43 %): the subset closest to the 15 % target
DENSE_THROUGHPUT_REGRESSION_GUARD = 0.11
MOE_WORDS = ("Qwen3", "Llama-4", "DeepSeek", "gpt-oss", "Mixtral")


@pytest.fixture(scope="module")
def predictions():
    return predict_frame(read_csv(str(CSV)), str(CSV))


@pytest.fixture(scope="module")
def errors(predictions):
    e = error_long(predictions)
    keep = ["id", "model", "hardware", "precision", "engine", "scenario"]
    e = e.merge(predictions[keep], on="id")
    e["ape"] = e["error"].abs()
    e["family"] = e["model"].map(lambda m: "moe" if any(w in m for w in MOE_WORDS) else "dense")
    return e


def _table(e, by):
    return (e.groupby(by).agg(n=("ape", "size"), mape=("ape", "mean"), bias=("error", "mean"),
                              max_err=("ape", "max")).round(3).to_string())


@pytest.mark.validation
def test_print_out_of_sample_error(errors, predictions):
    """The per-source / metric / GPU / precision error (printed; asserts only that every
    source is scored)."""
    by_sm, by_m, by_s, overall = error_tables(predictions)
    print("\nOUT-OF-SAMPLE serving error (tests/data/published_serving.csv)")
    print(by_sm.round(3).to_string())
    print(by_s.round(3).to_string())
    print(_table(errors, ["source", "hardware", "precision", "metric"]))
    print(_table(errors, ["family", "precision", "metric"]))
    print({k: round(float(v), 4) for k, v in overall.items()})
    from dse.infer.predict_rows import measured_system_tok_s
    from dse.intervals import coverage
    inside = coverage(measured_system_tok_s(predictions), predictions["predicted_output_tok_s_lo"],
                      predictions["predicted_output_tok_s_hi"])
    print(f"output tok/s inside the 80 % band: {inside.mean():.3f} of {int(inside.notna().sum())} rows")
    assert set(by_s.index) == set(predictions["source_id"])


@pytest.mark.validation
def test_every_row_predicted_or_explained(predictions):
    """Each row gets a status: a prediction, or why it cannot be expressed."""
    assert predictions["status"].notna().all()
    bad = predictions[~predictions["status"].astype(str).str.startswith(("ok", "infeasible"))]
    assert bad.empty, bad[["id", "status"]].values.tolist()
    assert (predictions["status"].astype(str).str.startswith("ok")).mean() >= 0.95


def test_rows_are_out_of_sample_and_traceable():
    """No row repeats a calibration measurement; every row names its source file and is
    listed, by id, in the provenance file."""
    rows = list(csv.DictReader(open(CSV)))
    cal = list(csv.DictReader(open(validation_dir() / "inference" / "calibration.csv")))
    assert list(rows[0].keys())[:len(cal[0])] == list(cal[0].keys())   # the calibration schema first
    meas = ("measured_output_tok_s", "measured_output_tok_s_per_gpu", "measured_ttft_ms",
            "measured_tpot_ms", "measured_e2e_latency_ms")
    seen = {(c["model"], c["hardware"], c[m]) for c in cal for m in meas if c[m]}
    dup = [r["id"] for r in rows for m in meas if r[m] and (r["model"], r["hardware"], r[m]) in seen]
    assert not dup, dup
    assert not {r["source_id"] for r in rows} & {c["source_id"] for c in cal}
    md = MD.read_text()
    assert all(r["source_url_or_repo_path"] for r in rows)
    missing = [r["id"] for r in rows if f"| {r['id']} |" not in md]
    assert not missing, missing
    assert len(rows) >= 40 and len({r["source_id"] for r in rows}) >= 4


@pytest.mark.validation
def test_out_of_sample_row_mean_regression_guard(predictions):
    *_, overall = error_tables(predictions)
    assert overall["row_mape"] <= ROW_MEAN_REGRESSION_GUARD, overall


@pytest.mark.validation
@pytest.mark.parametrize("metric", sorted(METRIC_REGRESSION_GUARD))
def test_out_of_sample_metric_regression_guard(predictions, metric):
    _, by_m, _, _ = error_tables(predictions)
    assert by_m.loc[metric, "mape"] <= METRIC_REGRESSION_GUARD[metric], by_m.to_string()


@pytest.mark.validation
def test_out_of_sample_dense_throughput_regression_guard(errors):
    d = errors[(errors["family"] == "dense") & (errors["metric"] == "output_tok_s")]
    assert len(d) >= 30
    assert d["ape"].mean() <= DENSE_THROUGHPUT_REGRESSION_GUARD, \
        pd.DataFrame(d[["id", "hardware", "precision", "error"]]).round(3).to_string()
