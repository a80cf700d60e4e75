"""Operator records of the operator graph, and the one place each is costed.

An operator graph (docs/architecture.md) lists, for one design point, every operator
of one pass: GEMMs, attention cores, memory-bound passes, collectives, point-to-point
transfers.  Each record is a pytree: its name, phase and kind are static (aux data), its
shapes and multiplicities are array leaves, so a graph ``vmap``s like any other spec.

``calls`` is how many times the operator runs per pass (it may be a traced 0/1 to switch
an operator on or off, e.g. the MoE router).  Phases: ``fwd``, ``bwd``, ``recompute``
(extra work of selective recompute), ``step`` (once per optimizer step).

Costing (the formulas live in :mod:`dse.cost`; this module only dispatches):

* :class:`Gemm` -- :func:`dse.cost.gemm.gemm_time_s`; ``rate`` picks the linear-layer
  precision (fp8 with Transformer Engine) or the 16-bit path (LM head); ``chunks`` > 1
  splits M into that many pieces that share the waves (TE userbuffers' chunked GEMMs),
  adding one launch per extra chunk; ``skinny`` applies the inference skinny-GEMM tile
  and Stream-K split (:func:`skinny_split`).
* :class:`Attention` -- FlashAttention (:func:`dse.cost.attention.flash_attention_time_s`)
  where ``fused`` is 1, the unfused path otherwise.
* :class:`KVRead` -- decode attention, :func:`dse.cost.attention.decode_attention_time_s`.
* Windowed layers (:func:`with_window`): an :class:`Attention` or :class:`KVRead` whose
  ``window`` is set stands for the model's mean layer, ``1 - window_share`` of it full
  attention and ``window_share`` of it windowed (every cost is that mix of the two
  kernels: :func:`_layer_kinds`); the windowed kernel computes
  :func:`dse.cost.attention.windowed_causal_fraction` of the score square, or reads
  :func:`dse.cost.attention.windowed_kv_len` keys.
* :class:`MemPass` -- :func:`dse.cost.elementwise.memory_bound_time_s`.
* :class:`Collective` -- :func:`dse.cost.collectives.group_collective_s`.
* :class:`P2P` -- :func:`dse.cost.collectives.group_p2p_s`.

What bounds each operator (:func:`op_bound`) is the largest of its roofline terms:
``tensor`` (tensor-core compute), ``hbm``, ``l2``, ``launch`` (kernel launches),
``nvlink``, ``nic``.
"""

from __future__ import annotations

import contextlib
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dse.cost.attention import (FA_BLOCK_ROWS, SOFTMAX_FALLBACK_EXTRA_KERNELS,
                                SOFTMAX_FALLBACK_PASSES, decode_attention_bytes,
                                decode_attention_time_s, decode_compute_s, flash_attention_terms,
                                flash_attention_time_s, unfused_attention_time_s,
                                windowed_causal_fraction, windowed_kv_len)
from dse.cost.collectives import group_collective_terms, group_p2p_s
from dse.cost.elementwise import memory_bound_time_s
from dse.cost.gemm import gemm_hbm_bytes, gemm_terms
from dse.spec.model import attention_window
from dse.spec.pytree import pytree_dataclass

BOUNDS = ("tensor", "hbm", "l2", "launch", "nvlink", "nic")
MIN_TILE_M = 16.0        # smallest token tile (mma m16; wgmma N with swap-AB)
SPLIT_K_MIN_K = 256.0    # a split-K slice keeps at least this many K elements


def _replace(self, **kw):
    return dataclasses.replace(self, **kw)


@pytree_dataclass(static=("name", "phase", "rate", "skinny"))
class Gemm:
    """``calls`` x (``count`` problems of (m, n, k), M split into ``chunks``)."""
    m: float
    n: float
    k: float
    count: float = 1.0
    chunks: float = 1.0
    calls: float = 1.0
    name: str = ""
    phase: str = "fwd"
    rate: str = "linear"      # "linear" (fp8 with TE) | "16" (16-bit path, LM head)
    skinny: bool = False      # inference kernels: skinny tile + Stream-K (module docstring)
    # share of the FLOPs that are model FLOPs: < 1 where the shape is the busiest rank's
    # and the mean rank computes less (dropless MoE experts: dse.graph.moe.ep_busiest_factor)
    useful: float = 1.0
    replace = _replace


