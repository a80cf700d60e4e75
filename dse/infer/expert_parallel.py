"""Serving layouts with expert parallelism (EP) and attention data parallelism (DP
attention): the axes of the serving sweep (:mod:`dse.infer.sweep`, ``dse infer --ep
--attn-dp``) and the per-GPU quantities they change.

A replica is ``tp x attn_dp x pp`` GPUs.  Each of the ``attn_dp`` attention ranks runs
attention TP-split over ``tp`` GPUs on its own requests; the MoE layers of a stage run
on the stage's whole ``tp x attn_dp`` group with the experts split over ``ep`` of its
GPUs and each expert's FFN over the other ``moe_tp = tp attn_dp / ep``.  The engines
this follows, and where:

* **TensorRT-LLM** ``tensorrt_llm/mapping.py`` (``Mapping``): ``tp_size == moe_tp_size
  * moe_ep_size`` (hybrid EP x TP inside the TP group) and ``ep_experts``:
  ``num_experts // moe_ep_size`` experts per rank; ``enable_attention_dp`` runs
  attention data-parallel (every rank its own batch, attention weights replicated)
  with the MoE over all ranks (LLM API ``moe_expert_parallel_size``).
* **vLLM** ``vllm/model_executor/layers/fused_moe/config.py``
  (``FusedMoEParallelConfig.make``): with ``--enable-expert-parallel`` the DP x TP group
  is flattened and ``ep_size = tp_size`` of it, the experts' own ``tp_size = 1`` ("each
  device owns a set of experts fully"); docs "Expert Parallel Deployment": ``EP_SIZE =
  TP_SIZE x DP_SIZE``.
* **SGLang** ``python/sglang/srt/server_args.py``: ``--ep-size`` with ``moe_tp_size =
  tp_size // ep_size``; the DeepEP all-to-all backend forces ``ep_size = tp_size`` and
  is what ``--enable-dp-attention`` deployments (DeepSeek-V3/R1) run; hybrid ``ep <
  tp`` uses the ``none`` backend (the TP all-reduce / all-gather, no all-to-all;
  docs "Expert Parallelism").

* Attention DP with the experts TP-split (``ep < tp attn_dp``; ``ep = 1`` is the
  default of all three: vLLM docs "Data Parallel Deployment", "By default, expert layers
  form a tensor parallel group of size DP x TP" -- ``--enable-expert-parallel`` makes it
  EP; SGLang ``--enable-dp-attention`` without ``--ep-size``; TensorRT-LLM
  ``enable_attention_dp`` with ``moe_tensor_parallel_size``): the same group, the same
  token exchange, each expert's FFN over ``moe_tp = tp attn_dp / ep`` GPUs.

Hence the layout rules (:func:`dse.spec.layout_rules.serving_layout_violations`):
``num_experts % ep == 0``; without attention DP ``tp % ep == 0``; with it ``ep``
divides ``tp attn_dp``; dense models only ``ep = attn_dp = 1``.

Per GPU (the formulas live where they are used; this module enumerates the layouts and
states them in one place):

* expert weights: ``E / ep`` experts of ``f / moe_tp`` width, ``E f / (tp attn_dp)``
  expert parameters whatever ``ep`` is (:func:`dse.infer.memory.weight_params_per_gpu`);
  they fall as the EP group grows (:func:`experts_per_gpu`).
* attention weights, norms, embeddings: per attention rank, TP over ``tp`` -- replicated
  ``attn_dp`` times in the replica.
* KV cache: each attention rank holds the KV of its own requests, split over its ``tp``
  GPUs (:func:`dse.infer.kv_cache.kv_cache_bytes` at ``tp``); MLA's latent is one
  "head", replicated on every TP rank, so attention DP is what removes that copy.
* batch: a replica's ``N`` requests in flight are spread over its ``attn_dp`` ranks,
  ``N / attn_dp`` each (SGLang's DP controller round-robins requests over DP ranks), all
  ranks stepping together through the shared MoE layers (:func:`rank_batch`).
* token exchange (attention DP only): per MoE layer an all-gather of the group's
  ``T_g = T dp`` tokens (quantized, with their top-k ids and weights) and a reduce-scatter
  of the ``T_g h el`` outputs over the ``tp attn_dp`` ranks of the group, NCCL calls over
  NVLink inside a domain and the NIC beyond (:func:`dse.infer.forward.forward_ops`,
  :func:`dse.infer.moe_serving.dp_gather_bytes`, which has the engine sources:
  TensorRT-LLM ``CutlassFusedMoE``, vLLM ``allgather_reducescatter``, SGLang DP-attention
  gather / scatter).  DeepEP-style all-to-alls (``T k h el`` per GPU and direction,
  :func:`a2a_bytes_per_gpu`) are those engines' opt-in backends, not what the graph
  charges.
"""

