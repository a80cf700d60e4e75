"""Serving iterations and scenarios on the operator graph: static batching, continuous
(in-flight) batching with mixed prefill/decode iterations, closed- and open-loop load.

**One iteration** (:func:`iteration_s`) of a replica of ``tp x pp`` GPUs advances
``b`` running sequences by one token (decode, FlashDecoding KV read over a mean
context ``c``) and runs ``p`` prompt tokens of new requests in the same pass (mixed
batching: TensorRT-LLM in-flight batching, vLLM / SGLang chunked prefill).  It is the
stage pass of :func:`dse.infer.forward.forward_ops` over ``T = b + p`` tokens (every
linear sees M = T: one weight read serves both), plus the causal FlashAttention of the
prompt tokens (``p / S`` prompts of S tokens), plus the engine's host time
(:mod:`dse.infer.engines`: per pass, and per running sequence):

    t_iter = host(pp * t_stage((b + p) / m), b),                    m = min(b, pp) micro-batches

with ``host`` the engine's host time per pass and per running sequence
(:meth:`dse.infer.engines.EngineProfile.with_host_s`: in series, ``gpu + overhead + b
seq_overhead``, or beside the GPU, ``max``, where the engine overlaps it), except on the
PyTorch executor with pp > 1, whose pipeline loop has no overlap scheduler:
``t_iter = pp (t_stage((b + p) / m) + h(b / m))``, the host work of every micro-batch in
series with its stage pass (:func:`dse.infer.pipeline.pipelined_iteration_s`, sources
there).

Kernel gaps use the engine's launch cost (CUDA graphs for decode-only iterations up to
its captured batch); a pass that is not a graph replay takes at least the engine's host
issue time, ``eager_op_s`` per kernel (:func:`dse.infer.forward.host_bound_s`).  Overlap: none inside a pass (ops on one stream: sum); host time is
serial with the GPU where the engine does not overlap it (above).

**KV capacity** (:func:`kv_slots`): pool = engine fraction of HBM (TensorRT-LLM: of the
memory left after weights) minus weights, activation workspace and the allocator reserve
of :mod:`dse.infer.memory`.  The workspace is that of one prompt chunk,
``min(max_num_tokens, S)`` tokens, except where the engine sizes its pool after a
profiling forward of its whole token budget (``EngineProfile.profile_at_budget``): vLLM
measures the peak of a dummy pass of ``max_num_batched_tokens`` tokens before it allocates
the cache (V0 ``vllm/worker/model_runner.py`` ``profile_run``: dummy sequences summing to
``scheduler_config.max_num_batched_tokens``; V1 ``vllm/v1/worker/gpu_model_runner.py``
``profile_run``: ``_dummy_run(self.max_num_tokens)``), so the pool is what is left after
that peak whatever the prompts served later.  A sequence holds ``ceil(tokens / block) * block`` tokens of
``2 L/pp g_t d`` elements at the KV precision.  Tokens held: the final ``S + O`` where the
engine reserves at admission (TensorRT-LLM), the mean ``S + O/2`` otherwise (vLLM /
SGLang admit on current blocks).  The running batch is ``min(slots, max_batch)``.

**Length spread** (:func:`resident_output`): with dataset-driven output lengths O_i a
running request is resident for O_i iterations, so the requests in the batch at a
random instant are length-biased (the inspection paradox; renewal-reward theorem): the
time average of the output tokens a resident request will have produced in all is
``E[O^2] / E[O] = o2 E[O]``, not ``E[O]``.  Tokens held and the mean decode context use
``O_res = o2 O`` (held ``S + O_res`` where the engine reserves, ``S + O_res / 2``
otherwise; context ``S + O_res / 2``); completions per iteration stay ``B / O`` (mean
O).  ``o2`` = 1 for fixed lengths; 2 for exponential lengths (ShareGPT,
:data:`dse.infer.predict_rows.DATASETS`).  Prompt lengths are taken as independent of
output lengths, so the prompt term keeps its mean.

**Scenarios** (S prompt, O output tokens per request; throughput of one replica, times
replicas for the system):

* ``fixed_batch`` (static batch N, TensorRT-LLM gptSessionBenchmark): prefill of the
  batch, then O - 1 decode steps at context ``S + O/2``:
  ``T = t_prefill(N) + t_req + (O - 1) t_iter(N, 0)``; tokens/s = N O / T; TTFT =
  t_prefill + t_req (the engine's fixed host time per generate call,
  ``request_overhead_s``), TPOT = t_iter.
* ``latency``: ``fixed_batch`` with N = 1.
* ``offline_throughput`` (all requests queued): steady state of continuous batching.
  B sequences run; each finishes after O iterations, so B / O new requests start per
  iteration, ``B S / O`` prompt tokens per iteration on average (capped by
  ``max_num_tokens``: then B shrinks to ``max_num_tokens / (1 + S/O)``).  On engines
  that mix prompts into decode iterations those tokens are not spread over every pass:
  the scheduler packs the waiting prompts into one pass up to the token budget, so a
  share ``p`` of the iterations is mixed and the rest decode-only (CUDA-graph replays
  where the engine captures them): ``t = p t_iter(B, w) + (1 - p) t_iter(B, 0)``,
  ``p = (B S / O) / w`` (:func:`prefill_share`).
  tokens/s = B / t.  B is the tuned limit (:func:`tuned_batch`).
* ``concurrency`` (closed loop, N in flight per system): B = N / replicas (capped by
  the slots); the same steady state; TPOT = t_iter; TTFT = (steps/2 + 1) t_iter (wait for
  the running scheduling pass of ``steps`` iterations, half of it on average, then the
  iteration carrying the prompt, or the prompt's own prefill pass on engines that do not
  mix them; :func:`first_token_s`); e2e = TTFT + (O - 1) TPOT; tokens/s = B O / e2e.
* ``poisson_rate`` (open loop, lambda requests/s): a mean-value fixed point (Little's
  law on a processor-sharing server, as continuous batching is one): per replica
  ``lambda_r = lambda / replicas``; the running batch ``B = lambda_r (O - 1) TPOT``
  and ``n`` new prompts per iteration give ``TPOT = E_n t_iter(B, n S)``, with n
  Poisson(lambda_r TPOT) -- the arrival count over one iteration of a Poisson process,
  which also averages the GEMM tile / wave steps a single mean-load iteration would
  carry (:func:`cycle`), and the running batch itself is Poisson(B) around its mean
  (M/G/inf: :func:`open_loop_cycle`) -- solved by bisection on TPOT.  The running batch
  is capped at the deployment's tuned limit (:func:`tuned_batch`, the ``max_batch_size`` /
  ``max_num_seqs`` a tuned server is configured with, as in ``offline_throughput``), not
  at the raw KV slots: a deployment tuned for throughput does not admit past its best
  per-token batch.  Past capacity (no root below that cap) the row is saturated: throughput is the offline one and
  the status says so.  TTFT = steps/2 mean iterations + the size-biased iteration (or,
  on engines that do not mix, prefill pass) carrying the prompt (:func:`first_token_s`)
  plus, while the prefill work alone occupies a share rho = t_prefill(S) lambda_r of the
  GPU, an M/D/1 wait ``rho t_prefill / (2 (1 - rho))``
  (Pollaczek-Khinchine with a deterministic service time).  Throughput = lambda O.
  ``offline_throughput`` keeps the deterministic ``B / O`` prompts per iteration
  (``spread`` False): a full queue is admitted by the scheduler, and the tuned batch
  (:func:`tuned_batch`) is the best per-token point, as a tuned deployment sets it.  A
  ``concurrency`` row with dataset-driven lengths (``dse predict``) admits one request per
  completion, and the completions of many requests of random lengths arrive as a Poisson
  stream (Palm-Khintchine, :func:`cycle`): ``spread`` True.  Fixed lengths run in
  cohorts instead (:mod:`dse.infer.lockstep`).

**Expert parallelism and attention DP** (MoE; :mod:`dse.infer.forward` has the layout
and its sources): a replica is ``tp x dp x pp`` GPUs.  With ``dp`` > 1 each of the
``dp`` attention ranks is its own request stream (its own running batch, KV pool and
arrivals: SGLang DP attention, vLLM DP engines, TensorRT-LLM ``enable_attention_dp``),
all stepping together through the shared EP MoE layers, so the scenarios count
``replicas x dp`` streams; the KV capacity per GPU is that of a ``tp``-way attention
rank (all KV heads on each GPU when ``tp`` = 1) next to the expert weights ``E f / (tp
dp)`` per GPU.

**The busiest attention-DP rank** (:mod:`dse.infer.attention_dp`, sources there).  The
all-gather / reduce-scatter of every MoE layer is a barrier, so an iteration runs at the
pace of the most loaded rank, and a new request's prompt runs whole on one rank
(TensorRT-LLM's request queue balances the running counts and sends new requests to the
ranks whose requests finished).  With ``dp`` > 1 the prompt work of a mixed iteration
is therefore not ``q S`` tokens on every rank: each rank runs ``X_r`` whole prompts
(mean q; the lattice count ``floor(q) + Bernoulli(f)`` under deterministic load, Poisson
with dataset-driven lengths), the busiest ``M = max_r X_r`` (exact order statistic), and

    t = sum_m P(M = m) t_iter(b, m S; MoE over dp b + S E[sum X | M = m])

-- the attention and dense layers at the busiest rank's ``b + m S`` tokens, the MoE
layers at the group's (``moe_tokens`` of :func:`dse.infer.forward.forward_ops`); an
``m = 0`` iteration is decode-only on every rank, a CUDA-graph replay where the engine
captures it (TensorRT-LLM replays a graph under attention DP only when every rank is
generation-only: ``CUDAGraphRunner`` all-gathers ``can_run_cuda_graph``).  Separate
prefill passes (engines that do not mix) take the busiest rank's prefill the same way.
``dp`` = 1 under deterministic load keeps the even spread ``q S`` per pass; the cohort
packing of :func:`prefill_share` (``bench_tuned_tokens``) is left as it is.

Units: seconds, tokens, bytes; GPU memory per :mod:`dse.infer.memory`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import numpy as np

from dse.graph.ops import KVRead
from dse.infer.attention_dp import RankCase, lattice_pmf, most_loaded_cases
from dse.infer.engines import EngineProfile, graph_kernel_s
from dse.infer.forward import (context_attention_rates, host_bound_s, prompt_attention_s,
                               stage_kernels, stage_time)
from dse.infer.kv_cache import kv_cache_bytes
from dse.infer.memory import (activation_workspace_bytes, engine_weight_bytes, kv_pool_from,
                              profiling_tokens)
from dse.infer.pipeline import pipelined_iteration_s
from dse.infer.prefill import prefill_attention
from dse.infer.workload import InferenceWorkload
from dse.spec.hardware import Hardware
from dse.spec.model import Model, decode_kv_geometry, is_mla
from dse.cost.rates import rates


class Deployment(NamedTuple):
    """One serving replica and its numerics: ``precision`` as :mod:`dse.spec.layout`
    (1 = 16-bit, 2 = fp8 weights and activations), ``kv_bytes`` per cached element."""
    model: Model
    hw: Hardware
    engine: EngineProfile
    tp: int
    pp: int
    precision: int
    kv_bytes: float
    ep: int = 1               # MoE experts split over ep GPUs of the stage's tp x dp group
    dp: int = 1               # attention data-parallel ranks per stage (MoE only)


def gpus_per_replica(dep: "Deployment") -> int:
    return dep.tp * dep.dp * dep.pp


def streams(dep: "Deployment", replicas: int) -> int:
    """Independent request streams (each with its own batch and KV cache): one per
    attention-DP rank of every replica."""
    return replicas * dep.dp


class ServingResult(NamedTuple):
    tokens_per_s: float        # output tokens/s of the whole system
    tokens_per_s_per_gpu: float
    ttft_s: float
    tpot_s: float
    e2e_s: float
    batch: float               # running sequences per replica
    note: str                  # "" or why the figure is a bound (saturation)


def _hw_for(dep: Deployment, graphs: bool) -> Hardware:
    launch = float(graph_kernel_s(dep.hw)) if graphs else float(dep.hw.kernel_launch_s)
    return dataclasses.replace(dep.hw, kernel_launch_s=launch)


@jax.jit
def _pass_s(model: Model, hw: Hardware, precision, tokens, sequences, attention, prompt_att,
            prompt_layers, tp, pp, ep, dp, host_op_s=0.0, linear_bw_scale=1.0, moe_tokens=None,
            quant_kernels=0.0, fp8_attn=0.0):
    """One stage pass of the operator graph (:func:`dse.infer.forward.stage_time`) over
    ``tokens`` tokens with the decode ``attention``, plus ``prompt_layers`` causal
    FlashAttention calls ``prompt_att`` of the prompt tokens; seconds.  ``moe_tokens``:
    the MoE group's tokens when the attention-DP ranks carry unequal loads (None: ``dp
    tokens``); ``quant_kernels``: the engine's (:func:`dse.infer.forward.memory_pass_kernels`).
    Compiled once (every argument is a pytree leaf or a scalar), so the
    scalar scenario code below costs a dispatch per pass instead of a few hundred eager
    JAX ops."""
    r = rates(hw, precision)
    r_att = context_attention_rates(r, precision, fp8_attn)
    t = stage_time(model, tokens, sequences, attention, tp, pp, precision, hw, r, ep, dp,
                   linear_bw_scale, moe_tokens, quant_kernels, r_att).total_s
    t = t + prompt_layers * prompt_attention_s(model, prompt_att, hw, r_att)
    kernels = stage_kernels(model, tokens, sequences, attention, tp, pp, precision,
                            r.act_bytes, ep, dp, prompt_layers, moe_tokens, quant_kernels)
    return host_bound_s(t, kernels, host_op_s)


def stage_micro_batches(dep: Deployment, decode_batch: float) -> float:
    """Micro-batches an iteration's ``decode_batch`` sequences run in over ``pp`` stages:
    ``max(min(b, pp), 1)`` (fewer than one sequence counts as one)."""
    b = float(decode_batch)
    return max(min(b if b >= 1 else 1.0, float(dep.pp)), 1.0)


def decode_attention(dep: Deployment, sequences: float, context: float) -> KVRead:
    """The decode attention core of one stage pass: ``sequences`` sequences reading their KV
    cache of ``context`` tokens over the GPU's ``a / tp`` query heads, once per shared KV
    head where the engine's kernel shares it (GQA / MQA, and MLA's latent cache), else
    once per query head."""
    m = dep.model
    heads = m.num_attention_heads / dep.tp
    g_dec, d_dec = decode_kv_geometry(m, dep.tp)         # MLA: the latent cache
    kv_read = g_dec if (dep.engine.gqa_shared_kv or is_mla(m)) else heads
    return KVRead(sequences, heads, kv_read, context, d_dec, kv_bytes=dep.kv_bytes)


def iteration_s(dep: Deployment, decode_batch: float, context: float, prompt_tokens: float = 0.0,
                prompt_len: float = 1.0, overhead: bool = True,
                group_prompt_tokens: float | None = None, one_micro: bool = False) -> float:
    """Seconds of one iteration: ``decode_batch`` sequences at mean KV length ``context``
    plus ``prompt_tokens`` prompt tokens of ``prompt_len``-token prompts (module
    docstring).  ``group_prompt_tokens``: with attention DP, the prompt tokens of all
    ``dp`` ranks when they differ from rank to rank (this rank, the busiest, runs
    ``prompt_tokens``; every rank ``decode_batch`` sequences; the MoE layers see
    ``dp decode_batch + group_prompt_tokens``, :mod:`dse.infer.attention_dp`); None =
    every rank alike.  ``one_micro``: with ``pp`` > 1 the prompt tokens ride one of the
    ``min(b, pp)`` micro-batches instead of being spread over them (a scheduler whose
    micro-batches are whole requests: the iteration is then that micro-batch's trip through
    the stages, what the prompt waits for); the group's prompt tokens then ride that
    micro-batch too (MoE: ``dp decode_batch / m + group_prompt_tokens``)."""
    m = dep.model
    b = float(decode_batch)
    p = float(prompt_tokens)
    graphs = dep.engine.graph_replay(b, p)
    hw = _hw_for(dep, graphs)
    micro = stage_micro_batches(dep, b)
    bs, ps = b / micro, (p if one_micro else p / micro)
    S = max(prompt_len, 1.0)
    seqs = bs + ps / S
    att = decode_attention(dep, bs, context)
    fa = prefill_attention(m, ps / S, S, dep.tp)
    layers = float(math.ceil(m.num_layers / dep.pp)) if p > 0 else 0.0
    if group_prompt_tokens is None:
        moe = None
    elif one_micro:
        moe = dep.dp * b / micro + group_prompt_tokens
    else:
        moe = (dep.dp * b + group_prompt_tokens) / micro
    t = float(_pass_s(m, hw, dep.precision, bs + ps, seqs, att, fa, layers, dep.tp, dep.pp,
                      dep.ep, dep.dp, 0.0 if graphs else dep.engine.eager_floor_s(dep.hw),
                      dep.engine.linear_bw_eff, moe, dep.engine.quant_kernels,
                      dep.engine.fp8_context_attn))
    if not overhead:
        return t * dep.pp
    # host time per pipeline stage pass (dse.infer.pipeline: serial with pp > 1)
    return pipelined_iteration_s(dep.engine, t, dep.pp, b, micro, dep.engine.host_scale(dep.hw))


def prefill_s(dep: Deployment, batch: float, prompt_len: float, overhead: bool = True,
              group_prompts: float | None = None) -> float:
    """Static prefill of ``batch`` prompts (pipelined in ``min(batch, pp)`` micro-batches:
    ``(m + pp - 1)`` stage passes, :mod:`dse.infer.prefill`).  ``group_prompts``: the
    prompts of all attention-DP ranks when they differ (this rank runs ``batch``); None =
    ``dp batch``."""
    m = dep.model
    hw = _hw_for(dep, False)
    micro = max(min(float(batch), float(dep.pp)), 1.0)
    b = batch / micro
    att = prefill_attention(m, b, prompt_len, dep.tp)
    moe = None if group_prompts is None else group_prompts * prompt_len / micro
    t = float(_pass_s(m, hw, dep.precision, b * prompt_len, b, att, att, 0.0, dep.tp, dep.pp,
                      dep.ep, dep.dp, dep.engine.eager_floor_s(dep.hw), dep.engine.linear_bw_eff,
                      moe, dep.engine.quant_kernels, dep.engine.fp8_context_attn))
    t = t * (micro + dep.pp - 1.0)
    return dep.engine.with_host_s(t, 0.0, dep.engine.host_scale(dep.hw)) if overhead else t


def kv_bytes_per_token(dep: Deployment) -> float:
    """KV bytes one token holds on one GPU of the heaviest stage:
    :func:`dse.infer.kv_cache.kv_cache_bytes` of one sequence of one token (``2 ceil(L/pp)
    g_t d el``; MLA ``ceil(L/pp) (r + rho) el``)."""
    return float(kv_cache_bytes(dep.model, 1.0, 1.0, dep.tp, dep.pp, dep.kv_bytes))


def weights_bytes(dep: Deployment) -> float:
    """Weight bytes per GPU as the deployment's engine holds them
    (:func:`dse.infer.memory.engine_weight_bytes`)."""
    r = rates(dep.hw, dep.precision)
    return float(engine_weight_bytes(dep.model, dep.tp, dep.pp, r, dep.precision, dep.ep, dep.dp,
                                     dep.engine))


def kv_pool_bytes(dep: Deployment, prompt_len: float) -> float:
    """Bytes of the KV pool on one GPU (module docstring; :func:`dse.infer.memory.kv_pool_from`
    after the activation peak of :func:`dse.infer.memory.profiling_tokens`)."""
    r = rates(dep.hw, dep.precision)
    wl = InferenceWorkload(batch=1, prompt_len=profiling_tokens(dep.engine, prompt_len), gen_len=1,
                           precision=dep.precision)
    acts = float(activation_workspace_bytes(dep.model, wl, dep.tp, dep.pp, r.act_bytes))
    return float(kv_pool_from(dep.engine, float(dep.hw.hbm_bytes), weights_bytes(dep), acts))


def resident_output(output_len: float, o2: float = 1.0) -> float:
    """Output tokens a running request holds, averaged over the time it is resident:
    ``E[O^2] / E[O] = o2 E[O]`` (module docstring, "Length spread"); ``o2`` = 1 for
    fixed lengths."""
    return output_len * o2


def kv_slots(dep: Deployment, prompt_len: float, output_len: float, o2: float = 1.0,
             final: bool = False) -> float:
    """Sequences the KV pool holds (module docstring); <= 0 when the weights do not fit.
    ``final``: at every sequence's final footprint ``S + O`` whatever the engine's
    admission (requests in lockstep all reach it together, :mod:`dse.infer.lockstep`)."""
    o_res = resident_output(output_len, o2)
    held = prompt_len + (o_res if (dep.engine.reserve_final_kv or final) else o_res / 2.0)
    blk = dep.engine.block_tokens
    held = math.ceil(held / blk) * blk
    pool = kv_pool_bytes(dep, prompt_len)
    per_seq = float(kv_cache_bytes(dep.model, 1.0, held, dep.tp, dep.pp, dep.kv_bytes))  # windows
    return math.floor(pool / per_seq) if pool > 0 else 0.0


def running_batch(dep: Deployment, prompt_len: float, output_len: float, o2: float = 1.0) -> float:
    """Continuous batching's running sequences: slots, engine cap, token budget."""
    slots = kv_slots(dep, prompt_len, output_len, o2)
    budget = dep.engine.max_num_tokens / (1.0 + prompt_len / max(output_len, 1.0))
    return max(min(slots, dep.engine.max_batch, max(budget, 1.0)), 0.0)


