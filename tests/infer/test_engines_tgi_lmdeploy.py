"""The text-generation-inference and LMDeploy TurboMind profiles: routing by engine text and
release, the launch limits each release derives from the model / GPU / TP size, and rows
through ``dse predict`` (dse.infer.engines, dse.infer.tgi; facts cited there)."""

import math

import pandas as pd
import pytest

from dse.errors import InputError
from dse.infer.engines import PROFILES, engine_profile, launch_defaults, lmdeploy_max_batch
from dse.infer.memory import kv_pool_from
from dse.infer.tgi import (TGI_V3_DEFAULT_PREFILL, tgi_flop_per_token, tgi_pool, tgi_prefill_tokens,
                           tgi_v2_prefill_tokens)
from dse.predict import predict_frame
from dse.spec.model import get_model

GIB = 2.0**30


@pytest.mark.parametrize("text,name", [
    ("tgi 2.4.1", "tgi"), ("text-generation-inference 3.3.4", "tgi_v3"), ("tgi", "tgi_v3"),
    ("ghcr.io/huggingface/text-generation-inference:2.0.4", "tgi"), ("TGI (v3.0.1)", "tgi_v3"),
    ("kserve (tgi 2.2)", "tgi"),
    ("lmdeploy 0.11.0", "lmdeploy"), ("lmdeploy v0.12.0", "lmdeploy_async"), ("LMDeploy", "lmdeploy_async"),
    ("turbomind", "lmdeploy_async"), ("lmdeploy (v0.1.0a1, TurboMind)", "lmdeploy")])
def test_tgi_and_lmdeploy_route_by_release(text, name):
    eng, why = engine_profile(text)
    assert (eng.name, why) == (name, "")


@pytest.mark.parametrize("text,word", [("lmdeploy 0.6 (pytorch engine)", "PyTorch engine"),
                                       ("tgi 1.4.5", "before 2.0"), ("tgi-gaudi 2.0", "no profile")])
def test_engines_without_a_profile_say_why(text, word):
    _, why = engine_profile(text)
    assert word in why


def test_tgi_v2_budget_is_the_input_limit_plus_50():
    """v2: ``max_input_tokens + 50``, the input limit min(context, 4096) - 1 by default."""
    assert tgi_prefill_tokens(get_model("llama3-8b"), "h100-sxm-80gb", 1, (2, 4, 0)) == 4145
    assert tgi_prefill_tokens(get_model("llama2-7b"), "b200", 8, (2, 0, 4)) == 4145
    assert tgi_v2_prefill_tokens(125000) == 125050


def test_tgi_v3_budget_is_the_card_over_the_model_flops_capped_by_the_context():
    m = get_model("llama3-70b")            # 80 layers, h 8192, 64 heads / 8 KV, f 28672
    per_layer = 2 * 8192 * 128 * (3 * 64 + 2 * 8) + 6 * 8192 * 28672
    assert tgi_flop_per_token(m) == pytest.approx(per_layer * 80)
    assert tgi_prefill_tokens(m, "h100-sxm-80gb", 1, (3, 3, 0)) == int(900e12 / (per_layer * 80))
    assert tgi_prefill_tokens(m, "a100-sxm-80gb", 1, None) == int(312e12 / (per_layer * 80))
    # TP multiplies the card's FLOP/s until the context caps the budget
    assert tgi_prefill_tokens(m, "h100-sxm-80gb", 8, (3, 3, 0)) == m.seq_length
    # a card the launcher does not know (and v3.0's H200) falls back to 4096
    assert tgi_prefill_tokens(m, "b200", 1, (3, 3, 0)) == TGI_V3_DEFAULT_PREFILL
    assert tgi_prefill_tokens(m, "h200-sxm-141gb", 1, (3, 0, 1)) == TGI_V3_DEFAULT_PREFILL
    assert tgi_prefill_tokens(m, "h200-sxm-141gb", 1, (3, 1, 0)) == int(989e12 / (per_layer * 80))
    assert tgi_prefill_tokens(m, "mi300x", 8, None) == TGI_V3_DEFAULT_PREFILL


@pytest.mark.parametrize("version,frac,after", [((2, 0, 0), 0.95, True), ((2, 3, 0), 0.95, True),
                                                ((2, 4, 1), 0.90, True), ((3, 0, 0), 0.95, False),
                                                ((3, 2, 3), 0.93, False), ((3, 3, 7), 0.90, False),
                                                (None, 0.90, False)])
def test_tgi_pool_fraction_follows_the_release(version, frac, after):
    assert tgi_pool(version) == (frac, after)


