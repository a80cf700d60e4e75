"""The parts of a serving MoE layer beyond its expert GEMMs: the token routing passes
(top-k, expert sort, permute, finalize) and the load imbalance of expert parallelism.
:func:`dse.infer.forward.forward_ops` adds both to the layer's operator list.

**Routing passes** (one MoE layer, one GPU; ``T`` tokens of the GPU's attention rank, ``P``
token-expert pairs its local experts receive, ``h`` hidden, ``E`` experts, ``el`` the
activation element size).  Every engine of the data runs the same four steps around the
two grouped GEMMs:

1. top-k (softmax / sigmoid + selection) over the router logits: read ``T E`` fp32
   logits (TensorRT-LLM ``cpp/tensorrt_llm/kernels/mixtureOfExperts/moe_kernels.cu``
   routing kernels; vLLM ``csrc/moe/topk_softmax_kernels.cu`` ``topk_softmax``);
2. sort the pairs by expert and build the per-expert offsets the grouped GEMM reads
   (TensorRT-LLM ``threeStepBuildExpertMapsSortFirstToken``; vLLM
   ``moe_align_block_size``): ``O(P)`` integers, negligible bytes;
3. permute: gather each token's row once per selected local expert into the expert-major
   buffer, read ``T h``, write ``P h`` at the GEMM input size ``q`` (fp8 1, NVFP4
   0.5 + scales: the rows are quantized before they are expanded; TensorRT-LLM
   ``expandInputRowsKernel``; vLLM's
   Triton ``fused_moe_kernel`` gathers through ``sorted_token_ids`` inside the GEMM, so
   there the copy is the GEMM's own A-read -- charged here once for all engines, as the
   global constant below is);
4. finalize: the top-k weighted sum of each token's expert outputs back into token order,
   read ``P h``, write ``T h`` at the activation size ``el`` (TensorRT-LLM ``finalizeMoeRoutingKernel``; vLLM
   ``moe_sum`` / ``ops.moe_sum``).

  ``bytes = h (q + el) (T + P) + 4 T E``,   ``MOE_ROUTING_KERNELS`` = 4 launches.

The activation between the GEMMs is the layer's activation pass already
(:mod:`dse.infer.forward`, ``ffn (1 + gated) + ffn`` per token with ``ffn`` carrying
``k``).  Overlap: none (memory-bound kernels on the layer's one stream).

**Expert-parallel load imbalance.**  With ``ep`` > 1 the ``N = T_g k`` pairs of the MoE
group fall on the ``ep`` ranks multinomially (uniform routing): rank ``r`` receives
``N_r ~ Binomial(N, 1/ep)``, mean ``mu = N / ep``, standard deviation
``sigma = sqrt(N (1/ep)(1 - 1/ep))``.  The combine (all-to-all, or the all-reduce that
sums the EP partials) is a barrier, so the layer lasts as long as the most loaded rank:
the expected maximum of ``ep`` such counts is ``mu + sigma sqrt(2 ln ep)`` (the Gaussian
extreme-value bound ``E max_i X_i <= mu + sigma sqrt(2 ln n)`` for n normal variables;
e.g. Boucheron, Lugosi & Massart 2013, "Concentration Inequalities", §2.5), i.e. the
local pair count scaled by

  ``imbalance = 1 + sqrt(2 ln(ep) (ep - 1) / N)``      (1 for ep = 1)

(:func:`ep_load_factor`).  It is large only where few pairs are in flight (decode of a
small batch: N = 512 pairs over 8 ranks gives 1.19) and tends to 1 for big batches.  It
uses uniform routing: real routers are skewed (DeepSeek-V3 rebalances with EPLB,
arXiv:2412.19437 §3.4), which this lower bound does not carry.

Units: bytes, tokens; pure JAX on scalars (vmapped with the rest of the graph).
"""

from __future__ import annotations

import jax.numpy as jnp

MOE_ROUTING_KERNELS = 4.0      # top-k, expert sort / offsets, permute, finalize (docstring)
ROUTER_LOGIT_BYTES = 4.0       # the router's logits are read in fp32 by the top-k kernel


def ep_load_factor(pairs, ep):
    """Pairs the most loaded of ``ep`` ranks receives over the mean, for ``pairs``
    token-expert pairs routed uniformly: ``1 + sqrt(2 ln(ep) (ep - 1) / pairs)``, 1 for
    ``ep`` = 1 (module docstring)."""
    ep = jnp.maximum(ep * 1.0, 1.0)
    n = jnp.maximum(pairs * 1.0, 1.0)
    return 1.0 + jnp.sqrt(2.0 * jnp.log(ep) * (ep - 1.0) / n)


def routing_bytes(tokens, local_pairs, hidden, experts, el_bytes, q_bytes):
    """HBM bytes of one MoE layer's routing passes on one GPU:
    ``h (q + el) (T + P) + 4 T E`` (module docstring); ``tokens`` T of the rank,
    ``local_pairs`` P of its experts, ``q_bytes`` the GEMM input element size."""
    return ((q_bytes + el_bytes) * hidden * (tokens + local_pairs)
            + ROUTER_LOGIT_BYTES * tokens * experts)
