"""Event-driven replay: max-min sharing, dependencies, send/recv, metrics, two jobs."""

import json

import numpy as np
import pytest

from dse.errors import InputError
from dse.sim import DimSpec, Job, make_topology, maxmin_rates, ring_time_s, simulate
from dse.trace.graph import (CollectiveKind, NodeKind, RankGrid, RankTrace, TraceNode,
                             TraceSet)

from . import Builder, coll_trace, make_1f1b_trace, one_role

AR = CollectiveKind.ALL_REDUCE
B, A = 100e9, 1e-6


def switch(n, bw=B, lat=A):
    return make_topology([DimSpec("switch", n, bw, lat)])


def dgx(nodes, gpus):
    return make_topology([DimSpec("switch", gpus, 450e9, 1.5e-6),
                          DimSpec("rail", nodes, 50e9, 5e-6)])


# ---- max-min ------------------------------------------------------------------------------

def test_maxmin_progressive_filling_textbook_example():
    # links 0, 1 (capacity 1); flow a crosses both, b only link 0, c and d only link 1
    L = 2
    paths = np.array([[0, 1], [0, L], [1, L], [1, L]])
    cap = np.array([1.0, 1.0, np.inf])
    rates = maxmin_rates(paths, cap)
    assert rates == pytest.approx([1 / 3, 2 / 3, 1 / 3, 1 / 3])
    # max-min: no link over capacity, every flow has a saturated bottleneck
    assert rates[0] + rates[1] <= 1 + 1e-12 and rates[0] + rates[2] + rates[3] <= 1 + 1e-12


def p2p_trace(pairs, nbytes, n):
    """Literal-peer sends: rank a sends ``nbytes`` to rank b for each (a, b)."""
    roles, rank_role = {}, []
    for r in range(n):
        nodes = []
        for a, b in pairs:
            if r == a:
                nodes.append(TraceNode(len(nodes), f"send{a}->{b}", NodeKind.SEND,
                                       comm_bytes=nbytes, peer=b, stream=len(nodes) + 1))
            if r == b:
                nodes.append(TraceNode(len(nodes), f"recv{a}->{b}", NodeKind.RECV,
                                       comm_bytes=nbytes, peer=a, stream=len(nodes) + 1))
        roles[f"r{r}"] = RankTrace(r, nodes)
        rank_role.append(f"r{r}")
    return TraceSet(roles, rank_role)


def test_two_flows_on_one_link_each_get_half():
    S = 1e9
    one = simulate(p2p_trace([(0, 2)], S, 4), switch(4), grid=None)
    assert one.step_time_s == pytest.approx(S / B + A)
    two = simulate(p2p_trace([(0, 2), (1, 2)], S, 4), switch(4))
    # both share nvsw->gpu2: B/2 each
    assert two.step_time_s == pytest.approx(2 * S / B + A)
    assert two.link_bytes[two.link_names.index("nvsw->n0.gpu2")] == pytest.approx(2 * S)
    assert two.link_util[two.link_names.index("nvsw->n0.gpu2")] == pytest.approx(
        2 * S / (B * two.step_time_s))


def test_max_min_reallocates_when_a_flow_finishes():
    # flow 0->2 of S and flow 1->2 of 3S: share B/2 until the first finishes at 2S/B,
    # then the second runs alone at B: total 2S/B + 2S/B
    ts = p2p_trace([(0, 2), (1, 2)], 1e9, 4)
    ts.roles["r1"].nodes[0].comm_bytes = 3e9
    ts.roles["r2"].nodes[1].comm_bytes = 3e9
    res = simulate(ts, switch(4))
    assert res.step_time_s == pytest.approx(4e9 / B + A)


# ---- dependencies and streams --------------------------------------------------------------