@pytree_dataclass(static=("name", "phase", "backward", "stream_bw", "window", "chunked"))
class Attention:
    """One attention core call per ``calls``: (batch, heads) query tiles of ``s_q`` rows
    over ``s_kv`` keys; ``d_fused`` is the (padded) head dim the fused kernel uses.
    ``stream_bw``: HBM at the achieved (STREAM-like) rate, as the serving tier costs its
    kernels, instead of the raw rate the training GEMM roofline uses.  ``fp8`` 1: the fused
    kernel's matmuls (QK^T, PV and the backward's) run on the fp8 tensor peak -- cuDNN's FP8
    SDPA under Transformer Engine's ``fp8_dpa`` (``Workload.fp8_attention``; only inside an
    FP8 recipe, whose linear peak :class:`dse.cost.rates.Rates` carries is then the fp8
    one) -- at the 16-bit kernel's tensor-core fraction ``eff_attn``, with its exponentials
    unchanged (one per score, on the SFUs), and its HBM bytes at the 16-bit size: with
    ``fp8_dpa`` but not ``fp8_mha`` TE casts Q, K, V to FP8 before the kernel and O back
    after it, about the bytes the 16-bit kernel's own I/O moves.  Carried, not fitted:
    NVIDIA measures cuDNN FP8 SDPA at up to 1.2 PFLOP/s on H200 ("Accelerating
    Transformers with NVIDIA cuDNN 9", 2024), about twice its BF16 kernel, and
    FlashAttention-3 (arXiv:2407.08608, Fig. 7) cuDNN FP8 forward at head dim 256 1015-1139
    TFLOP/s on H100 against 580 in BF16 (Fig. 5) -- the fp8 peak at the 16-bit fraction."""
    batch: float
    heads: float
    kv_heads: float
    s_q: float
    s_kv: float
    d: float
    d_fused: float
    causal: float
    dropout: float
    fused: float
    calls: float = 1.0
    softmax_fused: float = 1.0   # unfused path: Megatron's fused softmax kernel runs (1) or not
    name: str = ""
    phase: str = "fwd"
    backward: bool = False
    stream_bw: bool = False
    window_share: float = 0.0    # share of the layers that are windowed (with_window)
    window: int = 0              # their sliding window / chunk in tokens; 0 = every layer full
    chunked: bool = False        # chunks (Llama 4) instead of a sliding window
    fp8: float = 0.0             # 1: the fused kernel's matmuls on the fp8 peak (fp8_dpa)
    replace = _replace


@pytree_dataclass(static=("name", "phase", "window", "chunked"))
class KVRead:
    """Decode attention of ``batch`` one-token queries over a ``context``-token KV cache
    (:func:`dse.cost.attention.decode_attention_time_s`)."""
    batch: float
    heads: float
    kv_heads: float
    context: float
    d: float
    calls: float = 1.0
    kv_bytes: float = 0.0     # bytes per cached K/V element; 0 = the activation size
    name: str = "attention (KV read)"
    phase: str = "fwd"
    window_share: float = 0.0    # as Attention
    window: int = 0
    chunked: bool = False
    replace = _replace


def with_window(op, model):
    """``op`` (an :class:`Attention` or :class:`KVRead` of ``model``'s mean layer) with the
    model's windowed layer kind (:func:`dse.spec.model.attention_window`); unchanged for a
    model whose layers all attend their whole prefix."""
    w = attention_window(model)
    if w is None or not isinstance(op, (Attention, KVRead)):
        return op
    return op.replace(window=w.keys, chunked=w.chunked, window_share=w.share * 1.0)


