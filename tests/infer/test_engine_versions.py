"""Engine releases whose scheduling changed (dse.infer.engines): vLLM's V1 engine (default
from 0.8.0, the only one from 0.11.0) mixes chunked prompts into decode steps and replays
piecewise graphs by token count; SGLang overlaps its scheduler with the GPU from 0.3.6;
both take limits from the GPU they run on.  And what that does to a fixed-length closed
loop: V1 staggers the cohorts (TTFT about one pass), V0 runs prefill-first waves."""

import dataclasses

import pandas as pd
import pytest

from dse.errors import InputError
from dse.infer.engines import PROFILES, engine_profile, launch_defaults, version3
from dse.infer.predict_rows import predict_inference_frame
from dse.spec.hardware import get_hardware

GIB = 2.0**30


@pytest.mark.parametrize("text,name", [
    ("vllm (v0.6.0, --num-scheduler-steps 10)", "vllm"),
    ("vllm (0.7.3.dev138 ROCm 6.3)", "vllm"),
    ("vllm (0.7.2, VLLM_USE_V1=1)", "vllm_v1"),           # opt-in before 0.8
    ("vllm (0.8.0)", "vllm_v1"),
    ("vllm (0.10.1, VLLM_USE_V1=0)", "vllm"),             # opt-out before 0.11
    ("vllm (0.9.0.2.dev108 ROCm 6.4.1, AMD MLPerf harness, --num-scheduler-steps 9)", "vllm_mlperf"),
    ("vllm (0.10.0, AMD MLPerf harness)", "vllm_v1"),
    ("vllm (ROCm 6.4, v0.9.1)", "vllm_v1"),              # ROCm's version is not vLLM's
    ("vllm", "vllm_v1_async"),                            # no version: today's vLLM
    ("vllm (0.13.0)", "vllm_v1"),                         # async scheduling opt-in only
    ("vllm (0.14.0)", "vllm_v1_async"),                   # on by default (PR #27614)
    ("vllm (v0.11.2, --async-scheduling)", "vllm_v1_async"),
    ("vllm (0.15.1, --no-async-scheduling)", "vllm_v1"),
    ("vllm (0.12.0, async_scheduling=true)", "vllm_v1_async"),
    ("sglang (v0.3.0)", "sglang"),
    ("sglang (v0.3.5)", "sglang"),
    ("sglang (v0.3.6)", "sglang_overlap"),
    ("sglang (0.4.2.post4 ROCm 6.3)", "sglang_overlap"),
    ("sglang", "sglang_overlap"),
])
def test_engine_release_routing(text, name):
    assert engine_profile(text)[0].name == name


@pytest.mark.parametrize("text", ["vllm (0.11.0, --num-scheduler-steps 8)",
                                  "vllm (0.8.5, VLLM_USE_V1=1, --num-scheduler-steps 8)"])
def test_multi_step_is_refused_on_the_v1_engine(text):
    with pytest.raises(InputError, match="num-scheduler-steps"):
        engine_profile(text)


def test_async_scheduling_is_refused_before_its_flag_existed():
    with pytest.raises(InputError, match="async-scheduling"):
        engine_profile("vllm (0.9.1, --async-scheduling)")


def test_async_scheduling_hides_the_v1_host_step_except_with_pipeline_parallelism():
    """vLLM >= 0.14 schedules step n + 1 while the GPU runs step n: an iteration is
    max(GPU, host) instead of their sum; with pp > 1 (async off in 0.14) it is exactly the
    serial V1 step, in the scalar and the traced (vectorized sweep) paths."""
    import jax.numpy as jnp
    from dse.infer.pipeline import pipelined_iteration_s
    sync, asyn = PROFILES["vllm_v1"], PROFILES["vllm_v1_async"]
    gpu, seqs = 0.012, 64.0
    assert asyn.with_host_s(gpu, seqs) == pytest.approx(max(gpu, sync.host_s(seqs)))
    assert asyn.with_host_s(gpu, seqs) < sync.with_host_s(gpu, seqs)
    assert pipelined_iteration_s(asyn, gpu, 1, seqs, 1) == pytest.approx(gpu)
    for pp in (2, 4):
        want = pipelined_iteration_s(sync, gpu, pp, seqs, pp)
        assert want == pytest.approx(pp * gpu + sync.host_s(seqs))
        assert pipelined_iteration_s(asyn, gpu, pp, seqs, pp) == pytest.approx(want)
        traced = pipelined_iteration_s(asyn, jnp.float32(gpu), jnp.float32(pp), jnp.float32(seqs),
                                       jnp.float32(pp))
        assert float(traced) == pytest.approx(want, rel=1e-6)
    assert float(pipelined_iteration_s(asyn, jnp.float32(gpu), jnp.float32(1.0), jnp.float32(seqs),
                                       jnp.float32(1.0))) == pytest.approx(gpu, rel=1e-6)


