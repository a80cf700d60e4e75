"""Data-parallel gradient buckets (dse.graph.train.dp_ops / ddp_bucket_elems): one NCCL
call per bucket, each paying the protocol latency; the bucket size each framework uses."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.graph.ops import ddp_buckets, time_s
from dse.graph.train import ddp_bucket_elems, dp_ops
from dse.spec.layout import FRAMEWORK_DEEPSPEED, FRAMEWORK_MEGATRON, PRECISION_16, Layout
from dse.spec.numerics import as_float
from dse.cost.rates import rates
from tests.helpers import h100


def _lay(dp, cp=1, tp=1):
    return as_float(Layout(tp=tp, pp=1, dp=dp, cp=cp, ep=1, mbs=1, zero=1))


def test_bucket_sizes_follow_each_framework():
    """Megatron-Core: max(4e7, 1e6 x dp*cp) elements (the data-parallel size counts the
    context-parallel ranks); DeepSpeed: reduce_bucket_size 5e8 at every size."""
    assert float(ddp_bucket_elems(FRAMEWORK_MEGATRON, _lay(8))) == 4e7
    assert float(ddp_bucket_elems(FRAMEWORK_MEGATRON, _lay(128, cp=2))) == 256e6
    assert float(ddp_bucket_elems(FRAMEWORK_DEEPSPEED, _lay(1024))) == 5e8
    assert float(ddp_buckets(8e9, 256e6)) == 32.0
    assert float(ddp_buckets(1e6, 4e7)) == 1.0          # a small buffer is one call


def test_dp_ops_split_the_buffer_into_bucket_calls():
    ar, rs, ag = dp_ops(_lay(64), 4e9, grad_bytes=2.0, param_bytes=1.0, bucket_elems=1e8)
    for op, per in ((ar, 2.0), (rs, 2.0), (ag, 1.0)):
        assert float(op.calls) == 40.0 and op.protocols
        assert float(op.size_bytes * op.calls) == pytest.approx(per * 4e9)


def test_more_buckets_never_cost_less_and_latency_grows_with_ranks():
    """Splitting the same bytes into more calls adds latency, never bandwidth: the step
    pays at least the one-call time; and a bucket over more ranks pays more ring steps."""
    hw = h100()
    r = rates(hw, PRECISION_16)
    t = lambda dp, elems: float(time_s(dp_ops(_lay(dp), 8e9, 2.0, 2.0, elems)[1], hw, r))
    one, many = t(256, 1e12), t(256, 4e7)
    assert many > one
    assert t(256, 4e7) > t(64, 4e7) > t(16, 4e7)


@settings(max_examples=30, deadline=None)
@given(st.floats(1e6, 1e11), st.floats(1e6, 1e10), st.sampled_from([2, 8, 64, 512]))
def test_bucket_calls_carry_the_whole_buffer(params, bucket, dp):
    """calls x bytes per call = the buffer, for any size and bucket."""
    _, rs, ag = dp_ops(_lay(dp), params, 4.0, 2.0, bucket)
    assert float(rs.calls) >= 1.0
    assert float(rs.size_bytes * rs.calls) == pytest.approx(4.0 * params, rel=1e-5)
    assert float(ag.size_bytes * ag.calls) == pytest.approx(2.0 * params, rel=1e-5)
