"""Physics of the serving scenarios (dse.infer.serving): limits and monotonicity."""

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.infer.engines import PROFILES, engine_profile
from dse.infer.serving import (Deployment, concurrency, fixed_batch, iteration_s, kv_slots,
                               offline, poisson, prefill_s, running_batch, tuned_batch,
                               weights_bytes)
from dse.spec.hardware import get_hardware
from dse.spec.model import get_model, layer_params
from dse.cost.rates import rates

H100 = get_hardware("h100-sxm-80gb")
L8 = get_model("meta-llama/Llama-3.1-8B")


def dep(hw=H100, model=L8, engine="trtllm", tp=1, precision=1, kv_bytes=2.0):
    return Deployment(model, hw, PROFILES[engine], tp, 1, precision, kv_bytes)


def bench_dep(**kw):
    """``trtllm_pytorch`` with trtllm-bench's tuned token budget and cohort packing on."""
    d = dep(model=get_model("meta-llama/Llama-3.3-70B-Instruct"), engine="trtllm_pytorch",
            tp=4, **kw)
    return d._replace(engine=dataclasses.replace(d.engine, bench_tuned_tokens=True))


def test_engine_text_parsing():
    assert engine_profile("trtllm (v0.6.1, gptSessionBenchmark)")[0].name == "trtllm_static"
    assert engine_profile("trtllm (v0.13.0, trtllm-bench, C++ engine)")[0].name == "trtllm"
    assert engine_profile("nemo (NeMo Framework inference, TensorRT-LLM backend)")[0].name == "nemo"
    v = engine_profile("vllm (v0.6.0, --num-scheduler-steps 10)")[0]
    assert v.name == "vllm" and v.scheduler_steps == 10
    assert engine_profile("sglang (v0.3.0)")[0].name == "sglang"
    assert engine_profile("mystery-engine 1.0")[1].startswith("engine")


def test_decode_time_at_least_bytes_over_bandwidth():
    """A decode iteration reads every weight and the whole KV cache once."""
    d = dep()
    for b, ctx in ((1, 128), (64, 2048), (256, 4096)):
        t = iteration_s(d, b, ctx, overhead=False)
        kv = b * ctx * 2 * L8.num_layers * L8.num_kv_heads * L8.head_dim * 2
        assert t >= (weights_bytes(d) + kv) / H100.hbm_bw_bytes_per_s


def test_prefill_at_least_flops_over_peak():
    d = dep()
    for b, S in ((1, 2048), (8, 1024), (32, 4096)):
        p = layer_params(L8)
        flops = 2 * b * S * L8.num_layers * (p.attention + p.experts)
        assert prefill_s(d, b, S, overhead=False) >= flops / float(rates(H100, 1).peak_linear_flops_per_s)


@settings(max_examples=12, deadline=None)
@given(st.floats(1.0, 4.0), st.sampled_from(["trtllm", "vllm", "sglang"]))
def test_more_hbm_bandwidth_never_lowers_tokens_per_s(scale, engine):
    fast = dataclasses.replace(H100, hbm_bw_bytes_per_s=H100.hbm_bw_bytes_per_s * scale)
    for S, O in ((128, 2048), (2048, 128)):
        assert offline(dep(fast, engine=engine), S, O, 1).tokens_per_s >= \
            offline(dep(H100, engine=engine), S, O, 1).tokens_per_s * (1 - 1e-6)


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 200))
def test_larger_batch_never_lowers_throughput_until_kv_capacity(b):
    d = dep()
    S, O = 512, 512
    cap = kv_slots(d, S, O)
    b2 = min(b * 2, cap)
    t1 = fixed_batch(d, b, S, O, 1).tokens_per_s
    t2 = fixed_batch(d, b2, S, O, 1).tokens_per_s
    assert t2 >= t1 * (1 - 1e-6)


def test_throughput_rises_then_saturates_with_concurrency():
    d = dep()
    S, O = 1000, 1000
    tps = [concurrency(d, n, S, O, 1).tokens_per_s for n in (1, 4, 16, 64, 256, 4096, 16384)]
    assert all(b >= a * (1 - 1e-6) for a, b in zip(tps, tps[1:]))
    assert tps[-1] == pytest.approx(tps[-2], rel=1e-6)       # past the slots: saturated
    assert tps[-1] <= offline(d, S, O, 1).tokens_per_s * (1 + 1e-6)


