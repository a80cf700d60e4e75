"""Simulator speed for `make bench` (the driver lives here, outside :mod:`dse.sim`).

:func:`run_sim_bench`: one Llama3-70B training step on 1024 A100-80GB.

The layout is the one the llama70b study picks at 1024 GPUs (the vectorized sweep's
fastest feasible layout for Llama3-70B, A100-SXM-80GB, global batch 1024, sequence 2048,
bf16), unless ``layout`` is given.  Its trace (:func:`dse.trace.generate.generate_trace_set`)
is replayed for one step on the hardware's rail topology (NVLink switch domains x rail
scale-out, :func:`dse.sim.topology.topology_for_hardware`) with no faults.

:func:`run_sim_bench` returns and prints ``sim_step_s`` (simulated step time),
``wall_s`` (simulator wall time, trace generation excluded), ``events`` (processed
events, :class:`dse.sim.SimResult`), ``events_per_s`` and ``vectorized_step_s`` (the
cost model's step time of the same layout).

:func:`run_sim_16k_bench`: one step of Llama-3.1-405B on 16,384 H100-SXM-80GB (TP8 PP16
DP128, micro-batch 1, interleaved vpp 4, block recompute -- 4 of 8 layers per rank, 66.6
GiB per GPU by ``dse estimate`` -- ZeRO-1, SP; global batch 2048 x 8192 tokens, 16
micro-batches) on a rail-optimised fat tree (NVLink switch of 8 x one non-blocking
two-level fat tree per rail, :func:`dse.sim.topology.topology_for_hardware` with
``scale_out="fat_tree"``), replayed with rank symmetry and flow aggregation.  Its
same-run baseline is the same layout at 1024 GPUs (DP8, global batch 128: the same
micro-batches per stage) replayed unreduced (every rank on its own, every flow:
``coalesce=False``) and reduced; ``sim_1024_rel_err`` is their step-time difference,
``sim_1024_link_util_rel_err`` the largest relative difference of a link's utilisation.
Prints ``sim_16k_step_s=<simulator wall seconds>`` with that baseline on the same line.
"""

from __future__ import annotations

import time

import numpy as np

from dse.spec.layout import RECOMPUTE, RECOMPUTE_NAMES, Layout, Workload

MODEL, HARDWARE, GPUS, GLOBAL_BATCH, SEQ_LEN = "llama3-70b", "a100-sxm-80gb", 1024, 1024, 2048
KEYS = ("sim_step_s", "wall_s", "events", "events_per_s", "vectorized_step_s")
KEYS_16K = ("sim_1024_unreduced_s", "sim_1024_reduced_s", "sim_1024_rel_err",
            "sim_1024_link_util_rel_err",
            "sim_16k_sim_step_s", "sim_16k_vectorized_step_s", "sim_16k_step_s")
M405, H100 = "llama3-405b", "h100-sxm-80gb"


def layout_405b(gpus: int) -> Layout:
    """TP8 PP16 DP(gpus/128), vpp 4, block recompute, ZeRO-1, SP (module docstring)."""
    return Layout(tp=8, pp=16, dp=gpus // 128, mbs=1, vpp=4, recompute=RECOMPUTE["block"],
                  zero=1, sp=1)


def best_layout(model, hw) -> Layout:
    """The fastest feasible layout of the vectorized sweep (the llama70b study's pick)."""
    from dse.sweep.run import sweep
    df = sweep(model, [hw], GPUS, GLOBAL_BATCH, SEQ_LEN)
    r = df[df["feasible"]].iloc[0]
    return Layout(tp=int(r.tp), pp=int(r.pp), dp=int(r.dp), cp=int(r.cp), ep=int(r.ep),
                  mbs=int(r.mbs), vpp=int(r.vpp), recompute=RECOMPUTE[r.recompute],
                  zero=int(r.zero), sp=int(bool(r.sp)))


