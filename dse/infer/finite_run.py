"""A benchmark run of a finite number of requests: the start-up burst its mean TTFT holds.

Benchmark clients send a fixed number of requests, ``P`` (``--num-prompts``: SGLang
``bench_serving``, vLLM ``benchmark_serving`` / ``vllm bench serve``), and report the mean
(or median) over them.  The steady states of :mod:`dse.infer.serving` describe a run long
enough to forget its start; a short one does not:

* **Closed loop** (``concurrency``, ``--max-concurrency N``): the client starts ``min(N,
  P)`` requests at t = 0 (``asyncio`` tasks gated by a semaphore of N) -- one burst, whose
  prompts queue behind each other's prefill passes -- and every later request is sent
  when one finishes, into the steady state.  The burst's mean TTFT is the wave's
  (:func:`dse.infer.lockstep.wave_prefill`: ``W`` prompts of ``S`` tokens in passes of the
  engine's token budget, a prompt's first token at the end of the pass holding its last
  token), ``W = min(N, P, wave cap)`` per request stream; the run's mean TTFT weighs the
  burst's ``min(N, P)`` requests against the ``P - N`` steady ones, and its mean e2e moves
  by the same amount (a burst request decodes as the steady ones do).
* **All queued** (``offline_throughput`` with ``P`` stated, ``--request-rate inf`` and no
  concurrency cap): the first ``B`` requests (the running batch the deployment admits)
  start in one burst, and request ``i > B`` waits for a slot: the server completes
  ``r = tokens/s / O`` requests per second, so its wait is ``(i - B) / r``, a mean of
  ``(P - B)^2 / (2 P r)`` over the run, on top of the weighted first-token time.

A ``poisson_rate`` run of ``P`` stated requests is simulated iteration by iteration
(:mod:`dse.infer.open_loop_run`: its ramp from an empty server, its queue past capacity
and its drain), not blended from the steady state.

A median is the burst's when the burst holds more than half of the run, else the steady
state's (plus, all queued, the middle request's wait ``(P/2 - B) / r``).  ``P`` unknown (the row's ``engine`` / ``notes`` / ``dataset`` state no
``--num-prompts``): the steady state, as before.  The burst's prefill is not charged to
throughput (it costs ``W S`` tokens once against the run's ``P O``).

**The drain of a closed loop** (:func:`drain_factor`).  The clients report output tokens
over the benchmark's duration, first request sent to last one finished (SGLang
``bench_serving`` / vLLM ``benchmark_serving``: ``benchmark_duration``), and once the
``P``-th request is sent the ``N`` slots empty one by one: the run's last request ends
``tau`` after the mean slot's, and throughput is ``P O / (P e / N + tau)`` where the steady
state's is ``N O / e`` (``e`` the mean end-to-end time).  With lengths drawn at random
(``--random-range-ratio r`` < 1, relative spread ``sqrt(o2 - 1)`` of the outputs) the
``N`` slots start together and drift apart as a random walk: after ``k = P / N`` requests a
slot's finish time has spread ``sigma sqrt(k)``, ``sigma = (O - 1) TPOT sqrt(o2 - 1)`` the
spread of one request, so the last of ``N`` ends at most ``sigma sqrt(k) sqrt(2 ln N)``
after the mean (the Gaussian extreme-value bound of :mod:`dse.cost.load_balance`).  It is
also at most half a request: the client sends from one shared queue, so once the queue is
empty the ``N`` requests in flight have residual times spread over at most one
request's ``e``, a mean residual of ``e / 2`` when fully desynchronised.  Hence

    tau = min(sigma sqrt(k) sqrt(2 ln N), e / 2),    throughput x 1 / (1 + tau / (k e))

(InferenceX runs, ``k`` = 10: 0.94-0.99, mean 0.97, over concurrency 4-64, as their medians give
``N O / e`` over the reported throughput; 0.99 at ``k`` = 50).  The requests of the drain
run at a smaller batch and so slightly faster, which this leaves out: it bounds the loss
from above.  Fixed lengths keep the slots in step (``sigma`` = 0, no drain).

Units: seconds, tokens.
"""

from __future__ import annotations

import math

from dse.infer.engines import flag_value
from dse.infer.lockstep import pass_tokens, wave_cap, wave_of, wave_prefill
from dse.infer.serving import Deployment, ServingResult, streams


def num_prompts(row) -> int | None:
    """The ``--num-prompts P`` a row's ``engine`` / ``notes`` / ``dataset`` state, or None;
    ``P`` must be one positive integer (stated twice, the same): :func:`dse.infer.engines.flag_value`,
    whose value must start with a sign or a digit ("--num-prompts is ..." in prose is not
    a flag).  A row's ``num_prompts`` column is read beside it by
    :func:`dse.infer.predict_rows.run_length`."""
    return flag_value({c: str(row.get(c, "")) for c in ("engine", "notes", "dataset")},
                      r"num[-_]prompts", "row", value=r"[-+]?\d\S*")


