"""The MoE block of the training graph (dse.graph.moe): host launches of the grouped
expert GEMMs scale with the local experts, token permutation moves the bytes the
Megatron-Core alltoall dispatcher moves, and a dense model's graph is unchanged."""

import pytest

from dse.graph.moe import MOE_BWD_KERNELS, MOE_FWD_KERNELS, PERMUTE_PASSES, ep_busiest_factor
from dse.graph.ops import host_kernels
from dse.graph.train import layer_ops
from dse.spec.layout import PRECISION_16, PRECISION_FP8, Layout, Workload
from dse.spec.model import get_model
from dse.spec.numerics import as_float
from dse.train.layer import layer_cost
from dse.cost.rates import rates
from tests.helpers import h100


def _ops(name, ep, precision=PRECISION_16, mbs=1):
    m, wl, lay = as_float(get_model(name), Workload(global_batch=64, seq_len=4096, precision=precision),
                          Layout(tp=1, pp=1, dp=8, ep=ep, mbs=mbs, zero=1, sp=0))
    return {(op.name, op.phase): op for op in layer_ops(m, wl, lay, 2.0)}


def _host(ops, phase):
    return sum(float(op.calls * host_kernels(op)) for (n, p), op in ops.items() if p == phase)


@pytest.mark.parametrize("ep", [2, 8])
def test_grouped_gemm_launches_one_gemm_per_local_expert(ep):
    """Qwen3-30B-A3B, 128 experts: fc1 forward issues 128/ep host GEMM launches."""
    ops = _ops("qwen3-30b-a3b", ep)
    assert float(host_kernels(ops[("fc1", "fwd")])) == 128 / ep
    assert float(host_kernels(ops[("fc2 wgrad", "bwd")])) == 128 / ep


def test_host_work_grows_with_local_experts_and_fp8():
    """Fewer experts per GPU (more EP) means fewer host launches; fp8 adds one quantize
    kernel per expert input."""
    e2, e8 = _ops("qwen3-30b-a3b", 2), _ops("qwen3-30b-a3b", 8)
    assert _host(e2, "fwd") - _host(e8, "fwd") == pytest.approx(2 * (64 - 16), rel=1e-6)
    f8 = _ops("qwen3-30b-a3b", 8, PRECISION_FP8)
    assert _host(f8, "fwd") - _host(e8, "fwd") == pytest.approx(2 * 16, rel=1e-6)
    assert float(f8[("moe permute/route", "bwd")].kernels) == MOE_BWD_KERNELS + 2 * 16
    assert float(e8[("moe permute/route", "fwd")].kernels) == MOE_FWD_KERNELS


def test_permutation_bytes():
    """Forward token bytes 2 (T h + T k h + 2 f T k h) with several local experts
    (permute and unpermute of the sent tokens, regroup and regroup back of the received
    ones, f the busiest rank's load factor), 2 (T h + T k h) with one."""
    T, h = 4096.0, 2048.0
    m, lay = as_float(get_model("qwen3-30b-a3b"), Layout(tp=1, pp=1, dp=8, ep=8, mbs=1, zero=1, sp=0))
    f = float(ep_busiest_factor(m, lay, T))
    assert f > 1.0
    q = _ops("qwen3-30b-a3b", 8)[("moe permute/route", "fwd")]
    assert float(q.bytes_moved) == pytest.approx(
        2 * h * (2 * T + 2 * T * 8 + (PERMUTE_PASSES - 2) * f * T * 8), rel=1e-6)
    mx = _ops("mixtral-8x7b", 8)[("moe permute/route", "fwd")]
    assert float(mx.bytes_moved) == pytest.approx(2 * 4096.0 * (2 * T + 2 * T * 2), rel=1e-6)


def test_dense_model_graph_has_no_moe_work():
    """Llama 3 8B: every MoE-only operator has calls 0 and its layer cost is what the
    dense operators alone give."""
    ops = _ops("llama3-8b", 1)
    for key in (("router", "fwd"), ("moe permute/route", "fwd"), ("ep all-to-all", "bwd"),
                ("ep probs all-to-all", "fwd"), ("ep token-count all-gather", "fwd")):
        assert float(ops[key].calls) == 0.0
    assert float(host_kernels(ops[("fc1", "fwd")])) == 1.0


