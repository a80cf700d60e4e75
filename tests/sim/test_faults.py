"""Faults: slow links, failed links (reroute or block), stragglers, packet loss."""

from pathlib import Path

import pytest

from dse.errors import InputError
from dse.sim import (DimSpec, LinkDown, PacketLoss, SlowLink, Straggler, faults_from_dict,
                     goodput_factor, load_faults, load_topology, make_topology, resolve,
                     ring_time_s, simulate)
from dse.trace.graph import CollectiveKind, RankGrid

from . import coll_trace, make_1f1b_trace

AR = CollectiveKind.ALL_REDUCE
B, A = 100e9, 1e-6
TOPOS = Path(__file__).resolve().parents[2] / "studies" / "topologies"


def switch(n):
    return make_topology([DimSpec("switch", n, B, A)])


def tp_ar(n, S=1e9, pre_s=0.0):
    grid = RankGrid(tp=n, cp=1, dp=1, pp=1)
    return coll_trace(AR, S, grid, pre_s=pre_s), grid


# ---- parsing and validation -------------------------------------------------------------

def test_fault_toml_example_loads_and_resolves():
    topo = load_topology(TOPOS / "dgx-h100-rail-1024.toml")
    fs = load_faults(TOPOS / "faults-example.toml", topo)
    kinds = [type(f).__name__ for f in fs.faults]
    assert kinds == ["SlowLink", "LinkDown", "Straggler", "PacketLoss"]
    rf = resolve(fs, topo)
    assert rf.down_names == ("n3.gpu5->nvsw",)
    assert rf.cap_factor[topo.link_id("rail5.up.n3")] == pytest.approx(0.25)
    assert rf.cap_factor[topo.link_id("rail7.up.n100")] == pytest.approx(0.999)
    assert rf.rank_factor == {37: 1.3}
    # GPUs at an end of a faulty link: n3.gpu5 (GPU 29) and every GPU 7 (rail7)
    assert {29, 7, 15, 1023}.issubset(rf.touched_gpus) and 37 not in rf.touched_gpus


@pytest.mark.parametrize("fault, field, text", [
    (SlowLink("n9.gpu0->nvsw", 2.0), "fault[0].link", "must exist in the topology"),
    (LinkDown("rail9.*"), "fault[0].link", "must match at least one link"),
    (SlowLink("n0.gpu0->nvsw", 0.5), "fault[0].factor", "`factor >= 1`"),
    (Straggler(8, 1.5), "fault[0].rank", "`0 <= rank < num_gpus`"),
    (PacketLoss("*", 1.0), "fault[0].p", "`0 <= p < 1`"),
    (PacketLoss("*", 0.1, recovery="magic"), "fault[0].recovery", "recovery must be"),
])
def test_bad_faults_are_input_errors(fault, field, text):
    with pytest.raises(InputError) as e:
        resolve([fault], switch(8))
    assert e.value.field == field and text in e.value.rule


def test_fault_dict_validation():
    with pytest.raises(InputError, match="kind must be one of"):
        faults_from_dict({"fault": [{"kind": "meteor"}]}, "f.toml")
    with pytest.raises(InputError) as e:
        faults_from_dict({"fault": [{"kind": "slow_link", "link": "x"}]}, "f.toml")
    assert e.value.where == "f.toml" and e.value.field == "fault[0].factor"
    with pytest.raises(InputError, match="unknown key"):
        faults_from_dict({"fault": [{"kind": "link_down", "link": "x", "p": 1}]})
    fs = faults_from_dict({"fault": [{"kind": "link_down", "link": "nope"}]}, "f.toml")
    with pytest.raises(InputError) as e:
        simulate(*tp_ar(4)[:1], switch(4), fs, grid=tp_ar(4)[1])
    assert e.value.where == "f.toml" and "'nope' must exist" in e.value.rule


def test_goodput_models():
    assert goodput_factor(0.01) == pytest.approx(0.99)
    # go-back-N, W = 64: (1-p) / (1 - p + W p)
    assert goodput_factor(0.01, "go_back_n", 64) == pytest.approx(0.99 / (0.99 + 0.64))
    assert goodput_factor(0.0, "go_back_n", 64) == 1.0


# ---- effects ------------------------------------------------------------------------------

def test_slowed_link_slows_the_collective_crossing_it():
    n, S = 8, 1e9
    ts, grid = tp_ar(n, S)
    base = simulate(ts, switch(n), grid=grid).step_time_s
    slow = simulate(ts, switch(n), [SlowLink("n0.gpu3->nvsw", 2.0)], grid=grid)
    expect = 2 * (n - 1) / n * S / (B / 2) + 2 * (n - 1) * A
    assert slow.step_time_s == pytest.approx(expect) and slow.step_time_s > base
    # a slow link no flow crosses changes nothing
    other = simulate(ts, make_topology([DimSpec("switch", 8, B, A),
                                        DimSpec("rail", 2, B, A)]),
                     [SlowLink("rail0.*", 10.0)], grid=grid)
    assert other.step_time_s == pytest.approx(base)


