"""TensorRT-LLM's v0.17 throughput table, out of sample (tests/data/published_trtllm_v017.csv + .md):
319 offline runs of Llama 3.1 8B / 70B / 405B, Mistral 7B (v0.1) and Mixtral 8x7B / 8x22B on H200,
H100, GH200 (96 GB HBM3) and A100, TP 1-8, nine ISL/OSL pairs from 128/128 to 20000/2000.  The sibling of the calibration's v0.13 rows, never
used to choose a constant.  A regression guard a little above today's error, not the target (the
issue's is <= 15 % on held-out serving runs)."""

from pathlib import Path

import pytest

from dse.predict import predict_frame, read_csv
from tests.helpers import throughput_errors

CSV = Path(__file__).parent / "data" / "published_trtllm_v017.csv"


@pytest.fixture(scope="module")
def predictions():
    return throughput_errors(CSV)


@pytest.mark.validation
def test_every_row_predicted(predictions):
    assert (predictions["status"] == "ok").all(), \
        predictions.loc[predictions["status"] != "ok", ["id", "status"]].to_string()
    assert len(predictions) == 319


@pytest.mark.validation
def test_trtllm_v017_throughput_regression_guard(predictions):
    """Today (docs/accuracy.md): 10.7 % mean absolute error, bias -6.6 %; dense (Llama 148
    rows 7.6 %, Mistral 36 rows 6.2 %) 7.3 %, Mixtral (135 rows) 15.3 % and 13.0 % too slow,
    most at the prefill-heavy pairs (2048/128 -30 %, 5000/500 -23 %): the grouped-GEMM
    constant fitted on the calibration's decode-heavy Mixtral rows; per GPU H200 9.7, H100
    11.4, GH200 9.6, A100 11.5 %."""
    e = predictions["err"]
    assert e.abs().mean() <= 0.125, predictions[["id", "err"]].round(3).to_string()
    moe = predictions["model"].str.contains("Mixtral")
    assert e[~moe].abs().mean() <= 0.095 and e[moe].abs().mean() <= 0.175
    gpu = predictions["hardware"].str.extract(r"(h200|h100|gh200|a100)")[0]
    by_gpu = e.abs().groupby(gpu).mean()
    assert (by_gpu <= 0.16).all(), by_gpu.round(3).to_dict()


@pytest.mark.validation
def test_mistral_v01_runs_full_attention_under_tensorrt_llm(predictions):
    """Mistral 7B v0.1 puts a 4096-token sliding window on every layer; TensorRT-LLM's C++
    runtime attends the whole cache unless the launch sets ``max_attention_window``
    (dse.infer.engines.served_model).  The 20000/2000 runs say so: they match Llama 3.1 8B's
    (the same layer shapes) within 3 %, and are predicted within 16 % (2.0-2.4x with the
    window applied)."""
    p = predictions[predictions["input_len"] == 20000]
    mis = p[p["model"].str.contains("Mistral")].set_index("hardware")
    lla = p[p["model"].str.endswith("Llama-3.1-8B")].set_index("hardware")
    ratio = mis["measured_output_tok_s"] / lla.loc[mis.index, "measured_output_tok_s"]
    assert len(mis) == 4 and ((ratio - 1).abs() <= 0.03).all(), ratio.to_dict()
    assert (mis["err"].abs() <= 0.17).all(), mis["err"].to_dict()


@pytest.mark.validation
def test_the_96_gb_gh200_is_the_one_that_ran(predictions):
    """'GH200 480GB' is the 96 GB HBM3 part (catalog ``gh200-96gb``): Llama 3.1 70B FP8 at TP 1 (70 GB of weights) has
    about 20 GB of KV cache there, against about 65 GB on the 144 GB HBM3e catalog entry, and
    the measured throughput sits between the H100's and the H200's as the 96 GB part predicts."""
    p = predictions
    gh = p[(p["hardware"] == "gh200-96gb") & p["model"].str.endswith("70B")]
    assert len(gh) == 8 and gh["err"].abs().mean() <= 0.12
    raw = read_csv(str(CSV))
    big = predict_frame(raw[raw["id"].isin(gh["id"])].assign(hardware="gh200"), CSV.name)
    err_144 = (big["predicted_output_tok_s"] / big["measured_output_tok_s"] - 1.0).abs().mean()
    assert err_144 > 2 * gh["err"].abs().mean()


ONLINE = Path(__file__).parent / "data" / "published_trtllm_online_v014.csv"


@pytest.mark.validation
def test_trtllm_online_v014_regression_guard():
    """The same document's online table (TensorRT-LLM v0.14 behind Triton, BF16, 500 requests a
    run): Llama 3.1 8B / 70B on H100 and H200 at 2-32 requests/s and all at once, each row scored
    on output tok/s, mean TTFT and mean ITL.  Today (docs/accuracy.md): row mean 13.0 %; the
    request-rate rows 12.9 % (467/16 7.7 %, 467/256 9.6 %, 202/214 21.3 %; output tok/s 7.2 %,
    ITL 13.1 %, TTFT 18.3 %), 23.3 % before each run of 500 requests was simulated pass by pass
    (dse.infer.open_loop_run: near and past capacity the run never reaches the steady state,
    whose ITL was 2-7x the measured at 16-32 requests/s); the all-at-once rows 13.8 % (467/256
    2.8 %, 467/16 2.6 %, 202/214 35.9 %: the client-limited rows), 78.5 % before the run of
    500 requests was priced as the one wave it is (dse.infer.predict_rows.all_queued: the KV
    cache holds 600-2000, the run sends 500).  Regression guards a little above today's
    errors."""
    from dse.infer.predict_rows import error_long
    p = predict_frame(read_csv(str(ONLINE)), ONLINE.name)
    assert len(p) == 72 and p["status"].str.startswith("ok").all()
    e = error_long(p)
    e["ape"] = e["error"].abs()
    rate = e["id"].map(dict(zip(p["id"], p["scenario"]))) == "poisson_rate"
    row = lambda d: d.groupby("id")["ape"].mean().mean()
    assert row(e) <= 0.145 and row(e[rate]) <= 0.145 and row(e[~rate]) <= 0.15, (row(e), row(e[rate]))
    assert len(e) == 3 * 72
