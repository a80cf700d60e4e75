"""`make bench`: throughput of the vectorized screen.

Sweeps Llama3-70B training (seq 4096, global batch 1024, 1024 GPUs) over every valid
layout x a grid of A100-80GB hardware variants (HBM bandwidth x L2 size x NVLink
bandwidth x throttle) until at least ``points`` (layout x hardware) points exist, then
reports, one figure a line with its same-run baseline: the JIT compile time (first
calls less one warm run); the warm throughput of the streamed sweep
(:mod:`dse.sweep.stream`) on this process's devices (``sweep_configs_per_s``) and -- on
a CPU with several cores -- in a fresh process that sees one CPU host device per core
(blocks sharded over them, :mod:`dse.sweep.devices`), against the in-memory
sweep, the flat ``jit(vmap(train_step))`` of host-gathered points the blocks replaced
and a plain Python loop over ``jax.jit(train_step)``; XLA's FLOPs per point (the
streamed block kernel, the blocks with every field mapped, flat), the GFLOP/s sustained
and its share of the CPU's nominal peak; the inference sweep's points/s and the serving
search's (``serving_search_points_per_s=``, :func:`run_serving_search_bench`); a 10^8-point streaming
sweep's peak resident memory (``stream_1e8_peak_rss_gib=``, :mod:`dse.sweep.stream`)
against the in-memory sweep's; then the event simulator's speed on one 1024-GPU step
(:mod:`dse.bench_sim`: simulated step, wall time, events/s) and the 16k-GPU
Llama-3.1-405B replay with its 1024-GPU baseline (``sim_16k_step_s=``).  The last line is
``sweep_configs_per_s=<number>``.
"""

from __future__ import annotations

import itertools
import os
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


def _flat_rate(model, wl, hws, cols, max_points: int = 1 << 18) -> float:
    """Same-run baseline: the flat ``jit(vmap(train_step))`` over (hardware, layout)
    points gathered on the host in chunks of 32768 (the sweep before blocks), on up to
    ``max_points`` points."""
    from dse.sweep.run import hardware_columns
    from dse.spec.hardware import Hardware
    hw_cols = hardware_columns(hws)
    n_l = len(cols["tp"])
    n = min(n_l * len(hws), max_points)
    p = np.arange(n)
    h, l = p // n_l, p % n_l
    ch = 1 << 15
    fn = jax.jit(jax.vmap(train_step, in_axes=(None, None, 0, 0)))

    def args(s):
        i = np.arange(s, s + ch) % n
        return (model, wl, Layout(**{f: v[l[i]] for f, v in cols.items()}),
                Hardware(**{f: v[h[i]] for f, v in hw_cols.items()}))
    jax.block_until_ready(fn(*args(0)).step_time_s)
    t0 = time.perf_counter()
    outs = [fn(*args(s)).step_time_s for s in range(0, n, ch)]
    jax.block_until_ready(outs)
    return n / (time.perf_counter() - t0)