def test_a_vllm_014_row_is_never_slower_than_the_same_row_on_013():
    """Same row, two releases: only the host overlap differs, so TPOT can only fall."""
    rows = [{**ROW, "id": v, "engine": f"vllm ({v})", "batch_or_concurrency": 8}
            for v in ("0.13.0", "0.14.0")]
    p = predict_inference_frame(pd.DataFrame(rows), "x").set_index("id")
    assert (p.status == "ok").all()
    assert list(p.chosen_engine) == ["vllm_v1", "vllm_v1_async"]
    assert p.loc["0.14.0", "predicted_tpot_ms"] < p.loc["0.13.0", "predicted_tpot_ms"]
    assert p.loc["0.14.0", "predicted_output_tok_s"] > p.loc["0.13.0", "predicted_output_tok_s"]


def test_version3_reads_the_patch_and_skips_other_packages():
    assert version3("sglang (0.4.2.post4 ROCm 6.3)") == (0, 4, 2)
    assert version3("vllm (ROCm 6.4.1, v0.9.1)") == (0, 9, 1)
    assert version3("vllm (v0.8)") == (0, 8, 0)
    assert version3("vllm") is None


def test_v1_profile_mixes_chunks_and_replays_graphs_by_tokens():
    v1, v0 = PROFILES["vllm_v1"], PROFILES["vllm"]
    assert v1.mixed_batches and v1.chunked_prefill and not v0.mixed_batches
    assert v1.graph_replay(100.0, 400.0) and not v1.graph_replay(100.0, 413.0)   # 512 tokens
    assert not v0.graph_replay(100.0, 1.0) and v0.graph_replay(256.0, 0.0)
    assert not v0.graph_replay(257.0, 0.0)


@pytest.mark.parametrize("hbm_gib,name,text,scen,tokens,seqs", [
    (80, "h100-sxm-80gb", "vllm (0.9.1)", "concurrency", 8192, 1024),       # OpenAI server
    (80, "h100-sxm-80gb", "vllm (0.9.1, benchmark_throughput.py)", "offline_throughput", 16384, 1024),
    (80, "h100-sxm-80gb", "vllm (0.9.1)", "fixed_batch", 16384, 1024),      # static batch: LLM class
    (80, "a100-sxm-80gb", "vllm (0.9.1)", "concurrency", 2048, 256),        # A100 excluded
    (48, "l40s", "vllm (0.9.1, benchmark_latency.py)", "latency", 8192, 256),
])
def test_v1_limits_follow_the_gpu(hbm_gib, name, text, scen, tokens, seqs):
    e = launch_defaults(engine_profile(text)[0], text, hbm_gib * GIB, name, scen)
    assert (e.max_num_tokens, e.max_batch) == (tokens, seqs)


@pytest.mark.parametrize("hbm_gib,tokens,graph", [(24, 2048, 160), (80, 8192, 160),
                                                  (141, 8192, 256), (192, 16384, 512)])
def test_sglang_limits_follow_the_gpu(hbm_gib, tokens, graph):
    e = launch_defaults(PROFILES["sglang_overlap"], "sglang (0.4.8)", hbm_gib * GIB, "x", "concurrency")
    assert (e.max_num_tokens, e.graph_max_batch) == (tokens, graph)
    old = launch_defaults(PROFILES["sglang_overlap"], "sglang (0.4.2)", hbm_gib * GIB, "x", "concurrency")
    assert (old.max_num_tokens, old.graph_max_batch) == (8192, 160)        # before 0.4.8


@pytest.mark.parametrize("hbm_gib,tp,tokens,graph", [
    (16, 8, 2048, 8), (24, 1, 2048, 24), (24, 4, 2048, 80), (40, 2, 4096, 32), (40, 8, 4096, 160),
    (80, 2, 8192, 256), (80, 8, 8192, 512), (141, 1, 8192, 256), (141, 4, 8192, 512),
    (180, 1, 16384, 512), (192, 8, 16384, 512), (80, None, 8192, 256)])
def test_sglang_053_limits_follow_the_gpu_and_the_tp_size(hbm_gib, tp, tokens, graph):
    """SGLang >= 0.5.3 (PR #10372, _handle_gpu_memory_settings): the CUDA-graph limit
    doubles at TP >= 4 on 35-160 GiB GPUs; a layout sweep (tp None) takes the TP < 4 one;
    no release stated is today's SGLang."""
    for text in ("sglang (0.5.3)", "sglang"):
        e = launch_defaults(PROFILES["sglang_overlap"], text, hbm_gib * GIB, "x", "concurrency", tp)
        assert (e.max_num_tokens, e.graph_max_batch) == (tokens, graph)


def test_an_sglang_row_at_tp8_replays_graphs_up_to_512_from_053():
    """A TP8 DeepSeek-class closed loop at 384 requests on H200: 0.5.3 replays its decode
    steps as graphs (cap 512), 0.4.8 runs them eagerly (cap 256) -- so a far shorter TPOT."""
    row = {**ROW, "model": "meta-llama/Llama-3.1-70B-Instruct", "hardware": "h200-sxm-141gb",
           "gpus": 8, "tp": 8, "batch_or_concurrency": 384, "input_len": 1000, "output_len": 1000}
    rows = [{**row, "id": v, "engine": f"sglang ({v})"} for v in ("0.4.8", "0.5.3")]
    p = predict_inference_frame(pd.DataFrame(rows), "x").set_index("id")
    assert (p.status == "ok").all()
    assert p.loc["0.5.3", "predicted_tpot_ms"] < p.loc["0.4.8", "predicted_tpot_ms"]