class PrefillShare(NamedTuple):
    """How a mixing engine's prompt work is laid over its iterations (:func:`prefill_share`)."""
    share: float            # p: fraction of iterations that carry prompt tokens, in [0, 1]
    tokens: float           # prompt tokens of one such mixed pass


def prefill_share(dep: Deployment, batch: float, prompts: float, S: float) -> PrefillShare:
    """Share ``p`` of the iterations that carry prefill work, and the prompt tokens of each
    such pass, for ``batch`` running sequences and ``q = prompts`` new S-token prompts per
    iteration on an engine that mixes prompts into decode iterations.

    The engine does not spread ``q S`` prompt tokens over every iteration: its micro-batch
    scheduler, each iteration, first takes the generation requests, then *every* waiting
    context request that still fits the token budget (``max_num_tokens``), whole when
    context chunking is off -- TensorRT-LLM ``MicroBatchScheduler::operator()``
    (``cpp/tensorrt_llm/batch_manager/microBatchScheduler.cpp``: "Select the generation
    phase requests ... If there is any remaining space, include the context requests";
    without ``mCtxChunkConfig`` a context request that would exceed ``maxNumTokensRuntime``
    ends the loop), which the PyTorch executor calls through ``BindMicroBatchScheduler``
    (``tensorrt_llm/_torch/pyexecutor/scheduler.py``).  So the prompts that wait together
    enter together: with fixed lengths, requests admitted in one pass finish in one pass O
    iterations later and their successors again enter together, and a mixed pass carries
    ``k = min(B, max(1, floor((max_num_tokens - B) / S)))`` prompts (chunked prefill: up to
    ``max_num_tokens - B`` prompt tokens, split across passes).  Its prompt tokens are
    ``w = max(k S, q S)`` (at least the mean load: the running batch is already capped so
    that ``B (1 + S/O) <= max_num_tokens``, :func:`running_batch`), and the share of
    iterations holding one is ``p = q S / w`` in [0, 1], -> 0 as O grows (q = B / O).  The
    other ``1 - p`` iterations are generation-only, and only those are CUDA-graph replays
    (``ScheduledRequests.can_run_cuda_graph``: ``not self.context_requests``, same file)."""
    u = max(float(prompts), 0.0) * S
    if u <= 0.0:
        return PrefillShare(0.0, 0.0)
    if not dep.engine.bench_tuned_tokens:
        if dep.engine.whole_prompts:
            # each waiting prompt enters one pass whole, up to the budget the decodes
            # leave (vLLM V1, TensorRT-LLM 1.x; EngineProfile.whole_prompts): share q of the passes
            room = max(float(dep.engine.max_num_tokens) - batch, 1.0)
            w = max(u, min(float(S), room))
            return PrefillShare(u / w, w)
        # no fixed-length cohorts known (MLPerf harnesses, dataset-driven lengths: the
        # completions, hence the admissions, are spread over the iterations): the mean
        # load in every pass, as before
        return PrefillShare(1.0, u)
    room = max(float(dep.engine.max_num_tokens) - batch, 0.0)
    if dep.engine.chunked_prefill:
        w = min(room, max(batch, 1.0) * S)
    else:
        w = min(max(batch, 1.0), max(1.0, math.floor(room / S))) * S
    w = max(w, u)
    return PrefillShare(u / w, w)


