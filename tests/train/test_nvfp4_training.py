"""NVFP4 training (precision code 3, Transformer Engine's NVFP4BlockScaling on Blackwell):
the linears at the fp4 rate, 0.5625-byte quantized copies and inputs, a heavier
activation cast (dse.cost.rates.quant_cast_bytes), refused where there are no fp4 tensor
cores."""

import pandas as pd
import pytest

from dse.cost.rates import NVFP4_BYTES, NVFP4_CAST_BYTES, quant_cast_bytes
from dse.predict import predict_frame
from dse.spec.hardware import get_hardware
from dse.spec.layout import PRECISION, Layout, Workload
from dse.train.memory import embedding_params_per_gpu, memory_per_gpu
from dse.train.step import step_and_schedule
from tests.helpers import llama70b

LAY = Layout(tp=2, pp=4, dp=8, vpp=5, sp=1, mbs=1, zero=1)


def _wl(precision):
    return Workload(global_batch=256, seq_len=8192, precision=precision)


def test_nvfp4_is_precision_3_and_its_cast_reads_the_amax_first():
    assert PRECISION["nvfp4"] == PRECISION["fp4"] == 3
    assert float(quant_cast_bytes(3)) == pytest.approx(2 + 2 + 2 * NVFP4_BYTES) == NVFP4_CAST_BYTES
    assert float(quant_cast_bytes(2)) == 3.0 and float(quant_cast_bytes(1)) == 0.0


def test_nvfp4_step_is_faster_than_fp8_but_not_twice():
    """Llama-3-70B on GB200 (the Megatron-Bridge NVFP4 layout): the linears run at twice
    the fp8 peak times the fp4 GEMM ceiling ratio (0.763), attention and the LM head stay
    16-bit and the casts grow, so the step gains less than 2x."""
    hw = get_hardware("gb200")
    t8 = float(step_and_schedule(llama70b(), _wl(2), LAY, hw)[0].step_time_s)
    t4 = float(step_and_schedule(llama70b(), _wl(3), LAY, hw)[0].step_time_s)
    assert t4 < t8 < 2.0 * t4


def test_nvfp4_weights_are_both_quantized_copies_per_linear():
    """Megatron's primary weights (fp4_param_gather): every linear's NVFP4 row- and
    column-wise copies, 2 x 0.5625 B, on Blackwell too (fp8 keeps one copy there)."""
    m = memory_per_gpu(llama70b(), _wl(3), LAY, 2.0, fp8_transpose=0.0)
    P = float(m.params_per_gpu)
    emb = float(embedding_params_per_gpu(llama70b(), LAY))
    assert float(m.weights_bytes) == pytest.approx(2 * NVFP4_BYTES * (P - emb) + 2.0 * emb, rel=1e-6)
    m8 = memory_per_gpu(llama70b(), _wl(2), LAY, 2.0, fp8_transpose=0.0)
    assert float(m.activations_bytes) < float(m8.activations_bytes)


def test_nvfp4_needs_fp4_tensor_cores():
    row = dict(id="r", model="Llama3-70B", num_layers=80, hidden_size=8192, ffn_hidden_size=28672,
               num_attention_heads=64, num_kv_heads=8, vocab_size=128256, seq_length=8192,
               global_batch_size=256, micro_batch_size=1, gpu="h100-sxm-80gb", num_gpus=64, tp=2,
               pp=4, cp=1, vpp=5, precision="nvfp4")
    out = predict_frame(pd.DataFrame([row, dict(row, id="b", gpu="b200")]), "t.csv", intervals=False)
    assert out.loc[0, "status"] == "infeasible: h100-sxm-80gb has no fp4 tensor cores (NVFP4 training)"
    assert out.loc[1, "status"] == "ok"