def test_sglang_overlap_hides_the_scheduler_behind_the_gpu():
    old, new = PROFILES["sglang"], PROFILES["sglang_overlap"]
    assert old.with_host_s(0.02, 64) == pytest.approx(0.02 + old.host_s(64))
    assert new.with_host_s(0.02, 64) == pytest.approx(0.02)


ROW = {"model": "meta-llama/Llama-3.1-8B-Instruct", "hardware": "h100-sxm-80gb", "gpus": 1, "tp": 1,
       "precision": "bf16", "scenario": "concurrency", "batch_or_concurrency": 32,
       "input_len": 2000, "output_len": 200, "dataset": "random (fixed lengths)"}


def test_a_v1_closed_loop_staggers_where_v0_runs_waves():
    """32 fixed-length requests of 2000 + 200 tokens on one H100: V0 prefills the whole
    burst before any decode (mean TTFT of a staircase of passes), V1 mixes 8192-token
    chunks into the decode steps, so a cohort's first token comes within a few passes."""
    rows = [{**ROW, "id": "v0", "engine": "vllm (v0.6.0)"}, {**ROW, "id": "v1", "engine": "vllm (0.9.1)"}]
    p = predict_inference_frame(pd.DataFrame(rows), "x").set_index("id")
    assert (p.status == "ok").all() and p.loc["v1", "chosen_engine"] == "vllm_v1"
    assert p.loc["v1", "predicted_ttft_ms"] < 0.5 * p.loc["v0", "predicted_ttft_ms"]
    assert p.loc["v1", "predicted_output_tok_s"] > 0.0


def test_a_dataset_closed_loop_admits_at_random_instants():
    """ShareGPT lengths: a closed loop's admissions follow random completions, so the row
    runs the Poisson prompt counts of dse.infer.serving.cycle (spread), not the evenly spaced
    ones of a full queue."""
    from dse.infer.serving import Deployment, concurrency
    from dse.spec.model import get_model
    row = {**ROW, "id": "s", "engine": "vllm (0.9.1)", "batch_or_concurrency": 64,
           "dataset": "sharegpt", "input_len": "", "output_len": ""}
    p = predict_inference_frame(pd.DataFrame([row]), "x").iloc[0]
    hw = get_hardware("h100-sxm-80gb")
    eng = launch_defaults(PROFILES["vllm_v1"], "vllm (0.9.1)", float(hw.hbm_bytes), hw.name, "concurrency")
    dep = Deployment(get_model("meta-llama/Llama-3.1-8B-Instruct"), hw, eng, 1, 1, 1, 2.0)
    want = concurrency(dep, 64, 226.0, 194.4, 1, spread=True, o2=2.0)
    even = concurrency(dep, 64, 226.0, 194.4, 1, spread=False, o2=2.0)
    assert p.predicted_ttft_ms == pytest.approx(want.ttft_s * 1e3, rel=1e-6)
    assert want.ttft_s > even.ttft_s          # prompts that meet share (and wait for) a pass


@pytest.mark.parametrize("text,scen,limits", [
    ("trtllm (1.1.0rc2, trtllm-serve PyTorch backend)", "concurrency", (2048, 8192)),
    ("trtllm (v1.0, trtllm-bench throughput, PyTorch backend)", "offline_throughput", (4096, 32768)),
    ("trtllm (v1.0)", "concurrency", (2048, 8192)),          # a server load: the server's defaults
    ("trtllm (v1.0)", "offline_throughput", (4096, 32768)),
])
def test_trtllm_serve_keeps_the_build_config_defaults(text, scen, limits):
    e = launch_defaults(engine_profile(text)[0], text, 180 * GIB, "b200", scen)
    assert (e.max_batch, e.max_num_tokens) == limits


def test_v1_steps_past_the_graph_sizes_issue_one_call_per_kernel():
    from dse.infer.engines import COMPILED_OP_S, EAGER_OP_S
    assert PROFILES["vllm_v1"].eager_op_s == pytest.approx(EAGER_OP_S / 2.4) == COMPILED_OP_S
    assert PROFILES["vllm"].eager_op_s == EAGER_OP_S


def test_an_mxfp4_checkpoint_labelled_fp4_runs_weight_only_without_fp4_tensor_cores():
    """gpt-oss's MXFP4 experts on H100 / MI300X (no fp4 tensor cores) run as stored: W4A16
    experts beside bf16 linears -- the "fp8"-labelled path -- with the checkpoint's 16-bit KV;
    a dense model in fp4 there stays infeasible."""
    base = {**ROW, "model": "openai/gpt-oss-120b", "batch_or_concurrency": 16, "engine": "vllm (0.10.1)"}
    rows = [{**base, "id": f"{hw}-{p}", "hardware": hw, "precision": p}
            for hw in ("h100-sxm-80gb", "mi300x") for p in ("fp4", "mxfp4", "fp8")]
    rows.append({**ROW, "id": "dense", "precision": "fp4", "engine": "vllm (0.10.1)"})
    p = predict_inference_frame(pd.DataFrame(rows), "x").set_index("id")
    for hw in ("h100-sxm-80gb", "mi300x"):
        assert p.loc[f"{hw}-fp4", "chosen_precision"] == "mxfp4-w4a16"
        assert p.loc[f"{hw}-fp4", "chosen_kv_bytes"] == 2.0
        for lab in ("fp4", "mxfp4"):
            assert p.loc[f"{hw}-{lab}", "predicted_tpot_ms"] == pytest.approx(
                p.loc[f"{hw}-fp8", "predicted_tpot_ms"], rel=1e-6)
    assert p.loc["dense", "status"].startswith("infeasible") and "fp4" in p.loc["dense", "status"]