def _mixed_passes(dep: Deployment, batch: float, context: float, prompts: float,
                  S: float) -> tuple[float, float]:
    """(mean iteration, the mixed pass) of a mixing engine under deterministic load:
    ``p t_iter(B, w) + (1 - p) t_iter(B, 0)`` with ``p``, ``w`` of :func:`prefill_share`
    -- the prompt tokens concentrated in the share p of mixed (eager, where the engine's
    graphs capture only generation-only batches) passes, the rest decode-only passes."""
    if dep.dp > 1 and prompts > 0 and not dep.engine.bench_tuned_tokens:
        return _rank_mean(dep, batch, context, rank_cases(dep, prompts, False), S)
    sh = prefill_share(dep, batch, prompts, S)
    if sh.share <= 0.0:
        t = iteration_s(dep, batch, context)
        return t, t
    t_mix = iteration_s(dep, batch, context, sh.tokens, S)
    first = _prompt_pass(dep, batch, context, t_mix, min(sh.tokens, S), S)
    if sh.share >= 1.0:
        return t_mix, first
    t_dec = iteration_s(dep, batch, context)
    return sh.share * t_mix + (1.0 - sh.share) * t_dec, first


def _prompt_pass(dep: Deployment, batch: float, context: float, t: float, tokens: float, S: float,
                 group_prompt_tokens: float | None = None) -> float:
    """The pass a new prompt rides, given the mixed pass ``t`` that carries it.  On an
    engine whose micro-batches are whole requests (``whole_prompts``: TensorRT-LLM's
    ``MicroBatchScheduler``, vLLM V1's) with ``pp`` > 1, the prompt's ``tokens`` ride one
    micro-batch, whose trip through the stages is what its first token waits for:
    ``max(t, iteration_s(..., one_micro=True))``; else ``t``."""
    if not (dep.engine.whole_prompts and dep.pp > 1):
        return t
    return max(t, iteration_s(dep, batch, context, tokens, S, one_micro=True,
                              group_prompt_tokens=group_prompt_tokens))


