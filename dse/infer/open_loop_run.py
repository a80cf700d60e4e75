"""A finite open-loop benchmark run, iteration by iteration: the running batch a run of
``P`` requests at ``lambda`` per second actually reaches, not the steady state's.

A serving benchmark at a request rate (``--request-rate``, ``poisson_rate`` rows) sends
``P`` requests, the ``i``-th at about ``i / lambda``, into an empty server, and reports
means over them.  The steady state of :func:`dse.infer.serving.poisson` holds the batch
``B`` at which arrivals balance completions, ``lambda = B / e(B)`` with ``e`` a request's
time in service; the server reaches it only after about one ``e``, and it holds only while
requests keep arriving (``P / lambda`` seconds).  Near capacity ``e(B)`` grows with ``B``
(every iteration carries ``B`` sequences), so the balance point moves out and ``e``
becomes longer than the whole run: TensorRT-LLM v0.14's online table (500 requests of
467 / 256 tokens at 16 requests/s to a Llama-3.1-70B TP4 replica on H100) sends its
last request at 31 s, while the steady state's request would stay 34 s -- the run's
batch climbs from 0 to what the 500 arrivals build and drains, and never reaches the
steady state's 539 (its mean time per output token, 66 ms measured, is that of the
batches the run passed through, not the steady state's 132).

The model here runs the server's loop (Yu et al. 2022, Orca, OSDI: iteration-level
scheduling) over the run, with the cost model's iterations:

* request ``i`` arrives at ``i / lambda``, ``P`` in all (the client's arrivals are
  Poisson; :func:`simulate_run` says where that enters);
* each pass admits the waiting requests that the running-batch limit ``cap``
  (:func:`dse.infer.serving.tuned_batch`) and the token budget (``max_num_tokens``:
  ``floor(budget / S)`` whole prompts a pass, or one prompt every ``ceil(S / budget)``
  passes where a mixing engine chunks it) let in;
* the pass of ``B`` running sequences with ``q`` new prompts lasts ``t(B, q)``, the steady
  model's own iteration (:func:`dse.infer.serving.cycle`: mixed or separate prefill
  passes, eager or graphed, the engine's overheads) at the run's mean KV length,
  tabulated on a geometric grid of ``B`` and on ``q`` = 0-64 (:func:`iteration_table`)
  and interpolated between;
* a request's first token ends the pass carrying its (last) prompt chunk, its ``O``-th
  ``O - 1`` passes later; TTFT also holds the engine's scheduling look-ahead beyond the
  half pass a random arrival waits (:meth:`dse.infer.engines.EngineProfile.scheduling_wait`
  - 1/2) and the front end (``frontend_s``).

Outputs as a benchmark client reports them: mean (or median) TTFT, TPOT ``(e2e - TTFT) /
(O - 1)`` and e2e over the ``P`` requests, and output tokens over the run's duration,
first arrival to last completion.  Requests move in cohorts (those one pass admits), so a
run costs one loop over its passes (~10^3-10^4), O(1) each.  For a run long against a
request's time in service ``e`` below capacity the batch settles where ``lambda = B /
e(B)``, the steady state's balance, and past capacity the server delivers its offline
throughput (``tests/infer/test_open_loop_run.py``).

Units: seconds, tokens, requests.
"""

from __future__ import annotations

import math
from collections import deque
from typing import NamedTuple

import numpy as np

#: Batch grid points per factor 2 of the running batch (the iteration is smooth in B
#: between GEMM tile steps; linear interpolation between points ~19 % apart).
GRID_PER_OCTAVE = 4


def _grid(cap: float) -> np.ndarray:
    """Geometric batch grid from 1 to ``cap``."""
    n = max(int(math.ceil(math.log2(max(cap, 1.0)) * GRID_PER_OCTAVE)), 1)
    return np.unique(np.concatenate([np.geomspace(1.0, max(cap, 1.0), n + 1), [max(cap, 1.0)]]))


#: New prompts per iteration at which the iteration is tabulated (interpolated between):
#: a pass that mixes prompts into decode pays its fixed costs (an eager pass where the
#: engine graphs decode-only batches) once, however many prompts it carries.
PROMPT_GRID = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)


