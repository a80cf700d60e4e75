"""A serving row's stated power limit (``power_w``) goes through the same datapath check
as the catalog: a Blackwell Ultra SKU at its own TDP is unchanged (B200's cube law does
not apply to it, dse.spec.power), and a higher limit on B200 never makes it slower."""
from dse.infer.predict_rows import _power_limited
from dse.spec.hardware import get_hardware


def test_own_tdp_leaves_the_sku_unchanged():
    for name in ("b300", "b200", "h200-sxm-141gb"):
        hw = get_hardware(name)
        got = _power_limited({"power_w": float(hw.tdp_w)}, hw)
        assert float(got.power_clock) == float(hw.power_clock), name


def test_more_power_is_never_a_slower_clock_on_b200():
    hw = get_hardware("b200")
    clocks = [float(_power_limited({"power_w": p}, hw).power_clock) for p in (700.0, 1000.0, 1200.0)]
    assert clocks == sorted(clocks)