def _cycle(dep: Deployment, batch: float, context: float, prompts: float, S: float) -> float:
    """One decode iteration of ``batch`` sequences plus the prefill of ``prompts`` new
    prompts (a mean, may be fractional): in mixed passes where the engine mixes them
    (:func:`_mixed_passes`: a share p of the iterations carries them, :func:`prefill_share`),
    else as separate prefill passes (decode stalls meanwhile).  Separate passes: with
    ``q = prompts`` >= 1 one pass batches the q prompts, ``t_prefill(q)``; with q < 1 a
    pass of one prompt runs in a share q of the iterations, ``q t_prefill(1)`` -- each
    pass reads every weight once, so a fraction of a prompt does not cost a fraction of
    a weight read.  Together: ``min(q, 1) t_prefill(max(q, 1))``."""
    if dep.engine.mixed_batches or prompts <= 0:
        return _mixed_passes(dep, batch, context, prompts, S)[0]
    if dep.dp > 1:
        return _rank_mean(dep, batch, context, rank_cases(dep, prompts, False), S)[0]
    return iteration_s(dep, batch, context) + min(prompts, 1.0) * prefill_s(dep, max(prompts, 1.0), S)


def rank_cases(dep: Deployment, prompts: float, spread: bool) -> list[RankCase]:
    """The busiest attention-DP rank's new-prompt count per iteration and the group's
    (:func:`dse.infer.attention_dp.most_loaded_cases`), each rank's count of mean
    ``prompts`` being Poisson (``spread``, :func:`poisson_counts`) or the evenly spaced
    lattice count (:func:`dse.infer.attention_dp.lattice_pmf`)."""
    pmf = poisson_counts(prompts) if spread else lattice_pmf(prompts)
    return most_loaded_cases(pmf, dep.dp)


