"""Continuous (in-flight) batching, vectorized: the closed-loop ``concurrency`` scenario of
:mod:`dse.infer.serving` as pure JAX functions of one design point, for ``jit(vmap)``
over the serving grid (:mod:`dse.infer.sweep`, ``--batching continuous``).

The equations are those of :mod:`dse.infer.serving` (its docstring has the sources),
written on traced leaves instead of Python floats, with the engine profile
(:class:`dse.infer.engines.EngineProfile`, static) choosing the branches; the engine
constants are the global ones of :mod:`dse.infer.engines` (``GRAPH_LAUNCH_S``, host time
per iteration, batch and token limits, KV pool policy), none new here.

Per replica of ``tp x pp`` GPUs, prompt ``S``, output ``O`` tokens, ``N`` requests in
flight (closed loop: a finished request is replaced at once):

* **KV capacity** (:func:`slots`): the engine's KV pool (``mem_fraction`` of HBM, of the
  memory left after weights on TensorRT-LLM, minus weights x (1 + fragmentation), the
  allocator reserve and the activation workspace of one ``min(max_num_tokens, S)``-token
  prefill chunk, or of ``max_num_tokens`` tokens where the engine sizes its pool after a
  profiling forward of its whole token budget, ``profile_at_budget``: vLLM) over the paged footprint of one request, ``ceil(held / block) block``
  tokens of ``2 ceil(L/pp) g_t d`` elements (MLA: ``ceil(L/pp) (r + rho)``) at ``kv_bytes``;
  ``held = S + O`` where
  admission reserves the final footprint, ``S + O/2`` otherwise.  The running-batch cap is
  ``min(slots, max_batch, max(max_num_tokens / (1 + S/O), 1))`` (the iteration token
  budget: B decode tokens + B S / O prompt tokens), and the tuned limit ``B*`` is the best
  steady-state throughput among the cap and the powers of two within a factor 8 below it
  (:func:`dse.infer.serving.tuned_batch`, evaluated on all five candidates at once).
* **Admitted batch** ``B = min(N, B*)``; the other ``N - B`` requests wait for a slot.
* **Steady-state iteration** (:func:`steady_iteration_s`): B sequences decode at mean
  context ``S + O/2``; each finishes after O iterations, so ``B / O`` prompts (``B S / O``
  prompt tokens) enter per iteration.  Mixing engines (TensorRT-LLM in-flight batching)
  run them in the same pass, ``t = pp t_stage((B + p)/m) + prefill attention + host``;
  the others (vLLM 0.6, SGLang 0.3) run a separate prefill pass in a share
  ``min(q, 1)`` of the iterations, ``t = t_decode(B) + min(q, 1) t_prefill(max(q, 1))``.
  Decode-only passes up to the engine's captured batch launch as CUDA graphs
  (:func:`dse.infer.engines.graph_kernel_s` per kernel), everything else at the hardware's launch cost, and
  an eager pass takes at least the engine's host issue time, ``eager_op_s`` per kernel
  (:func:`dse.infer.forward.host_bound_s`).  The host time of a pass is
  :meth:`dse.infer.engines.EngineProfile.with_host_s`: serial (``t + host``) or, with an
  overlap scheduler (TensorRT-LLM >= 1.0 PyTorch executor), ``max(t, host)``.  Where the
  engine packs a cohort's prompts into one pass (``bench_tuned_tokens``: trtllm-bench's
  token budget, :func:`bench_max_num_tokens`), the prompt tokens ride a share ``p`` of
  mixed passes and the rest are decode-only graph replays, ``p t_mix + (1 - p) t_dec``
  (:func:`prefill_share`, :func:`cycle`; the scalar twin is
  :func:`dse.infer.serving.prefill_share`).
  TPOT = t.
* **Time to first token** (:func:`first_token_s`): the wait for a KV slot (closed loop,
  Little's law: ``N`` requests cycle through ``B`` slots each held for ``e2e_run``, so a
  request spends ``N e2e_run / B`` in the system, ``(N / B - 1) e2e_run`` of it queued;
  0 when ``N <= B*``) plus half the running scheduling pass and the prompt's prefill:
  on a mixing engine the prompt's ``ceil(S / chunk)`` chunks, one per iteration
  (``chunk = max_num_tokens`` where the engine chunks prompts, the whole prompt otherwise:
  ``(steps/2 + chunks) t``), else ``steps/2 t + t_prefill(max(q, 1))``.  On an engine
  whose passes take whole prompts (``whole_prompts``) with ``pp`` > 1, the pass a prompt
  rides is at least its micro-batch's trip through the stages with the prompt's tokens
  all in it (``iteration_s(..., one_micro=True)``), not the mixed pass that spreads them
  over the micro-batches.
* e2e = TTFT + (O - 1) TPOT; tokens/s per replica = ``B O / e2e_run`` (the queue does not
  change the service rate).

Where ``N <= B*`` and the prompt fits one chunk this is exactly
:func:`dse.infer.serving.concurrency` with one replica, to float32 rounding, for every
engine profile (tests/infer/test_continuous.py compares them, the host-overlap and
prefill-share profile included); beyond ``B*`` the scalar model reports the served rate without the queue
wait, this one adds it.  Expert parallelism and attention DP (``Replica.ep`` / ``dp``,
:mod:`dse.infer.sweep` layouts): with ``dp`` > 1 the prompts of an iteration are whole
requests on one rank each and the iteration runs at the busiest rank's pace
(:mod:`dse.infer.attention_dp`; here its two lattice cases in closed form,
:func:`_rank_lattice`, :func:`_rank_lattice_separate`, equal to the enumeration of
:func:`dse.infer.serving._rank_mean`).  Units: seconds, tokens, bytes.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from dse.graph.ops import KVRead
from dse.errors import InputError
from dse.infer.engines import (LMDEPLOY_NAMES, PROFILES, UNKNOWN_ENGINE, EngineProfile, graph_kernel_s,
                               engine_profile, launch_defaults)
from dse.infer.launch_flags import launch_settings
from dse.infer.forward import (context_attention_rates, host_bound_s, prompt_attention_s,
                               stage_kernels, stage_time)
from dse.infer.memory import (activation_workspace_bytes, engine_weight_bytes, kv_pool_from,
                              profiling_tokens)
from dse.infer.pipeline import pipelined_iteration_s
from dse.infer.kv_cache import kv_cache_bytes
from dse.infer.prefill import prefill_attention
from dse.infer.workload import InferenceWorkload
from dse.spec.hardware import Hardware
from dse.spec.model import Model, decode_kv_geometry, is_mla, select
from dse.train.memory import FRAGMENTATION, RESERVE_BYTES
from dse.cost.rates import rates

CANDIDATES = 5          # the cap and up to four powers of two within a factor 8 below it

#: engine profiles that run only on NVIDIA GPUs: TensorRT-LLM (and NeMo on its backend) is
#: a CUDA library (TensorRT-LLM README, "supported hardware": NVIDIA GPUs); vLLM and
#: SGLang ship ROCm builds for AMD Instinct GPUs (vLLM docs "Installation with ROCm",
#: SGLang docs "AMD GPUs"), so they serve on both.
#: TensorRT-LLM (C++ and PyTorch backends) and NeMo's TRT-LLM export run on NVIDIA GPUs only
NVIDIA_ONLY = ("trtllm", "trtllm_mlperf", "trtllm_static", "trtllm_pytorch",
               "trtllm_pytorch_eager", "nemo", *LMDEPLOY_NAMES)


def is_amd(hw: Hardware) -> bool:
    return str(hw.generation).startswith("cdna")


def default_engine(hw: Hardware) -> str:
    """The engine a deployment on ``hw`` would use by default: TensorRT-LLM on NVIDIA,
    vLLM on AMD (TensorRT-LLM does not run there)."""
    return "vllm" if is_amd(hw) else "trtllm"


def resolve_engine(text, where: str, field: str = "engine"):
    """The profile an engine setting names: a profile name (``PROFILES``) as it is, or an
    engine text with its release -- ``"vllm 0.14.1"``, ``"sglang (0.3.0)"``,
    ``"trtllm 1.0 pytorch"``, ``"vllm 0.11 --async-scheduling"`` -- routed as a ``dse
    predict`` row's engine column is (:func:`dse.infer.engines.engine_profile`: V0 / V1,
    async scheduling, the overlap scheduler by release).  An unknown engine is returned as
    it is, for :func:`engine_rule` to refuse; a text the routing refuses (a flag its release
    lacks, a known engine whose release or backend has no profile: TGI before 2.0,
    LMDeploy's PyTorch engine, a serving product naming no engine) raises
    :class:`InputError` at ``where`` / ``field`` with the routing's reason."""
    if not isinstance(text, str) or not text.strip():
        return text
    if text.strip() in PROFILES:
        return text.strip()
    try:
        eng, why = engine_profile(text)
    except InputError as e:
        raise InputError(where, field, e.rule) from None
    if why and UNKNOWN_ENGINE not in why:           # a known engine, a release it lacks
        raise InputError(where, field, why)
    return text if why else eng.name


def checked_engine(text, hw: Hardware, where: str, field: str = "engine") -> str:
    """The profile name an engine setting resolves to (:func:`resolve_engine`), checked
    against ``hw`` (:func:`engine_rule`); :class:`InputError` at ``where`` / ``field``
    naming the rule it breaks."""
    name = resolve_engine(text, where, field)
    why = engine_rule(name, hw)
    if why:
        raise InputError(where, field, why)
    return name


def launched_engine(text, hw: Hardware, model=None, where: str = "sweep_inference",
                    field: str = "engine") -> EngineProfile:
    """The profile an engine setting runs with on ``hw`` (checked, :func:`checked_engine`):
    a bare profile name (``"sglang_overlap"``) as the profile has it; an engine text with
    its release (``"sglang 0.5.3"``, ``"tgi 3.3"``, ``"lmdeploy 0.10"``) with the launch
    limits that release takes from the GPU and the model, as a ``dse predict`` row's
    (:func:`dse.infer.engines.launch_defaults`; the limits that follow the TP size take
    their TP-free default: SGLang's profile fraction, TGI's budget at TP 1), then the launch
    flags the text states, as a row's (:func:`dse.infer.launch_flags.launch_settings`, e.g.
    ``"sglang 0.5.9 --mem-fraction-static 0.85 --scheduler-recv-interval 10"``; a bad value is
    an :class:`InputError` naming ``where`` and ``field``)."""
    name = checked_engine(text, hw, where, field)
    eng = PROFILES[name]
    if not isinstance(text, str) or text.strip() in PROFILES:
        return eng
    eng = launch_defaults(eng, text, float(hw.hbm_bytes), hw.name, "concurrency", None, 1, model)
    try:
        return launch_settings({"engine": text}, eng, model)[0]
    except InputError as e:
        raise InputError(where, field, e.rule) from None


def engine_rule(name: str, hw: Hardware) -> str:
    """"" when engine ``name`` runs on ``hw``, else the rule it breaks."""
    if name not in PROFILES:
        return (f"must be one of {sorted(PROFILES)} or an engine with its release (e.g. "
                f"'vllm 0.14.1', 'sglang 0.4.8', 'trtllm 1.0 pytorch'), but got {name!r}")
    if name in NVIDIA_ONLY and is_amd(hw):
        what = "LMDeploy TurboMind" if name in LMDEPLOY_NAMES else "TensorRT-LLM"
        return (f"{name} ({what}) runs on NVIDIA GPUs only, but {hw.name} is AMD "
                f"({hw.generation}); use vllm, sglang or tgi")
    return ""


def kv_element_bytes(eng: EngineProfile, precision: int) -> float:
    """Bytes per cached K/V element: fp8 where the engine makes it the default of an fp8 /
    fp4 model (``fp8_kv_with_fp8``, TensorRT-LLM), else the activation size (4 fp32,
    2 bf16/fp16), as :mod:`dse.infer.predict_rows` chooses for a row without a KV
    precision."""
    if eng.fp8_kv_with_fp8 and precision >= 2:
        return 1.0
    return 4.0 if precision == 0 else 2.0


class Replica(NamedTuple):
    """One serving replica's numerics (all leaves; the engine travels separately, static)."""
    model: Model
    hw: Hardware
    tp: object
    pp: object
    precision: object
    kv_bytes: object        # bytes per cached K/V element
    ep: object = 1.0        # MoE experts over ep GPUs of the tp x dp group (dse.infer.expert_parallel)
    dp: object = 1.0        # attention data-parallel ranks (each its own requests and KV)
    dp_many: bool = False   # a static promise that every traced dp is > 1 (:func:`attn_dp_case`)


def attn_dp_case(rep: Replica) -> str:
    """What is known at trace time about ``rep.dp`` (a static Python answer): ``"one"``
    where it is a Python number <= 1, ``"many"`` where it is a Python number > 1 or the
    replica promises ``dp_many`` (the sweep's attention-DP group, every row's dp > 1),
    else ``"mixed"`` (traced, either).  :func:`cycle` costs only the branch the case
    needs, where ``"mixed"`` computes both and selects per point: the same numbers, a
    third to two thirds of the work of a sweep's pair program (:mod:`dse.infer.sweep`)."""
    if isinstance(rep.dp, (int, float)):
        return "one" if rep.dp <= 1 else "many"
    return "many" if rep.dp_many is True else "mixed"


class Slots(NamedTuple):
    kv_pool_bytes: object   # KV pool per GPU
    kv_slots: object        # requests the pool holds
    cap: object             # running-batch cap: slots, max_batch, token budget
    tuned: object           # the tuned running-batch limit B* (0 when cap < 1)
    weights_bytes: object
    kv_bytes_per_seq: object   # paged footprint of one admitted request


class Continuous(NamedTuple):
    ttft_s: object
    tpot_s: object
    e2e_s: object
    queue_s: object         # wait for a KV slot (part of ttft_s)
    tokens_per_s: object    # output tokens/s of the replica
    admitted: object        # running sequences B
    slots: object           # tuned running-batch limit B*
    kv_slots: object
    mem_bytes: object       # weights + admitted KV + workspace, with the allocator terms


def _launch(hw: Hardware, graphs) -> Hardware:
    """The hardware with the per-kernel cost of a CUDA-graph replay where ``graphs``
    (:func:`dse.infer.engines.graph_kernel_s`)."""
    return hw.replace(kernel_launch_s=jnp.where(graphs, graph_kernel_s(hw), hw.kernel_launch_s))


def iteration_s(rep: Replica, eng: EngineProfile, b, context, p=None, S=1.0, overhead=True,
                group_p=None, one_micro=False):
    """One iteration: ``b`` decode sequences at KV length ``context`` plus ``p`` prompt
    tokens of ``S``-token prompts (``p=None``: a decode-only pass; a traced ``p`` = 0 is
    one too), as :func:`dse.infer.serving.iteration_s`; ``group_p``: the prompt tokens of
    all attention-DP ranks when they differ (its ``group_prompt_tokens``); ``one_micro``:
    the ``p`` tokens ride one micro-batch (its ``one_micro``)."""
    m = rep.model
    b = jnp.asarray(b, jnp.float32)
    decode_only = p is None
    graphs = eng.graph_replay(b, 0.0 if decode_only else p)
    hw = _launch(rep.hw, graphs)
    r = rates(hw, rep.precision)
    micro = jnp.maximum(jnp.minimum(jnp.where(b >= 1, b, 1.0), rep.pp * 1.0), 1.0)
    bs = b / micro
    ps = 0.0 if decode_only else (p if one_micro else p / micro)
    S = jnp.maximum(S * 1.0, 1.0)
    heads = m.num_attention_heads / rep.tp
    g_dec, d_dec = decode_kv_geometry(m, rep.tp)         # MLA: the latent cache
    kv_read = g_dec if eng.gqa_shared_kv else select(is_mla(m), g_dec, heads)
    att = KVRead(bs, heads, kv_read, context * 1.0, d_dec, kv_bytes=rep.kv_bytes)
    if group_p is None:
        moe = None
    elif one_micro:               # the group's prompts ride the prompt's micro-batch too
        moe = rep.dp * b / micro + group_p
    else:
        moe = (rep.dp * b + group_p) / micro
    r_att = context_attention_rates(r, rep.precision, eng.fp8_context_attn)
    t = stage_time(m, bs + ps, bs + ps / S, att, rep.tp, rep.pp, rep.precision, hw, r,
                   rep.ep, rep.dp, eng.linear_bw_eff, moe, eng.quant_kernels, r_att).total_s
    prompt_layers = 0.0
    if not decode_only:
        fa = prefill_attention(m, ps / S, S, rep.tp)
        prompt_layers = jnp.where(p > 0, jnp.ceil(m.num_layers / rep.pp), 0.0)
        t = t + prompt_layers * prompt_attention_s(m, fa, hw, r_att)
    kernels = stage_kernels(m, bs + ps, bs + ps / S, att, rep.tp, rep.pp, rep.precision,
                            r.act_bytes, rep.ep, rep.dp, prompt_layers, moe, eng.quant_kernels)
    t = host_bound_s(t, kernels, jnp.where(graphs, 0.0, eng.eager_floor_s(rep.hw)))
    if not overhead:
        return t * rep.pp
    # host time per pipeline stage pass (dse.infer.pipeline: serial with pp > 1)
    return pipelined_iteration_s(eng, t, rep.pp, b, micro, eng.host_scale(rep.hw))


def prefill_s(rep: Replica, eng: EngineProfile, batch, S, overhead=True, group=None):
    """Static prefill of ``batch`` prompts, pipelined in ``min(batch, pp)`` micro-batches
    (:func:`dse.infer.serving.prefill_s`); ``group``: the prompts of all attention-DP
    ranks when they differ (its ``group_prompts``)."""
    m = rep.model
    r = rates(rep.hw, rep.precision)
    micro = jnp.maximum(jnp.minimum(batch * 1.0, rep.pp * 1.0), 1.0)
    b = batch / micro
    moe = None if group is None else group * S / micro
    att = prefill_attention(m, b, S * 1.0, rep.tp)
    t = stage_time(m, b * S, b, att, rep.tp, rep.pp, rep.precision, rep.hw, r, rep.ep,
                   rep.dp, eng.linear_bw_eff, moe, eng.quant_kernels,
                   context_attention_rates(r, rep.precision, eng.fp8_context_attn)).total_s
    kernels = stage_kernels(m, b * S, b, att, rep.tp, rep.pp, rep.precision, r.act_bytes,
                            rep.ep, rep.dp, 0.0, moe, eng.quant_kernels)
    t = host_bound_s(t, kernels, eng.eager_floor_s(rep.hw)) * (micro + rep.pp - 1.0)
    return eng.with_host_s(t, 0.0, eng.host_scale(rep.hw)) if overhead else t


class Cycle(NamedTuple):
    """Iteration times of the steady state (:class:`dse.infer.serving.Cycle`), seconds."""
    mean_s: object      # mean iteration: what TPOT averages and throughput divides by
    first_s: object     # the pass that carries a given new prompt


def bench_max_num_tokens(rep: Replica, eng: EngineProfile, S, O):
    """The token budget ``trtllm-bench`` builds for S-token prompts and O-token outputs,
    :func:`dse.infer.serving.bench_max_num_tokens` on traced leaves
    (``tensorrt_llm/bench/build/tuning.py``, ``finetune_setting``: ``raw_bs = min(KV
    requests at S + O, 4096) / pp``, ``raw = min(raw_bs (1 + S/O), 32768)``, rounded up to
    256 (at least 2048) below 4096 tokens, to 512 below 8192, else to 1024; never above
    the profile's ``max_num_tokens``)."""
    S = S * 1.0
    O = jnp.maximum(O * 1.0, 1.0)
    pool, _ = _pool_bytes(rep, eng, S)
    held = jnp.ceil((S + O) / eng.block_tokens) * eng.block_tokens
    per_seq = kv_cache_bytes(rep.model, 1.0, held, rep.tp, rep.pp, rep.kv_bytes)
    kv = jnp.maximum(jnp.where(pool > 0, jnp.floor(pool / per_seq), 0.0), 1.0)
    raw = jnp.minimum(jnp.minimum(kv, 4096.0) / rep.pp * (1.0 + S / O), 32768.0)
    tok = jnp.where(raw < 4096.0, jnp.maximum(2048.0, 256.0 * jnp.ceil(raw / 256.0)),
                    jnp.where(raw < 8192.0, 512.0 * jnp.ceil(raw / 512.0),
                              1024.0 * jnp.ceil(raw / 1024.0)))
    return jnp.minimum(tok, eng.max_num_tokens * 1.0)


def prefill_share(rep: Replica, eng: EngineProfile, b, q, S, O):
    """``(p, w)``: the share of iterations that carry prompt tokens and the prompt tokens
    of such a pass, :func:`dse.infer.serving.prefill_share` on traced leaves (TensorRT-LLM
    ``MicroBatchScheduler``: the waiting prompts of a cohort enter one pass up to the token
    budget, ``w = max(k S, q S)`` with ``k = min(B, max(1, floor((budget - B) / S)))``
    (chunked: ``min(budget - B, B S)``), ``p = q S / w``).  Engines without
    ``bench_tuned_tokens`` spread the mean load over every pass: ``(1, q S)``."""
    u = jnp.maximum(q * 1.0, 0.0) * S
    if not eng.bench_tuned_tokens:
        if not eng.whole_prompts:
            return jnp.ones_like(u), u
        room = jnp.maximum(eng.max_num_tokens * 1.0 - b, 1.0)      # whole prompts (vLLM V1, TRT-LLM 1.x)
        w = jnp.maximum(u, jnp.minimum(S * 1.0, room))
        return jnp.where(u > 0, u / jnp.maximum(w, 1e-30), 0.0), w
    room = jnp.maximum(bench_max_num_tokens(rep, eng, S, O) - b, 0.0)
    if eng.chunked_prefill:
        w = jnp.minimum(room, jnp.maximum(b, 1.0) * S)
    else:
        w = jnp.minimum(jnp.maximum(b, 1.0), jnp.maximum(1.0, jnp.floor(room / S))) * S
    w = jnp.maximum(w, u)
    return jnp.where(u > 0, u / jnp.maximum(w, 1e-30), 0.0), w


def cycle(rep: Replica, eng: EngineProfile, b, context, q, S, O=None) -> Cycle:
    """One steady-state iteration of ``b`` sequences with ``q`` new prompts per iteration
    (a mean) under deterministic load: :func:`dse.infer.serving.cycle` with ``spread``
    False.  Mixing engines: ``p t_iter(b, w) + (1 - p) t_iter(b, 0)`` with ``(p, w)`` of
    :func:`prefill_share` (the mixed pass is the one a new prompt rides:
    ``first_s``); the others: the decode iteration plus a separate prefill pass in a share
    ``min(q, 1)`` of the iterations, ``min(q, 1) t_prefill(max(q, 1))``, and the prompt's
    own pass ``t_prefill(max(q, 1))``."""
    case = attn_dp_case(rep)
    if eng.mixed_batches:
        if case == "many" and not eng.bench_tuned_tokens:
            # attention DP (whole prompts or mean load): the busiest rank's lattice, as the scalar path
            return Cycle(*_rank_lattice(rep, eng, b, context, q, S))
        if eng.spreads_prompts:
            t = iteration_s(rep, eng, b, context, q * S, S)
            if case == "one":
                return Cycle(t, t)
            mean, first = _rank_lattice(rep, eng, b, context, q, S)
            return Cycle(jnp.where(rep.dp > 1, mean, t), jnp.where(rep.dp > 1, first, t))
        share, w = prefill_share(rep, eng, b, q, S, O)
        t_mix = iteration_s(rep, eng, b, context, w, S)
        t_dec = iteration_s(rep, eng, b, context)
        mean = jnp.where(share > 0, share * t_mix + (1.0 - share) * t_dec, t_dec)
        first = jnp.where(share > 0, t_mix, t_dec)
        first = _prompt_pass(rep, eng, b, context, first, jnp.minimum(w, S * 1.0), S, when=share > 0)
        if eng.bench_tuned_tokens or case == "one":
            return Cycle(mean, first)
        mean_l, first_l = _rank_lattice(rep, eng, b, context, q, S)
        return Cycle(jnp.where(rep.dp > 1, mean_l, mean), jnp.where(rep.dp > 1, first_l, first))
    decode = iteration_s(rep, eng, b, context)
    if case == "many":
        mean, first = _rank_lattice_separate(rep, eng, decode, q, S)
        return Cycle(jnp.where(q > 0, mean, decode), first)
    pf = prefill_s(rep, eng, jnp.maximum(q, 1.0), S)
    sep = decode + jnp.minimum(q, 1.0) * pf
    if case == "one":
        return Cycle(jnp.where(q > 0, sep, decode), pf)
    mean, first = _rank_lattice_separate(rep, eng, decode, q, S)
    dp_on = rep.dp > 1
    return Cycle(jnp.where(q > 0, jnp.where(dp_on, mean, sep), decode),
                 jnp.where(dp_on, first, pf))


def _lattice_cases(dp, q):
    """The two cases of :func:`dse.infer.attention_dp.most_loaded_cases` on the lattice
    count ``floor(q) + Bernoulli(f)`` of ``dp`` ranks, in closed form on traced leaves:
    ``(lo, P1, g1, load)`` -- the busiest rank runs ``lo + 1`` prompts with probability
    ``P1 = 1 - (1 - f)^dp`` (the group then ``g1 = dp lo + dp f / P1``), else ``lo`` on
    every rank (group ``dp lo``); ``load`` the group's mean prompts."""
    lo = jnp.floor(q)
    f = q - lo
    p1 = 1.0 - (1.0 - f) ** dp
    g1 = dp * lo + dp * f / jnp.maximum(p1, 1e-30)
    load = (1.0 - p1) * dp * lo + p1 * g1
    return lo, p1, g1, load


def _carried(dp, lo, p1, g1, load, c0, c1):
    """The pass carrying a given prompt, size-biased by the group's prompts over the two
    lattice cases (``c0``: busiest rank at ``lo``, ``c1``: at ``lo + 1``)."""
    return ((1.0 - p1) * dp * lo * c0 + p1 * g1 * c1) / jnp.maximum(load, 1e-30)


def _rank_lattice(rep: Replica, eng: EngineProfile, b, context, q, S):
    """(mean iteration, the pass carrying a given prompt) of a mixing engine with ``dp``
    attention-DP ranks under deterministic load, over :func:`_lattice_cases`
    (:func:`dse.infer.serving._rank_mean`, traced leaves)."""
    dp = rep.dp * 1.0
    lo, p1, g1, load = _lattice_cases(dp, q)
    t0 = iteration_s(rep, eng, b, context, lo * S, S, group_p=dp * lo * S)
    t1 = iteration_s(rep, eng, b, context, (lo + 1.0) * S, S, group_p=g1 * S)
    mean = (1.0 - p1) * t0 + p1 * t1
    # the carrying passes, the group's prompts in the busiest rank's proportion (serving._rank_mean)
    c0 = _prompt_pass(rep, eng, b, context, t0, S * 1.0, S, dp * lo * S / jnp.maximum(lo, 1.0), lo > 0)
    c1 = _prompt_pass(rep, eng, b, context, t1, S * 1.0, S, g1 * S / jnp.maximum(lo + 1.0, 1.0))
    return mean, jnp.where(load > 0, _carried(dp, lo, p1, g1, load, c0, c1), mean)


def _prompt_pass(rep: Replica, eng: EngineProfile, b, context, t, tokens, S, group_p=None,
                 when=True):
    """The pass a new prompt rides, given the mixed pass ``t``
    (:func:`dse.infer.serving._prompt_pass` on traced leaves): on a ``whole_prompts``
    engine, where ``pp`` > 1 (and ``when``), ``max(t, iteration_s(..., one_micro=True))``
    with the prompt's ``tokens`` in one micro-batch; else ``t``."""
    if not eng.whole_prompts:
        return t
    heavy = iteration_s(rep, eng, b, context, tokens, S, group_p=group_p, one_micro=True)
    return jnp.where((rep.pp > 1) & when, jnp.maximum(t, heavy), t)


def _rank_lattice_separate(rep: Replica, eng: EngineProfile, decode, q, S):
    """:func:`_rank_lattice` for engines that run prompts in prefill passes of their own:
    the decode iteration plus the busiest rank's prefill of ``floor(q)`` (none if 0) or
    ``floor(q) + 1`` prompts, the MoE layers over the group's
    (:func:`dse.infer.serving._rank_mean`)."""
    dp = rep.dp * 1.0
    lo, p1, g1, load = _lattice_cases(dp, q)
    c0 = jnp.where(lo > 0, prefill_s(rep, eng, jnp.maximum(lo, 1.0), S, group=dp * jnp.maximum(lo, 1.0)), 0.0)
    c1 = prefill_s(rep, eng, lo + 1.0, S, group=g1)
    mean = decode + (1.0 - p1) * c0 + p1 * c1
    return mean, _carried(dp, lo, p1, g1, load, c0, c1)


def cycle_s(rep: Replica, eng: EngineProfile, b, context, q, S, O=None):
    """The mean iteration of :func:`cycle` (:func:`dse.infer.serving._cycle`)."""
    return cycle(rep, eng, b, context, q, S, O).mean_s


def steady_cycle(rep: Replica, eng: EngineProfile, b, S, O) -> Cycle:
    """Continuous batching's iteration with ``b`` running and ``b / O`` new prompts each
    (:func:`dse.infer.serving._steady`, deterministic admission)."""
    return cycle(rep, eng, b, S + O / 2.0, b / jnp.maximum(O, 1.0), S, O)


def steady_iteration_s(rep: Replica, eng: EngineProfile, b, S, O):
    """The mean of :func:`steady_cycle`."""
    return steady_cycle(rep, eng, b, S, O).mean_s


def weights_bytes(rep: Replica, eng: EngineProfile):
    """Weight bytes per GPU as ``eng`` holds them (:func:`dse.infer.memory.engine_weight_bytes`)."""
    r = rates(rep.hw, rep.precision)
    return engine_weight_bytes(rep.model, rep.tp, rep.pp, r, rep.precision, rep.ep, rep.dp, eng)


def kv_bytes_per_token(rep: Replica):
    """KV bytes one token holds on one GPU of the heaviest stage: the one formula,
    :func:`dse.infer.kv_cache.kv_cache_bytes` (as :func:`dse.infer.serving.kv_bytes_per_token`)."""
    return kv_cache_bytes(rep.model, 1.0, 1.0, rep.tp, rep.pp, rep.kv_bytes)


def _pool_bytes(rep: Replica, eng: EngineProfile, S):
    r = rates(rep.hw, rep.precision)
    wl = InferenceWorkload(batch=1.0, prompt_len=profiling_tokens(eng, S), gen_len=1.0,
                           precision=rep.precision)
    acts = activation_workspace_bytes(rep.model, wl, rep.tp, rep.pp, r.act_bytes)
    return kv_pool_from(eng, rep.hw.hbm_bytes * 1.0, weights_bytes(rep, eng), acts), acts


def held_tokens(eng: EngineProfile, S, O):
    """Paged tokens one admitted request holds (module docstring)."""
    held = S + (O if eng.reserve_final_kv else O / 2.0)
    return jnp.ceil(held / eng.block_tokens) * eng.block_tokens


def _pow2_floor_exp(x):
    """``floor(log2(x))`` for x >= 1, exact at powers of two despite float32 ``log2``."""
    k = jnp.floor(jnp.log2(x))
    k = jnp.where(2.0 ** (k + 1.0) <= x, k + 1.0, k)
    return jnp.where(2.0 ** k > x, k - 1.0, k)


def slots(rep: Replica, eng: EngineProfile, S, O) -> Slots:
    """KV slots, the running-batch cap and the tuned limit of one replica (module
    docstring; :func:`dse.infer.serving.kv_slots`, ``running_batch``, ``tuned_batch``)."""
    S = S * 1.0
    O = O * 1.0
    pool, _ = _pool_bytes(rep, eng, S)
    per_seq = kv_cache_bytes(rep.model, 1.0, held_tokens(eng, S, O), rep.tp, rep.pp, rep.kv_bytes)
    n_slots = jnp.where(pool > 0, jnp.floor(pool / per_seq), 0.0)
    budget = eng.max_num_tokens / (1.0 + S / jnp.maximum(O, 1.0))
    cap = jnp.maximum(jnp.minimum(jnp.minimum(n_slots, eng.max_batch * 1.0),
                                  jnp.maximum(budget, 1.0)), 0.0)
    ok = cap >= 1.0
    c = jnp.maximum(cap, 1.0)
    k = _pow2_floor_exp(c)
    cands = [c] + [2.0 ** (k - j) for j in range(CANDIDATES - 1)]
    valid = [ok] + [ok & (k - j >= 0) & (2.0 ** (k - j) >= c / 8.0) for j in range(CANDIDATES - 1)]
    cands, valid = jnp.stack(cands), jnp.stack(valid)
    # one traced iteration mapped over the candidates (not five unrolled copies: compile time)
    t = jax.vmap(lambda b: steady_iteration_s(rep, eng, b, S, O))(cands)
    best = jnp.argmax(jnp.where(valid, cands / t, -jnp.inf))
    tuned = jnp.where(ok, cands[best], 0.0)
    return Slots(pool, n_slots, cap, tuned, weights_bytes(rep, eng), per_seq)


def first_token_s(rep: Replica, eng: EngineProfile, c: Cycle, q, S):
    """TTFT without the slot wait (module docstring; :func:`dse.infer.serving.first_token_s`
    with the prompt's chunk count on chunking engines): the scheduling wait of mean
    iterations (:meth:`~dse.infer.engines.EngineProfile.scheduling_wait`), then the pass(es)
    carrying the prompt (``c.first_s``), and the engine's HTTP front end
    (``frontend_s``)."""
    before = eng.frontend_s + eng.scheduling_wait(rep.pp) * c.mean_s   # ahead of the prompt's pass
    if eng.mixed_batches:
        chunks = jnp.ceil(S / eng.max_num_tokens) if eng.chunked_prefill else 1.0
        return before + chunks * c.first_s
    return before + c.first_s


class Admitted(NamedTuple):
    """What one admitted batch ``B`` decides, the same for every concurrency ``n`` that
    admits it (``n >= B*`` all admit ``B*``): the sweep evaluates it once per distinct
    batch (:mod:`dse.infer.sweep`) and :func:`queued_point` spreads it over the ``n``."""
    tpot_s: object          # steady-state iteration t
    ttft_run_s: object      # TTFT once admitted (scheduling + the prompt's prefill)
    e2e_run_s: object       # a request's time once admitted: ttft_run + (O - 1) t
    tokens_per_s: object    # output tokens/s of the replica: B O / e2e_run
    mem_bytes: object       # weights + admitted KV + workspace, with the allocator terms


def admitted_batch(n, sl: Slots):
    """``B = min(n, B*)`` (1 where the KV pool holds no request: its times are NaN)."""
    return jnp.where(sl.tuned >= 1.0, jnp.minimum(n * 1.0, sl.tuned), 1.0)


def admitted_point(rep: Replica, eng: EngineProfile, B, S, O, sl: Slots) -> Admitted:
    """The iteration, TTFT, run time and memory of ``B`` admitted requests (module
    docstring): the expensive, ``n``-independent part of :func:`concurrency_point`."""
    S = S * 1.0
    O = O * 1.0
    c = steady_cycle(rep, eng, B, S, O)
    t = c.mean_s
    q = B / jnp.maximum(O, 1.0)
    ttft0 = first_token_s(rep, eng, c, q, S)
    e2e_run = ttft0 + (O - 1.0) * t
    _, acts = _pool_bytes(rep, eng, S)
    mem = (sl.weights_bytes + B * sl.kv_bytes_per_seq + acts) * (1.0 + FRAGMENTATION) + RESERVE_BYTES
    return Admitted(t, ttft0, e2e_run, B * O / e2e_run, mem)


def queued_point(n, B, a: Admitted, O, sl: Slots, xp=jnp) -> Continuous:
    """``n`` requests in flight of which ``B`` are admitted with ``a``: the slot wait
    (Little's law, module docstring) on top; NaN times where the KV pool holds no
    request.  ``xp`` is the array module (``jnp`` traced, ``numpy`` on the host: the
    sweep spreads the distinct batches over the concurrencies there)."""
    O = O * 1.0
    ok = sl.tuned >= 1.0
    queue = xp.maximum(n / B - 1.0, 0.0) * a.e2e_run_s
    ttft = a.ttft_run_s + queue
    nan = xp.nan
    return Continuous(
        ttft_s=xp.where(ok, ttft, nan), tpot_s=xp.where(ok, a.tpot_s, nan),
        e2e_s=xp.where(ok, ttft + (O - 1.0) * a.tpot_s, nan), queue_s=xp.where(ok, queue, nan),
        tokens_per_s=xp.where(ok, a.tokens_per_s, nan), admitted=xp.where(ok, B, 0.0),
        slots=sl.tuned, kv_slots=sl.kv_slots, mem_bytes=a.mem_bytes)


def concurrency_point(rep: Replica, eng: EngineProfile, n, S, O, sl: Slots) -> Continuous:
    """``n`` requests in flight on one replica whose slots are ``sl`` (module docstring):
    :func:`admitted_point` of ``B = min(n, B*)``, then :func:`queued_point`."""
    B = admitted_batch(n, sl)
    return queued_point(n * 1.0, B, admitted_point(rep, eng, B, S, O, sl), O, sl)


def continuous(rep: Replica, eng: EngineProfile, n, S, O) -> Continuous:
    """The whole scenario for one point: :func:`slots` then :func:`concurrency_point`."""
    return concurrency_point(rep, eng, n, S, O, slots(rep, eng, S, O))