def test_moe_layer_costs_more_host_time_than_its_gpu_time_at_one_micro_batch():
    """Qwen3-30B-A3B, EP 8, one 4096-token micro-batch on H100: the eager layer is
    host-bound (the case the Megatron-Bridge recipes cover with CUDA graphs)."""
    m, wl, lay = as_float(get_model("qwen3-30b-a3b"), Workload(global_batch=64, seq_len=4096),
                          Layout(tp=1, pp=1, dp=8, ep=8, mbs=1, zero=1, sp=0))
    hw = h100()
    lc = layer_cost(m, wl, lay, hw, rates(hw, wl.precision))
    assert float(lc.host_stall_fwd_s) > 0 and float(lc.host_stall_bwd_s) > 0


# --- MoE parallel folding (expert TP, EP over TP ranks) -----------------------------

from dse.graph.moe import expert_tp                      # noqa: E402
from dse.train.memory import params_per_gpu              # noqa: E402


def _lay(tp, dp, ep, sp=1, cp=1):
    return Layout(tp=tp, pp=1, dp=dp, cp=cp, ep=ep, mbs=1, zero=1, sp=sp)


def _ops_lay(name, lay, precision=PRECISION_16):
    m, wl, lay = as_float(get_model(name), Workload(global_batch=64, seq_len=4096, precision=precision), lay)
    return {(op.name, op.phase): op for op in layer_ops(m, wl, lay, 2.0)}, m, lay


def test_expert_tp_is_tp_unless_ep_spans_tp_ranks():
    """Megatron-Core's default expert TP is the TP size; an EP that does not divide
    dp*cp can only tile the grid with expert TP 1."""
    assert float(expert_tp(_lay(2, 16, 8))) == 2.0
    assert float(expert_tp(_lay(2, 16, 32))) == 1.0
    assert float(expert_tp(_lay(1, 8, 8))) == 1.0


def test_folded_ep_keeps_expert_flops_and_splits_tokens_not_weights():
    """Qwen3-235B, TP 2 x DP 16: EP 32 (folded, expert TP 1) and EP 16 (expert TP 2) do the
    same expert FLOPs per GPU; the folded GEMMs see half the tokens at twice the width,
    and the all-to-all carries the sequence-parallel T/tp tokens, each k times."""
    from dse.graph.ops import flops
    folded, m, lay = _ops_lay("qwen3-235b-a22b", _lay(2, 16, 32))
    split, _, _ = _ops_lay("qwen3-235b-a22b", _lay(2, 16, 16))
    for name in ("fc1", "fc2"):
        f_fold = float(flops(folded[(name, "fwd")]) * folded[(name, "fwd")].calls)
        f_split = float(flops(split[(name, "fwd")]) * split[(name, "fwd")].calls)
        # EP 32 holds half the experts of EP 16 at full width: same FLOPs per GPU
        assert f_fold == pytest.approx(f_split, rel=1e-6)
    T, h, k = 4096.0, 4096.0, 8.0
    a2a = folded[("ep all-to-all", "fwd")]
    f = float(ep_busiest_factor(m, lay, T))     # the busiest rank's received share
    assert float(a2a.size_bytes) == pytest.approx(T / 2 * k * h * 2.0 * f, rel=1e-6)
    assert float(folded[("etp all-gather", "fwd")].calls) == 0.0      # expert TP 1
    assert float(split[("etp all-gather", "fwd")].calls) == 1.0       # expert TP 2 gathers
    # routed experts take the SP input as it is: one SP all-gather per pass (attention's)
    assert float(folded[("sp all-gather", "fwd")].calls) == pytest.approx(1.0)


def test_expert_weights_per_gpu_follow_the_expert_grid():
    """Expert weights are split over ep x expert TP: folding EP 32 over TP 2 x DP 16 holds
    as many expert weights per GPU as EP 16 with expert TP 2."""
    m = as_float(get_model("qwen3-235b-a22b"))
    a = float(params_per_gpu(m, as_float(_lay(2, 16, 32))))
    b = float(params_per_gpu(m, as_float(_lay(2, 16, 16))))
    assert a == pytest.approx(b, rel=1e-6)


def test_folded_layout_passes_the_layout_rules():
    """(tp*dp*cp) % ep == 0 is the rule; ep must still divide the experts."""
    import numpy as np
    from dse.spec.layout_rules import layout_violations
    m = get_model("qwen3-235b-a22b")
    cols = {f: np.array([v]) for f, v in dict(tp=2, pp=8, dp=16, cp=1, ep=32, mbs=1, vpp=1,
                                               recompute=0, zero=1, sp=1).items()}
    ok, why = layout_violations(m, 256, 8192, 4096, cols)
    assert ok[0], why[0]
    cols["ep"] = np.array([64])
    ok, why = layout_violations(m, 256, 8192, 4096, cols)
    assert not ok[0] and "tp*dp*cp" in why[0]