def test_concurrency_above_the_slots_waits_in_the_queue_by_littles_law():
    """Past the slots the closed loop's throughput is flat, so each request's time in
    the system is n / X: TTFT and e2e grow linearly in n by the queue wait."""
    d = dep()
    S, O = 1000, 1000
    B = tuned_batch(d, S, O)
    at, over = concurrency(d, B, S, O, 1), concurrency(d, 4 * B, S, O, 1)
    assert at.note == "" and over.note.startswith("queued")
    assert over.tokens_per_s == pytest.approx(at.tokens_per_s, rel=1e-9)
    assert over.e2e_s == pytest.approx(4 * B * O / over.tokens_per_s, rel=1e-9)
    assert over.ttft_s - at.ttft_s == pytest.approx(3 * at.e2e_s, rel=1e-9)
    assert over.tpot_s == pytest.approx(at.tpot_s, rel=1e-9)


def test_fewer_requests_than_replicas_run_one_each():
    """n requests on more than n replicas: n replicas serve one request each (not "no
    KV cache"), so tokens/s is n times one replica's at batch 1 and the latency is its."""
    d = dep()
    S, O = 1000, 500
    one = concurrency(d, 1, S, O, 1)
    for n in (1, 3):
        r = concurrency(d, n, S, O, 4)
        assert r.note == "" and r.batch == 1.0
        assert r.tokens_per_s == pytest.approx(n * one.tokens_per_s, rel=1e-9)
        assert r.ttft_s == pytest.approx(one.ttft_s, rel=1e-9)
        assert r.e2e_s == pytest.approx(one.e2e_s, rel=1e-9)


def test_ttft_grows_with_arrival_rate_toward_capacity():
    d = dep(engine="vllm")
    S, O = 512, 256
    cap = offline(d, S, O, 1).tokens_per_s / O
    rates_ = [cap * f for f in (0.1, 0.4, 0.7, 0.9)]
    res = [poisson(d, r, S, O, 1) for r in rates_]
    ttft = [r.ttft_s for r in res]
    tpot = [r.tpot_s for r in res]
    assert all(b >= a for a, b in zip(ttft, ttft[1:])), ttft
    assert all(b >= a for a, b in zip(tpot, tpot[1:])), tpot
    assert poisson(d, cap * 3, S, O, 1).note.startswith("saturated")


def test_ttft_at_least_prefill_roofline():
    d = dep()
    r = fixed_batch(d, 1, 2048, 1, 1)
    p = layer_params(L8)
    flops = 2 * 2048 * L8.num_layers * (p.attention + p.experts)
    assert r.ttft_s >= flops / float(rates(H100, 1).peak_linear_flops_per_s)


def test_fp8_kv_doubles_slots_and_speeds_long_context_decode():
    a, b = dep(precision=2, kv_bytes=2.0), dep(precision=2, kv_bytes=1.0)
    assert kv_slots(b, 1000, 1000) >= 1.9 * kv_slots(a, 1000, 1000)
    assert iteration_s(b, 64, 8192) < iteration_s(a, 64, 8192)


def test_gqa_unshared_kv_read_costs_the_group_factor():
    """TensorRT-LLM v0.6's decode kernel reads K/V per query head (engines docstring)."""
    m = get_model("llama2-70b")
    shared = Deployment(m, H100, PROFILES["trtllm"], 2, 1, 2, 1.0)
    unshared = Deployment(m, H100, PROFILES["trtllm_static"], 2, 1, 2, 1.0)
    assert iteration_s(unshared, 64, 2048, overhead=False) > iteration_s(shared, 64, 2048, overhead=False)


def test_weights_that_do_not_fit_are_a_status():
    big = get_model("llama3-405b")
    r = offline(Deployment(big, H100, PROFILES["trtllm"], 1, 1, 1, 2.0), 1000, 1000, 1)
    assert math.isnan(r.tokens_per_s) and r.note.startswith("infeasible")


