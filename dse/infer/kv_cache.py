"""KV cache size per GPU.

Every layer stores one key and one value vector of ``head_dim`` elements per KV head per
token (Pope et al. 2022, "Efficiently Scaling Transformer Inference", §2; GQA shrinks
the head count, Ainslie et al. 2023).  Under tensor parallelism the KV heads are split
over the ``tp`` GPUs; when ``tp`` exceeds the KV-head count each GPU still holds (a
replica of) one head, so the per-GPU head count is ``max(ceil(kv_heads / tp), 1)``
(Megatron-LM / vLLM replicate KV heads when ``tp > num_kv_heads``).  Pipeline stages
hold the layers they run; the heaviest holds ``ceil(L / pp)``:

    kv_bytes = 2 * ceil(L / pp) * batch * context_len * kv_heads_per_gpu * head_dim * kv_bytes_per_el

MLA (DeepSeek-V2/V3) caches one latent of ``kv_lora_rank + qk_rope_head_dim`` elements
per token per layer, whole on every TP rank (:func:`dse.spec.model.kv_cache_elems_per_token`):

    kv_bytes = ceil(L / pp) * batch * context_len * (r + rho) * kv_bytes_per_el

Sliding-window and chunked layers (:func:`dse.spec.model.attention_window`: a share x
of the layers with window or chunk w) hold only ``min(c, w)`` tokens
(:func:`dse.cost.attention.windowed_kv_len`; vLLM v1's hybrid KV-cache manager frees the
blocks outside the window, ``SlidingWindowManager`` / ``ChunkedLocalAttentionManager``,
and TensorRT-LLM sizes each layer's cache by its ``max_attention_window``), so ``c`` above
becomes the per-layer mean ``(1 - x) c + x min(c, w)`` (:func:`cached_tokens`).  The
cache is therefore not linear in the context: a request's footprint is
``kv_cache_bytes(model, 1, held, ...)``, not ``held`` times the bytes of one token.

Sparse attention (DSA, :mod:`dse.spec.model`): the top-k selection is a window for the
attention core only -- every token stays cached, since any of them may be selected later
-- and each layer also caches the indexer's key of ``index_head_dim`` fp8 bytes plus one
fp32 scale per 128 of them, whatever the KV dtype (vLLM ``DeepseekV32IndexerCache``:
``index_head_dim + index_head_dim // 128 * 4`` uint8 per token; SGLang's NSA pool alike),
whole on every TP rank: ``+ ceil(L / pp) * batch * context_len * (d_I + d_I / 32)``.

Hybrid linear attention (Qwen3-Next / Qwen3.5, :mod:`dse.spec.model`): only the
full-attention share ``1 - x`` of the layers caches keys and values; each Gated DeltaNet
layer holds, per sequence and whatever its length, its recurrent state of ``H_v / tp x d_k x
d_v`` elements in ``STATE_BYTES`` and its conv1d's last ``K - 1`` inputs of ``conv_dim /
tp`` channels in 16 bits (vLLM ``MambaStateShapeCalculator.gated_delta_net_state_shape``,
SGLang ``MambaPool``): ``+ x ceil(L / pp) * batch * (H_v d_k d_v STATE_BYTES + (K - 1)
conv_dim 2) / tp`` (:func:`recurrent_state_bytes`).

Units: bytes.  All arguments may be JAX arrays.
"""

from __future__ import annotations

import jax.numpy as jnp

from dse.cost.attention import windowed_kv_len
from dse.spec.model import (Model, attention_window, head_dim_of, is_mla, kv_cache_elems_per_token,
                            linear_conv_dim, linear_share,
                            kv_heads_per_rank, select)

# the one definitions live with the model spec
kv_heads_per_gpu = kv_heads_per_rank
head_dim = head_dim_of


def cached_tokens(model: Model, context_len):
    """Tokens one sequence of ``context_len`` tokens holds per layer, averaged over the
    layers: ``context_len``, or with windowed layers ``(1 - x) c + x min(c, w)`` (module
    docstring)."""
    w = attention_window(model)
    if w is None or w.sparse:
        return context_len
    return (1.0 - w.share) * context_len + w.share * windowed_kv_len(context_len, w.keys * 1.0)


def kv_cache_bytes(model: Model, batch, context_len, tp, pp, kv_bytes):
    """Bytes of K and V cache on one GPU of the heaviest pipeline stage (formula above);
    ``kv_bytes`` is the bytes per cached element (2 for bf16, 1 for an fp8 cache)."""
    layers = jnp.ceil(model.num_layers / pp)
    context_len = cached_tokens(model, context_len) * (1.0 - linear_share(model))
    plain = (2.0 * layers * batch * context_len * kv_heads_per_gpu(model, tp)
             * head_dim(model) * kv_bytes)
    mla = is_mla(model)
    index = layers * batch * context_len * indexer_key_bytes(model)
    state = recurrent_state_bytes(model, batch, tp, pp)
    if mla is False:
        return plain + index + state
    return select(mla, layers * batch * context_len * kv_cache_elems_per_token(model, tp) * kv_bytes,
                  plain) + index + state


#: bytes per element of a Gated DeltaNet layer's recurrent state: fp32, the serving
#: engines' default for it (module docstring)
STATE_BYTES = 4.0
CONV_STATE_BYTES = 2.0      # the conv1d's cached inputs: 16-bit activations


def layer_state_bytes(model: Model, tp) -> float:
    """Bytes one sequence holds in one Gated DeltaNet layer on one of ``tp`` GPUs (module
    docstring): its ``H_v / tp x d_k x d_v`` state in ``STATE_BYTES`` and its conv1d's last
    ``K - 1`` inputs of ``conv_dim / tp`` channels in ``CONV_STATE_BYTES``."""
    state = (model.linear_value_heads * model.linear_key_head_dim * model.linear_value_head_dim
             * STATE_BYTES)
    conv = (model.linear_conv_kernel - 1.0) * linear_conv_dim(model) * CONV_STATE_BYTES
    return (state + conv) / tp


def recurrent_state_bytes(model: Model, batch, tp, pp):
    """Bytes of the Gated DeltaNet layers' per-sequence state on one GPU of the heaviest
    stage (module docstring); 0 without linear attention."""
    if not model.linear_layers:
        return 0.0
    layers = jnp.ceil(model.num_layers / pp) * linear_share(model)
    return layers * batch * layer_state_bytes(model, tp)


def indexer_key_bytes(model: Model) -> float:
    """Bytes the DSA indexer caches per token per layer (module docstring): ``d_I`` fp8
    plus a 4-byte scale per 128; 0 without sparse attention."""
    d = float(model.index_head_dim) if model.index_topk else 0.0
    return d + d / 128.0 * 4.0
