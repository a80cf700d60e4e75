import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dse.cost.attention import flash_attention_time_s
from dse.cost.collectives import allreduce_s, group_collective_s, ring_allreduce_s, scatter_gather_s
from dse.cost.gemm import gemm_time_s
from tests.helpers import a100


def g(m, n, k, l2=40e6, sms=108.0, peak=312e12, bw=2e12, l2_bw=5e12):
    return float(gemm_time_s(m, n, k, peak, 1.0, bw, l2_bw, l2, sms, 128.0, 128.0, 2.0, 0.0))


def test_large_gemm_approaches_peak():
    m = n = k = 8192.0 * 2
    t = g(m, n, k)
    assert t == pytest.approx(2 * m * n * k / 312e12, rel=0.1)


def test_wave_quantization():
    # 108 SMs, 128x128 tiles here: 108 tiles take one wave, 109 tiles take two
    one = g(128 * 108, 128, 4096, bw=1e16, l2_bw=1e16)
    two = g(128 * 109, 128, 4096, bw=1e16, l2_bw=1e16)
    assert two == pytest.approx(2 * one, rel=1e-6)


def test_bigger_l2_helps_memory_bound_gemm():
    args = (16384.0, 16384.0, 16384.0)
    small = g(*args, l2=1e6, peak=1e18, l2_bw=1e18)
    big = g(*args, l2=100e6, peak=1e18, l2_bw=1e18)
    assert big < small


def test_low_precision_gemm_writes_its_output_in_bf16():
    """fp8 / FP4 inputs, bf16 output (dse.cost.gemm): a narrow-K GEMM's HBM bytes are
    ``M N 2 + (M K + K N) el_in``, so an fp4 GEMM there is slower than the
    inputs-only count would say, and never faster than the bf16-output bound."""
    from dse.cost.gemm import gemm_hbm_bytes, gemm_terms
    m, n, k = 16384.0, 1536.0, 768.0
    assert float(gemm_hbm_bytes(m, n, k, 1e9, 0.5, 1.0, 2.0)) == pytest.approx(
        m * n * 2.0 + (m * k + k * n) * 0.5)
    assert float(gemm_hbm_bytes(m, n, k, 1e9, 0.5)) == pytest.approx((m * n + m * k + k * n) * 0.5)
    args = (m, n, k, 1e18, 1.0, 1e12, 1e18, 1e9, 100.0, 128.0, 128.0, 0.5)
    t_in = float(gemm_terms(*args)[1])
    t_out = float(gemm_terms(*args, 1.0, 1.0, 2.0)[1])
    assert t_out > 2.5 * t_in
    assert t_out >= m * n * 2.0 / 1e12


@settings(max_examples=30, deadline=None)
@given(st.floats(1.0, 65536.0), st.floats(64.0, 32768.0), st.floats(64.0, 32768.0),
       st.sampled_from([0.5, 1.0, 2.0]))
def test_wider_output_is_never_faster(m, n, k, el):
    """A GEMM that writes 2-byte C is never faster than one that writes ``el``-byte C."""
    narrow = float(gemm_time_s(m, n, k, 1e15, 0.7, 3e12, 1e13, 50e6, 132.0, 128.0, 128.0,
                               el, 5e-6, 1.0, 1.0, el))
    wide = float(gemm_time_s(m, n, k, 1e15, 0.7, 3e12, 1e13, 50e6, 132.0, 128.0, 128.0,
                             el, 5e-6, 1.0, 1.0, 2.0))
    assert wide >= narrow * (1 - 1e-9)


def test_ring_allreduce_formula():
    t = float(ring_allreduce_s(1e9, 8.0, 100e9, 1e-6))
    assert t == pytest.approx(2 * 7 / 8 * 1e9 / 100e9 + 14e-6)
    assert float(scatter_gather_s(1e9, 8.0, 100e9, 0.0)) == pytest.approx(7 / 8 * 0.01)
    assert float(allreduce_s(1e9, 1.0, 100e9, 1e-6)) == 0.0


def test_hierarchical_slower_across_nodes():
    hw = a100()
    inside = float(group_collective_s("all_reduce", 1e9, 8.0, 1.0, hw))
    across = float(group_collective_s("all_reduce", 1e9, 16.0, 1.0, hw))
    spread = float(group_collective_s("all_reduce", 1e9, 8.0, 8.0, hw))   # one rank per node
    assert across > inside
    assert spread > across


@settings(max_examples=40, deadline=None)
@given(s=st.sampled_from([512.0, 2048.0, 8192.0]), bw=st.floats(0.5e12, 8e12))
def test_flash_attention_monotone_in_bandwidth(s, bw):
    f = lambda b: float(flash_attention_time_s(1.0, 64.0, 8.0, s, s, 128.0, 0.5, 312e12, 0.7, b, 5e12,
                                               40e6, 108.0, 164 * 1024.0, 2.0, 0.0))
    assert f(bw * 1.5) <= f(bw) + 1e-12


