"""Power-limited sustained clocks: how far a SKU's tensor clock sits from the reference SKU
its generation's efficiency constants were fitted on.

Under a full tensor-core load a GPU runs at its power limit, not at its datasheet boost
clock.  Board power is a static part plus CMOS dynamic power ``a C V^2 f`` per SM; across
the DVFS range the supply voltage scales about linearly with the clock, so the dynamic
part goes as ``N f^3`` (N SMs; Weste and Harris, "CMOS VLSI Design", 4th ed., sec. 5.2 --
the law :mod:`dse.studies.codesign_power` uses too; the static + ``f V^2`` split of GPU
power under DVFS is that of GPUWattch, Leng et al., ISCA 2013, and of the measurements
in Mei, Wang and Chu, "A Survey and Measurement Study of GPU DVFS on Energy
Conservation", Digital Communications and Networks 3(2), 2017).  At a power limit P:

    P = P_static + k N f^3   ->   f(P) / f(P_ref) = ((P - P_static) / (P_ref - P_static) x N_ref / N)^(1/3)

The efficiency constants (:mod:`dse.spec.efficiency`) are fitted at each generation's
reference SKU (Hopper: H100 SXM at 700 W), so they already hold that SKU's sustained
clock.  A SKU's datasheet peak is quoted at its own boost clock ``f_sku`` (catalog
``boost_clock_ghz``), so the multiplier on its peak is the sustained clock relative to
the reference over the datasheet clock relative to the reference:

    power_clock = (f(P) / f(P_ref)) x (N_ref f_ref) / (N f_sku)

-- the datasheet already lowers a low-power SKU's peak (H100 NVL: 1.545 GHz tensor clock
against the SXM's 1.83) and this counts only what the power limit takes beyond it.  A SKU
at or below the reference power is capped at 1 (its sustained clock cannot exceed its
own rated clock by more than the reference's does); above the reference power (H200 at
1000 W) the sustained clock rises with the cube law (ASSUMPTION: still below the 1.98 GHz
maximum boost, i.e. the 700 W reference is power-limited by at least that much, which the
H200 700 W / 1000 W pair of the calibration set shows).  That evidence reaches 1000 W
(``max_power_w``, the MLPerf H200 CTS 1000 W TGP runs): there the cube law gives the clock
1.179x its 700 W value, so the assumption says the 700 W sustained clock is at most
1.98 / 1.179 = 1.68 GHz.  Above ``max_power_w`` the clock is held at its value there: it
can never pass the maximum boost clock (``max_boost_hz``, H100 / H200 SXM datasheet
1.98 GHz), and where between 1000 W and that ceiling it saturates no measurement shows, so
the law is not extrapolated (a 10^6 W limit used to cut TTFT 4x).  Every reference-power SKU with
the reference's ``N f`` (H100 SXM, H200 SXM at 700 W) gets exactly 1.

Constants (global per generation; a generation without an entry gets 1 everywhere):

* Hopper reference: H100 SXM, 700 W (H100 datasheet "up to 700 W"), 132 SMs, 1.83 GHz
  tensor clock (catalog ``h100-sxm-80gb``).
* ``static_w`` -- the power that does not scale with the SM clock (leakage, HBM and its
  PHYs, NVLink SerDes, board): FITTED on the calibration set only, one value for Hopper,
  from the pair of MLPerf v4.1 Llama-2-70B Offline runs on one H200 at 700 W and 1000 W
  TGP (i077 / i079): scan 0 / 110 / 200 / 220 / 240 / 260 W -> predicted per-GPU ratio
  1000 W / 700 W 1.104 / 1.120 / 1.140 / 1.145 / 1.150 / 1.156 against the measured 1.147,
  so 230 W (a third of the 700 W; the HBM stacks alone draw ~100-150 W at full bandwidth,
  :mod:`dse.studies.codesign_power`).  The H100 NVL (400 W) rows were not used for it.

Units: watts, hertz.
"""

from __future__ import annotations

import math
from typing import NamedTuple


class PowerReference(NamedTuple):
    tdp_w: float          # the reference SKU's power limit
    num_sms: float
    clock_hz: float       # its datasheet tensor clock
    static_w: float       # power that does not scale with the SM clock (fitted)
    max_power_w: float    # highest power limit the evidence reaches: the clock is held above it
    max_boost_hz: float   # the datasheet maximum boost clock (the ceiling it stays below)


REFERENCE: dict[str, PowerReference] = {
    "hopper": PowerReference(tdp_w=700.0, num_sms=132.0, clock_hz=1.83e9, static_w=230.0,
                             max_power_w=1000.0, max_boost_hz=1.98e9),
}


def power_clock(generation: str, power_w: float, num_sms: float, clock_hz: float) -> float:
    """Multiplier on the datasheet tensor peak (and L2 bandwidth) of a SKU that sustains
    ``power_w`` under load (module docstring); 1 without a reference for ``generation``.
    ``power_w`` must be a finite number > 0 (ValueError otherwise); above the reference's
    ``max_power_w`` it counts as ``max_power_w``."""
    if not (math.isfinite(float(power_w)) and float(power_w) > 0.0):
        raise ValueError(f"power must be a finite number > 0 W, but got {power_w!r}")
    ref = REFERENCE.get(str(generation))
    if ref is None:
        return 1.0
    if power_w == ref.tdp_w and num_sms == ref.num_sms and clock_hz == ref.clock_hz:
        return 1.0
    held_w = min(float(power_w), ref.max_power_w)
    dyn = (held_w - ref.static_w) / (ref.tdp_w - ref.static_w)
    if dyn <= 0.0:
        raise ValueError(f"power {power_w} W is at or below the static power {ref.static_w} W")
    sustained = (dyn * ref.num_sms / float(num_sms)) ** (1.0 / 3.0)
    m = sustained * (ref.num_sms * ref.clock_hz) / (float(num_sms) * float(clock_hz))
    return min(m, 1.0) if power_w <= ref.tdp_w else m
