"""Attention core time on one GPU: FlashAttention tile loop, and the unfused path.

FlashAttention-2 (Dao 2023, arXiv:2307.08691, Alg. 1-2).  One thread block owns a
``Br``-row tile of Q for one (batch, head) and streams K/V in ``Bc``-row tiles through
shared memory.  Block sizes come from the shared-memory budget:
``Br = 128``, ``Bc = min(128, (smem/bytes - Br*d) / (2*d))`` (Q tile plus one K and one V
tile resident).

* FLOPs: forward ``4 * s_q * s_kv * d`` per head (QK^T and PV); causal masking skips the
  tiles above the diagonal, ``causal_frac = 1 - 0.5*s_q/s_kv`` of the square for s_q=s_kv
  chunked queries (=0.5 for plain causal self-attention).  Backward does five matmuls
  of the same size (recomputed S, dP, dV, dQ, dK): 2.5x the forward FLOPs.
* Work units ``batch*heads*ceil(s_q/Br)`` are spread in waves over the SMs (wave
  quantization, as for GEMMs).
* HBM traffic: Q and O once, K and V once per KV head if the K/V of the heads that run
  concurrently fit in L2, otherwise once per Q tile (the FA2 paper's
  Theta(N^2 d^2 / M) re-read term); backward also reads O, dO and writes dQ, dK, dV and
  accumulates dQ in fp32 per KV tile (through L2).
* Softmax exponentials: one per score element computed (forward: ``P = exp(S - m)``;
  backward: P recomputed), on the special-function units (MUFU.EX2), ``exp_per_s`` of
  them per second (:func:`dse.cost.rates.exp_rate`).  They add to the tensor-core time
  rather than hide under it: within a tile the second matmul waits for the softmax of the
  first (NVIDIA, "Making Softmax More Efficient with NVIDIA Blackwell Ultra", 2026: on
  GB200 the tensor cores idle between BMM1 and BMM2 while MUFU.EX2 runs; doubling the SFU
  rate on GB300 gives ~35 % more FP8 attention-forward throughput on DeepSeek-V3 shapes,
  which the sum reproduces -- 1.30-1.34x for 640 matmul FLOPs per score at 60-70 % of the
  fp8 peak -- and a max() of the two would not).  So a fused kernel's compute time is
  ``flops / (peak eff) + scores / exp_per_s``: per score element ``4d`` matmul FLOPs
  forward (``10d`` backward) against one exponential, so small head dims and GPUs whose
  tensor peak outgrew their SFUs (Blackwell: 512 tensor FLOPs per exponential, Hopper 256,
  Ampere 128) pay most.  ``eff`` is the tensor-core part only (:mod:`dse.spec.efficiency`
  ``sfu``).
* Overlap: roofline max of compute, HBM and L2 time plus a launch cost.

The unfused path (Megatron's fused softmax, Korthikanti et al. 2022 §4) runs QK^T and PV
as batched GEMMs and writes the ``a*s_q*s_kv`` score matrix to HBM for softmax (and
dropout): those bytes are what make it memory-bound at long sequence.
"""

from __future__ import annotations

import jax.numpy as jnp

from dse.cost.gemm import gemm_time_s

FA_BLOCK_ROWS = 128.0
FA_MAX_HEAD_DIM = 256.0
FA_HEAD_DIM_ALIGN = 8.0


def flash_available(d):
    """Whether a fused (Flash) attention kernel exists for head dimension ``d``.

    FlashAttention-2 and -3 (Dao-AILab/flash-attention README, "head dimensions up to
    256") and cuDNN's fused SDPA support ``d <= 256``; above that every framework falls
    back to the unfused path (materialised scores).  Head dims that are not a multiple
    of 8 are zero-padded to one (``flash_attn_interface``: ``head_size_og % 8``), which
    :func:`flash_head_dim` charges."""
    return d <= FA_MAX_HEAD_DIM


