"""The one set of parallel-layout rules, vectorized over a column of layouts.

:func:`layout_violations` returns, for arrays of layout fields, a valid mask and the
first broken rule of every invalid row; the sweep's enumeration (:mod:`dse.sweep.grid`)
keeps the rows it marks valid, and explicit layouts (``estimate``, ``trace``,
``predict``, the trace generator) are checked by :func:`check_layout`, which raises the
same rule's message.  Rules (Megatron-LM ``arguments.py`` and ``parallel_state.py``):

  * every degree >= 1; recompute in {0..3}; zero in {0..3}; sp in {0, 1}
  * dp * tp * pp * cp == gpus
  * tp divides num_attention_heads and num_kv_heads (query groups are split over TP)
  * pp <= num_layers (the heaviest stage holds ceil(L/pp) layers: uneven split allowed)
  * cp divides seq_len and, for cp > 1, seq_len/cp is a multiple of 2*cp (zig-zag load
    balancing: every rank holds two chunks of seq/(2 cp) tokens;
    Megatron-Core ``get_batch_on_this_cp_rank``)
  * dp * mbs divides global_batch (m = global_batch / (dp mbs) micro-batches)
  * vpp > 1 needs pp > 1, pp*vpp <= num_layers + 2 (Megatron-Core's
    ``account_for_embedding/loss_in_pipeline_split`` let the embedding and the loss fill
    a virtual stage each) and m % pp == 0 (the interleaved schedule runs micro-batches in
    groups of pp: ``forward_backward_pipelining_with_interleaving``)
  * sp only with tp > 1
  * ep divides num_experts and tp*dp*cp (dense models: ep = 1; MoE parallel folding)
  * under the ``deepspeed`` framework profile, pp > 1 needs zero <= 1: DeepSpeed's
    pipeline engine refuses ZeRO-2/3 (deepspeedai/DeepSpeed
    ``deepspeed/runtime/pipe/engine.py``: ``assert self.zero_optimization_stage() <
    ZeroStageEnum.gradients``), and vpp == 1: its ``PipelineModule`` splits the layers
    into one contiguous part per stage and ``runtime/pipe/schedule.py`` has only the
    non-interleaved ``TrainSchedule`` (virtual stages are Megatron-Core's); Megatron-LM
    and FSDP have no such rule

Integers are int64 here, so no product of degrees, batch and sequence overflows.
"""

from __future__ import annotations

import numpy as np

from dse.errors import InputError
from dse.spec.layout import FRAMEWORK_DEEPSPEED

FIELDS = ("tp", "pp", "dp", "cp", "ep", "mbs", "vpp", "recompute", "zero", "sp")


