"""Execution traces of one training step, generated from the vectorized cost model.

:func:`generate_trace_set` turns one design point (model, workload, layout, hardware)
into a :class:`~dse.trace.graph.TraceSet`: one role per pipeline stage (ranks that differ
only in their TP/CP/DP coordinates run the same program; each role a
:class:`~dse.trace.graph.NodeTable` of shared node bodies, encoded in bulk by the Chakra
writer and turned into :class:`~dse.trace.graph.TraceNode` objects only when read), every
duration from one program (:func:`_costs`: reductions of the operator graph
:func:`dse.train.step.train_step` reduces, traced once and run on the host by
:mod:`dse.host_eval`, bit for bit what ``jax.jit`` of it gives, without its
multi-second XLA compile) -- no cost arithmetic here.  Ops per micro-batch and stage
(Megatron-LM, Narayanan et al. SC'21):

* stream 0 (compute, in program order): per layer one forward compute node, then its
  TP collectives (2 all-reduces, or with SP 2 all-gathers + 2 reduce-scatters, each the
  cost model's per-collective estimate), MoE all-to-alls (EP); per layer backward:
  [full recompute: a forward node + its TP collectives; selective: the attention-core
  recompute node, when it costs anything (not with FlashAttention)], one backward node,
  then its TP collectives.  First stage: embedding before the first layer; last stage:
  LM head + cross-entropy after the last layer forward, LM-head backward before the
  first layer backward.  Pipeline RECV before / SEND after each stage pass (group_dim
  "pp", peer_delta -1/+1, tag 0 activations, 1 gradients).
* layers per rank: the split the cost model prices (:func:`chunk_layer_counts`,
  :func:`dse.train.step.pipeline_stages`) -- ``ceil`` layers per stage, with an uneven
  split the LM head's stage one fewer (all of the slack beside multi-token prediction:
  DeepSeek-V3 at PP 8 runs ``[8 x 7, 5 + MTP + loss]``) and the embedding's one fewer
  when slack is left, so every layer is run once and no stage carries the head on top of
  a full stage of layers.
* order (:func:`pipeline_order`), ``vpp == 1``: 1F1B -- ``min(pp - s - 1, m)`` warm-up
  forwards on stage ``s``, steady one-forward-one-backward, cool-down backwards; the
  p2p sits on stream 0 (blocking), as the cost model counts ``2 (m + pp - 1)`` exposed
  transfers for Megatron (under the deepspeed profile the cost model charges DeepSpeed's
  unpaired blocking send / recv, ``4 m + 2 pp - 8``, :mod:`dse.train.pipe_transfers`;
  the trace keeps this one order for every profile).
* ``vpp > 1``: Megatron's interleaved 1F1B (Narayanan et al. SC'21 sec. 2.2.2;
  ``megatron/core/pipeline_parallel/schedules.py``,
  ``forward_backward_pipelining_with_interleaving``).  Rank ``s`` holds ``vpp`` model
  chunks of ``L / (pp vpp)`` layers; chunk ``c`` is virtual stage ``c pp + s`` (first
  virtual stage: embedding, last: LM head).  Micro-batches go in groups of ``pp``: the
  k-th forward is micro-batch ``(k // (pp vpp)) pp + k % pp`` of chunk
  ``(k % (pp vpp)) // pp`` (backward: chunk ``vpp - 1 -`` that); ``min((pp - s - 1) 2 +
  (vpp - 1) pp, m vpp)`` warm-up forwards, then one forward + one backward, then the
  cool-down backwards.  Activations go to the next rank, from the last rank to rank 0
  (next chunk) -- peer_delta ``-(pp - 1)``, tag 2 (gradients: tag 3).  The p2p is
  asynchronous, as Megatron-Core's ``overlap_p2p_comm``: SENDs on stream 3 after the
  pass that produced them, RECVs posted early on stream 4, and only the pass that
  consumes the data waits for it.
* stream 2: CP ring-attention exchange of each layer pass as a "cp" all-gather of the
  ``cp`` K/V chunks (bandwidth-equal to the ``cp - 1`` ring steps of the cost model),
  overlapping the layer's compute node (the cost model's window is the attention core
  only; identical whenever the exchange is shorter than the attention).
* DP (ZeRO 0-2): gradient all-reduce (ZeRO-0) or reduce-scatter (ZeRO-1), per layer, on
  stream 1 after that layer's backward of the last micro-batch; ZeRO-2 (sharded
  gradients) reduce-scatters after that layer's backward of *every* micro-batch and the
  compute stream waits for them at the end of each backward pass (FSDP
  ``SHARD_GRAD_OP``'s post-backward callback; the cost model's per-micro-batch
  ``max(0, rs - bwd_window)``); ZeRO-1/2 parameter all-gather per layer on stream 1 before that
  layer's first forward.
* ZeRO-3 / FSDP, per FSDP unit as the framework issues them (:mod:`dse.spec.frameworks`,
  the collectives of :func:`dse.graph.train.zero3_ops`, the schedule of
  :mod:`dse.train.zero3`): ``z3_units_per_layer`` unit all-gathers before each layer pass
  (stream 1; the root unit -- embedding, LM head -- before the micro-batch's first
  layer), each prefetch waiting for the compute two layer passes back (depth 1: one unit
  buffer ahead; depth 0: the previous pass), a copy-out per gathered unit on the compute
  stream where the framework copies (FSDP2, DeepSpeed); in backward the first unit is the
  one forward left gathered, with the root re-gathered in its place where the framework
  reshards it (``z3_root_regather_in_bwd``); per-unit gradient reduce-scatters after each
  layer's backward (stream 2; the root's after the micro-batch's last), every micro-batch
  or only the last (``z3_grad_sync_every_microbatch``); with ``pp > 1`` a framework that
  keeps the gathered parameters (``z3_regather_with_pp`` false) gathers once per step and
  reduces once.  So the trace runs exactly the model's per-step counts
  (``StepSchedule.zero3_calls``, a test).
* With CP the DP group is the dp x cp ranks of one TP coordinate: a "cp" collective on
  the full buffer plus a "dp" collective on ``1/cp`` of it (the hierarchical split).
  A MoE model's routed-expert parameters are their own bucket, reduced (and gathered)
  over the expert-data-parallel ranks (group_dim "edp", :class:`~dse.trace.graph.RankGrid`)
  in the bytes per element of the dense buffer -- the model's ``expert_dp`` ops
  (:func:`dse.graph.train.dp_bucket_ops`, Megatron-Core ``expert_parallel_buffers``).
* optimizer step (compute) after the last gradient collective.

Durations of communication nodes are the cost model's uncontended estimates; the
simulator recomputes them from the topology.  ``meta["comm_sm_fraction"]`` is the
cost model's share of SMs a collective takes from the compute it overlaps
(``NCCL_OVERLAP_SMS / num_sms``, at most 1/2); the simulator slows overlapped compute
by it.  Units: seconds, bytes, FLOPs.
"""

