"""The trace tier's data-parallel buckets and optimizer step for a mixture-of-experts
model agree with the analytic tier: the routed experts' gradients are reduced (and
their parameters gathered) over the expert-data-parallel group, in the dense buffer's
bytes per element (Megatron-Core ``expert_parallel_buffers`` on ``intra_expt_dp_group``)."""

from __future__ import annotations

import pytest

from dse.cost.elementwise import ADAM_BYTES_PER_PARAM
from dse.graph.moe import dp_shard_params, expert_dp_size, expert_tp
from dse.graph.train import main_grad_bytes, step_graph
from dse.spec.hardware import get_hardware
from dse.spec.layout import PRECISION_16, PRECISION_FP8, Layout, Workload
from dse.spec.model import get_model
from dse.spec.numerics import as_float
from dse.trace.generate import generate_trace_set, rank_grid
from dse.trace.graph import NodeKind, RankGrid
from dse.train.memory import embedding_params_per_gpu, layers_per_stage, memory_per_gpu
from dse.cost.rates import rates

HW = get_hardware("h100-sxm-80gb")
MIX = get_model("mixtral-8x7b")


def _graph(model, wl, lay):
    m, w, l = as_float(model, wl, lay)
    r = rates(HW, w.precision)
    mem = memory_per_gpu(m, w, l, r.act_bytes, HW.hbm_bytes)
    g = step_graph(m, w, l, r.act_bytes, mem.params_per_gpu, embedding_params_per_gpu(m, l),
                   layers_per_stage(m, l), mem.expert_params_per_gpu)
    return g, mem, l


def _trace_bytes(ts, name_part, dim):
    """Bytes of every collective of stage 0 named ``name_part`` on grid axis ``dim``."""
    return sum(n.comm_bytes for n in ts.roles["stage0"].nodes
               if n.kind is NodeKind.COLLECTIVE and name_part in n.name and n.group_dim == dim)


def test_rank_grid_expert_axes_are_megatrons_expert_grid():
    """tp 2 x cp 2 x dp 2, ep 2: Megatron's expert ``RankGenerator`` (etp 2, ep 2, edp 2,
    order tp-ep-dp) gives rank = etp + 2 ep + 4 edp, so rank 0's EP group is (0, 2) and
    its expert-DP group (0, 4); a second stage repeats the pattern 8 ranks on."""
    g = RankGrid(tp=2, cp=2, dp=2, pp=2, ep=2)
    assert g.group(0, "ep") == (0, 2) and g.group(0, "edp") == (0, 4)
    assert g.group(9, "ep") == (9, 11) and g.group(9, "edp") == (9, 13)
    # EP 8 over TP 2 x DP 4 (ep does not divide dp*cp): expert TP 1, the EP group spans
    # the TP ranks, edp = 8 / 8 = 1
    f = RankGrid(tp=2, cp=1, dp=4, pp=1, ep=8)
    assert f.expert_tp == 1 and f.group(3, "ep") == tuple(range(8)) and f.group(3, "edp") == (3,)


@pytest.mark.parametrize("precision", [PRECISION_16, PRECISION_FP8])
def test_trace_dp_buckets_carry_the_analytic_bytes_over_edp(precision):
    """Mixtral 8x7B, TP 1 x PP 2 x DP 8, EP 4, distributed optimizer: the trace's per-layer
    gradient reduce-scatters and parameter all-gathers sum, per stage, to the analytic
    tier's whole-buffer ``dp`` (dense, over dp) and ``expert_dp`` (experts, over edp = 2)
    collectives (every bucket call of them), in bf16 or fp32 main-gradient bytes alike."""
    lay = Layout(tp=1, pp=2, dp=8, ep=4, mbs=1, zero=1)
    wl = Workload(global_batch=16, seq_len=1024, precision=precision)
    g, mem, l = _graph(MIX, wl, lay)
    ts = generate_trace_set(MIX, wl, lay, HW)
    assert float(expert_dp_size(l)) == 2.0
    whole = lambda op: float(op.size_bytes * op.calls)       # every bucket call of the buffer
    dense_rs, expert_rs = whole(g.dp[1]), whole(g.expert_dp[1])
    dense_ag, expert_ag = whole(g.dp[2]), whole(g.expert_dp[2])
    assert expert_rs > 0.5 * (dense_rs + expert_rs)          # the experts dominate
    assert _trace_bytes(ts, "grad reduce-scatter", "dp") == pytest.approx(dense_rs, rel=1e-5)
    assert _trace_bytes(ts, "grad reduce-scatter", "edp") == pytest.approx(expert_rs, rel=1e-5)
    assert _trace_bytes(ts, "param all-gather", "dp") == pytest.approx(dense_ag, rel=1e-5)
    assert _trace_bytes(ts, "param all-gather", "edp") == pytest.approx(expert_ag, rel=1e-5)
    # gradient bytes per element: the precision's main gradients, experts as dense
    gb = float(main_grad_bytes(as_float(wl)))
    Pe = float(mem.expert_params_per_gpu)
    assert expert_rs == pytest.approx(gb * Pe, rel=1e-6)
    assert dense_rs == pytest.approx(gb * (float(mem.params_per_gpu) - Pe), rel=1e-6)
    # the simulator's edp groups are the analytic group: size edp, etp*ep ranks apart
    grid = rank_grid(lay)
    grp = grid.group(0, "edp")
    assert len(grp) == 2 and grp[1] - grp[0] == int(float(expert_tp(l)) * 4)


