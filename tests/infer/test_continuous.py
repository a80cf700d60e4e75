"""Continuous batching, vectorized (dse/infer/continuous.py): agrees with the scalar
model of dse/infer/serving.py, vmapped == scalar loop, the sweep's continuous mode, and
the limits of the closed-loop scenario (throughput rises then saturates, TTFT grows
once requests queue, TPOT above the roofline and the host time)."""

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dse.errors import InputError
from dse.host_eval import host_call
from dse.infer import serving as SV
from dse.infer.continuous import (NVIDIA_ONLY, Replica, continuous, cycle, default_engine, engine_rule,
                                  kv_element_bytes)
from dse.infer.engines import PROFILES
from dse.infer.sweep import sweep_inference
from dse.spec.hardware import get_hardware, stack
from dse.spec.model import get_model

M70 = get_model("llama3-70b")
M8 = get_model("llama3-8b")
R1 = get_model("deepseek-r1")     # MLA latent KV cache, MoE with a shared expert
H100, H200, MI300 = (get_hardware(n) for n in ("h100-sxm-80gb", "h200-sxm-141gb", "mi300x"))


@functools.lru_cache(maxsize=None)
def _point(e, model, precision, kv_bytes, dp):
    """``continuous`` of one point as the sweep traces it (:mod:`dse.infer.sweep`): the
    engine, model, precision, KV bytes and the replica's ``dp`` fixed (a Python number:
    :func:`dse.infer.continuous.attn_dp_case` traces only that branch;
    ``test_static_attention_dp_case_costs_the_same_cycle`` holds the branches equal), the
    hardware and the layout's numbers traced -- one function (one host plan) per such set,
    a quarter of the equations of a program that takes the model as an argument."""
    return lambda hw, tp, pp, ep, n, S, O: continuous(
        Replica(model, hw, tp, pp, precision, kv_bytes, ep, dp), e, n, S, O)


def ONE(rep, e, n, S, O):
    """One point of :func:`continuous`, its jaxpr run on the host (dse.host_eval): the
    program ``jax.jit`` would compile, without the compile (a test evaluates a few points)."""
    fn = _point(e, rep.model, rep.precision, rep.kv_bytes, float(rep.dp))
    return host_call(fn, rep.hw, rep.tp, rep.pp, rep.ep, n, S, O)


def rep(model, hw, tp, pp, prec, kvb):
    return Replica(model, hw, float(tp), float(pp), prec, kvb)


# (engine, hardware, tp, pp, precision code, KV bytes) -- mixing and non-mixing engines,
# CUDA graphs on and off, PP > 1, fp8 KV, AMD
CASES = [("trtllm", H100, 4, 1, 1, 2.0, M70), ("trtllm", H200, 2, 2, 2, 1.0, M70),
         ("vllm", H100, 8, 1, 2, 2.0, M70), ("vllm", MI300, 2, 1, 1, 2.0, M70),
         ("sglang", H200, 4, 1, 1, 2.0, M70), ("trtllm", H200, 8, 1, 2, 1.0, R1),
         ("vllm", MI300, 8, 1, 2, 2.0, R1)]


@pytest.mark.parametrize("eng, hw, tp, pp, prec, kvb, model", CASES)
def test_agrees_with_scalar_serving_model(eng, hw, tp, pp, prec, kvb, model):
    e = PROFILES[eng]
    M70 = model
    dep = SV.Deployment(M70, hw, e, tp, pp, prec, kvb)
    S, O = 1024.0, 512.0
    B_star = SV.tuned_batch(dep, S, O)
    assert B_star >= 1
    for n in (1.0, 16.0, max(B_star - 1.0, 1.0), 4.0 * B_star):
        s = SV.concurrency(dep, n, S, O, 1)
        r = ONE(rep(M70, hw, tp, pp, prec, kvb), e, n, S, O)
        assert float(r.slots) == pytest.approx(B_star, rel=1e-6)
        assert float(r.admitted) == pytest.approx(s.batch, rel=1e-6)
        assert float(r.tpot_s) == pytest.approx(s.tpot_s, rel=0.02)
        assert float(r.tokens_per_s) == pytest.approx(s.tokens_per_s, rel=0.02)
        # both put the wait for a KV slot (Little's law) in TTFT and e2e
        run_e2e = s.e2e_s / max(n / s.batch, 1.0)
        wait = max(n / s.batch - 1.0, 0.0) * run_e2e
        assert float(r.queue_s) == pytest.approx(wait, rel=0.02, abs=1e-9)
        assert float(r.ttft_s) == pytest.approx(s.ttft_s, rel=0.02)
        assert float(r.e2e_s) == pytest.approx(s.e2e_s, rel=0.02)
        # the KV slots of :func:`slots`, carried by the result (no second trace of it)
        assert float(r.kv_slots) == pytest.approx(SV.kv_slots(dep, S, O), abs=1.0)