from __future__ import annotations

import jax.numpy as jnp

from dse.cost.collectives import comm_sm_fraction
from dse.errors import require
from dse.graph.ops import map_ops, time_s
from dse.graph.train import dp_bucket_ops, gather_bytes_per_param, main_grad_bytes
from dse.spec.frameworks import moe_a2a_overlap, profile
from dse.spec.hardware import Hardware
from dse.spec.layout import RECOMPUTE_NAMES, Layout, Workload
from dse.spec.layout_rules import FIELDS, check_layout
from dse.spec.model import Model
from dse.spec.numerics import as_float
from dse.host_eval import host_design_point
from dse.trace.graph import CollectiveKind, NodeKind, NodeTable, RankGrid, RankTrace, TraceSet
from dse.train.memory import embedding_params_per_gpu, head_stage_deficit, layers_per_stage
from dse.train.outer_ops import p2p_bytes
from dse.train.step import step_and_schedule

AR, RS, AG, A2A = (CollectiveKind.ALL_REDUCE, CollectiveKind.REDUCE_SCATTER,
                   CollectiveKind.ALL_GATHER, CollectiveKind.ALL_TO_ALL)


DP_KINDS = ("all_reduce", "reduce_scatter", "all_gather")
DP_DIMS = ("cp", "dp", "edp")    # dse.graph.train.dp_bucket_ops order
Z3_OPS = ("unit_ag", "unit_rs", "root_ag", "root_rs")    # dse.graph.train.zero3_ops order