def test_flash_backward_costs_more():
    args = (1.0, 64.0, 8.0, 4096.0, 4096.0, 128.0, 0.5, 312e12, 0.7, 2e12, 5e12, 40e6, 108.0,
            164 * 1024.0, 2.0, 0.0)
    assert float(flash_attention_time_s(*args, backward=True)) > 2 * float(flash_attention_time_s(*args))


def test_nccl_protocol_model_matches_tuning_constants():
    """8 NVLink ranks, one node: the cheapest of NCCL's LL / LL128 / Simple ring (and
    tree) predictions, with NCCL's constants (src/graph/tuning.cc), by hand."""
    hw = a100()
    bw = float(hw.nvlink_bw_bytes_per_s * hw.eff_nvlink)
    a = float(hw.nvlink_latency_s)
    f = 2 * 7 / 8
    for size in (2.0**10, 2.0**21, 2.0**30):
        ring = [6.6e-6 + 14 * a + f * size / (bw * 0.37),
                14.0e-6 + 14 * a * 1.9 / 0.6 + f * size / (bw * 0.92),
                8.4e-6 + 14 * a * 3.4 / 0.6 + f * size / bw]
        tree = [6.8e-6 + 14 * a + 2 * size / (bw * 0.92 / 3.8),
                14.0e-6 + 14 * a * 1.25 / 0.6 + 2 * size / (bw * 0.92 * 7 / 9),
                8.4e-6 + 14 * a * 4.0 / 0.6 + 2 * size / (bw * 0.92)]
        got = float(group_collective_s("all_reduce", size, 8.0, 1.0, hw, protocols=True))
        assert got == pytest.approx(min(ring + tree), rel=1e-4)


def test_protocols_never_beat_ll_latency_at_simple_bandwidth():
    """Each protocol pays at least LL's latency and at most Simple's bandwidth, so the
    protocol model is never faster than that optimistic alpha-beta bound; small buffers
    are latency-bound (LL), large ones approach the Simple ring."""
    hw = a100()
    bw = float(hw.nvlink_bw_bytes_per_s * hw.eff_nvlink)
    a = float(hw.nvlink_latency_s)
    prev = 0.0
    for size in 2.0 ** np.arange(10, 32):
        t = float(group_collective_s("all_reduce", size, 8.0, 1.0, hw, protocols=True))
        assert t >= float(ring_allreduce_s(size, 8.0, bw, a)) - 1e-12
        assert t >= prev
        prev = t
    big = 2.0**32
    assert float(group_collective_s("all_reduce", big, 8.0, 1.0, hw, protocols=True)) == pytest.approx(
        float(ring_allreduce_s(big, 8.0, bw, 3.4 / 0.6 * a)) + 8.4e-6, rel=1e-3)
    small = float(group_collective_s("reduce_scatter", 1024.0, 8.0, 1.0, hw, protocols=True))
    assert small == pytest.approx(6.6e-6 + 7 * a + 7 / 8 * 1024 / (0.37 * bw), rel=1e-4)


def test_protocol_model_is_opt_in():
    """Every caller keeps the alpha-beta bound unless it asks for NCCL's protocols."""
    hw = a100()
    for kind in ("all_reduce", "reduce_scatter", "all_gather"):
        for n, stride in ((8.0, 1.0), (64.0, 8.0)):
            plain = float(group_collective_s(kind, 2.0**21, n, stride, hw))
            nccl = float(group_collective_s(kind, 2.0**21, n, stride, hw, protocols=True))
            assert nccl > plain


def test_fp4_linears_use_their_own_efficiency():
    """Serving's NVFP4 / MXFP4 linears run at the fp4 peak times ``eff_gemm_fp4``
    (dse.spec.efficiency ``gemm_fp4``: fp8's fraction x the microbenchmarks' fp4 / fp8
    ratio; on B200's SM its own fp8 fraction, ``b200_sm_gemm``), so on B200 a large fp4 GEMM
    is faster than fp8 but by less than the 2x peak."""
    from dse.cost.rates import rates
    from dse.graph.ops import Gemm, time_s
    from dse.spec.efficiency import FP4_OVER_FP8
    from dse.spec.hardware import get_hardware
    b200 = get_hardware("b200")
    assert b200.eff_gemm_fp4 == pytest.approx(b200.eff_gemm_fp8 * FP4_OVER_FP8, rel=1e-6)
    assert 0.6 < FP4_OVER_FP8 < 0.8
    t = {}
    for p in (2, 3, 4):
        r = rates(b200, p)
        assert float(r.eff_linear) == pytest.approx(b200.eff_gemm_fp4 if p > 2 else b200.eff_gemm_fp8)
        t[p] = float(time_s(Gemm(16384.0, 16384.0, 16384.0), b200, r))
    assert t[2] / 2.0 < t[3] < t[2]
    assert t[4] == pytest.approx(t[3], rel=1e-6)
