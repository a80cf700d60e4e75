"""MXFP4-expert checkpoints (gpt-oss) served quantized: W4A8 experts on Blackwell, W4A16
on Hopper, bf16 for every other linear (dse.infer.moe_serving.mxfp4_expert_rates, wired
into dse.infer.forward.stage_time)."""

from pathlib import Path

import numpy as np
import pytest

from dse.cost.rates import MXFP4_BYTES, rates
from dse.graph.ops import KVRead, time_s
from dse.infer.forward import MOE_GROUPED_GEMM_EFF, forward_ops, stage_time
from dse.infer.moe_serving import bf16_linear_rates, mxfp4_expert_rates
from dse.spec.hardware import get_hardware
from dse.spec.model import get_model, model_from_hf_config

DATA = Path(__file__).resolve().parents[1] / "data" / "hf"
OSS = get_model("openai/gpt-oss-120b")
B200, H100 = get_hardware("b200"), get_hardware("h100-sxm-80gb")
FP8, NVFP4 = 2, 3


def test_catalog_and_config_json_mark_gpt_oss():
    assert OSS.mxfp4_experts == 1
    assert model_from_hf_config(DATA / "gpt-oss-120b.json").mxfp4_experts == 1
    assert get_model("Qwen/Qwen3-30B-A3B").mxfp4_experts == 0


@pytest.mark.parametrize("hw, prec, peak, eff", [
    (B200, NVFP4, "peak_fp8_flops_per_s", "eff_gemm_fp8"),     # mxfp8 x mxfp4 (W4A8)
    (H100, FP8, "peak_bf16_flops_per_s", "eff_gemm")])         # bf16 x mxfp4 (W4A16)
def test_expert_rates_follow_the_activation_precision(hw, prec, peak, eff):
    r = rates(hw, prec)
    e = mxfp4_expert_rates(r, hw, prec, 1)
    assert float(e.peak_linear_flops_per_s) == pytest.approx(float(getattr(hw, peak)))
    assert float(e.eff_linear) == pytest.approx(float(getattr(hw, eff)))
    assert float(e.linear_bytes) == pytest.approx(MXFP4_BYTES)
    d = bf16_linear_rates(r, hw, prec, 1)
    assert float(d.peak_linear_flops_per_s) == pytest.approx(float(hw.peak_bf16_flops_per_s))
    assert float(d.linear_bytes) == 2.0


@pytest.mark.parametrize("prec, flag", [(1, 1), (FP8, 0), (NVFP4, 0)])
def test_rates_untouched_unless_quantized_mxfp4_checkpoint(prec, flag):
    r = rates(B200, prec)
    for f in (mxfp4_expert_rates, bf16_linear_rates):
        assert all(np.allclose(float(x), float(y)) for x, y in zip(f(r, B200, prec, flag), r))


def _att(model, b):
    return KVRead(b, model.num_attention_heads * 1.0, 8.0, 1500.0, 64.0)


def test_compute_bound_pass_is_slower_than_an_nvfp4_model():
    """A prefill-sized pass is compute-bound: W4A8 experts at the fp8 rate and bf16 QKV /
    out projections make it slower than the same shapes as an all-NVFP4 model."""
    T = 16384.0
    r = rates(B200, NVFP4)
    as_nvfp4 = OSS.replace(mxfp4_experts=0)
    t_mx = float(stage_time(OSS, T, 64.0, _att(OSS, 64.0), 1, 1, NVFP4, B200, r).gemm_s)
    t_nv = float(stage_time(as_nvfp4, T, 64.0, _att(OSS, 64.0), 1, 1, NVFP4, B200, r).gemm_s)
    assert t_mx > 1.5 * t_nv


def test_expert_gemm_time_is_the_w4a8_gemm():
    """stage_time's expert GEMMs are exactly the GEMMs costed at the W4A8 rates."""
    T = 8192.0
    r = rates(B200, NVFP4)
    g = forward_ops(OSS, T, 64.0, _att(OSS, 64.0), 1, 1, NVFP4, r.act_bytes)
    e = mxfp4_expert_rates(r, B200, NVFP4, 1)
    e = e._replace(eff_linear=e.eff_linear * MOE_GROUPED_GEMM_EFF)
    want = sum(float(time_s(op, B200, e)) for op in g.experts)
    dense = bf16_linear_rates(r, B200, NVFP4, 1)
    want += sum(float(time_s(op, B200, dense)) for op in g.layer if op.name in
                ("qkv", "out proj", "router"))
    got = stage_time(OSS.replace(num_layers=1, vocab_size=1), T, 64.0, _att(OSS, 64.0), 1, 1,
                     NVFP4, B200, r).gemm_s
    lm_head = float(time_s(forward_ops(OSS.replace(vocab_size=1), T, 64.0, _att(OSS, 64.0), 1, 1,
                                       NVFP4, r.act_bytes).head[0], B200, r))
    assert float(got) == pytest.approx(want + lm_head, rel=1e-5)


def test_decode_reads_mxfp4_expert_weights():
    """Small-batch decode is weight-bound: the expert weight stream is at MXFP4 bytes, so a
    W4A16 (Hopper) decode reads about half the expert bytes of an fp8 model."""
    r = rates(H100, FP8)
    b = 8.0
    t_mx = float(stage_time(OSS, b, b, _att(OSS, b), 1, 1, FP8, H100, r).gemm_s)
    t_f8 = float(stage_time(OSS.replace(mxfp4_experts=0), b, b, _att(OSS, b), 1, 1, FP8, H100, r).gemm_s)
    assert t_mx < 0.75 * t_f8


def test_mxfp4_checkpoint_weights_are_stored_as_the_checkpoint_holds_them():
    """gpt-oss-120b served at fp8: routed experts MXFP4 (0.53 B/param), every other weight
    bf16 -- about the 65 GB of the published checkpoint, not 117 GB at 1 byte/param; bf16
    serving keeps 2 bytes everywhere."""
    from dse.infer import serving as SV
    from dse.infer.engines import PROFILES
    from dse.infer.memory import routed_expert_params_per_gpu
    from dse.spec.model import get_model
    m = get_model("gpt-oss-120b")
    hw = get_hardware("h200-sxm-141gb")
    w = lambda prec: SV.weights_bytes(SV.Deployment(m, hw, PROFILES["trtllm_pytorch"], 1, 1, prec, 1.0))
    assert 60e9 < w(2) < 70e9
    assert w(2) == pytest.approx(w(3))
    assert w(1) == pytest.approx(2.0 * float(m.num_params()), rel=0.02)
    routed = float(routed_expert_params_per_gpu(m, 1, 1))
    assert 0.9 * float(m.num_params()) < routed < float(m.num_params())