def _layer_kinds(op):
    """(full, windowed, share) of a windowed attention operator (module docstring)."""
    full = op.replace(window=0, chunked=False, window_share=0.0)
    if isinstance(op, Attention):
        win = full.replace(causal=windowed_causal_fraction(op.s_kv, op.causal, op.window, op.chunked))
    else:
        win = full.replace(context=windowed_kv_len(op.context, op.window * 1.0))
    return full, win, op.window_share


def _mixed(fn, op, *args):
    """``fn`` of a windowed operator: ``(1 - x) fn(full) + x fn(windowed)``."""
    full, win, x = _layer_kinds(op)
    return jax.tree_util.tree_map(lambda a, b: (1.0 - x) * a + x * b, fn(full, *args), fn(win, *args))


def _windowed(op) -> bool:
    return isinstance(op, (Attention, KVRead)) and op.window > 0


@pytree_dataclass(static=("name", "phase"))
class MemPass:
    """Memory-bound kernels moving ``bytes_moved`` in ``kernels`` launches."""
    bytes_moved: float
    kernels: float = 1.0
    calls: float = 1.0
    name: str = ""
    phase: str = "fwd"
    replace = _replace


@pytree_dataclass(static=("name", "phase", "kind", "group", "protocols"))
class Collective:
    """A collective of ``kind`` over ``n`` ranks ``stride`` apart (group ``tp`` / ``cp`` /
    ``ep`` / ``dp`` / ``pp``), ``size_bytes`` the full buffer (nccl-tests convention).
    ``protocols``: cost it with NCCL's protocol model (LL / LL128 / Simple base and hop
    latencies, :func:`dse.cost.collectives.group_collective_terms`) -- what a framework
    calling NCCL pays -- instead of the alpha-beta bound."""
    size_bytes: float
    n: float
    stride: float
    calls: float = 1.0
    name: str = ""
    phase: str = "fwd"
    kind: str = "all_reduce"
    group: str = "tp"
    protocols: bool = False
    # all-to-all of a DeepEP / HybridEP dispatcher: copies per token and experts
    # (0: plain NCCL all-to-all; dse.cost.collectives.node_dedup_cross_bytes)
    dedup_topk: float = 0.0
    dedup_experts: float = 0.0
    replace = _replace


@pytree_dataclass(static=("name", "phase", "group"))
class P2P:
    """A point-to-point send of ``size_bytes`` to a rank ``stride`` away."""
    size_bytes: float
    stride: float
    calls: float = 1.0
    name: str = ""
    phase: str = "fwd"
    group: str = "pp"
    replace = _replace


OP_TYPES = (Gemm, Attention, KVRead, MemPass, Collective, P2P)


def op_kind(op) -> str:
    return {Gemm: "gemm", Attention: "attention", KVRead: "attention", MemPass: "memory",
            Collective: "collective", P2P: "p2p"}[type(op)]


def skinny_split(m, n, k, hw, count=1.0):
    """(token tile, split-K factor) of an inference GEMM (M tokens) run as ``count``
    independent problems in one kernel (a grouped GEMM's experts): the tile is
    ``clip(pow2(M), 16, tile_m)`` (Ampere mma m16n8k16; Hopper swap-AB puts the tokens
    on wgmma's N) and Stream-K spreads K over the SMs the tiles of all the problems
    leave idle, ``s = clip(floor(num_sms / (count m_tiles)) / n_tiles, 1, K / 256)``
    (Osama et al. 2023, arXiv:2301.03598): 128 experts of one tile column each already
    fill a GPU, so a grouped GEMM is not split.  The GEMM is costed as (M, N s, K / s)."""
    pow2_m = 2.0 ** jnp.ceil(jnp.log2(jnp.maximum(m, 1.0)))
    tile_m = jnp.clip(pow2_m, jnp.minimum(MIN_TILE_M, hw.tile_m), hw.tile_m)
    m_tiles = jnp.ceil(m / tile_m) * count
    n_tiles = jnp.ceil(n / hw.tile_n)
    slots = jnp.maximum(jnp.floor(hw.num_sms / m_tiles), 1.0)
    # (1 - 1e-6): keep ceil(n s / tile_n) <= slots against rounding
    split = jnp.clip(slots / n_tiles * (1.0 - 1e-6), 1.0, jnp.maximum(k / SPLIT_K_MIN_K, 1.0))
    return tile_m, split


