"""MoE expert parallelism and attention data parallelism in the serving pass
(dse.infer.forward MoE section, dse.infer.serving)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.infer.engines import PROFILES
from dse.infer.forward import forward_ops
from dse.graph.ops import KVRead
from dse.infer.memory import weight_params_per_gpu
from dse.cost.load_balance import ep_load_factor
from dse.infer.predict_rows import predict_inference_row
from dse.infer.serving import Deployment, iteration_s, kv_slots, offline, weights_bytes
from dse.spec.hardware import get_hardware
from dse.spec.model import get_model

H100 = get_hardware("h100-sxm-80gb")
MIX = get_model("mistralai/Mixtral-8x7B-v0.1")
L8 = get_model("meta-llama/Llama-3.1-8B")


def _dep(tp, ep, dp, model=MIX):
    return Deployment(model, H100, PROFILES["sglang"], tp, 1, 2, 2.0, ep, dp)


def _ops(tokens, tp, ep, dp):
    att = KVRead(tokens, MIX.num_attention_heads / tp, 1.0, 1000.0, 128.0)
    g = forward_ops(MIX, tokens, tokens, att, tp, 1, 2, 2.0, ep, dp)
    return {op.name: op for op in g.layer}


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8]))
def test_more_ep_never_increases_expert_weights_per_gpu(ep_a, ep_b):
    lo, hi = sorted((ep_a, ep_b))
    # EP inside a tp = 8 group (moe_tp = 8 / ep), and EP over attention-DP ranks
    assert float(weight_params_per_gpu(MIX, 8, 1, hi, 1)[0]) <= float(weight_params_per_gpu(MIX, 8, 1, lo, 1)[0]) + 1.0
    a = weight_params_per_gpu(MIX, 1, 1, lo, lo)[0]
    b = weight_params_per_gpu(MIX, 1, 1, hi, hi)[0]
    attn = 2.0 * 4096 * 4096 + 2.0 * 4096 * 8 * 128
    assert float(b) - 32 * attn <= float(a) - 32 * attn + 1.0


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4096), st.sampled_from([(8, 1, 1), (8, 2, 1), (8, 8, 1), (1, 8, 8), (2, 8, 4)]))
def test_expert_flops_conserved(tokens, layout):
    """Every token-expert pair is computed once in the group: local experts hit x tokens
    per expert x ep x moe_tp-split N sums to the tp = 1 / ep = 1 FLOPs of T dp tokens,
    once the most loaded EP rank's excess (dse.infer.moe_serving.ep_load_factor, which
    the costed rank carries) is divided out."""
    tp, ep, dp = layout
    ops = _ops(float(tokens), tp, ep, dp)
    fc1 = ops["fc1"]
    imb = float(ep_load_factor(tokens * dp * MIX.top_k, ep))
    group_flops = float(fc1.m * fc1.n * fc1.count) * tp * dp / imb
    ref = _ops(float(tokens * dp), 1, 1, 1)["fc1"]
    assert abs(group_flops / float(ref.m * ref.n * ref.count) - 1.0) < 1e-4


def test_gather_scatter_only_with_attention_dp():
    """Attention DP exchanges the group's tokens by an all-gather and a reduce-scatter
    (TensorRT-LLM CutlassFusedMoE, dse.infer.moe_serving); attention TP combines the EP
    partials in its all-reduce."""
    tp_ep = _ops(64.0, 8, 8, 1)
    dp_ep = _ops(64.0, 1, 8, 8)
    for name in ("moe all-gather (attention DP)", "moe reduce-scatter (attention DP)"):
        assert float(tp_ep[name].calls) == 0.0
        assert float(dp_ep[name].calls) == 1.0 and float(dp_ep[name].n) == 8.0
        assert dp_ep[name].protocols          # NCCL calls: the protocol model
    assert float(tp_ep["tp all-reduce"].calls) == 2.0
    ag = dp_ep["moe all-gather (attention DP)"]
    rs = dp_ep["moe reduce-scatter (attention DP)"]
    assert ag.kind == "all_gather" and rs.kind == "reduce_scatter"
    T_g = 64.0 * 8
    # fp8 rows (1 byte) + int32 id and fp32 weight per selected expert; 16-bit outputs back
    assert float(ag.size_bytes) == T_g * (4096 * 1.0 + 8.0 * 2)
    assert float(rs.size_bytes) == T_g * 4096 * 2.0
    assert float(dp_ep["tp all-reduce"].calls) == 1.0


def test_dense_model_ignores_ep():
    a = iteration_s(_dep(8, 1, 1, L8), 64, 1000)
    b = iteration_s(_dep(8, 8, 1, L8), 64, 1000)
    assert abs(a - b) <= 1e-9 * a


def test_attention_dp_kv_capacity_per_gpu():
    """Attention DP on tp = 1 ranks holds every KV head on every GPU: fewer sequences per
    GPU than tp = 8 (one KV head each), and the system's streams hold them."""
    tp8 = _dep(8, 8, 1)
    dp8 = _dep(1, 8, 8)
    assert kv_slots(dp8, 1000, 500) < kv_slots(tp8, 1000, 500)
    assert weights_bytes(dp8) > weights_bytes(tp8)         # attention replicated per rank
    r = offline(dp8, 1000, 500, 1)
    assert r.tokens_per_s > 0 and r.tokens_per_s_per_gpu * 8 == r.tokens_per_s