def _rank_mean(dep: Deployment, batch: float, context: float, cases: list[RankCase],
               S: float) -> tuple[float, float]:
    """(mean iteration, the pass carrying a given prompt) over the busiest rank's cases
    (:mod:`dse.infer.attention_dp`): ``sum_m P(m) t(m)`` with ``t(m)`` the iteration
    whose busiest rank runs ``m`` whole prompts beside its ``batch`` decodes and whose MoE
    layers carry the group's ``E[sum X | m]`` prompts -- mixing engines in one pass
    (an ``m = 0`` pass is decode-only on every rank: a graph replay where captured),
    the others as the decode iteration plus a prefill pass of the m prompts.  The
    carrying pass is size-biased by the group's prompts, ``sum P g t / sum P g``.  At
    ``dp`` = 1 with a Poisson law this is the prompt-count average of :func:`cycle`.  An
    engine whose passes take whole prompts (``whole_prompts``) with ``pp`` > 1 carries a
    prompt in one micro-batch, as :func:`_mixed_passes`: the carrying pass is at least that
    micro-batch's trip with the prompt's S tokens, the group's prompts beside it in the
    busiest rank's proportion (``g S / m``)."""
    mixed = dep.engine.mixed_batches
    t_dec = None if mixed else iteration_s(dep, batch, context)
    mean = carried = load = 0.0
    for c in cases:
        if mixed:
            group = None if dep.dp <= 1 else c.group_prompts * S
            t_n = iteration_s(dep, batch, context, c.max_prompts * S, S, group_prompt_tokens=group)
            c_n = t_n if c.max_prompts <= 0 else _prompt_pass(
                dep, batch, context, t_n, S, S, None if group is None else group / c.max_prompts)
        else:
            c_n = (prefill_s(dep, c.max_prompts, S,
                             group_prompts=None if dep.dp <= 1 else c.group_prompts)
                   if c.max_prompts else 0.0)
            t_n = t_dec + c_n
        mean += c.prob * t_n
        carried += c.prob * c.group_prompts * c_n
        load += c.prob * c.group_prompts
    return mean, (carried / load if load > 0 else mean)