def _costs(model: Model, wl: Workload, lay: Layout, hw: Hardware) -> dict:
    """Every duration the trace needs, as one traced program (run by
    :func:`dse.host_eval.host_call`: the jaxpr ``jax.jit`` would compile, evaluated
    without compiling): reductions of the step's operator graph
    (:func:`dse.graph.train.step_graph`, the same graph :func:`dse.train.step.train_step`
    reduces) and the times of its operators, the ops of one kind costed in one vector
    call (:func:`dse.graph.ops.map_ops`)."""
    model, wl, lay = as_float(model, wl, lay)      # the numerics boundary
    res, sched, g = step_and_schedule(model, wl, lay, hw)
    r = sched.rates
    lc, mem = sched.layer, sched.memory            # the step's own reduce_layer, memory
    op = {(o.name, o.phase): o for o in g.layer}
    cp_fwd = op[("cp kv exchange", "fwd")]
    P = mem.params_per_gpu
    L_st = layers_per_stage(model, lay)
    # one call of each communication op the trace issues, costed together
    units = {k: op[name, "fwd"].replace(calls=1.0) for k, name in (
        ("ep_a2a", "ep all-to-all"), ("tp_ar", "tp all-reduce"), ("tp_ag", "sp all-gather"),
        ("tp_rs", "sp reduce-scatter"))}
    # the DP buckets in the bytes of the step's dp / expert_dp ops (dse.graph.train.step_graph)
    Pe = mem.expert_params_per_gpu
    gb = main_grad_bytes(wl)
    pb = gather_bytes_per_param(wl, r.act_bytes, P - Pe, embedding_params_per_gpu(model, lay))
    pbe = gather_bytes_per_param(wl, r.act_bytes, Pe, 0.0)
    dp = {}
    for kind in DP_KINDS:
        dense = dp_bucket_ops(lay, P, L_st, kind, gb, pb, Pe)
        expert = dp_bucket_ops(lay, P, L_st, kind, gb, pbe, Pe)
        dp.update({(kind, "cp"): dense[0][1], (kind, "dp"): dense[1][1], (kind, "edp"): expert[2][1]})
    z3 = {(name, dim): o for name, o0 in zip(Z3_OPS, g.zero3[:4])
          for dim, o in _z3_steps(o0, lay)}
    comm = [cp_fwd, g.zero3[4], *units.values(), *dp.values(), *z3.values()]
    t = dict(zip(["cp", "copy_out", *units, *dp, *z3], map_ops(time_s, comm, hw, r)))
    # the step's DP buckets pay NCCL's protocol latency per call (dse.graph.train.dp_ops);
    # a layer's trace node carries its share of that latency beyond the alpha-beta hops
    # the simulator routes: the dense buffer's on the outer dp ring, the experts' on edp
    proto = [*g.dp, *g.expert_dp]
    # (none where NCCL's choice is cheaper than the replay's ring, e.g. a tree all-reduce:
    # the simulator's collectives are rings and a node's latency cannot be negative)
    excess = jnp.maximum(jnp.stack(map_ops(time_s, proto, hw, r))
                         - jnp.stack(map_ops(time_s, [o.replace(protocols=False) for o in proto], hw, r)),
                         0.0) / L_st
    zero = 0.0 * excess[0]          # a traced float32 zero: every leaf one dtype
    xlat = {(kind, dim): zero for kind in DP_KINDS for dim in DP_DIMS}
    for k, kind in enumerate(DP_KINDS):    # dp_ops / expert_dp_ops order: AR, RS, AG
        xlat[kind, "dp"], xlat[kind, "edp"] = excess[k], excess[len(DP_KINDS) + k]
    dp_steps = {kind: {dim: (dp[kind, dim].size_bytes * dp[kind, dim].calls, t[kind, dim],
                             xlat[kind, dim])
                       for dim in DP_DIMS} for kind in DP_KINDS}
    z3_steps = {name: {dim: (z3[name, dim].size_bytes * z3[name, dim].calls, t[name, dim])
                       for dim in ("cp", "dp")} for name in Z3_OPS}
    z3_steps["copy_out"] = t["copy_out"]
    o = sched.outer_s            # the outer groups' times, as the step summed them
    return dict(
        fwd=lc.fwd_compute_s, bwd=lc.bwd_compute_s, sel=lc.selective_recompute_s,
        cp_exchange=t["cp"], cp_bytes=cp_fwd.size_bytes * lay.cp,
        ep_a2a=t["ep_a2a"], a2a_bytes=op[("ep all-to-all", "fwd")].size_bytes,
        tp_ar=t["tp_ar"], tp_ag=t["tp_ag"], tp_rs=t["tp_rs"],
        act_bytes=op[("tp all-reduce", "fwd")].size_bytes,
        head_f=o["head_fwd"], head_b=o["head_bwd"], emb=o["embedding"], p2p=o["p2p"],
        p2p_bytes=p2p_bytes(g.p2p), optimizer=o["optimizer"], rc_frac=mem.recompute_fraction,
        accum=o["accumulation"], fwd_flops=lc.fwd_flops, bwd_flops=lc.bwd_flops,
        dp=dp_steps, z3=z3_steps, step_time_s=res.step_time_s, layers_per_stage=L_st)


def _host_costs(model: Model, wl: Workload, lay: Layout, hw: Hardware) -> dict:
    """:func:`_costs` of the design point on the host
    (:func:`dse.host_eval.host_design_point`: float32 hardware scalars, which saves a
    weak-to-strong conversion equation in ~300 of the README trace's ~4,800 equations).
    The result of the last design point is kept (the CLI asks twice)."""
    key = (model, wl, lay, hw)
    try:
        hit = _LAST.get(key)       # generate_trace_set, then model_step_time_s: run once
    except TypeError:              # array leaves: not hashable, not kept
        hit = key = None
    if hit is None:
        hit = host_design_point(_costs, model, wl, lay, hw)
        if key is not None:
            _LAST.clear()
            _LAST[key] = hit
    return hit