B200 = get_hardware("b200")
# the TensorRT-LLM >= 1.0 PyTorch profile: host time beside the GPU pass (overlap
# scheduler, ``EngineProfile.with_host_s``) and, with ``bench_tuned_tokens``, the
# cohort prefill share of ``serving.prefill_share`` -- (hardware, tp, pp, precision, KV bytes)
PYTORCH_CASES = [(B200, 1, 1, 3, 1.0), (H200, 2, 1, 2, 1.0), (H100, 4, 2, 1, 2.0),
                 (get_hardware("gb200"), 1, 1, 3, 1.0)]   # Grace host: host_cpu_slowdown 2.75


@pytest.mark.parametrize("bench_tuned", [False, True])
@pytest.mark.parametrize("hw, tp, pp, prec, kvb", PYTORCH_CASES)
def test_host_overlap_and_prefill_share_agree_with_scalar_model(hw, tp, pp, prec, kvb, bench_tuned):
    """One point through both paths (the vectorized search and the per-row predictor)
    agrees to float32 tolerance, long and short outputs, below and at the tuned batch."""
    e = dataclasses.replace(PROFILES["trtllm_pytorch"], bench_tuned_tokens=bench_tuned)
    assert e.host_overlap
    dep = SV.Deployment(M70, hw, e, tp, pp, prec, kvb)
    for S, O in ((1024.0, 8192.0), (1024.0, 1024.0), (128.0, 2048.0)):
        B_star = SV.tuned_batch(dep, S, O)
        assert B_star >= 1
        for n in (1.0, 16.0, max(B_star - 1.0, 1.0), float(B_star)):   # floats: one trace
            s = SV.concurrency(dep, n, S, O, 1)
            r = ONE(rep(M70, hw, tp, pp, prec, kvb), e, n, S, O)
            assert float(r.slots) == pytest.approx(B_star, rel=1e-6)
            for f in ("tpot_s", "ttft_s", "e2e_s", "tokens_per_s"):
                assert float(getattr(r, f)) == pytest.approx(getattr(s, f), rel=2e-5), (S, O, n, f)


@settings(max_examples=10, deadline=None)
@given(hw=st.sampled_from([B200, H200, H100]), n=st.integers(1, 512),
       S=st.integers(16, 4096), O=st.integers(16, 8192), scale=st.floats(1.05, 3.0),
       bench_tuned=st.booleans())
def test_pytorch_profile_limits(hw, n, S, O, scale, bench_tuned):
    """Overlap-scheduler physics of the vectorized path: a decode step is at least the
    host time of its batch and at least the weight + KV bytes over the HBM bandwidth
    (max, not sum, of the two), and more HBM bandwidth never lowers tokens/s."""
    e = dataclasses.replace(PROFILES["trtllm_pytorch"], bench_tuned_tokens=bench_tuned)
    prec = 3 if hw is B200 else 2
    r = ONE(rep(M70, hw, 1, 1, prec, 1.0), e, float(n), float(S), float(O))
    if not float(r.slots) >= 1:
        return
    B = float(r.admitted)
    dep = SV.Deployment(M70, hw, e, 1, 1, prec, 1.0)
    kv_read = B * (S + O / 2.0) * float(SV.kv_bytes_per_token(dep))
    floor = (SV.weights_bytes(dep) + kv_read) / float(hw.hbm_bw_bytes_per_s)
    assert float(r.tpot_s) >= max(floor, e.host_s(B)) * (1 - 1e-6)
    fast = hw.replace(hbm_bw_bytes_per_s=hw.hbm_bw_bytes_per_s * scale)
    r2 = ONE(rep(M70, fast, 1, 1, prec, 1.0), e, float(n), float(S), float(O))
    assert float(r2.tokens_per_s) >= float(r.tokens_per_s) * (1 - 1e-5)


