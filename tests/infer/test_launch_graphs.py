"""The CUDA-graph settings a row's launch states: SGLang ``--cuda-graph-max-bs N`` and
TensorRT-LLM's ``cuda_graph_config`` ``max_batch_size`` cap the decode batches that replay a
graph, ``--disable-cuda-graph`` / ``--enforce-eager`` / ``cuda_graph_config: null`` switch graphs
off (dse.infer.predict_rows.launch_settings)."""

import pandas as pd
import pytest

from dse.infer.engines import PROFILES
from dse.infer.predict_rows import launch_settings
from dse.predict import predict_frame


def _row(**k):
    base = dict(id="r", model="llama3-8b", hardware="h100-sxm-80gb", gpus=1, tp=1, pp=1,
                precision="bf16", engine="sglang 0.5.9", scenario="concurrency", batch_or_concurrency=16,
                input_len=512, output_len=256, notes="--random-range-ratio 0.8")
    base.update(k)
    return base


@pytest.mark.parametrize("notes,graphs,max_bs", [
    ("launch --cuda-graph-max-bs 8", True, 8),
    ("launch --disable-cuda-graph", False, None),
    ("launch --disable-cuda-graph-padding", True, None),      # another flag: graphs stay on
    ("launch --enforce-eager", False, None),
    ("cuda_graph_config.enable_padding: true; cuda_graph_config.max_batch_size: 64", True, 64),
    ("extra_llm_api_options cuda_graph_config: {enable_padding: true, max_batch_size: 32}", True, 32),
    ("cuda_graph_config:\n  enable_padding: true\n  max_batch_size: 16\n", True, 16),
    ("cuda_graph_config: null", False, None),
    ("cuda_graph_config.enable_padding: true; max_batch_size: 256", True, None),   # the engine's, not the graphs'
])
def test_the_launch_sets_the_graph_limits(notes, graphs, max_bs):
    eng, _ = launch_settings({"engine": "sglang 0.5.9", "notes": notes}, PROFILES["sglang_overlap"])
    assert eng.cuda_graphs is graphs
    assert eng.graph_max_batch == (max_bs if max_bs is not None else PROFILES["sglang_overlap"].graph_max_batch)


def test_decode_beyond_the_captured_batch_runs_eagerly_and_is_slower():
    p = predict_frame(pd.DataFrame([_row(id="graphs"), _row(id="cap8", notes="--random-range-ratio 0.8 "
                                                                               "--cuda-graph-max-bs 8"),
                                    _row(id="eager", notes="--random-range-ratio 0.8 --disable-cuda-graph")]),
                      "rows.csv").set_index("id")
    assert (p.status == "ok").all(), p.status.to_dict()
    assert p.loc["cap8", "predicted_tpot_ms"] > p.loc["graphs", "predicted_tpot_ms"]
    assert p.loc["eager", "predicted_tpot_ms"] == pytest.approx(p.loc["cap8", "predicted_tpot_ms"], rel=1e-6)


@pytest.mark.parametrize("notes,field", [("--cuda-graph-max-bs 0", "cuda-graph-max-bs"),
                                         ("--cuda-graph-max-bs 8 --cuda_graph_max_bs 16", "cuda-graph-max-bs"),
                                         ("cuda_graph_config.max_batch_size: 8; cuda_graph_max_batch_size: 16",
                                          "max_batch_size")])
def test_bad_or_conflicting_graph_limits_are_the_rows_invalid_status(notes, field):
    p = predict_frame(pd.DataFrame([_row(notes=notes)]), "rows.csv")
    assert p.status[0].startswith("invalid: notes:") and field.split("-")[0] in p.status[0], p.status[0]


@pytest.mark.parametrize("engine,notes,frac", [
    ("vllm 0.10.1", "--gpu-memory-utilization 0.95", 0.95),
    ("sglang 0.5.9", "--mem-fraction-static=0.8", 0.8),
    ("trtllm 1.1 pytorch", "kv_cache_config.free_gpu_memory_fraction: 0.75", 0.75),
    ("trtllm 1.1 pytorch", "trtllm-bench --kv_cache_free_gpu_mem_fraction 0.9", 0.9),
    ("lmdeploy 0.10", "--cache-max-entry-count 0.5", 0.5),
    ("vllm 0.10.1", "vLLM gpu_memory_utilization 0.7 (prose, no flag)", None),
])
def test_the_launch_sets_the_kv_memory_share(engine, notes, frac):
    from dse.infer.engines import engine_profile
    base, _ = engine_profile(engine)
    eng, _ = launch_settings({"engine": engine, "notes": notes}, base)
    assert eng.mem_fraction == (frac if frac is not None else base.mem_fraction)


def test_a_larger_memory_share_holds_more_requests():
    rows = [_row(id=f"f{f}", batch_or_concurrency=512, notes=f"--mem-fraction-static {f}")
            for f in (0.5, 0.9)]
    p = predict_frame(pd.DataFrame(rows), "rows.csv").set_index("id")
    assert p.loc["f0.9", "predicted_output_tok_s"] > p.loc["f0.5", "predicted_output_tok_s"]


@pytest.mark.parametrize("notes", ["--mem-fraction-static 0", "--gpu-memory-utilization 1.5",
                                   "--mem-fraction-static abc", "--mem-fraction-static nan",
                                   "--mem-fraction-static 0.8 --mem-fraction-static 0.9"])