def iteration_table(dep, cap: float, S: float, O: float, o2: float = 1.0):
    """``(grid, prompts, t)``: the iteration ``t[i, j]`` with ``grid[i]`` running sequences
    and ``prompts[j]`` new prompts (:data:`PROMPT_GRID`; :func:`dse.infer.serving.cycle`,
    deterministic load) at the run's mean KV length ``S + o2 O / 2``."""
    from dse.infer.serving import bench_tuned, cycle, resident_output
    d = bench_tuned(dep, S, O)
    ctx = S + resident_output(O, o2) / 2.0
    g = _grid(cap)
    q = np.asarray(PROMPT_GRID)
    t = np.array([[cycle(d, float(b), ctx, float(k), S, False).mean_s for k in q] for b in g])
    return g, q, t


def _iter_s(table, b: float, q: float) -> float:
    """Bilinear interpolation of :func:`iteration_table` (prompts clipped to the grid)."""
    g, qs, t = table
    b = min(max(b, 1.0), g[-1])
    q = min(max(q, 0.0), qs[-1])
    i = min(int(np.searchsorted(g, b, side="right")) - 1, len(g) - 2) if len(g) > 1 else 0
    j = min(int(np.searchsorted(qs, q, side="right")) - 1, len(qs) - 2)
    fq = (q - qs[j]) / (qs[j + 1] - qs[j])
    row = lambda k: t[k, j] + fq * (t[k, j + 1] - t[k, j])
    if len(g) == 1:
        return float(row(0))
    fb = (b - g[i]) / (g[i + 1] - g[i])
    return float(row(i) + fb * (row(i + 1) - row(i)))


class RunStats(NamedTuple):
    """Means (or medians) over the run's requests, its output tokens per second (first
    arrival to last completion) and its time-mean running batch."""
    ttft_s: float
    tpot_s: float
    e2e_s: float
    tokens_per_s: float
    mean_batch: float


#: Iterations a simulated run may take (~5 us each): a run longer than this is long
#: against any request's time in service, and its steady state stands for it.
MAX_ITERATIONS = 400_000


def _weighted_median(values: list, weights: list) -> float:
    order = np.argsort(values)
    v, w = np.asarray(values)[order], np.asarray(weights)[order]
    c = np.cumsum(w)
    return float(v[np.searchsorted(c, c[-1] / 2.0)])