def test_tgi_v3_pool_is_a_share_of_the_gpu_and_v2_a_share_of_what_is_left():
    m = get_model("llama3-8b")
    v2 = launch_defaults(PROFILES["tgi"], "tgi 2.4.0", 80 * GIB, "h100-sxm-80gb", "concurrency", 1, 1, m)
    v3 = launch_defaults(PROFILES["tgi_v3"], "tgi 3.3.0", 80 * GIB, "h100-sxm-80gb", "concurrency", 1, 1, m)
    w, acts = 16e9, 2e9
    assert kv_pool_from(v3, 80 * GIB, w, acts) < kv_pool_from(v2, 80 * GIB, w, acts)
    assert v3.max_num_tokens == m.seq_length and v2.max_num_tokens == 4145


def test_tgi_replays_graphs_for_decode_only_batches_up_to_32():
    for name in ("tgi", "tgi_v3"):
        e = PROFILES[name]
        assert e.graph_replay(32, 0) and not e.graph_replay(33, 0) and not e.graph_replay(8, 100)
        assert e.max_batch == 128 and e.reserve_final_kv and not e.host_overlap
    assert not PROFILES["tgi"].mixed_batches and PROFILES["tgi_v3"].mixed_batches


@pytest.mark.parametrize("hw,version,n", [("h100-sxm-80gb", (0, 5, 0), 128), ("a100-sxm-80gb", (0, 6, 0), 256),
                                          ("h100-sxm-80gb", (0, 9, 2), 512), ("h200-sxm-141gb", (0, 9, 2), 128),
                                          ("h200-sxm-141gb", (0, 10, 0), 1024), ("a800-sxm-80gb", (0, 10, 0), 384),
                                          ("b200", (0, 16, 0), 128), ("h100-sxm-80gb", None, 1024)])
def test_turbomind_max_batch_follows_the_gpu_name_and_release(hw, version, n):
    assert lmdeploy_max_batch(hw, version) == n


def test_turbomind_has_no_graphs_and_admits_on_current_blocks():
    for name in ("lmdeploy", "lmdeploy_async"):
        e = PROFILES[name]
        assert not e.cuda_graphs and e.eager_op_s == 0 and not e.reserve_final_kv
        assert e.mem_fraction == 0.8 and e.kv_after_weights and e.block_tokens == 64
    assert PROFILES["lmdeploy_async"].host_overlap and not PROFILES["lmdeploy"].host_overlap


def _row(**k):
    base = dict(id="r1", model="llama3-8b", hardware="h100-sxm-80gb", gpus=1, tp=1, pp=1, precision="bf16",
                engine="tgi 2.4.1", scenario="concurrency", batch_or_concurrency=16, input_len=512,
                output_len=256)
    base.update(k)
    return pd.DataFrame([base])


def test_rows_on_tgi_and_turbomind_get_predictions_and_turbomind_refuses_amd():
    df = pd.concat([_row(), _row(id="r2", engine="tgi 3.3.4"), _row(id="r3", engine="lmdeploy 0.16.0"),
                    _row(id="r4", engine="lmdeploy 0.16.0", hardware="mi300x")], ignore_index=True)
    p = predict_frame(df, "rows.csv")
    assert list(p.chosen_engine[:3]) == ["tgi", "tgi_v3", "lmdeploy_async"]
    assert all(math.isfinite(x) and x > 0 for x in p.predicted_output_tok_s[:3])
    assert "runs on NVIDIA GPUs only" in p.status[3]


def test_a_tgi_launch_flag_overrides_the_default_limits():
    """--max-concurrent-requests bounds the running batch; a v2 --max-input-tokens sets the
    prefill budget; a non-integer value is refused, not skipped."""
    p = predict_frame(pd.concat([_row(batch_or_concurrency=64),
                                 _row(id="r2", batch_or_concurrency=64,
                                      notes="--max-concurrent-requests 8")], ignore_index=True), "rows.csv")
    assert p.predicted_output_tok_s[1] < p.predicted_output_tok_s[0]
    bad = predict_frame(_row(notes="--max-input-tokens 4k"), "rows.csv")
    assert bad.status[0].startswith("invalid: notes: --max-input-tokens must be a positive integer")
    v2 = predict_frame(pd.concat([_row(input_len=1000, batch_or_concurrency=8),
                                  _row(id="r2", input_len=1000, batch_or_concurrency=8,
                                       notes="--max-input-tokens 1200"),
                                  _row(id="r3", input_len=3000, notes="--max-input-tokens 1200")],
                                 ignore_index=True), "rows.csv")
    # one 1000-token prompt per 1250-token prefill pass instead of four per 4145: the passes change
    assert v2.predicted_ttft_ms[1] != pytest.approx(v2.predicted_ttft_ms[0], rel=1e-3)
    assert v2.status[2].startswith("infeasible: `input_len <= --max-input-tokens` must hold")


