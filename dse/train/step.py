"""One training step (one global batch) for one design point — the scalar function the
sweep vmaps.

Assembly (Narayanan et al. SC'21, arXiv:2104.04473, §2.2 and §3; Megatron-Core
``distributed/`` for the overlaps):

  m           = global_batch / (dp * mbs)                 micro-batches per pipeline
  t_mb        = per-micro-batch time of the heaviest stage: ceil(L/pp) layers
                x (fwd + bwd + recompute + exposed TP, CP, EP) + LM head/loss (last
                stage) + embedding (first stage)
  pipeline    = m * t_mb + (pp-1)/vpp * t_avg + exposed p2p       (1F1B / interleaved)
  DP          = gradient reduce-scatter/all-reduce overlapped with the last
                micro-batch's backward, parameter all-gather overlapped with the first
                forward (``overlap_grad_reduce``/``overlap_param_gather``);
                ZeRO-2 reduce-scatters after every micro-batch's backward;
                ZeRO-3 gathers weights every micro-batch, overlapped layer by layer
  step        = pipeline + exposed DP + optimizer step

Overlap assumptions: each overlapped collective costs ``max(0, comm - window)`` exposed
plus, for its hidden part, the compute slowdown of the SMs NCCL occupies
(:func:`dse.cost.collectives.overlapped_cost_s`); the breakdown's DP and CP columns
carry both:
  CP ring exchange vs the attention compute of the layer (Liu et al. 2023);
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

from dse.cost.collectives import (group_collective_s, interleaved_exposed_s,
                                  overlapped_cost_s)
from dse.cost.gemm import gemm_flops
from dse.spec.hardware import Hardware
from dse.spec.layout import Layout, Workload
from dse.spec.model import Model
from dse.train.layer import layer_cost
from dse.train.memory import layers_per_stage, memory_per_gpu
from dse.train.outer_ops import (embedding_s, grad_accumulation_s, lm_head_s, optimizer_step_s,
                                 pipeline_p2p)
from dse.train.rates import rates


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
    return memory_per_gpu(model, wl, lay, rates(hw, wl.precision).act_bytes, hw.hbm_bytes).total_bytes


def train_step(model: Model, wl: Workload, lay: Layout, hw: Hardware) -> StepResult:
    r = rates(hw, wl.precision)
    lc = layer_cost(model, wl, lay, hw, r)
    L_st = layers_per_stage(model, lay)
    m = wl.global_batch / (lay.dp * lay.mbs)
    h = model.hidden_size * 1.0
    V = model.vocab_size * 1.0
    el = r.act_bytes

    # LM head + cross-entropy (last stage), embedding (first stage)
    head_f, ce = lm_head_s(model, wl, lay, hw, r)
    head_b = 2.0 * head_f
    emb = embedding_s(model, wl, lay, hw, r)
    head = head_f + head_b + ce
    head_stage = jnp.where(lay.pp > 1, jnp.maximum(head, emb), head + emb)

    # exposed communication per layer per micro-batch
    # full recompute (all layers) or block recompute (the fewest that fit): the share of
    # the rank's layers whose forward runs twice
    mem = memory_per_gpu(model, wl, lay, el, hw.hbm_bytes)
    P = mem.params_per_gpu
    recompute_full = mem.recompute_fraction
    tp_exposed = lc.tp_exposed_s * (1.0 + 0.5 * recompute_full)
    ov = lambda comm, window: overlapped_cost_s(comm, window, hw.num_sms)
    cp_exposed = jnp.where(lay.cp > 1, ov(lc.cp_comm_s, lc.attn_s), 0.0)
    layer_compute = lc.fwd_compute_s + lc.bwd_compute_s
    layer_recompute = recompute_full * lc.fwd_compute_s + (lay.recompute == 1) * lc.selective_recompute_s

    accum = grad_accumulation_s(wl, hw, r, P)   # DeepSpeed only
    t_mb = L_st * (layer_compute + layer_recompute + tp_exposed + cp_exposed + lc.ep_comm_s) + head_stage + accum
    t_avg = (model.num_layers * (layer_compute + layer_recompute + tp_exposed + cp_exposed
                                 + lc.ep_comm_s) + head + emb) / lay.pp + accum
    bubble = (lay.pp - 1.0) / lay.vpp * t_avg

    # pipeline p2p: activations of one micro-batch
    _, t_p2p = pipeline_p2p(model, wl, lay, hw, r)
    t_p2p = jnp.where(lay.pp > 1, t_p2p, 0.0)
    pp_exposed = jnp.where(lay.vpp > 1, 2.0 * (lay.pp - 1.0) * lay.vpp * t_p2p,
                           2.0 * (m + lay.pp - 1.0) * t_p2p)

    # data parallel / ZeRO
    n_dp = lay.dp * lay.cp * 1.0
    dp_stride = lay.tp * 1.0
    grad_bytes = 4.0 * P
    param_bytes = 2.0 * P
    ar = group_collective_s("all_reduce", grad_bytes, n_dp, dp_stride, hw)
    rs = group_collective_s("reduce_scatter", grad_bytes, n_dp, dp_stride, hw)
    ag = group_collective_s("all_gather", param_bytes, n_dp, dp_stride, hw)
    bwd_window = L_st * (lc.bwd_compute_s + layer_recompute)
    fwd_window = L_st * lc.fwd_compute_s
    # chunk-wise overlap under the interleaved schedule (== max(0, comm - W) for vpp = 1)
    ovi = lambda comm, window: overlapped_cost_s(comm, window, hw.num_sms,
                                                 interleaved_exposed_s(comm, window, lay.pp, lay.vpp))
    dp_z0 = ovi(ar, bwd_window)
    dp_z1 = ovi(rs, bwd_window) + ovi(ag, fwd_window)
    # ZeRO-2 keeps only a gradient shard, so it reduce-scatters after every micro-batch's
    # backward (DeepSpeed stage 2; FSDP SHARD_GRAD_OP without no_sync); the last layer's
    # share of every (micro-batch, chunk) pass has nothing left to hide under
    z2_exposed = lay.vpp * jnp.maximum(rs / L_st, (rs - bwd_window) / lay.vpp + bwd_window / L_st)
    dp_z2 = m * overlapped_cost_s(rs, bwd_window, hw.num_sms, jnp.minimum(z2_exposed, rs)) + ovi(ag, fwd_window)
    # ZeRO-3 gathers weights (fwd, bwd) and reduce-scatters gradients every micro-batch,
    # prefetched layer by layer under the whole layer loop
    dp_z3 = m * ov(2.0 * ag + rs, L_st * (layer_compute + layer_recompute + cp_exposed))
    dp_exposed = jnp.where(lay.zero == 0, dp_z0, jnp.where(lay.zero >= 3, dp_z3,
                                                            jnp.where(lay.zero == 2, dp_z2, dp_z1)))
    dp_exposed = jnp.where(n_dp > 1, dp_exposed, 0.0)

    optimizer = optimizer_step_s(model, wl, lay, hw, r, P)

    step = m * t_mb + bubble + pp_exposed + dp_exposed + optimizer

    # breakdown (steady-state shares of m * t_mb; bubble separate)
    compute = m * (L_st * layer_compute + head_stage + accum)
    recompute = m * L_st * layer_recompute
    tp_total = m * L_st * tp_exposed
    cp_total = m * L_st * cp_exposed
    ep_total = m * L_st * lc.ep_comm_s

    # model FLOPs of the whole step over all GPUs
    micro_total = wl.global_batch / lay.mbs
    layer_flops_full = lc.model_flops * lay.tp * lay.cp
    head_flops = 3.0 * gemm_flops(lay.mbs * wl.seq_len, V, h)
    flops = micro_total * (model.num_layers * layer_flops_full + head_flops)
    gpus = lay.tp * lay.pp * lay.dp * lay.cp * 1.0
    peak_nominal = jnp.where(wl.precision == 0, hw.peak_tf32_flops_per_s, hw.peak_bf16_flops_per_s)
    mfu = flops / (step * gpus * peak_nominal)
    tps = wl.global_batch * wl.seq_len / step
    return StepResult(step, compute, recompute, tp_total, cp_total, ep_total, pp_exposed,
                      bubble, dp_exposed, optimizer, mem.total_bytes, flops, mfu, tps,
                      recompute_full * L_st)