def test_a_bad_memory_share_is_the_rows_invalid_status(notes):
    p = predict_frame(pd.DataFrame([_row(notes=notes)]), "rows.csv")
    assert p.status[0].startswith("invalid: notes:"), p.status[0]


def _trt_row(**k):
    base = dict(id="t", model="deepseek-ai/DeepSeek-R1", hardware="b200", gpus=8, tp=8, pp=1, precision="fp8",
                engine="trtllm 1.1 pytorch", scenario="concurrency", batch_or_concurrency=64, input_len=1024,
                output_len=1024)
    base.update(k)
    return base


@pytest.mark.parametrize("opts,interval", [
    ("enable_attention_dp: true; attention_dp_config.enable_balance: true; attention_dp_config.timeout_iters: 60", 60),
    ("enable_attention_dp: true; attention_dp_config: {enable_balance: true, batching_wait_iters: 0}", 50),
    ("enable_attention_dp: true\nattention_dp_config:\n  enable_balance: true\n  timeout_iters: 20\n", 20),
    ("enable_attention_dp: true; attention_dp_config.enable_balance: false; attention_dp_config.timeout_iters: 60", 1),
    ("enable_attention_dp: false; attention_dp_config.enable_balance: true", 1),   # balancing needs attention DP
])
def test_attention_dp_balancing_releases_context_requests_every_timeout_iters(opts, interval):
    from dse.infer.engines import engine_profile
    base, _ = engine_profile("trtllm 1.1 pytorch")
    eng, _ = launch_settings({"engine": "trtllm 1.1 pytorch", "notes": opts}, base)
    assert eng.recv_interval == interval


def test_balancing_moves_the_first_token_of_a_staggered_and_a_random_closed_loop():
    on = ("enable_attention_dp: true; attention_dp_config.enable_balance: true; "
          "attention_dp_config.timeout_iters: 60")
    rows = [_trt_row(id="fixed"), _trt_row(id="fixed_bal", notes=on),
            _trt_row(id="rand", notes="--random-range-ratio 0.8 enable_attention_dp: true"),
            _trt_row(id="rand_bal", notes="--random-range-ratio 0.8 " + on)]
    p = predict_frame(pd.DataFrame(rows), "rows.csv").set_index("id")
    assert (p.status == "ok").all(), p.status.to_dict()
    for a, b in (("fixed", "fixed_bal"), ("rand", "rand_bal")):
        assert p.loc[b, "predicted_ttft_ms"] > p.loc[a, "predicted_ttft_ms"] + 20 * p.loc[a, "predicted_tpot_ms"]
        assert p.loc[b, "predicted_output_tok_s"] <= p.loc[a, "predicted_output_tok_s"] * (1 + 1e-9)


@pytest.mark.parametrize("opts", ["enable_attention_dp: true; attention_dp_config.enable_balance: true; "
                                  "attention_dp_config.timeout_iters: 0",
                                  "cuda_graph_config.max_batch_size: many"])
def test_a_bad_llm_api_option_is_the_rows_invalid_status(opts):
    p = predict_frame(pd.DataFrame([_trt_row(notes=opts)]), "rows.csv")
    assert p.status[0].startswith("invalid: notes:"), p.status[0]


@pytest.mark.parametrize("opts,interval", [
    ("batch_wait_timeout_iters: 40; batch_wait_max_tokens_ratio: 0.8", 40),
    ("batch_wait_timeout_iters: 40", 1),                           # ratio 0: the wait ends at once
    ("batch_wait_timeout_iters: 0; batch_wait_max_tokens_ratio: 0.8", 1),
    ("enable_attention_dp: true; batch_wait_timeout_iters: 40; batch_wait_max_tokens_ratio: 0.8", 1),
])
def test_batch_waiting_releases_context_requests_every_timeout_iters(opts, interval):
    from dse.infer.engines import engine_profile
    base, _ = engine_profile("trtllm 1.2 pytorch")
    eng, _ = launch_settings({"engine": "trtllm 1.2 pytorch", "notes": opts}, base)
    assert eng.recv_interval == interval


@pytest.mark.parametrize("opts", ["batch_wait_timeout_iters: -1; batch_wait_max_tokens_ratio: 0.8",
                                  "batch_wait_timeout_iters: 40; batch_wait_max_tokens_ratio: 2",
                                  "batch_wait_timeout_iters: 40; batch_wait_timeout_iters: 20"])
def test_bad_batch_waiting_is_the_rows_invalid_status(opts):
    p = predict_frame(pd.DataFrame([_trt_row(notes=opts)]), "rows.csv")
    assert p.status[0].startswith("invalid: notes: batch_wait"), p.status[0]


def test_an_engine_text_with_launch_flags_runs_with_them_in_the_sweep():
    from dse.errors import InputError
    from dse.infer.continuous import launched_engine
    from dse.spec.hardware import get_hardware
    hw = get_hardware("h100-sxm-80gb")
    eng = launched_engine("sglang 0.5.9 --scheduler-recv-interval 30 --mem-fraction-static 0.7", hw)
    assert (eng.recv_interval, eng.mem_fraction) == (30, 0.7)
    assert launched_engine("sglang 0.5.9", hw).recv_interval == 1
    with pytest.raises(InputError, match="--engine: mem-fraction-static must be a number in"):
        launched_engine("sglang 0.5.9 --mem-fraction-static 1.7", hw, where="dse infer", field="--engine")