def test_a_staggered_loop_admits_to_the_mean_footprint_unless_the_engine_reserves_the_final():
    """64 Llama-2-7B requests of 128 + 2048 tokens on one A100: the final footprint holds
    fewer than 64 in TurboMind's pool, the staggered cycle's mean footprint all of them; an
    engine that reserves the final footprint at admission queues the rest."""
    from dataclasses import replace

    from dse.infer.lockstep import staggered_concurrency
    from dse.infer.serving import Deployment, kv_slots
    from dse.spec.hardware import get_hardware
    eng = PROFILES["lmdeploy"]
    dep = Deployment(get_model("llama2-7b"), get_hardware("a100-sxm-80gb"), eng, 1, 1, 0, 2.0)
    assert kv_slots(dep, 128, 2048, final=True) < 64 <= kv_slots(dep, 128, 2048)
    free = staggered_concurrency(dep, 64, 128, 2048, 1)
    held = staggered_concurrency(dep._replace(engine=replace(eng, reserve_final_kv=True)), 64, 128, 2048, 1)
    assert free.batch == 64 and free.note == ""
    assert held.batch < 64 and held.note.startswith("queued") and held.ttft_s > 10 * free.ttft_s


def test_dse_infer_takes_a_release_texts_launch_limits_as_dse_predict_does():
    """`--engine 'sglang 0.5.3'` on an H200 replays graphs to 256 sequences and chunks 8192
    tokens (its launch defaults), the bare profile name keeps the profile's 160; LMDeploy
    0.10 on an H100 runs 1024 requests, 0.5 128."""
    from dse.infer.continuous import launched_engine
    from dse.spec.hardware import get_hardware
    m, h200, h100 = get_model("llama3-70b"), get_hardware("h200-sxm-141gb"), get_hardware("h100-sxm-80gb")
    assert launched_engine("sglang_overlap", h200, m) == PROFILES["sglang_overlap"]
    e = launched_engine("sglang 0.5.3", h200, m)
    assert (e.name, e.graph_max_batch, e.max_num_tokens) == ("sglang_overlap", 256, 8192)
    assert launched_engine("lmdeploy 0.10.0", h100, m).max_batch == 1024
    assert launched_engine("lmdeploy 0.5.0", h100, m).max_batch == 128
    assert launched_engine("tgi 3.3", h100, m).max_num_tokens == tgi_prefill_tokens(m, h100.name, 1, (3, 3, 0))


def test_the_serving_sweep_runs_the_launched_profile():
    from dse.infer.sweep import sweep_inference
    from dse.spec.hardware import get_hardware
    m, hw = get_model("llama3-8b"), get_hardware("h100-sxm-80gb")
    old = sweep_inference(m, [hw], 1, 512, 256, 128, 1, batching="continuous", engine="lmdeploy 0.5.0")
    new = sweep_inference(m, [hw], 1, 512, 256, 128, 1, batching="continuous", engine="lmdeploy 0.10.0")
    top = lambda df: df[df["batch"] == 512].iloc[0]
    assert top(old)["engine"] == top(new)["engine"] == "lmdeploy"
    assert top(old)["admitted"] <= 128 < top(new)["admitted"]


@pytest.mark.parametrize("text,word", [("lmdeploy 0.6 pytorch", "PyTorch engine"), ("tgi 1.4", "before 2.0"),
                                       ("dynamo 0.4", "does not name the engine")])
def test_dse_infer_refuses_a_known_engine_without_a_profile_with_its_reason(text, word, capsys):
    from dse.cli import main
    base = ["infer", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "1", "--batch", "8",
            "--engine", text]
    assert main(base) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--engine" in err and word in err


def _r1(**k):
    base = dict(id="d", model="deepseek-ai/DeepSeek-R1", hardware="h200-sxm-141gb", gpus=8, pp=1,
                precision="fp8", scenario="concurrency", batch_or_concurrency=64, input_len=3200,
                output_len=800)
    base.update(k)
    return base


