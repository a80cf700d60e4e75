"""Markdown building blocks shared by the study reports: tables, ratios, ranges, layout
labels and the effective-rate ratios of two GPUs."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dse.spec.hardware import Hardware


def md_table(df: pd.DataFrame) -> str:
    """A Markdown table; floats as 3 significant digits, non-finite as ``–``."""
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        cells = []
        for c in cols:
            v = r[c]
            if isinstance(v, (float, np.floating)):
                cells.append("–" if not np.isfinite(v) else f"{v:.3g}")
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fmt_pivot(t: pd.DataFrame, index, columns, values) -> pd.DataFrame:
    """``t`` pivoted, cells as ``1.23`` (``–`` where missing), ready for :func:`md_table`."""
    p = t.pivot_table(index=index, columns=columns, values=values, sort=False, dropna=False)
    return p.apply(lambda c: c.map(lambda v: f"{v:.2f}" if np.isfinite(v) else "–")).reset_index()


def x(v: float, d: int = 2) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{v:.{d}f}x"


def pct(v: float) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{100 * v:.1f} %"


def pct_span(lo: float, hi: float) -> str:
    """``lo–hi %`` as :func:`pct` prints them, one value where they print alike."""
    a, b = pct(lo), pct(hi)
    return a if a == b else f"{a}–{b}"


def span(vals) -> str:
    """``lo–hix`` over the finite values (one value if they agree to 2 decimals)."""
    v = np.asarray([a for a in vals if np.isfinite(a)], dtype=float)
    if not len(v):
        return "n/a"
    lo, hi = f"{v.min():.2f}", f"{v.max():.2f}"
    return f"{lo}x" if lo == hi else f"{lo}–{hi}x"


def layout_label(r) -> str:
    """``TP2 PP8 DP16 mbs1 vpp5 none Z1 SP`` for a sweep row."""
    s = f"TP{int(r['tp'])} PP{int(r['pp'])} DP{int(r['dp'])}"
    if int(r["cp"]) > 1:
        s += f" CP{int(r['cp'])}"
    if int(r.get("ep", 1)) > 1:
        s += f" EP{int(r['ep'])}"
    s += f" mbs{int(r['mbs'])}"
    if int(r["vpp"]) > 1:
        s += f" vpp{int(r['vpp'])}"
    s += f" {r['recompute']} Z{int(r['zero'])}" + (" SP" if r["sp"] else "")
    return s


def ratios(hw: Hardware, base: Hardware) -> dict[str, float]:
    """Effective-rate ratios variant / baseline (throttle applied as in
    dse.spec.hardware.effective)."""
    clk = lambda h: float(h.clock_hz) * (1 - float(h.throttle) * float(h.throttle_clock))
    return {
        "hbm_bw": float(hw.hbm_bw_bytes_per_s) * (1 - float(hw.throttle))
        / (float(base.hbm_bw_bytes_per_s) * (1 - float(base.throttle))),
        "hbm_capacity": float(hw.hbm_bytes) / float(base.hbm_bytes),
        "l2": float(hw.l2_bytes) / float(base.l2_bytes),
        "l2_bw": float(hw.l2_bw_bytes_per_s) / float(base.l2_bw_bytes_per_s) * clk(hw) / float(hw.clock_hz)
        / (clk(base) / float(base.clock_hz)),
        "peak": float(hw.peak_bf16_flops_per_s) * clk(hw) / float(hw.clock_hz)
        / (float(base.peak_bf16_flops_per_s) * clk(base) / float(base.clock_hz)),
        "nvlink_bw": float(hw.nvlink_bw_bytes_per_s) / float(base.nvlink_bw_bytes_per_s),
        "nic_bw": float(hw.nic_bw_bytes_per_s) / float(base.nic_bw_bytes_per_s),
        "throttle": float(hw.throttle), "throttle_clock": float(hw.throttle_clock),
    }
