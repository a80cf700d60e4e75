"""Collective decomposition and alpha-beta agreement on uncontended networks."""

import pytest

from dse.sim import DimSpec, busbw_factor, make_topology, plan, ring_time_s, simulate
from dse.sim.collectives import merge
from dse.trace.graph import CollectiveKind, RankGrid

from . import coll_trace

AR, RS, AG = CollectiveKind.ALL_REDUCE, CollectiveKind.REDUCE_SCATTER, CollectiveKind.ALL_GATHER
B_NV, A_NV = 450e9, 1.5e-6
B_IB, A_IB = 50e9, 5e-6


def switch(n=8, algo="ring"):
    return make_topology([DimSpec("switch", n, B_NV, A_NV, algo=algo)])


def dgx(nodes, gpus=8, cross="hierarchical"):
    return make_topology([DimSpec("switch", gpus, B_NV, A_NV),
                          DimSpec("rail", nodes, B_IB, A_IB)], cross_dim_algo=cross)


def test_busbw_factors_follow_nccl_tests():
    assert busbw_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert busbw_factor("all_gather", 8) == pytest.approx(7 / 8)
    assert busbw_factor("reduce_scatter", 4) == pytest.approx(3 / 4)
    assert busbw_factor("all_to_all", 4) == pytest.approx(3 / 4)
    assert busbw_factor("broadcast", 4) == 1.0


def test_ring_plan_shape():
    (ph,) = plan(switch(), "all_reduce", list(range(8)))
    assert ph.steps == 14 and len(ph.src) == 8 and ph.dst[7] == 0
    assert ph.frac[0] == pytest.approx(14 / 8)
    (ph,) = plan(switch(), "all_gather", list(range(4)))
    assert ph.steps == 3 and ph.frac[0] == pytest.approx(3 / 4)
    assert plan(switch(), "all_reduce", [3]) == []


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("kind", [AR, RS, AG])
@pytest.mark.parametrize("nbytes", [1e3, 1e6, 1e9])
def test_single_ring_collective_matches_alpha_beta(n, kind, nbytes):
    grid = RankGrid(tp=n, cp=1, dp=1, pp=1)
    res = simulate(coll_trace(kind, nbytes, grid), switch(n), grid=grid)
    expect = ring_time_s(kind.value, nbytes, n, B_NV, A_NV)
    if kind == AR:
        assert expect == pytest.approx(2 * (n - 1) / n * nbytes / B_NV + 2 * (n - 1) * A_NV)
    assert res.step_time_s == pytest.approx(expect, rel=0.01)
    assert res.blocked is None


def test_hierarchical_all_reduce_across_nodes():
    """RS inside each node (S), AR across nodes on S/8 (rail), AG inside each node."""
    nodes, S = 4, 1e9
    grid = RankGrid(tp=1, cp=1, dp=8 * nodes, pp=1)
    topo = dgx(nodes)
    res = simulate(coll_trace(AR, S, grid, dim="dp"), topo, grid=grid)
    intra = ring_time_s("reduce_scatter", S, 8, B_NV, A_NV)
    inter = ring_time_s("all_reduce", S / 8, nodes, B_IB, A_IB)
    assert res.step_time_s == pytest.approx(2 * intra + inter, rel=1e-6)
    phases = plan(topo, "all_reduce", list(range(32)))
    assert len(phases) == 3
    # a flat ring across nodes is slower: every ring step crosses the 50 GB/s rail
    flat = simulate(coll_trace(AR, S, grid, dim="dp"), dgx(nodes, cross="ring"), grid=grid)
    assert flat.step_time_s > res.step_time_s


def test_group_inside_scale_out_dim_is_a_ring_on_rails():
    grid = RankGrid(tp=8, cp=1, dp=4, pp=1)
    res = simulate(coll_trace(AR, 1e8, grid, dim="dp"), dgx(4), grid=grid)
    assert res.step_time_s == pytest.approx(ring_time_s("all_reduce", 1e8, 4, B_IB, A_IB))
    assert res.num_classes == 1


def test_tree_all_reduce():
    n = 8
    ph = plan(switch(n, algo="tree"), "all_reduce", list(range(n)))
    assert len(ph) == 2 and ph[0].steps == 3
    assert sorted(ph[0].src) == sorted(ph[1].dst)
    grid = RankGrid(tp=n, cp=1, dp=1, pp=1)
    # latency-bound: 2 * depth * alpha instead of the ring's 2 (n-1) alpha
    tiny = simulate(coll_trace(AR, 8.0, grid), switch(n, "tree"), grid=grid).step_time_s
    assert tiny == pytest.approx(2 * 3 * A_NV, rel=1e-3)
    ring = simulate(coll_trace(AR, 8.0, grid), switch(n), grid=grid).step_time_s
    assert tiny < ring
    big = simulate(coll_trace(AR, 1e9, grid), switch(n, "tree"), grid=grid).step_time_s
    assert big == pytest.approx(2 * 1e9 / B_NV + 6 * A_NV, rel=1e-3)


def test_all_to_all_and_broadcast():
    n, S = 8, 8e8
    topo = switch(n)
    (ph,) = plan(topo, "all_to_all", list(range(n)))
    assert len(ph.src) == n * (n - 1) and ph.frac[0] == pytest.approx(1 / n)
    grid = RankGrid(tp=n, cp=1, dp=1, pp=1)
    a2a = simulate(coll_trace(CollectiveKind.ALL_TO_ALL, S, grid), topo, grid=grid)
    assert a2a.step_time_s == pytest.approx((n - 1) / n * S / B_NV + A_NV)
    bc = simulate(coll_trace(CollectiveKind.BROADCAST, S, grid), topo, grid=grid)
    assert bc.step_time_s == pytest.approx(S / B_NV + (n - 1) * A_NV)


def test_merge_runs_phases_side_by_side():
    a = plan(switch(), "all_reduce", [0, 1])
    b = plan(switch(), "all_reduce", [2, 3, 4, 5])
    (m,) = merge([a, b], scale=0.5)
    assert len(m.src) == 6 and m.steps == 6 and m.frac[0] == pytest.approx(0.5)
