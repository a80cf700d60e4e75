"""`make bench`: throughput of the vectorized screen.

Sweeps Llama3-70B training (seq 4096, global batch 1024, 1024 GPUs) over every valid
layout x a grid of A100-80GB hardware variants (HBM bandwidth x L2 size x NVLink
bandwidth x throttle) until at least ``points`` (layout x hardware) points exist, then
reports: the JIT compile time (first call, separately), the warm throughput of the full
screen (memory pass on every point + time model on the feasible ones), and a plain
Python loop calling the same scalar cost function (``jax.jit(train_step)`` per point) on
a sample, with the ratio; then the event simulator's speed on one 1024-GPU step
(:mod:`dse.bench_sim`: simulated step, wall time, events/s) and the 16k-GPU
Llama-3.1-405B replay with its 1024-GPU baseline (``sim_16k_step_s=``).  The last line is
``sweep_configs_per_s=<number>``.
"""

from __future__ import annotations

import itertools
import time

import jax
import numpy as np

from dse.spec.hardware import get_hardware
from dse.spec.layout import Layout, Workload
from dse.spec.model import get_model
from dse.sweep.grid import enumerate_layouts
from dse.sweep.run import sweep_points
from dse.train.step import train_step


def hardware_grid(n: int):
    base = get_hardware("a100-sxm-80gb")
    hbm = np.geomspace(1.0, 4.0, 8)
    l2 = np.geomspace(1.0, 4.0, 6)
    nvl = (1.0, 2.0, 3.0)
    thr = (0.0, 0.1, 0.2, 0.3)
    out = []
    for h, l, v, t in itertools.product(hbm, l2, nvl, thr):
        out.append(base.replace(hbm_bw_bytes_per_s=base.hbm_bw_bytes_per_s * h,
                                l2_bytes=base.l2_bytes * l,
                                nvlink_bw_bytes_per_s=base.nvlink_bw_bytes_per_s * v,
                                throttle=t, name=f"a100-var{len(out)}"))
        if len(out) >= n:
            break
    return out


def run_bench(points: int = 1_048_576, loop_sample: int = 200, simulate: bool = True) -> float:
    model = get_model("llama3-70b")
    wl = Workload(global_batch=1024, seq_len=4096, precision=1)
    cols = enumerate_layouts(model, 1024, 1024, 4096)
    n_l = len(cols["tp"])
    n_h = -(-points // n_l)
    hws = hardware_grid(n_h)
    n = n_l * len(hws)
    print(f"bench: llama3-70b, 1024 GPUs, seq 4096, gbs 1024: {n_l} layouts x "
          f"{len(hws)} hardware variants = {n} points; backend {jax.default_backend()}")

    t0 = time.perf_counter()
    warm = sweep_points(model, wl, hws[:1], cols)          # compiles both passes
    compile_s = time.perf_counter() - t0 - 0.0
    t0 = time.perf_counter()
    sr = sweep_points(model, wl, hws, cols)
    sweep_s = time.perf_counter() - t0
    rate = n / sweep_s
    cache = jax.config.jax_compilation_cache_dir
    print(f"jit compile (first call, {n_l} points): {compile_s:.2f} s"
          + (f" (read from the on-disk cache {cache}; DSE_JAX_CACHE= for a cold compile)" if cache else ""))
    print(f"warm sweep: {n} points in {sweep_s:.2f} s ({sr.feasible.mean():.1%} fit in memory; "
          f"memory pass {sr.timings_s['memory_s']:.2f} s, time pass {sr.timings_s['time_s']:.2f} s)")

    scalar = jax.jit(train_step)
    rng = np.random.default_rng(0)
    idx = rng.choice(np.nonzero(warm.feasible)[0], size=min(loop_sample, int(warm.feasible.sum())), replace=False)
    hw0 = hws[0]
    lay0 = Layout(**{f: int(cols[f][idx[0]]) for f in cols})
    scalar(model, wl, lay0, hw0).step_time_s.block_until_ready()
    t0 = time.perf_counter()
    for i in idx:
        lay = Layout(**{f: int(cols[f][i]) for f in cols})
        v = scalar(model, wl, lay, hw0).step_time_s
        float(v)
    loop_rate = len(idx) / (time.perf_counter() - t0)
    # the vectorized result matches the scalar loop on the sample
    ref = np.array([float(scalar(model, wl, Layout(**{f: int(cols[f][i]) for f in cols}), hw0).step_time_s)
                    for i in idx[:20]])
    vec = warm.result["step_time_s"][idx[:20]]
    print(f"python loop over jit(train_step): {loop_rate:,.0f} configs/s on {len(idx)} points "
          f"(max rel. diff vs vectorized {np.max(np.abs(vec / ref - 1)):.1e})")
    print(f"speedup of the vectorized sweep over the loop: {rate / loop_rate:,.0f}x")
    if simulate:
        # the detailed tier: one simulated step at 1024 GPUs, for the sweep's pick and for
        # a pipelined layout with many more events (TP8 PP8 DP16, 16 micro-batches)
        from dse.bench_sim import run_sim_16k_bench, run_sim_bench
        run_sim_bench()
        run_sim_bench(Layout(tp=8, pp=8, dp=16, mbs=4, zero=1, sp=1))
        run_sim_16k_bench()
    print(f"sweep_configs_per_s={rate:.0f}")
    return rate
