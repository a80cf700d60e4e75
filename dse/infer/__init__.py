"""Inference model: prefill (time to first token), decode (time per output token), KV
cache and serving memory for one tensor x pipeline parallel replica, and the sweep over
(hardware, tp, pp, batch).

Public API::

    InferenceWorkload(batch, prompt_len, gen_len, precision=1)
    kv_cache_bytes(model, batch, context_len, tp, pp, kv_bytes)
    inference_step(model, wl, hw, tp, pp) -> InferenceResult
    sweep_inference(model, hws, gpus_per_replica, batch, prompt_len, gen_len, precision=1)
    best_inference(df, objective="tokens_per_s")
"""

from dse.infer.kv_cache import kv_cache_bytes
from dse.infer.step import InferenceResult, inference_memory_bytes, inference_step
from dse.infer.sweep import best_inference, sweep_inference
from dse.infer.workload import InferenceWorkload

__all__ = ["InferenceWorkload", "InferenceResult", "kv_cache_bytes", "inference_step",
           "inference_memory_bytes", "sweep_inference", "best_inference"]