def test_one_bad_row_gets_a_status_the_others_are_predicted():
    import pandas as pd
    from dse.predict import predict_frame
    base = dict(id="a", source_id="s", model="meta-llama/Llama-3.1-8B", hardware="h100-sxm-80gb",
                gpus=1, tp=1, pp=1, precision="fp8", engine="trtllm (v0.13.0)",
                scenario="offline_throughput", input_len=128, output_len=128)
    rows = [base, {**base, "id": "b", "hardware": "no-such-gpu"},
            {**base, "id": "c", "scenario": "warp_drive"}, {**base, "id": "d", "ep": 2},
            {**base, "id": "e", "scenario": "latency", "batch_or_concurrency": 1}]
    p = predict_frame(pd.DataFrame(rows), "t")
    st = dict(zip(p["id"], p["status"]))
    assert st["a"] == "ok" and st["e"] == "ok"
    assert st["b"].startswith("invalid: hardware") and st["c"].startswith("invalid: scenario")
    assert st["d"].startswith("infeasible: ep")
    assert p.loc[p["id"] == "a", "predicted_output_tok_s"].iloc[0] > 0


def test_mlperf_harness_and_trtllm_bench_profiles():
    """trtllm-bench reserves a request's final KV (GUARANTEED_NO_EVICT); NVIDIA's MLPerf
    harness admits on current blocks, so it holds more sequences; both give fp8 models
    an fp8 KV cache, vLLM and SGLang do not."""
    bench = engine_profile("trtllm (v0.13.0, trtllm-bench)")[0]
    mlperf = engine_profile("trtllm (TensorRT 10.2, NVIDIA MLPerf harness)")[0]
    assert bench.reserve_final_kv and not mlperf.reserve_final_kv
    assert bench.fp8_kv_with_fp8 and mlperf.fp8_kv_with_fp8
    assert not PROFILES["vllm"].fp8_kv_with_fp8 and not PROFILES["sglang"].fp8_kv_with_fp8
    d_b = Deployment(L8, H100, bench, 1, 1, 2, 1.0)
    d_m = Deployment(L8, H100, mlperf, 1, 1, 2, 1.0)
    assert kv_slots(d_m, 128, 2048) > 1.5 * kv_slots(d_b, 128, 2048)


def test_vllm_under_an_mlperf_harness_is_not_held_at_the_default_max_num_seqs():
    """vLLM's default max_num_seqs (256) caps the ``vllm`` profile; an MLPerf harness tunes
    it, so ``vllm_mlperf`` runs the throughput-best batch the KV pool allows, with the same
    CUDA-graph limit."""
    h = engine_profile("vllm (0.4.3+rocm614, AMD MLPerf harness)")[0]
    v = engine_profile("vllm (v0.6.0)")[0]
    assert h.name == "vllm_mlperf" and v.name == "vllm"
    assert h.graph_max_batch == v.graph_max_batch and h.max_batch > v.max_batch
    mi300x = get_hardware("mi300x")
    l70 = get_model("llama2-70b")
    d_h = Deployment(l70, mi300x, h, 1, 1, 2, 1.0)
    d_v = Deployment(l70, mi300x, v, 1, 1, 2, 1.0)
    assert running_batch(d_v, 286, 294) == 256 < running_batch(d_h, 286, 294)
    assert offline(d_h, 286, 294, 1).tokens_per_s > offline(d_v, 286, 294, 1).tokens_per_s


def test_poisson_running_batch_stays_within_the_tuned_limit():
    """An open-loop server admits up to the limit a tuned deployment sets (the offline
    scenario's tuned batch), not the raw KV slots; below saturation B <= that limit."""
    d = dep(engine="vllm")
    S, O = 512.0, 256.0
    lim = tuned_batch(d, S, O)
    assert lim <= running_batch(d, S, O)
    cap = offline(d, S, O, 1).tokens_per_s / O
    for f in (0.3, 0.7):
        r = poisson(d, f * cap, S, O, 1)
        assert not r.note and 1.0 <= r.batch <= lim + 1e-6
    over = poisson(d, 1.5 * cap, S, O, 1)
    assert over.note.startswith("saturated") and over.batch == lim