def test_v1_runs_whole_prompts_in_a_share_of_the_steps():
    """vLLM V1 schedules a waiting prompt whole into the next step (up to the budget the
    decodes leave): q = 0.25 prompts of 1024 tokens per step is a 1024-token pass in a
    quarter of the steps, not 256 prompt tokens in every step (the mean-load spread of a
    mixing engine without whole prompts: a TensorRT-LLM profile with the flag off; its C++
    executor, like V1, takes whole prompts)."""
    from dse.infer.serving import Deployment, prefill_share
    from dse.spec.model import get_model
    hw = get_hardware("h100-sxm-80gb")
    m = get_model("meta-llama/Llama-3.1-8B-Instruct")
    v1 = Deployment(m, hw, PROFILES["vllm_v1"], 1, 1, 1, 2.0)
    trt = Deployment(m, hw, PROFILES["trtllm"], 1, 1, 1, 2.0)
    assert prefill_share(v1, 64.0, 0.25, 1024.0) == pytest.approx((0.25, 1024.0))
    assert prefill_share(v1, 64.0, 4.0, 1024.0) == pytest.approx((1.0, 4096.0))   # 4 arrive together
    assert prefill_share(v1, 8000.0, 0.1, 1024.0) == pytest.approx((0.1 * 1024 / 192, 192.0))  # chunk
    assert prefill_share(trt, 64.0, 0.25, 1024.0) == pytest.approx((0.25, 1024.0))
    spread = Deployment(m, hw, dataclasses.replace(PROFILES["trtllm"], whole_prompts=False), 1, 1, 1, 2.0)
    assert prefill_share(spread, 64.0, 0.25, 1024.0) == pytest.approx((1.0, 256.0))


def test_trtllm_pytorch_takes_whole_contexts_so_light_loads_replay_graphs():
    """TensorRT-LLM >= 1.0 (PyTorch backend, no context chunking by default) puts a waiting
    context into one pass whole: 8 requests of 2048 + 256 tokens in flight on 8 B200 is a
    prompt pass in q = 8 / 256 of the iterations and graph replays in the rest, so TPOT
    stays near the decode step -- far under the eager pass a spread mean load would put
    under every iteration."""
    from dse.infer.serving import Deployment, iteration_s
    from dse.spec.model import get_model
    hw = get_hardware("b200")
    m = get_model("llama3-70b")
    text = "trtllm (v1.0, trtllm-serve PyTorch backend)"
    eng = launch_defaults(engine_profile(text)[0], text, float(hw.hbm_bytes), hw.name, "concurrency")
    assert eng.name == "trtllm_pytorch" and eng.whole_prompts
    row = {**ROW, "id": "t", "model": "llama3-70b", "hardware": "b200", "gpus": 8, "tp": 8,
           "precision": "fp4", "engine": text, "batch_or_concurrency": 8,
           "input_len": 2048, "output_len": 256}
    p = predict_inference_frame(pd.DataFrame([row]), "x").iloc[0]
    dep = Deployment(m, hw, eng, 8, 1, 3, 1.0)
    decode_s = iteration_s(dep, 8.0, 2048 + 128.0)
    eager_s = iteration_s(dep, 8.0, 2048 + 128.0, 64.0, 2048.0)   # the mean load in every pass
    assert decode_s <= p.predicted_tpot_ms / 1e3 < 0.5 * eager_s


def test_tensorrt_llm_rows_on_amd_get_a_status():
    """TensorRT-LLM runs on NVIDIA GPUs only: a row naming it on an MI300X is infeasible with
    the reason, and the other rows still get their predictions."""
    rows = [{**ROW, "id": "amd", "hardware": "mi300x", "engine": "trtllm (v1.0, PyTorch backend)"},
            {**ROW, "id": "nv", "engine": "trtllm (v1.0, PyTorch backend)"}]
    p = predict_inference_frame(pd.DataFrame(rows), "x").set_index("id")
    assert p.loc["amd", "status"].startswith("infeasible") and "NVIDIA GPUs only" in p.loc["amd", "status"]
    assert p.loc["nv", "status"] == "ok"


def test_offline_batch_caps_and_bad_rate_cells_are_invalid():
    """An offline row's batch_or_concurrency is the running-batch limit it ran with; a
    request_rate cell that is not a number > 0 (or inf) and a boolean in a count column
    are invalid rows, the others still predicted."""
    base = dict(model="llama3-8b", hardware="h100-sxm-80gb", gpus=1, tp=1, precision="bf16",
                engine="trtllm", scenario="offline_throughput", input_len=1000, output_len=1000)
    rows = [dict(base, id="free"), dict(base, id="cap", batch_or_concurrency=8),
            dict(base, id="abc", request_rate="abc"), dict(base, id="neg", request_rate=-1.0),
            dict(base, id="inf", request_rate=float("inf")), dict(base, id="bool", ep=True)]
    p = predict_inference_frame(pd.DataFrame(rows), "x").set_index("id")
    assert p.loc["cap", "chosen_batch"] == 8 and p.loc["free", "chosen_batch"] > 8
    assert p.loc["cap", "predicted_output_tok_s"] < p.loc["free", "predicted_output_tok_s"]
    assert p.loc["inf", "status"] == "ok"
    for i, col in (("abc", "request_rate"), ("neg", "request_rate"), ("bool", "ep")):
        assert p.loc[i, "status"].startswith(f"invalid: {col}:"), p.loc[i, "status"]