def simulate_run(table, rate: float, P: int, S: float, O: float, cap: float, budget: float,
                 mixed: bool, extra_wait_iters: float, frontend_s: float,
                 median: bool = False) -> RunStats | None:
    """The run of ``P`` requests at ``rate`` per second through one request stream whose
    iterations ``table`` gives (:func:`iteration_table`), module docstring; None when it
    would take more than :data:`MAX_ITERATIONS`.  ``budget``: prompt tokens a pass takes
    (``max_num_tokens``); ``mixed``: prompts share decode passes and a longer prompt is
    chunked over ``ceil(S / budget)`` of them (else a pass admits every waiting prompt
    that fits the budget, at least one); ``extra_wait_iters``: the scheduler's look-ahead
    in iterations beyond the half pass a random arrival waits.

    Arrivals are request ``i`` at ``i / rate``; the client's are Poisson, which the first
    pass of each request carries on average (Poisson arrivals see time averages, PASTA:
    Wolff 1982): it holds the request's prompt and Poisson(``rate t``) others, ``t(B, 1 +
    rate t)``, and a Poisson arrival falls in a longer-than-mean pass, by ``Var t / (2 E
    t) = s^2 rate / 2`` (``t = t_0 + s n``, ``n`` ~ Poisson(``rate t``): the inspection
    paradox, Kleinrock 1975 §5.2), ``s`` one more prompt's time."""
    chunks = max(math.ceil(S / budget), 1) if mixed else 1
    per_pass = max(math.floor(budget / S), 1) / chunks   # prompts a pass admits, on average
    O = max(float(O), 1.0)
    decode_iters = int(round(O)) - 1
    cap = max(math.floor(cap), 1)
    alone = chunks * _iter_s(table, 1.0, 1.0 / chunks) + decode_iters * _iter_s(table, 1.0, 0.0)
    if rate * alone <= 1.0 and P / rate > 1e9 * alone:
        # requests so sparse that a float clock at P / rate would lose the passes: each
        # is served before the next arrives, by an empty server (closed form)
        t1 = _iter_s(table, 1.0, 0.0)
        ttft = chunks * _iter_s(table, 1.0, 1.0 / chunks) + extra_wait_iters * t1 + frontend_s
        span = (P - 1) / rate + alone                     # first arrival to last completion
        return RunStats(ttft, t1 if decode_iters else 0.0, ttft + decode_iters * t1, P * O / span,
                        P * alone / span)
    T = 0.0
    admitted = running = 0                               # requests
    batch_time = credit = 0.0
    it = 0
    pending = deque()   # (count, last-token iteration, TTFT, decode start)
    done = []           # (count, TTFT, decode span)
    while admitted < P or pending:
        if it > MAX_ITERATIONS:
            return None
        arrived = min(P, math.floor(rate * T * (1.0 + 1e-12)) + 1)   # request i at i / rate
        if running == 0 and arrived == admitted:
            T = admitted / rate                          # idle until the next arrival
            continue
        credit = min(credit + per_pass, max(per_pass, 1.0))
        new = max(min(arrived - admitted, cap - running, math.floor(credit)), 0)
        credit -= new
        B = running + new
        t = _iter_s(table, B, new)
        if new:
            # requests admitted .. admitted + new - 1 arrived at i / rate and wait for
            # this pass; under Poisson arrivals the pass that carries a tagged request
            # holds it and Poisson(rate t) others, and the pass it arrived in is
            # size-biased, longer by Var t / (2 E t) = s^2 rate / 2 (docstring)
            wait = T - (admitted + (new - 1) / 2.0) / rate
            k = rate * t
            own = _iter_s(table, B, 1.0 + k)
            s1 = _iter_s(table, B, 2.0 + k) - own
            ttft = (wait + (chunks - 1) * t + own + s1 * s1 * rate / 2.0
                    + extra_wait_iters * t + frontend_s)
            # its decode runs from the end of the pass carrying its last prompt chunk
            pending.append((new, it + chunks - 1 + decode_iters, ttft, T + chunks * t))
            admitted += new
            running += new
        T += t
        batch_time += B * t
        while pending and pending[0][1] <= it:          # the last token ended this pass
            n, _, ttft, start = pending.popleft()
            done.append((n, ttft, max(T - start, 0.0)))
            running -= n
        it += 1
    w, ttft, span = (np.array(x) for x in zip(*done))
    tpot = span / decode_iters if decode_iters else np.zeros_like(span)
    stat = (lambda v: _weighted_median(v, w)) if median else (lambda v: float(np.dot(v, w) / w.sum()))
    return RunStats(stat(ttft), stat(tpot), stat(ttft + span), P * O / T, batch_time / T)


def finite_open_loop(dep, rate: float, P: int, S: float, O: float, replicas: int,
                     o2: float = 1.0, stat: str = ""):
    """:func:`simulate_run` of a deployment's ``poisson_rate`` run as a
    :class:`dse.infer.serving.ServingResult`: the ``P`` requests and the rate split evenly
    over the independent request streams (:func:`dse.infer.serving.streams`), the
    running-batch limit the tuned deployment sets (:func:`dse.infer.serving.tuned_batch`),
    the engine's token budget (as ``trtllm-bench`` tunes it where it does), scheduling
    look-ahead and front end; ``batch`` is a stream's time-mean running batch.  None
    where the run is no finite, positive rate, has no KV slot or is too long to simulate
    (the caller's steady state stands, or gives the infeasible status)."""
    from dse.infer.finite_run import _median
    from dse.infer.serving import ServingResult, bench_tuned, gpus_per_replica, streams, tuned_batch
    if not (math.isfinite(rate) and rate > 0 and P >= 1):
        return None
    units = streams(dep, replicas)
    cap = tuned_batch(dep, S, O, False, o2)
    if cap < 1:              # no KV cache for one sequence: the steady state says so
        return None
    eng = bench_tuned(dep, S, O).engine
    per_stream = max(round(P / units), 1)
    r = simulate_run(iteration_table(dep, cap, S, O, o2), rate / units, per_stream, S, O, cap,
                     float(eng.max_num_tokens), bool(eng.mixed_batches),
                     eng.scheduling_wait(dep.pp) - 0.5, float(eng.frontend_s), _median(stat))
    if r is None:
        return None
    tps = r.tokens_per_s * units
    return ServingResult(tps, tps / (gpus_per_replica(dep) * replicas), r.ttft_s, r.tpot_s,
                         r.e2e_s, r.mean_batch, "")
