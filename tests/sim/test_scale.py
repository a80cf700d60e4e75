"""Rank symmetry + flow aggregation at scale: the reduced replay (one representative
rank per class, one representative member group's flows per communication) against
unreduced ones on a 1024-GPU rail-optimised fat tree (NVLink switch of 8 x one two-level
fat tree per rail), healthy and with faults that break the symmetry in one place.

Speed is measured by ``make bench`` (``sim_16k_step_s``), not here.
"""

from __future__ import annotations

import numpy as np
import pytest

from dse.sim import DimSpec, LinkDown, SlowLink, Straggler, make_topology, simulate

from . import make_1f1b_trace

TP, DP, PP = 8, 8, 16            # 1024 GPUs


def rail_fat_tree(num_gpus: int):
    return make_topology([DimSpec("switch", 8, 360e9, 1.5e-6),
                          DimSpec("fat_tree", num_gpus // 8, 45e9, 5e-6, leaf_size=32)],
                         name="rail-fat-tree")


@pytest.fixture(scope="module")
def case():
    ts, grid = make_1f1b_trace(TP, DP, PP, 4, 1, fwd_nodes=6, bwd_nodes=8,
                               comp_s=2e-4)
    return ts, grid, rail_fat_tree(grid.size)


def _summary(res, topo) -> dict:
    """Per-dimension link-utilisation summary: mean, max, total bytes."""
    out = {}
    for d in range(len(topo.dims)):
        m = topo.link_dim == d
        out[d] = (res.link_util[m].mean(), res.link_util[m].max(), res.link_bytes[m].sum())
    return out


def _close(a, b, rel=0.05):
    assert a.blocked is None and b.blocked is None
    assert a.step_time_s == pytest.approx(b.step_time_s, rel=rel)


def test_reduced_matches_unreduced_at_1024_gpus(case):
    ts, grid, topo = case
    red = simulate(ts, topo, grid=grid, record_timeline=False)
    full = simulate(ts, topo, grid=grid, record_timeline=False, aggregate=False)
    exact = simulate(ts, topo, grid=grid, record_timeline=False, coalesce=False)
    assert red.num_classes == PP and exact.num_classes == grid.size
    assert int(red.meta["aggregated_plans"]) == int(red.meta["plans"]) > 0
    assert int(full.meta["aggregated_plans"]) == 0
    assert red.num_events < full.num_events
    for other in (full, exact):
        _close(red, other)
        s_red, s_oth = _summary(red, topo), _summary(other, topo)
        for d in s_red:
            assert s_red[d] == pytest.approx(s_oth[d], rel=0.05), d
        busy = red.link_util > 0
        assert np.array_equal(busy, other.link_util > 0)
        assert red.link_util[busy] == pytest.approx(other.link_util[busy], rel=0.05)


def test_straggler_splits_only_its_own_class(case):
    ts, grid, topo = case
    g = 3 * TP * DP + 2 * TP + 5          # stage 3, dp 2, tp 5
    faults = [Straggler(g, 1.5)]
    red = simulate(ts, topo, faults, grid=grid, record_timeline=False)
    exact = simulate(ts, topo, faults, grid=grid, record_timeline=False, coalesce=False)
    _close(red, exact)
    cls = red.class_of_rank
    assert np.count_nonzero(cls == cls[g]) == 1            # the straggler alone
    # every stage keeps one class holding most of its ranks (the unaffected ones)
    per_stage = TP * DP
    for s in range(PP):
        _, cnt = np.unique(cls[s * per_stage:(s + 1) * per_stage], return_counts=True)
        assert cnt.max() >= per_stage - TP - DP
    assert red.num_classes < 6 * PP
    healthy = simulate(ts, topo, grid=grid, record_timeline=False)
    assert red.step_time_s > healthy.step_time_s


@pytest.mark.parametrize("fault", [SlowLink("ft2.leaf1->spine0", 8.0),
                                   LinkDown("ft2.leaf1->spine0")])
def test_faulty_spine_link_splits_the_ranks_under_its_leaf(case, fault):
    ts, grid, topo = case
    # rail 2's fat tree: leaf 1 (nodes 32..63 = stages 4..7 on rail 2) -> spine 0
    faults = [fault]
    red = simulate(ts, topo, faults, grid=grid, record_timeline=False)
    full = simulate(ts, topo, faults, grid=grid, record_timeline=False, aggregate=False)
    exact = simulate(ts, topo, faults, grid=grid, record_timeline=False, coalesce=False)
    _close(red, exact)
    _close(full, exact)
    under = [n * 8 + 2 for n in range(32, 64)]
    cls = red.class_of_rank
    assert not set(cls[under]) & set(np.delete(cls, under + [n * 8 + 2 for n in range(128)]))
    assert red.link_bytes[topo.link_id("ft2.leaf1->spine0")] == pytest.approx(
        exact.link_bytes[topo.link_id("ft2.leaf1->spine0")])
    assert int(red.meta["aggregated_plans"]) > 0


def test_groups_sharing_links_keep_every_flow():
    """On a 2:1 oversubscribed fat tree the pipeline sends of one class share spine
    links: those plans are not aggregated, and the replay equals the unaggregated one."""
    ts, grid = make_1f1b_trace(8, 16, 4, 2, 1, fwd_nodes=6, bwd_nodes=8)   # a stage = a leaf
    topo = make_topology([DimSpec("switch", 8, 360e9, 1.5e-6),
                          DimSpec("fat_tree", grid.size // 8, 45e9, 5e-6, leaf_size=16,
                                  oversubscription=2.0)])
    red = simulate(ts, topo, grid=grid, record_timeline=False)
    full = simulate(ts, topo, grid=grid, record_timeline=False, aggregate=False)
    assert 0 < int(red.meta["aggregated_plans"]) < int(red.meta["plans"])
    assert red.step_time_s == pytest.approx(full.step_time_s, rel=1e-9)
    assert red.link_bytes == pytest.approx(full.link_bytes)