_LAST: dict = {}     # the last design point's costs (specs are frozen, hashable dataclasses)


def _z3_steps(op, lay: Layout) -> list:
    """``[(dim, op)]``: one call of a per-unit ZeRO-3 collective of
    :func:`dse.graph.train.zero3_ops` (over the ``dp x cp`` ranks of one TP coordinate) as
    the trace issues it: over the ``cp`` ranks on the whole buffer, then over the ``dp``
    groups on ``1/cp`` of it -- the split of :func:`dse.graph.train.dp_bucket_ops`; with
    ``cp == 1`` the "dp" step is the graph's op itself.  A reduce-scatter of a bucket
    spanning several units (``calls < 1``, DeepSpeed) is issued per unit with its share of
    the bucket's bytes (``size_bytes x calls``) and time (``time_s``)."""
    inner = op.replace(n=lay.cp * 1.0, group="cp")
    outer = op.replace(size_bytes=op.size_bytes / lay.cp, n=lay.dp * 1.0,
                       stride=lay.tp * lay.cp * 1.0, group="dp")
    return [("cp", inner), ("dp", outer)]


class _Builder:
    """Appends nodes to one role's :class:`~dse.trace.graph.NodeTable`: a node is its
    body (a shared prototype: kind, stream, duration, bytes, group ...), its name and its
    data dependencies (``None`` entries dropped, sorted, unique)."""

    def __init__(self):
        self.table = t = NodeTable()
        self.proto = t.proto
        self._body, self._names, self._deps = t.body.append, t.names.append, t.deps.append
        self.n = 0

    def add(self, name: str, body: int, deps=()) -> int:
        ds = [d for d in deps if d is not None]
        self._body(body)
        self._names(name)
        self._deps(sorted(set(ds)) if len(ds) > 1 else ds)
        self.n += 1
        return self.n - 1


def _int(x) -> int:
    return int(round(float(x)))


def chunk_layer_counts(pp: int, vpp: int, layers_per_rank: int, num_layers: int,
                       mtp_layers: int) -> list[list[int]]:
    """Decoder layers of each rank's model chunks, ``counts[rank][chunk]``, summing to
    ``num_layers``: the uneven split the cost model prices (:func:`dse.train.step.
    pipeline_stages`).  Every chunk starts at ``layers_per_rank / vpp``; with ``slack =
    pp x layers_per_rank - num_layers >= 1`` and ``pp > 1`` the LM head's rank gives up
    ``j`` = :func:`dse.train.memory.head_stage_deficit` layers (the loss counted as one
    layer, or with multi-token prediction all of the slack -- Megatron-Bridge's
    DeepSeek-V3 layout ``[E+8, 8 x 6, 5+mtp+L]`` at PP 8), from its last chunk backwards;
    the embedding's rank one more from its first chunk if slack is left; any slack still
    left comes off the middle ranks (from rank ``pp - 2`` down, then round the ranks), whose
    lighter stages never set the pace.  ``pp == 1``: every chunk full, the slack off the
    last chunks (one rank holds head and embedding)."""
    L_ch = layers_per_rank // vpp
    counts = [[L_ch] * vpp for _ in range(pp)]

    def take(rank: int, n: int, from_end: bool) -> int:
        """Remove up to ``n`` layers from ``rank``'s chunks; returns how many it took."""
        took = 0
        for c in (range(vpp - 1, -1, -1) if from_end else range(vpp)):
            k = min(n - took, counts[rank][c])
            counts[rank][c] -= k
            took += k
        return took

    slack = pp * layers_per_rank - num_layers
    if slack <= 0:
        return counts
    left = slack
    if pp > 1:
        j = int(round(float(head_stage_deficit(float(slack), float(mtp_layers), float(layers_per_rank)))))
        left -= take(pp - 1, j, True)           # j <= slack (head_stage_deficit)
        if left >= 1:
            left -= take(0, 1, False)
    order = list(range(pp - 2, 0, -1)) + list(range(pp - 1, -1, -1))
    while left > 0:
        before = left
        for rank in order:
            if left > 0:
                left -= take(rank, 1, True)
        if left == before:      # nothing left to take (cannot happen: slack < total)
            break
    return counts