def _gemm_args(op: Gemm, hw, r):
    """(m, n, k, peak, eff, hbm_bw, tile_m, bytes_per_el) the cost functions take; the
    output is written in the activation size ``r.act_bytes`` (:mod:`dse.cost.gemm`)."""
    if op.rate == "linear":
        peak, eff, el = r.peak_linear_flops_per_s, r.eff_linear, r.linear_bytes
    else:
        peak, eff, el = r.peak_16_flops_per_s, hw.eff_gemm, r.act_bytes
    m, n, k = op.m / op.chunks, op.n, op.k
    if op.skinny:
        # inference: weight/KV streams run at the achieved (STREAM-like) bandwidth
        tile_m, split = skinny_split(m, n, k, hw, op.count)
        return m, n * split, k / split, peak, eff, r.hbm_bw_bytes_per_s, tile_m, el
    return m, n, k, peak, eff, r.hbm_bw_raw_bytes_per_s, hw.tile_m, el


def _gemm_terms(op: Gemm, hw, r):
    m, n, k, peak, eff, bw, tile_m, el = _gemm_args(op, hw, r)
    return gemm_terms(m, n, k, peak, eff, bw, r.l2_bw_bytes_per_s, hw.l2_bytes, hw.num_sms,
                      tile_m, hw.tile_n, el, op.count * op.chunks, hw.gemm_cluster, r.act_bytes)


def _attn_call_args(op: Attention, hw, r):
    bw = r.hbm_bw_bytes_per_s if op.stream_bw else r.hbm_bw_raw_bytes_per_s
    peak = jnp.where(op.fp8 > 0, r.peak_linear_flops_per_s, r.peak_16_flops_per_s)
    flash = (op.batch, op.heads, op.kv_heads, op.s_q, op.s_kv, op.d_fused, op.causal,
             peak, hw.eff_attn * (hw.eff_attn_bwd if op.backward else 1.0),
             bw, r.l2_bw_bytes_per_s, hw.l2_bytes, hw.num_sms,
             hw.smem_per_sm_bytes, r.act_bytes)
    unfused = (op.batch, op.heads, op.s_q, op.s_kv, op.d, 1.0, op.dropout, r.peak_16_flops_per_s,
               hw.eff_gemm, r.hbm_bw_raw_bytes_per_s, r.l2_bw_bytes_per_s, hw.l2_bytes,
               hw.num_sms, hw.tile_m, hw.tile_n, r.act_bytes, hw.kernel_launch_s, op.backward,
               op.softmax_fused)
    return flash, unfused


def _unfused_passes(op: Attention):
    """2-byte passes over the scores of the unfused core's softmax and dropout
    (:func:`dse.cost.attention.unfused_attention_time_s`)."""
    fb_fwd, fb_bwd = SOFTMAX_FALLBACK_PASSES
    softmax = (jnp.where(op.softmax_fused > 0, 3.0, fb_bwd) if op.backward
               else jnp.where(op.softmax_fused > 0, 2.0, fb_fwd))
    return softmax + 2.5 * op.dropout


def _kv_el(op: KVRead, r):
    """Bytes per cached element of a KV read: ``kv_bytes`` (1 for an fp8 cache) when set,
    else the activation element size."""
    return jnp.where(op.kv_bytes > 0, op.kv_bytes, r.act_bytes)


