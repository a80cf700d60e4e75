"""Prefill: the forward pass over ``batch x prompt_len`` tokens, ending in the first
output token (time to first token, TTFT).

Per layer (micro-batch of b sequences, T = b * S tokens, S = prompt_len): the linears
with M = T (:func:`dse.infer.forward.forward_ops`, compute-bound for any real prompt),
the FlashAttention-2 forward with causal masking (:func:`dse.cost.attention.flash_attention_time_s`,
``causal_frac = min(0.5 + 0.5 * 128 / S, 1)`` — the diagonal tiles run in full, as
:mod:`dse.train.layer`), the memory-bound kernels and two TP all-reduces.  The LM head
runs on the last token of each sequence only (Pope et al. 2022, §3.4; vLLM
``LogitsProcessor`` prunes to the sampled positions).

Pipeline (Narayanan et al. 2021, §2.2; Huang et al. 2019, GPipe): the batch is split into
``m = min(batch, pp)`` micro-batches of ``b = batch / m`` sequences; the last one leaves
the last stage after ``(m + pp - 1)`` stage passes:

    prefill_s = (m + pp - 1) * t_stage(b)

(pp = 1: one pass over the whole batch).  Overlap: none inside a stage (sum of ops).
Units: seconds.
"""

from __future__ import annotations

import jax.numpy as jnp

from dse.cost.attention import FA_BLOCK_ROWS
from dse.graph.ops import Attention, with_window
from dse.infer.forward import OpTimes, micro_batches, stage_time
from dse.infer.workload import InferenceWorkload
from dse.spec.hardware import Hardware
from dse.spec.model import Model, head_dim_of, kv_heads_per_rank
from dse.cost.rates import Rates


def prefill_attention(model: Model, batch, prompt_len, tp) -> Attention:
    """Causal FlashAttention forward over ``prompt_len`` tokens for ``batch`` sequences
    on one GPU's ``a/tp`` heads (achieved HBM bandwidth, as every serving kernel); a
    model with sliding-window or chunked layers gets their mix
    (:func:`dse.graph.ops.with_window`)."""
    causal = jnp.minimum(0.5 + 0.5 * FA_BLOCK_ROWS / prompt_len, 1.0)
    d = head_dim_of(model)
    return with_window(Attention(batch * 1.0, model.num_attention_heads / tp,
                                 kv_heads_per_rank(model, tp), prompt_len * 1.0, prompt_len * 1.0,
                                 d, d, causal, 0.0, 1.0, name="attention (prefill)", stream_bw=True),
                       model)


def prefill_stage(model: Model, wl: InferenceWorkload, sequences, tp, pp, hw: Hardware,
                  r: Rates, ep=1.0, dp=1.0) -> OpTimes:
    """One micro-batch of ``sequences`` prompts through the heaviest stage."""
    T = sequences * wl.prompt_len
    return stage_time(model, T, sequences, prefill_attention(model, sequences, wl.prompt_len, tp),
                      tp, pp, wl.precision, hw, r, ep, dp)


def prefill(model: Model, wl: InferenceWorkload, tp, pp, hw: Hardware, r: Rates, ep=1.0,
            dp=1.0) -> OpTimes:
    """Time to first token of the whole batch, by kind: ``(m + pp - 1) * t_stage(b)``."""
    m, b = micro_batches(wl.batch, pp)
    return prefill_stage(model, wl, b, tp, pp, hw, r, ep, dp).scale(m + pp - 1.0)
