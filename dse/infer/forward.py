"""The forward pass pieces prefill and decode share: linears, memory-bound kernels, TP
collectives, embedding, LM head, pipeline hand-off.  Each returns :class:`OpTimes`
(seconds on one GPU) so the step can report a breakdown that sums to its total.

Operator list of one layer (vLLM / TensorRT-LLM ``LlamaDecoderLayer`` with their usual
fusions; Shoeybi et al. 2019 for the TP split):

  fused add+norm -> QKV linear -> rotary -> KV-cache append -> attention core
  -> out linear -> TP all-reduce -> fused add+norm -> FC1 (gate+up) -> SwiGLU/GeLU
  -> FC2 -> TP all-reduce

With T tokens per GPU in this pass, h hidden, f FFN, a heads, g KV heads, d = h/a,
t = tp and g_t = max(ceil(g/t), 1) KV heads per GPU (:mod:`dse.infer.kv_cache`), the
linears are (M, N, K) = QKV (T, (a/t + 2 g_t) d, h); out (T, h, a d/t);
FC1 (T, f(1+gated)/t, h); FC2 (T, h, f/t).

**Skinny GEMMs (decode).**  For small M the kernels serving stacks use do not pad the
token dimension to the large-GEMM tile: Ampere ``mma.sync`` is m16n8k16, and Hopper
kernels swap A and B for small M so the tokens become wgmma's N (8..256) — TensorRT-LLM
and CUTLASS "swap AB" — so the token tile is ``clip(pow2(M), MIN_TILE_M = 16, tile_m)``.
Such a GEMM has few output tiles, and Stream-K (Osama et al. 2023, arXiv:2301.03598;
cuBLAS/CUTLASS split-K for the same purpose) spreads its K loop over every SM.  We model
it by evaluating :func:`dse.cost.gemm.gemm_time_s` on (M, N s, K / s) with
``s = clip(floor(num_sms / m_tiles) / n_tiles, 1, K / SPLIT_K_MIN_K)`` (continuous, as
Stream-K divides K-iterations fractionally; never more slots than SMs, so one wave):
the same weight bytes and FLOPs, ``s`` times the small partial-output bytes.  For
prefill-sized M the tile is the generation's own and ``s`` = 1 once the GEMM has at
least as many tiles as SMs.

**Bandwidth.**  Inference HBM terms use the achieved, throttled bandwidth
(``Rates.hbm_bw_bytes_per_s`` = nominal x (1 - throttle) x eff_hbm): in decode the
weight and KV streams are STREAM-like reads, which is what ``eff_hbm`` measures.

**MoE.**  Experts are split over TP (no EP in one replica).  T tokens routed top-k of E
experts touch ``E_hit = E (1 - (1 - k/E)^T)`` distinct experts in expectation (uniform
routing), each seeing ``T k / E_hit`` tokens; only the touched experts' weights are read
(decode with small T reads a fraction of the experts).

**Memory-bound bytes** (per layer, T tokens, element size el): two fused add+norm
(read x and residual, write both: 4Th), rotary on Q and K (read + write),
KV append (write 2 T g_t d), activation (read (1+gated) f/t, write f/t per token);
FP8 linears add a cast per GEMM input (read 2, write 1 byte/element, as
:mod:`dse.train.layer`).  ``EW_KERNELS_PER_LAYER`` = 5 launches (2 norms, rotary,
KV append, activation).  Overlap: none (ops run back to back on one stream: sum).

**TP**: two all-reduces of T h el bytes per layer on the critical path
(:func:`dse.cost.collectives.group_collective_s`, stride 1: one NVLink domain when
``tp`` <= its size).  The vocab-parallel embedding adds one all-reduce, the LM head an
all-gather of the fp32 logits.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from dse.cost.collectives import group_collective_s, group_p2p_s
from dse.cost.elementwise import memory_bound_time_s
from dse.cost.gemm import gemm_time_s
from dse.infer.kv_cache import head_dim, kv_heads_per_gpu
from dse.spec.hardware import Hardware
from dse.spec.model import Model
from dse.train.rates import Rates

MIN_TILE_M = 16.0        # smallest token tile (mma m16; wgmma N with swap-AB)
SPLIT_K_MIN_K = 256.0    # a split-K slice keeps at least this many K elements
EW_KERNELS_PER_LAYER = 5.0
LOGIT_BYTES = 4.0        # logits are computed and sampled in fp32


class OpTimes(NamedTuple):
    """Seconds on one GPU by kind; their sum is the time of the pass (no overlap)."""

    gemm_s: object
    attention_s: object
    comm_s: object
    elementwise_s: object

    @property
    def total_s(self):
        return self.gemm_s + self.attention_s + self.comm_s + self.elementwise_s

    def scale(self, k) -> "OpTimes":
        return OpTimes(*(k * x for x in self))

    def plus(self, other: "OpTimes") -> "OpTimes":
        return OpTimes(*(x + y for x, y in zip(self, other)))


def linear_time_s(m, n, k, hw: Hardware, r: Rates, peak_flops_per_s, eff, bytes_per_el,
                  count=1.0):
    """Seconds for ``count`` GEMMs (m, n, k) with the skinny-GEMM tile and split-K choice
    described in the module docstring, on :func:`dse.cost.gemm.gemm_time_s`."""
    pow2_m = 2.0 ** jnp.ceil(jnp.log2(jnp.maximum(m, 1.0)))
    tile_m = jnp.clip(pow2_m, jnp.minimum(MIN_TILE_M, hw.tile_m), hw.tile_m)
    m_tiles = jnp.ceil(m / tile_m)
    n_tiles = jnp.ceil(n / hw.tile_n)
    slots = jnp.maximum(jnp.floor(hw.num_sms / m_tiles), 1.0)
    # (1 - 1e-6): keep ceil(n s / tile_n) <= slots against rounding
    split = jnp.clip(slots / n_tiles * (1.0 - 1e-6), 1.0,
                     jnp.maximum(k / SPLIT_K_MIN_K, 1.0))
    return gemm_time_s(m, n * split, k / split, peak_flops_per_s, eff, r.hbm_bw_bytes_per_s,
                       r.l2_bw_bytes_per_s, hw.l2_bytes, hw.num_sms, tile_m, hw.tile_n,
                       bytes_per_el, hw.kernel_launch_s, count, hw.gemm_cluster)


def experts_hit(model: Model, tokens):
    """Expected distinct experts hit by ``tokens`` tokens routing top-k of E uniformly:
    ``E (1 - (1 - k/E)^T)`` (1 for dense models)."""
    E = model.num_experts * 1.0
    return jnp.where(E > 1, E * (1.0 - (1.0 - model.top_k / E) ** tokens), 1.0)


def layer_linear_s(model: Model, tokens, tp, hw: Hardware, r: Rates):
    """Seconds of one layer's linears (QKV, out, router, FC1, FC2) for ``tokens`` tokens."""
    h = model.hidden_size * 1.0
    f = model.ffn_hidden_size * 1.0
    d = head_dim(model)
    heads = model.num_attention_heads / tp
    kv = kv_heads_per_gpu(model, tp)
    E = model.num_experts * 1.0
    moe = E > 1
    lin = lambda m, n, k, c=1.0: linear_time_s(m, n, k, hw, r, r.peak_linear_flops_per_s,
                                               r.eff_linear, r.linear_bytes, c)
    hit = experts_hit(model, tokens)
    per_expert = jnp.where(moe, tokens * model.top_k / hit, tokens)
    qkv = lin(tokens, (heads + 2.0 * kv) * d, h)
    out = lin(tokens, h, heads * d)
    fc1 = lin(per_expert, f * (1.0 + model.gated_mlp) / tp, h, hit)
    fc2 = lin(per_expert, h, f / tp, hit)
    router = jnp.where(moe, lin(tokens, E, h), 0.0)
    return qkv + out + fc1 + fc2 + router


