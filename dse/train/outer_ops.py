"""Operations of a training step outside the repeated transformer layer, as reductions of
their operator lists (:mod:`dse.graph.train`: ``head_ops``, ``embedding_ops``,
``p2p_ops``, ``optimizer_ops``, ``accumulation_ops``, whose docstrings give the shapes,
bytes and sources).  Each reduction is the sum of ``calls x unit time`` of its operators
(:func:`dse.graph.ops.time_s`): they run back to back on one stream.  The vectorized
step (:mod:`dse.train.step`) sums them (``StepSchedule.outer_s``, which the trace
generator reads).
"""

from __future__ import annotations

from dse.graph.ops import P2P, time_s
from dse.graph.train import (accumulation_ops, embedding_ops, optimizer_ops,
                             p2p_ops, tokens_per_micro_batch)
from dse.spec.hardware import Hardware
from dse.spec.layout import Layout, Workload
from dse.spec.model import Model
from dse.train.memory import embedding_params_per_gpu
from dse.cost.rates import Rates

__all__ = ["tokens_per_micro_batch", "total_s", "embedding_s", "pipeline_p2p", "p2p_bytes",
           "optimizer_step_s", "grad_accumulation_s"]


def total_s(ops, hw: Hardware, r: Rates, phase: str | None = None):
    """Seconds of the operators of ``ops`` (those of ``phase`` if given), run back to back."""
    out = 0.0
    for op in ops:
        if phase is None or op.phase == phase:
            out = out + time_s(op, hw, r)
    return out


def embedding_s(model: Model, wl: Workload, lay: Layout, hw: Hardware, r: Rates):
    return total_s(embedding_ops(model, wl, lay, r.act_bytes), hw, r)


def pipeline_p2p(model: Model, wl: Workload, lay: Layout, hw: Hardware, r: Rates):
    """(bytes, seconds) of one stage-to-stage activation transfer."""
    ops = p2p_ops(model, wl, lay, r.act_bytes)
    return p2p_bytes(ops), total_s(ops, hw, r)


def p2p_bytes(ops):
    """Bytes of the stage-to-stage transfer of a ``p2p_ops`` list."""
    return [op.size_bytes for op in ops if isinstance(op, P2P)][0]


def optimizer_step_s(model: Model, wl: Workload, lay: Layout, hw: Hardware, r: Rates, params_per_gpu):
    return total_s(optimizer_ops(model, wl, lay, params_per_gpu,
                                 embedding_params_per_gpu(model, lay)), hw, r)


def grad_accumulation_s(wl: Workload, hw: Hardware, r: Rates, params_per_gpu):
    return total_s(accumulation_ops(wl, params_per_gpu), hw, r)