@settings(max_examples=10, deadline=None)
@given(st.floats(0.01, 0.99), st.sampled_from(["vllm", "sglang"]))
def test_sparse_prompts_cost_their_share_of_a_full_prefill_pass(q, engine):
    """On engines that run prefill apart from decode, q < 1 prompts per iteration cost
    q full one-prompt prefill passes (each pass reads every weight)."""
    from dse.infer.serving import _cycle
    d = dep(engine=engine)
    base = iteration_s(d, 16, 512)
    assert _cycle(d, 16, 512, q, 256) == pytest.approx(base + q * prefill_s(d, 1, 256), rel=1e-6)
    assert _cycle(d, 16, 512, q, 256) >= base + q * prefill_s(d, q, 256) * (1 - 1e-6)


@settings(max_examples=8, deadline=None)
@given(st.sampled_from([2, 4, 8]))
def test_tp_decode_step_pays_a_fixed_cost_per_all_reduce(tp):
    """Each decode all-reduce costs at least a launch plus NCCL's base latency, so a TP
    decode step at batch 1 is slower than the TP1 step divided by tp by at least
    2 L (launch + base) ."""
    from dse.infer.forward import NCCL_BASE_LATENCY_S
    t1 = iteration_s(dep(tp=1), 1, 256, overhead=False)
    tt = iteration_s(dep(tp=tp), 1, 256, overhead=False)
    floor = 2 * L8.num_layers * (H100.kernel_launch_s + NCCL_BASE_LATENCY_S)
    assert tt >= t1 / tp + floor * 0.99


def test_poisson_counts_are_a_distribution_with_mean_q():
    from dse.infer.serving import poisson_counts
    for q in (0.05, 1.0, 3.7, 40.0):
        pmf = poisson_counts(q)
        assert sum(w for _, w in pmf) == pytest.approx(1.0, abs=1e-12)
        assert sum(n * w for n, w in pmf) == pytest.approx(q, rel=2e-3)


def test_poisson_prompt_counts_smooth_the_tile_steps():
    """One mean-load iteration jumps at every GEMM tile boundary (Mixtral's experts see
    M/4 tokens: a step every ~512 iteration tokens); averaged over a Poisson count of
    new prompts the iteration time rises smoothly, and its steps are a fraction of
    those of the deterministic load (the decode batch itself is still a mean, so the
    steps it crosses remain)."""
    from dse.infer.serving import _steady
    d = Deployment(get_model("mistralai/Mixtral-8x7B-Instruct-v0.1"), H100,
                   PROFILES["trtllm_mlperf"], 1, 1, 2, 1.0)
    S, O = 256.0, 146.0
    batches = range(120, 420, 20)
    det = [_steady(d, b, S, O).mean_s for b in batches]
    avg = [_steady(d, b, S, O, spread=True).mean_s for b in batches]
    step = lambda ts: max(b - a for a, b in zip(ts, ts[1:]))
    assert all(b >= a * (1 - 1e-9) for a, b in zip(avg, avg[1:]))      # monotone in load
    assert step(avg) < 0.7 * step(det)


def test_the_iteration_carrying_a_prompt_is_size_biased():
    """The pass that carries a given new prompt holds more prompts than the average
    iteration (size-biased sampling), so it is no shorter than the mean iteration."""
    from dse.infer.serving import cycle
    d = dep(engine="trtllm")
    c = cycle(d, 64, 1024, 2.0, 512, spread=True)
    assert c.first_s >= c.mean_s
    det = cycle(d, 64, 1024, 2.0, 512, spread=False)
    assert det.first_s == pytest.approx(det.mean_s)


def test_poisson_tpot_and_ttft_rise_towards_capacity():
    """TPOT and TTFT grow as the arrival rate approaches the offline capacity (the
    bisection fixed point), and the served rate stays lambda O below it."""
    d = dep()
    S, O = 512.0, 256.0
    cap = offline(d, S, O, 1).tokens_per_s / O
    res = [poisson(d, f * cap, S, O, 1) for f in (0.2, 0.5, 0.8)]
    assert all(not r.note for r in res)
    assert res[0].tpot_s < res[1].tpot_s < res[2].tpot_s
    assert res[0].ttft_s < res[1].ttft_s < res[2].ttft_s