@pytest.fixture(scope="module")
def vmapped():
    """Per engine, one point function of the design knobs (the model a constant of the
    program), compiled twice: vmapped over a batch of points, and as it is, for one point."""
    fns = {}
    for eng in ("trtllm", "vllm"):
        e = PROFILES[eng]
        point = lambda hw, tp, pp, n, S, O, e=e: continuous(Replica(M70, hw, tp, pp, 1, 2.0), e, n, S, O)
        fns[eng] = jax.jit(jax.vmap(point)), jax.jit(point)
    return fns


POINT = st.tuples(st.sampled_from([0, 1, 2]), st.sampled_from([(1, 1), (2, 1), (1, 2), (4, 2)]),
                  st.integers(1, 4096), st.integers(16, 8192), st.integers(2, 4096))


@settings(max_examples=12, deadline=None)
@given(eng=st.sampled_from(["trtllm", "vllm"]), pts=st.lists(POINT, min_size=8, max_size=8))
def test_vmapped_equals_scalar_loop(vmapped, eng, pts):
    hws = [H100, H200, MI300]
    f32 = lambda xs: jnp.asarray(np.asarray(xs, np.float32))
    hw = stack([hws[h] for h, *_ in pts])
    batched, scalar = vmapped[eng]
    out = batched(hw, f32([l[0] for _, l, *_ in pts]), f32([l[1] for _, l, *_ in pts]),
                  f32([p[2] for p in pts]), f32([p[3] for p in pts]), f32([p[4] for p in pts]))
    for i, (h, (tp, pp), n, S, O) in enumerate(pts):
        # float32 scalars, the batch's dtype.  The scalar is compiled too (not the
        # host-run ONE): the batch the engine tunes sits on wave / tile steps where XLA's
        # arithmetic and the host's can round to opposite sides (H200 TP2, 6263 in / 30
        # out: 39.05 on the host, 32 compiled)
        r = scalar(hws[h], *(np.float32(x) for x in (tp, pp, n, S, O)))
        for f in r._fields:
            a, b = float(getattr(out, f)[i]), float(getattr(r, f))
            assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-5), (f, a, b)


@pytest.fixture(scope="module")
def cdf():
    return sweep_inference(M70, [H100, H200, MI300], 4, 1024, 1024, 512, 2, batching="continuous")


def test_sweep_continuous_rows_are_the_point_model(cdf):
    assert set(cdf.engine) == {"trtllm", "vllm"}
    assert (cdf[cdf.hardware == "mi300x"].engine == "vllm").all()
    assert (cdf.batching == "continuous").all()
    hws = {h.name: h for h in (H100, H200, MI300)}
    ok = cdf[cdf.feasible]
    assert len(ok) > 20
    for _, row in ok.iloc[::7].iterrows():
        e = PROFILES[row.engine]
        r = ONE(rep(M70, hws[row.hardware], row.tp, row.pp, 2, kv_element_bytes(e, 2)), e,
                float(row.batch), 1024.0, 512.0)
        for col, f in (("ttft_s", "ttft_s"), ("tpot_s", "tpot_s"), ("tokens_per_s", "tokens_per_s"),
                       ("admitted", "admitted"), ("slots", "slots"), ("queue_s", "queue_s")):
            assert row[col] == pytest.approx(float(getattr(r, f)), rel=1e-5, abs=1e-9), col
    # the admitted batch never exceeds the KV slots or the concurrency
    assert (ok.admitted <= ok.slots).all() and (ok.admitted <= ok.batch).all()
    assert (ok.slots <= ok.kv_slots).all()
    assert (ok.output_tok_s == ok.tokens_per_s).all()


