"""The expert-parallel all-to-all under Megatron-Core's 1F1B A2A overlap
(``overlap_moe_expert_parallel_comm`` with ``delay_wgrad_compute``, as Megatron-Bridge's
``_set_moe_a2a_overlap_overrides`` sets them together): how much of one layer's dispatch
and combine stays on the critical path, as a reduction of the layer's operator graph.

Schedule (Megatron-Core ``megatron/core/pipeline_parallel/combined_1f1b.py``; per layer
``megatron/core/models/common/model_chunk_schedule_plan.py``
``TransformerLayerSchedulePlan.run``): the forward of micro-batch ``i+1`` and the backward
of micro-batch ``i`` run one layer pair at a time on two streams,

  comm stream:  combine_bwd      | dispatch_fwd -> dispatch_bwd        | combine_fwd
  comp stream:  pre_dispatch_fwd | mlp_bwd -> mlp_bwd_dw -> mlp_fwd     | pre_dispatch_bwd (+ its dw)

with each micro-batch's nodes serialised by the micro-batch's shared CUDA event
(``pipeline_parallel/utils.py`` ``ScheduleNode``): forward ``A_f -> D_f -> M_f -> C_f ->``
next layer's ``A_f``; backward ``C_b -> M_b -> D_b -> A_b ->`` next layer's ``C_b``; the
weight gradients (``backward_dw``, delayed) run on the compute stream without an event.
Here ``A`` is the pre-dispatch part (attention block, its TP collectives, router,
permutation), ``M`` the routed experts' GEMMs, ``D`` / ``C`` the dispatch and combine
(each half of the pass's EP collectives: the token all-to-all both ways, the
probabilities and the expert-TP gather on dispatch).  :func:`pair_period_s` runs that
event chain as a max-plus recurrence over a few layers and takes the steady-state period
per layer pair; the exposed EP time is the period less the compute stream's own work,
or the SM-sharing slowdown of the kernels beside the transfers if that is larger
(:func:`dse.cost.collectives.overlapped_cost_s`).

Not paired: the first forward and the last backward of the step (no pipelining), or the
first stage's warm-up forwards and cool-down backwards under the interleaved schedule,
``2 (pp - 1) + (vpp - 1) pp + 1`` virtual micro-batches (``schedules.py``
``get_pp_rank_microbatches``, plus the extra one the combined schedule adds): they keep
the serial all-to-all.  Megatron-Core refuses the overlap with full or block recompute,
and with ``pp > 1`` without a virtual pipeline (``transformer_config.py``
``__post_init__``); :func:`overlap_allowed` is that rule.  Whether a framework runs the
schedule is its profile's (:func:`dse.spec.frameworks.moe_a2a_overlap`).
"""

from __future__ import annotations

import jax.numpy as jnp

from dse.cost.collectives import comm_sm_fraction, overlapped_cost_s
from dse.graph.ops import Collective, Gemm, P2P, time_s

# the routed experts' GEMMs of dse.graph.moe (the mlp node of the schedule)
EXPERT_GEMMS = ("fc1", "fc2")
# layer pairs the recurrence runs before the period is read (it is periodic after two)
PAIR_ITERATIONS = 6


def pair_period_s(Af, Mf, Ab, Wa, Mb, Wm, Df, Cf, Db, Cb, n=PAIR_ITERATIONS):
    """Steady-state seconds per layer pair of the combined schedule (module docstring):
    compute-stream pieces ``Af`` (pre-dispatch forward), ``Mf`` (experts forward),
    ``Mb`` (experts dgrad), ``Wm`` (experts wgrad), ``Ab`` (pre-dispatch dgrad), ``Wa``
    (its wgrad); communication-stream pieces ``Df``, ``Cf``, ``Db``, ``Cb``."""
    tc = tm = rf = rb = 0.0
    ends = []
    for _ in range(n):
        eCb = jnp.maximum(tm, rb) + Cb
        tm = eCb
        eAf = jnp.maximum(tc, rf) + Af
        eMb = jnp.maximum(eAf, eCb) + Mb
        eDf = jnp.maximum(tm, eAf) + Df
        eWm = eMb + Wm
        eDb = jnp.maximum(eDf, eMb) + Db
        eMf = jnp.maximum(eWm, eDf) + Mf
        eCf = jnp.maximum(eDb, eMf) + Cf
        eAb = jnp.maximum(eMf, eDb) + Ab
        tc = eAb + Wa
        tm, rf, rb = eCf, eCf, eAb
        ends.append(jnp.maximum(tc, tm))
    return (ends[-1] - ends[1]) / (n - 2)


