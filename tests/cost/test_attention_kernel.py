"""The fused attention kernel as a property of (framework profile x GPU generation)
(dse.cost.attention_kernel) and Blackwell's fp8 transpose flag (dse.spec.efficiency)."""

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from dse.cost.attention import flash_attention_time_s
from dse.cost.attention_kernel import attention_eff, attention_kernel, with_attention_kernel
from dse.spec import efficiency
from dse.spec.hardware import get_hardware
from dse.spec.layout import (ATTENTION, ATTENTION_FA2, ATTENTION_NATIVE, FRAMEWORK, Layout,
                             Workload)
from dse.spec.model import get_model
from dse.train.memory import FRAGMENTATION, memory_per_gpu
from tests.helpers import a100, h100, host_step

STEP = host_step          # one point each: no XLA compile (tests.helpers.host_step)
SET = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODEL = get_model("llama3-8b")
LAY = Layout(tp=1, pp=1, dp=8, mbs=1, zero=3)


def wl(attention="flash", framework="megatron", seq=8192, precision=1):
    return Workload(global_batch=64, seq_len=seq, precision=precision,
                    attention=ATTENTION[attention], framework=FRAMEWORK[framework])


def test_framework_default_kernels():
    """megatron runs TE's cuDNN fused attention (native); Megatron-DeepSpeed, llm-foundry
    (FSDP1) and torchtitan (FSDP2 / SDPA) run FlashAttention-2-class kernels."""
    assert attention_kernel(wl(framework="megatron")) == ATTENTION_NATIVE
    for fw in ("deepspeed", "fsdp", "fsdp2"):
        assert attention_kernel(wl(framework=fw)) == ATTENTION_FA2
    # a stated kernel wins over the framework's
    assert attention_kernel(wl("cudnn", "fsdp")) == ATTENTION_NATIVE
    assert attention_kernel(wl("fa3", "fsdp2")) == ATTENTION_NATIVE
    assert attention_kernel(wl("fa2", "megatron")) == ATTENTION_FA2


def test_generation_ratios_from_the_fa3_paper():
    """Hopper's fused attention was fitted end to end at head dim 128 (0.50 of peak forward,
    0.50 x 0.85 backward); with the softmax exponentials charged apart (256 tensor FLOPs per
    exponential on sm90; 4d = 512 matmul FLOPs per score forward, 10d = 1280 backward) the
    tensor-core parts reproduce exactly those end-to-end fractions.  FA2 / cuDNN comes from
    the FA3 paper's Fig. 5-6 the same way; FA2 is Ampere's native kernel."""
    hop = efficiency.GENERATIONS["hopper"]
    assert 1.0 / (1.0 / hop.attn + 256.0 / 512.0) == pytest.approx(0.50)
    assert 1.0 / (1.0 / (hop.attn * hop.attn_bwd) + 256.0 / 1280.0) == pytest.approx(0.50 * 0.85)
    amp = efficiency.GENERATIONS["ampere"]
    assert 1.0 / (1.0 / amp.attn + 128.0 / 512.0) == pytest.approx(0.70)
    assert 0.50 < hop.attn_fa2 < 0.60
    assert efficiency.GENERATIONS["ampere"].attn_fa2 == 1.0
    assert "Hopper 0.50" in efficiency.__doc__ and "Hopper 0.45" not in efficiency.__doc__
    h = h100()
    assert float(attention_eff(h, ATTENTION_FA2)) == pytest.approx(hop.attn * hop.attn_fa2)
    assert float(attention_eff(h, ATTENTION_NATIVE)) == pytest.approx(hop.attn)
    assert float(attention_eff(a100(), ATTENTION_FA2)) == pytest.approx(amp.attn)


def test_with_attention_kernel_is_idempotent():
    h = h100()
    once = with_attention_kernel(h, wl(framework="fsdp"))
    twice = with_attention_kernel(once, wl(framework="fsdp"))
    hop = efficiency.GENERATIONS["hopper"]
    assert float(once.eff_attn) == float(twice.eff_attn) == pytest.approx(hop.attn * hop.attn_fa2)
    assert with_attention_kernel(h, wl()).eff_attn == h.eff_attn


@SET
@given(eff=st.floats(0.1, 0.9), gain=st.floats(1.01, 3.0), s=st.sampled_from([512.0, 4096.0, 32768.0]),
       backward=st.booleans())