POISSON_TAIL = 1e-4      # probability mass of new-prompt counts left out of the sum


def poisson_counts(q: float) -> list[tuple[int, float]]:
    """``(n, P(n))`` of n ~ Poisson(q), n = 0, 1, ... until all but ``POISSON_TAIL`` of
    the mass is listed (renormalised)."""
    out, p, n, acc = [], math.exp(-q), 0, 0.0
    while True:
        out.append((n, p))
        acc += p
        if acc >= 1.0 - POISSON_TAIL or n > q + 12.0 * math.sqrt(q) + 12.0:
            break
        n += 1
        p *= q / n
    return [(k, w / acc) for k, w in out]


class Cycle(NamedTuple):
    """Iteration times of continuous batching, seconds."""
    mean_s: float       # mean iteration (what TPOT averages and throughput divides by)
    first_s: float      # the pass that carries a given new prompt, from its admission


def cycle(dep: Deployment, batch: float, context: float, prompts: float, S: float,
          spread: bool) -> Cycle:
    """Mean iteration time with ``prompts`` new prompts per iteration on average.

    ``spread`` False: a deterministic ``prompts`` per iteration (:func:`_cycle`;
    fixed-length runs, whose requests start and finish in cohorts: on mixing engines the
    cohort's prompts share one mixed pass, :func:`prefill_share`, and ``first_s`` is
    that pass).  ``spread`` True:
    the count n is Poisson(``prompts``) -- exact for open-loop Poisson arrivals over an
    iteration, and the limit for completions of many requests with dataset-driven output
    lengths (a superposition of independent renewal processes tends to Poisson:
    Palm-Khintchine theorem, Cinlar 1972).  The mean is then ``sum_n P(n) t(n)`` with
    ``t(n)`` the iteration with n prompts (mixed) or the decode iteration plus a prefill
    pass of n prompts (separate passes): it is smooth in the mean load, where a single
    ``t(mean)`` carries the step of every GEMM tile / wave boundary (a batch just under
    a boundary would look free).  The pass carrying a given prompt is size-biased:
    ``sum_n n P(n) t(n) / q`` (the iteration for mixing engines, the prefill pass
    otherwise)."""
    if not spread or prompts <= 0:
        if dep.engine.mixed_batches:
            return Cycle(*_mixed_passes(dep, batch, context, prompts, S))
        if dep.dp > 1 and prompts > 0:
            return Cycle(*_rank_mean(dep, batch, context, rank_cases(dep, prompts, False), S))
        return Cycle(_cycle(dep, batch, context, prompts, S),
                     prefill_s(dep, max(prompts, 1.0), S))
    return Cycle(*_rank_mean(dep, batch, context, rank_cases(dep, prompts, True), S))


#: Gauss-Hermite rule (probabilists', weight exp(-x^2/2)) with 5 nodes, normalised to a
#: probability: ``E f(X) ~ sum w_k f(x_k)`` for X ~ N(0, 1), exact for polynomials of
#: degree <= 9 (Abramowitz & Stegun 25.4.46; ``numpy.polynomial.hermite_e.hermegauss(5)``).
_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(5)
BATCH_NODES = tuple(zip(_GH_X.tolist(), (_GH_W / _GH_W.sum()).tolist()))