def test_static_session_pays_its_request_overhead_once_on_the_first_token():
    """gptSessionBenchmark times whole generate() calls: the session's fixed host cost
    (request_overhead_s) lands on the first token, not on every decode step."""
    static = dep(engine="trtllm_static")
    assert static.engine.request_overhead_s > 0
    bare = static._replace(engine=dataclasses.replace(static.engine, request_overhead_s=0.0))
    with_req, without = fixed_batch(static, 1.0, 128, 1, 1), fixed_batch(bare, 1.0, 128, 1, 1)
    assert with_req.ttft_s == pytest.approx(without.ttft_s + static.engine.request_overhead_s)
    long_w, long_wo = fixed_batch(static, 64.0, 128, 2048, 1), fixed_batch(bare, 64.0, 128, 2048, 1)
    assert long_w.tpot_s == long_wo.tpot_s
    assert long_w.tokens_per_s == pytest.approx(long_wo.tokens_per_s, rel=1e-3)
    assert dep(engine="trtllm").engine.request_overhead_s == 0.0


def test_output_length_spread_raises_the_kv_a_running_request_holds():
    """Length-biased residence: with E[O^2] / E[O]^2 = o2 a resident request holds
    S + o2 O / 2 tokens on average (vLLM / SGLang) and S + o2 O where TensorRT-LLM
    reserves the final footprint; o2 = 1 (fixed lengths) is the default."""
    from dse.infer.serving import kv_bytes_per_token, kv_pool_bytes, resident_output
    for engine in ("vllm", "trtllm"):
        d = dep(engine=engine)
        S, O = 226.0, 194.0
        assert kv_slots(d, S, O, 1.0) == kv_slots(d, S, O)
        fixed, spread = kv_slots(d, S, O, 1.0), kv_slots(d, S, O, 2.0)
        held = S + (resident_output(O, 2.0) if d.engine.reserve_final_kv else O)
        held = math.ceil(held / d.engine.block_tokens) * d.engine.block_tokens
        assert spread == math.floor(kv_pool_bytes(d, S) / (held * kv_bytes_per_token(d)))
        assert spread < fixed
    d = dep(engine="sglang")
    assert offline(d, 226, 194, 1, o2=2.0).tokens_per_s < offline(d, 226, 194, 1).tokens_per_s
    assert poisson(d, 4.0, 226, 194, 1, o2=2.0).tpot_s >= poisson(d, 4.0, 226, 194, 1).tpot_s


def test_eager_passes_of_python_engines_are_host_bound_when_the_gpu_work_is_small():
    """vLLM / SGLang issue a prefill pass kernel by kernel from Python: it takes at least
    ``eager_op_s`` per kernel of the operator graph; a pass with more GPU work than that
    is unchanged, a CUDA-graph decode replay never pays it, and the C++ engines have none."""
    from dse.infer.engines import EAGER_OP_S
    from dse.infer.forward import stage_kernels
    from dse.spec.frameworks import MEGATRON
    assert EAGER_OP_S == MEGATRON.host_op_s                # the training constant, carried over
    l70 = get_model("meta-llama/Llama-3.1-70B")
    a100 = get_hardware("a100-sxm-80gb")
    no_floor = lambda d: d._replace(engine=dataclasses.replace(d.engine, eager_op_s=0.0))
    big = dep(model=l70, engine="sglang", tp=4)
    kernels = float(stage_kernels(l70, 230.0, 1.0, prefill_attention_op(l70, 230.0, 4), 4, 1, 1,
                                  2.0))
    assert kernels == pytest.approx(12 * l70.num_layers + 4 + 2, abs=2)
    t, t0 = prefill_s(big, 1, 230, overhead=False), prefill_s(no_floor(big), 1, 230, overhead=False)
    assert t >= EAGER_OP_S * kernels * (1 - 1e-6) and t > 1.3 * t0
    small = dep(hw=a100, engine="sglang")                  # 8B on one A100: GPU-bound
    assert prefill_s(small, 1, 230) == pytest.approx(prefill_s(no_floor(small), 1, 230))
    assert iteration_s(big, 16, 500) == pytest.approx(iteration_s(no_floor(big), 16, 500))
    assert PROFILES["trtllm"].eager_op_s == 0.0 and PROFILES["nemo"].eager_op_s == 0.0