def unit_time_s(op, hw, r):
    """Seconds of one call of ``op`` on one GPU (module docstring)."""
    if _windowed(op):
        return _mixed(unit_time_s, op, hw, r)
    if isinstance(op, Gemm):
        t_c, t_h, t_l = _gemm_terms(op, hw, r)
        return (jnp.maximum(jnp.maximum(t_c, t_h), t_l) + hw.kernel_launch_s
                + (op.chunks - 1.0) * hw.kernel_launch_s)
    if isinstance(op, Attention):
        flash, unfused = _attn_call_args(op, hw, r)
        t_un = unfused_attention_time_s(*unfused)
        t_fa = flash_attention_time_s(*flash, hw.kernel_launch_s, backward=op.backward,
                                      exp_per_s=r.exp_per_s)
        return jnp.where(op.fused > 0, t_fa, t_un)
    if isinstance(op, KVRead):
        return decode_attention_time_s(op.batch, op.heads, op.kv_heads, op.context, op.d,
                                       r.peak_16_flops_per_s, hw.eff_attn, r.hbm_bw_bytes_per_s,
                                       _kv_el(op, r), hw.kernel_launch_s, r.exp_per_s)
    if isinstance(op, MemPass):
        return memory_bound_time_s(op.bytes_moved, r.hbm_bw_bytes_per_s, hw.kernel_launch_s,
                                   op.kernels)
    if isinstance(op, Collective):
        t_nv, t_nic = group_collective_terms(op.kind, op.size_bytes, op.n, op.stride, hw, op.protocols,
                                             op.dedup_topk, op.dedup_experts)
        return jnp.maximum(t_nv, t_nic) if op.kind == "all_to_all" else t_nv + t_nic
    if isinstance(op, P2P):
        return group_p2p_s(op.size_bytes, op.stride, hw)
    raise TypeError(f"not an operator: {type(op).__name__}")


def time_s(op, hw, r):
    """Seconds of all ``calls`` of ``op`` in one pass."""
    return op.calls * unit_time_s(op, hw, r)


VECTOR_WIDTH = 16
_PER_OP = [False]     # costed_per_op(): map_ops is the plain loop


@contextlib.contextmanager
def costed_per_op():
    """Within: :func:`map_ops` costs every op alone (the reference the vector calls are
    tested against)."""
    _PER_OP.append(True)
    try:
        yield
    finally:
        _PER_OP.pop()
_LABELS = ("name", "phase")    # what the reductions filter on; no cost function reads them


def _leaf_kind(v):
    """How a leaf groups (:func:`_group_key`): ``("v", dtype)`` a traced scalar -- or a
    small integral constant (|v| <= 2**16, e.g. the default ``calls = 1.0``), which
    float32 holds exactly and whose sums and products with its like stay exact in either
    precision -- that may be stacked with others; ``("c", type, value)`` another constant,
    which must be equal; ``None`` a leaf that cannot be grouped (eager arrays)."""
    if isinstance(v, jax.core.Tracer):
        return ("v", v.aval.dtype) if v.aval.shape == () else None
    if isinstance(v, (bool, int, float, np.generic)):
        if (isinstance(v, (float, np.floating)) and float(v).is_integer()
                and abs(float(v)) <= 2.0 ** 16):
            return ("v", np.dtype(np.float32))
        return ("c", type(v), v)
    return None


def _group_key(op):
    """Ops with equal keys are costed in one vector call (:func:`map_ops`): same type,
    same static fields but the labels (``name``, ``phase``: no cost function reads
    them), every leaf of the same kind (:func:`_leaf_kind`); ``None``: costed alone."""
    cls = type(op)
    kinds = tuple(_leaf_kind(getattr(op, f)) for f in cls._leaf_fields)
    if None in kinds:
        return None
    static = tuple(getattr(op, f.name) for f in dataclasses.fields(op)
                   if f.name not in cls._leaf_fields and f.name not in _LABELS)
    return cls, static, kinds


_LAX_STACK = getattr(lax, "stack", None)