def small_trace():
    """tp=2, dp=2, pp=2 with compute, TP all-reduce, PP send/recv and DP all-reduce."""
    grid = RankGrid(tp=2, cp=1, dp=2, pp=2)
    roles = {}
    for s in range(2):
        b = Builder()
        dep = None
        if s == 1:
            dep = b.recv("recv_act", 1e8, "pp", -1, tag=0)
        c1 = b.comp("fwd", 1e-3, [dep])
        ar = b.coll("tp_ar", AR, 2e8, "tp", [c1])
        if s == 0:
            b.send("send_act", 1e8, "pp", +1, tag=0, deps=[ar])
        c2 = b.comp("bwd", 2e-3, [ar])
        dp = b.coll("dp_ar", AR, 4e8, "dp", [c2], stream=3)
        b.comp("opt", 5e-4, [dp])
        roles[f"stage{s}"] = RankTrace(s * 4, b.nodes)
    rank_role = [f"stage{grid.coord(r, 'pp')}" for r in range(grid.size)]
    return TraceSet(roles, rank_role), grid


def test_synthetic_trace_honours_dependencies():
    ts, grid = small_trace()
    topo = dgx(nodes=2, gpus=4)
    res = simulate(ts, topo, grid=grid, coalesce=False)
    assert res.blocked is None
    ev = {(e.rank, e.name): e for e in res.timeline}
    assert len(res.timeline) == 8 * 6  # every node of every rank
    for r in range(8):
        role = ts.roles[ts.rank_role[r]]
        for nd in role.nodes:
            me = ev[(r, nd.name)]
            for d in nd.data_deps:
                dep = ev[(r, role.nodes[d].name)]
                assert me.start_s >= dep.start_s + dep.dur_s - 1e-15
    # stage 1 cannot start its forward before stage 0's activation has arrived
    for r in range(4, 8):
        assert ev[(r, "fwd")].start_s >= ev[(r - 4, "send_act")].start_s + 1e8 / 50e9
    # a collective finishes at the same time on all members
    for g in [(0, 1), (2, 3)]:
        ends = {ev[(r, "tp_ar")].start_s + ev[(r, "tp_ar")].dur_s for r in g}
        assert max(ends) - min(ends) < 1e-12
    # step time = the last node on any rank
    assert res.step_time_s == pytest.approx(max(e.start_s + e.dur_s for e in res.timeline))
    # compute time per rank is the sum of its compute nodes
    assert res.rank_compute_s[0] == pytest.approx(3.5e-3)
    assert np.all(res.rank_busy_s[:8] >= res.rank_compute_s[:8])
    assert np.all(res.rank_exposed_comm_s[:8] > 0)


def test_coalesced_replay_equals_per_rank_replay():
    ts, grid = small_trace()
    topo = dgx(nodes=2, gpus=4)
    exact = simulate(ts, topo, grid=grid, coalesce=False)
    fast = simulate(ts, topo, grid=grid, coalesce=True)
    assert fast.num_classes < exact.num_classes == 8
    assert fast.step_time_s == pytest.approx(exact.step_time_s, rel=1e-12)
    assert fast.rank_busy_s == pytest.approx(exact.rank_busy_s)
    assert fast.link_bytes == pytest.approx(exact.link_bytes)


def test_1f1b_trace_coalesced_equals_exact():
    ts, grid = make_1f1b_trace(2, 2, 4, 4, 1, fwd_nodes=6, bwd_nodes=8)
    topo = dgx(nodes=4, gpus=4)
    exact = simulate(ts, topo, grid=grid, coalesce=False)
    fast = simulate(ts, topo, grid=grid)
    assert exact.blocked is None and fast.num_classes == 4
    assert fast.step_time_s == pytest.approx(exact.step_time_s, rel=1e-9)


