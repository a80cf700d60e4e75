"""Kernel-count physics of small models (issue 11): Megatron's fused-softmax availability
rule, per-tensor gradient accumulation launches, and NCCL's protocol latencies on the
training graph's collectives."""

import pytest

from dse.cost.attention import fused_softmax_available, unfused_attention_time_s
from dse.cost.collectives import group_collective_terms
from dse.graph.ops import Attention, Collective, host_kernels, time_s
from dse.graph.train import NCCL_PROTOCOLS, grad_accumulate_ops, layer_ops
from dse.cost.rates import rates
from dse.spec.layout import FRAMEWORK, Layout, Workload
from dse.spec.model import Model
from tests.helpers import a100, llama70b


def gpt_small():
    """One of vTrain's single-node shapes (h 1024, 16 heads, GPT-style: biases, dropout)."""
    return Model(num_layers=12, hidden_size=1024, ffn_hidden_size=4096, num_attention_heads=16,
                 num_kv_heads=16, vocab_size=50257, seq_length=1024, gated_mlp=0, dropout=1,
                 tied_embeddings=1)


@pytest.mark.parametrize("b, np_, sq, sk, ok", [
    (1, 2, 1024, 1024, 0.0),     # 16 heads on tp 8, micro-batch 1: b*np = 2
    (2, 2, 1024, 1024, 1.0),     # micro-batch 2: b*np = 4
    (1, 4, 1024, 1024, 1.0),
    (1, 6, 2048, 2048, 0.0),     # 6 is not a multiple of 4
    (1, 4, 128, 128, 0.0),       # sk <= 128: batch_per_block 8
    (2, 4, 128, 128, 1.0),
    (1, 4, 8192, 8192, 0.0),     # sk > 4096
    (1, 4, 16, 16, 0.0),         # sk must exceed 16
])
def test_fused_softmax_rule_of_megatron(b, np_, sq, sk, ok):
    assert float(fused_softmax_available(b * 1.0, np_ * 1.0, sq * 1.0, sk * 1.0)) == ok


def test_torch_softmax_fallback_costs_more_kernels_and_bytes():
    hw = a100()
    args = lambda backward, fused: unfused_attention_time_s(
        1.0, 2.0, 1024.0, 1024.0, 64.0, 1.0, 1.0, hw.peak_bf16_flops_per_s, hw.eff_gemm,
        hw.hbm_bw_bytes_per_s, 5e12, hw.l2_bytes, hw.num_sms, hw.tile_m, hw.tile_n, 2.0,
        hw.kernel_launch_s, backward=backward, softmax_fused=fused)
    for backward in (False, True):
        fused, fallback = float(args(backward, 1.0)), float(args(backward, 0.0))
        scores = 2.0 * 1024 * 1024 * 2.0
        extra = (16.0 if not backward else 17.0) * scores / hw.hbm_bw_bytes_per_s + 4 * hw.kernel_launch_s
        assert fallback - fused == pytest.approx(extra, rel=1e-4)
    core = dict(batch=1.0, heads=2.0, kv_heads=2.0, s_q=1024.0, s_kv=1024.0, d=64.0, d_fused=64.0,
                causal=1.0, dropout=1.0, fused=0.0)
    for backward in (False, True):
        a = Attention(**core, softmax_fused=1.0, backward=backward)
        assert float(host_kernels(a.replace(softmax_fused=0.0))) == float(host_kernels(a)) + 4.0


def test_layer_graph_uses_the_fallback_only_where_megatron_does():
    wl = Workload(global_batch=8, seq_len=1024, attention=0, framework=FRAMEWORK["deepspeed"])
    att = lambda lay: [op for op in layer_ops(gpt_small(), wl, lay, 2.0)
                       if isinstance(op, Attention) and op.phase == "fwd"][0]
    assert float(att(Layout(tp=8, mbs=1)).softmax_fused) == 0.0
    assert float(att(Layout(tp=8, mbs=2)).softmax_fused) == 1.0
    assert float(att(Layout(tp=4, mbs=1)).softmax_fused) == 1.0


@pytest.mark.parametrize("fw, model, tensors", [
    ("deepspeed", gpt_small(), 12.0),   # 4 weights + 2 norms + 6 biases, all via AccumulateGrad
    ("megatron", gpt_small(), 8.0),     # wgrad GEMMs accumulate into main_grad: norms + biases
    ("megatron", llama70b(), 2.0),      # no biases: the two RMSNorm weights
    ("fsdp", gpt_small(), 0.0),
])
def test_grad_accumulation_kernels_per_tensor(fw, model, tensors):
    wl = Workload(global_batch=64, seq_len=1024, framework=FRAMEWORK[fw])
    lay = Layout(tp=1, dp=8, mbs=2)                   # m = 4 micro-batches
    ops = grad_accumulate_ops(model, wl, lay)
    if tensors == 0.0:
        assert ops == []
        return
    (op,) = ops
    assert float(op.kernels) == tensors and float(op.bytes_moved) == 0.0 and op.phase == "bwd"
    # DeepSpeed: the first micro-batch after zero_grad(set_to_none) stores, (m-1)/m add
    assert float(op.calls) == pytest.approx(0.75 if fw == "deepspeed" else 1.0)
    assert op in layer_ops(model, wl, lay, 2.0)


def test_collective_record_carries_the_protocol_switch():
    """The TP collectives of the training graph follow ``NCCL_PROTOCOLS`` (off: decision
    in docs/accuracy.md); a record with ``protocols`` set is costed by NCCL's model."""
    hw = a100()
    wl = Workload(global_batch=8, seq_len=1024)
    tp = [op for op in layer_ops(gpt_small(), wl, Layout(tp=8), 2.0)
          if isinstance(op, Collective) and op.group == "tp"]
    assert tp and all(op.protocols == NCCL_PROTOCOLS for op in tp)
    r = rates(hw, wl.precision)
    ar = [op for op in tp if op.kind == "all_reduce"][0].replace(protocols=True)
    t_nv, t_nic = group_collective_terms("all_reduce", ar.size_bytes, ar.n, ar.stride, hw, protocols=True)
    assert float(time_s(ar, hw, r)) == pytest.approx(float(ar.calls * (t_nv + t_nic)), rel=1e-6)
    assert float(time_s(ar, hw, r)) > float(time_s(ar.replace(protocols=False), hw, r))
