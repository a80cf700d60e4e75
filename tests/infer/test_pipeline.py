"""Pipeline-parallel iterations of TensorRT-LLM's PyTorch executor (dse/infer/pipeline.py):
host work per micro-batch pass serial with the stage's GPU pass when pp > 1; pp = 1 and
the C++ executor profiles unchanged; laws of splitting a fixed batch over more stages."""

import dataclasses

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings, strategies as st

from dse.infer import serving as SV
from dse.infer.continuous import Replica, iteration_s as vec_iteration_s
from dse.infer.engines import PROFILES
from dse.infer.pipeline import host_serial_with_pp, pipelined_iteration_s
from dse.spec.hardware import get_hardware
from dse.spec.layout import SERVING_PRECISION
from dse.spec.model import get_model

M70 = get_model("meta-llama/Llama-3.3-70B-Instruct")
RTX = get_hardware("rtx-pro-6000")
PT = PROFILES["trtllm_pytorch"]
FP4 = SERVING_PRECISION["nvfp4"]


def dep(pp, engine=PT, hw=RTX):
    return SV.Deployment(M70, hw, engine, 1, pp, FP4, 1.0)


def test_only_the_pytorch_executor_loses_its_overlap():
    assert host_serial_with_pp(PT)
    for name in ("trtllm", "trtllm_static", "vllm", "sglang"):
        assert not host_serial_with_pp(PROFILES[name])


def test_formula_by_hand():
    """pp (t_stage + c_pass + c_seq b / m), against a hand computation."""
    t, pp, b = 0.012, 8, 2048.0
    want = pp * (t + PT.overhead_per_iter_s + PT.seq_overhead_s * b / pp)
    assert pipelined_iteration_s(PT, t, pp, b, float(pp)) == pytest.approx(want, rel=1e-12)
    # pp = 1: the overlap scheduler's max(GPU, host), as before
    assert pipelined_iteration_s(PT, t, 1, b, 1.0) == pytest.approx(
        max(t, PT.overhead_per_iter_s + PT.seq_overhead_s * b), rel=1e-12)
    # a serial C++ profile: unchanged gpu + host of the whole batch
    cpp = PROFILES["trtllm"]
    assert pipelined_iteration_s(cpp, t, pp, b, float(pp)) == pytest.approx(
        cpp.with_host_s(t * pp, b), rel=1e-12)


def test_traced_path_matches_scalar_path():
    f = jax.jit(lambda t, pp, b, m: pipelined_iteration_s(PT, t, pp, b, m, 1.5))
    for t, pp, b in ((0.012, 8.0, 2048.0), (0.03, 4.0, 3.0), (0.05, 1.0, 128.0)):
        m = min(max(b, 1.0), pp)
        assert float(f(jnp.float32(t), jnp.float32(pp), jnp.float32(b), jnp.float32(m))) == \
            pytest.approx(pipelined_iteration_s(PT, t, pp, b, m, 1.5), rel=1e-6)


@settings(max_examples=40, deadline=None)
@given(t=st.floats(1e-4, 0.2), pp=st.integers(2, 16), b=st.floats(1.0, 4096.0),
       scale=st.floats(1.0, 3.0))
def test_serial_bounds(t, pp, b, scale):
    """The serial pipeline iteration is never below the overlapped one, nor below pp GPU
    passes, nor below pp host passes; it is exactly their sum per pass."""
    m = min(b, float(pp))
    ser = pipelined_iteration_s(PT, t, pp, b, m, scale)
    ovl = PT.with_host_s(t * pp, b, scale)
    h = PT.host_s(b / m, scale)
    assert ser >= ovl * (1 - 1e-12)
    assert ser >= pp * t and ser >= pp * h
    assert ser == pytest.approx(pp * t + pp * h, rel=1e-12)


def test_pp1_iteration_unchanged():
    """pp = 1 goes through the overlap scheduler exactly as EngineProfile.with_host_s."""
    d = dep(1)
    for b, ctx in ((1.0, 1500.0), (128.0, 1500.0), (512.0, 200.0)):
        raw = SV.iteration_s(d, b, ctx, overhead=False)
        assert SV.iteration_s(d, b, ctx) == pytest.approx(
            PT.with_host_s(raw, b, PT.host_scale(RTX)), rel=1e-12)


@pytest.mark.parametrize("ctx", [200.0, 1500.0, 8000.0])
def test_fixed_batch_per_gpu_throughput_falls_with_more_stages(ctx):
    """The same running batch split over more PCIe stages: each GPU re-reads its weights
    once per micro-batch pass (pp passes per iteration) and adds pp host passes, so
    tokens/s per GPU, B / (pp t_iter), never rises with pp (KV per GPU shrinks as 1/pp,
    weights per iteration per GPU stay W)."""
    B = 256.0
    per_gpu = [B / (pp * SV.iteration_s(dep(pp), B, ctx)) for pp in (1, 2, 4, 8)]
    assert all(a >= b * (1 - 1e-9) for a, b in zip(per_gpu, per_gpu[1:])), per_gpu


def test_serial_host_share_shrinks_with_stage_work():
    """The host's share of the pipeline iteration falls as the stage's GPU pass grows
    (longer contexts read more KV per pass); it is what long-prompt rows barely feel."""
    d = dep(8)
    share = []
    for ctx in (500.0, 4000.0, 20000.0):
        t = SV.iteration_s(d, 512.0, ctx)
        share.append(1.0 - SV.iteration_s(d, 512.0, ctx, overhead=False) / t)
    assert share[0] > share[1] > share[2] > 0.0


def test_host_serial_costs_at_most_pp_host_passes():
    """Against the overlapped model the serial pipeline adds at most the host time of
    its pp passes, pp c_pass + c_seq B, and exactly that when the GPU pass dominates."""
    d = dep(4)
    ovl = dataclasses.replace(PT, host_overlap=False)     # serial sum of the whole batch
    B, ctx = 970.0, 1500.0
    t_ser = SV.iteration_s(d, B, ctx)
    t_gpu = SV.iteration_s(d, B, ctx, overhead=False)
    assert t_ser == pytest.approx(t_gpu + 4 * PT.overhead_per_iter_s + PT.seq_overhead_s * B,
                                  rel=1e-9)
    # same as a non-overlapping engine whose per-pass constant is charged on every stage pass
    d_cpp = SV.Deployment(M70, RTX, ovl, 1, 4, FP4, 1.0)
    assert t_ser >= SV.iteration_s(d_cpp, B, ctx)


def test_vectorized_path_agrees_pp8():
    """dse/infer/continuous.py (the search) and dse/infer/serving.py (the predictor) give
    the same pp = 8 iteration, decode-only and mixed."""
    r = Replica(M70, RTX, 1.0, 8.0, FP4, 1.0)
    d = dep(8)
    for b, ctx, p in ((2048.0, 1500.0, None), (2048.0, 1500.0, 2048.0), (64.0, 300.0, None)):
        v = float(vec_iteration_s(r, PT, b, ctx, p, 1000.0))
        s = SV.iteration_s(d, b, ctx, 0.0 if p is None else p, 1000.0)
        assert v == pytest.approx(s, rel=2e-5)