@pytest.mark.parametrize("scale", [2.0, 4.0])
def test_more_ep_bandwidth_is_never_slower(scale):
    """Property: raising every link bandwidth never makes an EP-heavy MoE layer slower."""
    import dataclasses
    m, wl, lay = as_float(get_model("qwen3-235b-a22b"), Workload(global_batch=64, seq_len=4096),
                          _lay(2, 16, 32))
    hw = h100()
    fields = {f.name: getattr(hw, f.name) * scale for f in dataclasses.fields(hw)
              if f.name in ("nvlink_bw_bytes_per_s", "nic_bw_bytes_per_s")}
    fast = hw.replace(**fields) if hasattr(hw, "replace") else dataclasses.replace(hw, **fields)
    base = layer_cost(m, wl, lay, hw, rates(hw, wl.precision))
    quick = layer_cost(m, wl, lay, fast, rates(fast, wl.precision))
    assert float(quick.ep_comm_s) <= float(base.ep_comm_s)
    assert float(quick.fwd_compute_s + quick.bwd_compute_s + quick.ep_comm_s) <= \
        float(base.fwd_compute_s + base.bwd_compute_s + base.ep_comm_s) * (1 + 1e-6)


# --- expert data parallelism (gradients and optimizer shards over edp) -----------------

from dse.graph.moe import expert_dp_ops, expert_dp_size          # noqa: E402
from dse.train.memory import expert_params_per_gpu, memory_per_gpu  # noqa: E402


def test_expert_dp_group_is_what_the_expert_grid_leaves():
    """edp = tp cp dp / (etp ep): Mixtral TP 1 x DP 64, EP 8 -> 8; Qwen3-235B folded
    EP 32 over TP 2 x DP 16 -> 1 (expert gradients are not reduced at all), EP 16 with
    expert TP 2 -> 1 too; EP 8 with expert TP 2 -> 2."""
    assert float(expert_dp_size(_lay(1, 64, 8))) == 8.0
    assert float(expert_dp_size(_lay(2, 16, 32))) == 1.0
    assert float(expert_dp_size(_lay(2, 16, 16))) == 1.0
    assert float(expert_dp_size(_lay(2, 16, 8))) == 2.0
    assert float(expert_dp_size(_lay(1, 8, 1))) == 8.0       # dense: dp*cp


def test_expert_optimizer_states_shard_over_edp_not_dp():
    """Mixtral 8x7B, DP 64, EP 8, distributed optimizer: the expert parameters' 12 B of
    optimizer state are split 8 ways, the rest 64 ways; a dense model is unchanged."""
    m, wl, lay = as_float(get_model("mixtral-8x7b"), Workload(global_batch=256, seq_len=4096), _lay(1, 64, 8))
    mem = memory_per_gpu(m, wl, lay, 2.0)
    P, Pe = float(mem.params_per_gpu), float(expert_params_per_gpu(m, lay))
    assert 0.7 * P < Pe < P
    assert float(mem.optimizer_bytes) == pytest.approx(12.0 * ((P - Pe) / 64 + Pe / 8), rel=1e-6)
    d, wl_d, lay_d = as_float(get_model("llama3-8b"), Workload(global_batch=256, seq_len=4096), _lay(1, 64, 1))
    dm = memory_per_gpu(d, wl_d, lay_d, 2.0)
    assert float(expert_params_per_gpu(d, lay_d)) == 0.0
    assert float(dm.optimizer_bytes) == pytest.approx(12.0 * float(dm.params_per_gpu) / 64, rel=1e-9)


def test_expert_gradients_reduce_over_edp_ranks_ep_apart():
    """The expert buffer's reduce-scatter runs over the edp ranks, etp*ep apart (one per
    node for EP 8 on 8-GPU nodes), and costs nothing where edp = 1."""
    lay = as_float(_lay(1, 64, 8))
    ar, rs, ag = expert_dp_ops(lay, 1e9)
    assert float(rs.n) == 8.0 and float(rs.stride) == 8.0
    # Megatron-Core's 4e7-element buckets (the default ``bucket_elems``): 25 calls
    assert float(rs.calls) == 25.0 and rs.protocols
    assert float(rs.size_bytes * rs.calls) == pytest.approx(4e9) and float(ag.size_bytes * ag.calls) == pytest.approx(2e9)
    hw = h100()
    from dse.graph.ops import time_s
    r = rates(hw, PRECISION_16)
    folded = expert_dp_ops(as_float(_lay(2, 16, 32)), 1e9)
    assert all(float(time_s(op, hw, r)) == 0.0 for op in folded)
    assert all(float(op.calls) == 0.0 for op in expert_dp_ops(lay, 0.0))


