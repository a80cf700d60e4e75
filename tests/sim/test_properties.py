"""Property tests (hypothesis): monotonicity in bandwidth, lower bounds, max-min
optimality, coalesced == per-rank replay."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dse.sim import DimSpec, Straggler, make_topology, maxmin_rates, simulate

from . import make_1f1b_trace

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def configs(draw):
    tp = draw(st.sampled_from([1, 2]))
    dp = draw(st.sampled_from([1, 2]))
    pp = draw(st.sampled_from([1, 2, 3]))
    mb = draw(st.integers(1, 4))
    act = draw(st.floats(1e5, 5e8))
    grad = draw(st.floats(1e5, 1e9))
    comp = draw(st.floats(1e-6, 1e-3))
    overlap = draw(st.booleans())
    ts, grid = make_1f1b_trace(tp, dp, pp, mb, 1, fwd_nodes=6, bwd_nodes=8,
                               act_bytes=act, grad_bytes=grad, comp_s=comp,
                               dp_overlap=overlap)
    bw1 = draw(st.floats(10e9, 900e9))
    bw2 = draw(st.floats(5e9, 100e9))
    lat = draw(st.floats(0, 1e-5))
    return ts, grid, bw1, bw2, lat


def topo(grid, bw1, bw2, lat):
    return make_topology([DimSpec("switch", grid.tp, bw1, lat),
                          DimSpec("rail", grid.size // grid.tp, bw2, 2 * lat)])


def critical_path_s(role_nodes) -> float:
    """Longest chain of compute time along dependencies and stream order."""
    finish = {}
    last_on_stream = {}
    for nd in role_nodes:          # program order is a topological order
        preds = list(nd.data_deps) + list(nd.ctrl_deps)
        if nd.stream in last_on_stream:
            preds.append(last_on_stream[nd.stream])
        start = max((finish[p] for p in preds), default=0.0)
        w = nd.duration_s if nd.kind.value == "compute" else 0.0
        finish[nd.id] = start + w
        last_on_stream[nd.stream] = nd.id
    return max(finish.values(), default=0.0)


@SETTINGS
@given(configs(), st.floats(1.0, 8.0))
def test_more_bandwidth_never_increases_step_time(cfg, k):
    ts, grid, bw1, bw2, lat = cfg
    slow = simulate(ts, topo(grid, bw1, bw2, lat), grid=grid, record_timeline=False)
    fast = simulate(ts, topo(grid, k * bw1, k * bw2, lat), grid=grid,
                    record_timeline=False)
    assert fast.step_time_s <= slow.step_time_s * (1 + 1e-9)


@SETTINGS
@given(configs())
def test_step_time_at_least_critical_path_compute(cfg):
    ts, grid, bw1, bw2, lat = cfg
    res = simulate(ts, topo(grid, bw1, bw2, lat), grid=grid, record_timeline=False)
    bound = max(critical_path_s(rt.nodes) for rt in ts.roles.values())
    assert res.step_time_s >= bound * (1 - 1e-12)
    assert np.all(res.rank_busy_s[:grid.size] <= res.step_time_s * (1 + 1e-12))


@SETTINGS
@given(configs(), st.data())
def test_coalesced_replay_equals_per_rank_replay(cfg, data):
    ts, grid, bw1, bw2, lat = cfg
    rank = data.draw(st.integers(0, grid.size - 1))
    f = data.draw(st.floats(1.0, 3.0))
    t = topo(grid, bw1, bw2, lat)
    exact = simulate(ts, t, [Straggler(rank, f)], grid=grid, coalesce=False)
    fast = simulate(ts, t, [Straggler(rank, f)], grid=grid)
    assert fast.step_time_s == exact.step_time_s or \
        abs(fast.step_time_s - exact.step_time_s) <= 1e-9 * exact.step_time_s


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_maxmin_is_feasible_and_every_flow_has_a_bottleneck(data):
    L = data.draw(st.integers(1, 6))
    F = data.draw(st.integers(1, 12))
    cap = np.array(data.draw(st.lists(st.floats(0.1, 10.0), min_size=L, max_size=L))
                   + [np.inf])
    rows = []
    for _ in range(F):
        links = data.draw(st.lists(st.integers(0, L - 1), min_size=1, max_size=3,
                                   unique=True))
        rows.append(links + [L] * (3 - len(links)))
    P = np.array(rows)
    r = maxmin_rates(P, cap)
    load = np.bincount(P.ravel(), weights=np.repeat(r, 3), minlength=L + 1)[:L]
    assert np.all(load <= cap[:L] * (1 + 1e-9))
    for f in range(F):
        links = [lk for lk in P[f] if lk < L]
        # bottleneck: a saturated link on which f's rate is the largest
        ok = False
        for lk in links:
            on = [g for g in range(F) if lk in P[g]]
            if load[lk] >= cap[lk] * (1 - 1e-9) and r[f] >= max(r[on]) * (1 - 1e-9):
                ok = True
        assert ok