FA2_HEAD_DIM_TILE = 32.0      # FlashAttention-2 kernel templates: head dims 32, 64, ..., 192, 256
FA2_MAX_TILED_HEAD_DIM = 192.0


def flash_head_dim(d, fa2=False):
    """Head dimension the fused kernel computes with.

    Every fused kernel pads to ``d8 = ceil(d/8)*8`` (16-byte loads).  A
    FlashAttention-2-class kernel (``fa2`` True, :mod:`dse.cost.attention_kernel`) then
    runs the template instantiated for the next head-dim tile: flash-attn 2.x
    ``csrc/flash_attn/flash_api.cpp`` ``head_size_rounded = head_size <= 192 ?
    round_multiple(head_size, 32) : 256`` (kernels ``flash_fwd_hdim{32,64,96,128,160,192,256}``),
    so its MMAs cover ``ceil(d8/32)*32`` columns (256 above 192): a head dim of 80 costs
    as 96.  The native kernels (cuDNN fused SDPA) take any multiple of 8."""
    d8 = jnp.ceil(d / FA_HEAD_DIM_ALIGN) * FA_HEAD_DIM_ALIGN
    tiled = jnp.where(d8 <= FA2_MAX_TILED_HEAD_DIM,
                      jnp.ceil(d8 / FA2_HEAD_DIM_TILE) * FA2_HEAD_DIM_TILE, FA_MAX_HEAD_DIM)
    return jnp.where(fa2, tiled, d8)


def _fa_blocks(d, smem_per_sm_bytes, bytes_per_el):
    bc = (smem_per_sm_bytes / bytes_per_el - FA_BLOCK_ROWS * d) / (2.0 * d)
    return jnp.clip(bc, 16.0, 128.0)


def exp_time_s(scores, exp_per_s):
    """Seconds of ``scores`` softmax exponentials at ``exp_per_s`` (module docstring); 0
    where the rate is not modelled (``exp_per_s`` = 0)."""
    return jnp.where(exp_per_s > 0, scores / jnp.where(exp_per_s > 0, exp_per_s, 1.0), 0.0)


def flash_attention_terms(batch, heads, kv_heads, s_q, s_kv, d, causal_frac,
                          peak_flops_per_s, eff, hbm_bw_bytes_per_s, l2_bw_bytes_per_s,
                          l2_bytes, num_sms, smem_per_sm_bytes, bytes_per_el,
                          backward=False, exp_per_s=0.0):
    """The roofline terms ``(t_compute, t_hbm, t_l2)`` of one FlashAttention forward (or
    backward) call on one GPU (module docstring), seconds, and its HBM bytes.
    ``t_compute`` = tensor-core time + the softmax exponentials (:func:`exp_time_s`), both
    over the same wave-quantized work units."""
    bc = _fa_blocks(d, smem_per_sm_bytes, bytes_per_el)
    q_tiles = jnp.ceil(s_q / FA_BLOCK_ROWS)
    units = batch * heads * q_tiles
    waves = jnp.ceil(units / num_sms)
    mm = 5.0 if backward else 2.0          # matmuls of size Br x s_kv x d per unit
    scores_per_unit = FA_BLOCK_ROWS * s_kv * causal_frac
    flops_per_unit = mm * 2.0 * scores_per_unit * d
    t_compute = (waves * num_sms * flops_per_unit / (peak_flops_per_s * eff)
                 + exp_time_s(waves * num_sms * scores_per_unit, exp_per_s))

    kv_bytes_per_head = 2.0 * s_kv * d * bytes_per_el
    group = heads / kv_heads                              # query heads per KV head
    concurrent_kv_heads = jnp.maximum(num_sms / (q_tiles * group), 1.0)
    miss = jnp.clip(1.0 - l2_bytes / (concurrent_kv_heads * kv_bytes_per_head), 0.0, 1.0)
    kv_hbm = batch * kv_heads * kv_bytes_per_head * (1.0 + (q_tiles * group - 1.0) * miss * causal_frac)
    qo_bytes = batch * heads * s_q * d * bytes_per_el
    io = (2.0 if not backward else 4.0) * qo_bytes      # bwd: Q, O, dO in; dQ out
    kv_out = kv_hbm if backward else 0.0                 # bwd writes dK, dV
    t_hbm = (io + kv_hbm + kv_out) / hbm_bw_bytes_per_s
    l2_traffic = units * kv_bytes_per_head * causal_frac
    dq_accum = jnp.where(backward, batch * heads * s_q * d * 4.0 * jnp.ceil(s_kv / bc) * causal_frac, 0.0)
    t_l2 = (l2_traffic + dq_accum) / l2_bw_bytes_per_s
    return t_compute, t_hbm, t_l2, io + kv_hbm + kv_out