def test_throughput_rises_then_saturates_and_ttft_grows_once_queued(cdf):
    for (hw, tp, pp), g in cdf[cdf.feasible].groupby(["hardware", "tp", "pp"]):
        g = g.sort_values("batch")
        tps = g.tokens_per_s.to_numpy()
        # rises with concurrency (within GEMM wave-quantization dips of a few %) ...
        assert (tps >= 0.95 * np.maximum.accumulate(tps)).all(), (hw, tp, pp)
        assert tps[-1] > 10 * tps[0]
        over = g[g.batch > g.slots]
        under = g[g.batch <= g.slots]
        assert len(under)
        if len(over):
            # saturated: the same admitted batch, the same rate, only the wait grows
            assert over.tokens_per_s.to_numpy() == pytest.approx(over.tokens_per_s.iloc[0], rel=1e-6)
            assert (np.diff(over.ttft_s.to_numpy()) > 0).all() and (over.queue_s > 0).all()
            assert over.ttft_s.min() > under.ttft_s.max()
        assert (under.queue_s == 0).all()


def test_tpot_above_roofline_and_host_time(cdf):
    ok = cdf[cdf.feasible]
    for _, row in ok.iterrows():
        hw = {"h100-sxm-80gb": H100, "h200-sxm-141gb": H200, "mi300x": MI300}[row.hardware]
        e = PROFILES[row.engine]
        weights = row.weights_gib * 2**30
        # each iteration reads every weight of a stage once, pp stages in turn
        assert row.tpot_s >= row.pp * weights / float(hw.hbm_bw_bytes_per_s) + e.overhead_per_iter_s


def test_no_kv_slot_is_infeasible_with_reason():
    d = sweep_inference(M70, [H100], 1, 8, 1024, 512, 1, batching="continuous")
    assert not d.feasible.any()
    assert d.status.str.contains("leave no KV cache for one request under trtllm").all()
    assert d.ttft_s.isna().all()


def test_engines_per_hardware():
    assert default_engine(H100) == "trtllm" and default_engine(MI300) == "vllm"
    for name in NVIDIA_ONLY:
        assert "NVIDIA GPUs only" in engine_rule(name, MI300) and engine_rule(name, H100) == ""
    assert engine_rule("vllm", MI300) == "" and engine_rule("sglang", MI300) == ""
    with pytest.raises(InputError, match="NVIDIA GPUs only"):
        sweep_inference(M8, [MI300], 1, 4, 128, 16, batching="continuous", engine="trtllm")
    with pytest.raises(InputError, match="batching"):
        sweep_inference(M8, [H100], 1, 4, 128, 16, batching="dynamic")
    with pytest.raises(InputError, match="one engine per hardware"):
        sweep_inference(M8, [H100, H200], 1, 4, 128, 16, batching="continuous", engine=["vllm"])
    assert kv_element_bytes(PROFILES["trtllm"], 2) == 1.0 and kv_element_bytes(PROFILES["vllm"], 2) == 2.0


