"""ZeRO-3 / FSDP communication per step, unit by unit: a reduction of the per-unit
collectives of :func:`dse.graph.train.zero3_ops` under the framework's schedule
(:mod:`dse.spec.frameworks`).

Each micro-batch on one GPU of the heaviest stage runs ``N = units_per_layer x L_st``
units.  With ``g``, ``r`` the all-gather and reduce-scatter of one unit (alpha-beta at the
unit's message size, flat-ring latency across nodes: :mod:`dse.cost.collectives`),
``g0``, ``r0`` those of the root unit (embedding, LM head), ``cf``, ``cb`` one unit's
forward and backward (+ recompute, + exposed CP) compute, ``of``, ``ob`` the exposed TP /
EP collectives the compute stream runs beside them, ``ov`` the SM-sharing overlap below
(:func:`dse.cost.collectives.overlapped_cost_s`), and at least one unit
prefetched (``depth >= 1``; FSDP1's rate limiter, FSDP2's implicit prefetch, Megatron-FSDP's
double buffer, DeepSpeed's prefetch bucket), what stays on the critical path is

  forward   g0 + g + (N-1) * ov(g, cf + of, cf)
            (the root and the first block are gathered before any compute; each later
            gather hides under the previous unit's forward unless it is slower)
  backward  g_first + (N-1) * ov(g + r, cb + ob, cb) + r + r0
            (the first backward unit's gather -- the root's under FSDP2, which reshards
            it after forward, or the last block's hidden under the LM-head backward --
            then each unit's backward hides the next gather and the previous
            reduce-scatter, both on the same links; the last block's and the root's
            reduce-scatters have nothing left to hide under)

With ``depth = 0`` nothing is prefetched: every gather is exposed (the windows are 0).
A larger depth cannot make a uniform chain faster than one ahead (steady state: the
slower of the comm stream and the compute stream sets the pace), so depth >= 1 is one
case.  Micro-batches: parameters are re-gathered in every micro-batch's forward and
backward, gradients reduce-scattered in every micro-batch (FSDP, DeepSpeed) or only the
last (Megatron-Core's ``no_sync_func``); with PP, FSDP2 (torchtitan) keeps the gathered
parameters for the whole step and reduces once (``reshard_after_forward=False``).

SM interference, per unit (the mechanism :mod:`dse.sim.engine` replays): a collective
holds its NCCL thread blocks, ``f = min(NCCL_OVERLAP_SMS / num_sms, 1/2)`` of the SMs
(:func:`dse.cost.collectives.comm_sm_fraction`), for as long as it transfers, so the
compute kernels beside it run at ``1 - f``; the collective itself runs at link speed (its blocks stay resident).
The frameworks issue the unit collectives on their own streams, beside everything the
compute stream runs -- kernels and the compute stream's own (TP, EP) collectives
(PyTorch FSDP1 ``_unshard_stream`` / ``_post_backward_stream``,
``torch/distributed/fsdp/_runtime_utils.py`` ``_init_streams``; FSDP2
``all_gather_stream`` / ``reduce_scatter_stream``, ``FSDPCommContext`` in
``_fsdp_param_group.py``; DeepSpeed's ``__allgather_stream``,
``deepspeed/runtime/zero/partitioned_param_coordinator.py``, and
``__reduce_and_partition_stream``, ``deepspeed/runtime/zero/stage3.py``).  A collective
of ``c`` seconds issued at the start of a pass whose compute stream runs ``w`` seconds,
``k`` of them kernels (first) and the rest its own collectives, ends the pass at ``max(c, w + f min(c, k / (1 - f)))``: its cost beyond the pass is

  ``max(c - w, f min(c, k / (1 - f)))``   (:func:`dse.cost.collectives.overlapped_cost_s`)

-- the slowed kernels show only when they outlast the collective, so a gather-bound
chain costs exactly its gathers plus what has nothing beside it (not ``c - w + f w``:
the compute slowed under a slower gather is off the critical path), and the time the
compute stream spends in its own collectives hides the gather without losing SMs.  A
backward unit's gather and the previous unit's reduce-scatter run on the same links, one
after the other in link time: ``c = g + r``.  A segment with nothing beside it (the
first gathers of a pass, the last reduce-scatters) is exposed in full.  The step's cost
is never below the bound any schedule obeys, ``max(raw - W, f raw - O)`` with ``W`` the
compute stream's time beside the collectives and ``O`` its non-kernel part (the links
carry ``raw`` seconds; while they do, kernels run at most at ``1 - f``).
"""

from __future__ import annotations

import jax.numpy as jnp

from dse.cost.collectives import comm_sm_fraction, overlapped_cost_s
from dse.graph.ops import time_s
from dse.spec.frameworks import profile


