"""The softmax's exponentials on the special-function units (dse.cost.attention module
docstring, dse.cost.rates.exp_rate, dse.spec.efficiency ``sfu``)."""

import pytest
from hypothesis import given, settings, strategies as st

from dse.cost.attention import (decode_attention_time_s, exp_time_s, flash_attention_terms,
                                flash_attention_time_s)
from dse.cost.rates import rates
from dse.errors import InputError
from dse.spec.efficiency import GENERATIONS, without_exp
from dse.spec.hardware import get_hardware, hardware_from_dict

SET = settings(max_examples=25, deadline=None)


def flash(hw, d, s=8192, heads=32, backward=False, exp=True, eff=None):
    """(t_compute, t_hbm, t_l2, bytes) of one fused call on ``hw`` at head dim ``d``."""
    r = rates(hw, 1)
    e = eff if eff is not None else hw.eff_attn * (hw.eff_attn_bwd if backward else 1.0)
    return flash_attention_terms(1, heads, 8, s, s, d, 0.5, r.peak_16_flops_per_s, e,
                                 r.hbm_bw_bytes_per_s, r.l2_bw_bytes_per_s, hw.l2_bytes,
                                 hw.num_sms, hw.smem_per_sm_bytes, 2.0, backward,
                                 r.exp_per_s if exp else 0.0)


def test_catalog_rates_match_the_published_exponential_throughputs():
    """16 per SM per clock (32 on Blackwell Ultra) x SMs x clock reproduces the published
    rates: H100 SXM 3.9e12 (FA3 paper), B200-class 5e12 and Blackwell Ultra 10.7e12 at full
    clock and 160 SMs (NVIDIA's Blackwell Ultra table); GB200 / GB300's measured 4.94 / 10.02
    Gop/s bracket the catalog's clock-derived figures.  AMD: not modelled (0)."""
    r = {n: float(rates(get_hardware(n), 1).exp_per_s) for n in
         ("h100-sxm-80gb", "b200", "gb200", "b300", "gb300", "mi300x")}
    assert r["h100-sxm-80gb"] == pytest.approx(3.9e12, rel=0.02)
    assert r["gb200"] == pytest.approx(4.943e12, rel=0.03)
    assert r["gb300"] == pytest.approx(10.024e12, rel=0.03)
    assert r["b300"] / r["b200"] == pytest.approx(2.0)
    assert r["mi300x"] == 0.0


def test_reference_head_dim_keeps_the_fitted_end_to_end_efficiency():
    """At head dim 128 on H100 the split (tensor part + exponentials) is exactly the old
    end-to-end 0.50 / 0.425 of peak the calibration fitted, forward and backward."""
    h = get_hardware("h100-sxm-80gb")
    for backward, total in ((False, 0.50), (True, 0.50 * 0.85)):
        new = float(flash(h, 128, backward=backward)[0])
        old = float(flash(h, 128, backward=backward, exp=False, eff=total)[0])
        assert new == pytest.approx(old, rel=1e-4)     # float32; the clock is rounded


def test_small_head_dims_and_slow_sfus_pay_more():
    """Per matmul FLOP, head dim 64 runs slower than 128 (one exponential per 4d FLOPs);
    Blackwell Ultra's doubled SFUs speed a B200-identical forward by 1.2-1.45x (NVIDIA
    reports ~1.35x for FP8 attention forward on DeepSeek-V3 shapes)."""
    for n in ("h100-sxm-80gb", "b200"):
        h = get_hardware(n)
        per_flop = [float(flash(h, d)[0]) / d for d in (64, 128)]
        assert per_flop[0] > per_flop[1] * 1.05
    b200, b300 = get_hardware("b200"), get_hardware("b300")
    assert 1.2 < float(flash(b200, 128)[0]) / float(flash(b300, 128)[0]) < 1.45


@SET
@given(d=st.sampled_from([64.0, 96.0, 128.0, 192.0]), s=st.integers(128, 32768),
       backward=st.booleans(), k=st.floats(1.0, 8.0))
def test_more_exponential_throughput_is_never_slower(d, s, backward, k):
    h = get_hardware("b200")
    slow = flash(h, d, s, backward=backward)[0]
    fast = flash(h.replace(sfu_ex2_per_sm_clk=h.sfu_ex2_per_sm_clk * k), d, s, backward=backward)[0]
    assert float(fast) <= float(slow) * (1 + 1e-6)