def pipeline_order(pp: int, vpp: int, m: int, stage: int) -> list[tuple[bool, int, int]]:
    """Program order of stage ``stage``'s passes as ``(forward, micro_batch, chunk)``:
    1F1B for ``vpp == 1``, Megatron's interleaved 1F1B otherwise (module docstring;
    ``get_schedule_table`` and the warm-up count of
    ``forward_backward_pipelining_with_interleaving``, micro-batch group size ``pp``)."""
    if vpp == 1:
        warm = min(pp - stage - 1, m)
        order = [(True, mb, 0) for mb in range(warm)]
        for j in range(m - warm):
            order += [(True, warm + j, 0), (False, j, 0)]
        return order + [(False, mb, 0) for mb in range(m - warm, m)]
    total = m * vpp

    def chunk_mb(k: int, fwd: bool) -> tuple[int, int]:
        g, w = divmod(k, pp * vpp)
        c = w // pp
        return g * pp + w % pp, (c if fwd else vpp - 1 - c)

    warm = min((pp - stage - 1) * 2 + (vpp - 1) * pp, total)
    order = [(True, *chunk_mb(k, True)) for k in range(warm)]
    for j in range(total - warm):
        order += [(True, *chunk_mb(warm + j, True)), (False, *chunk_mb(j, False))]
    return order + [(False, *chunk_mb(k, False)) for k in range(max(total - warm, 0), total)]