def _stacked_field(values):
    """One field of a group: the constant itself where every op has the same Python
    constant (the per-op arithmetic on it is unchanged), else the float32 vector."""
    v0 = values[0]
    if not isinstance(v0, jax.core.Tracer) and all(
            type(v) is type(v0) and not isinstance(v, jax.core.Tracer) and v == v0 for v in values):
        return v0
    if all(not isinstance(v, jax.core.Tracer) or (v.aval.dtype == np.float32 and not v.aval.weak_type)
           for v in values):
        # float32 leaves and constants: the stack jnp.stack records, without its promotion
        # pass (a third of the cost of tracing it)
        leaves = [v if isinstance(v, jax.core.Tracer) else np.float32(v) for v in values]
        # ``lax.stack`` is new in jax 0.7; older jax (the Python 3.10 install) stacks with
        # ``jnp.stack``, the same float32 vector
        return _LAX_STACK(leaves) if _LAX_STACK is not None else jnp.stack(leaves)
    return jnp.stack([jnp.asarray(v, jnp.float32) if not isinstance(v, jax.core.Tracer) else v
                      for v in values])


def map_ops(fn, ops, *args) -> list:
    """``[fn(op, *args) for op in ops]``, with the ops of one kind (:func:`_group_key`)
    evaluated as one op whose leaves are stacked into vectors (padded to a multiple of
    :data:`VECTOR_WIDTH` so that every group traces the same shapes): each element runs
    the same float operations as its op alone, so the traced program is a fraction of
    the size (the trace generator traces it once per design point) and its values are
    the per-op ones under IEEE arithmetic (bit for bit on the host,
    :mod:`dse.host_eval`; ``tests/graph/test_map_ops.py``).  XLA itself may differ
    in the last bits: it rewrites a vector divided by a broadcast scalar as a multiply by
    the reciprocal (~1e-7 relative, as it already does for the sweep's design-point
    axis).  Outside a trace (eager values) it is the plain loop."""
    if _PER_OP[-1]:
        return [fn(op, *args) for op in ops]
    out = [None] * len(ops)
    groups: dict = {}
    for i, op in enumerate(ops):
        key = _group_key(op)
        if key is None:
            out[i] = fn(op, *args)
        else:
            groups.setdefault(key, []).append(i)
    for (cls, _, _), idx in groups.items():
        if len(idx) == 1:
            out[idx[0]] = fn(ops[idx[0]], *args)
            continue
        pad = idx + [idx[0]] * (-len(idx) % VECTOR_WIDTH)
        batched = ops[idx[0]].replace(**{f: _stacked_field([getattr(ops[i], f) for i in pad])
                                         for f in cls._leaf_fields})
        leaves, tree = jax.tree_util.tree_flatten(fn(batched, *args))
        cols = [_unstack(x, len(idx)) if jnp.ndim(x) else [x] * len(idx) for x in leaves]
        for j, i in enumerate(idx):
            out[i] = jax.tree_util.tree_unflatten(tree, [c[j] for c in cols])
    return out


def _unstack(x, n: int) -> list:
    """The first ``n`` rows of ``x`` (``x[0] .. x[n - 1]``): one split and ``n`` squeezes
    (the padding rows in one unused piece), half the operations of ``n`` slices."""
    rest = x.shape[0] - n
    parts = lax.split(x, (1,) * n + ((rest,) if rest else ()), axis=0)
    return [lax.squeeze(p, (0,)) for p in parts[:n]]


def times_s(ops, hw, r) -> list:
    """``[time_s(op, hw, r) for op in ops]`` in vector calls (:func:`map_ops`)."""
    return map_ops(time_s, ops, hw, r)


