"""dse.spec.efficiency.fp4_efficiency: a wider 4-bit datapath on the same SM keeps the
per-tile work, so its fraction of the (higher) fp4 peak falls; the reference SKU keeps the
generation's value; the catalog applies it by each SKU's datasheet fp4 FLOP per SM per clock."""

import pytest
from hypothesis import given, settings, strategies as st

from dse.spec.efficiency import GENERATIONS, b200_sm_gemm, fp4_efficiency
from dse.spec.hardware import catalog

BW = GENERATIONS["blackwell"]


def test_reference_keeps_the_generation_value_and_ultra_follows_its_datapath():
    """The datapath law runs from the generation's values (Hopper's, which B300 / GB300
    keep); B200 / GB200 carry their own measured fractions (``b200_sm_gemm``, fp4 at the
    same fp4 / fp8 ratio), which the reference's unit datapath ratio leaves as they are."""
    assert fp4_efficiency(BW.gemm_fp8, BW.gemm_fp4, 1.0) == pytest.approx(BW.gemm_fp4)
    hw = catalog()
    for name in ("b200", "gb200"):
        assert float(hw[name].eff_gemm_fp4) == pytest.approx(b200_sm_gemm()[2], rel=1e-6)
    want = 1.0 / (1.0 / BW.gemm_fp8 + 1.5 * (1.0 / BW.gemm_fp4 - 1.0 / BW.gemm_fp8))
    for name in ("b300", "gb300"):
        assert float(hw[name].eff_gemm_fp4) == pytest.approx(want, rel=2e-3)
    assert want < BW.gemm_fp4
    # the time per fp4 FLOP the wider datapath saves is only the MMA part: a 1.5x wider 4-bit
    # datapath on the same SM is faster, but by less than the 1.5x peak
    speedup = 1.5 * float(hw["b300"].eff_gemm_fp4) / BW.gemm_fp4
    assert 1.0 < speedup < 1.5


@settings(max_examples=60, deadline=None)
@given(e8=st.floats(0.3, 0.95), share=st.floats(0.3, 0.99), r1=st.floats(0.5, 4.0), r2=st.floats(0.5, 4.0))
def test_fraction_of_peak_falls_and_absolute_rate_rises_with_the_datapath(e8, share, r1, r2):
    e4 = e8 * share
    lo, hi = sorted((r1, r2))
    f_lo, f_hi = fp4_efficiency(e8, e4, lo), fp4_efficiency(e8, e4, hi)
    assert f_hi <= f_lo + 1e-12                    # a smaller fraction of a larger peak ...
    assert hi * f_hi >= lo * f_lo - 1e-12          # ... but never a lower absolute rate
    assert 0.0 < f_hi <= e8


def test_no_fp4_reference_or_no_shortfall_leaves_it_unchanged():
    assert fp4_efficiency(0.6, 0.45, 0.0) == 0.45
    assert fp4_efficiency(0.45, 0.45, 1.5) == 0.45
