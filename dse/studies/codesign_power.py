"""Power, energy and cost per token of a co-design trial (dse/studies/codesign.py).

**Board power of a hardware variant.**  A trial changes clocks and HBM bandwidth, and a
variant's power must follow (otherwise a 2.4 GHz part would draw the 700 W of a 1.98 GHz
one and "energy per token" would reward any overclock).  The variant's TDP splits the
base's TDP into an HBM part and the rest (SMs, caches, links):

    P_hbm(bw)  = bw_bytes_per_s x 8 x HBM_PJ_PER_BIT x 1e-12          [W]
    TDP(hw)    = (TDP_base - P_hbm(bw_base)) x (f / f_base)^CLOCK_POWER_EXP + P_hbm(bw)

* ``HBM_PJ_PER_BIT = 3.9``: HBM2 access energy at full bandwidth, 3.9 pJ/bit (O'Connor et
  al., "Fine-Grained DRAM: Energy-Efficient DRAM for Extreme Bandwidth Systems", MICRO
  2017, Table 1/Fig. 2); an H100's 3.35 TB/s then draws ~105 W of its 700 W.
* ``CLOCK_POWER_EXP = 3``: CMOS dynamic power ``P = a C V^2 f`` with the supply voltage
  scaled about linearly with frequency across the DVFS range (Weste and Harris, "CMOS
  VLSI Design", 4th ed., sec. 5.2), so the non-HBM power goes as ``f^3``; leakage and
  the link SerDes are folded into it (a first-order model, stated as such).
* HBM capacity, L2 size and link bandwidths do not change the power here.

The average power over a step is then :func:`dse.cost.energy.gpu_power_w` (idle plus a
utilization-proportional part, Fan, Weber and Barroso, ISCA 2007) of that TDP and the
step's busy share; energy per million tokens is :mod:`dse.cost.energy`'s, times the PUE.

**Cost per million tokens** (total cost of ownership per GPU-hour, Barroso, Hölzle and
Ranganathan, "The Datacenter as a Computer", 3rd ed., 2018, ch. 6: capital expense
depreciated over its life plus operating expense, dominated by power)::

    usd_per_gpu_hour = gpu_cost x usd_per_cost_unit / (amortization_years x 8766 h)
    usd_per_mtok     = gpu_hours_per_mtok x usd_per_gpu_hour + kwh_per_mtok x usd_per_kwh

with ``gpu_cost`` the study's linear bill of materials (``[cost]``) and the prices in
``[tco]``; ``kwh_per_mtok`` includes the PUE.
"""

from __future__ import annotations

import numpy as np

from dse.cost.energy import J_PER_KWH, gpu_power_w, per_million_tokens, step_energy_j
from dse.spec.hardware import Hardware

HBM_PJ_PER_BIT = 3.9
CLOCK_POWER_EXP = 3.0
HOURS_PER_YEAR = 8766.0
BUSY = ("compute_s", "recompute_s", "optimizer_s")     # dse.cost.energy.BUSY_TERMS
#: [tco] defaults (USD); a study file overrides them
TCO_DEFAULTS = {"usd_per_cost_unit": 1000.0, "amortization_years": 4.0, "usd_per_kwh": 0.10, "pue": 1.2}


def hbm_power_w(hw: Hardware) -> float:
    return float(hw.hbm_bw_bytes_per_s) * 8 * HBM_PJ_PER_BIT * 1e-12


def variant_tdp_w(hw: Hardware, base: Hardware) -> float:
    """The board power of ``hw`` derived from ``base`` (module docstring)."""
    rest = float(base.tdp_w) - hbm_power_w(base)
    return rest * (float(hw.clock_hz) / float(base.clock_hz)) ** CLOCK_POWER_EXP + hbm_power_w(hw)


def per_token(step: dict, tdp_w: float, gpu_cost: float, gpus: int, tokens_per_step: float,
              tco: dict) -> dict:
    """Power (W/GPU), energy (kWh) and cost (USD) per million tokens of one best-layout
    step (``step``: step_time_s and the busy breakdown terms, seconds)."""
    t = float(step["step_time_s"])
    busy = sum(float(step[c]) for c in BUSY) / t
    power = float(gpu_power_w(tdp_w, np.float64(busy)))
    kwh = per_million_tokens(step_energy_j(power, gpus, t, tco["pue"]), tokens_per_step) / J_PER_KWH
    gpu_h = per_million_tokens(gpus * t / 3600.0, tokens_per_step)
    usd_h = gpu_cost * tco["usd_per_cost_unit"] / (tco["amortization_years"] * HOURS_PER_YEAR)
    return {"tdp_w": tdp_w, "gpu_power_w": power, "energy_kwh_per_mtok": kwh, "gpu_hours_per_mtok": gpu_h,
            "usd_per_gpu_hour": usd_h, "usd_per_mtok": gpu_h * usd_h + kwh * tco["usd_per_kwh"]}
