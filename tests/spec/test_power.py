"""Power-limited sustained clocks (dse.spec.power): reference-power SKUs untouched, the
cube law relative to the generation's reference, no double count of a low datasheet clock."""

import math

import pytest

from dse.errors import InputError
from dse.spec.hardware import catalog, hardware_from_dict, _raw_catalog
from dse.spec.power import REFERENCE, power_clock


def test_reference_power_skus_are_exactly_one():
    cat = catalog()
    for name in ("h100-sxm-80gb", "h200-sxm-141gb", "a100-sxm-80gb", "a100-sxm-40gb", "b200", "mi300x"):
        assert float(cat[name].power_clock) == 1.0, name


def test_cube_law_relative_to_reference():
    ref = REFERENCE["hopper"]
    up = power_clock("hopper", 1000.0, ref.num_sms, ref.clock_hz)
    want = ((1000.0 - ref.static_w) / (ref.tdp_w - ref.static_w)) ** (1 / 3)
    assert up == pytest.approx(want) and up > 1.0
    powers = [300.0, 400.0, 500.0, 700.0, 850.0, 1000.0]
    m = [power_clock("hopper", p, ref.num_sms, ref.clock_hz) for p in powers]
    assert all(a <= b for a, b in zip(m, m[1:]))          # more power never slows the clock


def test_low_datasheet_clock_is_not_counted_twice():
    nvl = catalog()["h100-nvl-94gb"]
    ref = REFERENCE["hopper"]
    cube = ((400.0 - ref.static_w) / (ref.tdp_w - ref.static_w)) ** (1 / 3)
    datasheet = float(nvl.clock_hz) / ref.clock_hz            # 1.545 / 1.83, already in its peak
    # the sustained tensor rate relative to the SXM is the cube law, not cube law x datasheet
    assert float(nvl.power_clock) * datasheet == pytest.approx(cube)
    assert 0.5 < float(nvl.power_clock) < 1.0


def test_gpu_power_of_a_module_and_bad_power():
    gh = catalog()["gh200"]
    assert 1.0 < float(gh.power_clock) < power_clock("hopper", 1000.0, 132, 1.83e9)
    raw = dict(_raw_catalog()["h100-sxm-80gb"], gpu_power_w=REFERENCE["hopper"].static_w)
    with pytest.raises(InputError, match="gpu_power_w"):
        hardware_from_dict(raw, "hw.toml", "x")


def test_row_power_limit_from_hardware_as_written():
    from dse.infer.predict_rows import predict_inference_row
    row = dict(id="t", model="llama2-70b", hardware="h200-sxm-141gb", gpus=1, tp=1,
               precision="fp8", engine="trtllm", scenario="offline_throughput",
               input_len=256, output_len=256)
    base = predict_inference_row(dict(row))
    hot = predict_inference_row(dict(row, hardware_as_written="h200 (CTS, 1000W TGP)"))
    assert base["status"] == hot["status"] == "ok"
    assert hot["predicted_output_tok_s"] > 1.05 * base["predicted_output_tok_s"]
    assert math.isclose(predict_inference_row(dict(row, power_w=700))["predicted_output_tok_s"],
                        base["predicted_output_tok_s"])


def test_clock_held_above_the_evidenced_power():
    """Above max_power_w (1000 W) the clock is held, so it stays below the 1.98 GHz max
    boost the module's assumption relies on; 10^6 W or 10^308 W no longer speed it up."""
    ref = REFERENCE["hopper"]
    at_max = power_clock("hopper", ref.max_power_w, ref.num_sms, ref.clock_hz)
    for p in (1001.0, 1500.0, 1e6, 1e308):
        assert power_clock("hopper", p, ref.num_sms, ref.clock_hz) == at_max
    # the 700 W sustained clock the assumption allows keeps the held clock within max boost
    assert ref.max_boost_hz / at_max <= ref.clock_hz


@pytest.mark.parametrize("p", [float("inf"), float("nan"), 0.0, -5.0])
def test_non_finite_or_non_positive_power_rejected(p):
    with pytest.raises(ValueError, match="finite number > 0"):
        power_clock("hopper", p, 132.0, 1.83e9)


def test_row_power_w_bounds_and_unapplied_note():
    import pandas as pd
    from dse.infer.predict_rows import predict_inference_frame
    row = dict(id="t", model="llama2-70b", hardware="h200-sxm-141gb", gpus=1, tp=1,
               precision="fp8", engine="trtllm", scenario="offline_throughput",
               input_len=256, output_len=256)
    rows = [dict(row, id="a", power_w=1000), dict(row, id="b", power_w=1e6),
            dict(row, id="c", power_w="inf"), dict(row, id="d", hardware="mi355x", engine="vllm (0.10.1)", power_w=600)]
    d = predict_inference_frame(pd.DataFrame(rows), "t.csv").set_index("id")
    assert d.at["b", "predicted_ttft_ms"] == d.at["a", "predicted_ttft_ms"]
    assert d.at["c", "status"].startswith("invalid: power_w: must be a finite number > 0")
    assert d.at["d", "status"].startswith("ok (power limit not applied: cdna4")