def test_failed_nvlink_reroutes_over_the_rails():
    topo = make_topology([DimSpec("switch", 4, 450e9, 1.5e-6),
                          DimSpec("rail", 2, 50e9, 5e-6)])
    S = 1e9
    ts, grid = tp_ar(4, S)
    ok = simulate(ts, topo, grid=grid)
    assert ok.step_time_s == pytest.approx(ring_time_s("all_reduce", S, 4, 450e9, 1.5e-6))
    res = simulate(ts, topo, [LinkDown("n0.gpu1->nvsw")], grid=grid)
    assert res.blocked is None
    detour_lat = 4 * 5e-6 / 2 + 1.5e-6       # rail1 up/down, rail2 up/down, NVLink
    expect = 2 * 3 / 4 * S / 50e9 + 6 * detour_lat
    assert res.step_time_s == pytest.approx(expect)
    assert res.link_bytes[topo.link_id("rail1.up.n0")] == pytest.approx(1.5 * S)
    assert res.link_bytes[topo.link_id("n0.gpu1->nvsw")] == 0


def test_failed_link_without_alternative_blocks():
    ts, grid = tp_ar(4)
    res = simulate(ts, switch(4), [LinkDown("n0.gpu1->nvsw")], grid=grid)
    assert res.step_time_s == float("inf")
    assert "no route from n0.gpu1" in res.blocked and "n0.gpu1->nvsw" in res.blocked


def test_failed_spine_link_reroutes_via_another_spine():
    topo = make_topology([DimSpec("fat_tree", 8, B, A, leaf_size=4, spines=2)])
    grid = RankGrid(tp=8, cp=1, dp=1, pp=1)
    ts = coll_trace(AR, 1e9, grid)
    base = simulate(ts, topo, grid=grid)
    res = simulate(ts, topo, [LinkDown("ft0.leaf0->spine1")], grid=grid)
    assert res.blocked is None and res.step_time_s == pytest.approx(base.step_time_s)
    dead = simulate(ts, topo, [LinkDown("ft0.leaf0->spine*")], grid=grid)
    assert dead.blocked is not None and dead.step_time_s == float("inf")


def test_straggler_delays_step_by_its_extra_compute():
    n, C, f = 4, 2e-3, 1.5
    ts, grid = tp_ar(n, 1e8, pre_s=C)
    base = simulate(ts, switch(n), grid=grid)
    slow = simulate(ts, switch(n), [Straggler(1, f)], grid=grid)
    assert slow.step_time_s - base.step_time_s == pytest.approx((f - 1) * C)
    assert slow.num_classes == 2 and base.num_classes == 1
    # the others wait for the straggler inside the collective: exposed communication
    assert slow.rank_exposed_comm_s[0] == pytest.approx(
        base.rank_exposed_comm_s[0] + (f - 1) * C)
    assert slow.rank_compute_s[1] == pytest.approx(f * C)


def test_straggler_in_a_pipeline_coalesced_equals_exact():
    ts, grid = make_1f1b_trace(2, 4, 2, 4, 1, fwd_nodes=6, bwd_nodes=8)
    topo = make_topology([DimSpec("switch", 2, 450e9, 1.5e-6),
                          DimSpec("rail", 8, 50e9, 5e-6)])
    faults = [Straggler(5, 1.3)]
    exact = simulate(ts, topo, faults, grid=grid, coalesce=False)
    fast = simulate(ts, topo, faults, grid=grid)
    base = simulate(ts, topo, grid=grid)
    assert fast.num_classes < exact.num_classes
    assert fast.step_time_s == pytest.approx(exact.step_time_s, rel=1e-9)
    assert fast.step_time_s > base.step_time_s


def test_packet_loss_scales_the_bandwidth_term():
    n, S, p = 8, 1e9, 0.1
    ts, grid = tp_ar(n, S)
    res = simulate(ts, switch(n), [PacketLoss("*", p)], grid=grid)
    expect = 2 * (n - 1) / n * S / (B * (1 - p)) + 2 * (n - 1) * A
    assert res.step_time_s == pytest.approx(expect)
    gbn = simulate(ts, switch(n), [PacketLoss("*", 0.001, "go_back_n", 64)], grid=grid)
    eff = goodput_factor(0.001, "go_back_n", 64)
    assert gbn.step_time_s == pytest.approx(2 * (n - 1) / n * S / (B * eff)
                                            + 2 * (n - 1) * A)
