"""Why a serving layout admits no request, in its own numbers.

A continuous-batching engine admits a request only when its whole paged KV footprint fits
the KV pool the engine allocates after the weights (vLLM ``BlockSpaceManager.can_allocate``;
TensorRT-LLM's KV cache manager).  Two cases read differently to a user: the weights leave
no pool at all (more GPUs per replica or lower-precision weights help), or a pool exists but
one request's own KV is larger (a shorter prompt / generation, fp8 KV or more TP help).
"""

from __future__ import annotations

from dse.spec.hardware import GIB


def no_admission_reason(weights_bytes: float, pool_bytes: float, request_kv_bytes: float,
                        tokens: float, engine: str) -> str:
    """The ``infeasible: ...`` status for a layout with no KV slot, per GPU, in GiB."""
    w, pool, req = weights_bytes / GIB, max(float(pool_bytes), 0.0) / GIB, request_kv_bytes / GIB
    if pool_bytes > 0 and request_kv_bytes > pool_bytes:
        return (f"infeasible: one request's KV cache ({req:.1f} GiB per GPU for {tokens:,.0f} "
                f"tokens) exceeds the KV pool under {engine} ({pool:.1f} GiB per GPU after "
                f"{w:.1f} GiB of weights): `request KV <= KV pool` must hold")
    return (f"infeasible: the weights ({w:.1f} GiB per GPU) leave no KV cache for one request "
            f"under {engine} (KV pool {pool:.1f} GiB)")
