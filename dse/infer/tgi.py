"""Hugging Face text-generation-inference (TGI): the launch limits and KV-pool fraction a
TGI launcher started with its defaults takes, by release -- what the ``tgi`` / ``tgi_v3``
profiles of :mod:`dse.infer.engines` cannot hold as constants because they follow the
model, the GPU and the TP size.  Every rule reads the TGI source at the release named
(``launcher/src/main.rs``, ``server/text_generation_server/models/flash_causal_lm.py``,
``server/text_generation_server/models/globals.py``).

**Prefill token budget** (``--max-batch-prefill-tokens``; the profile's ``max_num_tokens``):

* v2.0-v2.4: ``max_input_tokens + 50`` with ``max_input_tokens = min(max_position_embeddings,
  4096) - 1`` (the launcher's ``max_default = 4096``): 4145 for any model whose context
  reaches 4096.
* v3.0 on: ``min(compute_optimal, max_position_embeddings, vram_maximum)``, where
  ``compute_optimal = (card fp16 FLOP/s x tp) / (model FLOPs per token)`` for the cards
  the launcher knows (A100 312, H100 and H100 NVL 900, H200 989 TFLOP/s from v3.1; the
  H200 is unknown to v3.0) and 4096 for any other card (B200, AMD); the model's FLOPs per
  token are the launcher's ``Config::flop``: per layer ``2 h d (3 a + 2 g)``
  (Q, K, V, the attention score term written as one more ``2 a d h``, out) plus ``6 h f``
  (gate, up, down) with ``f`` the config's ``intermediate_size`` times ``top_k + shared
  experts`` (:func:`tgi_flop_per_token`).
  The launcher also caps it by ``vram_maximum`` (free memory over a per-token estimate),
  which only binds for unquantized models near capacity and is not carried.

**KV pool** (``warmup``): the server runs one prefill of the whole budget, then takes what
is free:

* v2.0-v2.2: ``(free - (1 - MF) total) x 0.95`` with ``MF`` = ``--cuda-memory-fraction``
  (1.0): 0.95 of what is left after the weights and the warm-up's activations
  (``kv_after_weights``); v2.3: the 0.95 becomes ``TGI_WIGGLE_ROOM`` (default 0.95),
  v2.4: 0.90.
* v3.0 on: ``get_free_memory(MF x TGI_WIGGLE_ROOM)`` = ``free - (1 - MF W) total``, i.e.
  ``W total - weights - activations`` (the vLLM form, ``mem_fraction`` = W): W = 0.95 at
  v3.0, 0.93 at v3.1-v3.2, 0.90 from v3.3.

Units: tokens, bytes.
"""

from __future__ import annotations

from dataclasses import replace

from dse.spec.model import Model, expert_ffn, head_dim_of, max_context_of, shared_ffn

#: the launcher's ``max_default`` of v2.x: the default context is capped at 4096 tokens
TGI_V2_MAX_DEFAULT = 4096
#: v3's fallback budget where the card or the model is unknown (``unwrap_or(4096)``)
TGI_V3_DEFAULT_PREFILL = 4096
#: ``ComputeType::f16_flop`` of v3.1+ (launcher/src/main.rs), dense fp16 FLOP/s per card,
#: keyed by the catalog's hardware names; v3.0 lacks the H200 (:func:`tgi_prefill_tokens`)
TGI_CARD_F16_FLOPS = {"a100-sxm-80gb": 312e12, "a100-sxm-40gb": 312e12, "a100-pcie-80gb": 312e12,
                      "h100-sxm-80gb": 900e12, "h100-nvl-94gb": 900e12, "h100-pcie-80gb": 900e12,
                      "h200-sxm-141gb": 989e12}
TGI_V2 = (2, 0, 0)
TGI_V3 = (3, 0, 0)
TGI_H200_KNOWN = (3, 1, 0)
#: the KV pool's fraction by release (module docstring): (first release, fraction,
#: after the weights and activations -- v2's form -- or of the whole GPU -- v3's)
TGI_POOL_FRACTION = (((3, 3, 0), 0.90, False), ((3, 1, 0), 0.93, False), ((3, 0, 0), 0.95, False),
                     ((2, 4, 0), 0.90, True), ((0, 0, 0), 0.95, True))


def tgi_flop_per_token(model: Model) -> float:
    """The launcher's ``Config::flop`` (v3): per layer ``2 h d (3 a + 2 g) + 6 h f`` (Q, K,
    V, the score term written as one more ``2 a d h``, out; gate, up, down) times the
    layers, with ``f`` the config's ``intermediate_size`` times ``num_experts_per_tok +
    n_shared_experts`` (1 + 0 for a dense model; the catalog's ``ffn_hidden_size`` is that
    ``intermediate_size``, the shared experts counted as their width over one expert's);
    embedding and LM head not counted."""
    h, d = float(model.hidden_size), float(head_dim_of(model))
    a, g = float(model.num_attention_heads), float(model.num_kv_heads)
    per = 1.0
    if model.num_experts > 1:
        per = float(model.top_k) + float(shared_ffn(model)) / float(expert_ffn(model))
    f = float(model.ffn_hidden_size) * per
    return (2.0 * h * d * (3.0 * a + 2.0 * g) + 6.0 * h * f) * model.num_layers


def tgi_v2_prefill_tokens(max_input_tokens: int) -> int:
    """TGI v2's default ``max_batch_prefill_tokens``: ``max_input_tokens + 50``
    (launcher/src/main.rs, v2.0-v2.4)."""
    return int(max_input_tokens) + 50


def tgi_prefill_tokens(model: Model, hw_name: str, tp: int, version: tuple | None) -> int:
    """``--max-batch-prefill-tokens`` of a default TGI launch (module docstring): v2
    ``min(context, 4096) - 1 + 50``; v3 (or no release: today's TGI) ``min(compute_optimal,
    context)`` where the card is known, else ``min(4096, context)``."""
    ctx = max_context_of(model)
    if version is not None and version < TGI_V3:
        return tgi_v2_prefill_tokens(min(ctx, TGI_V2_MAX_DEFAULT) - 1)
    flops = TGI_CARD_F16_FLOPS.get(hw_name)
    if flops is not None and hw_name.startswith("h200") and version is not None and version < TGI_H200_KNOWN:
        flops = None
    optimal = int(flops * max(tp, 1) / tgi_flop_per_token(model)) if flops else 0
    best = optimal if optimal > 100 else TGI_V3_DEFAULT_PREFILL    # the launcher ignores <= 100
    return int(min(best, ctx))


def tgi_pool(version: tuple | None) -> tuple[float, bool]:
    """(fraction, after weights) of the KV pool of a TGI release (:data:`TGI_POOL_FRACTION`);
    no release: today's."""
    v = version if version is not None else (99, 0, 0)
    return next((f, after) for first, f, after in TGI_POOL_FRACTION if v >= first)


def tgi_launch(eng, model: Model, hw_name: str, tp: int | None, version: tuple | None):
    """The ``tgi`` / ``tgi_v3`` profile with the release's pool fraction and the default
    launch's prefill budget for ``model`` on ``tp`` GPUs of ``hw_name`` (``tp`` None: 1)."""
    frac, after = tgi_pool(version)
    return replace(eng, mem_fraction=frac, kv_after_weights=after,
                   max_num_tokens=tgi_prefill_tokens(model, hw_name, tp or 1, version))