# --- vLLM's memory profiling pass and V0's unchunked MLA budget -------------------------

def _r1_pool_gib(engine_text, prompt=3200.0, notes=""):
    from dse.infer.predict_rows import SERVING_PRECISION, launch_settings
    from dse.infer.serving import Deployment, kv_pool_bytes
    from dse.spec.model import get_model
    m = get_model("deepseek-ai/DeepSeek-R1")
    eng, _ = launch_settings({"engine": engine_text, "notes": notes}, engine_profile(engine_text)[0], m)
    dep = Deployment(m, get_hardware("h200-sxm-141gb"), eng, 8, 1, SERVING_PRECISION["fp8"], 2.0)
    return eng, kv_pool_bytes(dep, prompt) / GIB


@pytest.mark.parametrize("text,notes,tokens", [
    ("vllm (0.7.3.dev138 ROCm 6.3)", "", 163840),        # MLA: chunking forced off, max_model_len
    ("vllm (0.7.4.dev181 nightly)", "", 163840),
    ("vllm (0.7.1)", "vllm serve --max-model-len 32768", 32768),
    ("vllm (0.7.1)", "vllm serve --max-model-len 1024", 2048),   # V0: at least 2048
    ("vllm (0.7.3)", "--max-num-batched-tokens 16384", 16384),   # a stated budget stands
    ("vllm (0.6.0)", "", 8192),                                   # before PR #12642
    ("vllm (0.8.0)", "", 8192),                                   # V1 chunks (server default)
])
def test_v0_unchunked_mla_budget_follows_the_release_and_the_launch(text, notes, tokens):
    eng, _ = _r1_pool_gib(text, notes=notes)
    assert eng.max_num_tokens == tokens


def test_the_vllm_v0_mla_leaves_dense_models_alone():
    from dse.infer.engines import vllm_v0_mla
    from dse.spec.model import get_model
    assert vllm_v0_mla(PROFILES["vllm"], "vllm (0.7.3)", get_model("llama3-70b")) == PROFILES["vllm"]


def test_vllm_sizes_its_pool_after_a_pass_of_its_whole_budget():
    """vLLM's profile_run runs max_num_batched_tokens whatever the prompts (the pool does
    not depend on S); TensorRT-LLM's C++ executor keeps the one-prompt workspace."""
    from dse.infer.serving import Deployment, kv_pool_bytes
    from dse.spec.model import get_model
    m, hw = get_model("llama3-70b"), get_hardware("h100-sxm-80gb")
    pools = {name: [kv_pool_bytes(Deployment(m, hw, PROFILES[name], 4, 1, 1, 2.0), s) for s in (128.0, 8192.0)]
             for name in ("vllm", "vllm_v1", "trtllm")}
    assert pools["vllm"][0] == pools["vllm"][1] and pools["vllm_v1"][0] == pools["vllm_v1"][1]
    assert pools["trtllm"][0] > pools["trtllm"][1]


def test_moe_workspace_holds_every_pair_at_full_width_up_to_the_chunk():
    """fused_moe's intermediate_cache3 (min(T, 32768) tokens x top_k x hidden at the
    activation size): below the chunk one more token costs k h more than in a dense model
    of the same shapes, above it no more."""
    from dse.infer.memory import FUSED_MOE_CHUNK_TOKENS, activation_workspace_bytes
    from dse.infer.workload import InferenceWorkload
    from dse.spec.model import get_model
    m = get_model("qwen3-30b-a3b")

    def ws(T):
        wl = InferenceWorkload(batch=1, prompt_len=T, gen_len=1, precision=1)
        return float(activation_workspace_bytes(m, wl, 1, 1, 2.0))

    C = FUSED_MOE_CHUNK_TOKENS
    below = ws(C) - ws(C - 1024.0)
    above = ws(C + 2048.0) - ws(C + 1024.0)
    assert below - above == pytest.approx(2.0 * 1024.0 * m.top_k * m.hidden_size, rel=1e-6)


def test_out_of_sample_vllm_v0_deepseek_r1_kv_pool_on_8x_h200():
    """OUT OF SAMPLE (never a constant): vLLM PR #14842 (2025-03-14) quotes the V0 engine
    serving DeepSeek-R1 with TP8 on 8x H200 at its defaults: "# cuda blocks: 4739" of 64
    tokens with the 256-byte-aligned MLA entry (640 bf16 elements x 61 layers), i.e.
    4739 x 64 x 640 x 2 x 61 B = 22.05 GiB of KV per GPU.  The prompt-sized workspace put the
    pool at 40.9 GiB (+86 %); the profiling pass of the 163840-token budget at 29.2 GiB; with
    the materialized MLA decode weights of those releases 24.5 GiB.  REGRESSION GUARD, a
    little above today's +11 % (what is still missing: the rest of the profiling peak,
    docs/accuracy.md)."""
    measured_gib = 4739 * 64 * 640 * 2 * 61 / GIB
    eng, pool = _r1_pool_gib("vllm (0.7.4.dev, VLLM_USE_V1=0)")
    _, pool_prompt = _r1_pool_gib("vllm (0.6.0)")
    assert eng.mla_absorbed_weights and pool < pool_prompt
    assert abs(pool / measured_gib - 1.0) < 0.14


