"""Closed-loop benchmarks with fixed lengths run in lockstep waves.

A closed-loop client (``sglang.bench_serving`` / ``vllm benchmarks/benchmark_serving.py``
with ``--max-concurrency N``, a fixed ``--random-input-len`` / ``--random-output-len``:
every request S prompt and O output tokens) starts N requests at t = 0 and sends the
next one the moment one finishes.  With equal lengths the N requests that start together
also finish together (each advances one token per iteration), so their clients resubmit
together: the load is a sequence of **waves**, each a burst of W prompts arriving at
once, not the staggered arrivals of the steady state (:func:`dse.infer.serving.concurrency`).

**One wave** of W requests (W = min(N, wave cap), below):

* the W prompts run as prefill passes of up to ``budget`` tokens each
  (:func:`pass_tokens`): whole prompts where the engine does not chunk
  (``floor(budget / S)`` prompts per pass), token chunks where it does.  The prompt
  whose last token lands in pass k gets its first token at the end of pass k:
  ``TTFT_k = sum_{j<=k} t_pass(j)``, with ``t_pass`` the static prefill of the pass's
  tokens (:func:`dse.infer.serving.prefill_s`).  vLLM 0.x and SGLang schedule waiting
  prompts before running decodes (vLLM V0 ``Scheduler._schedule_default``: prefills
  first when nothing is swapped; SGLang ``Scheduler.get_next_batch_to_run``: a new
  prefill batch before the running decode batch), so decoding starts after the last pass,
  ``P_W = sum_j t_pass(j)``; TensorRT-LLM's in-flight batching gives the already
  prefilled requests a token per pass meanwhile, an iteration as long as the pass --
  the same wait per token, so the same formula.
* then ``O - 1`` decode iterations of the W sequences at mean context ``S + O/2``
  (:func:`dse.infer.serving.iteration_s`, the engine's host time and CUDA-graph limit
  included), all W finishing in the same iteration: ``T_wave = P_W + (O - 1) t_dec``.
* per request: ``e2e = T_wave`` (plus the queue wait below); TTFT the mean of ``TTFT_k``
  over the wave's prompts; TPOT as benchmark clients compute it, ``(e2e - TTFT) /
  (O - 1)``, so ``TPOT = t_dec + (P_W - mean TTFT) / (O - 1)``.

**Wave cap**: W <= the engine's running-sequence limit (``max_batch``: vLLM
``max_num_seqs``, SGLang ``max_running_requests``, TensorRT-LLM ``max_batch_size``) and
<= the KV slots at the wave's *final* footprint, ``S + O`` tokens per request
(:func:`dse.infer.serving.kv_slots` with ``final``): in lockstep every running request
reaches S + O together, so an engine that admits on current blocks (vLLM, SGLang)
preempts down to the sequences that fit then (vLLM V0 recompute preemption, SGLang
``retract_decode``), which is the same count.  With N > W requests in flight the other
``N - W`` wait in the server's queue; the wave completes W requests every ``T_wave``, so
by Little's law the mean wait is ``(N - W) T_wave / W``, added to TTFT and e2e.

Throughput ``N O / e2e`` (= ``W O / T_wave``).  Attention-DP ranks are independent
streams (``N / streams`` requests each), as in :mod:`dse.infer.serving`.

**Front end**: every request crosses the engine's HTTP front end once on the way in and
once with its tokens out (``frontend_s``, :mod:`dse.infer.engines` "Front end"; vLLM V1's
OpenAI server): added to TTFT and e2e, and to the time a client holds its slot, so a
closed loop's wave or cycle is that much longer.

Used by ``dse predict`` for ``concurrency`` rows with the lengths given (fixed lengths);
dataset-driven lengths desynchronise the waves within a few requests, and the steady
state of :func:`dse.infer.serving.concurrency` applies (also what the serving search
assumes: a production load, not a lockstep client).

Units: seconds, tokens.
"""

from __future__ import annotations

import math

from dse.infer.engines import VLLM_V0_MIN_BATCHED_TOKENS
from dse.infer.serving import (Deployment, ServingResult, gpus_per_replica, iteration_s,
                               kv_slots, md1_wait_s, prefill_s, streams)