def flops_per_point(model, wl, hws, cols) -> tuple[float, float, float]:
    """XLA's cost analysis, FLOPs per point: (the streamed sweep's block kernel -- step,
    memory mask and reductions, fields constant over the sweep unmapped, as
    :func:`dse.sweep.stream.stream_sweep` runs it; the nested step with every field
    mapped, the blocks before that; the flat per-point ``vmap(train_step)``)."""
    from dse.sweep.blocks import block_inputs, block_shape, constant_fields, nested_step
    from dse.sweep.run import hardware_columns
    from dse.sweep.stream import _reduce_block
    hw_cols = hardware_columns(hws)
    n_l = len(cols["tp"])
    lb, hb = block_shape(n_l, len(hws))
    l_idx, h_idx = np.arange(min(lb, n_l)), np.arange(min(hb, len(hws)))

    def cost(f, *a):
        c = jax.jit(f).lower(*a).compile().cost_analysis()
        c = c[0] if isinstance(c, list) else c
        return float(c.get("flops", float("nan")))
    lay, hw, valid, li, hi = block_inputs(cols, hw_cols, l_idx, h_idx, lb, hb,
                                          constant_fields(cols, "tp"), constant_fields(hw_cols, "hbm_bytes"))
    streamed = cost(lambda m, w, la, h, l_, h_, v: _reduce_block(m, w, la, h, l_, h_, v, n_l, 10, False),
                    model, wl, lay, hw, li.astype(np.int32), hi.astype(np.int32), valid) / (lb * hb)
    lay, hw, _, _, _ = block_inputs(cols, hw_cols, l_idx, h_idx, lb, hb)
    mapped = cost(nested_step, model, wl, lay, hw) / (lb * hb)
    flat_lay = Layout(**{f: v[:lb] for f, v in cols.items()})
    from dse.spec.hardware import Hardware
    flat_hw = Hardware(**{f: np.repeat(v[:1], lb) for f, v in hw_cols.items()})
    flat = cost(jax.vmap(train_step, in_axes=(None, None, 0, 0)), model, wl, flat_lay, flat_hw) / lb
    return streamed, mapped, flat


def cpu_peak_flops_per_s() -> tuple[float, str]:
    """Nominal fp32 peak of this machine's CPUs: ``cores x clock x 2 FMA ports x 2 FLOPs
    x SIMD lanes`` (16 with AVX-512, 8 with AVX2, else 4; Intel 64 and IA-32
    Architectures Optimization Reference Manual, two FMA units per core on server
    cores), the clock read from ``/proc/cpuinfo`` (the current, not the turbo clock):
    an upper bound that no element-wise workload reaches."""
    mhz, flags = 0.0, ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("cpu MHz") and not mhz:
                    mhz = float(line.split(":")[1])
                elif line.startswith("flags") and not flags:
                    flags = line
    except OSError:
        return float("nan"), "unknown CPU"
    lanes = 16 if " avx512f" in flags else 8 if " avx2" in flags else 4
    cores = os.cpu_count() or 1
    return cores * mhz * 1e6 * 2 * 2 * lanes, f"{cores} cores x {mhz / 1e3:.2f} GHz x 2 FMA x 2 x {lanes} lanes"


_SWEEP_CODE = """
import json, sys, time
from dse.jaxconfig import configure; configure()
import jax
from dse.bench import bench_hardware
from dse.spec.layout import Workload
from dse.spec.model import get_model
from dse.sweep.grid import enumerate_layouts
from dse.sweep.stream import stream_sweep
model = get_model("llama3-70b"); wl = Workload(global_batch=1024, seq_len=4096, precision=1)
cols = enumerate_layouts(model, 1024, 1024, 4096)
hws = bench_hardware(int(sys.argv[1]), len(cols["tp"]))
stream_sweep(model, wl, hws, cols, k=10)
t = time.perf_counter()
st = stream_sweep(model, wl, hws, cols, k=10)
s = time.perf_counter() - t
print(json.dumps(dict(points=st.n_points, s=s, devices=jax.device_count(), feasible=st.n_feasible,
                      top=[int(p) for p in st.top["point"]])))
"""