def zero3_counts(n_units, m, *, regather, sync_every, root_regather):
    """How often each collective of :func:`dse.graph.train.zero3_ops` runs in one step:
    ``(unit all-gathers, unit reduce-scatters, root all-gathers, root reduce-scatters)``.
    Re-gathering: every unit and the root in each forward; in each backward ``N - 1``
    units plus the first one (the root's re-gather, or the last block's)."""
    n_rs = m if sync_every else 1.0
    if regather:
        return (m * (2.0 * n_units - 1.0 + (0.0 if root_regather else 1.0)), n_rs * n_units,
                m * (2.0 if root_regather else 1.0), n_rs)
    return n_units, n_rs * n_units, 1.0, n_rs


def zero3_exposed_s(g, r, g0, r0, cf, cb, head_bwd, n_units, m, depth, *, regather, sync_every,
                    root_regather, num_sms, of=0.0, ob=0.0):
    """``(critical-path seconds, raw seconds)`` per step of the ZeRO-3 collectives (module
    docstring).  ``cf`` / ``cb``: one unit's forward / backward kernels; ``of`` / ``ob``:
    the collectives the compute stream runs beside them (exposed TP / EP); ``head_bwd``:
    the LM-head backward.  ``regather``: parameters re-gathered every micro-batch (else
    once per step, kept); ``sync_every``: gradients reduce-scattered every micro-batch
    (else once)."""
    f = comm_sm_fraction(num_sms)
    on = 1.0 if depth >= 1 else 0.0
    cf, cb, head_bwd, of, ob = on * cf, on * cb, on * head_bwd, on * of, on * ob
    fwd = g0 + g + (n_units - 1.0) * overlapped_cost_s(g, cf + of, cf, f)
    g_first = g0 if root_regather else overlapped_cost_s(g, head_bwd, head_bwd, f)

    def bwd(gather, rs):
        c = (g if gather else 0.0) + (r if rs else 0.0)
        first = g_first if gather else 0.0
        return (first + (n_units - 1.0) * overlapped_cost_s(c, cb + ob, cb, f)
                + ((r + r0) if rs else 0.0))

    n_rs = m if sync_every else 1.0
    if regather:
        cost = m * fwd + n_rs * bwd(True, True) + (m - n_rs) * bwd(True, False)
    else:
        cost = fwd + n_rs * bwd(False, True)
    c = zero3_counts(n_units, m, regather=regather, sync_every=sync_every, root_regather=root_regather)
    raw = c[0] * g + c[1] * r + c[2] * g0 + c[3] * r0
    window = m * n_units * (cf + cb + of + ob)
    bound = jnp.maximum(jnp.maximum(raw - window, f * raw - m * n_units * (of + ob)), 0.0)
    return jnp.maximum(jnp.minimum(cost, raw), bound), raw


def zero3_step_s(graph_zero3, wl, lay, hw, r, layer_fwd_s, layer_bwd_s, head_bwd_s, L_st, m, *,
                 fwd_other_s=0.0, bwd_other_s=0.0):
    """``(critical-path seconds, raw seconds, counts)`` of one step's ZeRO-3 / FSDP
    collectives on the heaviest stage: ``layer_fwd_s`` / ``layer_bwd_s`` one layer's
    forward and backward kernels for one micro-batch, ``fwd_other_s`` / ``bwd_other_s``
    the collectives the compute stream runs beside them (exposed TP / EP); ``counts``
    how often each op of ``graph_zero3`` runs (the per-operator table's multipliers).  FSDP2's copy-out of each
    gathered unit runs on the compute stream: charged in full, once per unit gather, and
    counted in the raw seconds."""
    prof = profile(wl.framework)
    ag, rs, ag0, rs0, copy_out = graph_zero3
    u = prof.z3_units_per_layer
    g, rr, g0, r0 = (time_s(op, hw, r) for op in (ag, rs, ag0, rs0))
    pp1 = lay.pp <= 1
    # with pp > 1 a framework that keeps the gathered parameters gathers and reduces once
    regather_pp = prof.z3_regather_with_pp
    sync = prof.z3_grad_sync_every_microbatch
    common = dict(depth=prof.z3_prefetch_depth, root_regather=prof.z3_root_regather_in_bwd,
                  num_sms=hw.num_sms)
    n_units = u * L_st
    args = (g, rr, g0, r0, layer_fwd_s / u, layer_bwd_s / u, head_bwd_s, n_units, m)
    common.update(of=fwd_other_s / u, ob=bwd_other_s / u)
    cost1, raw1 = zero3_exposed_s(*args, regather=True, sync_every=sync, **common)
    cost2, raw2 = zero3_exposed_s(*args, regather=regather_pp, sync_every=sync and regather_pp, **common)
    c1 = zero3_counts(n_units, m, regather=True, sync_every=sync, root_regather=common["root_regather"])
    c2 = zero3_counts(n_units, m, regather=regather_pp, sync_every=sync and regather_pp,
                      root_regather=common["root_regather"])
    counts = tuple(jnp.where(pp1, a, b) for a, b in zip(c1, c2))
    counts = counts + (counts[0],)            # one copy-out per unit gather
    copy = counts[4] * time_s(copy_out, hw, r)
    cost = jnp.where(pp1, cost1, cost2) + copy
    raw = jnp.where(pp1, raw1, raw2) + copy
    return cost, raw, counts