def pass_tokens(dep: Deployment, S: float, max_model_len: float | None = None) -> float:
    """Tokens one prefill pass may carry (whole prompts unless the engine chunks).

    vLLM V0 without chunked prefill sets ``max_num_batched_tokens = max(max_model_len,
    2048)`` (``vllm/config.py`` ``SchedulerConfig.__post_init__``: "If max_model_len is
    too short, use _DEFAULT_MAX_NUM_BATCHED_TOKENS"), with ``max_model_len`` the
    ``--max-model-len`` the launch states, else the checkpoint's context (128K-164K for
    the models here: larger than any wave, so one pass per wave, ``inf``).  Other
    engines: their ``max_num_tokens`` (SGLang ``chunked_prefill_size``, TensorRT-LLM
    ``max_num_tokens``)."""
    eng = dep.engine
    if eng.name.startswith("vllm") and not eng.chunked_prefill:
        mml = math.inf if max_model_len is None else float(max_model_len)
        return max(mml, float(VLLM_V0_MIN_BATCHED_TOKENS))
    return float(eng.max_num_tokens)


def wave_cap(dep: Deployment, S: float, O: float, final: bool = False) -> float:
    """Most requests one wave holds (module docstring, "Wave cap"): the engine's
    ``max_batch`` and the KV slots of a request of ``S`` prompt and ``O`` output tokens
    (:func:`dse.infer.serving.kv_slots`, at the final footprint with ``final``)."""
    return min(kv_slots(dep, S, O, final=final), float(dep.engine.max_batch))


def wave_of(n: float, cap: float) -> float:
    """The whole requests of a wave of ``n`` in flight under ``cap``: ``floor(max(min(n,
    cap), 1))``."""
    return float(math.floor(max(min(n, cap), 1.0)))


def wave_prefill(dep: Deployment, W: float, S: float, budget: float) -> tuple[float, float]:
    """(mean TTFT over the wave's prompts, total prefill time P_W) of a burst of ``W``
    prompts of ``S`` tokens in passes of ``budget`` tokens (module docstring)."""
    W = max(int(round(W)), 1)
    chunked = dep.engine.chunked_prefill
    per_pass = min(budget, W * S)
    if not chunked:
        per_pass = max(math.floor(per_pass / S), 1) * S
    K = math.ceil(W * S / per_pass - 1e-9)
    t_full = prefill_s(dep, per_pass / S, S)
    last_tokens = W * S - (K - 1) * per_pass
    t_last = t_full if abs(last_tokens - per_pass) < 1e-6 else prefill_s(dep, last_tokens / S, S)
    total = (K - 1) * t_full + t_last
    ttft = 0.0
    for i in range(1, W + 1):
        k = min(math.ceil(i * S / per_pass - 1e-9), K)
        ttft += (k - 1) * t_full + (t_last if k == K else t_full)
    return ttft / W, total


def lockstep_concurrency(dep: Deployment, n: float, S: float, O: float, replicas: int,
                         max_model_len: float | None = None) -> ServingResult:
    """Closed loop of ``n`` requests in flight with fixed lengths (module docstring)."""
    gpus = gpus_per_replica(dep) * replicas
    units = streams(dep, replicas)
    N = n / units
    cap = wave_cap(dep, S, O, final=True)
    if cap < 1:
        return ServingResult(math.nan, math.nan, math.nan, math.nan, math.nan, 0.0,
                             "infeasible: the weights leave no KV cache for one sequence")
    W = wave_of(N, cap)
    ttft_wave, p_w = wave_prefill(dep, W, S, pass_tokens(dep, S, max_model_len))
    t_dec = iteration_s(dep, W, S + O / 2.0) if O > 1 else 0.0
    front = dep.engine.frontend_s        # the HTTP front end: both ends of every request
    t_wave = p_w + (O - 1.0) * t_dec + front
    wait = max(N - W, 0.0) * t_wave / W
    ttft = wait + ttft_wave + front
    e2e = wait + t_wave
    tpot = (e2e - ttft) / (O - 1.0) if O > 1 else 0.0
    tps = N * O / e2e * units
    note = "" if N <= W else "queued: concurrency above the wave the KV cache holds"
    return ServingResult(tps, tps / gpus, ttft, tpot, e2e, W, note)