def test_attention_dp_and_ep_read_from_the_launch_flags_equal_the_explicit_columns():
    """A calibration-schema row (no attn_dp column) states DP attention in its engine's own
    flags: SGLang --tp 8 --dp 8 --enable-dp-attention, TensorRT-LLM enable_attention_dp with
    --ep_size, vLLM -dp 8 --enable-expert-parallel; each predicts as the explicit layout."""
    rows = [_r1(id="s_flags", tp=8, engine="sglang 0.4.3 --tp 8 --dp 8 --enable-dp-attention"),
            _r1(id="s_cols", tp=1, attn_dp=8, ep=1, engine="sglang 0.4.3"),
            _r1(id="t_flags", tp=8, engine="trtllm 1.0 trtllm-serve --tp_size 8 --ep_size 8",
                notes="extra_llm_api_options: enable_attention_dp: true"),
            _r1(id="t_cols", tp=1, attn_dp=8, ep=8, engine="trtllm 1.0 trtllm-serve"),
            _r1(id="v_flags", tp=1, engine="vllm 0.11.0 serve -dp 8 --enable-expert-parallel"),
            _r1(id="v_cols", tp=1, attn_dp=8, ep=8, engine="vllm 0.11.0 serve"),
            _r1(id="plain", tp=8, engine="sglang 0.4.3 --tp 8"),
            _r1(id="t_blank", engine="trtllm 1.0 trtllm-serve --ep_size 8", notes="enable_attention_dp: true")]
    p = predict_frame(pd.DataFrame(rows), "rows.csv").set_index("id")
    for a, b in (("s_flags", "s_cols"), ("t_flags", "t_cols"), ("v_flags", "v_cols")):
        assert p.loc[a, "predicted_output_tok_s"] == pytest.approx(p.loc[b, "predicted_output_tok_s"], rel=1e-9)
        assert (p.loc[a, "chosen_tp"], p.loc[a, "chosen_attn_dp"]) == (1, 8)
    assert p.loc["t_flags", "chosen_ep"] == 8 and "enable_attention_dp" in p.loc["t_flags", "chosen_layout_from"]
    # tp blank: TensorRT-LLM's tp_size is every GPU of the replica
    assert p.loc["t_blank", "predicted_output_tok_s"] == pytest.approx(p.loc["t_cols", "predicted_output_tok_s"],
                                                                       rel=1e-9)
    # MLA's latent cache is whole on every TP rank: attention DP holds 8x the sequences
    assert p.loc["s_flags", "predicted_output_tok_s"] != pytest.approx(p.loc["plain", "predicted_output_tok_s"])


def test_a_bad_launch_layout_flag_is_the_rows_invalid_status():
    p = predict_frame(pd.DataFrame([_r1(tp=8, engine="sglang 0.4.3 --enable-dp-attention --dp eight")]), "rows.csv")
    assert p.status[0].startswith("invalid: engine: --dp must be a positive integer")


def test_tensorrt_llm_cpp_runs_full_attention_unless_the_launch_sets_a_window():
    """dse.infer.engines.served_model: a window on every layer (Mistral 7B v0.1) is dropped
    under the TensorRT-LLM C++ profiles and kept under vLLM, under TensorRT-LLM's PyTorch
    backend and where the launch states ``max_attention_window``; interleaved windows
    (gpt-oss) are the checkpoint's own layer kinds and stay everywhere."""
    from dse.infer.engines import PROFILES, served_model
    from dse.infer.launch_flags import launch_settings
    from dse.spec.model import get_model
    mis, oss = get_model("mistral-7b-v0.1"), get_model("gpt-oss-120b")
    assert mis.sliding_window == 4096
    for name in ("trtllm", "trtllm_mlperf", "trtllm_static"):
        assert served_model(mis, PROFILES[name]).sliding_window == 0
        assert served_model(oss, PROFILES[name]) == oss
    for name in ("vllm_v1", "sglang", "trtllm_pytorch"):
        assert served_model(mis, PROFILES[name]) == mis
    stated, _ = launch_settings({"engine": "trtllm", "notes": "--max_attention_window_size 4096"},
                                PROFILES["trtllm"], mis)
    assert served_model(mis, stated) == mis


