"""Megatron-family fp8 memory (fp8 primary weights, bf16 main gradients) and the uneven
pipeline split's head placement (dse.train.memory, dse.graph.train, dse.train.step)."""

import pytest

from dse.spec.frameworks import MEGATRON, profile
from dse.spec.layout import FRAMEWORK, Layout, Workload
from dse.spec.model import get_model
from dse.train.memory import embedding_params_per_gpu, memory_per_gpu
from dse.train.step import stage_balanced_head_s, step_and_schedule
from tests.helpers import h100, llama70b

LAY = Layout(tp=4, pp=8, dp=2, vpp=5, sp=1, mbs=1, zero=1)


def _mem(precision, framework="megatron"):
    wl = Workload(global_batch=128, seq_len=8192, precision=precision, framework=FRAMEWORK[framework])
    return memory_per_gpu(llama70b(), wl, LAY, 2.0)


def test_megatron_fp8_weights_are_fp8_with_transpose_and_grads_bf16():
    """fp8 primary weights: 1 B + the Hopper transpose for the linears, 2 B for the
    embedding / LM head; bf16 main gradients (the family's fp8 recipes)."""
    assert MEGATRON.fp8_primary_weights and MEGATRON.fp8_main_grad_bytes == 2.0
    m = _mem(2)
    P = float(m.params_per_gpu)
    emb = float(embedding_params_per_gpu(llama70b(), LAY))
    assert float(m.weights_bytes) == pytest.approx(2.0 * (P - emb) + 2.0 * emb, rel=1e-6)
    assert float(m.grads_bytes) == pytest.approx(2.0 * P, rel=1e-6)
    # bf16 runs keep Megatron-LM's fp32 main gradients and 16-bit weights
    b = _mem(1)
    assert float(b.grads_bytes) == pytest.approx(4.0 * P, rel=1e-6)
    assert float(b.weights_bytes) == pytest.approx(2.0 * P, rel=1e-6)


def test_other_frameworks_keep_the_16_bit_weights_and_fp8_copy():
    """16-bit weights plus TE's cached fp8 copy and, where fp8 GEMMs are TN-only
    (Hopper: ``fp8_transpose`` 1, the default), its transposed fp8 copy (TE 1.x
    ``weight_t_fp8``); Blackwell (``fp8_transpose`` 0) keeps none."""
    assert not profile(FRAMEWORK["deepspeed"]).fp8_primary_weights
    m = _mem(2, "deepspeed")
    P = float(m.params_per_gpu)
    emb = float(embedding_params_per_gpu(llama70b(), LAY))
    assert float(m.weights_bytes) == pytest.approx(4.0 * (P - emb) + 2.0 * emb, rel=1e-6)
    wl = Workload(global_batch=128, seq_len=8192, precision=2, framework=FRAMEWORK["deepspeed"])
    bw = memory_per_gpu(llama70b(), wl, LAY, 2.0, fp8_transpose=0.0)
    assert float(bw.weights_bytes) == pytest.approx(3.0 * (P - emb) + 2.0 * emb, rel=1e-6)


def test_fp8_dp_collectives_move_bf16_grads_and_fp8_params():
    wl = Workload(global_batch=128, seq_len=8192, precision=2)
    _, _, g = step_and_schedule(llama70b(), wl, LAY, h100())
    ar, rs, ag = g.dp
    mem = memory_per_gpu(llama70b(), wl, LAY, 2.0)
    P = float(mem.params_per_gpu)
    emb = float(embedding_params_per_gpu(llama70b(), LAY))
    # the whole buffer, over its bucket calls (dse.graph.train.dp_ops)
    assert float(rs.size_bytes * rs.calls) == pytest.approx(2.0 * P, rel=1e-5)
    assert float(ag.size_bytes * ag.calls) == pytest.approx((P - emb) + 2.0 * emb, rel=1e-5)


def test_uneven_split_puts_the_head_on_a_stage_one_layer_short():
    # even split: head on top of the stage's layers
    assert float(stage_balanced_head_s(3.0, 3.0, 1.0, 2.0, 0.0, 8.0)) == 3.0
    # uneven (Llama 3.1 405B, 126 layers on 64 virtual stages: slack 2): the last stage
    # gives up one layer for the head, the first one for the embedding
    assert float(stage_balanced_head_s(3.0, 3.0, 1.0, 2.0, 2.0, 8.0)) == pytest.approx(1.0)
    assert float(stage_balanced_head_s(1.5, 1.5, 1.0, 2.0, 2.0, 8.0)) == 0.0
    # slack 1: only the loss is accounted; the embedding stage keeps all its layers
    assert float(stage_balanced_head_s(3.0, 3.0, 2.5, 2.0, 1.0, 8.0)) == pytest.approx(2.5)
    # one stage: nothing to balance
    assert float(stage_balanced_head_s(4.0, 3.0, 1.0, 2.0, 2.0, 1.0)) == 4.0


def test_405b_uneven_split_charges_less_than_the_whole_head_per_micro_batch():
    """126 layers on PP8 x VPP8: the table's head share is below one call per micro-batch
    (m = 64), and the step is still at least the layers' time."""
    m = get_model("llama3-405b")
    wl = Workload(global_batch=512, seq_len=8192, precision=2)
    lay = Layout(tp=8, pp=8, dp=8, cp=2, vpp=8, sp=1, mbs=1, zero=1)
    res, sc, _ = step_and_schedule(m, wl, lay, h100())
    assert float(sc.head_calls) < 64.0
    assert float(res.step_time_s) > 64.0 * 16 * float(sc.layer.fwd_compute_s + sc.layer.bwd_compute_s)


def test_uneven_split_peak_activations_are_rank_1s():
    """Llama 3.1 405B (126 layers) at PP16 x VPP4: rank 0's first chunk is one layer short
    (account_for_embedding_in_pipeline_split), so the peak is rank 1's 77 chunks x 2 layers
    = 154 layer-activations, against rank 0's 79 x 2 = 158 of an even split; the
    non-interleaved split peaks at rank 1's 15 x 8 = 120 (rank 0: 16 x 7 = 112, even 128).
    Another framework keeps the even count; an even split (80 layers) is unchanged."""
    m = get_model("llama3-405b")
    wl = lambda fw: Workload(global_batch=1536, seq_len=8192, precision=2, framework=FRAMEWORK[fw])
    for vpp, peak, even in ((4, 154.0, 158.0), (1, 120.0, 128.0)):
        lay = Layout(tp=4, pp=16, dp=4, vpp=vpp, sp=1, mbs=1, zero=1)
        meg, ds = memory_per_gpu(m, wl("megatron"), lay, 2.0), memory_per_gpu(m, wl("deepspeed"), lay, 2.0)
        assert float(meg.activations_bytes) / float(ds.activations_bytes) == pytest.approx(
            peak / even, rel=0.02)        # the LM-head logits term rides on both
    lay = Layout(tp=4, pp=8, dp=2, vpp=5, sp=1, mbs=1, zero=1)
    w70 = Workload(global_batch=128, seq_len=8192, precision=2)
    from dse.train.memory import peak_inflight
    assert float(peak_inflight(llama70b(), w70, lay, 9.0, 64.0)) == 9.0