def _row(**kw):
    base = dict(id="x", model="mistralai/Mixtral-8x7B-v0.1", hardware="h100-sxm-80gb", gpus=8,
                tp=8, pp=1, precision="fp8", engine="sglang", scenario="offline_throughput",
                input_len=1000, output_len=500)
    return {**base, **kw}


def test_rows_with_ep():
    assert predict_inference_row(_row(ep=8))["status"] == "ok"
    r = predict_inference_row(_row(tp=1, ep=8, attn_dp=8))
    assert r["status"] == "ok" and r["predicted_output_tok_s"] > 0
    assert predict_inference_row(_row(tp=1, pp=2, ep=8, attn_dp=4))["status"].startswith(
        "infeasible: with attention DP `(tp*attn_dp) % ep == 0` must hold")
    assert predict_inference_row(_row(ep=3))["status"].startswith("infeasible")
    assert "dense" in predict_inference_row(_row(model="meta-llama/Llama-3.1-8B", ep=2))["status"]


def test_gather_crosses_the_nic_beyond_one_domain():
    """EP 16 over two 8-GPU NVLink domains: the all-gather of the group's tokens pays the NIC."""
    from dse.graph.ops import time_s
    from dse.cost.rates import rates
    r = rates(H100, 2)
    a8 = _ops(256.0, 1, 8, 8)["moe all-gather (attention DP)"]
    a16 = _ops(256.0, 1, 16, 16)["moe all-gather (attention DP)"]
    t8, t16 = float(time_s(a8, H100, r)), float(time_s(a16, H100, r))
    # the NIC carries (inter - 1)/inter of each domain's S/local share (hierarchical AG)
    nic = float(a16.size_bytes) / 8.0 * 0.5 / float(H100.nic_bw_bytes_per_s)
    assert t16 >= nic * (1 - 1e-6)
    assert t16 > 2.0 * t8              # twice the buffer, and over the slower link


def test_attention_dp_with_tp_split_experts():
    """Attention DP without full EP (vLLM's and SGLang's default: the experts TP-split over
    the DP x TP group): the same expert bytes per GPU as full EP, every expert touched on
    every GPU, and the same token exchange over the whole group."""
    full, split = predict_inference_row(_row(tp=1, ep=8, attn_dp=8)), predict_inference_row(_row(tp=1, ep=1, attn_dp=8))
    assert full["status"] == "ok" and split["status"] == "ok", (full["status"], split["status"])
    assert split["predicted_output_tok_s"] > 0
    assert float(weight_params_per_gpu(MIX, 1, 1, 1, 8)[0]) == pytest.approx(
        float(weight_params_per_gpu(MIX, 1, 1, 8, 8)[0]))
    o_full, o_split = _ops(256.0, 1, 8, 8), _ops(256.0, 1, 1, 8)
    name = "moe all-gather (attention DP)"
    assert float(o_split[name].n) == float(o_full[name].n) == 8.0