def _staggered_wave(dep: Deployment, N: float, S: float, O: float,
                    max_model_len: float | None):
    """``(W, K, c, t_mix, t_dec)`` of a wave of ``N`` requests on an engine that mixes
    prompts into decode iterations (:func:`staggered_concurrency`): the wave ``W`` under
    its cap (staggered cohorts hold ``S + O/2`` on average: only an engine that reserves
    the final footprint at admission, ``reserve_final_kv``, is capped at ``S + O``), its
    ``K`` prompt passes, a prompt's ``c`` passes, the mixed iteration ``t_mix`` (a pass's
    prompt tokens beside ``W - k`` decoding sequences) and the decode iteration ``t_dec``
    (``W`` sequences at context ``S + O/2``); None when no sequence fits."""
    cap = wave_cap(dep, S, O)
    if cap < 1:
        return None
    W = wave_of(N, cap)
    budget = pass_tokens(dep, S, max_model_len)
    per_pass = min(budget, W * S)
    if not dep.engine.chunked_prefill:
        per_pass = max(math.floor(per_pass / S), 1) * S
    K = math.ceil(W * S / per_pass - 1e-9)              # passes per wave
    c = math.ceil(S / per_pass - 1e-9)                  # passes per prompt
    ctx = S + O / 2.0
    k = per_pass / S                                    # prompts per pass
    t_mix = iteration_s(dep, max(W - k, 0.0), ctx, prompt_tokens=per_pass, prompt_len=S)
    t_dec = iteration_s(dep, W, ctx) if O > 1 else 0.0
    return W, K, c, t_mix, t_dec


def staggered_one_wave(dep: Deployment, n: float, S: float, O: float, replicas: int,
                       max_model_len: float | None = None) -> ServingResult:
    """``n`` requests sent together and nothing after (a finite all-queued run no larger
    than the running batch) on an engine that mixes prompts into decode iterations: the
    wave's prompts run in ``K`` passes (:func:`_staggered_wave`, ``c`` passes per prompt),
    a prompt whose last token lands in pass ``j`` gets its first token at the end of it
    (``j`` from ``c`` to ``K``, mean ``(K + c) / 2``), decodes through the ``K - j``
    passes after it at ``t_mix`` and its other ``O - 1 - (K - j)`` tokens at ``t_dec`` --
    unlike the cycle of :func:`staggered_concurrency`, no later cohort's pass interrupts
    it (nothing is sent later).  Averaged over the wave, with ``m = (K - c) / 2`` the mean
    later passes (capped at ``O - 1``: a request's tokens are at most all mixed)::

      TTFT = (K + c) / 2 t_mix,   TPOT = (m t_mix + (O - 1 - m) t_dec) / (O - 1),
      run = K t_mix + (O - 1) t_dec,   tokens/s = W O / run,

    the run ending with the last pass's prompts.  ``n`` above the wave cap: :func:`staggered_concurrency`'s
    queue."""
    gpus = gpus_per_replica(dep) * replicas
    units = streams(dep, replicas)
    N = n / units
    w = _staggered_wave(dep, N, S, O, max_model_len)
    if w is None or N > w[0]:
        return staggered_concurrency(dep, n, S, O, replicas, max_model_len)
    W, K, c, t_mix, t_dec = w
    seen = min((K - c) / 2.0, max(O - 1.0, 0.0))        # mean later passes a cohort decodes through
    front = dep.engine.frontend_s        # the HTTP front end: both ends of every request
    ttft = (K + c) / 2.0 * t_mix + front
    tpot = (seen * t_mix + (O - 1.0 - seen) * t_dec) / (O - 1.0) if O > 1 else 0.0
    e2e = ttft + (O - 1.0) * tpot
    run = K * t_mix + (O - 1.0) * t_dec + front
    tps = W * O / run * units
    return ServingResult(tps, tps / gpus, ttft, tpot, e2e, W, "")