def prefill_attention_op(model, S, tp):
    from dse.infer.prefill import prefill_attention
    return prefill_attention(model, 1.0, S, tp)


def test_batch_nodes_are_a_unit_normal_rule():
    """The open-loop batch average uses a quadrature of N(0, 1): weights sum to 1, mean 0,
    variance 1, so E[b] = B and Var[b] = B (the Poisson law of an M/G/inf system)."""
    from dse.infer.serving import BATCH_NODES
    assert sum(w for _, w in BATCH_NODES) == pytest.approx(1.0, abs=1e-12)
    assert sum(w * x for x, w in BATCH_NODES) == pytest.approx(0.0, abs=1e-12)
    assert sum(w * x * x for x, w in BATCH_NODES) == pytest.approx(1.0, abs=1e-12)
    assert sum(w * x ** 4 for x, w in BATCH_NODES) == pytest.approx(3.0, abs=1e-9)


def test_open_loop_batch_spread_smooths_the_graph_capture_step():
    """A decode batch just above the CUDA-graph capture limit runs eagerly and jumps in
    time; averaged over a Poisson(B) running batch the mean iteration rises monotonically
    through the limit in smaller steps (each quadrature node carries only its weight of
    the jump), stays between the two sides, and is unchanged for deterministic load
    (spread False)."""
    from dse.infer.serving import cycle, open_loop_cycle
    d = dep(engine="sglang")
    g = d.engine.graph_max_batch
    ctx, S = 600.0, 300.0
    batches = [g - 24 + 3 * k for k in range(17)]
    plain = [cycle(d, b, ctx, 0.5, S, True).mean_s for b in batches]
    avg = [open_loop_cycle(d, b, ctx, 0.5, S, True).mean_s for b in batches]
    step = lambda ts: max(b - a for a, b in zip(ts, ts[1:]))
    assert step(avg) < 0.7 * step(plain)                        # the step is spread out
    assert all(b >= a * (1 - 1e-9) for a, b in zip(avg, avg[1:]))
    assert plain[0] <= avg[8] <= plain[-1]
    det = open_loop_cycle(d, 64.0, ctx, 0.5, S, False)
    assert det.mean_s == pytest.approx(cycle(d, 64.0, ctx, 0.5, S, False).mean_s)


def test_open_loop_batch_never_exceeds_the_cap():
    """Nodes above the engine's running-batch cap are clipped to it: with the cap at the
    mean the average is no slower than the iteration at the mean."""
    from dse.infer.serving import cycle, open_loop_cycle
    d = dep()
    at_cap = open_loop_cycle(d, 100.0, 800.0, 0.5, 400.0, True, cap=100.0).mean_s
    assert at_cap <= cycle(d, 100.0, 800.0, 0.5, 400.0, True).mean_s * (1 + 1e-9)


def test_pytorch_engines_stream_linear_weights_below_stream_bandwidth():
    """vLLM / SGLang linears (cuBLAS heuristics) stream their weights at
    ``linear_bw_eff`` of the achieved bandwidth, TensorRT-LLM's tuned GEMMs at all of it:
    a weight-bound decode step of the PyTorch engine is longer by about
    ``weights / bw x (1 / eff - 1)``, and never shorter than bytes / bandwidth."""
    assert PROFILES["trtllm"].linear_bw_eff == 1.0
    eff = PROFILES["vllm"].linear_bw_eff
    assert 0.0 < eff < 1.0 and PROFILES["sglang"].linear_bw_eff == eff
    tuned = dataclasses.replace(PROFILES["vllm"], linear_bw_eff=1.0)
    d_v = Deployment(L8, H100, PROFILES["vllm"], 1, 1, 1, 2.0)
    d_1 = Deployment(L8, H100, tuned, 1, 1, 1, 2.0)
    bw = float(rates(H100, 1).hbm_bw_bytes_per_s)
    w = weights_bytes(d_v)
    t_v = iteration_s(d_v, 8, 512, overhead=False)
    t_1 = iteration_s(d_1, 8, 512, overhead=False)
    extra = t_v - t_1
    p = layer_params(L8)
    lin = L8.num_layers * float(p.attention + p.experts) * 2.0 / bw   # the layers' linears
    assert 0.9 * lin * (1 / eff - 1) < extra < 1.1 * (w / bw) * (1 / eff - 1)
    assert t_v >= w / bw