def layer_elementwise_s(model: Model, tokens, tp, precision, hw: Hardware, r: Rates):
    """Seconds of one layer's memory-bound kernels (bytes in the module docstring)."""
    h = model.hidden_size * 1.0
    d = head_dim(model)
    heads = model.num_attention_heads / tp
    kv = kv_heads_per_gpu(model, tp)
    ffn = model.ffn_hidden_size * model.top_k / tp
    el = r.act_bytes
    gated = model.gated_mlp * 1.0
    bytes_ = el * tokens * (2.0 * 4.0 * h                   # two fused add + norm
                            + 2.0 * (heads + kv) * d        # rotary on Q, K
                            + 2.0 * kv * d                  # KV-cache append
                            + ffn * (1.0 + gated) + ffn)    # activation
    fp8_cast = jnp.where(precision == 2, 3.0 * tokens * (2.0 * h + heads * d + ffn), 0.0)
    return memory_bound_time_s(bytes_ + fp8_cast, r.hbm_bw_bytes_per_s, hw.kernel_launch_s,
                               EW_KERNELS_PER_LAYER)


def layer_comm_s(model: Model, tokens, tp, hw: Hardware, r: Rates):
    """Two TP all-reduces of the ``tokens x h`` activations (exposed)."""
    size = tokens * model.hidden_size * r.act_bytes
    return 2.0 * group_collective_s("all_reduce", size, tp * 1.0, 1.0, hw)