def run_devices_bench(points: int, n_devices: int) -> dict:
    """The streamed sweep of :func:`run_bench` in a fresh process that sees ``n_devices``
    CPU host devices (``XLA_FLAGS=--xla_force_host_platform_device_count``; blocks are
    sharded over them, :mod:`dse.sweep.devices`): its warm points/s and its top-k."""
    import json
    import os
    import subprocess
    import sys
    from dse.jaxconfig import xla_flags_with
    env = dict(os.environ, XLA_FLAGS=xla_flags_with(f"--xla_force_host_platform_device_count={n_devices}"))
    out = subprocess.run([sys.executable, "-c", _SWEEP_CODE, str(points)], capture_output=True, text=True, env=env)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_hardware(points: int, n_layouts: int):
    """The hardware variants of the benchmark sweep: enough for ``points`` points."""
    n_h = -(-points // n_layouts)
    return hardware_grid(n_h) if n_h <= 576 else wide_hardware_grid(n_h)


def _peak_rss_gib() -> float:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def run_stream_bench(points: int = 100_000_000) -> float:
    """A ``points``-point streaming sweep (top-k, best per hardware, Pareto fronts,
    histograms on the device) in a fresh process; prints its wall time and the process's
    peak resident memory (``stream_1e8_peak_rss_gib=``), with the in-memory sweep of
    1/100 of the points as the same-run baseline (its peak RSS scaled to the full size)."""
    import json
    import subprocess
    import sys
    code = """
import json, time, resource
from dse.jaxconfig import configure; configure()
from dse.bench import hardware_grid
from dse.spec.layout import Workload
from dse.spec.model import get_model
from dse.sweep.grid import enumerate_layouts
from dse.sweep.stream import stream_sweep
from dse.sweep.run import sweep_points
import sys
model = get_model("llama3-70b"); wl = Workload(global_batch=1024, seq_len=4096)
cols = enumerate_layouts(model, 1024, 1024, 4096)
n_l = len(cols["tp"]); mode = sys.argv[1]; pts = int(sys.argv[2])
n_h = -(-pts // n_l)
from dse.bench import wide_hardware_grid
hws = wide_hardware_grid(n_h)
t = time.perf_counter()
if mode == "stream":
    r = stream_sweep(model, wl, hws, cols, k=10)
    extra = dict(front=len(r.pareto), best=len(r.best), feasible=r.n_feasible)
else:
    r = sweep_points(model, wl, hws, cols)
    extra = {}
print(json.dumps(dict(points=n_l * len(hws), s=time.perf_counter() - t,
                      rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, **extra)))
"""
    def run(mode, pts):
        out = subprocess.run([sys.executable, "-c", code, mode, str(pts)], capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(out.stderr[-2000:])
        return json.loads(out.stdout.strip().splitlines()[-1])
    base = run("memory", points // 100)
    st = run("stream", points)
    print(f"streaming sweep: {st['points']:,} points in {st['s']:.1f} s ({st['points'] / st['s']:,.0f} points/s), "
          f"{st['feasible']:,} feasible, Pareto {st['front']} points over {st['best']} hardware; "
          f"peak RSS {st['rss']:.2f} GiB")
    print(f"baseline: in-memory sweep of {base['points']:,} points: peak RSS {base['rss']:.2f} GiB "
          f"(x{st['points'] / base['points']:.0f} points would need ~{base['rss'] * st['points'] / base['points']:.0f} GiB)")
    print(f"stream_1e8_peak_rss_gib={st['rss']:.2f}")
    return st["rss"]


def wide_hardware_grid(n: int):
    """``n`` A100 variants over HBM bandwidth x L2 x NVLink x throttle x NIC (for sweeps
    beyond :func:`hardware_grid`'s 576 variants)."""
    base = get_hardware("a100-sxm-80gb")
    out = []
    for i, (h, l, v, t, c) in enumerate(itertools.product(np.geomspace(1.0, 4.0, 20), np.geomspace(1.0, 4.0, 10),
                                                          (1.0, 1.5, 2.0, 3.0), (0.0, 0.1, 0.2, 0.3),
                                                          (1.0, 2.0, 4.0, 8.0))):
        if i >= n:
            break
        out.append(base.replace(hbm_bw_bytes_per_s=base.hbm_bw_bytes_per_s * h, l2_bytes=base.l2_bytes * l,
                                nvlink_bw_bytes_per_s=base.nvlink_bw_bytes_per_s * v, throttle=t,
                                nic_bw_bytes_per_s=base.nic_bw_bytes_per_s * c, name=f"a100-w{i}"))
    return out


SERVING_SEARCH_GPUS = ("h100-sxm-80gb", "h200-sxm-141gb", "b200", "gb200")
SERVING_SEARCH_ENGINES = ("trtllm", "vllm", "sglang")


def run_infer_bench() -> float:
    """Inference sweep throughput: ``dse.infer.sweep.sweep_inference`` points/s over the
    catalog's Hopper and Blackwell GPUs (warm), vs the first (compiling) call; then the
    serving search (:func:`run_serving_search_bench`)."""
    from dse.infer.sweep import sweep_inference
    model = get_model("llama3-70b")
    hws = [get_hardware(n) for n in ("h100-sxm-80gb", "h200-sxm-141gb", "b200", "gb200")]
    t0 = time.perf_counter()
    df = sweep_inference(model, hws, 8, 1024, 2048, 512)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    reps = 5
    for _ in range(reps):
        df = sweep_inference(model, hws, 8, 1024, 2048, 512)
    warm = (time.perf_counter() - t0) / reps
    rate = len(df) / warm
    print(f"inference sweep: {len(df)} points (4 GPUs x (tp, pp) x batch), warm {warm * 1e3:.1f} ms "
          f"(first call {cold:.2f} s incl. compile)")
    print(f"infer_configs_per_s={rate:.0f} (baseline: first call {len(df) / cold:.0f}/s)")
    run_serving_search_bench()
    return rate


def run_serving_search_bench(concurrency: int = 2048, reps: int = 3) -> float:
    """The serving search (issue: >= 10^6 points/s): continuous batching of Llama-3-70B
    and DeepSeek-R1 (fp8, 1024 + 1024 tokens) on 8-GPU replicas of each GPU of
    :data:`SERVING_SEARCH_GPUS` under each engine of :data:`SERVING_SEARCH_ENGINES`, every
    layout (DeepSeek-R1: every valid ep and attention DP too) at every concurrency 1 ..
    ``concurrency``: one :func:`dse.infer.sweep.sweep_inference` call per model, its
    DataFrame included.  Prints the first call's time (compile included, or read from the
    on-disk cache) and the median of ``reps`` warm runs, points/s per wall second and per
    CPU-second of this process (the shared box's load average beside them: the wall rate
    moves with it, the CPU rate much less)."""
    from dse.infer.sweep import sweep_inference
    hws = [get_hardware(n) for n in SERVING_SEARCH_GPUS for _ in SERVING_SEARCH_ENGINES]
    engines = [e for _ in SERVING_SEARCH_GPUS for e in SERVING_SEARCH_ENGINES]
    batches = range(1, concurrency + 1)
    calls = [(get_model("llama3-70b"), {}), (get_model("deepseek-r1"), {"ep": "auto", "attn_dp": "auto"})]
    run = lambda m, kw: sweep_inference(m, hws, 8, concurrency, 1024, 1024, 2, batching="continuous",
                                        engine=engines, batches=batches, **kw)
    t0 = time.perf_counter()
    n = sum(len(run(m, kw)) for m, kw in calls)
    cold = time.perf_counter() - t0
    walls, cpus = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        n = sum(len(run(m, kw)) for m, kw in calls)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    warm, cpu = float(np.median(walls)), float(np.median(cpus))
    rate = n / warm
    cache = jax.config.jax_compilation_cache_dir
    print(f"serving search: {n:,} points (llama3-70b + deepseek-r1 x {len(SERVING_SEARCH_GPUS)} GPUs x "
          f"{len(SERVING_SEARCH_ENGINES)} engines x layouts x concurrency 1..{concurrency}), warm "
          f"{warm:.2f} s wall, {cpu:.2f} CPU-s (median of {reps}; {n / cpu:,.0f} points per CPU-second; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores), first call {cold:.1f} s "
          f"incl. compile" + (f" (or read from the on-disk cache {cache})" if cache else ""))
    print(f"serving_search_points_per_s={rate:.0f} (baseline: first call {n / cold:.0f}/s)")
    return rate


def run_bench(points: int = 16_777_216, loop_sample: int = 200, simulate: bool = True,
              stream: bool = True) -> float:
    """The whole benchmark (module docstring); returns the sweep's points/s."""
    model = get_model("llama3-70b")
    wl = Workload(global_batch=1024, seq_len=4096, precision=1)
    cols = enumerate_layouts(model, 1024, 1024, 4096)
    n_l = len(cols["tp"])
    hws = bench_hardware(points, n_l)
    n = n_l * len(hws)
    print(f"bench: llama3-70b, 1024 GPUs, seq 4096, gbs 1024: {n_l} layouts x "
          f"{len(hws)} hardware variants = {n} points; backend {jax.default_backend()}, "
          f"{jax.device_count()} device(s)")

    from dse.sweep.stream import stream_sweep
    mem_hws = hws[:max(1, (1 << 20) // n_l)]              # in-memory sweep: ~10^6 points
    t0 = time.perf_counter()
    warm = sweep_points(model, wl, hws[:1], cols)          # compiles the 1-hardware path
    sweep_points(model, wl, mem_hws, cols)                 # and the in-memory blocks
    first_mem_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    stream_sweep(model, wl, hws, cols, k=10)               # and the streamed blocks
    first_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    sr = sweep_points(model, wl, mem_hws, cols)
    mem_s = time.perf_counter() - t0
    n_mem = n_l * len(mem_hws)
    mem_rate = n_mem / mem_s
    t0 = time.perf_counter()
    st = stream_sweep(model, wl, hws, cols, k=10)
    sweep_s = time.perf_counter() - t0
    cache = jax.config.jax_compilation_cache_dir
    print(f"jit compile (first calls): ~{first_mem_s + first_s - sweep_s - mem_s:.2f} s "
          f"(first calls {first_mem_s + first_s:.2f} s less one warm run of each)"
          + (f" (read from the on-disk cache {cache}; DSE_JAX_CACHE= for a cold compile)" if cache else ""))
    print(f"in-memory sweep (every point copied back): {n_mem:,} points in {mem_s:.2f} s "
          f"({mem_rate:,.0f} points/s; {sr.feasible.mean():.1%} fit in memory)")
    rate1 = n / sweep_s
    print(f"streamed sweep (top-k, best per hardware, Pareto, histograms on the device): {n:,} points in "
          f"{sweep_s:.2f} s ({rate1:,.0f} points/s on {jax.device_count()} {jax.default_backend()} device(s); "
          f"{st.n_feasible:,} feasible)")
    rate, where = rate1, f"{jax.device_count()} {jax.default_backend()} device(s)"
    n_cpu = os.cpu_count() or 1
    if jax.default_backend() == "cpu" and jax.device_count() == 1 and n_cpu > 1:
        md = run_devices_bench(points, n_cpu)
        md_rate = md["points"] / md["s"]
        same = md["top"] == [int(p) for p in st.top["point"]] and md["feasible"] == st.n_feasible
        print(f"streamed sweep on {md['devices']} CPU host devices (blocks sharded with jax.shard_map): "
              f"{md['points']:,} points in {md['s']:.2f} s ({md_rate:,.0f} points/s, x{md_rate / rate1:.2f} vs "
              f"1 device; top-k and feasible count {'identical' if same else 'DIFFERENT'})")
    flat = _flat_rate(model, wl, hws, cols)
    streamed_f, mapped_f, flat_f = flops_per_point(model, wl, hws, cols)
    print(f"flat jit(vmap(train_step)) over host-gathered points (the sweep before blocks): {flat:,.0f} points/s "
          f"-> streamed blocks {rate / flat:.1f}x, in-memory blocks {mem_rate / flat:.1f}x")
    print(f"flops_per_point={streamed_f:.0f} (streamed block kernel: step, mask, reductions; baseline: every "
          f"field mapped {mapped_f:.0f}, flat {flat_f:.0f}; XLA cost analysis)")
    line = f"  = {rate * streamed_f / 1e9:.1f} GFLOP/s sustained on {where} by the streamed sweep"
    if jax.default_backend() == "cpu":
        peak, how = cpu_peak_flops_per_s()
        line += f", {rate * streamed_f / peak:.2%} of the CPU's nominal fp32 peak {peak / 1e9:.0f} GFLOP/s ({how})"
    print(line)

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
    run_infer_bench()
    if stream:
        run_stream_bench()
    if simulate:
        # the detailed tier: one simulated step at 1024 GPUs, for the sweep's pick and for
        # a pipelined layout with many more events (TP8 PP8 DP16, 16 micro-batches)
        from dse.bench_sim import run_sim_16k_bench, run_sim_bench
        run_sim_bench()
        run_sim_bench(Layout(tp=8, pp=8, dp=16, mbs=4, zero=1, sp=1))
        run_sim_16k_bench()
    print(f"sweep_configs_per_s={rate:.0f} (streamed, {where}; baseline: flat vmap {flat:.0f}, "
          f"in-memory {mem_rate:.0f}, python loop {loop_rate:.0f})")
    return rate


def run_device_bench(points: int | None = None) -> float:
    """``make bench-gpu``: the streamed sweep of :func:`run_bench` on every device of the
    default backend (all GPUs, blocks sharded over them by :mod:`dse.sweep.devices`; or
    CPU host devices, ``--devices cpu:N``), warm, against its first (compiling) call;
    prints ``device_configs_per_s=``.  Default size: 2^28 points on an accelerator (the
    goal, 10^8 points/s, keeps it busy for seconds), 2^24 on CPU devices.  Written and
    tested on CPU host devices only; it has not been run on a GPU."""
    from dse.sweep.stream import stream_sweep
    backend = jax.default_backend()
    points = points or (1 << 24 if backend == "cpu" else 1 << 28)
    model = get_model("llama3-70b")
    wl = Workload(global_batch=1024, seq_len=4096, precision=1)
    cols = enumerate_layouts(model, 1024, 1024, 4096)
    hws = bench_hardware(points, len(cols["tp"]))
    n = len(cols["tp"]) * len(hws)
    devs = jax.devices()
    print(f"bench-gpu: llama3-70b, 1024 GPUs, seq 4096, gbs 1024: {n:,} points on {len(devs)} {backend} "
          f"device(s) ({devs[0].device_kind})")
    t0 = time.perf_counter()
    stream_sweep(model, wl, hws, cols, k=10)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    st = stream_sweep(model, wl, hws, cols, k=10)
    s = time.perf_counter() - t0
    rate = n / s
    print(f"streamed sweep: {n:,} points in {s:.2f} s, {st.n_feasible:,} feasible, Pareto {len(st.pareto)} points")
    print(f"device_configs_per_s={rate:.0f} (warm, {len(devs)} {backend} device(s); baseline: first call "
          f"{n / first:.0f}/s incl. compile)")
    return rate


def main(argv=None) -> int:
    """``python -m dse.bench [--devices all|cpu:N] [--points N]`` (:func:`run_device_bench`)."""
    import argparse
    p = argparse.ArgumentParser(prog="python -m dse.bench", description=run_device_bench.__doc__.split("\n")[0])
    p.add_argument("--devices", default="all", help="all (the default backend's devices) or cpu:N")
    p.add_argument("--points", type=int, default=None)
    a = p.parse_args(argv)
    if a.devices.startswith("cpu:"):
        # before the backend starts: N CPU host devices
        from dse.jaxconfig import xla_flags_with
        os.environ["XLA_FLAGS"] = xla_flags_with(f"--xla_force_host_platform_device_count={int(a.devices[4:])}")
        jax.config.update("jax_platforms", "cpu")
    elif a.devices != "all":
        p.error(f"--devices must be all or cpu:N, but got {a.devices!r}")
    from dse.jaxconfig import configure
    configure()
    run_device_bench(a.points)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
