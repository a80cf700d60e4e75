"""Gated DeltaNet (linear attention) arithmetic shared by the serving and training
graphs (hybrid models: Qwen3-Next, Qwen3.5; :mod:`dse.spec.model`).

Prefill and training run the chunkwise-parallel form of the delta rule (Yang et al. 2024,
"Parallelizing Linear Transformers with the Delta Rule over Sequence Length",
arXiv:2406.06484, sec. 3; the gated variant, Yang et al. 2024, arXiv:2412.06464, adds a
per-token decay that costs element-wise work only).  Per chunk of C tokens and value head
it forms K K^T (2 C^2 d_k), the WY factors W = A K (2 C^2 d_k) and U = A V (2 C^2 d_v), the
intra-chunk Q K^T (2 C^2 d_k) and its product with U - W S (2 C^2 d_v), and touches the
d_k x d_v state three times, Q S, W S and the update K^T (U - W S) (2 C d_k d_v each):

    flops per token per value head = C (6 d_k + 4 d_v) + 6 d_k d_v

with C = ``DELTANET_CHUNK`` = 64, the chunk of flash-linear-attention's
``chunk_gated_delta_rule`` (``BT = 64``), the kernel vLLM and SGLang run for Qwen3-Next.
"""

from __future__ import annotations

DELTANET_CHUNK = 64.0


def deltanet_chunk_flops(model) -> float:
    """FLOPs per token per value head of the chunkwise Gated DeltaNet (module docstring):
    ``C (6 d_k + 4 d_v) + 6 d_k d_v``."""
    dk, dv = model.linear_key_head_dim * 1.0, model.linear_value_head_dim * 1.0
    return DELTANET_CHUNK * (6.0 * dk + 4.0 * dv) + 6.0 * dk * dv