def generate_trace_set(model: Model, wl: Workload, lay: Layout, hw: Hardware) -> TraceSet:
    """One training step of ``lay`` as a trace set (module docstring); roles
    ``stage<s>``, one per pipeline stage.  TP comm/GEMM overlap (``wl.tp_overlap``) is
    not represented in traces and is refused, as is the MoE 1F1B all-to-all overlap
    (``Workload.moe_a2a_overlap`` or the framework switch): the trace's EP all-to-alls
    run serially on stream 0."""
    require(not wl.tp_overlap, "trace", "tp_overlap",
            "must be off: traces keep TP collectives as their own nodes (drop --tp-overlap)")
    require(not (wl.moe_a2a_overlap or moe_a2a_overlap(wl.framework)), "trace", "moe_a2a_overlap",
            "must be off: traces keep the EP all-to-alls serial on the compute stream "
            "(the 1F1B A2A overlap of dse.train.moe_overlap is not expanded)")
    tp, pp, dp, cp, ep = (_int(lay.tp), _int(lay.pp), _int(lay.dp), _int(lay.cp), _int(lay.ep))
    mbs, zero, sp = _int(lay.mbs), _int(lay.zero), _int(lay.sp)
    selective = _int(lay.recompute) == 1
    raw = dict(_host_costs(model, wl, lay, hw))   # one program, host values
    dp_steps = {kind: [(dim, float(size), float(dur), float(lat)) for dim, (size, dur, lat) in steps.items()]
                for kind, steps in raw.pop("dp").items()}
    z3_raw = dict(raw.pop("z3"))
    z3_copy_s = float(z3_raw.pop("copy_out"))
    z3_steps = {name: [(dim, float(size), float(dur)) for dim, (size, dur) in steps.items()]
                for name, steps in z3_raw.items()}
    c = {k: float(v) for k, v in raw.items()}
    m = int(wl.global_batch) // (dp * mbs)
    L_st = _int(c["layers_per_stage"])   # the heaviest rank's layers
    moe = int(model.num_experts) > 1
    grid = RankGrid(tp=tp, cp=cp, dp=dp, pp=pp, ep=ep)

    sizes = {"cp": cp, "dp": dp, "edp": len(grid.group(0, "edp")) if moe else 1}

    def dp_colls(kind: str) -> list[tuple[str, str, float, float, float]]:
        """(dim, kind, bytes, duration, latency) steps of one layer's DP collective: the
        dense bucket over the dp x cp ranks, the experts' over the edp ranks
        (:func:`dse.graph.train.dp_bucket_ops`), each with its share of the protocol
        latency (:attr:`dse.trace.graph.TraceNode.latency_s`)."""
        steps = [(dim, kind, size, dur, lat) for dim, size, dur, lat in dp_steps[kind]
                 if sizes[dim] > 1 and size > 0]
        return steps[::-1] if kind == "all_gather" else steps

    has_dp = dp * cp > 1 or sizes["edp"] > 1
    vpp = _int(lay.vpp)
    # ZeRO-3 / FSDP schedule of the framework (dse.spec.frameworks, dse.train.zero3)
    prof = profile(int(wl.framework))
    z3 = zero >= 3 and has_dp
    z3_units = max(int(round(prof.z3_units_per_layer)), 1)
    z3_regather = pp == 1 or prof.z3_regather_with_pp
    z3_sync_every = prof.z3_grad_sync_every_microbatch and z3_regather
    z3_ahead = 2 if prof.z3_prefetch_depth >= 1 else 1
    check_layout(model, tp * pp * dp * cp, int(wl.global_batch), int(wl.seq_len),
                 Layout(**{f: _int(getattr(lay, f)) for f in FIELDS}),
                 where=f"layout tp={tp} pp={pp} dp={dp} vpp={vpp}", framework=int(wl.framework))
    # each rank's chunks under the uneven split the cost model prices (pipeline_stages)
    split = chunk_layer_counts(pp, vpp, L_st, _int(model.num_layers), _int(model.mtp_layers))
    # full: all layers; block: the first rc_layers/vpp layers of every chunk
    rc_per_chunk = int(round(c["rc_frac"] * L_st)) // vpp
    n_virt = pp * vpp
    roles: dict[str, RankTrace] = {}
    for s in range(pp):
        b = _Builder()
        # this rank's layers: chunk c holds layers starts[c] .. starts[c] + split[s][c] - 1
        starts = [sum(split[s][:c]) for c in range(vpp)]
        chunk = lambda c: range(starts[c], starts[c] + split[s][c])
        P = b.proto
        add = b.add
        last_s3 = None               # interleaved: last p2p SEND (stream 3)
        last_s4 = None               # interleaved: last p2p RECV (stream 4)
        last_s0 = None               # last node on stream 0
        last_s1 = None               # last node on stream 1 (DP param gathers)
        last_s2 = None               # last node on stream 2 (CP, ZeRO-3 grad RS)
        pre_ag: dict[int, int] = {}  # layer -> ZeRO-1/2 param all-gather node
        grad_nodes: list[int] = []
        # the role's node bodies (everything but id, name and deps)
        COMP = NodeKind.COMPUTE
        B_FWD = P(COMP, duration_s=c["fwd"], num_ops=c["fwd_flops"])
        B_BWD = P(COMP, duration_s=c["bwd"], num_ops=c["bwd_flops"])
        B_SEL = P(COMP, duration_s=c["sel"])
        B_WAIT = P(COMP, duration_s=0.0)
        B_EMB, B_HEAD_F, B_HEAD_B, B_ACCUM, B_OPT = (
            P(COMP, duration_s=c[k]) for k in ("emb", "head_f", "head_b", "accum", "optimizer"))
        coll = lambda kk, size, dur, dim, stream=0, lat=0.0: P(
            NodeKind.COLLECTIVE, stream=stream, comm_kind=kk, comm_bytes=size, duration_s=dur,
            group_dim=dim, latency_s=lat)
        if sp:
            tp_pair = ((coll(AG, c["act_bytes"], c["tp_ag"], "tp"), "tp all-gather"),
                       (coll(RS, c["act_bytes"], c["tp_rs"], "tp"), "tp reduce-scatter"))
        else:
            tp_pair = ((coll(AR, c["act_bytes"], c["tp_ar"], "tp"), "tp all-reduce"),)
        B_A2A = coll(A2A, c["a2a_bytes"], c["ep_a2a"], "ep")
        B_CP = coll(AG, c["cp_bytes"], c["cp_exchange"], "cp", 2)
        dp_bodies = {(kind, stream): [(dim, coll(CollectiveKind(k), size, dur, dim, stream, lat))
                                      for dim, k, size, dur, lat in dp_colls(kind)]
                     for kind in DP_KINDS for stream in (1, 2)}
        z3_bodies = {name: [(dim, coll(kk, size, dur, dim, stream))
                            for dim, size, dur in z3_steps[name][::-1 if kk is AG else 1]
                            if (dp if dim == "dp" else cp) > 1]
                     for name, kk, stream in (("unit_ag", AG, 1), ("root_ag", AG, 1),
                                              ("unit_rs", RS, 2), ("root_rs", RS, 2))}
        B_COPY = P(COMP, duration_s=z3_copy_s)
        passes: list[int] = []       # ZeRO-3: compute node of every layer pass, program order

        def s0(name, body, deps=()):
            nonlocal last_s0
            last_s0 = add(name, body, (last_s0, *deps))
            return last_s0

        def comm(name, kind, stream, deps=()):
            return chain(name, dp_bodies[kind, stream], stream, deps)

        def chain(name, steps, stream, deps=()):
            """One collective as its (cp, dp) steps on ``stream``, in stream order."""
            nonlocal last_s1, last_s2
            out = None
            for dim, body in steps:
                prev = last_s1 if stream == 1 else last_s2
                out = add(f"{name} {dim}", body, (prev, out, *deps))
                if stream == 1:
                    last_s1 = out
                else:
                    last_s2 = out
            return out

        def tp_colls(tag: str, n_pairs: int = 1):
            if tp == 1:
                return
            for _ in range(n_pairs):
                for body, nm in tp_pair:
                    s0(f"{tag} {nm}", body)

        def ep_colls(tag: str):
            if moe and ep > 1:
                s0(f"{tag} ep all-to-all dispatch", B_A2A)
                s0(f"{tag} ep all-to-all combine", B_A2A)

        def z3_gather(tag: str, root: bool, units: int):
            """ZeRO-3: the root unit's and/or this layer's units' parameter all-gathers on
            stream 1 (``units`` of the layer's units, its last ones), the first waiting for
            the compute of the layer pass ``z3_ahead`` back (prefetch depth 1: two
            buffers; depth 0: none ahead); the copy-out of each gathered unit (FSDP2,
            DeepSpeed) on the compute stream.  Returns the last gather."""
            j = len(passes)
            window = passes[j - z3_ahead] if j >= z3_ahead else None
            out = None
            if root:
                out = chain(f"{tag} root param all-gather", z3_bodies["root_ag"], 1, (window,))
                window = None
            for i in range(z3_units - units, z3_units):
                nm = f"{tag} param all-gather" + (f" u{i}" if z3_units > 1 else "")
                out = chain(nm, z3_bodies["unit_ag"], 1, (window,))
                window = None
                if z3_copy_s > 0:
                    s0(f"{nm} copy-out", B_COPY, (out,))
            return out

        def layer_pass(mb: int, k: int, bwd: bool, deps0=(), first=False, last=False,
                       ch=0):
            """One layer's forward or backward of micro-batch ``mb``; ``first``/``last``:
            the first/last layer of this chunk pass (chunk ``ch``)."""
            nonlocal last_s2
            tag = f"mb{mb} L{k} {'bwd' if bwd else 'fwd'}"
            deps = [d for d in deps0 if d is not None]
            if z3 and not bwd and (z3_regather or mb == 0):
                # forward: every unit (and, before the first layer of the micro-batch, the
                # root) gathered -- every micro-batch, or once per step if kept
                deps.append(z3_gather(tag, first and ch == 0, z3_units))
            elif z3 and bwd and z3_regather:
                # backward: the first unit is the last forward one -- kept, with the root
                # re-gathered instead (FSDP2), or re-gathered under the LM-head backward
                root = first and ch == vpp - 1 and prof.z3_root_regather_in_bwd
                deps.append(z3_gather(tag, root, z3_units - 1 if root else z3_units))
            elif not bwd and mb == 0 and k in pre_ag:
                deps.append(pre_ag[k])
            cp_node = None
            if cp > 1:
                n_ex = 2 if bwd else 1   # bwd moves K/V and dK/dV: 2x the forward exchange
                for _ in range(n_ex):
                    cp_node = last_s2 = add(f"{tag} cp kv exchange", B_CP,
                                            (last_s2, last_s0, *deps))
            if bwd and (k - starts[ch]) < rc_per_chunk:
                s0(f"{tag} recompute", B_FWD, deps)
                tp_colls(f"{tag} recompute", 2)
                ep_colls(f"{tag} recompute")
                deps = []
            elif bwd and selective and c["sel"] > 0:
                s0(f"{tag} selective recompute", B_SEL, deps)
                deps = []
            s0(tag, B_BWD if bwd else B_FWD, deps)
            tp_colls(tag, 2)
            ep_colls(tag)
            if cp_node is not None:
                s0(f"{tag} cp wait", B_WAIT, (cp_node,))
            if z3:
                passes.append(last_s0)
            if z3 and bwd and (z3_sync_every or mb == m - 1):
                # each unit's gradients reduce-scattered after its backward (every
                # micro-batch, or only the last: Megatron's no_sync), the root's last
                out = None
                for i in range(z3_units):
                    out = chain(f"{tag} grad reduce-scatter" + (f" u{i}" if z3_units > 1 else ""),
                                z3_bodies["unit_rs"], 2, (last_s0,))
                if last and ch == 0:
                    out = chain(f"{tag} root grad reduce-scatter", z3_bodies["root_rs"], 2,
                                (last_s0,))
                grad_nodes.append(out)
            elif not z3 and bwd and (mb == m - 1 or zero == 2) and has_dp:
                kind = "all_reduce" if zero == 0 else "reduce_scatter"
                grad_nodes.append(comm(f"{tag} grad {kind.replace('_', '-')}", kind, 1,
                                       (last_s0,)))

        def p2p(kind, name, delta, tag) -> int | None:
            """A pipeline SEND/RECV: blocking on stream 0 (1F1B), asynchronous on streams
            3 (send, after the producing pass) / 4 (recv, posted early) when interleaved."""
            nonlocal last_s3, last_s4
            stream = 0 if vpp == 1 else (3 if kind is NodeKind.SEND else 4)
            body = P(kind, stream=stream, comm_bytes=c["p2p_bytes"], duration_s=c["p2p"],
                     group_dim="pp", peer_delta=delta, tag=tag)
            if vpp == 1:
                s0(name, body)
                return None
            if kind is NodeKind.SEND:
                last_s3 = add(name, body, (last_s3, last_s0))
                return None
            last_s4 = add(name, body, (last_s4,))
            return last_s4

        def pass_p2p(v: int, act: bool, send: bool):
            """peer_delta and tag of the p2p of virtual stage ``v``: activations go to
            ``v + 1``, gradients to ``v - 1``; across a chunk boundary (last rank <->
            rank 0) the delta is ``-(pp - 1)`` / ``pp - 1`` and the tag +2."""
            to_next = act == send
            w = v + 1 if to_next else v - 1
            wrap = (w // pp) != (v // pp)
            delta = (w % pp) - (v % pp)
            return delta, (0 if act else 1) + (2 if wrap else 0)

        def forward(mb: int, ch: int):
            v = ch * pp + s
            tag_c = f" c{ch}" if vpp > 1 else ""
            dep = None
            if v > 0:
                d, t = pass_p2p(v, True, False)
                dep = p2p(NodeKind.RECV, f"mb{mb}{tag_c} recv act", d, t)
            if v == 0:
                s0(f"mb{mb} embedding", B_EMB, (dep,))
            for k in chunk(ch):
                layer_pass(mb, k, False, (dep,), k == chunk(ch)[0], k == chunk(ch)[-1], ch)
                dep = None
            if dep is not None:      # a chunk with no layers (uneven split): wait for the data
                s0(f"mb{mb}{tag_c} recv act wait", B_WAIT, (dep,))
            if v == n_virt - 1:
                s0(f"mb{mb} lm-head+loss", B_HEAD_F)
            else:
                d, t = pass_p2p(v, True, True)
                p2p(NodeKind.SEND, f"mb{mb}{tag_c} send act", d, t)

        def backward(mb: int, ch: int):
            v = ch * pp + s
            tag_c = f" c{ch}" if vpp > 1 else ""
            dep = None
            if v < n_virt - 1:
                d, t = pass_p2p(v, False, False)
                dep = p2p(NodeKind.RECV, f"mb{mb}{tag_c} recv grad", d, t)
            else:
                s0(f"mb{mb} lm-head bwd", B_HEAD_B)
            for k in reversed(chunk(ch)):
                layer_pass(mb, k, True, (dep,), k == chunk(ch)[-1], k == chunk(ch)[0], ch)
                dep = None
            if dep is not None:      # a chunk with no layers: wait for the gradient
                s0(f"mb{mb}{tag_c} recv grad wait", B_WAIT, (dep,))
            if ch == 0 and c["accum"] > 0:
                s0(f"mb{mb} grad accumulation", B_ACCUM)
            if zero == 2 and has_dp:
                # the compute stream waits for this pass's gradient reduce-scatters at the
                # end of backward (FSDP's post-backward callback, DeepSpeed's epilogue)
                s0(f"mb{mb}{tag_c} grad reduce-scatter wait", B_WAIT, (last_s1,))
            if v > 0:
                d, t = pass_p2p(v, False, True)
                p2p(NodeKind.SEND, f"mb{mb}{tag_c} send grad", d, t)

        # ZeRO-1/2: parameter all-gather (after last step's optimizer) overlapping mb 0
        if zero in (1, 2) and has_dp:
            for k in range(sum(split[s])):
                pre_ag[k] = comm(f"L{k} param all-gather", "all_gather", 1)
        for fwd, mb, ch in pipeline_order(pp, vpp, m, s):
            (forward if fwd else backward)(mb, ch)
        s0("optimizer step", B_OPT, grad_nodes)
        roles[f"stage{s}"] = RankTrace(rank=s * tp * cp * dp, table=b.table)

    rank_role = [f"stage{grid.coord(r, 'pp')}" for r in range(grid.size)]
    meta = {
        "model": str(model.name), "hardware": str(hw.name),
        "layout": (f"tp={tp} pp={pp} dp={dp} cp={cp} ep={ep} mbs={mbs} vpp={_int(lay.vpp)} "
                   f"recompute={RECOMPUTE_NAMES[_int(lay.recompute)]} zero={zero} sp={sp}"),
        "workload": f"global_batch={int(wl.global_batch)} seq_len={int(wl.seq_len)} "
                    f"precision={int(wl.precision)}",
        "micro_batches": str(m), "layers_per_stage": str(L_st),
        # SM share of a collective overlapping compute (dse.cost.collectives.overlapped_cost_s)
        "comm_sm_fraction": repr(comm_sm_fraction(float(hw.num_sms))),
        "schedule": (f"interleaved 1f1b (vpp={vpp}, async p2p)" if vpp > 1 else "1f1b"),
        "generator": "dse.trace.generate",
    }
    return TraceSet(roles=roles, rank_role=rank_role, meta=meta)


def model_step_time_s(model: Model, wl: Workload, lay: Layout, hw: Hardware) -> float:
    """The vectorized model's step time of the design point (``train_step(...).step_time_s``),
    from the same program that gives the trace its durations (traced once per process)."""
    return float(_host_costs(model, wl, lay, hw)["step_time_s"])


def rank_grid(lay: Layout) -> RankGrid:
    """The Megatron rank grid of ``lay`` (for the simulator)."""
    return RankGrid(tp=_int(lay.tp), cp=_int(lay.cp), dp=_int(lay.dp), pp=_int(lay.pp),
                    ep=_int(lay.ep))