def _median(stat: str) -> bool:
    return "median" in stat.lower() or "p50" in stat.lower()


def _blend(res: ServingResult, burst_ttft: float, share: float, stat: str,
           mean_wait: float = 0.0, median_wait: float = 0.0):
    """``res`` with its TTFT (and e2e) the run's: the burst's ``share`` of the requests at
    ``burst_ttft``, the rest at the steady TTFT plus a queue wait (``mean_wait`` averaged
    over the run, ``median_wait`` the median request's)."""
    if _median(stat):
        ttft = burst_ttft if share > 0.5 else res.ttft_s + median_wait
    else:
        ttft = share * burst_ttft + (1.0 - share) * res.ttft_s + mean_wait
    return res._replace(ttft_s=ttft, e2e_s=res.e2e_s + (ttft - res.ttft_s))


def drain_factor(n: float, P: int, O: float, tpot_s: float, e2e_s: float, o2: float) -> float:
    """Throughput of a closed loop of ``n`` slots over ``P`` requests relative to its steady
    state (module docstring, "The drain"): ``1 / (1 + tau / (k e))`` with ``k = P / N``,
    ``N = min(n, P)``, ``tau = min(sigma sqrt(k) sqrt(2 ln N), e / 2)`` and ``sigma = (O - 1)
    TPOT sqrt(o2 - 1)``; 1 for fixed lengths (``o2`` = 1) or one slot."""
    N = min(float(n), float(P))
    if (N <= 1.0 or o2 <= 1.0 or not (e2e_s > 0 and math.isfinite(e2e_s))
            or not math.isfinite(tpot_s)):
        return 1.0
    k = P / N
    sigma = max(O - 1.0, 0.0) * tpot_s * math.sqrt(o2 - 1.0)
    tau = min(sigma * math.sqrt(k) * math.sqrt(2.0 * math.log(N)), e2e_s / 2.0)
    return 1.0 / (1.0 + tau / (k * e2e_s))


def _burst_ttft_s(dep: Deployment, W: float, S: float, max_model_len: float | None) -> float:
    """Mean TTFT of a start-up burst of ``W`` prompts per stream: their prefill passes
    (:func:`dse.infer.lockstep.wave_prefill`) behind the engine's HTTP front end
    (``frontend_s``, :mod:`dse.infer.engines` "Front end")."""
    burst, _ = wave_prefill(dep, W, S, pass_tokens(dep, S, max_model_len))
    return burst + dep.engine.frontend_s


def closed_loop_run(res: ServingResult, dep: Deployment, n: float, P: int | None, S: float,
                    O: float, replicas: int, max_model_len: float | None, stat: str,
                    o2: float = 1.0) -> ServingResult:
    """A ``concurrency`` row's result over a run of ``P`` requests (module docstring): the
    start-up burst in TTFT and e2e, the drain in throughput (``o2`` the outputs'
    ``E[O^2] / E[O]^2``); ``res`` unchanged when ``P`` is unknown or the result is not a
    number."""
    if P is None or not math.isfinite(res.ttft_s):
        return res
    units = streams(dep, replicas)
    first = min(n, P)                                  # requests of the start-up burst
    W = wave_of(first / units, wave_cap(dep, S, O))
    burst = _burst_ttft_s(dep, W, S, max_model_len)
    run = _blend(res, max(burst, res.ttft_s), first / P, stat)
    f = drain_factor(n, P, O, res.tpot_s, run.e2e_s, o2)
    return run._replace(tokens_per_s=res.tokens_per_s * f,
                        tokens_per_s_per_gpu=res.tokens_per_s_per_gpu * f)


def queued_run(res: ServingResult, dep: Deployment, P: int | None, S: float, O: float,
               replicas: int, max_model_len: float | None, stat: str) -> ServingResult:
    """An ``offline_throughput`` row's result over ``P`` requests queued at once (module
    docstring); ``res`` unchanged when ``P`` is unknown or the result is not a number."""
    if P is None or not math.isfinite(res.ttft_s) or res.tokens_per_s <= 0:
        return res
    units = streams(dep, replicas)
    B = res.batch * units                              # the running batch of the system
    first = min(float(P), B)
    W = wave_of(first / units, res.batch)
    burst = _burst_ttft_s(dep, W, S, max_model_len)
    rate = res.tokens_per_s / max(O, 1.0)              # requests completed per second
    mean_wait = max(P - B, 0.0) ** 2 / (2.0 * P * rate)
    median_wait = max(P / 2.0 - B, 0.0) / rate
    return _blend(res, max(burst, res.ttft_s), first / P, stat, mean_wait, median_wait)