def test_streams_overlap_and_issue_in_order():
    b = Builder()
    c0 = b.comp("a", 1e-3)
    b.coll("ar", AR, 1e8, "tp", [c0], stream=1)   # overlaps with "b" on stream 0
    b.comp("b", 2e-3, [c0])
    b.comp("c", 1e-3, [], stream=1)                # behind "ar" on stream 1 (in order)
    grid = RankGrid(tp=4, cp=1, dp=1, pp=1)
    res = simulate(one_role(b.nodes, 4), switch(4), grid=grid)
    ev = {e.name: e for e in res.timeline}
    t_ar = ring_time_s("all_reduce", 1e8, 4, B, A)
    assert ev["ar"].start_s == pytest.approx(1e-3)
    assert ev["c"].start_s == pytest.approx(1e-3 + t_ar)
    assert res.step_time_s == pytest.approx(max(3e-3, 1e-3 + t_ar + 1e-3))
    # exposed comm: the part of the all-reduce not hidden under "b"
    assert res.rank_exposed_comm_s[0] == pytest.approx(max(0.0, t_ar - 2e-3))


def test_deadlock_is_reported_not_raised():
    b = Builder()
    b.recv("never", 1e6, "pp", -1)
    grid = RankGrid(tp=1, cp=1, dp=1, pp=2)
    ts = one_role(b.nodes, 2)
    res = simulate(ts, switch(2), grid=grid)
    assert res.step_time_s == float("inf")
    assert res.blocked.startswith("deadlock") and "'never'" in res.blocked


def test_off_grid_peer_is_a_no_op():
    b = Builder()
    b.send("s", 1e6, "pp", +1)          # the last stage has no next stage
    b.recv("r", 1e6, "pp", -1)          # the first stage has no previous stage
    grid = RankGrid(tp=1, cp=1, dp=1, pp=2)
    res = simulate(one_role(b.nodes, 2), switch(2), grid=grid)
    assert res.blocked is None
    assert res.step_time_s == pytest.approx(1e6 / B + A)


# ---- output ------------------------------------------------------------------------------

def test_chrome_trace_written(tmp_path):
    ts, grid = small_trace()
    res = simulate(ts, dgx(2, 4), grid=grid)
    p = res.write_chrome_trace(tmp_path / "t.json")
    data = json.loads(open(p).read())
    xs = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == len(res.timeline) > 0
    assert {e["cat"] for e in xs} >= {"compute", "collective", "send", "recv"}
    assert res.events_per_s > 0 and res.num_events > 0
    assert res.busiest_links(2)[0][1] > 0


# ---- two jobs ------------------------------------------------------------------------------

def test_two_jobs_contend_on_a_shared_spine_link():
    # leaves {0,1} {2,3} {4,5}; one spine; every leaf-spine link = 2*B/(2*1) = B
    topo = make_topology([DimSpec("fat_tree", 6, B, A, leaf_size=2, spines=1,
                                  oversubscription=2.0)])
    grid = RankGrid(tp=2, cp=1, dp=1, pp=1)
    ts = coll_trace(AR, 1e9, grid)
    alone = simulate(Job(ts, grid, rank_offset=1), topo)
    t_alone = ring_time_s("all_reduce", 1e9, 2, B, A)  # 1e9/B + 2 steps * A
    assert alone.step_time_s == pytest.approx(t_alone)
    # job A on GPUs 1,2 and job B on GPUs 3,4 share leaf1 <-> spine in both directions
    both = simulate([Job(ts, grid, rank_offset=1, name="A"),
                     Job(ts, grid, rank_offset=3, name="B")], topo)
    assert both.job_step_time_s[0] == pytest.approx(2 * (t_alone - 2 * A) + 2 * A)
    assert both.job_step_time_s[1] == pytest.approx(both.job_step_time_s[0])
    # disjoint placement (GPUs 0,1 and 4,5 stay inside their leaves): no contention
    apart = simulate([Job(ts, grid, rank_offset=0), Job(ts, grid, rank_offset=4)], topo)
    assert apart.step_time_s < both.step_time_s