@SET
@given(d=st.sampled_from([64.0, 128.0]), s=st.integers(128, 32768), backward=st.booleans())
def test_time_is_at_least_either_bound(d, s, backward):
    """A fused call never beats its matmul FLOPs at peak, nor its exponentials at the SFU rate."""
    h = get_hardware("gb200")
    r = rates(h, 1)
    t = float(flash_attention_time_s(1, 32, 8, s, s, d, 0.5, r.peak_16_flops_per_s, 0.7,
                                     r.hbm_bw_bytes_per_s, r.l2_bw_bytes_per_s, h.l2_bytes,
                                     h.num_sms, h.smem_per_sm_bytes, 2.0, h.kernel_launch_s,
                                     backward, r.exp_per_s))
    scores = 32 * s * s * 0.5
    flops = scores * d * (10.0 if backward else 4.0)
    assert t >= flops / float(r.peak_16_flops_per_s) * (1 - 1e-5)
    assert t >= float(exp_time_s(scores, r.exp_per_s)) * (1 - 1e-5)


def test_decode_charges_exponentials_on_its_compute_side():
    """Memory-bound GQA decode is unchanged; an MLA-like decode (many heads per latent row,
    compute-bound) slows by exactly its exponentials."""
    h = get_hardware("b200")
    r = rates(h, 1)
    args = (r.peak_16_flops_per_s, h.eff_attn, r.hbm_bw_bytes_per_s, 1.0, h.kernel_launch_s)
    gqa = [float(decode_attention_time_s(64, 32, 8, 4096, 128, *args, x)) for x in (0.0, r.exp_per_s)]
    assert gqa[1] == pytest.approx(gqa[0])
    mla = [float(decode_attention_time_s(64, 128, 1, 4096, 576, *args, x)) for x in (0.0, r.exp_per_s)]
    assert mla[1] - mla[0] == pytest.approx(64 * 128 * 4096 / float(r.exp_per_s), rel=1e-4)


def test_without_exp_inverts_the_end_to_end_fraction():
    e = without_exp(0.5, 256.0, 512.0)
    assert 1.0 / (1.0 / e + 256.0 / 512.0) == pytest.approx(0.5)
    assert GENERATIONS["cdna3"].sfu_ex2_per_sm_clk == 0.0        # not modelled on AMD


BASE = {"base": "b200"}


def test_hardware_file_sets_or_inherits_the_sfu_rate():
    assert hardware_from_dict(dict(BASE), "f.toml", "x").sfu_ex2_per_sm_clk == 16.0
    assert hardware_from_dict({"base": "gb300"}, "f.toml", "x").sfu_ex2_per_sm_clk == 32.0
    assert hardware_from_dict({**BASE, "sfu_ex2_per_sm_clk": 64}, "f.toml", "x").sfu_ex2_per_sm_clk == 64.0


@pytest.mark.parametrize("bad", ["fast", -1, float("inf"), float("nan"), True, 1e9])
def test_bad_sfu_rate_is_a_one_line_error(bad):
    with pytest.raises(InputError) as e:
        hardware_from_dict({**BASE, "sfu_ex2_per_sm_clk": bad}, "f.toml", "x")
    msg = str(e.value)
    assert "sfu_ex2_per_sm_clk" in msg and "f.toml" in msg and "\n" not in msg


def test_study_variant_knob_sets_the_sfu_rate():
    """``sfu = "2x"`` on a B200 is Blackwell Ultra's 32; the knob takes whole counts only."""
    from dse.spec.variants import parse_variants
    v = parse_variants([{"name": "ultra", "base": "b200", "sfu": "2x"}], "s.toml")[0]
    assert v.sfu_ex2_per_sm_clk == 32.0
    assert float(rates(v, 1).exp_per_s) == pytest.approx(2 * float(rates(get_hardware("b200"), 1).exp_per_s))
    for bad in ("1.03x", "fast", True):
        with pytest.raises(InputError, match="sfu"):
            parse_variants([{"name": "x", "base": "b200", "sfu": bad}], "s.toml")