def run_sim_bench(layout: Layout | None = None) -> dict:
    """Generate and simulate one step (module docstring); print and return the numbers."""
    import jax

    from dse.sim import simulate
    from dse.spec.hardware import get_hardware
    from dse.spec.model import get_model
    from dse.sim.topology import topology_for_hardware
    from dse.trace.generate import generate_trace_set, rank_grid
    from dse.train.step import train_step

    model, hw = get_model(MODEL), get_hardware(HARDWARE)
    wl = Workload(global_batch=GLOBAL_BATCH, seq_len=SEQ_LEN)
    lay = layout if layout is not None else best_layout(model, hw)
    vec = float(jax.jit(train_step)(model, wl, lay, hw).step_time_s)
    t0 = time.perf_counter()
    ts = generate_trace_set(model, wl, lay, hw)
    gen_s = time.perf_counter() - t0
    topo = topology_for_hardware(hw, GPUS)
    res = simulate(ts, topo, grid=rank_grid(lay), record_timeline=False)
    nodes = sum(len(t.nodes) for t in ts.roles.values())
    print(f"sim bench: {MODEL} on {GPUS} x {HARDWARE} ({topo.name}), global batch "
          f"{GLOBAL_BATCH} x {SEQ_LEN}: TP{lay.tp} PP{lay.pp} DP{lay.dp} CP{lay.cp} "
          f"mbs{lay.mbs} vpp{lay.vpp} {RECOMPUTE_NAMES[int(lay.recompute)]} Z{lay.zero}"
          f"{' SP' if lay.sp else ''}; {nodes} trace nodes ({len(ts.roles)} roles, built in "
          f"{gen_s:.1f} s), {res.num_classes} rank classes"
          + (f"; BLOCKED: {res.blocked}" if res.blocked else ""))
    out = {"sim_step_s": float(res.step_time_s), "wall_s": float(res.wall_s),
           "events": int(res.num_events), "events_per_s": float(res.events_per_s),
           "vectorized_step_s": vec}
    for k in KEYS:
        v = out[k]
        print(f"{k}={v}" if isinstance(v, int) else f"{k}={v:.4g}")
    return out


def run_sim_16k_bench(gpus: int = 16384, base_gpus: int = 1024) -> dict:
    """The 16k-GPU replay and its 1024-GPU baseline (module docstring); prints and
    returns :data:`KEYS_16K`."""
    import jax

    from dse.sim import simulate
    from dse.sim.topology import topology_for_hardware
    from dse.spec.hardware import get_hardware
    from dse.spec.model import get_model
    from dse.trace.generate import generate_trace_set, rank_grid
    from dse.train.step import train_step

    model, hw = get_model(M405), get_hardware(H100)
    out: dict = {}
    runs = {}
    for n in (base_gpus, gpus):
        lay = layout_405b(n)
        wl = Workload(global_batch=16 * lay.dp, seq_len=8192)
        t0 = time.perf_counter()
        ts = generate_trace_set(model, wl, lay, hw)
        gen_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        topo = topology_for_hardware(hw, n, "fat_tree")
        topo_s = time.perf_counter() - t0
        modes = (False, True) if n == base_gpus else (True,)
        for agg in modes:
            res = simulate(ts, topo, grid=rank_grid(lay), record_timeline=False,
                           coalesce=agg, aggregate=agg)
            runs[(n, agg)] = res
            print(f"sim bench: {M405} on {n} x {H100} ({topo.name}, rail-optimised fat "
                  f"tree): TP8 PP16 DP{lay.dp} mbs1 vpp4 block ZeRO-1 SP, gbs "
                  f"{16 * lay.dp} x 8192; {'reduced' if agg else 'unreduced'}: "
                  f"{res.num_classes} classes, {res.meta['aggregated_plans']}/"
                  f"{res.meta['plans']} plans aggregated, {res.num_events} events, "
                  f"step {res.step_time_s:.4f} s, wall {res.wall_s:.1f} s (trace built in "
                  f"{gen_s:.1f} s, topology in {topo_s:.1f} s)"
                  + (f"; BLOCKED: {res.blocked}" if res.blocked else ""))
        if n == gpus:
            out["sim_16k_vectorized_step_s"] = float(
                jax.jit(train_step)(model, wl, lay, hw).step_time_s)
    un, red, big = runs[(base_gpus, False)], runs[(base_gpus, True)], runs[(gpus, True)]
    out["sim_1024_unreduced_s"] = float(un.wall_s)
    out["sim_1024_reduced_s"] = float(red.wall_s)
    out["sim_1024_rel_err"] = float(abs(red.step_time_s / un.step_time_s - 1.0))
    busy = un.link_util > 0
    out["sim_1024_link_util_rel_err"] = float(np.max(np.abs(
        red.link_util[busy] / un.link_util[busy] - 1.0))) if busy.any() else 0.0
    out["sim_16k_sim_step_s"] = float(big.step_time_s)
    out["sim_16k_step_s"] = float(big.wall_s)
    for k in KEYS_16K[:-1]:
        print(f"{k}={out[k]:.4g}")
    print(f"sim_16k_step_s={out['sim_16k_step_s']:.4g} (baseline: sim_1024_unreduced_s="
          f"{out['sim_1024_unreduced_s']:.4g}, the same layout at 1024 GPUs replayed "
          f"unreduced in this run)")
    return out


if __name__ == "__main__":
    run_sim_bench()
    run_sim_16k_bench()
