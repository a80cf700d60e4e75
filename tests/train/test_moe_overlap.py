"""The MoE 1F1B A2A overlap (dse.train.moe_overlap): the two-stream event chain of
Megatron-Core's combined schedule, the rule for where it is allowed, and the framework
switch (off by default, as in Megatron-Core and Megatron-Bridge's recipe base)."""

import pytest

import dse.spec.frameworks as F
from dse.spec.layout import PRECISION_FP8, Layout, Workload
from dse.spec.model import get_model
from dse.spec.numerics import as_float
from dse.train.moe_overlap import overlap_allowed, pair_period_s, unpaired_share
from dse.train.step import train_step
from dse.train.memory import memory_per_gpu
from tests.helpers import h100

PIECES = dict(Af=1.0, Mf=0.5, Ab=1.5, Wa=0.3, Mb=0.4, Wm=0.4)


def test_no_communication_leaves_the_compute_stream():
    assert float(pair_period_s(**PIECES, Df=0.0, Cf=0.0, Db=0.0, Cb=0.0)) == pytest.approx(sum(PIECES.values()))


def test_slow_communication_sets_the_pace_of_the_comm_stream():
    """All-to-alls far slower than the compute: the period is the comm stream's work."""
    p = float(pair_period_s(**PIECES, Df=10.0, Cf=10.0, Db=10.0, Cb=10.0))
    assert p == pytest.approx(40.0, rel=1e-6)


@pytest.mark.parametrize("c", [0.1, 0.5, 1.0, 2.0])
def test_overlap_is_between_the_bounds(c):
    """max(compute, comm) <= period <= compute + comm (the serial schedule)."""
    K = sum(PIECES.values())
    p = float(pair_period_s(**PIECES, Df=c, Cf=c, Db=c, Cb=c))
    assert max(K, 4 * c) * (1 - 1e-5) <= p <= (K + 4 * c) * (1 + 1e-5)


def test_allowed_where_megatron_allows_it():
    m = as_float(get_model("qwen3-235b-a22b"))
    lay = lambda **k: as_float(Layout(**{**dict(tp=2, pp=8, dp=16, ep=32, vpp=4, mbs=1, sp=1, zero=1), **k}))
    assert bool(overlap_allowed(m, lay(), 0.0))
    assert not bool(overlap_allowed(m, lay(vpp=1), 0.0))        # pp > 1 needs a virtual pipeline
    assert not bool(overlap_allowed(m, lay(), 1.0))             # full recompute
    assert not bool(overlap_allowed(m, lay(ep=1), 0.0))
    assert not bool(overlap_allowed(as_float(get_model("llama3-8b")), lay(ep=1), 0.0))
    assert float(unpaired_share(as_float(Layout(pp=1, vpp=1)), 8.0)) == pytest.approx(1 / 8)
    assert float(unpaired_share(lay(), 512.0)) == pytest.approx((14 + 24 + 1) / 2048)


@pytest.fixture
def overlap_on():
    old = dict(F.MOE_A2A_OVERLAP)
    F.MOE_A2A_OVERLAP[0] = True
    yield
    F.MOE_A2A_OVERLAP.clear()
    F.MOE_A2A_OVERLAP.update(old)


def _qwen235_h100():
    return as_float(get_model("qwen3-235b-a22b"), Workload(global_batch=2048, seq_len=4096, precision=PRECISION_FP8),
                    Layout(tp=2, pp=8, dp=16, ep=32, vpp=4, mbs=1, sp=1, zero=1))


def test_default_is_serial():
    assert F.moe_a2a_overlap(0) is False and F.moe_a2a_overlap(1) is False


def test_switch_hides_part_of_the_all_to_all_and_never_slows_the_step(overlap_on):
    """Qwen3-235B on 256 H100 (the Megatron-Bridge recipe that sets moe_a2a_overlap):
    the exposed EP time drops but stays above comm - compute; a dense model is untouched."""
    m, wl, lay = _qwen235_h100()
    hw = h100()
    on = train_step(m, wl, lay, hw)
    F.MOE_A2A_OVERLAP[0] = False
    off = train_step(m, wl, lay, hw)
    assert float(on.ep_comm_s) < 0.8 * float(off.ep_comm_s)
    assert float(on.step_time_s) < float(off.step_time_s)
    assert float(on.ep_comm_s) >= float(off.ep_comm_s) - float(off.compute_s) - 1e-6
    d, wd, ld = as_float(get_model("llama3-8b"), Workload(global_batch=64, seq_len=4096),
                         Layout(tp=1, pp=1, dp=8, mbs=1, zero=1))
    base = float(train_step(d, wd, ld, hw).step_time_s)
    F.MOE_A2A_OVERLAP[0] = True
    assert float(train_step(d, wd, ld, hw).step_time_s) == base


def test_switch_keeps_one_more_micro_batch_of_activations(overlap_on):
    m, wl, lay = _qwen235_h100()
    on = memory_per_gpu(m, wl, lay, 2.0)
    F.MOE_A2A_OVERLAP[0] = False
    off = memory_per_gpu(m, wl, lay, 2.0)
    assert float(on.activations_bytes) > float(off.activations_bytes)
    assert float(on.optimizer_bytes) == float(off.optimizer_bytes)
