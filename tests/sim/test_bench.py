"""Replay speed on a Megatron-like 1F1B trace.

The test runs a reduced size; the full Llama3-70B-shaped benchmark (1024 GPUs,
TP8 x PP8 x DP16, 16 micro-batches, 10 layers per stage, ~10^4 nodes per role) runs with

    .venv/bin/python -m tests.sim.test_bench            # from the repository root
"""

from __future__ import annotations

import sys
import time

import pytest

from dse.sim import DimSpec, LinkDown, SlowLink, Straggler, make_topology, simulate

from . import make_1f1b_trace


def dgx_rail(num_gpus: int):
    return make_topology([DimSpec("switch", 8, 450e9, 1.5e-6),
                          DimSpec("rail", num_gpus // 8, 50e9, 5e-6)], name="dgx-rail")


def dgx_fat_tree(num_gpus: int):
    return make_topology([DimSpec("switch", 8, 450e9, 1.5e-6),
                          DimSpec("fat_tree", num_gpus // 8, 50e9, 5e-6, leaf_size=16,
                                  oversubscription=2.0)], name="dgx-fat-tree")


def test_replay_speed_reduced_size():
    ts, grid = make_1f1b_trace(8, 4, 4, 8, 2)
    t0 = time.perf_counter()
    res = simulate(ts, dgx_rail(grid.size), [Straggler(9, 1.2)], grid=grid)
    wall = time.perf_counter() - t0
    assert res.blocked is None and res.num_classes == 16
    assert res.events_per_s > 0 and res.rank_node_events == grid.size * sum(
        len(ts.roles[r].nodes) for r in ts.rank_role) // grid.size
    assert wall < 30.0


def test_sim_bench_llama70b_1024_gpus(capsys):
    from dse.bench_sim import KEYS, run_sim_bench
    out = run_sim_bench()
    assert set(out) == set(KEYS)
    assert out["sim_step_s"] == pytest.approx(out["vectorized_step_s"], rel=0.05)
    assert out["events"] > 10**5 and out["events_per_s"] > 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [ln.split("=")[0] for ln in lines[-len(KEYS):]] == list(KEYS)


def main(argv: list[str]) -> None:
    tp, dp, pp, mb, layers = 8, 16, 8, 16, 10
    t0 = time.perf_counter()
    ts, grid = make_1f1b_trace(tp, dp, pp, mb, layers)
    n_nodes = len(ts.roles["stage0"].nodes)
    print(f"trace: TP{tp} x DP{dp} x PP{pp}, {mb} micro-batches, {layers} layers/stage, "
          f"{n_nodes} nodes/role, {grid.size} ranks (built in "
          f"{time.perf_counter() - t0:.1f} s)")
    rail, ft = dgx_rail(grid.size), dgx_fat_tree(grid.size)
    cases = [("rail", rail, []),
             ("rail + straggler", rail, [Straggler(37, 1.2)]),
             ("rail + NVLink down", rail, [LinkDown("n3.gpu5->nvsw")]),
             ("fat tree 2:1", ft, []),
             ("fat tree + slow spine link", ft, [SlowLink("ft5.leaf0->spine1", 4.0)])]
    for name, topo, faults in cases:
        t0 = time.perf_counter()
        r = simulate(ts, topo, faults, grid=grid)
        wall = time.perf_counter() - t0
        print(f"{name:28s} step {r.step_time_s:8.4f} s  wall {wall:6.2f} s  classes "
              f"{r.num_classes:3d}  events {r.num_events:>9d}  events/s "
              f"{r.events_per_s:>10.0f}  rank-node events/s "
              f"{r.rank_node_events / r.wall_s:>10.0f}  rate solves {r.num_rate_updates}")


if __name__ == "__main__":
    main(sys.argv[1:])


def test_sim_16k_bench_prints_its_figures_at_a_reduced_size(capsys):
    """The driver of ``sim_16k_step_s`` (dse/bench_sim.py) at 256 GPUs, baseline 128."""
    from dse.bench_sim import KEYS_16K, run_sim_16k_bench
    out = run_sim_16k_bench(gpus=256, base_gpus=128)
    assert set(out) == set(KEYS_16K)
    assert out["sim_1024_rel_err"] <= 0.05 and out["sim_1024_link_util_rel_err"] <= 0.05
    assert out["sim_16k_sim_step_s"] == pytest.approx(out["sim_16k_vectorized_step_s"],
                                                      rel=0.1)
    lines = capsys.readouterr().out.strip().splitlines()
    assert [ln.split("=")[0] for ln in lines[-len(KEYS_16K):]] == list(KEYS_16K)
    assert "baseline: sim_1024_unreduced_s=" in lines[-1]