def flash_attention_time_s(batch, heads, kv_heads, s_q, s_kv, d, causal_frac,
                           peak_flops_per_s, eff, hbm_bw_bytes_per_s, l2_bw_bytes_per_s,
                           l2_bytes, num_sms, smem_per_sm_bytes, bytes_per_el,
                           kernel_launch_s, backward=False, exp_per_s=0.0):
    """Seconds for one FlashAttention forward (or backward) call on one GPU:
    ``max(t_compute, t_hbm, t_l2)`` of :func:`flash_attention_terms` plus one launch
    (two for the backward: dQ/dK/dV kernel and the dQ conversion)."""
    t_compute, t_hbm, t_l2, _ = flash_attention_terms(
        batch, heads, kv_heads, s_q, s_kv, d, causal_frac, peak_flops_per_s, eff,
        hbm_bw_bytes_per_s, l2_bw_bytes_per_s, l2_bytes, num_sms, smem_per_sm_bytes,
        bytes_per_el, backward, exp_per_s)
    return jnp.maximum(jnp.maximum(t_compute, t_hbm), t_l2) + kernel_launch_s * (2.0 if backward else 1.0)


# Megatron's unfused softmax when its fused kernel is not available
# (``FusedScaleMaskSoftmax.forward_torch_softmax``, megatron/model/fused_softmax.py in
# Megatron-LM and Megatron-DeepSpeed): ``x.float()``, ``x * scale``, the in-place
# ``masked_fill_`` of the causal mask, ``torch.nn.Softmax`` and ``.half()`` -- five kernels
# instead of one, in passes of 2-byte score elements r2w4 + r4w4 + r4w4 + r4w4 + r4w2 = 18
# (fused: r2w2 = 2); backward the five autograd nodes in reverse, grad ``.float()`` r2w4,
# softmax backward r4+r4 w4, ``masked_fill`` r4w4, ``mul`` r4w4, ``.half()`` r4w2 = 20
# (fused: 3).
SOFTMAX_FALLBACK_EXTRA_KERNELS = 4.0
SOFTMAX_FALLBACK_PASSES = (18.0, 20.0)     # (forward, backward); fused 2 and 3
FUSED_SOFTMAX_MAX_SK = 4096.0


def fused_softmax_available(batch, heads, s_q, s_kv):
    """Whether Megatron's fused scale-mask-softmax kernel runs for causal scores of
    ``batch x heads`` (heads per TP rank) ``s_q x s_kv`` matrices: 1.0 or 0.0.

    ``FusedScaleMaskSoftmax.is_kernel_available`` (Megatron-LM / Megatron-DeepSpeed
    megatron/model/fused_softmax.py): ``16 < sk <= 4096``, ``sq % 4 == 0``, ``sk % 4 ==
    0``, ``attn_batches = b * np`` a multiple of 4 and, for the causal
    (upper-triangular) kernel, of ``batch_per_block`` (``get_batch_per_block`` in
    ``scaled_upper_triang_masked_softmax.h``: 128 threads per block, one warp per row,
    two rows per warp when ``next_pow2(sk) <= 128``: 8 rows, else 4).  Otherwise the
    softmax runs as five PyTorch kernels in fp32 (:data:`SOFTMAX_FALLBACK_PASSES`): 16
    heads on tp 8 at micro-batch 1 (``b * np = 2``) is such a case."""
    attn_batches = batch * heads
    per_block = jnp.where(2.0 ** jnp.ceil(jnp.log2(jnp.maximum(s_kv, 1.0))) <= 128.0, 8.0, 4.0)
    ok = ((s_kv > 16.0) & (s_kv <= FUSED_SOFTMAX_MAX_SK) & (jnp.mod(s_q, 4.0) == 0)
          & (jnp.mod(s_kv, 4.0) == 0) & (jnp.mod(attn_batches, 4.0) == 0)
          & (jnp.mod(attn_batches, per_block) == 0))
    return jnp.where(ok, 1.0, 0.0)