from __future__ import annotations

import numpy as np

from dse.errors import InputError
from dse.spec.layout_rules import SERVING_FIELDS, serving_layout_violations
from dse.spec.model import Model

AUTO = "auto"


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def experts_per_gpu(model: Model, ep):
    """Experts held by one GPU: ``E / ep`` (TensorRT-LLM ``Mapping.ep_experts``)."""
    return model.num_experts / np.asarray(ep, np.float64)


def a2a_bytes_per_gpu(model: Model, tokens, el_bytes):
    """Bytes one GPU sends in one DeepEP-style dispatch (and again in one combine) of one
    MoE layer: ``T k h el`` (module docstring; the opt-in all-to-all backends, for
    comparison with the all-gather / reduce-scatter the graph charges)."""
    return tokens * model.top_k * model.hidden_size * el_bytes


def rank_batch(batch, attn_dp):
    """Requests in flight per attention rank: ``N / attn_dp`` (module docstring)."""
    return np.asarray(batch, np.float64) / np.asarray(attn_dp, np.float64)


def _axis(values, g: int, name: str) -> list[int]:
    if values is None:
        return [1]
    if isinstance(values, str):
        if values != AUTO:
            raise InputError("sweep_inference", name, f"must be {AUTO!r} or a list of integers >= 1, "
                             f"but got {values!r}")
        return divisors(g)
    vals = [values] if isinstance(values, (int, np.integer)) else list(values)
    for v in vals:
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
            raise InputError("sweep_inference", name, f"must be integers >= 1, but got {v!r}")
    return sorted(set(int(v) for v in vals))


def serving_layouts(model: Model, gpus_per_replica: int, ep=None, attn_dp=None) -> dict[str, np.ndarray]:
    """Every valid ``(tp, pp, ep, attn_dp)`` of one replica, one int64 array per
    :data:`dse.spec.layout_rules.SERVING_FIELDS` name, ordered by attn_dp, tp, ep.
    ``ep`` / ``attn_dp``: None (only 1: the layouts before EP), ``"auto"`` (every
    divisor of ``gpus_per_replica``; a dense model keeps 1) or a list.  A value listed
    explicitly that no valid layout takes raises :class:`InputError` with the rule its
    first candidate breaks; so does a grid without any valid layout."""
    g = int(gpus_per_replica)
    eps, dps = _axis(ep, g, "ep"), _axis(attn_dp, g, "attn_dp")
    rows = [(tp, g // (tp * dp), e, dp) for dp in dps if g % dp == 0
            for tp in divisors(g // dp) for e in eps]
    if not rows:
        raise InputError("sweep_inference", "attn_dp", f"`gpus_per_replica % attn_dp == 0` must hold for "
                         f"some attn_dp, but got (attn_dp={dps}, gpus_per_replica={g})")
    cols = {f: np.asarray(v, np.int64) for f, v in zip(SERVING_FIELDS, zip(*rows))}
    valid, reason = serving_layout_violations(model, g, cols)
    for name, vals, explicit in (("ep", eps, ep not in (None, AUTO)),
                                 ("attn_dp", dps, attn_dp not in (None, AUTO))):
        for v in vals if explicit else []:
            mine = cols[name] == v
            if mine.any() and not (valid & mine).any():
                field, _, rule = reason[np.flatnonzero(mine)[0]].partition(": ")
                raise InputError("sweep_inference", field, rule)
    if not valid.any():
        field, _, rule = reason[0].partition(": ")
        raise InputError("sweep_inference", field, rule)
    return {f: v[valid] for f, v in cols.items()}
