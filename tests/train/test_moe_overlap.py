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


def test_switch_keeps_a_chunk_and_a_layer_more_activations(overlap_on):
    """The paired schedule frees a backward layer as it adds a forward one (FILO
    ``pop_layer``): a layer more, plus the interleaved schedule's extra warm-up chunk
    (1 / vpp of a micro-batch) -- not a second micro-batch."""
    m, wl, lay = _qwen235_h100()
    on = memory_per_gpu(m, wl, lay, 2.0)
    F.MOE_A2A_OVERLAP[0] = False
    off = memory_per_gpu(m, wl, lay, 2.0)
    assert float(on.activations_bytes) > float(off.activations_bytes)
    assert float(on.activations_bytes) < 1.5 * float(off.activations_bytes)
    assert float(on.optimizer_bytes) == float(off.optimizer_bytes)


def test_without_pipelining_the_pairing_adds_one_layer(overlap_on):
    """pp = 1 (Megatron-Core combined_1f1b_schedule_for_no_pipelining): one micro-batch
    and one layer of activations at the peak."""
    from dse.train.memory import layers_per_stage
    m, wl, _ = _qwen235_h100()
    lay = Layout(tp=2, pp=1, dp=16, ep=32, mbs=1, zero=1, sp=1)
    on = float(memory_per_gpu(m, wl, lay, 2.0).activations_bytes)
    F.MOE_A2A_OVERLAP[0] = False
    off = float(memory_per_gpu(m, wl, lay, 2.0).activations_bytes)
    L = float(layers_per_stage(m, lay))
    assert on / off == pytest.approx(1.0 + 1.0 / L, rel=0.02)


# --- the run's own schedule facts (Workload.moe_a2a_overlap, Workload.cuda_graphs) -------

import dataclasses                                      # noqa: E402

import pandas as pd                                     # noqa: E402

from dse.cost.rates import rates                        # noqa: E402
from dse.predict import predict_frame                   # noqa: E402
from dse.train.layer import layer_cost                  # noqa: E402


def test_run_flag_turns_on_the_overlap_as_the_framework_switch_does(overlap_on):
    """``Workload.moe_a2a_overlap = 1`` (a row's ``moe_a2a_overlap`` column: the
    Megatron-Bridge recipe's ``moe_a2a_overlap=True``) gives the step time and memory of
    the framework switch, with the switch off."""
    m, wl, lay = _qwen235_h100()
    hw = h100()
    by_switch = train_step(m, wl, lay, hw)
    mem_switch = memory_per_gpu(m, wl, lay, 2.0)
    F.MOE_A2A_OVERLAP[0] = False
    flagged = dataclasses.replace(wl, moe_a2a_overlap=1)
    by_flag = train_step(m, flagged, lay, hw)
    serial = train_step(m, wl, lay, hw)
    assert float(by_flag.step_time_s) == pytest.approx(float(by_switch.step_time_s), rel=1e-6)
    assert float(by_flag.step_time_s) < float(serial.step_time_s)
    assert float(memory_per_gpu(m, flagged, lay, 2.0).activations_bytes) == \
        pytest.approx(float(mem_switch.activations_bytes), rel=1e-6)


def test_full_iteration_cuda_graph_removes_exactly_the_host_stall():
    """Qwen3-30B-A3B, EP 8, 16 local experts of 768 (one GEMM launch each): eager, the
    host's launches outlast the GPU's work (a host stall); replayed as one full-iteration
    CUDA graph (Megatron-Core ``cuda_graph_impl="full_iteration"``) the pass costs the
    GPU work alone -- the eager time less its stall -- and the step is faster."""
    m, wl, lay = as_float(get_model("qwen3-30b-a3b"), Workload(global_batch=64, seq_len=4096, precision=PRECISION_FP8),
                          Layout(tp=1, pp=1, dp=8, ep=8, mbs=1, zero=1))
    hw = h100()
    r = rates(hw, wl.precision)
    eager = layer_cost(m, wl, lay, hw, r)
    graphed_wl = dataclasses.replace(wl, cuda_graphs=1)
    graphed = layer_cost(m, graphed_wl, lay, hw, r)
    assert float(eager.host_stall_fwd_s) > 0.0
    assert float(graphed.host_stall_fwd_s) == 0.0 and float(graphed.host_stall_bwd_s) == 0.0
    assert float(graphed.fwd_compute_s) == pytest.approx(
        float(eager.fwd_compute_s) - float(eager.host_stall_fwd_s), rel=1e-6)
    assert float(train_step(m, graphed_wl, lay, hw).step_time_s) < float(train_step(m, wl, lay, hw).step_time_s)


MOE_ROW = dict(id=1, source="T", model="Qwen3-30B-A3B", num_layers=8, hidden_size=2048, ffn_hidden_size=768,
               num_attention_heads=32, num_kv_heads=4, head_dim=128, vocab_size=151936, seq_length=4096,
               global_batch_size=64, micro_batch_size=1, gpu="h100-sxm-80gb", num_gpus=16, tp=1, pp=1,
               dp=16, cp=1, ep=16, vpp=None, sequence_parallel=None, recompute="none", zero_stage=1,
               precision="fp8", measured_iter_time_s=1.0, num_experts=128, top_k=8)


def test_predict_reads_the_schedule_columns_and_rejects_bad_values():
    """``moe_a2a_overlap`` (true | false | blank) and ``cuda_graphs`` (none |
    full_iteration | blank): each one only speeds the row up; a bad value is the row's
    ``invalid: <column>: <rule>`` status while the other rows are still predicted."""
    rows = [MOE_ROW, dict(MOE_ROW, id=2, moe_a2a_overlap="true"), dict(MOE_ROW, id=3, cuda_graphs="full_iteration"),
            dict(MOE_ROW, id=4, moe_a2a_overlap="maybe"), dict(MOE_ROW, id=5, cuda_graphs="partial"),
            dict(MOE_ROW, id=6, moe_a2a_overlap="false", cuda_graphs="none")]
    out = predict_frame(pd.DataFrame(rows), "t.csv")
    t = out["predicted_iter_time_s"]
    assert (out.loc[[0, 1, 2, 5], "status"] == "ok").all()
    assert t[1] < t[0] and t[2] < t[0] and t[5] == t[0]
    assert out.loc[3, "status"].startswith("invalid: moe_a2a_overlap: ")
    assert out.loc[4, "status"].startswith("invalid: cuda_graphs: ")