def open_loop_cycle(dep: Deployment, mean_batch: float, context: float, prompts: float,
                    S: float, spread: bool, cap: float = math.inf) -> Cycle:
    """:func:`cycle` averaged over the running batch of an open-loop server.

    Under Poisson arrivals continuous batching below its cap is an infinite-server
    system: every admitted request advances one token per iteration whatever else runs,
    so a request's stay does not wait on the others'.  The number of requests in an
    M/G/inf system is Poisson with mean ``lambda E[stay]`` whatever the stay's
    distribution (the M/G/inf queue: Takacs 1962, "Introduction to the Theory of Queues";
    Kleinrock 1975, "Queueing Systems" vol. 1), so the batch an iteration
    sees is ``b ~ Poisson(B)``, ``B = mean_batch`` (Little's law,
    :func:`poisson`), not the constant B.  The mean iteration is ``E_b t(b)``, evaluated
    on the normal limit ``N(B, B)`` of that Poisson law by the 5-node rule
    :data:`BATCH_NODES` at ``b_k = clip(B + sqrt(B) x_k, 1, cap)`` (the engine never runs
    more than its cap).  Where ``t`` is linear in b this is ``t(B)``; across a GEMM tile
    or wave boundary, or the CUDA-graph capture limit, it is the smooth mean the server
    really sees instead of the step at B (the companion of the prompt-count average of
    :func:`cycle`).  ``spread`` False (deterministic load) or B < 1: :func:`cycle` at B."""
    if not spread or mean_batch < 1.0:
        return cycle(dep, mean_batch, context, prompts, S, spread)
    sd = math.sqrt(mean_batch)
    mean = first = 0.0
    for x, w in BATCH_NODES:
        b = min(max(mean_batch + sd * x, 1.0), max(cap, 1.0))
        c = cycle(dep, b, context, prompts, S, spread)
        mean += w * c.mean_s
        first += w * c.first_s
    return Cycle(mean, first)


MD1_MAX_UTILIZATION = 0.99   # keeps the Pollaczek-Khinchine wait finite at saturation


def md1_wait_s(rho, service_s):
    """Mean wait in an M/D/1 queue (Poisson arrivals, one server, a deterministic service
    time ``service_s`` at utilization ``rho``), the Pollaczek-Khinchine formula
    ``W = rho s / (2 (1 - rho))`` (Kleinrock, *Queueing Systems* vol. 1, 1975, eq. 5.76
    with ``E[S^2] = s^2``); ``rho`` is capped at ``MD1_MAX_UTILIZATION``."""
    rho = min(max(rho, 0.0), MD1_MAX_UTILIZATION)
    return rho * service_s / (2.0 * (1.0 - rho))


def first_token_s(dep: Deployment, c: Cycle) -> float:
    """Time to first token without queueing for the prefill itself: the new request waits
    :meth:`~dse.infer.engines.EngineProfile.scheduling_wait` mean iterations (half the
    running scheduling pass and, on an engine that schedules one iteration ahead, the
    iteration already submitted), then its prompt runs (``c.first_s``) -- inside one
    iteration where the engine mixes prompts into decode iterations (TensorRT-LLM in-flight
    batching; deterministic load: ``(scheduling_wait + 1) t_iter``), else in a prefill pass
    of its own that batches the prompts waiting together (vLLM 0.6 / SGLang 0.3 run prefill batches apart from
    decode, :func:`_cycle`).  Plus the engine's HTTP front end, which a client's TTFT
    includes (``frontend_s``, :mod:`dse.infer.engines` "Front end"; 0 but on vLLM V1's
    OpenAI server)."""
    return dep.engine.scheduling_wait(dep.pp) * c.mean_s + c.first_s + dep.engine.frontend_s


def _steady(dep: Deployment, batch: float, S: float, O: float, spread: bool = False,
            o2: float = 1.0) -> Cycle:
    """Iteration times of continuous batching with ``batch`` running and B / O new prompts
    per iteration (mean context ``S + o2 O / 2``)."""
    return cycle(bench_tuned(dep, S, O), batch, S + resident_output(O, o2) / 2.0,
                 batch / max(O, 1.0), S, spread)


def bench_max_num_tokens(dep: Deployment, S: float, O: float) -> float:
    """The per-iteration token budget ``trtllm-bench`` builds for a dataset of S-token
    prompts and O-token outputs (``tensorrt_llm/bench/build/tuning.py``,
    ``finetune_setting``): ``raw_bs = min(KV requests at S + O, 4096) / pp``, ``raw =
    min(raw_bs (1 + S/O), 32768)``, rounded up to 256 (at least 2048) below 4096 tokens,
    to 512 below 8192, else to 1024.  KV requests: :func:`kv_slots` at the final
    footprint.  Never above the profile's (or the row's stated) ``max_num_tokens``."""
    kv = max(kv_slots(dep, S, O, final=True), 1.0)
    raw_bs = min(kv, 4096.0) / dep.pp
    raw = min(raw_bs * (1.0 + S / max(O, 1.0)), 32768.0)
    if raw < 4096:
        tok = max(2048.0, 256.0 * math.ceil(raw / 256.0))
    elif raw < 8192:
        tok = 512.0 * math.ceil(raw / 512.0)
    else:
        tok = 1024.0 * math.ceil(raw / 1024.0)
    return min(tok, float(dep.engine.max_num_tokens))


def bench_tuned(dep: Deployment, S: float, O: float) -> Deployment:
    """``dep`` with the token budget ``trtllm-bench`` sets (:func:`bench_max_num_tokens`)
    where the engine profile is tuned that way (``bench_tuned_tokens``), else ``dep``."""
    if not dep.engine.bench_tuned_tokens:
        return dep
    eng = dataclasses.replace(dep.engine, max_num_tokens=int(bench_max_num_tokens(dep, S, O)))
    return dep._replace(engine=eng)


def tuned_batch(dep: Deployment, S: float, O: float, spread: bool = False,
                o2: float = 1.0) -> float:
    """The running-batch limit a tuned deployment sets (its ``max_batch_size`` /
    ``max_num_seqs``): the best steady-state throughput among the KV/engine limit and
    the powers of two within a factor 8 below it (a batch just above a tile boundary
    can be slower per token than the power of two below it: GEMM wave quantization)."""
    cap = running_batch(dep, S, O, o2)
    if cap < 1:
        return cap
    cands = {cap} | {2.0 ** k for k in range(int(math.log2(cap)) + 1) if 2.0 ** k >= cap / 8}
    return max(cands, key=lambda b: b / _steady(dep, b, S, O, spread, o2).mean_s)