def test_a_stated_max_attention_window_is_served_on_every_layer():
    """launch_flags.stated_window + engines.served_model: TensorRT-LLM's
    ``max_attention_window`` W (run.py flag, LLM-API option, a one-value list) makes a
    full-attention model a W-token sliding window on all its layers; a per-layer list of
    several windows, and interleaved / chunked checkpoints, keep the checkpoint's kinds;
    engines other than TensorRT-LLM ignore the flag.  A bad value is the row's invalid
    status, naming the flag; a long prompt decodes faster windowed."""
    from dse.infer.engines import PROFILES, served_model
    from dse.infer.launch_flags import launch_settings, stated_window
    from dse.spec.model import get_model
    ll, oss, mav = get_model("llama3-8b"), get_model("gpt-oss-120b"), get_model("llama4-maverick")
    say = lambda notes: {"engine": "trtllm", "notes": notes}
    assert stated_window(say("--max_attention_window_size 2048.")) == 2048
    assert stated_window(say("kv_cache_config: {max_attention_window: [2048, 2048]}")) == 2048
    assert stated_window(say("kv_cache_config.max_attention_window: [128, 131072]")) == 0
    assert stated_window(say("no flag here")) is None
    for bad in ("--max_attention_window abc", "--max_attention_window_size -5", "max_attention_window: [0]",
                "--max_attention_window 4096 --max_attention_window 2048"):
        with pytest.raises(InputError, match="max_attention_window"):
            stated_window(say(bad))
    for name in ("trtllm", "trtllm_pytorch"):
        eng, _ = launch_settings(say("--max_attention_window 2048"), PROFILES[name], ll)
        m = served_model(ll, eng)
        assert (m.sliding_window, m.window_layers) == (2048, ll.num_layers)
        assert served_model(oss, eng) == oss and served_model(mav, eng) == mav
        per_layer, _ = launch_settings(say("max_attention_window: [128, 131072]"), PROFILES[name], ll)
        assert served_model(ll, per_layer) == ll
    eng, _ = launch_settings(say("--max_attention_window 2048"), PROFILES["vllm_v1"], ll)
    assert served_model(ll, eng) == ll
    row = dict(id="w", model="meta-llama/Llama-3.1-8B", hardware="h100-sxm-80gb", gpus=1, tp=1, pp=1,
               precision="fp8", scenario="offline_throughput", input_len=20000, output_len=2000,
               engine="trtllm (v0.17, trtllm-bench)")
    p = predict_frame(pd.DataFrame([row, {**row, "id": "w2", "notes": "--max_attention_window 2048"},
                                    {**row, "id": "w3", "notes": "--max_attention_window_size=twelve"}]),
                      "rows.csv")
    assert p.status[0] == "ok" and p.status[1] == "ok"
    assert p.predicted_output_tok_s[1] > p.predicted_output_tok_s[0]
    assert p.status[2].startswith("invalid: notes: max_attention_window must be a positive integer")


def test_fp8_context_attention_speeds_only_the_prompt_attention_of_quantized_trtllm():
    """forward.context_attention_rates: a TensorRT-LLM C++ engine (``fp8_context_attn``) runs
    a quantized model's prompt attention at FP8_CONTEXT_ATTN_SPEEDUP x the 16-bit tensor rate:
    a long-prompt prefill gets faster, by less than the speed-up (the linears do not change);
    bf16, an engine without the flag, and a decode-only pass (no prompt attention) are
    untouched."""
    from dse.cost.rates import rates
    from dse.infer.engines import PROFILES
    from dse.infer.forward import FP8_CONTEXT_ATTN_SPEEDUP, context_attention_rates, stage_time
    from dse.infer.prefill import prefill_attention
    from dse.spec.hardware import get_hardware
    from dse.spec.layout import PRECISION_FP8
    from dse.spec.model import get_model
    m, hw = get_model("llama3-8b"), get_hardware("h100-sxm-80gb")
    r = rates(hw, PRECISION_FP8)
    assert PROFILES["trtllm"].fp8_context_attn > 0 and PROFILES["vllm_v1"].fp8_context_attn == 0
    fast = context_attention_rates(r, PRECISION_FP8, PROFILES["trtllm"].fp8_context_attn)
    assert float(fast.peak_16_flops_per_s) == pytest.approx(float(r.peak_16_flops_per_s) * FP8_CONTEXT_ATTN_SPEEDUP)
    assert float(context_attention_rates(r, 1, 1.0).peak_16_flops_per_s) == float(r.peak_16_flops_per_s)
    att = prefill_attention(m, 1.0, 16384.0, 1.0)
    base = stage_time(m, 16384.0, 1.0, att, 1.0, 1.0, PRECISION_FP8, hw, r)
    quick = stage_time(m, 16384.0, 1.0, att, 1.0, 1.0, PRECISION_FP8, hw, r, attn_rates=fast)
    assert float(quick.gemm_s) == pytest.approx(float(base.gemm_s))
    assert float(base.total_s) / FP8_CONTEXT_ATTN_SPEEDUP < float(quick.total_s) < float(base.total_s)
    assert float(quick.attention_s) < float(base.attention_s)
