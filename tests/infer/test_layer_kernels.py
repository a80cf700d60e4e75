"""Launch counts of a serving layer's memory-bound and quantization kernels
(dse.infer.forward.memory_pass_kernels) and what they cost in a decode step."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.graph.ops import KVRead
from dse.infer.engines import PROFILES
from dse.infer.forward import EW_KERNELS_PER_LAYER, memory_pass_kernels, stage_kernels, stage_time
from dse.cost.rates import rates
from dse.spec.hardware import get_hardware
from dse.spec.layout import PRECISION_16, PRECISION_FP8
from dse.spec.model import dense_layer_fraction, get_model

L70 = get_model("meta-llama/Llama-3.1-70B")
MIX = get_model("mistralai/Mixtral-8x7B-v0.1")
DSR1 = get_model("deepseek-ai/DeepSeek-R1")
GPT_OSS = get_model("openai/gpt-oss-120b")


def test_dense_layer_without_quant_kernels_is_the_documented_five():
    assert float(memory_pass_kernels(L70, PRECISION_16)) == EW_KERNELS_PER_LAYER
    assert float(memory_pass_kernels(L70, PRECISION_FP8)) == EW_KERNELS_PER_LAYER
    assert float(memory_pass_kernels(MIX, PRECISION_FP8)) == EW_KERNELS_PER_LAYER


def test_dense_fp8_layer_quantizes_four_linear_inputs_apart():
    # vLLM apply_fp8_linear: QKV, out, fc1 (gate+up), fc2 -> four scaled_fp8_quant launches
    assert float(memory_pass_kernels(L70, PRECISION_FP8, 1.0)) == EW_KERNELS_PER_LAYER + 4
    assert float(memory_pass_kernels(L70, PRECISION_16, 1.0)) == EW_KERNELS_PER_LAYER


def test_deepseek_layer_counts_latent_norms_shared_activation_and_quant_inputs():
    x = float(dense_layer_fraction(DSR1))              # 3 dense of 61 layers
    assert 0.0 < x < 0.1
    fused = EW_KERNELS_PER_LAYER + (1.0 - x) + 2.0     # shared act, q_a / kv_a norms
    assert float(memory_pass_kernels(DSR1, PRECISION_FP8)) == pytest.approx(fused)
    # attention 4 (fused a-proj, q up, kv up, out) + routed 2 + shared 2 (MoE layers)
    # + dense MLP 2 (dense layers)
    inputs = 4.0 + (1.0 - x) * 4.0 + x * 2.0
    assert float(memory_pass_kernels(DSR1, PRECISION_FP8, 1.0)) == pytest.approx(fused + inputs)


def test_mxfp4_expert_checkpoint_quantizes_only_the_expert_inputs():
    base = float(memory_pass_kernels(GPT_OSS, PRECISION_FP8))
    assert float(memory_pass_kernels(GPT_OSS, PRECISION_FP8, 1.0)) == pytest.approx(base + 2.0)


def test_pytorch_engines_launch_quant_kernels_and_compiled_engines_do_not():
    assert {n for n, p in PROFILES.items() if p.quant_kernels} >= {
        "vllm", "vllm_v1", "sglang", "sglang_overlap", "trtllm_pytorch", "tgi"}
    for name in ("trtllm", "trtllm_static", "trtllm_mlperf", "lmdeploy", "vllm_mlperf", "nemo"):
        assert PROFILES[name].quant_kernels == 0.0


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["h100-sxm-80gb", "h200-sxm-141gb", "b200"]),
       st.sampled_from([1.0, 4.0, 32.0, 256.0]), st.sampled_from([1, 8]))
def test_separate_quant_kernels_never_make_a_step_faster_and_add_launches(gpu, batch, tp):
    hw = get_hardware(gpu)
    r = rates(hw, PRECISION_FP8)
    att = KVRead(batch, DSR1.num_attention_heads / tp, 1.0, 2000.0, 576.0)
    args = (DSR1, batch, batch, att, tp, 1, PRECISION_FP8)
    fused = float(stage_time(*args, hw, r).total_s)
    apart = float(stage_time(*args, hw, r, quant_kernels=1.0).total_s)
    assert apart >= fused
    k0 = float(stage_kernels(*args, r.act_bytes))
    k1 = float(stage_kernels(*args, r.act_bytes, quant_kernels=1.0))
    assert k1 - k0 == pytest.approx(DSR1.num_layers * (4.0 + 4.0 * 58 / 61 + 2.0 * 3 / 61))
