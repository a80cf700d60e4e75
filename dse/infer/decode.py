"""Decode: one new token per sequence per step; time per output token.

Per layer (micro-batch of b sequences, one token each, so T = b):

* linears with M = b (:func:`dse.infer.forward.forward_ops`): memory-bound, the
  weight bytes ``K x N`` dominate the HBM term of :func:`dse.cost.gemm.gemm_time_s`;
* attention reads the whole KV cache once (FlashDecoding, Dao et al. 2023,
  "Flash-Decoding for long-context inference": the KV sequence is split over the SMs,
  a second kernel reduces the partial softmaxes, so even b = 1 streams at full
  bandwidth).  Per GPU, context c, g_t KV heads, a/t query heads, head dim d:
      bytes = 2 b c g_t d el + 2 b (a/t) d el          (K, V read; Q read, O write)
      flops = 4 b (a/t) c d
      t     = max(flops / (peak_16 * eff_attn) + b (a/t) c / exp_per_s, bytes / hbm_bw)
              + 2 launches
  (roofline; the second compute term is the softmax's exponentials on the SFUs,
  :func:`dse.cost.attention.exp_time_s`; with GQA the intensity is ~a/g FLOP/byte, far
  below the ridge point);
* memory-bound kernels, two TP all-reduces of ``b x h`` (latency-dominated: 2(n-1)
  alpha), a launch per kernel.

The context c is the mean KV length over the generation,
``prompt_len + (gen_len + 1) / 2`` (:class:`dse.infer.workload.InferenceWorkload`).

Pipeline: the batch is split into ``m = min(batch, pp)`` micro-batches of
``b = batch / m``; every stage works on a different micro-batch, and one sequence's next
token needs a trip through all ``pp`` stages (Narayanan et al. 2021's pipelining applied
to generation, as in FasterTransformer / TensorRT-LLM PP):

    decode_s_per_token = pp * t_stage(b)          tokens_per_s = batch / decode_s_per_token

(pp > 1 adds throughput only when batch >= pp; with batch < pp stages idle).
Units: seconds.
"""

from __future__ import annotations

from dse.graph.ops import KVRead
from dse.infer.forward import OpTimes, micro_batches, stage_time
from dse.infer.workload import InferenceWorkload
from dse.spec.hardware import Hardware
from dse.spec.model import Model, decode_kv_geometry
from dse.cost.rates import Rates


def decode_attention(model: Model, batch, context_len, tp) -> KVRead:
    """FlashDecoding over a ``context_len``-token KV cache for ``batch`` sequences
    (:func:`dse.cost.attention.decode_attention_time_s`); MLA reads its latent cache
    (:func:`dse.spec.model.decode_kv_geometry`)."""
    g, d = decode_kv_geometry(model, tp)
    return KVRead(batch * 1.0, model.num_attention_heads / tp, g, context_len * 1.0, d)


def decode_stage(model: Model, wl: InferenceWorkload, sequences, tp, pp, hw: Hardware,
                 r: Rates, ep=1.0, dp=1.0) -> OpTimes:
    """One decode step of a micro-batch of ``sequences`` through the heaviest stage."""
    return stage_time(model, sequences * 1.0, sequences,
                      decode_attention(model, sequences, wl.mean_decode_context_len, tp),
                      tp, pp, wl.precision, hw, r, ep, dp)


def decode(model: Model, wl: InferenceWorkload, tp, pp, hw: Hardware, r: Rates, ep=1.0,
           dp=1.0) -> OpTimes:
    """Seconds per output token of one sequence, by kind: ``pp * t_stage(b)``."""
    _, b = micro_batches(wl.batch, pp)
    return decode_stage(model, wl, b, tp, pp, hw, r, ep, dp).scale(pp * 1.0)