def host_kernels(op):
    """Kernels one call of ``op`` launches from the host (each is one PyTorch eager
    operator the CPU must dispatch): a GEMM one per problem of its ``count`` (1 for a
    linear; a grouped MoE GEMM issues one cuBLAS GEMM per local expert,
    :mod:`dse.graph.moe`), while Transformer Engine issues the chunks of a
    userbuffers-overlapped GEMM from its C++ loop, ``comm_gemm_overlap``, within one
    Python call; FlashAttention 1 forward,
    3 backward (FA2: dot(dO, O) preprocess, the main kernel, the dQ conversion); the
    unfused core QK^T, softmax and PV (+ dropout) forward, their four GEMMs, softmax and
    dropout backward, and four more each way where Megatron's fused softmax is not
    available (:func:`dse.cost.attention.fused_softmax_available`: ``float``, scale,
    mask, softmax, ``half`` instead of one kernel); a memory pass its ``kernels``; a
    collective or transfer one."""
    if isinstance(op, Gemm):
        return op.count + 0.0 * op.calls
    if isinstance(op, Attention):
        fused = (1.0 if not op.backward else 3.0)
        unfused = ((3.0 if not op.backward else 5.0) + op.dropout
                   + (1.0 - op.softmax_fused) * SOFTMAX_FALLBACK_EXTRA_KERNELS)
        return jnp.where(op.fused > 0, fused, unfused)
    if isinstance(op, MemPass):
        return op.kernels
    return 1.0 + 0.0 * op.calls


def flops(op):
    """Useful (model) FLOPs of all calls: ``2 m n k count useful`` per GEMM; attention
    ``4 b heads s_q s_kv d causal`` forward, twice that backward (the backward's
    recomputed QK^T is not useful work); 0 for memory and communication."""
    if _windowed(op):
        return _mixed(flops, op)
    if isinstance(op, Gemm):
        return op.calls * 2.0 * op.m * op.n * op.k * op.count * op.useful
    if isinstance(op, Attention):
        fwd = 4.0 * op.batch * op.heads * op.s_q * op.s_kv * op.d * op.causal
        return op.calls * fwd * (2.0 if op.backward else 1.0)
    if isinstance(op, KVRead):
        return op.calls * 4.0 * op.batch * op.heads * op.context * op.d
    return 0.0 * op.calls


def bytes_moved(op, hw, r):
    """Bytes of all calls: HBM bytes for kernels, the buffer size for communication."""
    if _windowed(op):
        return _mixed(bytes_moved, op, hw, r)
    if isinstance(op, Gemm):
        m, n, k, _, _, _, _, el = _gemm_args(op, hw, r)
        return op.calls * gemm_hbm_bytes(m, n, k, hw.l2_bytes, el, op.count * op.chunks,
                                         r.act_bytes)
    if isinstance(op, Attention):
        flash, unfused = _attn_call_args(op, hw, r)
        fa = flash_attention_terms(*flash, backward=op.backward, exp_per_s=r.exp_per_s)[3]
        scores = op.batch * op.heads * op.s_q * op.s_kv * r.act_bytes
        return op.calls * jnp.where(op.fused > 0, fa, _unfused_passes(op) * scores)
    if isinstance(op, KVRead):
        return op.calls * decode_attention_bytes(op.batch, op.heads, op.kv_heads, op.context,
                                                 op.d, _kv_el(op, r))
    if isinstance(op, MemPass):
        return op.calls * op.bytes_moved
    return op.calls * op.size_bytes


def bound_terms(op, hw, r):
    """Seconds per call by resource, in :data:`BOUNDS` order (0 where not involved)."""
    if _windowed(op):
        return _mixed(bound_terms, op, hw, r)
    z = 0.0 * op.calls
    launch = hw.kernel_launch_s
    if isinstance(op, Gemm):
        t_c, t_h, t_l = _gemm_terms(op, hw, r)
        return (t_c, t_h, t_l, op.chunks * launch, z, z)
    if isinstance(op, Attention):
        flash, unfused = _attn_call_args(op, hw, r)
        t_c, t_h, t_l, _ = flash_attention_terms(*flash, backward=op.backward, exp_per_s=r.exp_per_s)
        t_un = unfused_attention_time_s(*unfused)
        scores = op.batch * op.heads * op.s_q * op.s_kv * r.act_bytes
        un_h = _unfused_passes(op) * scores / r.hbm_bw_raw_bytes_per_s
        f = op.fused > 0
        return (jnp.where(f, t_c, t_un - un_h), jnp.where(f, t_h, un_h), jnp.where(f, t_l, z),
                launch + z, z, z)
    if isinstance(op, KVRead):
        fl = decode_compute_s(op.batch, op.heads, op.context, op.d, r.peak_16_flops_per_s,
                              hw.eff_attn, r.exp_per_s)
        by = decode_attention_bytes(op.batch, op.heads, op.kv_heads, op.context, op.d,
                                    _kv_el(op, r)) / r.hbm_bw_bytes_per_s
        return (fl, by, z, 2.0 * launch + z, z, z)
    if isinstance(op, MemPass):
        return (z, op.bytes_moved / r.hbm_bw_bytes_per_s, z, op.kernels * launch, z, z)
    if isinstance(op, Collective):
        t_nv, t_nic = group_collective_terms(op.kind, op.size_bytes, op.n, op.stride, hw, op.protocols,
                                             op.dedup_topk, op.dedup_experts)
        return (z, z, z, z, t_nv, t_nic)
    if isinstance(op, P2P):
        inside = op.stride < hw.nvlink_domain_gpus
        t = group_p2p_s(op.size_bytes, op.stride, hw)
        return (z, z, z, z, jnp.where(inside, t, 0.0), jnp.where(inside, 0.0, t))
    raise TypeError(f"not an operator: {type(op).__name__}")


