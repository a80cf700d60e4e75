"""Simulator speed for `make bench`: one Llama3-70B training step on 1024 A100-80GB.

The layout is the one the llama70b study picks at 1024 GPUs (the vectorized sweep's
fastest feasible layout for Llama3-70B, A100-SXM-80GB, global batch 1024, sequence 2048,
bf16), unless ``layout`` is given.  Its trace (:func:`dse.trace.generate.generate_trace_set`)
is replayed for one step on the hardware's rail topology (NVLink switch domains x rail
scale-out, :func:`dse.sim.topology.topology_for_hardware`) with no faults.

:func:`run_sim_bench` returns and prints ``sim_step_s`` (simulated step time),
``wall_s`` (simulator wall time, trace generation excluded), ``events`` (processed
events, :class:`dse.sim.SimResult`), ``events_per_s`` and ``vectorized_step_s`` (the
cost model's step time of the same layout).
"""

from __future__ import annotations

import time

from dse.spec.layout import RECOMPUTE, RECOMPUTE_NAMES, Layout, Workload

MODEL, HARDWARE, GPUS, GLOBAL_BATCH, SEQ_LEN = "llama3-70b", "a100-sxm-80gb", 1024, 1024, 2048
KEYS = ("sim_step_s", "wall_s", "events", "events_per_s", "vectorized_step_s")


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


if __name__ == "__main__":
    run_sim_bench()
