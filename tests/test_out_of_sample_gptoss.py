"""InferenceX gpt-oss-120b on one node, out of sample (tests/data/published_inferencex_gptoss.csv +
.md): 144 vLLM 0.13 points on H100 / H200 / B200 and 33 TensorRT-LLM 1.2 points on B200,
concurrency 4-64.  Never used to choose a constant.  Regression guards a little above today's error,
not the target (the issue's is <= 15 % on held-out serving runs)."""

from pathlib import Path

import pytest

from tests.helpers import throughput_errors

CSV = Path(__file__).parent / "data" / "published_inferencex_gptoss.csv"
METRICS = ("output_tok_s", "ttft_ms", "tpot_ms", "e2e_latency_ms")


@pytest.fixture(scope="module")
def predictions():
    p = throughput_errors(CSV)
    for m in METRICS:
        p[f"e_{m}"] = p[f"predicted_{m}"] / p[f"measured_{m}"] - 1.0
    return p


@pytest.mark.validation
def test_every_row_predicted(predictions):
    assert len(predictions) == 177 and (predictions["status"] == "ok").all()


@pytest.mark.validation
def test_vllm_runs_the_async_scheduling_its_config_file_sets(predictions):
    """The vLLM 0.13 servers read ``async-scheduling: true`` from their ``--config`` YAML: the
    overlapped host step (``vllm_v1_async``); read from the engine text alone they were the serial
    0.13 default and TPOT 30-85 % slow."""
    v = predictions[predictions["engine"].str.startswith("vllm")]
    assert (v["chosen_engine"] == "vllm_v1_async").all()


@pytest.mark.validation
def test_gptoss_regression_guard(predictions):
    """Today: row mean 14.3 % (every measured figure); throughput vLLM H100 8.6 %, H200 8.2 %,
    B200 11.8 %, TensorRT-LLM B200 13.9 %; TTFT still short on every vLLM GPU (-19 % B200,
    -26 % H100, -28 % H200: the prefill of the 1k prompts looks about twice the model's on
    Hopper, open).  H200 throughput 19.6 -> 8.2 % since the W4A16 experts stream at the
    CUDA cores' dequantization rate (dse.infer.moe_serving), read off kernel tables."""
    p = predictions
    row = p[[f"e_{m}" for m in METRICS]].abs().mean(axis=1)
    assert row.mean() <= 0.15, row.mean()
    tput = p["e_output_tok_s"].abs().groupby([p["chosen_engine"], p["hardware"]]).mean()
    assert tput.max() <= 0.16 and p["e_output_tok_s"].abs().mean() <= 0.12, tput.round(3).to_dict()