@pytest.mark.parametrize("text,name", [
    ("NVIDIA Dynamo 0.4.1 (vLLM 0.10.1 backend, --no-async-scheduling)", "vllm_v1"),  # not vLLM 0.4
    ("dynamo 0.4.1 (vllm backend)", "vllm_v1_async"),        # backend release not stated: today's
    ("ray serve llm (vllm 0.7.3)", "vllm"),
    ("llm-d 0.2 (vllm)", "vllm_v1_async"),
    ("dynamo 0.6 (TensorRT-LLM 1.1 PyTorch backend)", "trtllm_pytorch"),
    ("Triton Inference Server 24.08 (TensorRT-LLM backend)", "trtllm"),
    ("triton-trtllm 24.08", "trtllm"),
    ("llm-d 0.3 (vllm-0.11.0)", "vllm_v1"),
    ("nim 1.8 (sglang backend)", "sglang_overlap"),
    ("NVIDIA NIM 1.8", "trtllm"),                            # NIM naming no engine: TensorRT-LLM
])
def test_serving_products_route_as_the_engine_they_run(text, name):
    prof, why = engine_profile(text)
    assert (prof.name, why) == (name, "")


def test_a_serving_product_naming_no_engine_gets_a_reason():
    prof, why = engine_profile("kserve 0.13")
    assert "does not name the engine it runs" in why


def test_absorbed_mla_weights_are_the_two_products_and_the_kept_copies():
    """W_Q_UK (q_l x n r) + W_UV_O (n r x h) at the linear size, the fp8 checkpoint's
    dequantized kv_b_proj and the 16-bit W_QR: 4.5 GiB per GPU for DeepSeek-R1 at TP8;
    halving TP doubles it; nothing for a model without MLA."""
    from dse.cost.rates import rates
    from dse.infer.memory import absorbed_mla_bytes
    from dse.infer.predict_rows import SERVING_PRECISION
    from dse.spec.model import get_model
    m, fp8 = get_model("deepseek-r1"), SERVING_PRECISION["fp8"]
    r = rates(get_hardware("h200-sxm-141gb"), fp8)
    n = 128 / 8
    per_layer = (1536 * n * 512 + n * 512 * 7168) * 1.0 + 512 * n * 256 * 2.0 + 1536 * n * 64 * 2.0
    assert float(absorbed_mla_bytes(m, 8, 1, r, fp8)) == pytest.approx(61 * per_layer)
    assert float(absorbed_mla_bytes(m, 4, 1, r, fp8)) == pytest.approx(2 * 61 * per_layer)
    assert absorbed_mla_bytes(get_model("llama3-70b"), 8, 1, r, fp8) == 0.0


def test_release_rules_read_the_backend_release_not_the_products():
    """Launch limits and V0's MLA facts take the backend's release: Ray 2.44 is not vLLM
    2.44, Dynamo 0.4.1 is not SGLang 0.4.1."""
    from dse.infer.engines import vllm_v0_mla
    from dse.spec.model import get_model
    r1 = get_model("deepseek-r1")
    eng = vllm_v0_mla(PROFILES["vllm"], "ray serve llm 2.44 (vllm 0.7.3)", r1)
    assert eng.max_num_tokens == 163840 and eng.mla_absorbed_weights
    text = "dynamo 0.4.1 (sglang 0.4.9 backend)"
    lim = launch_defaults(engine_profile(text)[0], text, 141 * GIB, "h200-sxm-141gb", "concurrency", 8)
    assert lim.graph_max_batch == 256                    # 0.4.8's rule above 90 GiB, not 0.4.1's 160


@pytest.mark.parametrize("text,hbm_gib,tp,frac", [
    ("sglang (v0.3.0)", 80, 1, 0.88), ("sglang (v0.3.0)", 80, 4, 0.85),     # by TP size
    ("sglang 0.4.2", 192, 8, 0.81), ("sglang 0.4.2", 80, 16, 0.79),
    ("sglang 0.4.9", 80, 8, round((81920 - (9.5 + 4) * 1024) / 81920, 3)),   # tiered reserve
    ("sglang 0.4.9", 141, 1, round((141 * 1024 - 12.5 * 1024) / (141 * 1024), 3)),
    ("sglang 0.4.9", 192, 8, round((192 - 32) / 192, 3)),
    ("sglang 0.5.3", 80, 8, round((81920 - (512 + 1.5 * 8192 + 2 * 512 + 1024)) / 81920, 3)),
    ("sglang", 80, 1, round((81920 - max(512 + 1.5 * 8192 + 2 * 256 + 128, 10240)) / 81920, 3)),
])
def test_sglang_mem_fraction_static_follows_the_release(text, hbm_gib, tp, frac):
    eng = launch_defaults(engine_profile(text)[0], text, hbm_gib * GIB, "gpu", "concurrency", tp)
    assert eng.mem_fraction == pytest.approx(frac)


