"""The per-operator table of one training step: every operator of the step's graph
(:func:`dse.graph.train.step_graph`) times how often the schedule runs it
(:class:`dse.train.step.StepSchedule`), on one GPU of the heaviest pipeline stage.

Columns: ``op``, ``phase``, ``kind``, ``count`` (calls per step), ``flops`` (useful
FLOPs), ``bytes`` (HBM bytes for kernels, buffer bytes for communication), ``time_s``
(count x unit time), ``exposed_s`` (its share on the critical path), ``term`` (the step
breakdown column it adds to) and ``bound`` (the largest roofline term of one call:
tensor, hbm, l2, launch, nvlink, nic).  ``exposed_s`` summed per ``term`` equals the
step's breakdown, and over all rows (with the ``pipeline bubble`` row) the step time.
Exposed shares of overlapped communication (TP with ``--tp-comm-overlap``, CP, DP) are
the step's, spread over the group's operators in proportion to their time.
"""

from __future__ import annotations

import jax.numpy as jnp
import pandas as pd

from dse.graph.ops import (BOUNDS, P2P, Attention, Collective, Gemm, MemPass, bound_terms,
                           bytes_moved, flops, op_kind, time_s)
from dse.spec.numerics import as_float
from dse.spec.pytree import pytree_dataclass
from dse.cost.attention_kernel import with_attention_kernel
from dse.cost.rates import rates
from dse.train.layer import reduce_layer
from dse.train.step import step_and_schedule
from dse.host_eval import host_design_point

COLUMNS = ("op", "phase", "kind", "count", "flops", "bytes", "time_s", "exposed_s", "term", "bound")


@pytree_dataclass(static=("op", "phase", "kind", "term"))
class Row:
    count: float
    flops: float
    bytes: float
    time_s: float
    exposed_s: float
    bound: int
    op: str = ""
    phase: str = ""
    kind: str = ""
    term: str = ""


def _rows(model, wl, lay, hw) -> tuple:
    model, wl, lay = as_float(model, wl, lay)      # the numerics boundary
    res, sc, g = step_and_schedule(model, wl, lay, hw)
    hw = with_attention_kernel(hw, wl)             # as the step costs attention
    r = rates(hw, wl.precision)
    out = []

    def add(op, mult, term, frac=1.0, phase=None):
        t = time_s(op, hw, r) * mult
        bound = jnp.argmax(jnp.stack([jnp.asarray(x, jnp.float32) for x in bound_terms(op, hw, r)]))
        out.append(Row(op.calls * mult, flops(op) * mult, bytes_moved(op, hw, r) * mult, t, t * frac,
                       bound, op=op.name, phase=phase or op.phase, kind=op_kind(op), term=term))

    for op in g.layer:
        comm = isinstance(op, (Collective, P2P))
        if not comm and op.phase == "recompute":
            add(op, sc.selective_calls, "recompute_s")
        elif not comm:
            add(op, sc.layer_calls, "compute_s")
            if op.phase == "fwd":
                add(op, sc.recompute_calls, "recompute_s", phase="recompute")
        elif op.group == "tp":
            add(op, sc.tp_fwd_calls if op.phase == "fwd" else sc.layer_calls, "tp_comm_s",
                sc.tp_exposed_frac)
        elif op.group == "cp":
            add(op, sc.layer_calls, "cp_comm_s", sc.cp_exposed_frac)
        else:
            add(op, sc.layer_calls, "ep_comm_s", sc.ep_exposed_frac)
    # the host-bound floor (dse.train.layer): GPU idle time waiting for kernel launches
    lc = reduce_layer(g.layer, wl, lay, hw, r)
    launch = BOUNDS.index("launch")
    for stall, mult, phase in ((lc.host_stall_fwd_s, sc.layer_calls, "fwd"),
                               (lc.host_stall_fwd_s, sc.recompute_calls, "recompute"),
                               (lc.host_stall_bwd_s, sc.layer_calls, "bwd")):
        t = stall * mult
        out.append(Row(jnp.where(t > 0, mult, 0.0), 0.0 * t, 0.0 * t, t, t, launch, op="host launch stall",
                       phase=phase, kind="host",
                       term="recompute_s" if phase == "recompute" else "compute_s"))
    for op in g.head:
        add(op, sc.head_calls, "compute_s")
    for op in g.embedding:
        add(op, sc.embedding_calls, "compute_s")
    for op in g.accumulation:
        add(op, sc.accumulation_calls, "compute_s")
    for op in g.p2p:
        add(op, sc.p2p_calls, "pp_comm_s")
    m = wl.global_batch / (lay.dp * lay.mbs)
    has_dp = jnp.where(lay.dp * lay.cp > 1, 1.0, 0.0)
    dp_frac = jnp.where(sc.dp_raw_s > 0, res.dp_comm_s / jnp.where(sc.dp_raw_s > 0, sc.dp_raw_s, 1.0), 0.0)
    ar, rs, ag = g.dp
    z = lay.zero
    add(ar, has_dp * (z == 0), "dp_comm_s", dp_frac)
    add(rs, has_dp * jnp.where((z == 0) | (z >= 3), 0.0, jnp.where(z == 2, m, 1.0)), "dp_comm_s", dp_frac)
    add(ag, has_dp * jnp.where((z == 0) | (z >= 3), 0.0, 1.0), "dp_comm_s", dp_frac)
    # MoE: the routed experts' buffers over the expert-data-parallel group (dse.graph.moe)
    if g.expert_dp:
        ear, ers, eag = g.expert_dp
        add(ear, (z == 0) * 1.0, "dp_comm_s", dp_frac)
        add(ers, jnp.where((z == 0) | (z >= 3), 0.0, jnp.where(z == 2, m, 1.0)), "dp_comm_s", dp_frac)
        add(eag, jnp.where((z == 0) | (z >= 3), 0.0, 1.0), "dp_comm_s", dp_frac)
    # ZeRO-3 / FSDP: the per-unit collectives and copy-out (dse.train.zero3)
    for op, calls in zip(g.zero3, sc.zero3_calls):
        add(op, has_dp * jnp.where(z >= 3, calls, 0.0), "dp_comm_s", dp_frac)
    for op in g.optimizer:
        add(op, 1.0, "optimizer_s")
    b = sc.bubble_s
    out.append(Row(jnp.where(b > 0, 1.0, 0.0), 0.0 * b, 0.0 * b, b, b, -1, op="pipeline bubble",
                   phase="schedule", kind="schedule", term="bubble_s"))
    return tuple(out), res


def ops_table(model, wl, lay, hw) -> tuple[pd.DataFrame, object]:
    """(the per-operator DataFrame, the :class:`~dse.train.step.StepResult`) of one
    design point; rows that never run (count 0) are left out.  One design point is run
    on the host without an XLA compile (as the
    trace generator runs its costs: the same program, ~0.1 s instead of a 5-20 s compile
    of a large model's graph; :func:`~dse.host_eval.host_design_point`)."""
    rows, res = host_design_point(_rows, model, wl, lay, hw)
    recs = []
    for row in rows:
        count = float(row.count)
        if count <= 0:
            continue
        bound = int(row.bound)
        recs.append(dict(op=row.op, phase=row.phase, kind=row.kind, count=count,
                         flops=float(row.flops), bytes=float(row.bytes), time_s=float(row.time_s),
                         exposed_s=float(row.exposed_s), term=row.term,
                         bound=BOUNDS[bound] if bound >= 0 else "schedule"))
    return pd.DataFrame(recs, columns=list(COLUMNS)), res


__all__ = ["ops_table", "COLUMNS", "Gemm", "Attention", "MemPass"]