def embedding(model: Model, tokens, tp, hw: Hardware, r: Rates) -> OpTimes:
    """Vocab-parallel embedding lookup (read + write ``T h``) and its all-reduce."""
    size = tokens * model.hidden_size * r.act_bytes
    ew = memory_bound_time_s(2.0 * size, r.hbm_bw_bytes_per_s, hw.kernel_launch_s, 1.0)
    comm = group_collective_s("all_reduce", size, tp * 1.0, 1.0, hw)
    return OpTimes(0.0 * ew, 0.0 * ew, comm, ew)


def lm_head(model: Model, tokens, sequences, tp, hw: Hardware, r: Rates) -> OpTimes:
    """Final norm over ``tokens``, LM head on the last token of each of ``sequences``
    (16-bit GEMM (B, V/t, h)), all-gather of the fp32 logits, softmax + sampling
    (read the logits twice, 2 kernels)."""
    h = model.hidden_size * 1.0
    V = model.vocab_size * 1.0
    gemm = linear_time_s(sequences, V / tp, h, hw, r, r.peak_16_flops_per_s, hw.eff_gemm,
                         r.act_bytes)
    logits = sequences * V * LOGIT_BYTES
    comm = group_collective_s("all_gather", logits, tp * 1.0, 1.0, hw)
    norm = memory_bound_time_s(2.0 * tokens * h * r.act_bytes, r.hbm_bw_bytes_per_s,
                               hw.kernel_launch_s, 1.0)
    sample = memory_bound_time_s(2.0 * logits, r.hbm_bw_bytes_per_s, hw.kernel_launch_s, 2.0)
    return OpTimes(gemm, 0.0 * gemm, comm, norm + sample)


def stage_pass(model: Model, layer: OpTimes, head: OpTimes, emb: OpTimes, tokens, tp, pp,
               hw: Hardware, r: Rates) -> OpTimes:
    """One micro-batch through the heaviest pipeline stage: ``ceil(L/pp)`` layers, the LM
    head (last stage), the embedding (only when pp = 1: with pp > 1 it sits on the first,
    lighter stage) and, with pp > 1, the hand-off of ``T h`` activations to the next
    stage (:func:`dse.cost.collectives.group_p2p_s`, stages ``tp`` ranks apart)."""
    layers = jnp.ceil(model.num_layers / pp)
    single = jnp.where(pp > 1, 0.0, 1.0)
    p2p = group_p2p_s(tokens * model.hidden_size * r.act_bytes, tp * 1.0, hw)
    hand_off = OpTimes(0.0, 0.0, jnp.where(pp > 1, p2p, 0.0), 0.0)
    return layer.scale(layers).plus(head).plus(emb.scale(single)).plus(hand_off)


def stage_time(model: Model, tokens, sequences, attention_s, tp, pp, precision, hw: Hardware,
               r: Rates) -> OpTimes:
    """One micro-batch through the heaviest stage: the shared layer ops for ``tokens``
    tokens with the caller's attention time (prefill: FlashAttention over the prompt;
    decode: the KV-cache read), plus LM head and embedding (:func:`stage_pass`)."""
    layer = OpTimes(layer_linear_s(model, tokens, tp, hw, r), attention_s,
                    layer_comm_s(model, tokens, tp, hw, r),
                    layer_elementwise_s(model, tokens, tp, precision, hw, r))
    head = lm_head(model, tokens, sequences, tp, hw, r)
    emb = embedding(model, tokens, tp, hw, r)
    return stage_pass(model, layer, head, emb, tokens, tp, pp, hw, r)


def micro_batches(batch, pp):
    """Pipeline micro-batching of one replica's batch: ``m = min(batch, pp)`` micro-batches
    of ``batch / m`` sequences (every stage busy once batch >= pp)."""
    m = jnp.minimum(batch * 1.0, pp * 1.0)
    return m, batch / m
