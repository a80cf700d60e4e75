"""The MoE block of the training graph (dse.graph.moe): host launches of the grouped
expert GEMMs scale with the local experts, token permutation moves the bytes the
Megatron-Core alltoall dispatcher moves, and a dense model's graph is unchanged."""

import pytest

from dse.graph.moe import MOE_BWD_KERNELS, MOE_FWD_KERNELS, PERMUTE_PASSES
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
    """Forward token bytes 2 (T h + 3 T k h) with several local experts (permute,
    regroup, regroup back, unpermute), 2 (T h + T k h) with one."""
    T, h = 4096.0, 2048.0
    q = _ops("qwen3-30b-a3b", 8)[("moe permute/route", "fwd")]
    assert float(q.bytes_moved) == pytest.approx(2 * h * (2 * T + PERMUTE_PASSES * T * 8), rel=1e-6)
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