def test_fp8_expert_gradients_use_the_main_grad_bytes():
    """Megatron fp8 recipes reduce bf16 main gradients (profile ``fp8_main_grad_bytes``):
    the expert buffer's reduce moves the same bytes per element as the dense one."""
    lay = Layout(tp=1, pp=1, dp=16, ep=8, mbs=1, zero=1)
    for precision in (PRECISION_16, PRECISION_FP8):
        wl = Workload(global_batch=16, seq_len=1024, precision=precision)
        g, mem, _ = _graph(MIX, wl, lay)
        Pe, P = float(mem.expert_params_per_gpu), float(mem.params_per_gpu)
        per_dense = float(g.dp[1].size_bytes * g.dp[1].calls) / (P - Pe)
        per_expert = float(g.expert_dp[1].size_bytes * g.expert_dp[1].calls) / Pe
        assert per_expert == pytest.approx(per_dense, rel=1e-6)
        assert per_expert == pytest.approx(float(main_grad_bytes(as_float(wl))), rel=1e-6)


def test_optimizer_step_updates_the_edp_shard_of_the_experts():
    """Adam's bytes (bf16, no fp8 cast) are ``ADAM_BYTES_PER_PARAM`` times the distributed
    optimizer's shard -- dense over dp*cp, experts over edp -- the same shard the memory
    model stores states for; for a dense model, ``P / (dp*cp)``."""
    lay = Layout(tp=1, pp=1, dp=64, ep=8, mbs=1, zero=1)
    wl = Workload(global_batch=64, seq_len=1024)
    g, mem, l = _graph(MIX, wl, lay)
    P, Pe = float(mem.params_per_gpu), float(mem.expert_params_per_gpu)
    shard = (P - Pe) / 64 + Pe / 8
    assert float(dp_shard_params(P, Pe, l)) == pytest.approx(shard, rel=1e-6)
    assert float(g.optimizer[0].bytes_moved) == pytest.approx(ADAM_BYTES_PER_PARAM * shard, rel=1e-6)
    assert float(mem.optimizer_bytes) == pytest.approx(12.0 * shard, rel=1e-6)
    dense = get_model("llama3-8b")
    gd, md, _ = _graph(dense, wl, Layout(tp=1, pp=1, dp=64, mbs=1, zero=1))
    assert float(gd.optimizer[0].bytes_moved) == pytest.approx(
        ADAM_BYTES_PER_PARAM * float(md.params_per_gpu) / 64, rel=1e-6)


def test_trace_refuses_the_a2a_overlap_it_does_not_expand():
    """The trace keeps the EP all-to-alls serial on the compute stream, so a run with the
    1F1B A2A overlap (``Workload.moe_a2a_overlap``) is refused with a one-line input
    error naming the field, as ``tp_overlap`` is."""
    import dataclasses
    from dse.errors import InputError
    lay = Layout(tp=1, pp=1, dp=16, ep=8, mbs=1, zero=1)
    wl = dataclasses.replace(Workload(global_batch=16, seq_len=1024), moe_a2a_overlap=1)
    with pytest.raises(InputError, match="moe_a2a_overlap"):
        generate_trace_set(MIX, wl, lay, HW)


def test_moe_trace_with_cp_replays_exactly_on_the_expert_grid():
    """A two-layer Mixtral, TP 1 x PP 2 x CP 2 x DP 4, EP 4: the EP group spans the CP
    and DP ranks (Megatron's expert grid), the experts' gradient buckets run over the
    edp = 2 ranks 4 apart; the replay finishes, and simulating one rank per symmetry
    class gives the exact (every-rank) step time."""
    import dataclasses
    from dse.sim import simulate
    from dse.sim.topology import topology_for_hardware
    small = dataclasses.replace(MIX, num_layers=2)
    lay = Layout(tp=1, pp=2, cp=2, dp=4, ep=4, mbs=1, zero=1)
    wl = Workload(global_batch=8, seq_len=1024)
    ts = generate_trace_set(small, wl, lay, HW)
    grid = rank_grid(lay)
    assert grid.group(0, "ep") == (0, 1, 2, 3) and grid.group(0, "edp") == (0, 4)
    assert any(n.group_dim == "edp" for n in ts.roles["stage0"].nodes)
    topo = topology_for_hardware(HW, 16)
    res = simulate(ts, topo, grid=grid, record_timeline=False)
    exact = simulate(ts, topo, grid=grid, coalesce=False, record_timeline=False)
    assert res.blocked is None and exact.step_time_s == pytest.approx(res.step_time_s)