def test_sglang_pool_is_its_static_fraction_less_the_weights():
    """SGLang's KV = memory free after the weights - total x (1 - mem_fraction_static)
    (model_runner.profile_max_num_token): activations live outside the fraction, so the pool
    does not depend on the prompt, and it is fraction x HBM - weights - the 1 GiB context."""
    from dse.infer.serving import Deployment, kv_pool_bytes, weights_bytes
    from dse.spec.model import get_model
    from dse.train.memory import RESERVE_BYTES
    m, hw = get_model("llama3-70b"), get_hardware("h100-sxm-80gb")
    dep = Deployment(m, hw, PROFILES["sglang_overlap"], 4, 1, 2, 2.0)
    pools = [kv_pool_bytes(dep, s) for s in (128.0, 8192.0)]
    assert pools[0] == pools[1] == pytest.approx(0.88 * float(hw.hbm_bytes) - weights_bytes(dep) - RESERVE_BYTES)


def test_trtllm_serve_sizes_its_pool_after_a_pass_of_8192_tokens():
    """KvCacheCreator's dummy context requests fill max_num_tokens (8192 under trtllm-serve):
    the pool no longer depends on the prompt; trtllm-bench rows keep the prompt's workspace."""
    from dse.infer.serving import Deployment, kv_pool_bytes
    from dse.spec.model import get_model
    m, hw = get_model("llama3-8b"), get_hardware("b200")
    serve = launch_defaults(PROFILES["trtllm_pytorch"], "trtllm (1.1, trtllm-serve)", float(hw.hbm_bytes),
                            hw.name, "concurrency", 1)
    bench = launch_defaults(PROFILES["trtllm_pytorch"], "trtllm (1.1, trtllm-bench throughput)",
                            float(hw.hbm_bytes), hw.name, "offline_throughput", 1)
    assert serve.profile_at_budget and not bench.profile_at_budget
    pools = [kv_pool_bytes(Deployment(m, hw, serve, 1, 1, 1, 1.0), s) for s in (128.0, 4096.0)]
    assert pools[0] == pools[1]


@pytest.mark.parametrize("notes,name", [
    ("server vllm serve --config config.yaml; config.yaml async-scheduling: true; "
     "max-num-batched-tokens: 8192", "vllm_v1_async"),        # the --config YAML file's key
    ("vllm serve ... --async-scheduling --max-num-seqs 512", "vllm_v1_async"),
    ("config.yaml async_scheduling: false", "vllm_v1"),
    ("config.yaml async-scheduling: yes", "vllm_v1_async"),   # YAML 1.1 booleans (PyYAML)
    ("config.yaml async-scheduling: off", "vllm_v1"),
    ("config.yaml async-scheduling: true; --no-async-scheduling", "vllm_v1"),  # the CLI wins
    ("", "vllm_v1"),                                          # 0.13's default: serial
])
def test_async_scheduling_stated_in_the_launch_notes(notes, name):
    """A vLLM 0.13 row whose launch (in ``notes``, the InferenceX gpt-oss runs' config.yaml)
    turns async scheduling on runs the overlapped host step; the engine text alone names only
    the image."""
    row = {**ROW, "id": "a", "engine": "vllm (vllm/vllm-openai:v0.13.0)", "notes": notes,
           "batch_or_concurrency": 8}
    p = predict_inference_frame(pd.DataFrame([row]), "x")
    assert p.status.iloc[0] == "ok" and p.chosen_engine.iloc[0] == name


def test_async_scheduling_in_the_notes_of_a_release_without_it_is_invalid():
    row = {**ROW, "id": "a", "engine": "vllm (0.9.2)", "notes": "config.yaml async-scheduling: true"}
    p = predict_inference_frame(pd.DataFrame([row]), "x")
    assert p.status.iloc[0].startswith("invalid") and "async-scheduling" in p.status.iloc[0]


@pytest.mark.parametrize("field,text", [("notes", "config.yaml async-scheduling: maybe"),
                                        ("notes", "config.yaml async-scheduling:"),
                                        ("engine", "vllm (0.13.0, --async-scheduling=2)")])
def test_an_async_scheduling_value_that_is_no_boolean_is_the_rows_invalid_status(field, text):
    """Not read as unstated: the row says why, naming the column; the other rows still run."""
    rows = [{**ROW, "id": "bad", "engine": "vllm (0.13.0)", "notes": "", field: text},
            {**ROW, "id": "good", "engine": "vllm (0.13.0)", "notes": ""}]
    p = predict_inference_frame(pd.DataFrame(rows), "x").set_index("id")
    assert p.status["bad"].startswith(f"invalid: {field}: async") and "true or false" in p.status["bad"]
    assert p.status["good"] == "ok"