def causal_fraction(s_kv):
    """Share of the score tiles a causal FlashAttention call computes: tiles above the
    diagonal are skipped, diagonal tiles run in full, ``0.5 + 0.5 Br / s_kv``; ring
    attention with load-balanced (zig-zag) chunks keeps the same fraction per rank."""
    return 0.5 + 0.5 * FA_BLOCK_ROWS / s_kv


def ddp_buckets(params, bucket_elems, tensors=None):
    """Buckets a data-parallel buffer of ``params`` elements in ``tensors`` parameter
    tensors is reduced in, one collective call each: ``min(ceil(params / bucket_elems),
    tensors)``, at least 1 (:func:`dse.graph.train.ddp_bucket_elems`).  Megatron-Core
    fills a bucket with whole parameters in backward order and closes it once it holds
    ``bucket_size`` elements (``megatron/core/distributed/param_and_grad_buffer.py``
    ``_compute_default_per_buffer_param_layout``), so no bucket is smaller than one
    tensor and a bucket size below the tensors' (``--ddp-bucket-size 200``, MLPerf v5.0's
    Llama 3.1 405B) gives one bucket per tensor, not ``params / 200``; ``tensors`` None:
    no such bound (:func:`dse.graph.train.param_tensors`)."""
    nb = jnp.ceil(params / bucket_elems)
    if tensors is not None:
        nb = jnp.minimum(nb, tensors)
    return jnp.maximum(nb, 1.0)


def ddp_collectives(group_name: str, params, grad_bytes, param_bytes, n, stride, bucket_elems,
                    on=1.0, tensors=None) -> tuple:
    """(gradient all-reduce, gradient reduce-scatter, parameter all-gather) of a
    data-parallel buffer of ``params`` elements over ``n`` ranks ``stride`` apart, named
    ``"<group_name> grad all-reduce"`` ...: one NCCL call per bucket of ``bucket_elems``
    (:func:`ddp_buckets`, at most one per tensor of the buffer's ``tensors``; ``on`` 0 drops
    them all), each of ``grad_bytes`` / ``param_bytes``
    per element and costed with NCCL's protocol latency (``protocols``) -- the dense
    buffer's (:func:`dse.graph.train.dp_ops`) and the experts' (:func:`dse.graph.moe.expert_dp_ops`)."""
    nb = ddp_buckets(params, bucket_elems, tensors)
    calls = nb * on
    grad, param = grad_bytes * params / nb, param_bytes * params / nb
    return tuple(Collective(size, n, stride, calls=calls, name=f"{group_name} {what}", phase="step",
                            kind=kind, group="dp", protocols=True)
                 for size, what, kind in ((grad, "grad all-reduce", "all_reduce"),
                                          (grad, "grad reduce-scatter", "reduce_scatter"),
                                          (param, "param all-gather", "all_gather")))