def test_job_placement_validated():
    grid = RankGrid(tp=4, cp=1, dp=1, pp=1)
    ts = coll_trace(AR, 1e6, grid)
    with pytest.raises(InputError, match="disjoint"):
        simulate([Job(ts, grid, 0), Job(ts, grid, 2)], switch(8))
    with pytest.raises(InputError, match="rank_offset \\+ num_ranks <= num_gpus"):
        simulate(Job(ts, grid, 6), switch(8))
    with pytest.raises(InputError, match="grid.size == num_ranks"):
        simulate(Job(ts, RankGrid(tp=2, cp=1, dp=1, pp=1)), switch(8))


# ---- SM interference of overlapped collectives ----------------------------------------------

def _overlap_trace(comp_s: float, nbytes: float, n: int, two_colls: bool = False):
    b = Builder()
    b.comp("work", comp_s)
    b.coll("ar", AR, nbytes, "tp", stream=1)
    if two_colls:
        b.coll("ar2", AR, nbytes, "tp", stream=2)
    return one_role(b.nodes, n), RankGrid(tp=n, cp=1, dp=1, pp=1)


def test_overlapped_collective_slows_compute_by_its_sm_share():
    n, S, W, f = 4, 2e9, 1.0, 0.1
    ts, grid = _overlap_trace(0.0, S, n)
    C = simulate(ts, switch(n), grid=grid).step_time_s          # the collective alone
    assert 0 < C < W
    ts, grid = _overlap_trace(W, S, n)
    assert simulate(ts, switch(n), grid=grid).step_time_s == pytest.approx(W)
    res = simulate(ts, switch(n), grid=grid, comm_sm_fraction=f)
    # compute runs at 1 - f while the collective transfers: W + f C
    assert res.step_time_s == pytest.approx(W + f * C)
    assert res.rank_compute_s[0] == pytest.approx(W + f * C)
    # two concurrent collectives take 2f; the share is capped at 1/2
    ts2, _ = _overlap_trace(W, S, n, two_colls=True)
    C2 = simulate(_overlap_trace(0.0, S, n, True)[0], switch(n), grid=grid).step_time_s
    assert simulate(ts2, switch(n), grid=grid, comm_sm_fraction=f).step_time_s == \
        pytest.approx(W + 2 * f * C2)
    assert simulate(ts2, switch(n), grid=grid, comm_sm_fraction=0.4).step_time_s == \
        pytest.approx(W + 0.5 * C2)
    # the trace's meta carries the fraction by default; it must lie in [0, 1/2]
    ts.meta["comm_sm_fraction"] = repr(f)
    assert simulate(ts, switch(n), grid=grid).step_time_s == pytest.approx(W + f * C)
    ts.meta["comm_sm_fraction"] = "0.7"
    with pytest.raises(InputError, match="comm_sm_fraction"):
        simulate(ts, switch(n), grid=grid)


def test_a_collective_pays_its_node_latency_after_its_phases():
    """TraceNode.latency_s (a framework bucket's NCCL protocol latency, dse.trace.generate)
    is added to the collective's routed time, and the compute it overlaps runs slowed by
    the SM share for that long too."""
    n, S = 4, 2e9
    ts, grid = _overlap_trace(0.0, S, n)
    C = simulate(ts, switch(n), grid=grid).step_time_s
    for node in ts.roles[next(iter(ts.roles))].nodes:
        if node.kind is NodeKind.COLLECTIVE:
            node.latency_s = 3e-3
    assert simulate(ts, switch(n), grid=grid).step_time_s == pytest.approx(C + 3e-3)


@pytest.mark.parametrize("bad", [-1e-3, float("inf"), float("nan")])
def test_a_negative_or_infinite_node_latency_is_refused(bad):
    ts, grid = _overlap_trace(0.0, 2e9, 4)
    for node in ts.roles[next(iter(ts.roles))].nodes:
        if node.kind is NodeKind.COLLECTIVE:
            node.latency_s = bad
    with pytest.raises(InputError, match="latency_s"):
        simulate(ts, switch(4), grid=grid)