def fixed_batch(dep: Deployment, batch: float, S: float, O: float, replicas: int) -> ServingResult:
    """``batch`` sequences per replica (``batch / dp`` on each attention-DP rank)."""
    gpus = gpus_per_replica(dep) * replicas
    b = batch / dep.dp
    ttft = prefill_s(dep, b, S) + dep.engine.request_overhead_s
    tpot = iteration_s(dep, b, S + O / 2.0) if O > 1 else 0.0
    e2e = ttft + (O - 1.0) * tpot
    tps = b * O / e2e * streams(dep, replicas)
    return ServingResult(tps, tps / gpus, ttft, tpot, e2e, batch, "")


def offline(dep: Deployment, S: float, O: float, replicas: int,
            spread: bool = False, o2: float = 1.0) -> ServingResult:
    """All requests queued; ``spread``: dataset-driven lengths (:func:`cycle`); ``o2``:
    the output lengths' ``E[O^2] / E[O]^2`` (:func:`resident_output`)."""
    gpus = gpus_per_replica(dep) * replicas
    B = tuned_batch(dep, S, O, spread, o2)
    if B < 1:
        return ServingResult(math.nan, math.nan, math.nan, math.nan, math.nan, 0.0,
                             "infeasible: the weights leave no KV cache for one sequence")
    c = _steady(dep, B, S, O, spread, o2)
    tps = B / c.mean_s * streams(dep, replicas)
    ttft = first_token_s(dep, c)
    return ServingResult(tps, tps / gpus, ttft, c.mean_s, ttft + (O - 1) * c.mean_s, B, "")


def concurrency(dep: Deployment, n: float, S: float, O: float, replicas: int,
                spread: bool = False, o2: float = 1.0) -> ServingResult:
    """Closed loop, ``n`` requests in flight; ``spread``, ``o2`` as :func:`offline`.

    ``B = min(n / units, slots)`` run; above the slots the other ``n / units - B`` wait
    in the server's queue.  A closed loop completes ``B`` requests every service time
    ``e2e_run`` per unit, so by Little's law (Little 1961) each request spends
    ``(n / units) e2e_run / B`` in the system: the queue wait ``(n / (units B) - 1)
    e2e_run`` lands in TTFT and e2e (a benchmark client times from its send), tokens/s
    stays ``B O / e2e_run`` per unit -- as the sweep's
    :func:`dse.infer.continuous.queued_point`.  Fewer requests than units (``n / units``
    < 1): ``n`` units run one request each, the rest idle, tokens/s ``n O / e2e_run``
    (as :func:`dse.infer.lockstep.lockstep_concurrency`)."""
    gpus = gpus_per_replica(dep) * replicas
    slots = tuned_batch(dep, S, O, spread, o2)
    units = streams(dep, replicas)
    if slots < 1:
        return ServingResult(math.nan, math.nan, math.nan, math.nan, math.nan, 0.0,
                             "infeasible: the weights leave no KV cache for one sequence")
    N = n / units                              # requests in flight per unit
    B = max(min(N, slots), 1.0)                # a busy unit runs at least one
    c = _steady(dep, B, S, O, spread, o2)
    run_ttft = first_token_s(dep, c)
    run_e2e = run_ttft + (O - 1) * c.mean_s
    wait = max(N / B - 1.0, 0.0) * run_e2e
    ttft = wait + run_ttft
    e2e = wait + run_e2e
    tps = min(N, B) * O / run_e2e * units
    return ServingResult(tps, tps / gpus, ttft, c.mean_s, e2e, B,
                         "" if N <= slots else "queued: concurrency above the KV slots")


def poisson(dep: Deployment, rate: float, S: float, O: float, replicas: int,
            spread: bool = True, o2: float = 1.0) -> ServingResult:
    """Open-loop Poisson arrivals: the fixed point ``t = E t_iter(B = lam (O-1) t, lam t
    prompts)`` (module docstring) found by bisection on ``t`` between the empty-server
    iteration and the one at the tuned running-batch limit (:func:`tuned_batch`); no
    root below that cap = saturated."""
    gpus = gpus_per_replica(dep) * replicas
    lam = rate / streams(dep, replicas)
    cap = tuned_batch(dep, S, O, o2=o2)    # the running-batch limit the deployment sets
    if cap < 1:
        return ServingResult(math.nan, math.nan, math.nan, math.nan, math.nan, 0.0,
                             "infeasible: the weights leave no KV cache for one sequence")
    ctx = S + resident_output(O, o2) / 2.0

    def excess(t):                     # E t_iter at the load t implies, minus t
        c = open_loop_cycle(dep, max(lam * (O - 1.0) * t, 1.0), ctx, lam * t, S, spread, cap)
        return c.mean_s - t, c

    lo = iteration_s(dep, 1.0, ctx)
    hi = cap / (lam * max(O - 1.0, 1.0))
    if hi <= lo or excess(hi)[0] > 0.0:
        # past capacity: the offline steady state (its tuned batch, deterministic
        # admission from a full queue) is what such a server delivers
        off = offline(dep, S, O, replicas, o2=o2)
        return off._replace(note="saturated: arrival rate above the offline capacity")
    for _ in range(50):
        mid = math.sqrt(lo * hi)
        if excess(mid)[0] > 0.0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-4 * hi:
            break
    t = hi
    c = excess(t)[1]
    t_pf = prefill_s(dep, 1.0, S, overhead=False)
    ttft = first_token_s(dep, c) + md1_wait_s(lam * t_pf, t_pf)
    e2e = ttft + (O - 1.0) * c.mean_s
    tps = rate * O
    return ServingResult(tps, tps / gpus, ttft, c.mean_s, e2e, lam * (O - 1.0) * c.mean_s, "")
