"""The one chunked ``jit(vmap)`` runner of every sweep (training, inference, predict).

Padding policy: points run in chunks of ``chunk_size(n)`` -- the smallest power of 8
that holds ``n`` (at least :data:`MIN_CHUNK`), at most :data:`MAX_CHUNK` -- and the last
chunk is padded by repeating its first point, so any sweep compiles at most four shapes
per cost function (64, 512, 4096, 32768) however many points it has.

Dispatch overlap: JAX dispatches asynchronously, so the runner issues chunk ``i + 1``
before it copies chunk ``i`` back to the host (``np.asarray`` blocks); the device (or the
CPU's XLA threads) computes the next chunk while the host converts the last.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import jax
import numpy as np

from dse.host_eval import host_call

MIN_CHUNK = 64
MAX_CHUNK = 1 << 15


def chunk_size(n: int, max_chunk: int = MAX_CHUNK) -> int:
    """Chunk length for ``n`` points (module docstring)."""
    c = MIN_CHUNK
    while c < n and c < max_chunk:
        c *= 8
    return max(min(c, max_chunk), 1)


def pad_index(idx: np.ndarray, n: int) -> np.ndarray:
    """``idx`` padded to length ``n`` with its first entry."""
    return np.concatenate([idx, np.full(n - len(idx), idx[0], dtype=idx.dtype)]) if len(idx) < n else idx


def dispatch_chunked(fn: Callable, args_for: Callable[[np.ndarray], tuple], n: int,
                     max_chunk: int = MAX_CHUNK, chunk: int | None = None) -> list:
    """Dispatch ``fn(*args_for(idx))`` over points ``0..n-1`` in padded chunks without
    waiting for any (JAX dispatches asynchronously): ``[(result, valid length), ...]`` for
    :func:`collect_chunked`.  A caller with several programs dispatches them all before
    collecting the first, so the device works while the host converts.  ``chunk`` fixes
    the chunk length (one of the policy's sizes) where the caller knows one shape serves
    all its calls."""
    chunk = chunk or chunk_size(n, max_chunk)
    return [(fn(*args_for(pad_index(np.arange(s, min(s + chunk, n), dtype=np.int64), chunk))),
             min(chunk, n - s)) for s in range(0, n, chunk)]


def run_concurrently(jobs: list[Callable[[], object]]) -> list:
    """Run ``jobs`` (each compiling and calling its own JAX programs: a
    :func:`dispatch_chunked` call, a whole sweep) from a thread per job, up to the CPU
    count, and return their results in order.  A program's first call traces and compiles
    it; XLA compiles with the GIL released, so distinct programs compile side by side
    instead of one after the other (JAX's jit is thread-safe).  A single job runs in this
    thread; a job's exception is raised here.  A job may call this again (the serving
    study's sweeps each dispatch their programs so): the nested pools overlap the studies'
    tracing with other sweeps' compiles (``make study STUDY=serving``, cold cache, 2 cores:
    52-63 s nested, 71-74 s with the nested jobs run serially in their thread, two runs each)."""
    if len(jobs) <= 1:
        return [job() for job in jobs]
    with ThreadPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 1)) as pool:
        return list(pool.map(lambda job: job(), jobs))


def collect_chunked(pending: list, progress=None):
    """The outputs of :func:`dispatch_chunked` on the host, concatenated and unpadded."""
    outs = []
    for res, k in pending:
        outs.append(jax.tree_util.tree_map(lambda x: np.asarray(x)[:k], res))
        if progress is not None:
            progress.update(k)
    if len(outs) == 1:
        return outs[0]
    return jax.tree_util.tree_map(lambda *xs: np.concatenate(xs), *outs)


def run_chunked(fn: Callable, args_for: Callable[[np.ndarray], tuple], n: int,
                max_chunk: int = MAX_CHUNK, progress=None):
    """``fn(*args_for(idx))`` over points ``0..n-1`` in padded chunks; the outputs (any
    pytree of arrays with the point axis first) concatenated on the host, unpadded.
    ``args_for`` receives the padded index array of one chunk."""
    if n == 0:
        return None
    chunk = chunk_size(n, max_chunk)
    outs, pending = [], None

    def collect(p):
        res, k = p
        outs.append(jax.tree_util.tree_map(lambda x: np.asarray(x)[:k], res))
        if progress is not None:
            progress.update(k)

    for s in range(0, n, chunk):
        idx = np.arange(s, min(s + chunk, n), dtype=np.int64)
        res = fn(*args_for(pad_index(idx, chunk)))        # dispatched, not yet waited on
        if pending is not None:
            collect(pending)
        pending = (res, len(idx))
    collect(pending)
    return jax.tree_util.tree_map(lambda *xs: np.concatenate(xs), *outs)


#: Calls of one program (a jitted cost function and the static structure of its
#: arguments: model, workload switches) that :func:`run_tiered` runs on the host before it
#: compiles the program.  One small call on the host costs ~45-140 ms (the plan of the
#: vmapped jaxpr, :mod:`dse.host_eval`; a training step, by model), one XLA compile of it
#: 3-16 s (2-core machine, MoE models the most): a program called fewer times than
#: compile / host call (~70-110) is cheaper never compiled.  Compiling after that many
#: calls (the ski-rental rule) costs at most about twice the better choice made in
#: hindsight.  Measured, ``predict_frame`` with an empty JAX cache, everything compiled /
#: all on the host / tiered at 64: tests/data/published_bridge_catalog.csv (68 rows)
#: 87.6 / 9.3 / 7.9 s; ../shared/validation/calibration.csv 32.3 s compiled, 26.1 s tiered;
#: ../shared/validation/vtrain.csv (1,549 rows, two programs: the worst case, 64 host calls
#: of each before the compile) 32.9 s compiled, 37.5 s tiered (70.5 s all on the host).
HOST_TIER_CALLS = 64
_tier_calls: dict = {}


def run_tiered(fn: Callable, args_for: Callable[[np.ndarray], tuple], n: int, progress=None):
    """As :func:`run_chunked`, but a call of at most :data:`MIN_CHUNK` points of a program
    seen fewer than :data:`HOST_TIER_CALLS` times in this process runs on the host
    (:func:`dse.host_eval.host_call` of ``fn``'s unjitted function, unpadded) instead of
    compiling it: the tiering of a JIT (interpret a program until it is hot, then compile).
    Both tiers run the same jaxpr in float32; they can differ in the last bit where XLA
    fuses or rewrites an expression (:mod:`dse.host_eval`).  ``fn`` is a ``jax.jit``
    function (its ``__wrapped__`` is the program)."""
    if 0 < n <= MIN_CHUNK:
        args = args_for(np.arange(n, dtype=np.int64))
        key = (fn, jax.tree_util.tree_structure(args))
        seen = _tier_calls.get(key, 0)
        if seen < HOST_TIER_CALLS:
            _tier_calls[key] = seen + 1
            out = host_call(fn.__wrapped__, *args)
            if progress is not None:
                progress.update(n)
            return jax.tree_util.tree_map(np.asarray, out)
    return run_chunked(fn, args_for, n, progress=progress)