@settings(max_examples=12, deadline=None)
@given(st.sampled_from([64.0, 256.0, 1024.0]), st.sampled_from([128.0, 1024.0, 8192.0]),
       st.sampled_from([128.0, 1024.0, 8192.0]))
def test_prefill_share_is_a_fraction_that_vanishes_with_long_outputs(B, S, O):
    """The share p of iterations holding prompt work lies in [0, 1], its mixed passes carry
    at least the mean load, and p falls toward 0 as the output length grows."""
    from dse.infer.serving import bench_tuned, prefill_share
    d = bench_tuned(bench_dep(), S, O)
    sh = prefill_share(d, B, B / O, S)
    assert 0.0 < sh.share <= 1.0
    assert sh.tokens >= B / O * S * (1 - 1e-9)
    assert sh.share * sh.tokens == pytest.approx(B / O * S)
    longer = prefill_share(d, B, B / (64 * O), S)
    assert longer.share <= sh.share + 1e-12
    assert longer.share <= B / (64 * O) + 1e-12      # at most one prompt-holding pass per arrival
    assert prefill_share(d, B, 0.0, S).share == 0.0
    # without cohort packing, TensorRT-LLM's MicroBatchScheduler (C++ executor and PyTorch
    # backend alike, no context chunking) takes each waiting prompt whole: a share min(q, 1)
    # (of at most the budget the decodes leave)
    for engine in ("trtllm", "trtllm_pytorch"):
        d = dep(engine=engine)
        whole = min(S, max(d.engine.max_num_tokens - B, 1.0))
        assert prefill_share(d, B, B / O, S).share == pytest.approx(min(B / O * S / whole, 1.0))


@settings(max_examples=8, deadline=None)
@given(st.sampled_from([32.0, 256.0, 1024.0]), st.sampled_from([256.0, 1024.0]),
       st.sampled_from([1024.0, 8192.0]))
def test_mixed_cycle_lies_between_pure_decode_and_all_mixed(B, S, O):
    """With CUDA graphs for generation-only batches and an eager floor on mixed passes
    (``trtllm_pytorch``) the deterministic cycle is no faster than a decode-only pass and
    no slower than making every pass mixed with the same prompt tokens."""
    from dse.infer.serving import _cycle, bench_tuned, prefill_share
    d = bench_tuned(bench_dep(), S, O)
    ctx = S + O / 2
    q = B / O
    sh = prefill_share(d, B, q, S)
    t = _cycle(d, B, ctx, q, S)
    decode = iteration_s(d, B, ctx)
    all_mixed = iteration_s(d, B, ctx, sh.tokens, S)
    assert decode * (1 - 1e-9) <= t <= all_mixed * (1 + 1e-9)
    assert t == pytest.approx(sh.share * all_mixed + (1 - sh.share) * decode, rel=1e-9)
    # a pass with any prompt token is eager (not a graph replay): spreading the prompt
    # work over every pass, as a mean-load model would, pays that floor on all of them
    spread = iteration_s(d, B, ctx, q * S, S)
    if sh.share < 0.5:
        assert t < spread