def _rules(model, gpus, global_batch, seq_len, c, framework=0):
    """[(field, ok mask, message for row i)] in the order they are reported."""
    L, a, g, E = (int(model.num_layers), int(model.num_attention_heads),
                  int(model.num_kv_heads), int(model.num_experts))
    tp, pp, dp, cp, ep, mbs, vpp = (c[f] for f in ("tp", "pp", "dp", "cp", "ep", "mbs", "vpp"))
    rc, z, sp = c["recompute"], c["zero"], c["sp"]
    pos = np.ones_like(tp, dtype=bool)
    for f in ("tp", "pp", "dp", "cp", "ep", "mbs", "vpp"):
        pos &= c[f] >= 1
    safe = lambda x: np.where(x >= 1, x, 1)
    tp1, pp1, dp1, cp1, ep1, mbs1 = (safe(x) for x in (tp, pp, dp, cp, ep, mbs))
    m = global_batch // safe(dp1 * mbs1)
    cells = tp1 * pp1 * cp1
    r = [
        ("tp", pos, lambda i: "every parallel degree and mbs must be an integer >= 1, but got "
         + ", ".join(f"{f}={int(c[f][i])}" for f in ("tp", "pp", "dp", "cp", "ep", "mbs", "vpp"))),
        ("recompute", (rc >= 0) & (rc <= 3), lambda i: f"must be none, selective, full or block (0..3), but got {int(rc[i])}"),
        ("zero", (z >= 0) & (z <= 3), lambda i: f"`0 <= zero <= 3` must hold, but got (zero={int(z[i])})"),
        ("sp", (sp == 0) | (sp == 1), lambda i: f"must be 0 or 1, but got {int(sp[i])}"),
        ("tp", a % tp1 == 0, lambda i: f"`num_attention_heads % tp == 0` must hold, but got "
         f"(num_attention_heads={a}, tp={int(tp[i])})"),
        ("tp", g % tp1 == 0, lambda i: f"`num_kv_heads % tp == 0` must hold, but got (num_kv_heads={g}, tp={int(tp[i])})"),
        ("gpus", gpus % cells == 0, lambda i: f"`gpus % (tp*pp*cp) == 0` must hold, but got (gpus={gpus}, "
         f"tp*pp*cp={int(cells[i])})"),
        ("dp", dp1 * cells == gpus, lambda i: f"`dp*tp*pp*cp == gpus` must hold, but got (dp={int(dp[i])}, "
         f"tp*pp*cp={int(cells[i])}, gpus={gpus})"),
        ("pp", pp1 <= L, lambda i: f"`pp <= num_layers` must hold, but got (pp={int(pp[i])}, num_layers={L})"),
        ("cp", seq_len % cp1 == 0, lambda i: f"`seq_len % cp == 0` must hold, but got (seq_len={seq_len}, cp={int(cp[i])})"),
        ("cp", (cp1 == 1) | ((seq_len // cp1) % (2 * cp1) == 0),
         lambda i: f"`(seq_len/cp) % (2*cp) == 0` must hold (zig-zag load balancing), but got "
         f"(seq_len={seq_len}, cp={int(cp[i])})"),
        ("mbs", global_batch % (dp1 * mbs1) == 0, lambda i: f"`global_batch % (dp*mbs) == 0` must hold, but got "
         f"(global_batch={global_batch}, dp={int(dp[i])}, mbs={int(mbs[i])})"),
        ("vpp", (vpp == 1) | ((pp1 > 1) & (pp1 * vpp <= L + 2)),
         lambda i: f"`pp > 1 and pp*vpp <= num_layers + 2` must hold, but got (num_layers={L}, "
         f"pp={int(pp[i])}, vpp={int(vpp[i])})"),
        ("vpp", (vpp == 1) | (m % pp1 == 0), lambda i: f"interleaving needs `micro_batches % pp == 0`, but got "
         f"(micro_batches={int(m[i])}, pp={int(pp[i])})"),
        ("sp", (sp == 0) | (tp1 > 1), lambda i: "sequence parallelism needs tp > 1"),
        # MoE parallel folding (Megatron-Core parallel_state ``expert_decoder_rank_generator``:
        # the expert grid etp x ep x edp tiles the tp x cp x dp ranks of a stage): with
        # expert TP = tp (the default) ep divides dp*cp, with expert TP = 1 it divides tp*dp*cp
        # (dse.graph.moe.expert_tp picks the one the layout allows)
        ("ep", (E % ep1 == 0) & ((tp1 * dp1 * cp1) % ep1 == 0),
         lambda i: f"`num_experts % ep == 0` and `(tp*dp*cp) % ep == 0` must hold, but got "
         f"(num_experts={E}, ep={int(ep[i])}, tp*dp*cp={int(tp[i] * dp[i] * cp[i])})"),
        ("zero", (int(framework) != FRAMEWORK_DEEPSPEED) | (pp1 == 1) | (z <= 1),
         lambda i: f"DeepSpeed's pipeline engine needs `zero <= 1` when pp > 1, but got "
         f"(pp={int(pp[i])}, zero={int(z[i])})"),
        ("vpp", (int(framework) != FRAMEWORK_DEEPSPEED) | (vpp == 1),
         lambda i: f"DeepSpeed's pipeline engine has no interleaved schedule: `vpp == 1` must hold, "
         f"but got (vpp={int(vpp[i])})"),
    ]
    return r


def layout_violations(model, gpus: int, global_batch: int, seq_len: int,
                      cols: dict, framework: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(valid mask, reason) for a column of layouts ``cols`` (one int array per
    :data:`FIELDS` name); ``reason`` is ``""`` for valid rows, else ``"field: rule"`` of
    the first broken rule."""
    c = {f: np.asarray(cols[f], dtype=np.int64) for f in FIELDS}
    n = len(c["tp"])
    valid = np.ones(n, dtype=bool)
    reason = np.full(n, "", dtype=object)
    for field, ok, msg in _rules(model, int(gpus), int(global_batch), int(seq_len), c, framework):
        bad = valid & ~ok
        for i in np.flatnonzero(bad):
            reason[i] = f"{field}: {msg(i)}"
        valid &= ok
    return valid, reason


def layout_mask(model, gpus: int, global_batch: int, seq_len: int, cols: dict,
                framework: int = 0) -> np.ndarray:
    """Valid mask only (no messages): what the enumeration filters with."""
    c = {f: np.asarray(cols[f], dtype=np.int64) for f in FIELDS}
    valid = np.ones(len(c["tp"]), dtype=bool)
    for _, ok, _ in _rules(model, int(gpus), int(global_batch), int(seq_len), c, framework):
        valid &= ok
    return valid


def check_layout(model, gpus: int, global_batch: int, seq_len: int, lay,
                 where: str = "layout", framework: int = 0) -> None:
    """Raise :class:`InputError` (exit 2) unless one explicit layout obeys every rule."""
    for f in FIELDS:
        v = getattr(lay, f)
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise InputError(where, f, f"must be an integer, but got {v!r}")
    valid, reason = layout_violations(model, gpus, global_batch, seq_len,
                                      {f: [int(getattr(lay, f))] for f in FIELDS}, framework)
    if not valid[0]:
        field, _, rule = reason[0].partition(": ")
        raise InputError(where, field, rule)


# ---------------------------------------------------------------------------------------
# Serving layouts: one replica of ``tp x attn_dp x pp`` GPUs, experts over ``ep`` of them.
#
#   * every degree >= 1; tp * attn_dp * pp == gpus_per_replica
#   * tp divides num_attention_heads (KV heads are replicated when tp > num_kv_heads,
#     :mod:`dse.infer.kv_cache`); pp <= num_layers
#   * ep > 1 or attn_dp > 1 needs an MoE model (num_experts > 1): a dense model has no
#     experts to split, and attention DP of a dense model is replicas
#   * num_experts % ep == 0 (TensorRT-LLM ``Mapping.ep_experts``: ``num_experts //
#     moe_ep_size`` experts per rank)
#   * attn_dp == 1: tp % ep == 0, each expert TP-split over moe_tp = tp / ep
#     (TensorRT-LLM ``tensorrt_llm/mapping.py``: ``tp_size == moe_tp_size * moe_ep_size``;
#     SGLang ``moe_tp_size = tp_size // ep_size``)
#   * attn_dp > 1: ep divides tp * attn_dp -- the MoE layers run on the whole DP x TP
#     group, the experts over ep of its GPUs and each expert TP-split over the other
#     moe_tp = tp * attn_dp / ep: ep = tp * attn_dp is full EP (vLLM
#     ``--enable-expert-parallel``: ``ep_size`` = the flattened DP x TP group; SGLang
#     DeepEP "only supports ep_size = tp_size"), ep = 1 the experts TP-split over the
#     group (vLLM docs "Data Parallel Deployment": "By default, expert layers form a
#     tensor parallel group of size DP x TP"; SGLang ``--enable-dp-attention`` without
#     ``--ep-size``: ``moe_tp_size = tp_size // ep_size``; TensorRT-LLM ``Mapping``:
#     ``moe_tp_size * moe_ep_size == tp_size`` with ``enable_attention_dp``)
# ---------------------------------------------------------------------------------------

SERVING_FIELDS = ("tp", "pp", "ep", "attn_dp")


def _serving_rules(model, gpus_per_replica: int, c):
    L, a, E = int(model.num_layers), int(model.num_attention_heads), int(model.num_experts)
    tp, pp, ep, dp = (c[f] for f in SERVING_FIELDS)
    g = int(gpus_per_replica)
    pos = (tp >= 1) & (pp >= 1) & (ep >= 1) & (dp >= 1)
    safe = lambda x: np.where(x >= 1, x, 1)
    tp1, pp1, ep1, dp1 = (safe(x) for x in (tp, pp, ep, dp))
    moe = E > 1
    return [
        ("tp", pos, lambda i: "every serving degree must be an integer >= 1, but got "
         + ", ".join(f"{f}={int(c[f][i])}" for f in SERVING_FIELDS)),
        ("gpus", tp1 * dp1 * pp1 == g, lambda i: f"`tp*attn_dp*pp == gpus_per_replica` must hold, "
         f"but got (tp={int(tp[i])}, attn_dp={int(dp[i])}, pp={int(pp[i])}, gpus_per_replica={g})"),
        ("tp", a % tp1 == 0, lambda i: f"`num_attention_heads % tp == 0` must hold, but got "
         f"(num_attention_heads={a}, tp={int(tp[i])})"),
        ("pp", pp1 <= L, lambda i: f"`pp <= num_layers` must hold, but got (pp={int(pp[i])}, num_layers={L})"),
        ("ep", moe | ((ep1 == 1) & (dp1 == 1)), lambda i: f"ep > 1 and attn_dp > 1 need an MoE model, but "
         f"{model.name} is dense (num_experts={E}; ep={int(ep[i])}, attn_dp={int(dp[i])})"),
        ("ep", E % ep1 == 0, lambda i: f"`num_experts % ep == 0` must hold, but got (num_experts={E}, "
         f"ep={int(ep[i])})"),
        ("ep", (dp1 > 1) | (tp1 % ep1 == 0), lambda i: f"`tp % ep == 0` must hold without attention DP "
         f"(moe_tp x ep = tp), but got (tp={int(tp[i])}, ep={int(ep[i])})"),
        ("ep", (dp1 == 1) | ((tp1 * dp1) % ep1 == 0), lambda i: f"with attention DP `(tp*attn_dp) % ep == 0` "
         f"must hold (the experts over ep of the DP x TP group, each TP-split over the rest), but "
         f"got (ep={int(ep[i])}, tp={int(tp[i])}, attn_dp={int(dp[i])})"),
    ]


def serving_layout_violations(model, gpus_per_replica: int, cols: dict) -> tuple[np.ndarray, np.ndarray]:
    """(valid mask, reason) for a column of serving layouts (one int array per
    :data:`SERVING_FIELDS` name; rules above); ``reason`` is ``"field: rule"`` of the first
    broken rule, ``""`` for valid rows."""
    c = {f: np.asarray(cols[f], dtype=np.int64) for f in SERVING_FIELDS}
    valid = np.ones(len(c["tp"]), dtype=bool)
    reason = np.full(len(valid), "", dtype=object)
    for field, ok, msg in _serving_rules(model, gpus_per_replica, c):
        for i in np.flatnonzero(valid & ~ok):
            reason[i] = f"{field}: {msg(i)}"
        valid &= ok
    return valid, reason
