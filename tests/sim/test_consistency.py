"""The simulator and the vectorized model agree on healthy, uncontended steps.

With no faults and no other jobs, replaying the generated trace of a layout on a
topology that matches the hardware (NVLink switch domains of 8 x rail scale-out at the
cost model's effective NVLink / NIC bandwidths) must reproduce ``train_step``'s step
time within 5 % -- for the top layouts of Llama3-70B on 64 A100s, for pipelined
layouts (1F1B bubble, p2p, ZeRO-1 / ZeRO-0 gradient reduction, full recompute) and for
interleaved ones (Megatron's interleaved 1F1B, asynchronous p2p).

The replay carries the cost model's SM interference (a collective overlapping compute
takes ``comm_sm_fraction`` of the SMs, written into the trace's meta by the generator).

Interleaved layouts replay 0.7-3 % *faster* than ``train_step`` here: the simulated
schedule hides more of the DP gradient reduction / parameter all-gather than the
vectorized model's 1F1B windows (``bwd_window = L_st * bwd``) credit -- with ``vpp``
chunks the reduction of chunk ``c`` overlaps the ``c * pp`` chunk backwards after it, so
the exposed reduction is ``max(0, (rs - W) / vpp, rs - (1 + (vpp-1) pp) / vpp * W)``
rather than ``max(0, rs - W)`` (same for the all-gather with the forward window).  With
that term the two agree within 1.5 % (``test_interleaved_dp_window``, which fails until
dse/train/step.py uses it).

ZeRO-3 / FSDP layouts (pure DP and with TP, Llama3-8B and 70B, every framework profile)
replay the per-unit gathers and reduce-scatters of :mod:`dse.train.zero3` on streams 1
and 2.  Both tiers charge SM interference by the same mechanism -- compute at ``1 - f``
while a collective transfers, the collective at link speed -- so a gather-bound chain
costs its gathers and nothing more, and the compute stream's own TP collectives hide a
gather too.  (Charging ``f x hidden`` on top of the exposed gathers made the model 9-13 %
slower than the replay on gather-bound layouts such as tp=8 x dp=8.)  What the replay
still does that the model does not, each worth about 1-2 % here and so the replay runs
up to ~3.5 % faster: it lets a concurrent backward gather and reduce-scatter overlap
their inter-node and intra-node phases (the hierarchical split) on disjoint links, where
the model adds them in link time; and the trace prefetches the next micro-batch's root
gather under the previous backward's last layers.
"""

from __future__ import annotations

import pytest

from dse.host_eval import host_design_point
from dse.sim import simulate
from dse.spec.hardware import get_hardware
from dse.spec.layout import RECOMPUTE, Layout, Workload
from dse.spec.model import get_model
from dse.sweep.run import sweep
from dse.sim.topology import topology_for_hardware
from dse.trace.generate import generate_trace_set, rank_grid
from dse.train.step import train_step

GPUS, GBS, SEQ = 64, 128, 2048
HW = get_hardware("a100-sxm-80gb")
MODEL = get_model("llama3-70b")
TOPO = topology_for_hardware(HW, GPUS)


def _layout(r) -> Layout:
    return Layout(tp=int(r.tp), pp=int(r.pp), dp=int(r.dp), cp=int(r.cp), ep=int(r.ep),
                  mbs=int(r.mbs), vpp=int(r.vpp), recompute=RECOMPUTE[r.recompute],
                  zero=int(r.zero), sp=int(bool(r.sp)))


def _top3():
    df = sweep(MODEL, [HW], GPUS, GBS, SEQ)
    return [_layout(r) for r in df[df.feasible].head(3).itertuples()]


def _check(lay: Layout, gbs: int, rel: float = 0.05, model=MODEL, framework: int = 0):
    wl = Workload(global_batch=gbs, seq_len=SEQ, framework=framework)
    vec = float(host_design_point(train_step, model, wl, lay, HW).step_time_s)
    gpus = lay.tp * lay.pp * lay.dp * lay.cp
    topo = TOPO if gpus == GPUS else topology_for_hardware(HW, gpus)
    res = simulate(generate_trace_set(model, wl, lay, HW), topo, grid=rank_grid(lay),
                   record_timeline=False)
    assert res.blocked is None
    assert res.step_time_s == pytest.approx(vec, rel=rel), (lay, res.step_time_s, vec)
    return res.step_time_s / vec


def test_top3_layouts_agree_within_5_percent():
    for lay in _top3():
        _check(lay, GBS)