def test_an_engine_named_by_its_release_routes_as_a_predict_row(capsys):
    """--engine takes a profile name or an engine with its release ("vllm 0.14.1"), routed
    by dse.infer.engines.engine_profile; an unknown engine or a flag the release lacks is
    one line and exit status 2."""
    from dse.cli import main
    from dse.infer.continuous import resolve_engine
    assert resolve_engine("vllm", "x") == "vllm"                  # a profile name stays
    assert resolve_engine("vllm 0.14.1", "x") == "vllm_v1_async"
    assert resolve_engine("vllm (0.13.0)", "x") == "vllm_v1"
    assert resolve_engine("sglang 0.3.0", "x") == "sglang"
    assert resolve_engine("trtllm 1.0 pytorch", "x") == "trtllm_pytorch"
    assert resolve_engine("foo 1.2", "x") == "foo 1.2"             # left for engine_rule
    with pytest.raises(InputError, match="x: eng: --async-scheduling first shipped"):
        resolve_engine("vllm 0.9 --async-scheduling", "x", "eng")
    d = sweep_inference(M8, [H100], 1, 4, 128, 16, batching="continuous", engine="vllm 0.14.1")
    assert set(d.engine) == {"vllm_v1_async"}
    base = ["infer", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "1",
            "--batch", "8", "--prompt", "256", "--gen", "32", "--engine"]
    assert main(base + ["vllm 0.14.1"]) == 0
    assert "vllm_v1_async" in capsys.readouterr().out
    for bad in ("foo 1.2", "vllm 0.9 --async-scheduling"):
        assert main(base + [bad]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "--engine" in err


def test_cli_batching_flag(capsys):
    from dse.cli import main
    assert main(["infer", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "1",
                 "--batch", "8", "--prompt", "256", "--gen", "32"]) == 0
    assert "continuous batching" in capsys.readouterr().out
    assert main(["infer", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "1",
                 "--batch", "8", "--prompt", "256", "--gen", "32", "--batching", "static"]) == 0
    assert "static batches" in capsys.readouterr().out
    assert main(["infer", "--model", "llama3-8b", "--hardware", "mi300x", "--gpus", "1",
                 "--engine", "trtllm"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--engine" in err


@pytest.mark.parametrize("name, dp, S, O", [("deepseek-r1", 8, 1024.0, 1024.0),
                                             ("deepseek-r1", 8, 1024.0, 8192.0),
                                             ("qwen3-235b-a22b", 4, 8192.0, 1024.0),
                                             ("qwen3-235b-a22b", 2, 1024.0, 1024.0)])
def test_attention_dp_imbalance_agrees_with_scalar_model(name, dp, S, O):
    """Attention DP: the busiest rank's whole prompts (dse.infer.attention_dp, the
    lattice cases in closed form here, enumerated there) give the same iteration in the
    vectorized search and the per-row predictor."""
    e = PROFILES["trtllm_pytorch"]
    model = get_model(name)
    dep = SV.Deployment(model, H200, e, 1, 1, 2, 1.0, ep=dp, dp=dp)
    r = Replica(model, H200, 1.0, 1.0, 2, 1.0, ep=float(dp), dp=float(dp))
    for n in (16.0, 128.0):
        s = SV.concurrency(dep, n * dp, S, O, 1)
        v = ONE(r, e, n, S, O)
        assert math.isfinite(s.tpot_s)
        assert float(v.tpot_s) == pytest.approx(s.tpot_s, rel=0.02)
        assert float(v.ttft_s) == pytest.approx(s.ttft_s, rel=0.02)   # queue in both


@pytest.mark.parametrize("engine", ["trtllm", "trtllm_pytorch", "trtllm_bench", "sglang"])
@pytest.mark.parametrize("dp", [1.0, 8.0])
def test_static_attention_dp_case_costs_the_same_cycle(engine, dp):
    """dse.infer.continuous.attn_dp_case: a cycle traced with dp known (a Python number,
    or the sweep's ``dp_many`` promise) takes only its branch and gives the numbers of the
    traced dp that computes every branch and selects per point -- for each branch of
    dse.infer.continuous.cycle: mixed passes, whole prompts, trtllm-bench's tuned token
    budget, prompts in passes of their own."""
    e = (dataclasses.replace(PROFILES["trtllm_pytorch"], bench_tuned_tokens=True)
         if engine == "trtllm_bench" else PROFILES[engine])
    model = get_model("qwen3-30b-a3b")
    b = np.asarray([1.0, 7.0, 64.0, 300.0], np.float32)

    def run(case):
        def one(bi, di):
            dpv = {"one": 1.0, "python": dp, "many": di, "mixed": di}[case]
            r = Replica(model, H200, 8.0 / dp, 1.0, 2, 1.0, ep=dp, dp=dpv, dp_many=case == "many")
            c = cycle(r, e, bi, 1536.0, bi / 1024.0, 1024.0, 1024.0)
            return c.mean_s, c.first_s
        # the vmapped jaxpr run on the host (dse.host_eval): the branches' numbers
        # compared, without an XLA compile of each of the 2-3 programs
        return host_call(jax.vmap(one), b, np.full(b.shape, dp, np.float32))

    mixed = run("mixed")
    for case in (("one",) if dp <= 1 else ("python", "many")):
        for g, m in zip(run(case), mixed):
            np.testing.assert_allclose(np.asarray(g), np.asarray(m), rtol=1e-6)
