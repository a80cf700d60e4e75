"""Memory per GPU for serving one replica (the heaviest pipeline stage).

* Weights in serving precision: ``ceil(L/pp)`` layers with the dense weights split over
  ``tp`` (Q and output projections, MLP) and the K/V projections on ``g_t =
  max(ceil(g/tp), 1)`` heads per GPU (replicated when tp > kv_heads, as the KV cache of
  :mod:`dse.infer.kv_cache`), plus the embedding and LM head (``V h / tp`` each; both on
  one GPU when pp = 1, one per end stage otherwise, one shared matrix when tied); this is
  :func:`dse.train.memory.params_per_gpu` with KV replication and without any
  gradient or optimizer state.  Bytes per parameter: linears ``Rates.linear_bytes`` (4
  fp32, 2 bf16, 1 fp8), everything else ``Rates.act_bytes`` (fp8 checkpoints keep
  embeddings, norms and the router in 16 bit).
* KV cache for ``batch`` sequences of ``prompt_len + gen_len`` tokens
  (:func:`dse.infer.kv_cache.kv_cache_bytes`, 16-bit cache, or 4-byte for fp32).
* Activation workspace: the prefill of one micro-batch is the peak (layers run one at a
  time and free their inputs; nothing is kept for a backward pass): with T = b S tokens,
  ``el T (2h + (a/t + 2 g_t) d + a d/t + f_k (1+gated)/t + f_k/t)`` (residual stream and
  norm output, QKV, attention output, FC1 output and activation; f_k = f * top_k) plus
  the fp32 logits of the last tokens, ``4 b V``.
  A MoE layer also holds each token-expert pair's FC2 output at the full width before
  the top-k weighted sum, ``el min(T, C) k h`` (vLLM ``fused_moe``
  ``intermediate_cache3`` of shape ``(M, top_k, hidden)``, ``M = min(tokens,
  VLLM_FUSED_MOE_CHUNK_SIZE)``, ``C`` = 32768 by default in ``vllm/envs.py``; TensorRT-LLM's
  MoE runner likewise writes the expanded rows' FC2 result before
  ``finalizeMoeRoutingKernel``): on a long profiling pass (16k-164k tokens) it is GiBs.
* Allocator: ``allocated * (1 + FRAGMENTATION) + RESERVE_BYTES``, the constants of
  :mod:`dse.train.memory` (CUDA context, cuBLAS/NCCL workspaces, caching-allocator
  slack).  vLLM's paged KV cache wastes < 4 % (Kwon et al. 2023, §4.2), inside the 5 %.

Units: bytes.  All arguments may be JAX arrays.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from dse.infer.forward import LOGIT_BYTES, micro_batches
from dse.infer.kv_cache import head_dim, kv_cache_bytes, kv_heads_per_gpu
from dse.infer.workload import InferenceWorkload
from dse.spec.model import (Model, dense_layer_fraction, expert_ffn, is_mla, mla_attention_params,
                            select, shared_ffn, stage_layer_counts)
from dse.train.memory import FRAGMENTATION, RESERVE_BYTES
from dse.cost.rates import MXFP4_BYTES, Rates
from dse.spec.layout import PRECISION_FP8


#: tokens per fused-MoE chunk whose per-pair buffers are live at once (vLLM
#: ``VLLM_FUSED_MOE_CHUNK_SIZE`` default, ``vllm/envs.py``: "32768")
FUSED_MOE_CHUNK_TOKENS = 32768.0


class ServingMemory(NamedTuple):
    weights_bytes: object
    kv_bytes: object
    activations_bytes: object
    total_bytes: object


def weight_params_per_gpu(model: Model, tp, pp, ep=1, dp=1):
    """(linear parameters, other parameters) on one GPU of the heaviest stage.  MoE
    experts live on the stage's ``tp x dp`` MoE group (``E/ep`` experts each split over
    ``tp dp / ep``: ``E f / (tp dp)`` per GPU whatever ``ep``, :mod:`dse.infer.forward`);
    attention, norms and embeddings are per DP rank (TP over ``tp``).  MLA: the down
    projections whole on every rank, the up and output projections over ``tp``
    (:func:`dse.spec.model.mla_attention_params`); shared experts over ``tp``; a MoE model
    with dense layers counts the heaviest stage's MoE and dense layers
    (:func:`dse.spec.model.stage_layer_counts`)."""
    h = model.hidden_size * 1.0
    f = expert_ffn(model) * 1.0
    d = head_dim(model)
    heads = model.num_attention_heads / tp
    kv = kv_heads_per_gpu(model, tp)
    E = model.num_experts * 1.0
    attn = 2.0 * h * heads * d + 2.0 * h * kv * d
    mla = is_mla(model)
    norms = 2.0 * h
    if mla is not False:
        down, up = mla_attention_params(model)
        attn = select(mla, down + up / tp, attn)
        norms = norms + select(mla, (model.q_lora_rank + model.kv_lora_rank) * 1.0, 0.0)
    mlp = (2.0 + model.gated_mlp) * h * f * E / (tp * jnp.where(E > 1, dp * 1.0, 1.0))
    fs = shared_ffn(model)
    if not (isinstance(fs, (int, float)) and fs == 0):
        mlp = mlp + (2.0 + model.gated_mlp) * h * fs / tp
    router = jnp.where(E > 1, h * E / tp, 0.0)
    layers = jnp.ceil(model.num_layers / pp)
    emb_mats = jnp.where(pp > 1, 1.0, 2.0 - model.tied_embeddings)
    linear = layers * (attn + mlp)
    other = layers * (router + norms) + emb_mats * model.vocab_size * h / tp
    x_dense = dense_layer_fraction(model)
    if not (isinstance(x_dense, float) and x_dense == 0.0):
        n_moe, n_dense = stage_layer_counts(model, layers)
        dense_mlp = (2.0 + model.gated_mlp) * h * model.ffn_hidden_size / tp
        mixed = x_dense > 0
        linear = jnp.where(mixed, n_moe * (attn + mlp) + n_dense * (attn + dense_mlp), linear)
        other = jnp.where(mixed, n_moe * router + layers * norms + emb_mats * model.vocab_size * h / tp,
                          other)
    return linear, other


def activation_workspace_bytes(model: Model, wl: InferenceWorkload, tp, pp, act_bytes):
    """Peak transient activations: one prefill micro-batch (formula above)."""
    _, b = micro_batches(wl.batch, pp)
    T = b * wl.prompt_len
    h = model.hidden_size * 1.0
    d = head_dim(model)
    heads = model.num_attention_heads / tp
    kv = kv_heads_per_gpu(model, tp)
    fk = expert_ffn(model) * model.top_k / tp
    fs = shared_ffn(model)
    if not (isinstance(fs, (int, float)) and fs == 0):
        fk = fk + fs / tp                                  # shared experts
    per_token = 2.0 * h + (heads + 2.0 * kv) * d + heads * d + fk * (1.0 + model.gated_mlp) + fk
    E = model.num_experts * 1.0
    pairs_out = jnp.where(E > 1, jnp.minimum(T, FUSED_MOE_CHUNK_TOKENS) * model.top_k * h, 0.0)
    return act_bytes * (T * per_token + pairs_out) + LOGIT_BYTES * b * model.vocab_size


def routed_expert_params_per_gpu(model: Model, tp, pp, dp=1):
    """Routed-expert parameters on one GPU of the heaviest stage: ``(2 + gated) h f E /
    (tp dp)`` per MoE layer (the ``mlp`` term of :func:`weight_params_per_gpu` without
    shared experts), 0 for dense models."""
    E = model.num_experts * 1.0
    per_layer = (2.0 + model.gated_mlp) * model.hidden_size * expert_ffn(model) * E / (
        tp * jnp.where(E > 1, dp * 1.0, 1.0))
    layers = jnp.ceil(model.num_layers / pp)
    x_dense = dense_layer_fraction(model)
    if not (isinstance(x_dense, float) and x_dense == 0.0):
        n_moe, _ = stage_layer_counts(model, layers)
        layers = jnp.where(x_dense > 0, n_moe, layers)
    return jnp.where(E > 1, layers * per_layer, 0.0)


def absorbed_mla_bytes(model: Model, tp, pp, r: Rates, precision):
    """Bytes per GPU of the MLA decode weights vLLM 0.7.x materializes beside the raw ones
    (:func:`dse.infer.engines.vllm_v0_mla`; ``vllm/attention/backends/mla/utils.py``
    ``process_weights_after_loading``), per layer of the heaviest stage with ``n = a / tp``
    local heads, query latent ``q_l`` (the hidden size without one), KV latent ``r``:

      ``W_Q_UK`` (q_l x n r) + ``W_UV_O`` (n r x h), at the linear size (fp8 checkpoints
      are requantized to fp8, ``scaled_quantize``), plus the dequantized 16-bit ``kv_b_proj``
      the decode path keeps (``W_UK``, ``W_UV``: r x n (nope + v)) for an fp8 checkpoint,
      and the 16-bit copy of the query's rotary slice (``W_QR``: q_l x n rope).

    0 without MLA.  DeepSeek-R1 at TP8: 71 MB of fp8 + 7 MB of bf16 per layer, 4.5 GiB over
    61 layers."""
    if not model.kv_lora_rank:
        return 0.0
    h = model.hidden_size * 1.0
    n = model.num_attention_heads / tp
    ql = (model.q_lora_rank or model.hidden_size) * 1.0
    rk = model.kv_lora_rank * 1.0
    absorbed = (ql * n * rk + n * rk * h) * r.linear_bytes
    dequant = jnp.where(precision >= PRECISION_FP8,
                        rk * n * (model.qk_nope_head_dim + model.v_head_dim) * r.act_bytes, 0.0)
    w_qr = ql * n * model.qk_rope_head_dim * r.act_bytes
    return jnp.ceil(model.num_layers / pp) * (absorbed + dequant + w_qr)


def engine_weight_bytes(model: Model, tp, pp, r: Rates, precision, ep, dp, engine):
    """Weight bytes per GPU as ``engine`` holds them: :func:`weight_bytes_per_gpu`, plus
    the MLA decode copies of an engine that materializes them
    (``EngineProfile.mla_absorbed_weights``, :func:`absorbed_mla_bytes`)."""
    w = weight_bytes_per_gpu(model, tp, pp, r, precision, ep, dp)
    if engine.mla_absorbed_weights:
        w = w + absorbed_mla_bytes(model, tp, pp, r, precision)
    return w


def profiling_tokens(engine, prompt_len):
    """Tokens of the forward whose activation peak the engine's KV pool is sized after: its
    whole budget ``max_num_tokens`` where it profiles one (``profile_at_budget``: vLLM,
    trtllm-serve), else one prompt chunk ``min(max_num_tokens, S)``.  A Python ``S`` gives
    a Python float, a traced one a JAX value."""
    if engine.profile_at_budget:
        return engine.max_num_tokens * 1.0
    if isinstance(prompt_len, (int, float)):
        return float(min(engine.max_num_tokens, max(prompt_len, 1.0)))
    return jnp.minimum(engine.max_num_tokens * 1.0, jnp.maximum(prompt_len * 1.0, 1.0))


def kv_pool_from(engine, hbm_bytes, weights_bytes, acts_bytes):
    """KV pool bytes per GPU from the GPU memory, the weights and the activation workspace
    (:mod:`dse.infer.serving`, "KV capacity"; type-preserving, Python or traced):

    * ``static_fraction`` (SGLang): ``f hbm - w - reserve`` -- the fraction holds weights +
      KV only, activations live outside it;
    * ``kv_after_weights`` (TensorRT-LLM): ``f (hbm - fixed)``;
    * else (vLLM): ``f hbm - fixed``;

    with ``fixed = w (1 + FRAGMENTATION) + RESERVE_BYTES + acts``."""
    if engine.static_fraction:
        return engine.mem_fraction * hbm_bytes - weights_bytes - RESERVE_BYTES
    fixed = weights_bytes * (1.0 + FRAGMENTATION) + RESERVE_BYTES + acts_bytes
    if engine.kv_after_weights:
        return engine.mem_fraction * (hbm_bytes - fixed)
    return engine.mem_fraction * hbm_bytes - fixed


def weight_bytes_per_gpu(model: Model, tp, pp, r: Rates, precision, ep=1, dp=1):
    """Weight bytes on one GPU of the heaviest stage: linears at ``r.linear_bytes``,
    everything else at ``r.act_bytes`` (module docstring).  An MXFP4-expert checkpoint
    (``model.mxfp4_experts``, gpt-oss) served at fp8 or below stores its routed experts in
    MXFP4 (``MXFP4_BYTES`` = 0.5 + 1/32 per element) and every other linear in bf16
    (``r.act_bytes``), as the checkpoint holds them (:mod:`dse.infer.moe_serving`):
    ``routed x MXFP4_BYTES + (linear - routed) x act + other x act``."""
    linear, other = weight_params_per_gpu(model, tp, pp, ep, dp)
    plain = linear * r.linear_bytes + other * r.act_bytes
    mx = getattr(model, "mxfp4_experts", 0)
    if isinstance(mx, (int, float)) and not mx:
        return plain
    routed = routed_expert_params_per_gpu(model, tp, pp, dp)
    quant = routed * MXFP4_BYTES + (linear - routed + other) * r.act_bytes
    return jnp.where((mx > 0) & (precision >= PRECISION_FP8), quant, plain)


def serving_memory(model: Model, wl: InferenceWorkload, tp, pp, r: Rates, ep=1, dp=1) -> ServingMemory:
    """Weights, KV cache, prefill workspace and allocator terms per GPU of one (attention
    rank of a) replica; ``ep`` / ``dp`` as :func:`weight_params_per_gpu` (``wl.batch`` is
    the rank's batch, so the KV is the rank's own)."""
    weights = weight_bytes_per_gpu(model, tp, pp, r, wl.precision, ep, dp)
    kv = kv_cache_bytes(model, wl.batch, wl.max_context_len, tp, pp, r.act_bytes)
    acts = activation_workspace_bytes(model, wl, tp, pp, r.act_bytes)
    total = (weights + kv + acts) * (1.0 + FRAGMENTATION) + RESERVE_BYTES
    return ServingMemory(weights, kv, acts, total)
