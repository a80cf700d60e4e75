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
at or below the reference power keeps the law's value up to the generation's maximum boost
clock over its datasheet clock (``max_boost_hz / f_sku``): NVIDIA quotes the PCIe cards'
tensor peaks at a clock well below what their silicon reaches (H100 / H200 NVL: 1.545 GHz
quoted, 1.785 GHz maximum boost), so the quoted clock is no ceiling.  H100 NVL (400 W) and
H100 PCIe (350 W) stay below 1 (0.84, 0.87); H200 NVL (600 W, the H200's 141 GB at the
NVL's quoted clock) gets 1.093 -- the cube law's 0.923 of the 700 W SXM's sustained clock.
(Until this revision such a SKU was capped at 1, "its sustained clock cannot exceed its own
rated clock by more than the reference's does", an assumption with no source; it bound only
H200 NVL, whose MLPerf Inference v5.1 Offline runs it predicted 21-23 % slow,
``tests/data/published_mlperf_inf_newhw.csv``.)  Above the reference power (H200 at
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

Constants (global per generation; a generation without an entry gets 1 everywhere).  The
law carries over only to SKUs with the reference's tensor datapath -- the same datasheet
dense bf16 / fp8 / fp4 FLOP per SM per clock (``flop_per_sm_clk``, within 2 %): the
coefficient ``k`` is a property of the SM design, so another SM (another die) gets 1.

* Hopper reference: H100 SXM, 700 W (H100 datasheet "up to 700 W"), 132 SMs, 1.83 GHz
  tensor clock (catalog ``h100-sxm-80gb``), 4096 / 8192 / 0 FLOP per SM per clock
  (989.4e12 / (132 x 1.83e9)).
* Hopper ``static_w`` -- the power that does not scale with the SM clock (leakage, HBM and its
  PHYs, NVLink SerDes, board): FITTED on the calibration set only, one value for Hopper,
  from the pair of MLPerf v4.1 Llama-2-70B Offline runs on one H200 at 700 W and 1000 W
  TGP (i077 / i079): scan 0 / 110 / 200 / 220 / 240 / 260 W -> predicted per-GPU ratio
  1000 W / 700 W 1.104 / 1.120 / 1.140 / 1.145 / 1.150 / 1.156 against the measured 1.147,
  so 230 W (a third of the 700 W; the HBM stacks alone draw ~100-150 W at full bandwidth,
  :mod:`dse.studies.codesign_power`).  The H100 NVL (400 W) rows were not used for it.
* Blackwell reference: B200, 1000 W (HGX B200 spec table "Max TDP configurable up to
  1,000 W"), 148 SMs, 1.86 GHz quoted tensor clock (catalog ``b200``), 8192 / 16384 /
  32768 dense bf16 / fp8 / fp4 FLOP per SM per clock (NVIDIA/cudnn-frontend PR #314,
  ``_FLOPS_PER_CLOCK_PER_SM`` "BF16/FP16 dense = 8192, FP8/MXFP8 dense = 16384 on
  Blackwell DC").  It IS power-limited under tensor load: flashinfer-ai/flashinfer PR #2899
  (2026-03) measures back-to-back BF16 FA4 attention on B200 pulling ~1000 W while "SM
  clocks drop from 1965 MHz to ~1580 MHz", TFLOP/s falling 1450 -> 1237 (-15 %).  So GB200
  (same SM, 1200 W) gets the cube law relative to it: its datasheet peaks are quoted at
  2.06 GHz = its maximum boost (nvml max 2062 MHz on GB200, cudnn-frontend PR #314), which
  it does not sustain at 1200 W; the law gives 1.097 x B200's sustained clock, i.e.
  ``power_clock`` 1.097 x (148 x 1.86) / (148 x 2.06) = 0.991.  B300 / GB300 (Blackwell
  Ultra: 13.5 / 15 PF dense fp4 = 49152 FLOP per SM per clock, 1.5x B200's) are another SM
  and get 1 -- consistent with their datasheets, which quote B300 at 1100 W with B200's
  1000 W bf16 / fp8 peaks (the extra power goes to the wider fp4 datapath and the 12-high
  HBM3e stacks, not to the clock); RTX PRO 6000 (GB202, 1024 bf16 FLOP per SM per clock)
  likewise.
* Blackwell ``static_w`` = 377 W, NOT FITTED (no Blackwell calibration row): the idle power
  of an air-cooled B200, 137 W (ROCm/legacy-rocm-build issue #5219, 2025-08, nvidia-smi
  screenshot, "air cooled B200 idle power draw 137W"), plus HBM3e at full bandwidth, 7.7
  TB/s x 8 bit x 3.9 pJ/bit = 240 W (:data:`dse.cost.energy.HBM_PJ_PER_BIT`).  The same
  construction on Hopper gives 88-145 W idle (thonking.ai, "Strangely, Matrix
  Multiplications ... Run Faster When Given Predictable Data", H100 idle 88 W;
  wilicc/gpu-burn issue #114, H100 80GB HBM3 in P0 with memory allocated 140-145 W) + 105 W
  HBM = 193-250 W, bracketing the fitted 230 W.  ``max_power_w`` 1200 W: the highest rated
  power of a SKU with this SM (GB200); no measurement reaches beyond it, so the clock is
  held there (1.097 x 1580 = 1733 MHz, below the 2062 MHz ``max_boost_hz``, GB200's nvml
  maximum, cudnn-frontend PR #314).  A check of the law's strength on the related Blackwell
  Ultra part (not used for a constant): facebookexperimental/triton PR #2023 measures GB300
  cuBLAS GEMMs at ~617 TFLOP/s under a 500 W cap vs ~1600-2174 at its 1400 W rating, a
  drop to 0.28-0.39 where this law with 377 W static predicts 0.49 -- if anything the law
  is mild about Blackwell's power sensitivity.

* CDNA 3 reference: MI300X, 750 W (MI300X datasheet), 304 CUs, 2.1 GHz peak engine clock
  (catalog ``mi300x``), 2048 / 4096 / 0 dense bf16 / fp8 / fp4 FLOP per CU per clock
  (1307.4e12 / (304 x 2.1e9)); MI325X is the same XCD silicon at 1000 W with the same
  datasheet peaks, MI355X (CDNA 4, another CU) gets 1.  Both ARE power-limited under GEMM
  load, far below the 2.1 GHz they are quoted at: AMD's "Measuring Max-Achievable FLOPs -
  Part 2" (ROCm blogs, 2025-02-28, hipBLASLt-bench at the MAF shape, normal-distributed
  data, thermally settled, Table 1) measures the lowest-XCD median clock MI300X bf16 1207
  MHz / fp8 1230 / fp16 1115 against MI325X 1447 / 1464 / 1354 MHz -- ratios 1.199 / 1.190
  / 1.214.  ``static_w`` 400 W is the value that makes the cube law give those ratios
  (they imply 404 / 386 / 434 W; 400 W gives ((1000 - 400) / (750 - 400))^(1/3) = 1.197),
  i.e. a vendor microbenchmark, no serving or training row; it sits above idle + HBM alone
  (HBM3 at 5.3 TB/s x 8 bit x 3.9 pJ/bit = 165 W), the rest being the four IODs with their
  256 MB Infinity Cache and the Infinity Fabric, which run whatever the XCD clock.  The
  MI300X MAF fractions of peak (708 / 1307 = 0.54 bf16, 1273 / 2615 = 0.49 fp8) are the
  ``cdna3`` efficiency constants' own scale (:mod:`dse.spec.efficiency`: 0.50 / 0.45), so
  they already hold MI300X's sustained clock.  ``max_power_w`` 1000 W (MI325X, the highest
  CDNA 3 rating); ``max_boost_hz`` 2.1 GHz.

Blackwell against Hopper (why no further factor on B200 itself): the constants of
:mod:`dse.spec.efficiency` that Blackwell borrows from Hopper hold H100's sustained clock at
700 W, so B200's peak would need the ratio of the two sustained / quoted clock fractions.
B200's is 1580 / 1856 = 0.851 (PR #2899 above).  H100's is bounded, not measured: at most
1.68 / 1.83 = 0.918 (the 1000 W bound above), and a 1500 MHz lock is what H200 runners at
700 W sustain under full load (tile-ai/TileOPs PR #1588: they "cannot reliably sustain a
locked 1830 MHz ... under full load"), >= 0.82.  The ratio is 0.93-1.04, no evidence for a
factor other than 1, so none is applied.  (Whole-GEMM fractions, which also hold kernel
maturity, differ more: bf16 8192^3 torch.matmul reaches 1.42 of 2.25 PF = 0.631 on B200,
pytorch/ao PR #2427, 2025-06, against 797.5 of 989 = 0.806 on H100 SXM,
zzc0721/torch-performance-test-data issue #79 -- that is a ``gemm`` efficiency question,
:mod:`dse.spec.efficiency`, not a clock one.)  A shape-for-shape sweep in one harness
answers it for B200's SM: 0.87 / 0.89 of H100's fraction (bf16 / fp8), which the catalog's
B200 and GB200 entries now carry (:func:`dse.spec.efficiency.b200_sm_gemm`); it holds the
sustained-clock part and the kernels' together, and GB200's cube-law clock stays on top.

Units: watts, hertz.
"""

from __future__ import annotations

import math
from typing import NamedTuple


class PowerReference(NamedTuple):
    tdp_w: float          # the reference SKU's power limit
    num_sms: float
    clock_hz: float       # its datasheet tensor clock
    static_w: float       # power that does not scale with the SM clock
    max_power_w: float    # highest power limit the evidence reaches: the clock is held above it
    max_boost_hz: float   # the datasheet maximum boost clock (the ceiling it stays below)
    flop_per_sm_clk: tuple[float, float, float]  # dense bf16 / fp8 / fp4 FLOP per SM per clock


REFERENCE: dict[str, PowerReference] = {
    "hopper": PowerReference(tdp_w=700.0, num_sms=132.0, clock_hz=1.83e9, static_w=230.0,
                             max_power_w=1000.0, max_boost_hz=1.98e9,
                             flop_per_sm_clk=(4096.0, 8192.0, 0.0)),
    # B200 at 1000 W; static 137 W idle + 240 W HBM at 7.7 TB/s (module docstring, NOT FITTED)
    "blackwell": PowerReference(tdp_w=1000.0, num_sms=148.0, clock_hz=1.86e9, static_w=377.0,
                                max_power_w=1200.0, max_boost_hz=2.062e9,
                                flop_per_sm_clk=(8192.0, 16384.0, 32768.0)),
    # MI300X at 750 W; static 400 W from AMD's measured MAF clocks of MI300X / MI325X
    # (module docstring: the one CDNA 3 pair measured under the same GEMM)
    "cdna3": PowerReference(tdp_w=750.0, num_sms=304.0, clock_hz=2.1e9, static_w=400.0,
                            max_power_w=1000.0, max_boost_hz=2.1e9,
                            flop_per_sm_clk=(2048.0, 4096.0, 0.0)),
}


SAME_SM_TOL = 0.02   # datasheet rounding of the quoted clock (B200 1.86 vs 2250e12 / (148 x 8192) = 1.856)


def same_sm(ref: PowerReference, flop_per_sm_clk) -> bool:
    """Whether a SKU's datasheet dense bf16 / fp8 / fp4 FLOP per SM per clock match the
    reference's within :data:`SAME_SM_TOL` (``None``: assumed to match)."""
    if flop_per_sm_clk is None:
        return True
    return all(abs(float(x) - r) <= SAME_SM_TOL * max(r, 1.0) for x, r in zip(flop_per_sm_clk, ref.flop_per_sm_clk))


def power_clock(generation: str, power_w: float, num_sms: float, clock_hz: float,
                flop_per_sm_clk=None) -> float:
    """Multiplier on the datasheet tensor peak (and L2 bandwidth) of a SKU that sustains
    ``power_w`` under load (module docstring); 1 without a reference for ``generation``.
    ``power_w`` must be a finite number > 0 (ValueError otherwise); above the reference's
    ``max_power_w`` it counts as ``max_power_w``.  A SKU whose tensor datapath differs from
    the reference's (``flop_per_sm_clk``, :func:`same_sm`) has another dynamic power per SM
    per clock, so the law does not carry over: 1."""
    if not (math.isfinite(float(power_w)) and float(power_w) > 0.0):
        raise ValueError(f"power must be a finite number > 0 W, but got {power_w!r}")
    ref = REFERENCE.get(str(generation))
    if ref is None or not same_sm(ref, flop_per_sm_clk):
        return 1.0
    if power_w == ref.tdp_w and num_sms == ref.num_sms and clock_hz == ref.clock_hz:
        return 1.0
    held_w = min(float(power_w), ref.max_power_w)
    dyn = (held_w - ref.static_w) / (ref.tdp_w - ref.static_w)
    if dyn <= 0.0:
        raise ValueError(f"power {power_w} W is at or below the static power {ref.static_w} W")
    sustained = (dyn * ref.num_sms / float(num_sms)) ** (1.0 / 3.0)
    m = sustained * (ref.num_sms * ref.clock_hz) / (float(num_sms) * float(clock_hz))
    return min(m, ref.max_boost_hz / float(clock_hz)) if power_w <= ref.tdp_w else m