def staggered_concurrency(dep: Deployment, n: float, S: float, O: float, replicas: int,
                          max_model_len: float | None = None) -> ServingResult:
    """Closed loop of ``n`` requests with fixed lengths on an engine that mixes prompts
    into decode iterations (in-flight batching: TensorRT-LLM's executor schedules new
    context requests into every iteration beside the running generation requests,
    ``EngineProfile.mixed_batches``).  The first wave's prompts are prefilled in ``K``
    passes of ``k`` prompts (:func:`pass_tokens`), and a cohort decodes from the
    iteration after its own pass -- unlike the prefill-first engines of
    :func:`lockstep_concurrency`, it does not wait for the wave's last prompt -- so
    cohorts finish, and their clients resubmit, one iteration apart.  The load settles
    into a cycle of ``c + O - 1`` iterations (a request's ``c = ceil(S / per_pass)``
    prefill passes, then ``O - 1`` tokens), ``K`` of them carrying a cohort's prompt
    tokens (``t_mix``: the pass's prompt tokens beside ``W - k`` decoding sequences) and
    the rest decode only (``t_dec``, ``W`` sequences at context ``S + O/2``):

      TTFT = c t_mix + w_j,   e2e = K t_mix + (c + O - 1 - K) t_dec,
      TPOT = (e2e - TTFT) / (O - 1),   tokens/s = N O / e2e,

    with ``K`` capped at the cycle (every iteration mixed).  Each request sees every
    other cohort's pass once in its lifetime, so TPOT carries ``(K - c) t_mix`` -- the
    prefill interference a closed-loop sweep measures as the ITL rising with
    concurrency.  Above the wave cap ``W`` (the engine's ``max_batch``, and the KV slots:
    at the final footprint ``S + O`` where admission reserves it, ``reserve_final_kv``,
    else at the cycle's mean ``S + O/2``, as the staggered cohorts hold it) the other
    ``N - W`` wait in the server queue, Little's law as :func:`lockstep_concurrency`.

    **Jitter** (:func:`prefill_jitter_wait_s`): the cohorts stay one iteration apart only
    if every resubmission lands on the iteration boundary after its cohort's last token.
    A benchmark client resubmits after the last streamed token crosses HTTP, the
    detokenizer and its own event loop, so the prompts reach the scheduler at drifting,
    effectively random instants, and one that arrives while another prompt's pass runs
    waits for it.  The prompt passes are then a single FCFS server, busy a share
    ``rho = K t_mix / t_cycle`` of the cycle, with a deterministic service of ``s = K
    t_mix / W`` per prompt; an arriving request sees the other ``W - 1`` (the arrival
    theorem of closed networks, Lavenberg & Reiser 1980, J. Appl. Prob. 17:1048): the
    M/D/1 wait at ``rho (W - 1) / W`` (:func:`dse.infer.serving.md1_wait_s`).  The work
    per cycle is the same passes, so the wait moves time from the request's decode phase
    to its first token and leaves e2e and tokens/s unchanged: a request that waits for
    another's pass does not see that pass while it decodes.  Hence the wait is at most
    the interference it would have seen, ``(K - c)(t_mix - t_dec)``.  (NVIDIA NIM's
    Llama-3.3-70B sweep, tests/data/published_serving.md, shows this shift: TTFT 0.41 ->
    0.83 s from 1 to 50 in flight below the slots.)"""
    gpus = gpus_per_replica(dep) * replicas
    units = streams(dep, replicas)
    N = n / units
    w = _staggered_wave(dep, N, S, O, max_model_len)
    if w is None:
        return ServingResult(math.nan, math.nan, math.nan, math.nan, math.nan, 0.0,
                             "infeasible: the weights leave no KV cache for one sequence")
    W, K, c, t_mix, t_dec = w
    life = c + O - 1.0
    K_eff = min(float(K), life)
    t_cycle = K_eff * t_mix + (life - K_eff) * t_dec
    front = dep.engine.frontend_s        # the HTTP front end: both ends of every request
    wait = max(N - W, 0.0) * (t_cycle + front) / W
    jitter = prefill_jitter_wait_s(W, K_eff, c, t_mix, t_dec, t_cycle)
    # an engine that looks at its queue every P iterations (EngineProfile.poll_iterations:
    # TensorRT-LLM's attention-DP balancing) holds a resubmitted prompt (P - 1) / 2 of them;
    # an overlap scheduler has already submitted the next iteration when it arrives
    # (EngineProfile.admission_lag)
    poll = (0.5 * (dep.engine.poll_iterations - 1.0) + dep.engine.admission_lag(dep.pp)) * t_dec
    ttft = wait + poll + c * t_mix + jitter + front
    e2e = wait + poll + t_cycle + front
    tpot = (e2e - ttft) / (O - 1.0) if O > 1 else 0.0
    tps = N * O / e2e * units
    note = "" if N <= W else "queued: concurrency above the wave the KV cache holds"
    return ServingResult(tps, tps / gpus, ttft, tpot, e2e, W, note)


def prefill_jitter_wait_s(W: float, K: float, c: float, t_mix: float, t_dec: float,
                          t_cycle: float) -> float:
    """Mean wait of a resubmitted prompt for the other prompts' passes in a jittered
    staggered cycle (:func:`staggered_concurrency`, "Jitter"): the M/D/1 wait
    (:func:`dse.infer.serving.md1_wait_s`) at utilization ``rho (W - 1) / W``, ``rho = K
    t_mix / t_cycle``, service ``K t_mix / W`` per prompt, capped at the prompt-pass
    interference of the decode phase, ``max(K - c, 0) (t_mix - t_dec)``; 0 for one
    request in flight."""
    if W <= 1.0 or K <= 0.0 or t_cycle <= 0.0:
        return 0.0
    rho = K * t_mix / t_cycle * (W - 1.0) / W
    cap = max(K - c, 0.0) * max(t_mix - t_dec, 0.0)
    return min(md1_wait_s(rho, K * t_mix / W), cap)
