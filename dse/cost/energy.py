"""Power, energy, cost and time to train of one training step.

Power per GPU (linear in utilization, the server power model of Fan, Weber and Barroso,
"Power provisioning for a warehouse-sized computer", ISCA 2007, who found a server's
measured power well approximated by ``P_idle + (P_busy - P_idle) u`` in its utilization u)::

    P_gpu = P_idle + (TDP - P_idle) * u          [W]
    P_idle = IDLE_FRAC * TDP
    u      = BUSY_POWER_FRAC * busy_frac,  busy_frac = (compute_s + recompute_s + optimizer_s) / step_time_s

* ``busy_frac`` is the share of the step the GPU runs kernels (compute, recompute,
  optimizer step); exposed communication and the pipeline bubble count as idle (SMs wait
  on NCCL or on the previous stage; NCCL kernels occupy a few SMs and draw little).
* ``BUSY_POWER_FRAC = 0.8``: a GPU that runs LLM-training kernels all the time draws about
  80 % of its TDP, not 100 %.  Latif et al., "Empirical Measurements of AI Training Power
  Demand on a GPU-Accelerated Node" (IEEE Access 13, 2025; arXiv:2412.08602), measured a
  peak of 8.4 kW on an 8 x H100 HGX node training Llama2-13b, 18 % under its 10.2 kW
  rating "even with GPUs near full utilization"; Newkirk et al., "Empirically-Calibrated
  H100 Node Power Models" (arXiv:2506.14551), found compute-heavy training at 76 % of the
  rated node power and TDP-based estimates 27-37 % off.  0.8 lies between the two.
* ``IDLE_FRAC = 0.15``: a GPU holding a CUDA context and waiting draws ~15 % of TDP
  (~100 W of an H100's 700 W).  Vadari, "The Model Parking Tax" (arXiv:2605.23918),
  measured that a CUDA context lifts H100/A100 idle power by a discrete 26-50 W DVFS step
  over bare idle, independent of the memory held; 0.15 x TDP is a round figure for that
  idle-with-context state, not a fitted constant.

Energy of one step over the whole job, with an optional facility overhead (PUE, power
usage effectiveness, 1.0 = GPUs only)::

    E_step = P_gpu * gpus * step_time_s * pue     [J]

Per million tokens: ``E_step / tokens_per_step * 1e6`` (reported in kWh); GPU-hours per
million tokens ``gpus * step_time_s / 3600 / tokens_per_step * 1e6``, and with a price
``usd_per_gpu_hour`` the cost ``gpu_hours * usd_per_gpu_hour``.  Time to train a token
budget ``N``: ``N / tokens_per_s`` (``tokens_per_s`` counts the whole job's tokens).

**Board power of a hardware variant** (a co-design trial, :mod:`dse.studies.codesign`).
A trial changes clocks and HBM bandwidth, and a variant's power must follow (otherwise a
2.4 GHz part would draw the 700 W of a 1.98 GHz one and "energy per token" would reward
any overclock).  The variant's TDP splits the base's TDP into an HBM part and the rest
(SMs, caches, links)::

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

**Cost per million tokens of a trial** (total cost of ownership per GPU-hour, Barroso,
Hölzle and Ranganathan, "The Datacenter as a Computer", 3rd ed., 2018, ch. 6: capital
expense depreciated over its life plus operating expense, dominated by power)::

    usd_per_gpu_hour = gpu_cost x usd_per_cost_unit / (amortization_years x 8766 h)
    usd_per_mtok     = gpu_hours_per_mtok x usd_per_gpu_hour + kwh_per_mtok x usd_per_kwh

with ``gpu_cost`` the study's linear bill of materials (``[cost]``) and the prices in
``[tco]`` (:data:`dse.spec.study.TCO_FIELDS_UNITS`); ``kwh_per_mtok`` includes the PUE.

GPU power only: CPUs, NICs, switches and fans are not modelled (fold them into ``pue``).
Every function is plain arithmetic on scalars or arrays (numpy or jax), so the same
formula serves the DataFrame post-processing and a jitted objective.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dse.errors import InputError, require
from dse.spec.hardware import Hardware

IDLE_FRAC = 0.15          # idle power / TDP (see the module docstring)
BUSY_POWER_FRAC = 0.8     # power / TDP of a GPU running training kernels all the time
J_PER_KWH = 3.6e6
BUSY_TERMS = ("compute_s", "recompute_s", "optimizer_s")
HBM_PJ_PER_BIT = 3.9      # HBM access energy (module docstring)
CLOCK_POWER_EXP = 3.0     # non-HBM board power ~ clock^3 (module docstring)
HOURS_PER_YEAR = 8766.0


def gpu_power_w(tdp_w, busy_frac, idle_frac=IDLE_FRAC, busy_power_frac=BUSY_POWER_FRAC):
    """Average power of one GPU over a step [W]:
    ``idle + (TDP - idle) * busy_power_frac * busy_frac`` with ``idle = idle_frac * TDP``;
    ``busy_frac`` is clipped to [0, 1]."""
    clipped = (busy_frac.clip(0.0, 1.0) if hasattr(busy_frac, "clip")     # numpy or jax
               else min(max(busy_frac, 0.0), 1.0))
    u = busy_power_frac * clipped
    idle = idle_frac * tdp_w
    return idle + (tdp_w - idle) * u


def step_energy_j(power_w, gpus, step_time_s, pue=1.0):
    """Energy of one step over the whole job [J]: ``P_gpu * gpus * step_time_s * pue``."""
    return power_w * gpus * step_time_s * pue


def per_million_tokens(x_per_step, tokens_per_step):
    """A per-step quantity per million tokens: ``x / tokens_per_step * 1e6``."""
    return x_per_step / tokens_per_step * 1e6


def hbm_power_w(hw: Hardware) -> float:
    """HBM power at full bandwidth [W]: ``bw x 8 x HBM_PJ_PER_BIT x 1e-12``."""
    return float(hw.hbm_bw_bytes_per_s) * 8 * HBM_PJ_PER_BIT * 1e-12


def variant_tdp_w(hw: Hardware, base: Hardware) -> float:
    """The board power of ``hw`` derived from ``base`` [W] (module docstring):
    ``(TDP_base - P_hbm(base)) (f / f_base)^3 + P_hbm(hw)``."""
    rest = float(base.tdp_w) - hbm_power_w(base)
    return rest * (float(hw.clock_hz) / float(base.clock_hz)) ** CLOCK_POWER_EXP + hbm_power_w(hw)


def per_token(step: dict, tdp_w: float, gpu_cost: float, gpus: int, tokens_per_step: float,
              tco: dict) -> dict:
    """Power (W/GPU), energy (kWh) and cost (USD) per million tokens of one best-layout
    step (``step``: step_time_s and the :data:`BUSY_TERMS`, seconds; ``tco``: the
    ``[tco]`` prices, module docstring)."""
    t = float(step["step_time_s"])
    busy = sum(float(step[c]) for c in BUSY_TERMS) / t
    power = float(gpu_power_w(tdp_w, np.float64(busy)))
    kwh = per_million_tokens(step_energy_j(power, gpus, t, tco["pue"]), tokens_per_step) / J_PER_KWH
    gpu_h = per_million_tokens(gpus * t / 3600.0, tokens_per_step)
    usd_h = gpu_cost * tco["usd_per_cost_unit"] / (tco["amortization_years"] * HOURS_PER_YEAR)
    return {"tdp_w": tdp_w, "gpu_power_w": power, "energy_kwh_per_mtok": kwh, "gpu_hours_per_mtok": gpu_h,
            "usd_per_gpu_hour": usd_h, "usd_per_mtok": gpu_h * usd_h + kwh * tco["usd_per_kwh"]}


def parse_tokens(s: str | float | int, where: str = "--train-tokens") -> float:
    """A token count: a number, or one with a suffix K, M, B (or G), T: ``"15T"`` = 1.5e13."""
    scale = {"K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
    txt = str(s).strip()
    mult = scale.get(txt[-1:].upper(), 1.0) if txt else 1.0
    num = txt[:-1] if mult != 1.0 else txt
    try:
        v = float(num) * mult
    except ValueError:
        raise InputError(where, "train_tokens", f"must be a number of tokens such as 1e12 or "
                         f"15T, but got {s!r}") from None
    require(np.isfinite(v) and v > 0, where, "train_tokens", f"`tokens > 0` must hold, but got {s!r}")
    return v


def _prices(gpu_hour_usd, names, where):
    """{hardware name: USD per GPU-hour} from one price or one per hardware."""
    if gpu_hour_usd is None:
        return None
    prices = list(gpu_hour_usd) if isinstance(gpu_hour_usd, (list, tuple)) else [gpu_hour_usd]
    require(len(prices) in (1, len(names)), where, "gpu_hour_usd",
            f"must give one price or one per hardware ({len(names)}), but got {len(prices)}")
    for p in prices:
        require(isinstance(p, (int, float)) and not isinstance(p, bool) and np.isfinite(p) and p > 0,
                where, "gpu_hour_usd", f"`price > 0` must hold (USD per GPU-hour), but got {p!r}")
    return dict(zip(names, prices * len(names) if len(prices) == 1 else prices))


def add_energy_columns(df: pd.DataFrame, tdp_w: dict[str, float], gpu_hour_usd=None,
                       train_tokens: float | None = None, pue: float = 1.0,
                       where: str = "energy") -> pd.DataFrame:
    """The sweep's DataFrame with power, energy, cost and time-to-train columns (NaN on
    infeasible rows, whose times are NaN).

    ``tdp_w`` maps each ``hardware`` name to its TDP; ``gpu_hour_usd`` is one price or a
    list in the order of ``tdp_w`` (USD per GPU-hour); ``train_tokens`` a token budget.

    Columns: ``gpu_power_w`` (mean per GPU over the step), ``energy_kwh_per_mtok``,
    ``gpu_hours_per_mtok``; with a price ``usd_per_mtok``; with a budget ``train_days``,
    ``train_mwh`` and (with a price) ``train_usd``.
    """
    require(isinstance(pue, (int, float)) and np.isfinite(pue) and pue >= 1.0, where, "pue",
            f"`pue >= 1` must hold, but got {pue!r}")
    out = df.copy()
    if out.empty:
        return out
    names = list(tdp_w)
    prices = _prices(gpu_hour_usd, names, where)
    tdp = out["hardware"].map(tdp_w).to_numpy(dtype=float)
    t = out["step_time_s"].to_numpy(dtype=float)
    busy = sum(out[f].to_numpy(dtype=float) for f in BUSY_TERMS) / t
    tokens_per_step = (out["global_batch"] * out["seq_len"]).to_numpy(dtype=float)
    gpus = out["gpus"].to_numpy(dtype=float)
    power = gpu_power_w(tdp, busy)
    energy_j = step_energy_j(power, gpus, t, pue)
    gpu_h = gpus * t / 3600.0
    out["gpu_power_w"] = power
    out["energy_kwh_per_mtok"] = per_million_tokens(energy_j, tokens_per_step) / J_PER_KWH
    out["gpu_hours_per_mtok"] = per_million_tokens(gpu_h, tokens_per_step)
    price = out["hardware"].map(prices).to_numpy(dtype=float) if prices else None
    if price is not None:
        out["usd_per_mtok"] = out["gpu_hours_per_mtok"] * price
    if train_tokens is not None:
        steps = train_tokens / tokens_per_step
        out["train_days"] = train_tokens / out["tokens_per_s"].to_numpy(dtype=float) / 86400.0
        out["train_mwh"] = energy_j * steps / J_PER_KWH / 1e3
        if price is not None:
            out["train_usd"] = gpu_h * steps * price
    return out
