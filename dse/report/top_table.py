"""The sweep's top-N table for a terminal: exact ties dropped (and counted), every
breakdown term shown, the width held to ``width`` characters.

* **Exact ties**: rows with the same hardware, step time, memory and breakdown that differ
  only in a knob with no effect on this point (``selective`` vs ``none`` recompute under
  FlashAttention, a ZeRO stage whose savings are not needed, ...).  The fastest row of
  each tie group is kept; :func:`drop_ties` says how many were dropped and which knobs
  they differed in.
* **Width**: headers are short (a legend line names them); a column that holds the same
  value in every row shown moves to one "same in every row" line; if the table is still
  wider than ``width``, pandas wraps it into blocks of at most ``width`` characters.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dse.train.step import BREAKDOWN

KNOBS = ("tp", "pp", "dp", "cp", "ep", "mbs", "vpp", "recompute", "zero", "sp")
HEADERS = {
    "step_time_s": "step_s", "step_time_lo_s": "step_lo", "step_time_hi_s": "step_hi",
    "mem_weights_gib": "m_wts", "mem_grads_gib": "m_grad", "mem_optimizer_gib": "m_opt",
    "mem_activations_gib": "m_act", "mem_reserve_gib": "m_rsv", "tokens_per_s": "tok/s", "mfu": "mfu", "mem_gib": "mem_GiB",
    "compute_s": "compute", "recompute_s": "recomp", "tp_comm_s": "tp_comm",
    "cp_comm_s": "cp_comm", "ep_comm_s": "ep_comm", "pp_comm_s": "pp_comm",
    "bubble_s": "bubble", "dp_comm_s": "dp_comm", "optimizer_s": "optim",
    "gpu_power_w": "W/GPU", "energy_kwh_per_mtok": "kWh/Mtok", "gpu_hours_per_mtok": "GPUh/Mtok",
    "usd_per_mtok": "$/Mtok", "train_days": "train_d", "train_mwh": "train_MWh",
    "train_usd": "train_$",
}
LEGEND = ("step_s: seconds per step (step_lo-step_hi: the 80 % band of the calibration "
          "residuals, docs/accuracy.md); m_wts/m_grad/m_opt/m_act/m_rsv: GiB per GPU of weights, "
          "gradients, optimizer, activations, allocator reserve; tok/s: tokens per second (whole job); mem_GiB: peak "
          "per GPU; exposed seconds per step: compute, recomp(ute), tp/cp/ep/pp/dp_comm, "
          "bubble, optim(izer)")
ENERGY_LEGEND = {"gpu_power_w": "W/GPU: mean power per GPU", "energy_kwh_per_mtok": "kWh/Mtok: energy",
                 "gpu_hours_per_mtok": "GPUh/Mtok: GPU-hours", "usd_per_mtok": "$/Mtok: cost",
                 "train_days": "train_d: days to train the token budget",
                 "train_mwh": "train_MWh: its energy", "train_usd": "train_$: its cost"}
TIE_KEY = ("hardware", "step_time_s", "mem_gib") + BREAKDOWN


def drop_ties(ok: pd.DataFrame) -> tuple[pd.DataFrame, int, list[str]]:
    """(rows without exact ties, how many were dropped, the knobs the dropped rows differ
    in from the row kept).  ``ok`` is sorted best first; the first row of each group stays."""
    key = [c for c in TIE_KEY if c in ok]
    kept = ok.drop_duplicates(subset=key, keep="first")
    dropped = len(ok) - len(kept)
    knobs: list[str] = []
    if dropped:
        groups = ok.groupby(key, sort=False, dropna=False)
        varying = groups[[k for k in KNOBS if k in ok]].nunique(dropna=False)
        knobs = [k for k in varying.columns if (varying[k] > 1).any()]
    return kept, dropped, knobs


def top_rows(ok: pd.DataFrame, n: int) -> tuple[pd.DataFrame, int, list[str]]:
    """The ``n`` best rows without exact ties, the number of rows tied with them (dropped),
    and the knobs those differ in."""
    kept, _, _ = drop_ties(ok)
    top = kept.head(n)
    key = [c for c in TIE_KEY if c in ok]
    tied = ok.merge(top[key], on=key, how="inner")
    _, dropped, knobs = drop_ties(tied)
    return top, dropped, knobs


def _fmt(col: str):
    if col in ("tokens_per_s", "gpu_power_w", "train_usd"):
        return lambda x: f"{x:,.0f}"
    if col == "train_days":
        return lambda x: f"{x:,.1f}"
    if col == "mfu":
        return lambda x: f"{x:.3f}"
    if col.startswith("mem_"):
        return lambda x: f"{x:.2f}"
    if col in ("energy_kwh_per_mtok", "gpu_hours_per_mtok", "usd_per_mtok"):
        return lambda x: f"{x:.3g}" if abs(x) < 1 else f"{x:.2f}"
    return lambda x: f"{x:.3f}"


def format_top(rows: pd.DataFrame, columns: list[str], width: int = 120) -> str:
    """``rows[columns]`` as text at most ``width`` characters wide (see the module doc)."""
    view = rows[[c for c in columns if c in rows]].copy()
    same = []
    if len(view) > 1:
        for c in list(view.columns):
            if view[c].nunique(dropna=False) == 1:
                v = view[c].iloc[0]
                same.append(f"{HEADERS.get(c, c)} {_fmt(c)(v) if isinstance(v, (float, np.floating)) else v}")
                view = view.drop(columns=c)
    fmts = {c: _fmt(c) for c in view.columns if pd.api.types.is_float_dtype(view[c])}
    view = view.rename(columns=HEADERS)
    fmts = {HEADERS.get(c, c): f for c, f in fmts.items()}
    text = view.to_string(index=False, formatters=fmts, line_width=width)
    lines = []
    if same:
        line = "same in every row: " + ", ".join(same)
        lines.append(wrap(line, width))
    lines.append(text)
    energy = [v for c, v in ENERGY_LEGEND.items() if c in columns and c in rows]
    legend = [LEGEND] + (["; ".join(energy) + "; /Mtok: per million tokens; power model: "
                          "dse/cost/energy.py"] if energy else [])
    lines += [wrap("(" + l + ")", width) for l in legend]
    return "\n".join(lines)


def wrap(text: str, width: int) -> str:
    import textwrap
    return "\n".join(textwrap.wrap(text, width=width, subsequent_indent="  ", break_on_hyphens=False))
