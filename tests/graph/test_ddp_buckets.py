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


def test_a_stated_bucket_size_replaces_the_framework_rule():
    """``Workload.ddp_bucket_elems`` (Megatron-Core ``--ddp-bucket-size``, the predict column
    ``ddp_bucket_size``) replaces the default rule; 0 keeps it."""
    lay = _lay(128, cp=2)
    assert float(ddp_bucket_elems(FRAMEWORK_MEGATRON, lay, 768_000_000)) == 768e6
    assert float(ddp_bucket_elems(FRAMEWORK_MEGATRON, lay, 0)) == 256e6


@pytest.mark.parametrize("bad", ["-5", "abc", "1e30", "2.5", "inf", "nan", True, 0])
def test_bucket_size_input_is_a_whole_positive_number(bad):
    from dse.errors import InputError
    from dse.spec.layout import ddp_bucket_code
    with pytest.raises(InputError, match="ddp_bucket_size"):
        ddp_bucket_code(bad, "runs.csv row 3")
    assert ddp_bucket_code(None) == 0 and ddp_bucket_code(" ") == 0
    assert ddp_bucket_code("768000000") == 768_000_000 and ddp_bucket_code(4e7) == 40_000_000


def test_predict_reads_the_bucket_column_and_names_a_bad_cell():
    """A row's ``ddp_bucket_size`` moves its DP collectives' call count (fewer, larger
    buckets: less protocol latency, never a slower step); a bad cell gets that row a status
    naming the column, the other rows their predictions."""
    import pandas as pd
    from dse.predict import predict_frame
    row = dict(id=1, model="GPT 7.5B", num_layers=36, hidden_size=4096, ffn_hidden_size=16384,
               num_attention_heads=32, num_kv_heads=32, vocab_size=51200, seq_length=2048,
               global_batch_size=512, micro_batch_size=1, gpu="h100-sxm-80gb", num_gpus=256, tp=1,
               pp=1, dp=256, cp=1, ep=1, vpp=1, sequence_parallel="false", recompute="full",
               zero_stage=1, precision="bf16", measured_iter_time_s=3.0)
    rows = [row, dict(row, id=2, ddp_bucket_size=2_000_000_000), dict(row, id=3, ddp_bucket_size="-1")]
    p = predict_frame(pd.DataFrame(rows), "runs.csv", intervals=False)
    assert p.status[0] == "ok" and p.status[1] == "ok"
    assert p.predicted_iter_time_s[1] <= p.predicted_iter_time_s[0]
    assert str(p.status[2]).startswith("invalid") and "ddp_bucket_size" in str(p.status[2])


def test_no_bucket_is_smaller_than_a_parameter_tensor():
    """Megatron-Core never splits a parameter across buckets (``param_and_grad_buffer.py``),
    so a bucket size below the tensors' (MLPerf v5.0's 405B configs pass 200) gives one
    call per tensor, not ``params / 200``: the count stops at the buffer's tensors."""
    assert float(ddp_buckets(6e9, 200.0, tensors=99.0)) == 99.0
    assert float(ddp_buckets(6e9, 4e8, tensors=99.0)) == 15.0        # above the tensors: ceil
    _, rs, _ = dp_ops(_lay(16), 6e9, 2.0, 1.0, 200.0, tensors=99.0)
    assert float(rs.calls) == 99.0
    assert float(rs.size_bytes * rs.calls) == pytest.approx(2.0 * 6e9)


def test_parameter_tensors_follow_megatron_core_layer_spec():
    """Llama (RMSNorm, no biases): 6 tensors per layer (qkv and fc1 with their fused norm
    weights, proj, fc2) + embedding, final norm and output layer; GPT-3 (LayerNorm, biases)
    12 (four linear biases, two norm biases); a MoE layer's routed experts 2 per local
    expert in the expert buffer, twice that with expert biases (gpt-oss)."""
    from dse.graph.train import param_tensors
    from dse.spec.model import get_model as catalog_model
    lay = lambda ep=1: as_float(Layout(tp=8, pp=1, dp=4, cp=1, ep=ep, mbs=1, zero=1))
    llama = catalog_model("llama3-70b")
    dense, experts = param_tensors(llama, lay(), 80.0)
    assert float(dense) == 80 * 6 + 3 and float(experts) == 0.0
    gpt3 = catalog_model("gpt3-175b")
    assert float(param_tensors(gpt3, lay(), 96.0)[0]) == 96 * 12 + 3
    oss = catalog_model("gpt-oss-120b")
    d, e = param_tensors(oss, lay(ep=4), 36.0)
    assert float(e) == 36 * 2 * (128 / 4) * 2
    assert float(d) == 36 * (3 + 2) + 3


def test_a_tiny_stated_bucket_is_not_an_absurd_step():
    """``--ddp-bucket-size 1`` is accepted (a whole number >= 1) and costs one call per
    tensor: the step stays within a few percent of the framework's own bucket rule."""
    import pandas as pd
    from dse.predict import predict_frame
    row = dict(id=1, model="llama3-70b", gpu="h100-sxm-80gb", num_gpus=64, tp=8, pp=1, dp=8, cp=1,
               global_batch_size=64, micro_batch_size=1, seq_length=4096, precision="bf16",
               measured_iter_time_s=3.0)
    p = predict_frame(pd.DataFrame([row, dict(row, id=2, ddp_bucket_size=1)]), "runs.csv",
                      intervals=False)
    assert list(p.status) == ["ok", "ok"]
    assert p.predicted_iter_time_s[1] == pytest.approx(p.predicted_iter_time_s[0], rel=0.05)
