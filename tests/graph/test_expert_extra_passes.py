"""gpt-oss's experts in Megatron-Core: the clamp before the fused SwiGLU and FC2's bias in a
per-expert loop are memory passes of the training graph (dse.graph.moe.expert_extra_passes);
other models and the serving graph get none."""

import dataclasses
from pathlib import Path

import pytest

from dse.graph.moe import CLAMP_PASSES, FC2_BIAS_PASSES, expert_extra_passes
from dse.spec.layout import Layout, Workload
from dse.spec.model import get_model, model_from_hf_config
from dse.train.ops_table import ops_table
from tests.helpers import h100

LAY = Layout(tp=1, pp=4, dp=16, ep=8, mbs=1, zero=1, sp=0)


def test_gpt_oss_is_flagged_from_its_config_and_catalog():
    hf = model_from_hf_config(Path(__file__).parents[1] / "data" / "hf" / "gpt-oss-120b.json")
    cat = get_model("gpt-oss-120b")
    assert (hf.clamped_swiglu, hf.expert_bias) == (1, 1) == (cat.clamped_swiglu, cat.expert_bias)
    assert not get_model("qwen3-30b-a3b").clamped_swiglu and not get_model("deepseek-v3").expert_bias


def test_passes_bytes_and_kernels():
    m = get_model("gpt-oss-120b")
    ops = expert_extra_passes(m, 100.0, 10.0, 16.0, 2.0, 1.0)
    assert [op.name for op in ops] == ["moe clamped swiglu"] * 2 + ["moe fc2 bias (per expert)"] * 2
    assert [op.bytes_moved for op in ops] == [CLAMP_PASSES[0] * 200, CLAMP_PASSES[1] * 200,
                                             FC2_BIAS_PASSES[0] * 20, FC2_BIAS_PASSES[1] * 20]
    assert ops[2].kernels == 33.0 and ops[3].kernels == 64.0
    plain = dataclasses.replace(m, clamped_swiglu=0, expert_bias=0)
    assert expert_extra_passes(plain, 100.0, 10.0, 16.0, 2.0, 1.0) == []


def test_the_training_step_pays_them():
    m = get_model("gpt-oss-120b")
    wl = Workload(global_batch=1280, seq_len=4096)
    with_, _ = ops_table(m, wl, LAY, h100())
    without, _ = ops_table(dataclasses.replace(m, clamped_swiglu=0, expert_bias=0), wl, LAY, h100())
    extra = with_[with_["op"].str.startswith("moe clamped") | with_["op"].str.startswith("moe fc2 bias")]
    assert len(extra) == 4 and (extra["time_s"] > 0).all()
    # the passes' own time, plus what their ~130 launches and the longer stage add
    # (host launch stall, pipeline bubble)
    assert with_["time_s"].sum() >= without["time_s"].sum() + 0.99 * extra["time_s"].sum()


def test_yarn_attention_factor_sends_megatron_to_the_unfused_rope():
    """gpt-oss's YaRN (factor 32, no mscale keys) scales RoPE by 1.347: Megatron-Core's
    unfused RoPE, extra passes in the training graph; DeepSeek-V3's (mscale / mscale_all_dim
    1 / 1) is 1: none."""
    from dse.graph.train import UNFUSED_ROPE_KERNELS, unfused_rope_ops
    from dse.spec.hf_config import yarn_attention_factor
    assert yarn_attention_factor({"rope_type": "yarn", "factor": 32.0}) == pytest.approx(1.3466, abs=1e-4)
    assert yarn_attention_factor({"type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0}) == 1.0
    assert yarn_attention_factor({"rope_type": "llama3", "factor": 8.0}) == 1.0
    assert yarn_attention_factor(None) == 1.0 and yarn_attention_factor({"rope_type": "yarn", "factor": "x"}) == 1.0
    hf = lambda name: model_from_hf_config(Path(__file__).parents[1] / "data" / "hf" / f"{name}.json")
    assert hf("gpt-oss-120b").rope_mscale == 1 and hf("deepseek-v3").rope_mscale == 0
    ops = unfused_rope_ops(get_model("gpt-oss-120b"), 10.0)
    assert [op.bytes_moved for op in ops] == [2 * (UNFUSED_ROPE_KERNELS - 1) * 10.0] * 2
    assert unfused_rope_ops(get_model("llama3-8b"), 10.0) == []


def test_fp32_routing_probabilities_promote_the_bias_loop():
    """The flex dispatcher (DeepEP / HybridEP) casts the routing probabilities to fp32, so
    ``t + b * p`` runs in fp32 and casts back: 28 / 36 bytes per fc2-output element instead
    of 12 / 14, one / two more kernels; eager only (a full-iteration CUDA graph keeps the
    16-bit count), and the step is slower for it, never faster."""
    from dse.graph.moe import FC2_BIAS_FP32_BYTES, FC2_BIAS_FP32_CASTS, fp32_routing_probs
    m = get_model("gpt-oss-120b")
    bf16 = expert_extra_passes(m, 100.0, 10.0, 16.0, 2.0, 1.0, 0.0)[2:]
    fp32 = expert_extra_passes(m, 100.0, 10.0, 16.0, 2.0, 1.0, 1.0)[2:]
    assert [float(op.bytes_moved) for op in fp32] == [FC2_BIAS_FP32_BYTES[0] * 10, FC2_BIAS_FP32_BYTES[1] * 10]
    assert [float(op.bytes_moved) for op in bf16] == [FC2_BIAS_PASSES[0] * 20, FC2_BIAS_PASSES[1] * 20]
    assert [float(a.kernels - b.kernels) for a, b in zip(fp32, bf16)] == list(FC2_BIAS_FP32_CASTS)
    wl = lambda **kw: Workload(global_batch=1280, seq_len=4096, **kw)
    assert float(fp32_routing_probs(wl(moe_dispatcher=1))) == 1.0
    assert float(fp32_routing_probs(wl())) == 0.0                               # all-to-all
    assert float(fp32_routing_probs(wl(moe_dispatcher=1, cuda_graphs=1))) == 0.0
    steps = [ops_table(m, wl(moe_dispatcher=d), LAY, h100())[0]["time_s"].sum() for d in (0, 1)]
    bias = lambda d: ops_table(m, wl(moe_dispatcher=d), LAY, h100())[0].query(
        "op == 'moe fc2 bias (per expert)'")["time_s"].sum()
    assert bias(1) > 1.5 * bias(0) and steps[1] > steps[0] - 1e-9    # kernel launches dilute the bytes
