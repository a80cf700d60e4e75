"""Co-design power and cost per token (dse/cost/energy.py: variant TDP, per-token cost)."""

from dse.spec.hardware import get_hardware
from dse.cost.energy import hbm_power_w, per_token, variant_tdp_w
from dse.spec.study import TCO_DEFAULTS


def test_variant_power_follows_clock_and_hbm_bandwidth():
    base = get_hardware("h100-sxm-80gb")
    assert abs(variant_tdp_w(base, base) - float(base.tdp_w)) < 1e-6
    fast = base.replace(clock_hz=base.clock_hz * 1.1)
    wide = base.replace(hbm_bw_bytes_per_s=base.hbm_bw_bytes_per_s * 2)
    rest = float(base.tdp_w) - hbm_power_w(base)
    assert abs(variant_tdp_w(fast, base) - (rest * 1.1 ** 3 + hbm_power_w(base))) < 1e-6
    assert abs(variant_tdp_w(wide, base) - float(base.tdp_w) - hbm_power_w(base)) < 1e-6
    assert 80 < hbm_power_w(base) < 130            # 3.35 TB/s x 8 x 3.9 pJ/bit


def test_cost_per_token_is_capex_plus_energy():
    step = {"step_time_s": 2.0, "compute_s": 1.0, "recompute_s": 0.0, "optimizer_s": 0.0}
    tco = dict(TCO_DEFAULTS)
    m = per_token(step, 700.0, 30.0, 1024, 2048 * 1024, tco)
    usd_h = 30.0 * tco["usd_per_cost_unit"] / (tco["amortization_years"] * 8766)
    assert abs(m["usd_per_mtok"] - (m["gpu_hours_per_mtok"] * usd_h + m["energy_kwh_per_mtok"] * tco["usd_per_kwh"])) < 1e-12
    busier = per_token({**step, "compute_s": 2.0}, 700.0, 30.0, 1024, 2048 * 1024, tco)
    assert busier["energy_kwh_per_mtok"] > m["energy_kwh_per_mtok"]