@pytest.mark.parametrize("notes,status,ranks", [
    ("extra_llm_api_options enable_attention_dp: yes", "ok", 8.0),    # YAML 1.1 (PyYAML) booleans
    ("extra_llm_api_options enable_attention_dp: off", "ok", None),
    ("enable_attention_dp: 'false'; kv_cache_config.dtype: fp8", "ok", None),
    ("run with enable_attention_dp: attention DP over 8 ranks", "ok", 8.0),   # prose, not a value
    ("extra_llm_api_options: {enable_attention_dp: true, print_iter_log: true}", "ok", 8.0),  # flow map
    ("extra_llm_api_options: {kv_cache_config: {dtype: fp8}, enable_attention_dp: off}", "ok", None),
    ("enable_attention_dp: maybe; kv_cache_config.dtype: fp8", "invalid: notes: enable_attention_dp", None),
])
def test_attention_dp_booleans_as_tensorrt_llm_reads_its_yaml(notes, status, ranks):
    row = {"id": "a", "model": "deepseek-ai/DeepSeek-R1-0528", "hardware": "b200", "gpus": 8, "tp": 8,
           "precision": "fp8", "engine": "trtllm (1.1, trtllm-serve, PyTorch backend)",
           "scenario": "concurrency", "batch_or_concurrency": 8, "input_len": 1024, "output_len": 1024,
           "notes": notes}
    p = predict_inference_frame(pd.DataFrame([row]), "x")
    assert p.status.iloc[0].startswith(status), p.status.iloc[0]
    got = p["chosen_attn_dp"].iloc[0] if "chosen_attn_dp" in p else None   # absent: no row has attention DP
    if ranks is not None:
        assert got == ranks
    elif status == "ok":
        assert got is None or pd.isna(got) or got == 1


def test_limits_read_from_a_vllm_config_file():
    """vLLM's ``--config config.yaml`` keys are the flags' long names: ``max-num-batched-tokens:
    4096`` and ``max-cudagraph-capture-size: 1024`` set the token budget and the largest graph as
    the flags do; a dotted key (TensorRT-LLM's ``cuda_graph_config.max_batch_size``) is another
    setting, not the engine's batch cap; a bad value is the row's error."""
    from dse.errors import InputError
    from dse.infer.launch_flags import launch_settings
    eng = PROFILES["vllm_v1_async"]
    row = {"engine": "vllm (0.13.0)", "notes": "config.yaml max-num-batched-tokens: 4096; "
                                               "max-cudagraph-capture-size: 1024; max-num-seqs: 64"}
    got, _ = launch_settings(row, eng)
    assert (got.max_num_tokens, got.graph_max_batch, got.max_batch) == (4096, 1024, 64)
    dotted = {"engine": "trtllm (1.1)", "notes": "extra_llm_api_options cuda_graph_config.max_batch_size: 128"}
    got, _ = launch_settings(dotted, PROFILES["trtllm_pytorch"])
    assert got.max_batch == PROFILES["trtllm_pytorch"].max_batch and got.graph_max_batch == 128
    with pytest.raises(InputError, match="max-num-batched-tokens must be a positive integer"):
        launch_settings({"engine": "vllm", "notes": "max-num-batched-tokens: lots"}, eng)


@pytest.mark.parametrize("notes,graphs", [("", True), ("use_cuda_graph: false", False),
                                          ("use_cuda_graph: off", False),     # YAML 1.1 false
                                          ("use_cuda_graph: true", True)])
def test_tensorrt_llm_use_cuda_graph_switch(notes, graphs):
    """TensorRT-LLM's LLM API ``use_cuda_graph: false`` (or YAML's ``off`` / ``no``) runs every
    pass eagerly: the decode step pays the host's issue time per kernel."""
    from dse.infer.launch_flags import launch_settings
    eng, _ = launch_settings({"engine": "trtllm (1.0, trtllm-serve, PyTorch backend)", "notes": notes},
                             PROFILES["trtllm_pytorch"])
    assert eng.cuda_graphs is graphs


def test_a_use_cuda_graph_value_that_is_no_boolean_is_refused():
    from dse.errors import InputError
    from dse.infer.launch_flags import launch_settings
    with pytest.raises(InputError, match="notes.*use_cuda_graph must be true or false"):
        launch_settings({"engine": "trtllm (1.0)", "notes": "use_cuda_graph: maybe"}, PROFILES["trtllm_pytorch"])


@pytest.mark.parametrize("value,interval", [("true", 50), ("yes", 50), ("off", 1)])
def test_attention_dp_balancing_switch_reads_yaml_booleans(value, interval):
    """``attention_dp_config.enable_balance`` as PyYAML reads TensorRT-LLM's options file: on, a
    context release every ``timeout_iters`` (default 50) iterations; off, every iteration."""
    from dse.infer.launch_flags import launch_settings
    notes = f"enable_attention_dp: true; attention_dp_config.enable_balance: {value}"
    eng, _ = launch_settings({"engine": "trtllm (1.1, trtllm-serve)", "notes": notes}, PROFILES["trtllm_pytorch"])
    assert eng.recv_interval == interval


def test_an_attention_dp_balancing_switch_that_is_no_boolean_is_refused():
    from dse.errors import InputError
    from dse.infer.launch_flags import launch_settings
    with pytest.raises(InputError, match="enable_balance must be true or false"):
        launch_settings({"engine": "trtllm (1.1)", "notes": "enable_attention_dp: true; "
                         "attention_dp_config.enable_balance: maybe"}, PROFILES["trtllm_pytorch"])
