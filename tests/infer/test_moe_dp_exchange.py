"""Attention-DP token exchange of a serving MoE layer (dse.infer.moe_serving.dp_gather_bytes,
dse.infer.forward.forward_ops) and the laws the grouped expert GEMMs keep."""

from hypothesis import given, settings
from hypothesis import strategies as st

from dse.cost.gemm import gemm_time_s
from dse.cost.rates import rates
from dse.graph.ops import KVRead, time_s
from dse.infer.forward import forward_ops, stage_time
from dse.infer.moe_serving import MXFP8_BYTES, ROUTE_META_BYTES, dp_gather_bytes, routing_bytes
from dse.spec.hardware import get_hardware
from dse.spec.layout import SERVING_PRECISION
from dse.spec.model import get_model

B200 = get_hardware("b200")
H200 = get_hardware("h200-sxm-141gb")
QWEN = get_model("Qwen/Qwen3-235B-A22B")
FP4 = SERVING_PRECISION["nvfp4"]
FP8 = SERVING_PRECISION["fp8"]


def _layer(model, tokens, dp, precision=FP8, moe_tokens=None, q_el=2.0):
    att = KVRead(tokens, model.num_attention_heads / 1.0, 4.0, 1000.0, 128.0)
    g = forward_ops(model, tokens, tokens, att, 1.0, 1.0, precision, q_el, float(dp), float(dp),
                    moe_tokens)
    return {op.name: op for op in g.layer}


def test_gather_carries_quantized_rows_and_routing():
    """fp4 rows (0.5 + block scales), fp8 rows (1), and an MXFP4-expert checkpoint's mxfp8
    rows, each with an int32 id and an fp32 weight per selected expert."""
    T_g, h, k = 1024.0, 4096.0, 8.0
    assert float(dp_gather_bytes(T_g, h, k, 1.0, FP8)) == T_g * (h + ROUTE_META_BYTES * k)
    assert float(dp_gather_bytes(T_g, h, k, 0.5625, FP4)) == T_g * (h * 0.5625 + 8.0 * k)
    assert float(dp_gather_bytes(T_g, h, k, 0.5625, FP4, 1.0)) == T_g * (h * MXFP8_BYTES + 8.0 * k)
    # a 16-bit row: the MXFP4-expert flag only applies to quantized serving
    assert float(dp_gather_bytes(T_g, h, k, 2.0, 1, 1.0)) == T_g * (h * 2.0 + 8.0 * k)


def test_dp_exchange_smaller_than_deepep_all_to_all_for_top8():
    """For top-8 routing the gathered fp8 rows plus 16-bit sums are fewer bytes per GPU
    than two DeepEP-style all-to-alls of T k h el (dse.infer.expert_parallel)."""
    from dse.infer.expert_parallel import a2a_bytes_per_gpu
    T, dp = 256.0, 4
    ops = _layer(QWEN, T, dp)
    ag = float(ops["moe all-gather (attention DP)"].size_bytes)
    rs = float(ops["moe reduce-scatter (attention DP)"].size_bytes)
    per_gpu = (dp - 1) / dp * (ag + rs)
    assert per_gpu < 2 * (dp - 1) / dp * float(a2a_bytes_per_gpu(QWEN, T, 2.0))


def test_routing_bytes_rows_default_is_the_rank():
    """``rows`` None is the rank's own tokens; the gathered form with R = T and P >= T
    reduces to the same bytes."""
    for T, P in ((64.0, 512.0), (1000.0, 8000.0)):
        a = float(routing_bytes(T, P, 4096.0, 128.0, 2.0, 1.0))
        b = float(routing_bytes(T, P, 4096.0, 128.0, 2.0, 1.0, T))
        assert abs(a - b) <= 1e-6 * a


@settings(max_examples=30, deadline=None)
@given(st.floats(1.0, 4096.0), st.sampled_from([2, 4, 8]))
def test_moe_tokens_default_is_every_rank_alike(tokens, dp):
    """``moe_tokens`` None = ``tokens dp``; and more group tokens never make the layer
    faster (unequal ranks: the MoE holds more rows)."""
    r = rates(B200, FP4)
    att = KVRead(tokens, QWEN.num_attention_heads / 1.0, 4.0, 1000.0, 128.0)
    t0 = stage_time(QWEN, tokens, tokens, att, 1.0, 1.0, FP4, B200, r, float(dp), float(dp)).total_s
    t1 = stage_time(QWEN, tokens, tokens, att, 1.0, 1.0, FP4, B200, r, float(dp), float(dp),
                    moe_tokens=tokens * dp).total_s
    t2 = stage_time(QWEN, tokens, tokens, att, 1.0, 1.0, FP4, B200, r, float(dp), float(dp),
                    moe_tokens=tokens * dp + 2048.0).total_s
    assert abs(float(t0) - float(t1)) <= 1e-6 * float(t0)
    assert float(t2) >= float(t1) * (1 - 1e-6)


@settings(max_examples=40, deadline=None)
@given(st.floats(1.0, 4096.0), st.floats(1.0, 4096.0))
def test_grouped_gemm_more_tokens_never_faster(m_a, m_b):
    """Tile / wave quantization makes a grouped expert GEMM a step function of its
    per-expert tokens, never a decreasing one: padding a problem to the tile can make
    extra tokens free, never negative."""
    lo, hi = sorted((m_a, m_b))
    r = rates(B200, FP4)
    t = lambda m: float(gemm_time_s(m, 1536.0, 2048.0, r.peak_linear_flops_per_s, r.eff_linear,
                                    r.hbm_bw_bytes_per_s, r.l2_bw_bytes_per_s, B200.l2_bytes,
                                    B200.num_sms, B200.tile_m, B200.tile_n, r.linear_bytes,
                                    B200.kernel_launch_s, 128.0, B200.gemm_cluster))
    assert t(hi) >= t(lo) * (1 - 1e-6)


def test_exchange_time_grows_with_the_group():
    """The NCCL all-gather of a larger DP group moves more bytes per GPU: never faster."""
    r = rates(H200, FP8)
    t = [float(time_s(_layer(QWEN, 128.0, dp)["moe all-gather (attention DP)"], H200, r))
         for dp in (2, 4, 8)]
    assert t[0] <= t[1] <= t[2]