def unfused_attention_time_s(batch, heads, s_q, s_kv, d, causal_frac, dropout,
                             peak_flops_per_s, eff, hbm_bw_bytes_per_s, l2_bw_bytes_per_s,
                             l2_bytes, num_sms, tile_m, tile_n, bytes_per_el,
                             kernel_launch_s, backward=False, softmax_fused=1.0):
    """Seconds for the unfused attention core: two batched GEMMs plus a softmax (and
    dropout) pass over the materialized ``heads x s_q x s_kv`` scores; the softmax is
    Megatron's fused kernel where ``softmax_fused`` is 1, else the five-kernel fp32
    PyTorch path (:func:`fused_softmax_available`)."""
    count = batch * heads
    g = lambda m, n, k: gemm_time_s(m, n, k, peak_flops_per_s, eff, hbm_bw_bytes_per_s,
                                    l2_bw_bytes_per_s, l2_bytes, num_sms, tile_m, tile_n,
                                    bytes_per_el, kernel_launch_s, count=count)
    mm = g(s_q, s_kv, d) + g(s_q, d, s_kv)
    scores = count * s_q * s_kv * bytes_per_el
    # forward: fused scale-mask-softmax reads and writes the scores; dropout reads them
    # and writes its output plus a 1-byte mask (2.5 passes at 2 B/element).
    # backward: dropout grad (read grad + mask, write: 2.5), softmax grad (read output
    # and grad, write: 3).
    softmax = jnp.where(softmax_fused > 0, 2.0, SOFTMAX_FALLBACK_PASSES[0])
    if backward:
        mm = 2.0 * mm
        softmax = jnp.where(softmax_fused > 0, 3.0, SOFTMAX_FALLBACK_PASSES[1])
    passes = softmax + 2.5 * dropout
    launches = 2.0 + (1.0 - softmax_fused) * SOFTMAX_FALLBACK_EXTRA_KERNELS
    return mm + passes * scores / hbm_bw_bytes_per_s + launches * kernel_launch_s


def decode_compute_s(batch, heads, context_len, d, peak_flops_per_s, eff, exp_per_s=0.0):
    """Compute side of one decode attention step: ``4 b a c d / (peak eff)`` matmul time
    plus ``b a c`` softmax exponentials (:func:`exp_time_s`, module docstring)."""
    flops = 4.0 * batch * heads * context_len * d
    return flops / (peak_flops_per_s * eff) + exp_time_s(batch * heads * context_len, exp_per_s)


def decode_attention_time_s(batch, heads, kv_heads, context_len, d, peak_flops_per_s, eff,
                            hbm_bw_bytes_per_s, bytes_per_el, kernel_launch_s, exp_per_s=0.0):
    """One decode step's attention over a ``context_len``-token KV cache (FlashDecoding,
    Dao et al. 2023, "Flash-Decoding for long-context inference": the KV sequence is split
    over the SMs and a second kernel reduces the partial softmaxes, so even batch 1
    streams at full bandwidth).  Roofline with two launches:
    ``bytes = 2 b c g d el + 2 b a d el`` (K, V read; Q read, O write),
    ``t = max(decode_compute_s, bytes / hbm_bw) + 2 launch`` (:func:`decode_compute_s`:
    ``4 b a c d`` FLOPs and ``b a c`` exponentials)."""
    bytes_ = decode_attention_bytes(batch, heads, kv_heads, context_len, d, bytes_per_el)
    t_c = decode_compute_s(batch, heads, context_len, d, peak_flops_per_s, eff, exp_per_s)
    return jnp.maximum(t_c, bytes_ / hbm_bw_bytes_per_s) + 2.0 * kernel_launch_s


