"""One transformer layer, one micro-batch, one GPU: forward and backward time, as a
reduction of the layer's operator graph (:func:`dse.graph.train.layer_ops`, whose
docstring lists the operators, shapes and bytes).

Reduction: forward (backward) compute = sum over the ``fwd`` (``bwd``) GEMMs, attention
cores and memory-bound passes of ``calls x unit time`` (:func:`dse.graph.ops.time_s`):
the kernels of one layer run back to back on one stream (sum).  The attention core is
the CP overlap window.  TP collectives are on the critical path (exposed == raw) unless
``--tp-comm-overlap``: then :func:`dse.cost.collectives.tp_overlap_cost_s` against the
window of the (unchunked) linear GEMMs.  Model FLOPs are the ``fwd`` and ``bwd``
operators' useful FLOPs (no recompute).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from dse.cost.collectives import tp_overlap_cost_s
from dse.graph.ops import Attention, Collective, Gemm, P2P, flops, time_s
from dse.graph.train import layer_ops
from dse.spec.hardware import Hardware
from dse.spec.layout import Layout, Workload
from dse.spec.model import Model
from dse.train.rates import Rates


class LayerCost(NamedTuple):
    fwd_compute_s: object   # GEMMs + attention + element-wise, forward
    bwd_compute_s: object   # same, backward
    attn_s: object          # attention core forward + backward (the CP overlap window)
    selective_recompute_s: object  # extra backward time of selective recompute
    tp_comm_s: object       # TP/SP collectives, forward + backward (raw)
    tp_exposed_s: object    # their cost on the critical path (== raw unless overlapped)
    cp_comm_s: object       # ring-attention K/V exchange, forward + backward (raw)
    ep_comm_s: object       # MoE all-to-all, forward + backward
    model_flops: object     # forward+backward useful FLOPs (no recompute)


def _sum(xs):
    out = 0.0
    for x in xs:
        out = out + x
    return out


def is_compute(op) -> bool:
    return not isinstance(op, (Collective, P2P))


def reduce_layer(ops, wl: Workload, lay: Layout, hw: Hardware, r: Rates) -> LayerCost:
    """The :class:`LayerCost` of one layer's operator list (module docstring)."""
    times = [time_s(op, hw, r) for op in ops]
    pick = lambda cond: _sum(t for op, t in zip(ops, times) if cond(op))
    fwd = pick(lambda op: is_compute(op) and op.phase == "fwd")
    bwd = pick(lambda op: is_compute(op) and op.phase == "bwd")
    attn = pick(lambda op: isinstance(op, Attention) and op.phase in ("fwd", "bwd"))
    selective = pick(lambda op: op.phase == "recompute")
    group = lambda g: pick(lambda op: isinstance(op, (Collective, P2P)) and op.group == g)
    tp_comm, cp_comm, ep_comm = group("tp"), group("cp"), group("ep")
    tp_exposed = tp_comm
    if wl.tp_overlap:
        on = (lay.sp > 0) & (lay.tp > 1)
        window = _sum(time_s(op.replace(chunks=1.0), hw, r) for op in ops
                      if isinstance(op, Gemm) and op.name.split(" ")[0] in ("qkv", "out", "fc1", "fc2"))
        tp_exposed = jnp.where(on, tp_overlap_cost_s(tp_comm, window, lay.tp * 1.0, hw.num_sms), tp_comm)
    model_flops = _sum(flops(op) for op in ops if op.phase in ("fwd", "bwd"))
    return LayerCost(fwd, bwd, attn, selective, tp_comm, tp_exposed, cp_comm, ep_comm, model_flops)


def layer_cost(model: Model, wl: Workload, lay: Layout, hw: Hardware, r: Rates) -> LayerCost:
    """:class:`LayerCost` of the layer's operator graph."""
    return reduce_layer(layer_ops(model, wl, lay, r.act_bytes), wl, lay, hw, r)
