"""When a report may name a physical regime: the thresholds and the small computations
behind every sentence of the study reports that explains *why* (compute-bound,
bandwidth-bound, "the throttle slowed compute too").  A report states such a sentence
only when the function here says the study's numbers support it, and otherwise says
what the numbers are."""

from __future__ import annotations

import math

#: A step (or phase) is called compute-bound when less than this share of its time
#: disappears with unlimited HBM bandwidth at the same layout.
COMPUTE_BOUND_MAX_HBM_SHARE = 0.10
#: A cache change "cannot matter" when an unlimited L2 saves less than this share.
L2_NEGLIGIBLE_SHARE = 0.01
#: Two HBM-bound shares implied by published speedups agree within this many share
#: points (absolute: 0.05 = 5 points).
SHARE_AGREE_TOL = 0.05
#: An implied share is "far beyond" a measured one when at least this many times it.
FAR_BEYOND_FACTOR = 2.0
#: A throttled variant "loses little" against its unthrottled twin when it keeps at least
#: this fraction of the twin's speedup at every point.
LOSES_LITTLE = 0.95
#: The gain is "diluted at large GPU counts" when the speedup at the largest count is
#: below the best over the counts by more than this relative amount.
DILUTION_MIN = 1e-3


def compute_bound(hbm_share_max: float) -> bool:
    """Compute-bound: the largest HBM-bound share is below the threshold."""
    return math.isfinite(hbm_share_max) and hbm_share_max < COMPUTE_BOUND_MAX_HBM_SHARE


def l2_negligible(l2_share_max: float) -> bool:
    return math.isfinite(l2_share_max) and l2_share_max < L2_NEGLIGIBLE_SHARE


def implied_share(speedup: float, r: float) -> float:
    """Share s of the time that scales with HBM bandwidth for an r-fold faster HBM to give
    ``speedup = 1 / (1 - s + s / r)`` (bandwidth-only change)."""
    return (1 - 1 / speedup) / (1 - 1 / r)


def implied_share_clock(speedup: float, r: float, throttle: float) -> float:
    """The same when the throttle also derates the clocks: the rest slows by ``1 - throttle``,
    ``1 / speedup = (1 - s) / c + s / r`` with ``c = 1 - throttle``."""
    c = 1 - throttle
    return (1 / speedup - 1 / c) / (1 / r - 1 / c)


def agree(a: float, b: float, tol: float = SHARE_AGREE_TOL) -> bool:
    return math.isfinite(a) and math.isfinite(b) and abs(a - b) <= tol


def throttle_verdict(s_twin: float, s_bandwidth_only: float, s_clock: float,
                     tol: float = SHARE_AGREE_TOL) -> str:
    """How a published throttled figure fits its unthrottled twin's: ``"clock"`` when the
    share implied with clock derating agrees with the twin's and the bandwidth-only one
    does not (the throttle most likely slowed compute too), ``"bandwidth"`` in the
    opposite case, ``"both"`` / ``"neither"`` otherwise (the numbers cannot tell)."""
    c, b = agree(s_clock, s_twin, tol), agree(s_bandwidth_only, s_twin, tol)
    return "both" if c and b else "clock" if c else "bandwidth" if b else "neither"


def far_beyond(implied: float, measured_max: float) -> bool:
    return math.isfinite(implied) and implied >= FAR_BEYOND_FACTOR * measured_max


def gemm_intensity(model, seq: int, mbs: int, tp: int, cp: int = 1) -> tuple[float, float]:
    """Arithmetic intensity (FLOP/byte, bf16, compulsory traffic) of the FC1 GEMM of one
    layer: M = mbs*seq/cp tokens, N = ffn*(1+gated)/tp, K = hidden;
    ``2MNK / (2 (MK + KN + MN))``.  Returns (intensity, M)."""
    m = mbs * seq / cp
    n = model.ffn_hidden_size * (1 + model.gated_mlp) / tp
    k = model.hidden_size
    return 2 * m * n * k / (2.0 * (m * k + k * n + m * n)), m


def attention_intensity(seq: int, cp: int = 1) -> float:
    """Arithmetic intensity (FLOP/byte, bf16, compulsory traffic) of causal FlashAttention
    forward per head: q = seq/cp query tokens against kv = seq keys, FLOPs
    ``4 q kv d / 2``, bytes ``2 (2 q d + 2 kv d)`` (Q, O, K, V once); d cancels."""
    q, kv = seq / cp, float(seq)
    return (4 * q * kv / 2) / (2 * (2 * q + 2 * kv))