def decode_attention_bytes(batch, heads, kv_heads, context_len, d, bytes_per_el):
    """HBM bytes of :func:`decode_attention_time_s`."""
    return 2.0 * batch * context_len * kv_heads * d * bytes_per_el + 2.0 * batch * heads * d * bytes_per_el


# ---------------------------------------------------------------------------------------
# Windowed layers: sliding-window and chunked attention (the one definition, for the
# training graph and the serving graph alike: dse.graph.ops.with_window).
# ---------------------------------------------------------------------------------------

def windowed_kv_len(kv_len, window):
    """Cached keys one query at KV length ``kv_len`` reads in a windowed layer:
    ``min(kv_len, window)``.  Sliding window (Mistral 7B, Jiang et al. 2023
    arXiv:2310.06825 §2; gpt-oss ``sliding_window`` = 128): exact.  Chunked attention
    (Llama 4, ``attention_chunk_size`` = 8192): a query reads the ``kv_len mod C`` keys
    of its own chunk, which a mean-context model cannot place, so ``min(kv_len, C)`` --
    exact up to one chunk, an upper bound beyond (the engines keep at most one chunk:
    vLLM v1 ``ChunkedLocalAttentionManager`` frees the blocks of past chunks,
    ``SlidingWindowManager`` those left of the window; TensorRT-LLM's per-layer
    ``max_attention_window``).  It is also what the KV cache holds per windowed layer
    (:func:`dse.infer.kv_cache.kv_cache_bytes`)."""
    return jnp.minimum(kv_len, window)


def _sliding_integral(y, cap):
    """``integral_0^y min(u, cap) du = m (y - m / 2)``, ``m = min(y, cap)``."""
    m = jnp.minimum(y, cap)
    return m * (y - 0.5 * m)


def windowed_causal_fraction(s_kv, causal, window, chunked):
    """Share of the ``s_q x s_kv`` score square a FlashAttention call computes in a
    windowed layer, for queries spread over the whole causal sequence (a prompt's
    prefill, a training sequence, or its load-balanced context-parallel share): the mean
    keys a query row's tile loop visits, over query positions x uniform in [0, s_kv],
    divided by ``s_kv``; never above the full-causal ``causal``.

    * full causal (reference): ``x + Br/2`` keys (the diagonal tile half-masked), mean
      ``s_kv/2 + Br/2`` -- :func:`dse.graph.ops.causal_fraction`;
    * sliding window w (FlashAttention-2 ``window_size=(w, 0)`` skips the key tiles left
      of the band; Dao-AILab/flash-attention ``flash_fwd_kernel.h`` ``n_block_min``):
      ``min(x + Br/2, w + Br)`` keys (a half-masked tile at each edge of the band);
    * chunked (Llama 4 ``attention_chunk_size`` C, a block-diagonal causal mask; vLLM
      runs it as local attention over virtual batches of one chunk each,
      ``make_local_attention_virtual_batches``): ``(x mod C) + Br/2`` keys.

    Both equal the full-causal ``x + Br/2`` while ``x <= w`` (``x < C``), so a sequence
    no longer than the window costs what full causal attention costs."""
    s = jnp.maximum(s_kv, 1.0)
    half = 0.5 * FA_BLOCK_ROWS
    slide = (_sliding_integral(s + half, window + FA_BLOCK_ROWS) - _sliding_integral(half, window + FA_BLOCK_ROWS)) / s
    n_full = jnp.floor(s / window)
    rest = s - n_full * window
    chunk = (n_full * window * window * 0.5 + 0.5 * rest * rest) / s + half
    keys = chunk if chunked else slide
    return jnp.minimum(keys / s, causal)