@pytest.mark.parametrize("lay", [
    Layout(tp=8, pp=4, dp=2, mbs=1, zero=1, sp=1),
    Layout(tp=4, pp=2, dp=8, mbs=1, zero=0, recompute=2),
    Layout(tp=2, pp=4, dp=8, mbs=2, zero=1, sp=1, recompute=3),   # block: some layers recomputed
])
def test_pipelined_layouts_agree_within_5_percent(lay):
    _check(lay, 64)


@pytest.mark.parametrize("lay,gbs", [
    (Layout(tp=4, pp=2, dp=8, mbs=1, vpp=4, zero=1, sp=1), 128),
    (Layout(tp=8, pp=4, dp=2, mbs=1, vpp=5, zero=1, sp=1), 64),
])
def test_interleaved_layouts_agree_within_5_percent(lay, gbs):
    _check(lay, gbs)


MEGATRON, DEEPSPEED, FSDP, FSDP2 = 0, 1, 2, 3     # dse.spec.layout.FRAMEWORK


@pytest.mark.parametrize("model,lay,gbs,fw", [
    # pure data parallel, ZeRO-3 / FSDP
    ("llama3-8b", Layout(tp=1, pp=1, dp=64, mbs=1, zero=3), 128, MEGATRON),
    ("llama3-8b", Layout(tp=1, pp=1, dp=64, mbs=1, zero=3), 128, FSDP2),
    ("llama3-70b", Layout(tp=1, pp=1, dp=64, mbs=1, zero=3, recompute=2), 128, FSDP),
    # ZeRO-3 with TP (gather-bound: tp=8 x dp=8 over the NICs), with PP, on 32 GPUs
    ("llama3-70b", Layout(tp=8, pp=1, dp=8, mbs=1, zero=3, sp=1), 128, MEGATRON),
    ("llama3-70b", Layout(tp=4, pp=1, dp=16, mbs=1, zero=3, sp=1, recompute=2), 128, DEEPSPEED),
    ("llama3-70b", Layout(tp=4, pp=2, dp=8, mbs=1, zero=3, sp=1), 128, FSDP2),
    ("llama3-8b", Layout(tp=2, pp=1, dp=16, mbs=1, zero=3, sp=1), 64, MEGATRON),
])
def test_zero3_layouts_agree_within_5_percent(model, lay, gbs, fw):
    _check(lay, gbs, model=get_model(model), framework=fw)


def test_deepspeed_framework_agrees_within_5_percent():
    """DeepSpeed's full-tensor pipeline sends and per-micro-batch accumulation pass."""
    lay = Layout(tp=8, pp=4, dp=2, mbs=1, zero=1, sp=1)
    wl = Workload(global_batch=64, seq_len=SEQ, framework=1)
    vec = float(host_design_point(train_step, MODEL, wl, lay, HW).step_time_s)
    res = simulate(generate_trace_set(MODEL, wl, lay, HW), TOPO, grid=rank_grid(lay), record_timeline=False)
    assert res.step_time_s == pytest.approx(vec, rel=0.05)


def test_tp_overlap_is_refused_by_the_trace_generator():
    from dse.errors import InputError
    with pytest.raises(InputError, match="tp_overlap"):
        generate_trace_set(MODEL, Workload(global_batch=64, seq_len=SEQ, tp_overlap=1),
                           Layout(tp=8, pp=4, dp=2, mbs=1, zero=1, sp=1), HW)


@pytest.mark.parametrize("model,lay,gbs", [
    # one micro-batch per GPU: the gradient reduction (+ the ZeRO-1 parameter gather) over
    # the NICs takes longer than the backward (forward) it overlaps -- reduction-bound
    ("llama3-70b", Layout(tp=8, pp=1, dp=8, mbs=1, zero=1, sp=1), 8),
    ("llama3-8b", Layout(tp=2, pp=1, dp=32, mbs=1, zero=0, sp=1), 32),
    ("llama3-70b", Layout(tp=8, pp=2, dp=4, mbs=1, vpp=5, zero=0, sp=1), 8),
])
def test_dp_reduction_bound_layouts_agree_within_5_percent(model, lay, gbs):
    """A reduction slower than its window costs its exposed part, not ``exposed + f x
    hidden`` (dse.cost.collectives.overlapped_cost_s): the replay, which slows compute
    while a collective transfers, agrees (replay / model 0.97, 1.00, 0.985); with the
    old charge the model was 7.6 %, 3.7 % and 4.7 % slower than the replay."""
    _check(lay, gbs, model=get_model(model))


def test_interleaved_dp_window():
    """Chunk-wise DP overlap under interleaving (dse.cost.collectives.interleaved_overlap_cost_s)."""
    ratio = _check(Layout(tp=4, pp=2, dp=8, mbs=1, vpp=8, zero=0, recompute=2), 64, rel=0.02)
    assert ratio == pytest.approx(1.0, abs=0.02)