def test_faster_kernel_never_slower(eff, gain, s, backward):
    """Property: a kernel with a higher efficiency never takes longer (roofline max)."""
    h = h100()
    args = lambda e: (2.0, 32.0, 8.0, s, s, 128.0, 0.5 + 64.0 / s, h.peak_bf16_flops_per_s, e,
                      h.hbm_bw_bytes_per_s, h.l2_bw_bytes_per_s, h.l2_bytes, h.num_sms,
                      h.smem_per_sm_bytes, 2.0, h.kernel_launch_s)
    slow = float(flash_attention_time_s(*args(eff), backward=backward))
    fast = float(flash_attention_time_s(*args(min(eff * gain, 1.0)), backward=backward))
    assert fast <= slow


@SET
@given(seq=st.sampled_from([2048, 8192, 32768]), fw=st.sampled_from(["fsdp", "fsdp2", "deepspeed"]))
def test_fa2_profile_on_hopper_at_least_cudnn_time(seq, fw):
    """On H100 the FA2-class framework default is never faster than the same run with
    cuDNN attention, and slower by less than the kernel ratio (only attention's tensor-core
    part stretches, by at most 1 / attn_fa2); on A100, where FA2 is the native kernel, the
    two are the same."""
    lay = Layout(tp=1, pp=1, dp=8, mbs=1, zero=3, recompute=2)
    t_fa2 = float(STEP(MODEL, wl("flash", fw, seq), lay, h100()).step_time_s)
    t_cudnn = float(STEP(MODEL, wl("cudnn", fw, seq), lay, h100()).step_time_s)
    assert t_cudnn < t_fa2 < t_cudnn / efficiency.GENERATIONS["hopper"].attn_fa2
    a_fa2 = float(STEP(MODEL, wl("flash", fw, seq), lay, a100()).step_time_s)
    a_cudnn = float(STEP(MODEL, wl("cudnn", fw, seq), lay, a100()).step_time_s)
    assert a_fa2 == pytest.approx(a_cudnn, rel=1e-6)


def test_megatron_flash_is_cudnn():
    """``attention = flash`` under megatron is the native kernel: the calibration rows'
    (all megatron) predictions are those of the fitted ``eff_attn``."""
    h = h100()
    assert float(STEP(MODEL, wl("flash"), LAY, h).step_time_s) == float(
        STEP(MODEL, wl("cudnn"), LAY, h).step_time_s)


def test_blackwell_keeps_no_fp8_transpose():
    """TE ``is_non_tn_fp8_gemm_supported()`` is true on sm100: fp8 primary weights hold
    1 B per linear parameter on B200, 2 B (with ``_transpose``) on H100."""
    b200 = get_hardware("b200")
    assert b200.fp8_transpose == 0.0 and h100().fp8_transpose == 1.0
    w = wl(precision=2)
    lay = Layout(tp=1, pp=1, dp=8, mbs=1, zero=1)
    m0 = memory_per_gpu(MODEL, w, lay, 2.0, fp8_transpose=0.0)
    m1 = memory_per_gpu(MODEL, w, lay, 2.0, fp8_transpose=1.0)
    linear = float(m0.params_per_gpu) - MODEL.vocab_size * MODEL.hidden_size * (
        1.0 if MODEL.tied_embeddings else 2.0)
    assert float(m1.weights_bytes - m0.weights_bytes) == pytest.approx(linear, rel=1e-3)
    # the step uses the hardware's flag (its peak memory carries the allocator's
    # fragmentation share on top)
    r_b = STEP(MODEL, w, lay, b200)
    r_b1 = STEP(MODEL, w, lay, b200.replace(fp8_transpose=1.0))
    assert float(r_b1.mem_bytes - r_b.mem_bytes) == pytest.approx(linear * (1 + FRAGMENTATION), rel=1e-3)


def test_predict_reads_a_stated_kernel(tmp_path):
    """The ``attention`` column takes fa2 / fa3 / cudnn: an llm-foundry H100 row stating
    cuDNN attention is predicted faster than the framework's FA2-class default."""
    import pandas as pd

    from pathlib import Path

    from dse.predict import predict_frame, read_csv
    src = Path(__file__).parents[1] / "data" / "published_fsdp.csv"
    row = pd.read_csv(src).query("id == 'mpt7b_h100_8gpu_32768'")
    rows = pd.concat([row.assign(attention=a) for a in ("", "fa2", "cudnn", "fa3")])
    rows["id"] = ["blank", "fa2", "cudnn", "fa3"]
    path = tmp_path / "rows.csv"
    rows.to_csv(path, index=False)
    p = predict_frame(read_csv(str(path)), str(path)).set_index("id")["predicted_iter_time_s"]
    assert p["blank"] == pytest.approx(p["fa2"], rel=1e-9)
    assert p["cudnn"] == pytest.approx(p["fa3"], rel=1e-9)
    assert p["cudnn"] < p["fa2"]
