"""One training step (one global batch) for one design point — the scalar function the
sweep vmaps.

Assembly (Narayanan et al. SC'21, arXiv:2104.04473, §2.2 and §3; Megatron-Core
``distributed/`` for the overlaps):

  m           = global_batch / (dp * mbs)                 micro-batches per pipeline
  t_mb        = per-micro-batch time of the heaviest stage: ceil(L/pp) layers
                x (fwd + bwd + recompute + exposed TP, CP, EP) + LM head/loss (last
                stage) + embedding (first stage); with an uneven split the head's and
                embedding's stages hold one layer fewer (:func:`stage_balanced_head_s`;
                the head's all of the slack beside multi-token prediction)
  pipeline    = m * t_mb + (pp-1)/vpp * t_avg + exposed p2p       (1F1B / interleaved;
                exposed p2p per framework engine, dse.train.pipe_transfers)
  DP          = gradient reduce-scatter/all-reduce overlapped with the last
                micro-batch's backward, parameter all-gather overlapped with the first
                forward (``overlap_grad_reduce``/``overlap_param_gather``);
                ZeRO-2 reduce-scatters after every micro-batch's backward;
                ZeRO-3 / FSDP gathers and reduces unit by unit with one unit
                prefetched, per the framework profile (dse.train.zero3), over each
                stage's own layers: the stage whose layers + head + exposed chain
                take longest sets t_mb (:func:`pipeline_stages`)
  step        = pipeline + exposed DP + optimizer step

Overlap assumptions: each overlapped collective costs the larger of its exposed part
``max(0, comm - window)`` and the slowdown of the kernels beside it on the SMs NCCL
occupies (:func:`dse.cost.collectives.overlapped_cost_s`; chunk by chunk under
interleaving, ``interleaved_overlap_cost_s``); the breakdown's DP and CP columns carry it:
  CP ring exchange vs the attention compute of the layer (Liu et al. 2023) plus any
  host-bound stall of the pass (dse.train.layer);
  DP and ZeRO-3 as above; TP and EP collectives sit on the critical path (exposed).
Recompute: full re-runs each layer's forward (and its TP collectives) before backward;
block does so for the fewest layers that make the step fit (Megatron ``--recompute-method
block --recompute-num-layers k``, k chosen per point by :func:`memory_per_gpu`);
selective recomputes the attention core: free with FlashAttention (its backward
recomputes the scores anyway), one attention-core forward with the unfused path.
MFU counts model FLOPs only (6*N*tokens-style, plus attention), against the nominal
16-bit dense peak (PaLM, Chowdhery et al. 2022, App. B).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from dse.cost.attention_kernel import with_attention_kernel
from dse.cost.collectives import comm_sm_fraction, interleaved_overlap_cost_s, overlapped_cost_s
from dse.graph.ops import flops as flops_of
from dse.graph.ops import time_s
from dse.graph.moe import expert_dp_size
from dse.graph.train import step_graph
from dse.spec.hardware import Hardware
from dse.spec.layout import PRECISION_FP32, RECOMPUTE_SELECTIVE, Layout, Workload
from dse.spec.model import Model
from dse.spec.numerics import as_float
from dse.train.layer import reduce_layer
from dse.train.memory import embedding_params_per_gpu, head_stage_deficit, layers_per_stage, memory_per_gpu
from dse.train.outer_ops import total_s
from dse.train.pipe_transfers import exposed_transfers
from dse.cost.rates import rates
from dse.train.zero3 import zero3_step_s


class StepResult(NamedTuple):
    step_time_s: object
    compute_s: object
    recompute_s: object
    tp_comm_s: object
    cp_comm_s: object
    ep_comm_s: object
    pp_comm_s: object
    bubble_s: object
    dp_comm_s: object
    optimizer_s: object
    mem_bytes: object
    model_flops: object
    mfu: object
    tokens_per_s: object
    recompute_layers: object   # layers per rank fully recomputed (full: all; block: the fewest that fit)


BREAKDOWN = ("compute_s", "recompute_s", "tp_comm_s", "cp_comm_s", "ep_comm_s",
             "pp_comm_s", "bubble_s", "dp_comm_s", "optimizer_s")


def memory_bytes(model: Model, wl: Workload, lay: Layout, hw: Hardware):
    """Peak bytes per GPU (the sweep's first, cheap pass)."""
    model, wl, lay = as_float(model, wl, lay)
    return memory_per_gpu(model, wl, lay, rates(hw, wl.precision).act_bytes, hw.hbm_bytes,
                          hw.fp8_transpose).total_bytes


class StepSchedule(NamedTuple):
    """How often each operator group of the graph runs in one step on the heaviest
    stage's GPU, and the share of its time on the critical path; what the per-operator
    table (:mod:`dse.train.ops_table`) multiplies the graph by."""
    layer_calls: object        # fwd/bwd layer passes: m * L_st
    recompute_calls: object    # layer forwards re-run (full/block): m * L_st * fraction
    selective_calls: object    # selective-recompute attention: m * L_st (selective only)
    tp_fwd_calls: object       # layer forward TP collectives, recompute included
    tp_exposed_frac: object    # exposed / raw of the TP collectives
    cp_exposed_frac: object
    head_calls: object         # LM head and loss on the critical path (last stage)
    embedding_calls: object
    accumulation_calls: object
    p2p_calls: object          # exposed pipeline transfers
    dp_kind: object            # 0 all-reduce (ZeRO-0), 1 reduce-scatter + all-gather
    dp_raw_s: object           # raw seconds of the step's DP collectives
    bubble_s: object
    zero3_calls: object = ()   # per op of the graph's zero3 group (ZeRO-3 only; dse.train.zero3)
    layer: object = None       # the LayerCost of one layer pass the step used (reduce_layer)
    memory: object = None      # the step's memory_per_gpu (dse.train.memory.MemoryBreakdown)
    ep_exposed_frac: object = 1.0  # exposed / raw of the EP collectives (MoE A2A overlap)
    rates: object = None       # the Rates the step costed its ops with (dse.cost.rates)
    outer_s: object = None     # seconds of one pass of the outer groups, as the step summed
    #                            them: head_fwd, head_bwd, embedding, accumulation (one
    #                            micro-batch), optimizer (the step), p2p (one transfer)


def train_step(model: Model, wl: Workload, lay: Layout, hw: Hardware) -> StepResult:
    """One step's :class:`StepResult` (module docstring)."""
    return step_and_schedule(model, wl, lay, hw)[0]


def step_and_schedule(model: Model, wl: Workload, lay: Layout, hw: Hardware):
    """(:class:`StepResult`, :class:`StepSchedule`, the step's operator graph)."""
    model, wl, lay = as_float(model, wl, lay)      # the numerics boundary
    hw = with_attention_kernel(hw, wl)             # the run's fused attention kernel
    r = rates(hw, wl.precision)
    el = r.act_bytes
    mem = memory_per_gpu(model, wl, lay, el, hw.hbm_bytes, hw.fp8_transpose)
    P = mem.params_per_gpu
    L_st = layers_per_stage(model, lay)
    graph = step_graph(model, wl, lay, el, P, embedding_params_per_gpu(model, lay), L_st,
                       mem.expert_params_per_gpu)
    lc = reduce_layer(graph.layer, wl, lay, hw, r)
    m = wl.global_batch / (lay.dp * lay.mbs)

    # LM head + cross-entropy (last stage), embedding (first stage)
    head_t = [time_s(op, hw, r) for op in graph.head]       # each op costed once
    head_phase = lambda phase: _sum(t for op, t in zip(graph.head, head_t) if op.phase == phase)
    head = _sum(head_t)
    emb = total_s(graph.embedding, hw, r)
    head_stage = jnp.where(lay.pp > 1, jnp.maximum(head, emb), head + emb)

    # exposed communication per layer per micro-batch
    # full recompute (all layers) or block recompute (the fewest that fit): the share of
    # the rank's layers whose forward runs twice
    recompute_full = mem.recompute_fraction
    tp_exposed = lc.tp_exposed_s * (1.0 + 0.5 * recompute_full)
    f_sm = comm_sm_fraction(hw.num_sms)
    # the ring exchange hides under the attention core and under any host stall of the
    # pass (the GPU idles waiting for the CPU while the copy engines move K/V; no kernels)
    cp_window = lc.attn_s + lc.host_stall_fwd_s + lc.host_stall_bwd_s
    cp_exposed = jnp.where(lay.cp > 1, overlapped_cost_s(lc.cp_comm_s, cp_window, lc.attn_s, f_sm), 0.0)
    layer_compute = lc.fwd_compute_s + lc.bwd_compute_s
    layer_recompute = (recompute_full * lc.fwd_compute_s
                       + (lay.recompute == RECOMPUTE_SELECTIVE) * lc.selective_recompute_s)

    accum = total_s(graph.accumulation, hw, r)   # DeepSpeed only
    ep_exposed = _ep_exposed_s(model, wl, lay, hw, r, graph.layer, lc, recompute_full, m)
    per_layer = layer_compute + layer_recompute + tp_exposed + cp_exposed + ep_exposed
    slack = lay.pp * L_st - model.num_layers
    head_stage = stage_balanced_head_s(head_stage, head, emb, per_layer, slack, lay.pp, model.mtp_layers,
                                       L_st)
    # the stages that can set the pace, and each one's time beyond L_st layers (the
    # largest of them is head_stage)
    stages = pipeline_stages(lay.pp, slack, L_st, head, emb, model.mtp_layers)
    beyond = [extra - (L_st - n) * per_layer for n, extra, _ in stages]
    t_avg = (model.num_layers * (layer_compute + layer_recompute + tp_exposed + cp_exposed
                                 + ep_exposed) + head + emb) / lay.pp + accum
    bubble = (lay.pp - 1.0) / lay.vpp * t_avg

    # pipeline p2p: activations of one micro-batch
    t_p2p = total_s(graph.p2p, hw, r)
    # transfers on the critical path per the framework's pipeline engine
    # (dse.train.pipe_transfers: Megatron batches each send with a receive, DeepSpeed's
    # blocking send / recv pay four per micro-batch on an interior stage)
    p2p_calls = exposed_transfers(wl.framework, m, lay.pp, lay.vpp)
    pp_exposed = p2p_calls * t_p2p

    # data parallel / ZeRO
    n_dp = lay.dp * lay.cp * 1.0
    # dense parameters over dp*cp, a MoE model's routed experts over the expert-data-
    # parallel group (their own buffers, reduced on the same stream: the times add)
    ar, rs, ag = (time_s(d, hw, r) + time_s(e, hw, r) for d, e in zip(graph.dp, graph.expert_dp))
    bwd_window = L_st * (lc.bwd_compute_s + layer_recompute)
    fwd_window = L_st * lc.fwd_compute_s
    # chunk-wise overlap under the interleaved schedule (== max(0, comm - W) for vpp = 1)
    ovi = lambda comm, window: interleaved_overlap_cost_s(comm, window, f_sm, lay.pp, lay.vpp)
    dp_z0 = ovi(ar, bwd_window)
    dp_z1 = ovi(rs, bwd_window) + ovi(ag, fwd_window)
    # ZeRO-2 keeps only a gradient shard, so it reduce-scatters after every micro-batch's
    # backward (DeepSpeed stage 2; FSDP SHARD_GRAD_OP without no_sync); the last layer's
    # share of every (micro-batch, chunk) pass has nothing left to hide under
    z2_exposed = lay.vpp * jnp.maximum(rs / L_st, (rs - bwd_window) / lay.vpp + bwd_window / L_st)
    dp_z2 = m * overlapped_cost_s(rs, bwd_window, bwd_window, f_sm, jnp.minimum(z2_exposed, rs)) + ovi(ag, fwd_window)
    # ZeRO-3 / FSDP: per unit (one block, or one linear under DeepSpeed), prefetched one
    # ahead, with what cannot hide exposed (dse.train.zero3)
    head_bwd = head_phase("bwd")
    # the unit collectives also hide under the compute stream's own TP / EP collectives
    tp_half = 0.5 * lc.tp_exposed_s
    # each stage runs its own chain: its own layers, and the LM-head backward to hide the
    # first backward gather under only where it holds the head
    z3 = [zero3_step_s(graph.zero3, wl, lay, hw, r, lc.fwd_compute_s,
                       lc.bwd_compute_s + layer_recompute + cp_exposed, head_bwd * has_head, n, m,
                       fwd_other_s=tp_half + 0.5 * lc.ep_comm_s,
                       bwd_other_s=tp_half * (1.0 + recompute_full) + 0.5 * lc.ep_comm_s)
          for n, _, has_head in stages]
    dp_on = (n_dp > 1) | (expert_dp_size(lay) > 1)
    z3_on = (lay.zero >= 3) & dp_on
    # the pace is the slowest stage's layers + head + exposed chain together: a max of
    # paths each monotone in every resource (pipeline_stages)
    k = jnp.where(z3_on, jnp.argmax(jnp.stack([m * b + z[0] for b, z in zip(beyond, z3)]), axis=0),
                  jnp.argmax(jnp.stack(beyond), axis=0))
    pick = lambda xs: jnp.where(k == 0, xs[0], jnp.where(k == 1, xs[1], xs[2]))
    dp_z3, z3_raw = pick([z[0] for z in z3]), pick([z[1] for z in z3])
    z3_counts = tuple(pick([z[2][i] for z in z3]) for i in range(len(z3[0][2])))
    head_stage = jnp.where(z3_on, pick(beyond), head_stage)
    t_mb = L_st * per_layer + head_stage + accum
    dp_exposed = jnp.where(lay.zero == 0, dp_z0, jnp.where(lay.zero >= 3, dp_z3,
                                                            jnp.where(lay.zero == 2, dp_z2, dp_z1)))
    dp_exposed = jnp.where(dp_on, dp_exposed, 0.0)

    optimizer = total_s(graph.optimizer, hw, r)

    step = m * t_mb + bubble + pp_exposed + dp_exposed + optimizer

    # breakdown (steady-state shares of m * t_mb; bubble separate)
    compute = m * (L_st * layer_compute + head_stage + accum)
    recompute = m * L_st * layer_recompute
    tp_total = m * L_st * tp_exposed
    cp_total = m * L_st * cp_exposed
    ep_total = m * L_st * ep_exposed

    # model FLOPs of the whole step over all GPUs
    micro_total = wl.global_batch / lay.mbs
    layer_flops_full = lc.model_flops * lay.tp * lay.cp
    head_flops = _sum(flops_of(op) for op in graph.head) * lay.tp * lay.cp
    flops = micro_total * (model.num_layers * layer_flops_full + head_flops)
    gpus = lay.tp * lay.pp * lay.dp * lay.cp * 1.0
    peak_nominal = jnp.where(wl.precision == PRECISION_FP32, hw.peak_tf32_flops_per_s, hw.peak_bf16_flops_per_s)
    mfu = flops / (step * gpus * peak_nominal)
    tps = wl.global_batch * wl.seq_len / step
    res = StepResult(step, compute, recompute, tp_total, cp_total, ep_total, pp_exposed,
                     bubble, dp_exposed, optimizer, mem.total_bytes, flops, mfu, tps,
                     recompute_full * L_st)
    safe = lambda x, y: jnp.where(y > 0, x / jnp.where(y > 0, y, 1.0), 1.0)
    # the uneven split leaves on the heaviest stage only the head's (embedding's) time
    # beyond the layer its stage gave up: the table counts that share of the head's calls
    head_w = jnp.where(lay.pp > 1, (k == 0) * safe(head_stage, head), 1.0)
    emb_w = jnp.where(lay.pp > 1, (k == 1) * safe(head_stage, emb), 1.0)
    dp_raw = jnp.where(lay.zero == 0, ar, jnp.where(lay.zero >= 3, z3_raw,
                                                    jnp.where(lay.zero == 2, m * rs + ag, rs + ag)))
    sched = StepSchedule(
        layer_calls=m * L_st, recompute_calls=m * L_st * recompute_full,
        selective_calls=m * L_st * (lay.recompute == RECOMPUTE_SELECTIVE),
        tp_fwd_calls=m * L_st * (1.0 + recompute_full),
        tp_exposed_frac=safe(lc.tp_exposed_s, lc.tp_comm_s),
        cp_exposed_frac=jnp.where(lay.cp > 1, safe(cp_exposed, lc.cp_comm_s), 0.0),
        head_calls=m * head_w, embedding_calls=m * emb_w, accumulation_calls=m,
        p2p_calls=p2p_calls, dp_kind=jnp.where(lay.zero == 0, 0, 1),
        dp_raw_s=jnp.where((n_dp > 1) | (expert_dp_size(lay) > 1), dp_raw, 0.0), bubble_s=bubble,
        zero3_calls=z3_counts, layer=lc, memory=mem,
        ep_exposed_frac=safe(ep_exposed, lc.ep_comm_s), rates=r,
        outer_s=dict(head_fwd=head_phase("fwd"), head_bwd=head_bwd, embedding=emb,
                     accumulation=accum, optimizer=optimizer, p2p=t_p2p))
    return res, sched, graph


def _ep_exposed_s(model, wl, lay, hw, r, layer_ops, lc, recompute_full, m):
    """A layer's EP all-to-all seconds on the critical path per micro-batch: all of them
    (serial, the default), or under the 1F1B A2A overlap -- the framework profile's, or
    the run's own ``Workload.moe_a2a_overlap`` -- where Megatron-Core allows it (:mod:`dse.train.moe_overlap`) the paired passes' exposed part, the
    unpaired warm-up / cool-down passes' in full."""
    from dse.spec.frameworks import moe_a2a_overlap
    if not (moe_a2a_overlap(wl.framework) or wl.moe_a2a_overlap):
        return lc.ep_comm_s
    from dse.train.moe_overlap import overlap_allowed, paired_ep_exposed_s, unpaired_share
    selective = (lay.recompute == RECOMPUTE_SELECTIVE) * lc.selective_recompute_s
    u = unpaired_share(lay, m)
    paired = paired_ep_exposed_s(layer_ops, lc, hw, r, selective)
    return jnp.where(overlap_allowed(model, lay, recompute_full),
                     u * lc.ep_comm_s + (1.0 - u) * paired, lc.ep_comm_s)


def stage_balanced_head_s(head_stage_s, head_s, emb_s, per_layer_s, slack_layers, pp, mtp_layers=0,
                          layers_per_stage=None):
    """Time the heaviest pipeline stage spends beyond its ``L_st`` layers, per micro-batch.

    Even split (``pp * L_st == L``): every stage holds ``L_st`` layers and the last (first)
    adds the LM head (embedding): ``max(head, emb)``, the caller's ``head_stage_s``.
    Uneven split (``slack = pp*L_st - L >= 1`` layers short of ``L_st`` on every stage):
    Megatron-Core builds it only from an explicit split, and the one it provides for it
    gives the short layers to the stages with the head and the embedding --
    ``account_for_loss_in_pipeline_split`` / ``account_for_embedding_in_pipeline_split``
    count the loss and the embedding as one layer each (megatron/core/transformer/
    transformer_block.py ``get_num_layers_to_build``), as the Llama 3.1 405B recipes do
    for its 126 layers (Megatron-Bridge src/megatron/bridge/recipes/llama/h100/llama3.py,
    ``llama31_405b_pretrain_256gpu_h100_bf16_config``; NeMo
    nemo/collections/llm/recipes/llama31_405b.py).  The last stage then holds ``L_st - 1``
    layers and the head, the first (when ``slack >= 2``) ``L_st - 1`` and the embedding,
    the others ``L_st``: the extra time is ``max(0, head - layer, emb - [slack >= 2]
    layer)``.  With ``pp = 1`` (head and embedding on the one stage) nothing changes.  With
    multi-token prediction the head's stage gives up ``j`` = :func:`head_stage_deficit`
    layers (at most ``layers_per_stage``, the ``L_st`` it holds) and the embedding's one
    more if the slack has one left."""
    j = head_stage_deficit(slack_layers, mtp_layers, layers_per_stage)
    spare = jnp.where(slack_layers - j >= 1, per_layer_s, 0.0)
    uneven = jnp.maximum(jnp.maximum(head_s - j * per_layer_s, emb_s - spare), 0.0)
    return jnp.where((pp > 1) & (slack_layers >= 1), jnp.minimum(head_stage_s, uneven), head_stage_s)


def pipeline_stages(pp, slack_layers, L_st, head_s, emb_s, mtp_layers=0):
    """The pipeline stages whose time can set the pace, as ``(layers, extra seconds per
    micro-batch, holds the LM head)``: the head's stage, the embedding's, a middle one
    (the split of :func:`stage_balanced_head_s`: with ``slack >= 1`` the head's stage
    holds ``L_st - 1`` layers, with ``slack >= 2`` the embedding's too; with ``pp = 1``
    one stage holds everything, listed three times).  ``extra - (L_st - layers) x
    per-layer`` is each one's time beyond ``L_st`` layers, whose largest is
    :func:`stage_balanced_head_s`.

    Under ZeRO-3 / FSDP each stage also runs its own chain of unit collectives
    (:mod:`dse.train.zero3`) over its own layers, and only the head's stage has the LM-head
    backward to hide its first backward gather under (the last block's; Megatron-Core
    FSDP keeps the root unit, ``z3_root_regather_in_bwd`` False); a stage without the head
    starts its backward when the gradient arrives from the next stage and waits for that
    gather in full.  The step's pace is the stage whose layers, head and exposed chain
    together take longest: 1F1B runs every stage in lock-step, one micro-batch per slot
    (Narayanan et al. SC'21 §2.2), so the slowest stage sets the slot.  Each stage's
    path, its compute plus ``max(comm - window, ...)`` with the window inside that
    compute, is non-increasing in every resource, and so is their max -- charging one
    stage's compute and another stage's head window would not be (a faster LM head
    shrinking the window of a stage whose time no longer includes it)."""
    multi = pp > 1
    one = head_s + emb_s
    j = head_stage_deficit(slack_layers, mtp_layers, L_st)
    head_layers = L_st - jnp.where(multi & (slack_layers >= 1), j, 0.0)
    emb_layers = L_st - jnp.where(multi & (slack_layers - j >= 1), 1.0, 0.0)
    return ((head_layers, jnp.where(multi, head_s, one), 1.0),
            (emb_layers, jnp.where(multi, emb_s, one), jnp.where(multi, 0.0, 1.0)),
            (L_st, jnp.where(multi, 0.0, one), jnp.where(multi, 0.0, 1.0)))


def _sum(xs):
    out = 0.0
    for x in xs:
        out = out + x
    return out
