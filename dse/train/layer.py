"""One transformer layer, one micro-batch, one GPU: forward and backward time.

Operator list (Megatron-LM ``TransformerLayer``; Shoeybi et al. 2019 for the TP split,
Korthikanti et al. 2022 for sequence parallelism, Liu et al. 2023 ring attention for CP):

  norm1 -> [SP all-gather] -> QKV linear -> rotary -> attention core -> out linear
  -> [TP all-reduce | SP reduce-scatter] -> (dropout) + residual -> norm2 -> [SP AG]
  -> FC1 (gate+up) -> GeLU/SwiGLU -> FC2 -> [TP AR | SP RS] -> (dropout) + residual

With T = mbs*seq/cp tokens per GPU, h hidden, f FFN, a heads, g KV heads, d = h/a,
t = tp, the linear GEMMs are (M, N, K):
  QKV (T, (a+2g)d/t, h); out (T, h, ad/t); FC1 (T, f(1+gated)/t, h); FC2 (T, h, f/t).
The backward pass runs each linear twice (data gradient (T, K, N) and weight gradient
(K, N, T)), i.e. 2x the forward FLOPs.  MoE layers replace the MLP by ``num_experts/ep``
local experts, each seeing ``T*top_k*ep/num_experts`` tokens, with two all-to-alls
(dispatch, combine) per pass over the EP group (Lepikhin et al. 2020, GShard).

Memory-bound bytes (forward, per layer): two norms (read+write), two residual adds
(2 reads, 1 write), rotary on Q and K, the activation function, dropout (if the model
uses it); element-wise work runs on T*h/t elements with SP and on T*h without it (the
replicated regions).  Backward moves about twice the forward bytes.

FP8 (Transformer Engine): linear GEMMs take fp8 inputs; each fp8 GEMM input is produced
by a cast that reads bf16 and writes fp8 (3 bytes/element, plus amax reduction folded in).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from dse.cost.attention import (FA_BLOCK_ROWS, flash_attention_time_s, flash_available,
                                flash_head_dim, unfused_attention_time_s)
from dse.cost.collectives import (TP_OVERLAP_SPLITS, group_collective_s, group_p2p_s,
                                  tp_overlap_cost_s)
from dse.cost.elementwise import memory_bound_time_s
from dse.cost.gemm import gemm_flops, gemm_time_s
from dse.spec.hardware import Hardware
from dse.spec.layout import Layout, Workload
from dse.spec.model import Model, head_dim_of
from dse.train.rates import Rates


class LayerCost(NamedTuple):
    fwd_compute_s: object   # GEMMs + attention + element-wise, forward
    bwd_compute_s: object   # same, backward
    attn_s: object          # attention core forward + backward (the CP overlap window)
    selective_recompute_s: object  # extra backward time of selective recompute
    tp_comm_s: object       # TP/SP collectives, forward + backward (raw)
    tp_exposed_s: object    # their cost on the critical path (== raw unless overlapped)
    cp_comm_s: object       # ring-attention K/V exchange, forward + backward (raw)
    ep_comm_s: object       # MoE all-to-all, forward + backward
    model_flops: object     # forward+backward useful FLOPs (no recompute)


def _linear(m, n, k, r: Rates, hw: Hardware, count=1.0):
    return gemm_time_s(m, n, k, r.peak_linear_flops_per_s, r.eff_linear,
                       r.hbm_bw_raw_bytes_per_s, r.l2_bw_bytes_per_s, hw.l2_bytes,
                       hw.num_sms, hw.tile_m, hw.tile_n, r.linear_bytes,
                       hw.kernel_launch_s, count, hw.gemm_cluster)


def _fwd_bwd_linear(m, n, k, r, hw, count=1.0):
    """(forward, backward) time of one linear: fwd (m,n,k); bwd dgrad (m,k,n) + wgrad (k,n,m)."""
    fwd = _linear(m, n, k, r, hw, count)
    bwd = _linear(m, k, n, r, hw, count) + _linear(k, n, m, r, hw, count)
    return fwd, bwd


def layer_cost(model: Model, wl: Workload, lay: Layout, hw: Hardware, r: Rates) -> LayerCost:
    t = lay.tp * 1.0
    h = model.hidden_size * 1.0
    f = model.ffn_hidden_size * 1.0
    a = model.num_attention_heads * 1.0
    g = model.num_kv_heads * 1.0
    d = head_dim_of(model)
    T = lay.mbs * wl.seq_len / lay.cp
    gated = model.gated_mlp * 1.0
    moe = model.num_experts > 1
    E = model.num_experts * 1.0
    k_top = model.top_k * 1.0

    # --- linears -------------------------------------------------------------------
    qkv_f, qkv_b = _fwd_bwd_linear(T, (a + 2 * g) * d / t, h, r, hw)
    out_f, out_b = _fwd_bwd_linear(T, h, a * d / t, r, hw)
    tokens_per_expert = jnp.where(moe, T * k_top * lay.ep / E, T)
    n_local = jnp.where(moe, E / lay.ep, 1.0)
    fc1_f, fc1_b = _fwd_bwd_linear(tokens_per_expert, f * (1 + gated) / t, h, r, hw, n_local)
    fc2_f, fc2_b = _fwd_bwd_linear(tokens_per_expert, h, f / t, r, hw, n_local)
    router_f, router_b = _fwd_bwd_linear(T, E, h, r, hw)
    router_f = jnp.where(moe, router_f, 0.0)
    router_b = jnp.where(moe, router_b, 0.0)

    # --- attention core (FlashAttention; ring attention splits queries over cp) -----
    heads_l = a / t
    kv_l = jnp.maximum(g / t, 1.0)
    s_q, s_kv = wl.seq_len / lay.cp, wl.seq_len * 1.0
    # causal: tiles above the diagonal are skipped; diagonal tiles run in full.  Ring
    # attention with load-balanced (zig-zag) chunks keeps the same fraction per rank.
    causal = 0.5 + 0.5 * FA_BLOCK_ROWS / s_kv
    # unfused (Megatron before 2022; any head dim a fused kernel does not support): full
    # score matrix, causal mask applied after the GEMM, so no tile skipping
    # (Korthikanti et al. 2022, §4); selective recompute re-runs its forward
    un = (lay.mbs, heads_l, s_q, s_kv, d, 1.0, model.dropout * 1.0, r.peak_16_flops_per_s,
          hw.eff_gemm, r.hbm_bw_raw_bytes_per_s, r.l2_bw_bytes_per_s, hw.l2_bytes, hw.num_sms,
          hw.tile_m, hw.tile_n, r.act_bytes, hw.kernel_launch_s)
    attn_f = unfused_attention_time_s(*un, backward=False)
    attn_b = unfused_attention_time_s(*un, backward=True)
    selective_extra = attn_f
    if wl.attention:
        attn_args = (lay.mbs, heads_l, kv_l, s_q, s_kv, flash_head_dim(d), causal,
                     r.peak_16_flops_per_s, hw.eff_attn, r.hbm_bw_raw_bytes_per_s,
                     r.l2_bw_bytes_per_s, hw.l2_bytes, hw.num_sms, hw.smem_per_sm_bytes,
                     r.act_bytes, hw.kernel_launch_s)
        bwd_args = attn_args[:8] + (hw.eff_attn * hw.eff_attn_bwd,) + attn_args[9:]
        fused = flash_available(d)
        attn_f = jnp.where(fused, flash_attention_time_s(*attn_args, backward=False), attn_f)
        attn_b = jnp.where(fused, flash_attention_time_s(*bwd_args, backward=True), attn_b)
        # FlashAttention's backward already recomputes S: selective recompute is free
        selective_extra = jnp.where(fused, 0.0, selective_extra)

    # --- memory-bound ---------------------------------------------------------------
    el = r.act_bytes
    rep = jnp.where(lay.sp > 0, T * h / t, T * h)          # replicated-region elements
    ffn_el = tokens_per_expert * n_local * f / t
    fwd_bytes = el * (
        2 * 2 * rep                              # two norms: read + write
        + 2 * 3 * rep                            # two residual adds
        + 2 * T * (a + g) * d / t                # rotary on Q and K (read + write)
        + ffn_el * (2 + gated) + ffn_el          # activation: read FC1 out(s), write
        + model.dropout * 2 * 2.5 * rep          # two dropouts: read, write, 1-byte mask
    )
    fp8_cast = jnp.where(wl.precision == 2,
                         3.0 * (2 * T * h + T * a * d / t + ffn_el), 0.0)
    ew_kernels = 8.0 + 2.0 * model.dropout
    mb_f = memory_bound_time_s(fwd_bytes + fp8_cast, r.hbm_bw_bytes_per_s, hw.kernel_launch_s, ew_kernels)
    mb_b = memory_bound_time_s(2.0 * fwd_bytes + 2.0 * fp8_cast, r.hbm_bw_bytes_per_s,
                               hw.kernel_launch_s, 2.0 * ew_kernels)

    fwd = qkv_f + out_f + fc1_f + fc2_f + router_f + attn_f + mb_f
    bwd = qkv_b + out_b + fc1_b + fc2_b + router_b + attn_b + mb_b

    # --- communication ----------------------------------------------------------------
    act_bytes = T * h * el
    # 2 all-reduces fwd + 2 bwd (no SP) == 2 AG + 2 RS each way (SP): same volume.
    tp_coll = group_collective_s("all_reduce", act_bytes, t, 1.0, hw)
    tp_comm = 4.0 * tp_coll
    tp_exposed = tp_comm
    if wl.tp_overlap:
        on = (lay.sp > 0) & (t > 1)
        window = qkv_f + out_f + fc1_f + fc2_f + qkv_b + out_b + fc1_b + fc2_b
        tp_exposed = jnp.where(on, tp_overlap_cost_s(tp_comm, window, t, hw.num_sms), tp_comm)
        # the overlapped GEMMs run as chunks: ring exchanges split M into tp pieces (QKV
        # and FC1 forward, proj and FC2 dgrad), pipelined reduce-scatters into
        # TP_OVERLAP_SPLITS (proj and FC2 forward).  TE issues the chunks on several
        # streams (NVTE_COMM_OVERLAP_MAX_STREAMS), so their tiles share the waves; what
        # they add is per-chunk tile quantization in M and one launch per extra chunk
        ch = lambda pieces, m, n, k, c=1.0: (_linear(m / pieces, n, k, r, hw, c * pieces)
                                             + (pieces - 1.0) * hw.kernel_launch_s
                                             - _linear(m, n, k, r, hw, c))
        split_f = (ch(t, T, (a + 2 * g) * d / t, h) + ch(t, tokens_per_expert, f * (1 + gated) / t, h, n_local)
                   + ch(TP_OVERLAP_SPLITS, T, h, a * d / t) + ch(TP_OVERLAP_SPLITS, tokens_per_expert, h, f / t, n_local))
        split_b = ch(t, T, a * d / t, h) + ch(t, tokens_per_expert, f / t, h, n_local)
        fwd = fwd + jnp.where(on, split_f, 0.0)
        bwd = bwd + jnp.where(on, split_b, 0.0)
    # ring attention: cp-1 K/V chunk exchanges fwd; bwd sends K/V and dK/dV (2x)
    kv_chunk = 2.0 * lay.mbs * s_q * kv_l * d * el
    cp_stride = t
    cp_comm = jnp.where(lay.cp > 1, 3.0 * (lay.cp - 1) * group_p2p_s(kv_chunk, cp_stride, hw), 0.0)
    a2a_bytes = T * k_top * h * el
    ep_stride = t * lay.cp
    ep_comm = jnp.where(moe, 4.0 * group_collective_s("all_to_all", a2a_bytes, lay.ep * 1.0, ep_stride, hw), 0.0)

    # --- useful FLOPs (forward + backward = 3x forward) ------------------------------------
    lin_flops = (gemm_flops(T, (a + 2 * g) * d / t, h) + gemm_flops(T, h, a * d / t)
                 + gemm_flops(tokens_per_expert, f * (1 + gated) / t, h, n_local)
                 + gemm_flops(tokens_per_expert, h, f / t, n_local))
    attn_flops = 4.0 * lay.mbs * heads_l * s_q * s_kv * d * causal
    flops = 3.0 * (lin_flops + attn_flops)
    return LayerCost(fwd, bwd, attn_f + attn_b, selective_extra, tp_comm, tp_exposed, cp_comm, ep_comm, flops)