# --- DeepEP / HybridEP: each token crosses to a remote node once ---------------------

from dse.cost.collectives import group_collective_terms, node_dedup_cross_bytes  # noqa: E402


def test_node_dedup_bytes_bounds_and_limits():
    """One copy per token (k = 1) is plain all-to-all's ``(inter-1)/inter`` share; inside
    one node nothing crosses; Qwen3's top-8 of 128 experts over 2 nodes sends a token to
    the other node with probability ``1 - C(64, 8)/C(128, 8)`` -- about a quarter of plain
    all-to-all's four copies -- and never more than plain."""
    from math import comb
    S = 1e8
    assert float(node_dedup_cross_bytes(S, 4.0, 1.0, 128.0)) == pytest.approx(S * 3 / 4, rel=1e-5)
    assert float(node_dedup_cross_bytes(S, 1.0, 8.0, 128.0)) == 0.0
    p_remote = 1.0 - comb(64, 8) / comb(128, 8)
    assert float(node_dedup_cross_bytes(S, 2.0, 8.0, 128.0)) == pytest.approx(S / 8 * p_remote, rel=1e-4)
    for inter in (2.0, 4.0, 8.0):
        for k, E in ((2.0, 8.0), (8.0, 128.0), (8.0, 256.0)):
            assert float(node_dedup_cross_bytes(S, inter, k, E)) <= S * (inter - 1) / inter * (1 + 1e-6)


def test_flex_dispatcher_cuts_the_nic_term_of_the_ep_all_to_all_only_across_nodes():
    """Qwen3-30B-A3B, EP 16 over two 8-GPU H100 nodes: with the flex dispatcher
    (``Workload.moe_dispatcher``, the recipes' HybridEP) the all-to-all's NIC phase falls
    to about a quarter; with EP 8 inside one node the time is unchanged."""
    hw = h100()

    def a2a(ep, disp):
        m, wl, lay = as_float(get_model("qwen3-30b-a3b"),
                              Workload(global_batch=64, seq_len=4096, precision=PRECISION_FP8, moe_dispatcher=disp),
                              Layout(tp=1, pp=1, dp=16, ep=ep, mbs=1, zero=1, sp=0))
        op = {(o.name, o.phase): o for o in layer_ops(m, wl, lay, 2.0)}[("ep all-to-all", "fwd")]
        return group_collective_terms(op.kind, op.size_bytes, op.n, op.stride, hw, op.protocols,
                                      op.dedup_topk, op.dedup_experts)

    (nv0, nic0), (nv1, nic1) = a2a(16, 0), a2a(16, 1)
    assert 0.2 < float(nic1) / float(nic0) < 0.3
    assert float(nv1) >= float(nv0)                      # forwarding inside the node
    assert [float(x) for x in a2a(8, 1)] == pytest.approx([float(x) for x in a2a(8, 0)], rel=1e-6)


def test_predict_reads_the_dispatcher_column():
    import pandas as pd
    from dse.predict import predict_frame
    row = dict(id=1, source="T", model="Qwen3-30B-A3B", num_layers=8, hidden_size=2048, ffn_hidden_size=768,
               num_attention_heads=32, num_kv_heads=4, head_dim=128, vocab_size=151936, seq_length=4096,
               global_batch_size=64, micro_batch_size=1, gpu="h100-sxm-80gb", num_gpus=16, tp=1, pp=1,
               dp=16, cp=1, ep=16, vpp=None, sequence_parallel=None, recompute="none", zero_stage=1,
               precision="fp8", measured_iter_time_s=1.0, num_experts=128, top_k=8)
    out = predict_frame(pd.DataFrame([row, dict(row, id=2, moe_dispatcher="hybridep"),
                                      dict(row, id=3, moe_dispatcher="deepep"),
                                      dict(row, id=4, moe_dispatcher="nccl")]), "t.csv")
    t = out["predicted_iter_time_s"]
    assert t[1] < t[0] and t[2] == t[1]
    assert out.loc[3, "status"].startswith("invalid: moe_dispatcher: ")
