"""The forward pass prefill and decode share, as the operator graph of one pipeline-stage
pass (:func:`forward_ops`: linears, attention, memory-bound kernels, TP collectives,
embedding, LM head, pipeline hand-off) and its reduction to :class:`OpTimes` (seconds on
one GPU by kind: GEMM, attention, communication, element-wise), which sums to the pass.

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
``s = clip(floor(num_sms / m_tiles) / n_tiles, 1, K / 256)`` (:func:`dse.graph.ops.skinny_split`) (continuous, as
Stream-K divides K-iterations fractionally; never more slots than SMs, so one wave):
the same weight bytes and FLOPs, ``s`` times the small partial-output bytes.  For
prefill-sized M the tile is the generation's own and ``s`` = 1 once the GEMM has at
least as many tiles as SMs.

**Bandwidth.**  Inference HBM terms use the achieved, throttled bandwidth
(``Rates.hbm_bw_bytes_per_s`` = nominal x (1 - throttle) x eff_hbm): in decode the
weight and KV streams are STREAM-like reads, which is what ``eff_hbm`` measures.

**Sparse attention** (DSA, :mod:`dse.spec.model`; DeepSeek-V3.2-Exp report §2.1): the
attention core attends the ``index_topk`` keys the lightning indexer picks (the window
of :func:`dse.graph.ops.with_window`), and every layer adds :func:`indexer_ops`: the
indexer's three replicated projections, its scoring of every cached key (an MQA-shaped
fp8 pass, DeepGEMM ``fp8_mqa_logits`` / ``fp8_paged_mqa_logits`` in vLLM and SGLang)
and the top-k selection over the scores.

**MoE.**  The MoE group of a stage is its ``tp x dp`` GPUs (``dp`` attention
data-parallel ranks, default 1); the experts are split over ``ep`` of them and each
expert's FFN over the other ``moe_tp = tp dp / ep`` (TensorRT-LLM ``moe_tp_size x
moe_ep_size = tp_size``, docs "Expert Parallelism in TensorRT-LLM"; vLLM
``--enable-expert-parallel`` turns the (DP x TP) MoE group from TP into EP, docs
"Expert Parallel Deployment" / "Data Parallel Deployment"; SGLang ``--ep-size`` with
``--enable-dp-attention``, docs "Expert Parallelism" and "DP, DPA").  So the per-GPU
expert weights are ``E f / (tp dp)`` whatever ``ep`` is; EP changes the GEMM shapes
(fewer local experts, each whole) and the traffic.  The MoE layer sees the tokens of
the whole group, ``T_g = T dp``; each GPU holds ``E_l = E / ep`` experts, which receive
``T_g k / ep`` token-expert pairs (uniform routing) and of which ``E_l (1 - (1 - k/E)^T_g)``
are touched in expectation, each seeing ``T_g k / (ep E_hit,l)`` tokens; only the touched
experts' weights are read (decode with small T reads a fraction of the experts).  With
``ep`` > 1 the layer is costed on the most loaded EP rank: its pairs are the mean times
:func:`dse.cost.load_balance.ep_load_factor` (expected maximum of multinomial counts), and
the distinct experts whose weights it streams are the busiest rank's share of the
``E_hit = E (1 - (1 - k/E)^T_g)`` touched ones,
:func:`dse.cost.load_balance.ep_busiest_experts` (hypergeometric maximum): a decode batch
of 4 on DeepSeek-R1 (256 experts, top-8) touches ~30 experts, 3.8 per rank of EP 8 on
average, 7.3 on the busiest by the bound (6.6 simulated), which the barrier at the layer's
end waits for.
The routing passes around the grouped GEMMs -- top-k, expert sort, permute, finalize --
are one memory pass of :func:`dse.infer.moe_serving.routing_bytes` in
``MOE_ROUTING_KERNELS`` launches (:mod:`dse.infer.moe_serving` has the engine sources).

* A checkpoint with MXFP4 experts and bf16 elsewhere (``Model.mxfp4_experts``, gpt-oss)
  served quantized runs its experts W4A8 (Blackwell) / W4A16 (Hopper) and its other
  linears in bf16 (:func:`dse.infer.moe_serving.mxfp4_expert_rates`, sources there).
* Expert GEMMs run at ``MOE_GROUPED_GEMM_EFF`` of a dense GEMM's compute efficiency
  (grouped GEMM over the permuted tokens; the constant's comment has the sources and
  the fit).
* ``dp`` = 1 (attention TP): every GPU of the group holds all T tokens; the TP
  all-reduce after the MoE layer also combines the EP partials (vLLM FusedMoE
  ``reduce_results``; SGLang's default ``--moe-a2a-backend none``): no all-to-all.
* ``dp`` > 1 (attention DP, DeepSeek-V3 / SGLang DP attention; ``ep`` divides ``tp dp``:
  ``ep = tp dp`` full EP, ``moe_tp`` = 1; smaller ``ep`` TP-splits each expert over
  ``moe_tp = tp dp / ep``, :mod:`dse.infer.expert_parallel`): each DP rank runs attention
  (TP over ``tp``) on its own T tokens and its own requests and KV cache; the MoE layer
  then sees the ``T_g = T dp`` tokens of the group through an all-gather and hands each
  rank its tokens' sums back through a reduce-scatter
  (:func:`dse.infer.moe_serving.dp_gather_bytes`, the sources there: TensorRT-LLM
  ``CutlassFusedMoE`` "post-quant allgather" + ``reducescatter``, the default of the
  engine the attention-DP rows of the data run; vLLM's default
  ``allgather_reducescatter`` all2all backend; SGLang DP attention's gather / scatter),
  replacing the MoE-side TP all-reduce.  Each GPU's fused MoE kernel runs over all
  ``T_g`` rows (its finalize writes every one of them), its local experts only.  The
  DeepEP / one-sided all-to-all kernels (``T k h`` per GPU and direction) are opt-in
  backends of those engines and not what this graph charges.

**MLA, shared experts, dense layers** (the training graph's conventions,
:mod:`dse.graph.train`): with MLA the QKV linear becomes q down (T, q_lora, h) and kv down
(T, r + rho, h), replicated on every TP rank (vLLM ``ReplicatedLinear``
``fused_qkv_a_proj``), and q up (T, a (n + rho)/t, q_lora) and kv up (T, a (n + v)/t, r);
out proj is (T, h, a v/t).  In prefill kv up decompresses the prompt's latents (vLLM
``MLACommonImpl._forward_prefill``, MHA over the decompressed heads); in decode the same
weights are absorbed into the query and output (``W_UK``, ``W_UV`` batched over the local
heads, DeepSeek-V2 arXiv:2405.04434 §2.1.2; vLLM ``_forward_decode``): the same weight
bytes and FLOPs as the one (T, a (n + v)/t, r) GEMM charged here.  The KV-cache append
writes the ``r + rho`` latent (:func:`dse.spec.model.kv_cache_elems_per_token`).  Shared
experts are an always-active MLP on the rank's T tokens, split over ``tp``.  A MoE
model's dense layers enter as the mean layer (MoE operators ``1 - x`` times, a dense MLP
``x`` times, :func:`dse.spec.model.dense_layer_fraction`): exact for pp = 1, the mean per
layer with pp > 1.

**Memory-bound bytes** (per layer, T tokens, element size el): two fused add+norm
(read x and residual, write both: 4Th), rotary on Q and K (read + write),
KV append (write 2 T g_t d), activation (read (1+gated) f/t, write f/t per token);
FP8 linears add a cast per GEMM input (read 2, write 1 byte/element, as
:mod:`dse.train.layer`); fp4 (NVFP4 / MXFP4) the same with 0.5 byte plus block scales
written.  Launches (:func:`memory_pass_kernels`): ``EW_KERNELS_PER_LAYER`` = 5 (2 norms,
rotary, KV append, activation); a MoE layer with shared experts runs their activation
apart from the routed experts' (vLLM / SGLang ``DeepseekV2MoE``: ``shared_experts`` is its
own MLP with its own ``SiluAndMul``; the fused MoE kernel applies the routed one between
its two grouped GEMMs); MLA adds its latent RMSNorms (``q_a_layernorm`` where
``q_lora_rank`` > 0, ``kv_a_layernorm``: HF / vLLM / SGLang / TensorRT-LLM
``DeepseekV3Attention``).  **Quantization kernels**: an engine whose model code is
PyTorch launches the fp8 / fp4 quantization of every linear's input as a kernel of its
own before the GEMM (vLLM ``apply_fp8_linear`` -> ``scaled_fp8_quant``, block-scaled
``apply_w8a8_block_fp8_linear`` -> ``per_token_group_quant_fp8``; SGLang the same;
TensorRT-LLM's PyTorch backend ``FP8BlockScalesLinearMethod.apply`` ->
``fp8_quantize_1x128``, ``NVFP4LinearMethod`` -> ``fp4_quantize``;
``EngineProfile.quant_kernels``), one per distinct input: attention 2 (QKV, out) or,
with MLA, 4 (the fused q/kv down projection, q up, kv up / the absorbed ``W_UK``, out);
MLP 2 (fc1, fc2), a MoE layer 2 for its routed experts (the fused MoE kernel's two
grouped GEMMs) and 2 more for shared experts; only the experts' 2 for an MXFP4-expert
checkpoint with bf16 linears.  Compiled TensorRT engines and TurboMind fuse the
quantization into the producing kernel (0).  The bytes of these passes are the
``fp8_cast`` term above either way; the kernels cost their launch (the CUDA-graph gap,
:mod:`dse.infer.engines`) and, in an eager pass, the host's issue time per kernel.
Overlap: none (ops run back to back on one stream: sum).

**TP**: two all-reduces of T h el bytes per layer on the critical path
(:func:`dse.cost.collectives.group_collective_s`, stride 1: one NVLink domain when
``tp`` <= its size), each plus a kernel launch and NCCL's base latency
(:func:`collective_fixed_s`).  The vocab-parallel embedding adds one all-reduce, the LM head an
all-gather of the fp32 logits.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from dse.graph.ops import (P2P, Attention, Collective, Gemm, KVRead, MemPass, host_kernels, time_s,
                           with_window)
from dse.spec.hardware import Hardware
from dse.spec.layout import PRECISION_FP8
from dse.spec.model import (Model, dense_layer_fraction, expert_ffn, head_dim_of, is_mla,
                            kv_cache_elems_per_token, kv_heads_per_rank, linear_conv_dim,
                            linear_projection_widths, linear_share, select, shared_ffn)
from dse.cost.linear_attention import deltanet_chunk_flops
from dse.infer.kv_cache import indexer_key_bytes, layer_state_bytes
from dse.cost.rates import Rates, linear_el_bytes
from dse.cost.load_balance import ep_busiest_experts, ep_load_factor
from dse.infer.moe_serving import (MOE_ROUTING_KERNELS, bf16_linear_rates, dp_gather_bytes,
                                   mxfp4_cast_bytes, mxfp4_expert_rates, routing_bytes)

EW_KERNELS_PER_LAYER = 5.0
# NCCL's fixed base latency of a low-latency (LL protocol) ring collective, charged once
# per call on top of the per-hop latencies: baseLat[Ring][LL] = 6.6 us in NCCL
# src/graph/tuning.cc (the hardware catalog's header quotes it and notes the alpha-beta
# model of dse.cost.collectives does not carry it).  Serving stacks' small-message
# all-reduces (NCCL, or TensorRT-LLM / vLLM custom one-shot all-reduce kernels with a
# cross-GPU flag barrier) pay a fixed cost of this order per call.
NCCL_BASE_LATENCY_S = 6.6e-6
# Compute efficiency of an MoE layer's expert GEMMs relative to a dense GEMM of the same
# shape (it multiplies ``eff_gemm`` / ``eff_gemm_fp8`` / ``eff_gemm_fp4`` in the compute term only; the
# weight-read term of small-batch decode is unchanged).  The engines of the calibration
# data run the experts as one grouped GEMM over a token-permuted layout (TensorRT-LLM's
# MoE plugin, CUTLASS grouped GEMM; vLLM / SGLang ``fused_moe``), which pays for small
# and ragged per-expert problems, per-expert M padding to the tile, expert scheduling
# and the gather of permuted rows (TensorRT-LLM tech blog "MoE as Dense GEMM";
# arXiv:2501.16103 reaches 91 % of peak only with a purpose-built static-batching MoE
# kernel).  FITTED, one global value: 0.5 brings the 10 Mixtral-8x7B rows of
# trtllm_perf_v013 (TP 2-8, H100 / H200 fp8, A100 fp16) and mlperf_inf_v41 (TP 1) to
# within about 10 % of their measured throughput (scan 1.0 / 0.7 / 0.55 / 0.45: mean
# error +32 / +16 / +4 / -6 % on the trtllm-bench rows; TP1 +82 / +42 / +18 / +1 %).
# No vLLM / SGLang MoE row exists: their fused_moe kernels are assumed to be alike.
# Re-checked once grouped GEMMs stopped being split-K'd per expert (dse.graph.ops.skinny_split
# counts the tiles of all the experts): mean absolute error over every measured figure of
# the Mixtral rows, MLPerf v4.1 (10) / trtllm-bench v0.13 (6): 0.5 -> 4.8 / 8.0 %;
# 0.45 -> 53 / 12.6 % (the Server rows' arrival rate nears the modelled capacity);
# 0.55 -> 26.9 / 4.1 %.
MOE_GROUPED_GEMM_EFF = 0.5
LOGIT_BYTES = 4.0        # logits are computed and sampled in fp32
# FP8 context attention (TensorRT-LLM ``use_fp8_context_fmha``, which ``trtllm-bench build``
# sets for FP8 quantization: its build log in docs/source/performance/perf-benchmarking.md,
# "Set use_fp8_context_fmha to True"): the prompt's Q K^T and P V run on FP8 tensor cores.
# Speed-up over the 16-bit kernel: FlashAttention-3 (Shah et al. 2024, arXiv:2407.08608,
# abstract) reaches 740 TFLOP/s with FP16 and "close to 1.2 PFLOP/s with FP8" on H100,
# 1200 / 740 = 1.62, applied to the attention's tensor rate (the exponentials keep their
# own unit, dse.cost.attention).  Not fitted; the same ratio taken for Blackwell.
FP8_CONTEXT_ATTN_SPEEDUP = 1200.0 / 740.0


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


class ForwardGraph(NamedTuple):
    """One micro-batch through one pipeline stage: per-layer ops (run ``ceil(L/pp)``
    times on the heaviest stage), the LM head (last stage), the embedding (first stage)
    and the hand-off to the next stage."""
    layer: tuple
    head: tuple
    embedding: tuple
    hand_off: tuple

    @property
    def experts(self) -> tuple:
        """The layer's ``fc1`` and ``fc2`` -- an MoE layer's expert GEMMs (their place in
        :func:`forward_ops`'s layer)."""
        return self.layer[2:4]


def experts_hit(model: Model, tokens):
    """Expected distinct experts hit by ``tokens`` tokens routing top-k of E uniformly:
    ``E (1 - (1 - k/E)^T)`` (1 for dense models)."""
    E = model.num_experts * 1.0
    return jnp.where(E > 1, E * (1.0 - (1.0 - model.top_k / E) ** tokens), 1.0)


def moe_group(tp, ep, dp):
    """``(tokens multiplier, local experts divisor, expert FFN TP)`` of the MoE group
    (module docstring): ``(dp, ep, tp dp / ep)``."""
    return dp * 1.0, ep * 1.0, tp * dp / ep


def memory_pass_kernels(model: Model, precision, quant_kernels=0.0):
    """Launches of one layer's memory-bound pass (module docstring, "Launches"):
    ``EW_KERNELS_PER_LAYER`` + the shared experts' activation ``(1 - x)`` times + MLA's
    ``1 + [q_lora > 0]`` latent norms + ``quant_kernels`` x (quantized linear inputs) at
    fp8 / fp4 precision.  ``quant_kernels``: 1 where the engine launches the activation
    quantization apart (``EngineProfile.quant_kernels``), 0 where it is fused."""
    moe = model.num_experts > 1
    x = dense_layer_fraction(model)
    shared = jnp.where(moe & (shared_ffn(model) > 0), 1.0, 0.0) * (1.0 - x)
    mla = jnp.where(is_mla(model), 1.0, 0.0)
    norms = mla * (1.0 + jnp.where(model.q_lora_rank > 0, 1.0, 0.0))
    base = EW_KERNELS_PER_LAYER + shared + norms
    if _zero(quant_kernels):
        return base
    experts = jnp.where(moe, (1.0 - x) * 2.0, 0.0)
    mlp = experts + 2.0 * shared + jnp.where(moe, x * 2.0, 2.0)
    inputs = 2.0 + 2.0 * mla + mlp
    if not _zero(model.mxfp4_experts):                 # bf16 linears, mxfp8 expert inputs
        inputs = jnp.where(model.mxfp4_experts > 0, experts, inputs)
    return base + quant_kernels * jnp.where(precision >= PRECISION_FP8, inputs, 0.0)


def forward_ops(model: Model, tokens, sequences, attention, tp, pp, precision,
                act_bytes, ep=1.0, dp=1.0, moe_tokens=None, quant_kernels=0.0) -> ForwardGraph:
    """The operator graph of one stage pass over ``tokens`` tokens of ``sequences``
    sequences, with the caller's attention operator (prefill: causal FlashAttention over
    the prompt; decode: the KV-cache read).  ``moe_tokens``: the tokens the MoE group
    holds in this pass when its ``dp`` attention ranks carry unequal loads (an iteration
    where some ranks run a prompt and the others only decode); None = ``tokens dp``, every
    rank alike.  This rank's attention and dense operators see ``tokens``.
    ``quant_kernels``: :func:`memory_pass_kernels`.  Shapes and bytes: module docstring."""
    h = model.hidden_size * 1.0
    f = expert_ffn(model) * 1.0
    d = head_dim_of(model)
    heads = model.num_attention_heads / tp
    kv = kv_heads_per_rank(model, tp)
    E = model.num_experts * 1.0
    moe = E > 1
    el = act_bytes
    gated = model.gated_mlp * 1.0
    ep = jnp.where(moe, ep * 1.0, 1.0)
    tok_mult, e_div, moe_tp = moe_group(tp, ep, dp)
    t_moe = tokens * tok_mult if moe_tokens is None else moe_tokens * 1.0  # the MoE group's tokens
    hit = jnp.where(moe, ep_busiest_experts(experts_hit(model, t_moe), E, ep), 1.0)  # busiest rank's
    imb = jnp.where(moe, ep_load_factor(t_moe * model.top_k, ep), 1.0)  # most loaded EP rank
    local_pairs = t_moe * model.top_k / e_div * imb
    per_expert = jnp.where(moe, local_pairs / hit, tokens)
    lin = lambda name, m, n, k, c=1.0: Gemm(m, n, k, c, name=name, skinny=True)
    ffn = f * model.top_k / tp
    mla = is_mla(model)
    x_dense = dense_layer_fraction(model)
    w_moe = 1.0 - x_dense
    fs = shared_ffn(model)
    if not (_zero(fs) and _zero(x_dense)):             # the mean layer's MLP width
        ffn = w_moe * (ffn + fs / tp) + x_dense * model.ffn_hidden_size / tp
    o_in = select(mla, heads * model.v_head_dim, heads * d)
    full = 1.0 - linear_share(model)                     # full-attention share (hybrids < 1)
    ew = el * tokens * (2.0 * 4.0 * h                    # two fused add + norm
                        + select(mla, 2.0 * (heads + 1.0) * model.qk_rope_head_dim,
                                 2.0 * (heads + kv) * d)  # rotary on Q, K
                        + kv_cache_elems_per_token(model, tp) * full  # KV-cache append
                        + ffn * (1.0 + gated) + ffn      # activation
                        + select(mla, 2.0 * (model.q_lora_rank + model.kv_lora_rank), 0.0))  # lora norms
    # quantizing each GEMM input: read 2 bytes, write 1 (fp8) or 0.5 + scales (fp4)
    q = linear_el_bytes(precision, el)
    mla_in = select(mla, (model.q_lora_rank + model.kv_lora_rank) * 1.0, 0.0)
    fp8_cast = jnp.where(precision >= PRECISION_FP8, (2.0 + q) * tokens * (2.0 * h + o_in + ffn + mla_in), 0.0)
    if not _zero(model.mxfp4_experts):                 # bf16 linears, mxfp8 expert inputs
        fp8_cast = jnp.where((model.mxfp4_experts > 0) & (precision >= PRECISION_FP8),
                             mxfp4_cast_bytes(tokens, h, ffn, el), fp8_cast)
    act = tokens * h * el
    dp_moe = moe & (dp > 1)                     # attention DP: all-gather + reduce-scatter
    gathered = dp_gather_bytes(t_moe, h, model.top_k, q, precision, model.mxfp4_experts)
    qkv = lin("qkv", tokens, (heads * (1.0 + model.attn_output_gate) + 2.0 * kv) * d, h).replace(calls=full)
    layer = (qkv if mla is False else qkv.replace(calls=select(mla, 0.0, 1.0)),
             lin("out proj", tokens, h, o_in).replace(calls=full),
             lin("fc1", per_expert, f * (1.0 + gated) / moe_tp, h, hit * w_moe),
             lin("fc2", per_expert, h, f / moe_tp, hit * w_moe),
             lin("router", tokens, E, h).replace(calls=jnp.where(moe, 1.0, 0.0) * w_moe),
             *mla_serving_linears(model, tokens, tp),
             *mlp_kind_serving_linears(model, tokens, tp),
             full_attention(model, attention),    # windowed / sparse / hybrid layers: the mix
             *linear_attention_ops(model, tokens, attention, tp, el),  # hybrids' DeltaNet layers
             *indexer_ops(model, tokens, attention),  # sparse attention's indexer (none without)
             MemPass(ew + fp8_cast, memory_pass_kernels(model, precision, quant_kernels),
                     name="norms/rotary/kv-append/act"),
             Collective(act, tp * 1.0, 1.0, calls=jnp.where(dp_moe, 1.0, 2.0), name="tp all-reduce",
                        kind="all_reduce", group="tp"),
             Collective(gathered, tp * dp, 1.0, calls=jnp.where(dp_moe, 1.0, 0.0) * w_moe,
                        name="moe all-gather (attention DP)", kind="all_gather", group="tp x dp",
                        protocols=True),
             Collective(t_moe * h * el, tp * dp, 1.0, calls=jnp.where(dp_moe, 1.0, 0.0) * w_moe,
                        name="moe reduce-scatter (attention DP)", kind="reduce_scatter",
                        group="tp x dp", protocols=True),
             MemPass(routing_bytes(tokens, local_pairs, h, E, el, q,
                                   jnp.where(dp_moe, t_moe, tokens)), MOE_ROUTING_KERNELS,
                     calls=jnp.where(moe, 1.0, 0.0) * w_moe, name="moe top-k/permute/finalize"))
    V = model.vocab_size * 1.0
    logits = sequences * V * LOGIT_BYTES
    head = (Gemm(sequences, V / tp, h, name="lm head", rate="16", skinny=True),
            Collective(logits, tp * 1.0, 1.0, name="logits all-gather", kind="all_gather", group="tp"),
            MemPass(2.0 * tokens * h * el, 1.0, name="final norm"),
            MemPass(2.0 * logits, 2.0, name="softmax + sampling"))
    emb = (MemPass(2.0 * act, 1.0, name="embedding"),
           Collective(act, tp * 1.0, 1.0, name="embedding all-reduce", kind="all_reduce", group="tp"))
    hand_off = (P2P(act, tp * dp * 1.0, calls=jnp.where(pp > 1, 1.0, 0.0), name="pp hand-off"),)
    return ForwardGraph(layer, head, emb, hand_off)


def collective_fixed_s(op, hw: Hardware):
    """Fixed cost of one serving collective call beyond the alpha-beta terms of
    :func:`dse.cost.collectives.group_collective_s`: its kernel launch (``kernel_launch_s``,
    the CUDA-graph gap where the engine replays graphs) and NCCL's base latency
    ``NCCL_BASE_LATENCY_S``; 0 for a group of one.  Decode all-reduces carry a few KB,
    so this fixed part is most of their time."""
    return jnp.where(op.n > 1, op.calls * (hw.kernel_launch_s + NCCL_BASE_LATENCY_S), 0.0)


def _one(x) -> bool:
    """Whether ``x`` is a concrete (Python) one: the rates are then used unchanged."""
    return isinstance(x, (int, float)) and x == 1


def _zero(x) -> bool:
    """Whether ``x`` is a concrete (Python) zero: the optional operators are then left out."""
    return isinstance(x, (int, float)) and x == 0


def mla_serving_linears(model: Model, tokens, tp) -> tuple:
    """MLA's projections of one serving layer (module docstring); none without MLA."""
    mla = is_mla(model)
    if mla is False:
        return ()
    h = model.hidden_size * 1.0
    heads = model.num_attention_heads / tp
    ql, r = model.q_lora_rank * 1.0, model.kv_lora_rank * 1.0
    rope, nope, v = model.qk_rope_head_dim * 1.0, model.qk_nope_head_dim * 1.0, model.v_head_dim * 1.0
    has_q = model.q_lora_rank > 0
    on = jnp.where(mla, 1.0, 0.0)
    one = lambda x: jnp.maximum(x, 1.0)           # benign shapes while switched off
    lin = lambda name, m, n, k, c: Gemm(m, n, k, 1.0, calls=c, name=name, skinny=True)
    return (lin("q down", tokens, one(ql), h, on * jnp.where(has_q, 1.0, 0.0)),
            lin("q up", tokens, one(heads * (nope + rope)), jnp.where(has_q, one(ql), h), on),
            lin("kv down", tokens, one(r + rope), h, on),
            lin("kv up", tokens, one(heads * (nope + v)), one(r), on))


def indexer_ops(model: Model, tokens, attention) -> tuple:
    """The DSA lightning indexer of one layer over the queries of ``attention`` (a decode
    :class:`KVRead` or a prefill :class:`Attention`; module docstring), none for a dense
    model.  With H = ``index_heads``, d_I = ``index_head_dim``:

    * projections (replicated on every TP rank): q (T, H d_I, q_lora_rank or h), k (T,
      d_I, h) and the head weights (T, H, h);
    * scores, decode: each sequence's query heads against its ``c`` cached index keys,
      d_I fp8 bytes plus a 4-byte scale per 128 each -- priced as an MQA KV read of one
      shared "head" pair carrying the key (:class:`KVRead` with H/2 heads, 1/2 KV head, so
      that its bytes are ``c (d_I + d_I/32)`` and its FLOPs ``2 H c d_I``); prefill: a GEMM
      of the T queries' ``H d_I`` features against the causal share of the prompt's keys
      (FLOPs ``2 T H d_I s causal``, writing T x s causal fp32 logits), at the linear rate;
    * top-k selection: one pass reading and writing the fp32 logits of every (query,
      key) pair and writing ``index_topk`` indices per query, with the index-key append
      (``d_I + d_I/32`` bytes per token) in the same memory pass."""
    if not model.index_topk:
        return ()
    h, H, dI = model.hidden_size * 1.0, model.index_heads * 1.0, model.index_head_dim * 1.0
    q_in = select(model.q_lora_rank > 0, model.q_lora_rank * 1.0, h)
    lin = lambda name, n, k: Gemm(tokens, n, k, name=name, skinny=True)
    return (lin("indexer q", H * dI, q_in), lin("indexer k", dI, h), lin("indexer weights", H, h),
            *indexer_scoring_ops(model, tokens, attention))


def indexer_scoring_ops(model: Model, tokens, attention) -> tuple:
    """The indexer's scoring and top-k passes of :func:`indexer_ops` (its projections
    left out): what a mixed pass's separate prompt attention adds for its queries."""
    H, dI = model.index_heads * 1.0, model.index_head_dim * 1.0
    key_bytes = indexer_key_bytes(model)
    if isinstance(attention, KVRead):
        queries, keys = attention.batch, attention.context
        scores = KVRead(attention.batch, H / 2.0, 0.5, attention.context, key_bytes, kv_bytes=1.0,
                        name="indexer logits")
    else:
        queries = attention.batch * attention.s_q
        keys = attention.s_kv * attention.causal
        scores = Gemm(queries, keys, H * dI, name="indexer logits", skinny=True)
    topk = MemPass(queries * keys * 8.0 + queries * model.index_topk * 4.0 + tokens * key_bytes,
                   2.0, name="indexer top-k")
    return scores, topk


def full_attention(model: Model, attention):
    """The attention core of the mean layer: ``attention`` with the model's windowed /
    sparse layer kind (:func:`dse.graph.ops.with_window`), run by the full-attention share
    ``1 - x`` of a hybrid's layers (:func:`dse.spec.model.linear_share`)."""
    op = with_window(attention, model)
    if model.linear_layers:
        op = op.replace(calls=op.calls * (1.0 - linear_share(model)))
    return op


def prompt_attention_s(model: Model, prompt_att, hw: Hardware, r: Rates):
    """Seconds of one layer's attention over the prompts of a mixed pass (the separate
    prompt attention, one call per layer): the core (:func:`full_attention`) plus the
    indexer's scoring and top-k of the prompt queries (:func:`indexer_scoring_ops`; its
    projections are in the pass's token count already)."""
    t = time_s(full_attention(model, prompt_att), hw, r)
    if model.index_topk:
        t = t + sum(time_s(op, hw, r) for op in indexer_scoring_ops(model, 0.0, prompt_att))
    return t


def linear_attention_ops(model: Model, tokens, attention, tp, el) -> tuple:
    """The Gated DeltaNet layers of a hybrid's mean layer (:mod:`dse.spec.model`, ``x`` of
    the layers, HF ``Qwen3NextGatedDeltaNet``), heads split over TP; none without:

    * projections ``in_proj_qkvz`` (T, (2 H_k d_k + 2 H_v d_v)/t, h), ``in_proj_ba``
      (T, 2 H_v/t, h) and ``out_proj`` (T, h, H_v d_v/t);
    * the causal conv1d over ``conv_dim / t`` channels, the decay / beta gates, the q / k
      L2 norms and the gated RMSNorm of the output: memory passes over the token features;
    * decode (the ``b`` sequences of a :class:`KVRead`): the recurrent step reads and
      writes each sequence's ``H_v / t x d_k x d_v`` state in ``STATE_BYTES`` and its conv
      inputs, ~4 d_k d_v FLOPs per head against 2 d_k d_v x 4 bytes -- memory-bound;
    * prompt tokens (the rest of the pass's tokens): the chunkwise kernel,
      :func:`dse.cost.linear_attention.deltanet_chunk_flops` per token per head, on the
      16-bit tensor cores."""
    if not model.linear_layers:
        return ()
    x = linear_share(model)
    h = model.hidden_size * 1.0
    qkvz, ba, hv_dv = linear_projection_widths(model, tp)
    qk = model.linear_key_heads * model.linear_key_head_dim / tp
    conv = linear_conv_dim(model) / tp
    decode = attention.batch if isinstance(attention, KVRead) else 0.0
    prompts = tokens - decode
    lin = lambda name, m, n, k: Gemm(m, n, k, calls=x, name=name, skinny=True)
    feats = el * tokens * (2.0 * conv + 2.0 * qk + 3.0 * hv_dv + 2.0 * ba)
    return (lin("deltanet in_proj_qkvz", tokens, qkvz, h),
            lin("deltanet in_proj_ba", tokens, ba, h),
            lin("deltanet out_proj", tokens, h, hv_dv),
            MemPass(feats, 4.0, calls=x, name="deltanet conv/gates/norms"),
            # each kernel launches only where the pass has its kind of token
            MemPass(2.0 * decode * layer_state_bytes(model, tp), 1.0,
                    calls=x * jnp.where(decode > 0, 1.0, 0.0), name="deltanet recurrent state"),
            Gemm(prompts, hv_dv, deltanet_chunk_flops(model) / (2.0 * model.linear_value_head_dim),
                 calls=x * jnp.where(prompts > 0, 1.0, 0.0), name="deltanet chunked scan",
                 rate="16", skinny=True))


def mlp_kind_serving_linears(model: Model, tokens, tp) -> tuple:
    """Shared experts (``1 - x`` times) and the dense layers' MLP (``x`` times) of a MoE
    model (module docstring); none for models without them."""
    h = model.hidden_size * 1.0
    gated = model.gated_mlp * 1.0
    x_dense = dense_layer_fraction(model)
    fs = shared_ffn(model)
    lin = lambda name, m, n, k, c: Gemm(m, n, k, 1.0, calls=c, name=name, skinny=True)
    out = ()
    if not _zero(fs):
        fs1 = jnp.maximum(fs * 1.0, 1.0)
        c = (1.0 - x_dense) * jnp.where(fs > 0, 1.0, 0.0)
        out += (lin("shared fc1", tokens, fs1 * (1.0 + gated) / tp, h, c),
                lin("shared fc2", tokens, h, fs1 / tp, c))
    if not _zero(x_dense):
        fd = model.ffn_hidden_size * 1.0
        out += (lin("dense fc1", tokens, fd * (1.0 + gated) / tp, h, x_dense),
                lin("dense fc2", tokens, h, fd / tp, x_dense))
    return out


def context_attention_rates(r: Rates, precision, fp8_attn) -> Rates:
    """The rates the prompt's attention core runs at: the 16-bit tensor rate, times
    :data:`FP8_CONTEXT_ATTN_SPEEDUP` where the engine runs FP8 context attention
    (``fp8_attn`` > 0, ``EngineProfile.fp8_context_attn``) on a quantized (fp8 / fp4) model."""
    on = (jnp.asarray(fp8_attn) > 0) & (precision >= PRECISION_FP8)
    return r._replace(peak_16_flops_per_s=r.peak_16_flops_per_s
                      * jnp.where(on, FP8_CONTEXT_ATTN_SPEEDUP, 1.0))


def op_times(ops, hw: Hardware, r: Rates) -> OpTimes:
    """Reduce an operator list to :class:`OpTimes` by kind (sum: one stream); collectives
    add :func:`collective_fixed_s`."""
    parts = [0.0, 0.0, 0.0, 0.0]
    for op in ops:
        i = (0 if isinstance(op, Gemm) else 1 if isinstance(op, (Attention, KVRead))
             else 2 if isinstance(op, (Collective, P2P)) else 3)
        fixed = collective_fixed_s(op, hw) if isinstance(op, Collective) else 0.0
        parts[i] = parts[i] + time_s(op, hw, r) + fixed
    return OpTimes(*parts)


def stage_time(model: Model, tokens, sequences, attention, tp, pp, precision, hw: Hardware,
               r: Rates, ep=1.0, dp=1.0, linear_bw_scale=1.0, moe_tokens=None,
               quant_kernels=0.0, attn_rates: Rates | None = None) -> OpTimes:
    """One micro-batch through the heaviest stage: ``ceil(L/pp)`` layers, the LM head
    (last stage), the embedding (only when pp = 1: with pp > 1 it sits on the first,
    lighter stage) and, with pp > 1, the hand-off of ``T h`` activations to the next
    stage (stages ``tp`` ranks apart).  ``linear_bw_scale`` multiplies the HBM bandwidth
    the linears (and the LM head) stream their weights at: the engine's GEMM path
    (``EngineProfile.linear_bw_eff``, :mod:`dse.infer.engines`); 1 leaves the rates
    untouched.  ``moe_tokens``, ``quant_kernels``: :func:`forward_ops`.  ``attn_rates``: the
    rates a prompt's attention core (an :class:`Attention` operator) runs at
    (:func:`context_attention_rates`); None: ``r``."""
    g = forward_ops(model, tokens, sequences, attention, tp, pp, precision, r.act_bytes, ep, dp,
                    moe_tokens, quant_kernels)
    layers = jnp.ceil(model.num_layers / pp)
    single = jnp.where(pp > 1, 0.0, 1.0)
    r_lin = r if _one(linear_bw_scale) else r._replace(
        hbm_bw_bytes_per_s=r.hbm_bw_bytes_per_s * linear_bw_scale)
    gemms = tuple(op for op in g.layer if isinstance(op, Gemm))
    rest = tuple(op for op in g.layer if not isinstance(op, Gemm))
    experts = g.experts
    dense = tuple(op for op in gemms if not any(op is e for e in experts))
    if not _zero(model.mxfp4_experts):                 # MXFP4-expert checkpoint (gpt-oss)
        r_exp = mxfp4_expert_rates(r_lin, hw, precision, model.mxfp4_experts)
        r_lin = bf16_linear_rates(r_lin, hw, precision, model.mxfp4_experts)
    else:
        r_exp = r_lin
    r_exp = r_exp._replace(eff_linear=r_exp.eff_linear * jnp.where(model.num_experts > 1,
                                                                   MOE_GROUPED_GEMM_EFF, 1.0))
    if attn_rates is not None:       # the prompt's attention core (context_attention_rates)
        cores = tuple(op for op in rest if isinstance(op, Attention))
        rest = tuple(op for op in rest if not isinstance(op, Attention))
    per_layer = (op_times(dense, hw, r_lin).plus(op_times(rest, hw, r))
                 .plus(op_times(experts, hw, r_exp)))
    if attn_rates is not None:
        per_layer = per_layer.plus(op_times(cores, hw, attn_rates))
    head = op_times(g.head[:1], hw, r_lin).plus(op_times(g.head[1:], hw, r))
    return (per_layer.scale(layers).plus(head)
            .plus(op_times(g.embedding, hw, r).scale(single)).plus(op_times(g.hand_off, hw, r)))


def stage_kernels(model: Model, tokens, sequences, attention, tp, pp, precision, act_bytes,
                  ep=1.0, dp=1.0, prompt_layers=0.0, moe_tokens=None, quant_kernels=0.0):
    """Kernels one stage pass launches from the host: ``ceil(L/pp)`` layers of the
    operator graph (:func:`forward_ops`, each operator ``calls x``
    :func:`dse.graph.ops.host_kernels`), the LM head, the embedding (pp = 1) and the
    hand-off, plus ``prompt_layers`` prompt-attention calls (separate FlashAttention
    kernels of a mixed iteration).  Operators switched off (``calls`` 0) launch nothing; a
    linear is one kernel per call, an MoE layer's experts too (vLLM / SGLang ``fused_moe``
    runs every local expert in one Triton launch, ``invoke_fused_moe_kernel``);
    ``quant_kernels``: :func:`forward_ops`."""
    g = forward_ops(model, tokens, sequences, attention, tp, pp, precision, act_bytes, ep, dp,
                    moe_tokens, quant_kernels)
    count = lambda ops: sum(op.calls * (1.0 if isinstance(op, Gemm) else host_kernels(op))
                            for op in ops)
    single = jnp.where(pp > 1, 0.0, 1.0)
    return (jnp.ceil(model.num_layers / pp) * count(g.layer) + count(g.head)
            + single * count(g.embedding) + count(g.hand_off) + prompt_layers)


def host_bound_s(gpu_s, kernels, host_op_s):
    """A pass the CPU issues kernel by kernel (PyTorch eager, no CUDA graph): the CPU runs
    ahead of the GPU asynchronously, so the slower of the two sets the pace,
    ``max(gpu_s, host_op_s x kernels)`` -- the host-bound floor of
    :mod:`dse.train.layer`, here per serving pass (the engine's ``eager_op_s``,
    :mod:`dse.infer.engines`; 0 for C++ runtimes and graph replays)."""
    return jnp.maximum(gpu_s, host_op_s * kernels)


def micro_batches(batch, pp):
    """Pipeline micro-batching of one replica's batch: ``m = min(batch, pp)`` micro-batches
    of ``batch / m`` sequences (every stage busy once batch >= pp)."""
    m = jnp.minimum(batch * 1.0, pp * 1.0)
    return m, batch / m