def test_bench_token_budget_follows_trtllm_bench_tuning():
    """trtllm-bench's max_num_tokens: ~ raw_bs (1 + S/O), rounded, >= 2048, <= 32768."""
    from dse.infer.serving import bench_max_num_tokens, kv_slots
    d = bench_dep(precision=2, kv_bytes=1.0)
    for S, O in [(128, 128), (1024, 8192), (8192, 1024), (20000, 2000)]:
        tok = bench_max_num_tokens(d, S, O)
        raw = min(kv_slots(d, S, O, final=True), 4096) * (1 + S / O)
        assert 2048 <= tok <= 32768 and tok >= min(raw, 32768) - 1e-6
        assert tok <= max(2048, min(raw, 32768) * 1.15 + 1024)


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(["trtllm", "trtllm_pytorch", "vllm_v1"]), st.sampled_from([1, 2, 4]),
       st.sampled_from([8.0, 64.0]), st.sampled_from([512.0, 2048.0]))
def test_a_prompt_waits_at_least_its_own_prefill(engine, pp, n, S):
    """On an engine that takes whole prompts, a new prompt's TTFT is at least the static
    prefill of that prompt alone on the same layout (one micro-batch through the pp
    stages), at light and heavier closed-loop loads."""
    from dse.infer.serving import prefill_s
    d = Deployment(get_model("meta-llama/Llama-3.1-70B"), H100, PROFILES[engine], 8 // pp, pp, 2, 1.0)
    alone = prefill_s(d, 1.0, S)
    assert concurrency(d, n, S, 256.0, 1).ttft_s >= alone * (1 - 1e-6)


def test_the_sweep_path_waits_for_the_whole_prompt_too():
    """The vectorized path (dse.infer.continuous) gives the same TTFT as the scalar one on
    a pipelined whole-prompt point, above the prompt's own prefill."""
    from dse.infer.continuous import Replica, concurrency_point, slots
    from dse.infer.serving import prefill_s
    m = get_model("meta-llama/Llama-3.1-70B")
    d = Deployment(m, H100, PROFILES["trtllm"], 4, 2, 2, 1.0)
    res = concurrency(d, 16.0, 2048.0, 256.0, 1)
    rep = Replica(m, H100, 4, 2, 2, 1.0)
    c = concurrency_point(rep, d.engine, 16.0, 2048.0, 256.0, slots(rep, d.engine, 2048.0, 256.0))
    assert float(c.ttft_s) == pytest.approx(res.ttft_s, rel=1e-3)
    assert res.ttft_s >= prefill_s(d, 1.0, 2048.0)


@pytest.mark.parametrize("engine", ["trtllm", "trtllm_pytorch"])
def test_attention_dp_with_pipeline_waits_for_the_whole_prompt(engine):
    """Attention DP with pp > 1 on a whole-prompt engine: the busiest rank's prompt rides
    one micro-batch too (dse.infer.serving._rank_mean), so TTFT is at least the prompt's own
    prefill on the layout, and the vectorized lattice (dse.infer.continuous._rank_lattice)
    gives the scalar path's TTFT."""
    from dse.host_eval import host_call
    from dse.infer.continuous import Replica, continuous
    from dse.infer.serving import prefill_s
    m, hw, dp, S, O = get_model("qwen3-235b-a22b"), get_hardware("h200-sxm-141gb"), 4, 2048.0, 256.0
    d = Deployment(m, hw, PROFILES[engine], 1, 2, 2, 1.0, ep=dp, dp=dp)
    alone = prefill_s(d, 1.0, S, group_prompts=1.0)      # the MoE layers see this prompt at least
    # one host plan, the point as the sweep traces it: model, precision, KV bytes and dp
    # fixed (dp a Python number: the lattice branch only, dse.infer.continuous.attn_dp_case)
    point = lambda h, n_, S_, O_: continuous(Replica(m, h, 1.0, 2.0, 2, 1.0, ep=float(dp), dp=float(dp)),
                                              d.engine, n_, S_, O_)
    for n in (4.0, 32.0):                     # requests per attention rank
        res = concurrency(d, n * dp, S, O, 1)
        assert res.ttft_s >= alone * (1 - 1e-6), n
        # the vectorized point's program, run on the host (dse.host_eval: no XLA compile)
        v = host_call(point, hw, n, S, O)
        assert float(v.ttft_s) == pytest.approx(res.ttft_s, rel=0.02), n
