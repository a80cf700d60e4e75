"""One inference design point: prefill (TTFT), decode (time per output token),
throughput and memory — the scalar function the inference sweep vmaps.

``inference_step(model, wl, hw, tp, pp)``, one replica of ``tp x pp`` GPUs:

  prefill_s           = :func:`dse.infer.prefill.prefill`  (time to first token)
  decode_s_per_token  = :func:`dse.infer.decode.decode`    (per sequence, mean over gen)
  tokens_per_s        = batch / decode_s_per_token          (decode throughput)
  mem_bytes           = :func:`dse.infer.memory.serving_memory` total

Rates are the throttled, efficiency-derated ones of :func:`dse.cost.rates.rates`, so a
thermal throttle or an HBM-bandwidth variant moves the decode time (HBM-bound) and a
FLOP/s variant moves the prefill (compute-bound).  All fields are JAX scalars (arrays
under vmap); units SI.
"""

from __future__ import annotations

from typing import NamedTuple

from dse.infer.decode import decode
from dse.infer.memory import serving_memory
from dse.infer.prefill import prefill
from dse.infer.workload import InferenceWorkload
from dse.spec.hardware import Hardware
from dse.spec.model import Model
from dse.spec.numerics import as_float
from dse.cost.rates import rates


class InferenceResult(NamedTuple):
    prefill_s: object              # time to first token of the batch
    decode_s_per_token: object     # seconds per output token (per sequence)
    tokens_per_s: object           # batch / decode_s_per_token
    kv_bytes: object               # KV cache per GPU at prompt_len + gen_len
    weights_bytes: object          # serving-precision weights per GPU
    mem_bytes: object              # total per GPU incl. workspace and allocator reserve
    decode_gemm_s: object          # breakdown of decode_s_per_token (sums to it)
    decode_attention_s: object
    decode_comm_s: object
    decode_elementwise_s: object


DECODE_BREAKDOWN = ("decode_gemm_s", "decode_attention_s", "decode_comm_s",
                    "decode_elementwise_s")


def inference_memory_bytes(model: Model, wl: InferenceWorkload, hw: Hardware, tp, pp, ep=1, dp=1):
    """Total bytes per GPU (the sweep's first, cheap pass)."""
    model, wl, tp, pp, ep, dp = as_float(model, wl, tp, pp, ep, dp)   # the numerics boundary
    return serving_memory(model, wl, tp, pp, rates(hw, wl.precision), ep, dp).total_bytes


def inference_step(model: Model, wl: InferenceWorkload, hw: Hardware, tp, pp, ep=1, dp=1) -> InferenceResult:
    """Prefill, decode, throughput and memory of one replica (module docstring); ``ep``
    experts split over ``ep`` GPUs of the ``tp x dp`` MoE group, ``wl.batch`` the batch of
    each of the ``dp`` attention ranks (:mod:`dse.infer.expert_parallel`)."""
    model, wl, tp, pp, ep, dp = as_float(model, wl, tp, pp, ep, dp)   # the numerics boundary
    r = rates(hw, wl.precision)
    pf = prefill(model, wl, tp, pp, hw, r, ep, dp)
    dc = decode(model, wl, tp, pp, hw, r, ep, dp)
    mem = serving_memory(model, wl, tp, pp, r, ep, dp)
    t_tok = dc.total_s
    return InferenceResult(
        prefill_s=pf.total_s,
        decode_s_per_token=t_tok,
        tokens_per_s=wl.batch / t_tok,
        kv_bytes=mem.kv_bytes,
        weights_bytes=mem.weights_bytes,
        mem_bytes=mem.total_bytes,
        decode_gemm_s=dc.gemm_s,
        decode_attention_s=dc.attention_s,
        decode_comm_s=dc.comm_s,
        decode_elementwise_s=dc.elementwise_s,
    )