def test_blackwell_reference_b200_gb200_only():
    """B200 is the Blackwell reference (exactly 1); GB200 (same SM, 1200 W) gets the cube
    law over its 2.06 GHz quoted clock; Blackwell Ultra (B300 / GB300: 1.5x the fp4 FLOP per
    SM per clock) and RTX PRO 6000 (another SM) are another datapath and get 1."""
    from dse.spec.hardware import flop_per_sm_clk
    from dse.spec.power import same_sm
    cat = catalog()
    ref = REFERENCE["blackwell"]
    gb = cat["gb200"]
    cube = ((1200.0 - ref.static_w) / (ref.tdp_w - ref.static_w)) ** (1 / 3)
    assert float(gb.power_clock) == pytest.approx(cube * ref.clock_hz / float(gb.clock_hz))
    assert 0.95 < float(gb.power_clock) < 1.0       # GB200 is quoted at its max boost, 2.06 GHz
    # GB200's sustained tensor clock over B200's is the cube law, above 1
    assert float(gb.power_clock) * float(gb.clock_hz) / float(cat["b200"].clock_hz) == pytest.approx(cube)
    assert cube > 1.0
    for name in ("b200", "gb200"):
        assert same_sm(ref, flop_per_sm_clk(cat[name])), name
    for name in ("b300", "gb300", "rtx-pro-6000"):
        assert not same_sm(ref, flop_per_sm_clk(cat[name])), name
        assert float(cat[name].power_clock) == 1.0, name
    # more power on the reference SM never slows it; above max_power_w the clock is held
    m = [power_clock("blackwell", p, ref.num_sms, ref.clock_hz) for p in (500.0, 800.0, 1000.0, 1100.0, 1200.0)]
    assert all(a <= b for a, b in zip(m, m[1:])) and m[2] == 1.0
    top = power_clock("blackwell", ref.max_power_w, ref.num_sms, ref.clock_hz)
    assert power_clock("blackwell", 5000.0, ref.num_sms, ref.clock_hz) == top
    assert top * ref.clock_hz * 1580.0 / 1856.0 < ref.max_boost_hz   # held clock below max boost


def test_cdna3_reference_reproduces_amd_measured_clocks():
    """MI300X (750 W) is the CDNA 3 reference; MI325X, the same XCDs at 1000 W with the same
    datasheet peaks, sustains the cube-law clock, which with the 400 W static power is
    within 1 % of the MI325X / MI300X lowest-XCD median GEMM clocks AMD measured at the MAF
    shape (ROCm blogs "Measuring Max-Achievable FLOPs - Part 2", Table 1: bf16 1447 / 1207,
    fp8 1464 / 1230 MHz); MI355X (CDNA 4) has no reference and gets 1."""
    cat = catalog()
    assert float(cat["mi300x"].power_clock) == 1.0
    m = float(cat["mi325x"].power_clock)
    for mi325, mi300 in ((1447.0, 1207.0), (1464.0, 1230.0)):
        assert m == pytest.approx(mi325 / mi300, rel=0.01)
    assert float(cat["mi355x"].power_clock) == 1.0
    ref = REFERENCE["cdna3"]
    up = [power_clock("cdna3", p, ref.num_sms, ref.clock_hz) for p in (500.0, 750.0, 900.0, 1000.0, 1500.0)]
    assert all(a <= b for a, b in zip(up, up[1:])) and up[1] == 1.0 and up[-1] == up[-2]


def test_static_power_checked_only_on_the_reference_sm():
    raw = dict(_raw_catalog()["b200"], tdp_w=300)
    with pytest.raises(InputError, match="gpu_power_w"):
        hardware_from_dict(raw, "hw.toml", "x")
    # a 300 W card of another Blackwell SM is not held to B200's static power
    assert float(hardware_from_dict(dict(_raw_catalog()["rtx-pro-6000"], tdp_w=300), "hw.toml", "y").power_clock) == 1.0


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.floats(min_value=230.5, max_value=1e308, allow_nan=False, allow_infinity=False),
                min_size=2, max_size=6))
def test_power_clock_is_finite_monotone_and_bounded(powers):
    """Property: over any finite powers above the static power, the multiplier is finite,
    never falls as power rises, and never passes its value at max_power_w."""
    ref = REFERENCE["hopper"]
    ps = sorted(powers)
    m = [power_clock("hopper", p, ref.num_sms, ref.clock_hz) for p in ps]
    top = power_clock("hopper", ref.max_power_w, ref.num_sms, ref.clock_hz)
    assert all(math.isfinite(v) and 0 < v <= top for v in m)
    assert all(a <= b for a, b in zip(m, m[1:]))


def test_below_reference_power_is_capped_at_the_maximum_boost_not_the_quoted_clock():
    """A same-SM SKU below the reference power keeps the cube law's value above 1 (a datasheet
    clock quoted low, as the NVL cards'), but never past the generation's maximum boost clock."""
    ref = REFERENCE["hopper"]
    quoted = 1.545e9
    law = ((600.0 - ref.static_w) / (ref.tdp_w - ref.static_w)) ** (1 / 3) * ref.clock_hz / quoted
    assert power_clock("hopper", 600.0, ref.num_sms, quoted) == pytest.approx(law) and law > 1.0
    # half the SMs at nearly the reference power: the law would clock them past the boost
    assert power_clock("hopper", 690.0, ref.num_sms / 2, quoted) == pytest.approx(ref.max_boost_hz / quoted)