def overlap_allowed(model, lay, recompute_fraction):
    """Megatron-Core's conditions for the schedule (module docstring): a MoE model with
    ``ep > 1``, no full / block recompute, and ``pp == 1`` or a virtual pipeline."""
    return ((model.num_experts > 1) & (lay.ep > 1) & (recompute_fraction <= 0.0)
            & ((lay.pp == 1) | (lay.vpp > 1)))


def unpaired_share(lay, m):
    """Share of a rank's forward (and backward) layer passes that run unpaired (module
    docstring): ``1/m`` without pipelining, ``(2 (pp-1) + (vpp-1) pp + 1) / (m vpp)``
    under the interleaved schedule."""
    w = jnp.where(lay.pp > 1, 2.0 * (lay.pp - 1.0) + (lay.vpp - 1.0) * lay.pp + 1.0, 1.0)
    return jnp.minimum(w / (m * lay.vpp), 1.0)


def paired_ep_exposed_s(ops, lc, hw, r, selective_s=0.0):
    """Exposed EP seconds of one layer's forward + backward when paired in the combined
    schedule, from the layer's operator list ``ops`` and its
    :class:`dse.train.layer.LayerCost` ``lc`` (host stalls spread over the pass's
    compute pro rata, the TP collectives on the compute stream)."""
    t = lambda cond: _sum(time_s(op, hw, r) for op in ops if cond(op))
    gemm = lambda op: isinstance(op, Gemm)
    base = lambda op: op.name.split(" ")[0]
    Mf_raw = t(lambda op: gemm(op) and op.phase == "fwd" and op.name in EXPERT_GEMMS)
    Mb_raw = t(lambda op: gemm(op) and op.phase == "bwd" and base(op) in EXPERT_GEMMS
               and op.name.endswith("dgrad"))
    Wm_raw = t(lambda op: gemm(op) and op.phase == "bwd" and base(op) in EXPERT_GEMMS
               and op.name.endswith("wgrad"))
    Wa_raw = t(lambda op: gemm(op) and op.phase == "bwd" and base(op) not in EXPERT_GEMMS
               and op.name.endswith("wgrad"))
    ep = lambda phase: t(lambda op: isinstance(op, (Collective, P2P)) and op.group == "ep"
                         and op.phase == phase)
    ep_f, ep_b = ep("fwd"), ep("bwd")
    fwd_raw = lc.fwd_compute_s - lc.host_stall_fwd_s
    bwd_raw = lc.bwd_compute_s - lc.host_stall_bwd_s
    safe = lambda x: jnp.where(x > 0, x, 1.0)
    sf, sb = lc.fwd_compute_s / safe(fwd_raw), lc.bwd_compute_s / safe(bwd_raw)
    tp_f = tp_b = 0.5 * lc.tp_exposed_s
    Mf, Mb, Wm, Wa = sf * Mf_raw, sb * Mb_raw, sb * Wm_raw, sb * Wa_raw
    Af = lc.fwd_compute_s - Mf + tp_f
    Ab = lc.bwd_compute_s - Mb - Wm - Wa + tp_b + selective_s
    period = pair_period_s(Af, Mf, Ab, Wa, Mb, Wm, 0.5 * ep_f, 0.5 * ep_f, 0.5 * ep_b, 0.5 * ep_b)
    stream = Af + Mf + Ab + Wa + Mb + Wm
    return overlapped_cost_s(ep_f + ep_b, stream, fwd_raw + bwd_raw, comm_sm_fraction(hw.num_sms),
                             exposed_s=jnp.maximum(period - stream, 0.0))


def _sum(xs):
    out = 0.0
    for x in xs:
        out = out + x
    return out
