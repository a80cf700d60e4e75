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

Units: bytes.  All arguments may be JAX arrays.
"""

from __future__ import annotations

import jax.numpy as jnp

from dse.spec.model import Model, head_dim_of, is_mla, kv_cache_elems_per_token, kv_heads_per_rank, select

# the one definitions live with the model spec
kv_heads_per_gpu = kv_heads_per_rank
head_dim = head_dim_of


def kv_cache_bytes(model: Model, batch, context_len, tp, pp, kv_bytes):
    """Bytes of K and V cache on one GPU of the heaviest pipeline stage (formula above);
    ``kv_bytes`` is the bytes per cached element (2 for bf16, 1 for an fp8 cache)."""
    layers = jnp.ceil(model.num_layers / pp)
    plain = (2.0 * layers * batch * context_len * kv_heads_per_gpu(model, tp)
             * head_dim(model) * kv_bytes)
    mla = is_mla(model)
    if mla is False:
        return plain
    return select(mla, layers * batch * context_len * kv_cache_elems_per_token(model, tp) * kv_bytes, plain)
