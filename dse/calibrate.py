"""Fit a hardware file to measurements of one machine: GEMM throughput and nccl-tests.

Inputs
  * a GEMM CSV with columns ``m, n, k, dtype, tflops`` (measured TFLOP/s of one
    ``C[m,n] = A[m,k] @ B[k,n]``, e.g. from a cuBLAS / ``torch.matmul`` sweep or
    ml-engineering's ``mamf-finder.py``), or the printed output of Transformer Engine's
    ``benchmarks/gemm/benchmark_gemm.py`` (:mod:`dse.calibrate_te`: which of its columns
    are fitted and why);
  * nccl-tests output files (``all_reduce_perf``, ``all_gather_perf``,
    ``reduce_scatter_perf``, ``alltoall_perf``): the "# Using devices" lines give the
    rank count, the table ``size count type redop [root] time algbw busbw ...`` the
    out-of-place time (us) per buffer size (bytes; for all-gather the whole gathered
    buffer, as nccl-tests reports it).

Output: a hardware TOML table ``base = "<catalog name>"`` plus the fitted keys, which
:func:`dse.spec.hardware.get_hardware` loads.

Fits (every one is least squares of ``ln t_model - ln t_measured``, i.e. of relative
error, so a 16 MiB and a 8 GiB all-reduce weigh the same):
  * ``eff_gemm`` (``eff_gemm_fp8`` for fp8 rows, ``eff_gemm_fp4`` for ``nvfp4`` / ``mxfp4``
    rows on a GPU with fp4 tensor cores): the model's own
    :func:`dse.cost.gemm.gemm_time_s` (tile/wave quantization, L2-aware HBM traffic,
    roofline max, launch cost) at the base's rates, one scalar searched on a refined
    log grid.  Rows the model puts on the memory side of the roofline do not move it.
  * NVLink, then NIC: the alpha-beta model of :mod:`dse.cost.collectives`
    (``group_collective_s`` on ranks 1 apart; hierarchical when the run spans NVLink
    domains of the base's size) with the achieved bandwidth ``bw`` and per-step latency
    ``alpha`` searched on a refined 2-D log grid.  Runs inside one domain fit NVLink;
    runs across domains fit the NIC with the NVLink phase held at its fit (or the base).
    nccl-tests conventions (NCCL ``doc/PERFORMANCE.md``): ``algbw = size / time``,
    ``busbw = algbw x 2(n-1)/n`` for all-reduce and ``x (n-1)/n`` for all-gather,
    reduce-scatter and all-to-all; it is the per-link rate the ring needs, which is what
    ``bw`` is.  The model's bandwidth is ``link x eff``, so the file gets
    ``nvlink_gb_s = bw / eff_nvlink`` (the generation's constant) and the effective rate
    equals the fit.  NCCL's fixed per-call cost (~6-20 us, more over TCP) has no term of
    its own in the model; the fitted ``alpha`` absorbs it, as the catalog's NCCL
    constants note.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pandas as pd

from dse.errors import InputError, require
from dse.spec.hardware import Hardware, catalog, catalog_key
from dse.spec.layout import PRECISION_FP8, PRECISION_MXFP4, PRECISION_NVFP4, SERVING_PRECISION

OPS = {"all_reduce": "all_reduce", "all_gather": "all_gather",
       "reduce_scatter": "reduce_scatter", "alltoall": "all_to_all"}
GEMM_COLS = ("m", "n", "k", "dtype", "tflops")
#: the largest nccl-tests buffer read (1 TiB; the tests' -e maxBytes is at most a few GiB)
MAX_NCCL_BYTES = 2.0**40


# ----------------------------------------------------------------------------- inputs

def _plain(v):
    """A numpy scalar as the Python value (for messages)."""
    return v.item() if hasattr(v, "item") else v


#: GEMM dimensions: positive integers the float32 model holds exactly enough (int32 range)
MAX_GEMM_DIM = 2**31 - 1


def read_gemm_csv(path: str) -> pd.DataFrame:
    """The GEMM CSV, validated: m, n, k positive integers, tflops a finite number > 0,
    dtype a precision name; a readable text CSV with distinct columns and full rows
    (dse.predict.read_table).  That no row beats the base's peak is checked by
    :func:`calibrate`, which knows the base."""
    from dse.predict import read_table
    df = read_table(path, "GEMM CSV")
    missing = [c for c in GEMM_COLS if c not in df.columns]
    require(not missing, path, missing[0] if missing else "", f"column is required (need {list(GEMM_COLS)})")
    for c in ("m", "n", "k", "tflops"):
        v = pd.to_numeric(df[c], errors="coerce").astype(float)
        if c == "tflops":
            bad = ~(np.isfinite(v) & (v > 0))
            rule = "`tflops > 0` (finite) must hold"
        else:
            bad = ~(np.isfinite(v) & (v > 0) & (v <= MAX_GEMM_DIM) & (v == np.floor(v)))
            rule = f"must be a positive integer <= {MAX_GEMM_DIM}"
        if bad.any():
            i = int(np.argmax(bad.to_numpy()))
            raise InputError(path, c, f"{rule}, but got ({c}={_plain(df[c].iloc[i])!r} in line {i + 2})")
        df[c] = v
    dt = df["dtype"].astype(str).str.strip().str.lower()
    bad = ~dt.isin(list(SERVING_PRECISION))
    require(not bad.any(), path, "dtype", f"must be one of {sorted(SERVING_PRECISION)}, but got "
            f"{dt[bad].iloc[0] if bad.any() else ''!r}")
    df["precision"] = dt.map(SERVING_PRECISION)
    return df


def read_gemm_input(path: str) -> tuple[pd.DataFrame, list[str]]:
    """(GEMM rows, notes) of ``--gemm``: Transformer Engine's ``benchmark_gemm.py`` output
    (:mod:`dse.calibrate_te`) when the file is one, else the GEMM CSV
    (:func:`read_gemm_csv`)."""
    from dse.io import read_text
    from dse.calibrate_te import is_te_benchmark, parse_te_gemm
    text = read_text(path)
    if is_te_benchmark(text):
        return parse_te_gemm(path, text)
    return read_gemm_csv(path), []


def _numeric(tok: str) -> bool:
    """Whether ``tok`` reads as a number (``inf`` and ``nan`` too): a table row."""
    try:
        float(tok)
    except ValueError:
        return False
    return True


def _garbled_row(toks: list[str], header: list[str]) -> bool:
    """Whether a line after the header that does not start with a number still looks
    like a table row: not a comment or an NCCL log line (``host:pid:tid [d] NCCL INFO``),
    at least as many columns as the header, and most of them numbers."""
    if not toks or toks[0].startswith("#") or "NCCL" in toks or len(toks) < len(header):
        return False
    return sum(_numeric(t) for t in toks) * 2 > len(toks)


@dataclass
class NcclRun:
    path: str
    op: str                 # dse collective kind
    ranks: int
    sizes_bytes: np.ndarray
    times_s: np.ndarray     # out-of-place
    busbw_bytes_per_s: np.ndarray


def parse_nccl(path: str, text: str | None = None) -> NcclRun:
    """One nccl-tests output file (module docstring)."""
    if text is None:
        from dse.io import read_text
        text = read_text(path)
    m = re.search(r"\b(all_reduce|all_gather|reduce_scatter|alltoall)_perf\b", text) or \
        re.search(r"(all_reduce|all_gather|reduce_scatter|alltoall)", Path(path).name)
    require(m is not None, path, "collective", "must be named in the file or its name "
            "(all_reduce_perf, all_gather_perf, reduce_scatter_perf or alltoall_perf)")
    ranks = len(re.findall(r"^#\s*Rank\s+\d+\s", text, flags=re.M))
    require(ranks >= 2, path, "ranks", "`ranks >= 2` must hold: the '# Using devices' lines "
            f"(#  Rank  0 Group ...) must list every rank, but got (ranks={ranks})")
    header = None
    rows = []
    for line in text.splitlines():
        toks = line.split()
        if line.startswith("#") and "size" in toks and "time" in toks and "busbw" in toks:
            header = [t for t in toks if t != "#"]
        elif header and toks and not line.startswith("#") and _numeric(toks[0]):
            rows.append(toks)       # a data row (NCCL INFO log lines start with a host name)
        elif header and _garbled_row(toks, header):
            raise InputError(path, f"line {line.strip()[:40]!r}", "a line shaped like a table row "
                             "(as many columns as the header, mostly numbers) must start with its "
                             "size in bytes, a number") from None
    require(header is not None, path, "table", "must hold the nccl-tests header line "
            "(# size count type redop [root] time algbw busbw ...)")
    i_t, i_b = header.index("time"), header.index("busbw")
    sizes, times, busbw = [], [], []
    factor = BUSBW_FACTOR[OPS[m.group(1)]](ranks)
    for toks in rows:
        line = f"size {toks[0]}"
        try:
            s, t, b = float(toks[0]), float(toks[i_t]), float(toks[i_b])
        except (IndexError, ValueError):
            raise InputError(path, line, f"a table row must hold numbers in its size, time and "
                             f"busbw columns, but got {' '.join(toks)!r}") from None
        if s == 0:
            continue                  # nccl-tests' empty-buffer row: no time to fit
        require(0 < s <= MAX_NCCL_BYTES and math.isfinite(t) and t > 0 and math.isfinite(b)
                and b >= 0, path, line, f"`0 < size <= {MAX_NCCL_BYTES:.0f}` bytes, a finite time "
                f"> 0 and a finite busbw >= 0 must hold, but got (size={toks[0]}, time={toks[i_t]}, "
                f"busbw={toks[i_b]})")
        # nccl-tests prints busbw = size / time x factor (2 decimals, GB/s): a row whose
        # columns disagree was edited or mis-parsed, and would fit nonsense
        want = s / (t * 1e-6) * factor / 1e9
        require(abs(want - b) <= 0.05 * max(want, b) + 0.01, path, line,
                f"`busbw == size / time x {factor:.4g}` (nccl-tests, within 5 %) must hold, "
                f"but got (size={toks[0]} B, time={toks[i_t]} us, busbw={toks[i_b]} GB/s; "
                f"size / time gives {want:.4g} GB/s)")
        sizes.append(s)
        times.append(t * 1e-6)
        busbw.append(b * 1e9)
    require(len(sizes) >= 2, path, "rows", f"`rows >= 2` must hold (sizes with a positive "
            f"time), but got (rows={len(sizes)})")
    return NcclRun(path, OPS[m.group(1)], ranks, np.array(sizes), np.array(times), np.array(busbw))


# ----------------------------------------------------------------------------- models

def gemm_model_s(hw: Hardware, m, n, k, precision: int, eff):
    """:func:`dse.cost.gemm.gemm_time_s` of one GEMM at ``hw``'s rates with efficiency
    ``eff`` (broadcasts over arrays)."""
    from dse.cost.gemm import gemm_time_s
    from dse.cost.rates import rates
    r = rates(hw, precision)
    return gemm_time_s(m, n, k, r.peak_linear_flops_per_s, eff, r.hbm_bw_raw_bytes_per_s,
                       r.l2_bw_bytes_per_s, hw.l2_bytes, hw.num_sms, hw.tile_m, hw.tile_n,
                       r.linear_bytes, hw.kernel_launch_s, 1.0, hw.gemm_cluster, r.act_bytes)


def collective_model_s(hw: Hardware, run: NcclRun, sizes=None):
    """The model's time of ``run``'s collective on its ranks (consecutive, stride 1)."""
    from dse.cost.collectives import group_collective_s
    s = run.sizes_bytes if sizes is None else sizes
    return group_collective_s(run.op, jnp.asarray(s, jnp.float32), float(run.ranks), 1.0, hw)


def spans_domains(hw: Hardware, run: NcclRun) -> bool:
    return run.ranks > float(hw.nvlink_domain_gpus)


BUSBW_FACTOR = {"all_reduce": lambda n: 2.0 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
                "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n}


def nccl_text(hw: Hardware, op: str, ranks: int, sizes_bytes, gpus_per_host: int = 8,
              times_s=None) -> str:
    """An nccl-tests style output (``*_perf`` header, "# Using devices" lines, the
    out-of-place / in-place table) whose times are the model's on ``hw`` (or
    ``times_s``): synthetic data for tests and examples.  busbw per PERFORMANCE.md."""
    sizes = np.asarray(sizes_bytes, np.float64)
    name = {v: k for k, v in OPS.items()}[op]
    if times_s is None:
        run = NcclRun("synthetic", op, ranks, sizes, sizes, sizes)
        times_s = np.asarray(collective_model_s(hw, run), np.float64)
    lines = [f"# {name}_perf (synthetic: dse model of {hw.name or 'hardware'})",
             f"# nThread 1 nGpus 1 minBytes {int(sizes[0])} maxBytes {int(sizes[-1])}", "#",
             "# Using devices"]
    lines += [f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on node{r // gpus_per_host} device "
              f"{r % gpus_per_host:2d} [0x{r:02x}] GPU" for r in range(ranks)]
    lines += ["#", "#       size         count      type   redop    root     time   algbw   busbw "
              "#wrong     time   algbw   busbw #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
              "            (us)  (GB/s)  (GB/s)"]
    redop = "none" if op in ("all_gather", "all_to_all") else "sum"
    for s_, t in zip(sizes, times_s):
        alg = s_ / t / 1e9
        bus = alg * BUSBW_FACTOR[op](ranks)
        cell = f"{t * 1e6:8.2f} {alg:7.2f} {bus:7.2f}      0"
        lines.append(f"{int(s_):12d} {int(s_) // 4:13d}     float {redop:>7}      -1 {cell} {cell}")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- fits

def _zoom_1d(loss, lo: float, hi: float, levels: int = 4, points: int = 81) -> float:
    """argmin of ``loss(x)`` (vectorized) on a log grid, refined around the best point."""
    for _ in range(levels):
        xs = np.geomspace(lo, hi, points)
        i = int(np.nanargmin(loss(xs)))
        lo, hi = xs[max(i - 1, 0)], xs[min(i + 1, points - 1)]
    return float(xs[i])


def _zoom_2d(loss, box, levels: int = 4, points: int = 61):
    (lo1, hi1), (lo2, hi2) = box
    for _ in range(levels):
        a, b = np.geomspace(lo1, hi1, points), np.geomspace(lo2, hi2, points)
        A, B = np.meshgrid(a, b, indexing="ij")
        L = loss(A.ravel(), B.ravel()).reshape(A.shape)
        i, j = np.unravel_index(int(np.nanargmin(L)), L.shape)
        lo1, hi1 = a[max(i - 1, 0)], a[min(i + 1, points - 1)]
        lo2, hi2 = b[max(j - 1, 0)], b[min(j + 1, points - 1)]
    return float(a[i]), float(b[j])


def fit_gemm_eff(hw: Hardware, df: pd.DataFrame) -> float:
    """``eff`` minimising the squared log error of :func:`gemm_model_s` vs the rows (one
    efficiency for all of them, whatever their precisions)."""
    groups = []
    for p, sub in df.groupby("precision"):
        t_meas = 2.0 * sub["m"] * sub["n"] * sub["k"] / (sub["tflops"] * 1e12)
        mnk = [jnp.asarray(sub[c].to_numpy(), jnp.float32)[None, :] for c in ("m", "n", "k")]
        groups.append((int(p), mnk, np.log(t_meas.to_numpy())[None, :]))

    def loss(effs):
        e = jnp.asarray(effs, jnp.float32)[:, None]
        return sum(((np.log(np.asarray(gemm_model_s(hw, *mnk, p, e), np.float64)) - lt) ** 2).sum(axis=1)
                   for p, mnk, lt in groups)
    return _zoom_1d(loss, 0.02, 1.0)


def gemm_mape(hw: Hardware, df: pd.DataFrame, eff: float) -> float:
    t = np.concatenate([np.asarray(gemm_model_s(hw, *(jnp.asarray(sub[c].to_numpy(), jnp.float32)
                                                      for c in "mnk"), int(p), eff))
                        for p, sub in df.groupby("precision")])
    meas = np.concatenate([(2.0 * sub["m"] * sub["n"] * sub["k"] / (sub["tflops"] * 1e12)).to_numpy()
                           for _, sub in df.groupby("precision")])
    return _mape(t, meas)


def fit_link(hw: Hardware, runs: list[NcclRun], link: str):
    """(achieved bw in bytes/s, alpha in s) of ``link`` ("nvlink" or "nic") minimising the
    squared log error of :func:`collective_model_s` over ``runs``."""
    bw_f, lat_f, eff_f = f"{link}_bw_bytes_per_s", f"{link}_latency_s", f"eff_{link}"
    eff = float(getattr(hw, eff_f))
    bw0 = float(getattr(hw, bw_f)) * eff

    def loss(bws, alphas):
        h = hw.replace(**{bw_f: jnp.asarray(bws / eff, jnp.float32)[:, None],
                          lat_f: jnp.asarray(alphas, jnp.float32)[:, None]})
        tot = np.zeros(len(bws))
        for r in runs:
            t = np.asarray(collective_model_s(h, r, r.sizes_bytes[None, :]), np.float64)
            tot += ((np.log(t) - np.log(r.times_s)[None, :]) ** 2).sum(axis=1)
        return tot
    return _zoom_2d(loss, ((bw0 / LINK_BOX, bw0 * LINK_BOX), ALPHA_BOX_S))


#: search boxes of the fits: an efficiency in [0.02, 1]; a link 50x slower to 50x faster
#: than the base's; a per-step latency of 1 ns to 1 ms
GEMM_EFF_BOX = (0.02, 1.0)
LINK_BOX = 50.0
ALPHA_BOX_S = (1e-9, 1e-3)
#: a measured GEMM may beat the base's dense peak by at most this factor (boost clocks
#: above the datasheet's; anything faster is a unit error or sparse math)
PEAK_SLACK = 1.1


def _check_inside(flag: str, key: str, value: float, box, what: str) -> None:
    """A fit that ends on the edge of its search box did not find a minimum: the
    measurements are outside what the model can express (a unit error, an edited file),
    and the table would carry a meaningless bound, so it is bad input."""
    lo, hi = box
    require(lo * 1.001 < value < hi / 1.001, flag, key,
            f"the fit must end inside its search box [{lo:g}, {hi:g}], but {what} drive it to the "
            f"edge ({value:g}): check their units and values")


def _line_of(df: pd.DataFrame, i) -> int:
    """The input line of GEMM row ``i``: a ``line`` column where the reader kept one
    (Transformer Engine output, :mod:`dse.calibrate_te`), else the CSV's (header line 1)."""
    return int(df.loc[i, "line"]) if "line" in df.columns else int(i) + 2


def _check_below_peak(hw: Hardware, df: pd.DataFrame) -> None:
    """No GEMM row may beat ``PEAK_SLACK`` x the base's dense peak of its precision."""
    from dse.cost.rates import rates
    for p, sub in df.groupby("precision"):
        peak_tflops = float(rates(hw, int(p)).peak_linear_flops_per_s) / 1e12
        require(peak_tflops > 0, "--gemm", "dtype", f"{sub['dtype'].iloc[0]} rows need a GPU "
                f"with {sub['dtype'].iloc[0]} tensor cores, but {hw.name} has none (line {_line_of(df, sub.index[0])})")
        over = sub[sub["tflops"] > PEAK_SLACK * peak_tflops]
        require(over.empty, "--gemm", "tflops",
                f"`tflops <= {PEAK_SLACK:g} x peak` ({PEAK_SLACK * peak_tflops:.4g} for "
                f"{over['dtype'].iloc[0] if len(over) else ''} on {hw.name}) must hold, but got "
                f"{_plain(over['tflops'].iloc[0]) if len(over) else ''!r} (line {_line_of(df, over.index[0]) if len(over) else ''})")


def _mape(model, meas) -> float:
    return float(np.mean(np.abs(np.asarray(model, np.float64) / meas - 1.0)) * 100)


def calibrate(base: str, gemm: pd.DataFrame | None, runs: list[NcclRun]):
    """(keys for the TOML table in human units, report lines, calibrated Hardware)."""
    key = catalog_key(base, catalog())
    require(key is not None, "--base", "base", f"must be a catalog name "
            f"({', '.join(sorted(catalog()))}), but got {base!r}")
    hw = catalog()[key]
    keys: dict[str, float] = {}
    notes: list[str] = []
    if gemm is not None:
        _check_below_peak(hw, gemm)
        fp4 = gemm["precision"].isin([PRECISION_NVFP4, PRECISION_MXFP4])
        for key, sel in (("eff_gemm", (gemm["precision"] < PRECISION_FP8)),
                         ("eff_gemm_fp8", gemm["precision"] == PRECISION_FP8),
                         ("eff_gemm_fp4", fp4)):
            rows = gemm[sel]
            if rows.empty:
                continue
            e = fit_gemm_eff(hw, rows)
            _check_inside("--gemm", key, e, GEMM_EFF_BOX, "the GEMM rows")
            keys[key] = round(e, 4)
            hw = hw.replace(**{key: e})
            notes.append(f"{key} = {e:.4f}: least squares of ln(gemm_time_s) over {len(rows)} "
                         f"GEMM row(s), MAPE {gemm_mape(hw, rows, e):.1f}%")
    for link, pick in (("nvlink", False), ("nic", True)):
        rs = [r for r in runs if spans_domains(hw, r) == pick]
        if not rs:
            continue
        require(not pick or float(hw.nic_bw_bytes_per_s) > 0, "--nccl", "nic", "base has no NIC")
        bw, alpha = fit_link(hw, rs, link)
        eff = float(getattr(hw, f"eff_{link}"))
        line_rate = float(getattr(hw, f"{link}_bw_bytes_per_s"))
        bw0 = line_rate * eff
        _check_inside("--nccl", f"{link}_gb_s", bw, (bw0 / LINK_BOX, bw0 * LINK_BOX),
                      f"the {link} runs ({', '.join(r.path for r in rs)})")
        _check_inside("--nccl", f"{link}_latency_us", alpha, ALPHA_BOX_S,
                      f"the {link} runs ({', '.join(r.path for r in rs)})")
        hw = hw.replace(**{f"{link}_bw_bytes_per_s": bw / eff, f"{link}_latency_s": alpha})
        keys[f"{link}_gb_s"] = round(bw / eff / 1e9, 3)
        keys[f"{link}_latency_us"] = round(alpha * 1e6, 4)
        err = _mape(np.concatenate([np.asarray(collective_model_s(hw, r)) for r in rs]),
                    np.concatenate([r.times_s for r in rs]))
        notes.append(f"{link}: achieved {bw / 1e9:.1f} GB/s per direction, alpha "
                     f"{alpha * 1e6:.3g} us per step (alpha-beta fit over "
                     f"{sum(len(r.sizes_bytes) for r in rs)} sizes in {len(rs)} file(s), MAPE "
                     f"{err:.1f}%); {link}_gb_s = achieved / eff_{link} ({eff:g})")
        if (link == "nvlink" and bw / eff > NVLS_FLAG * line_rate
                and any(r.op == "all_reduce" for r in rs)):
            notes.append(in_switch_note(bw / eff, line_rate))
    return keys, notes, hw


#: how far above the line rate an NVLink all-reduce fit's ``nvlink_gb_s`` must be to be
#: flagged as NVLS (:func:`in_switch_note`): beyond the few % a ring-rate fit scatters by
#: (the model's own 72-rank ring times on GB200 give back its 900 GB/s, up to rounding)
NVLS_FLAG = 1.05


def in_switch_note(achieved: float, line_rate: float) -> str:
    """The warning for an NVLink all-reduce fit that needs ``nvlink_gb_s`` above the
    datasheet line rate (achieved / the generation's ``eff_nvlink``): a ring at the ring
    efficiency cannot move that much, so the run used NCCL's NVLS algorithm (NVLink SHARP:
    the NVSwitch reduces in flight, each GPU sends its buffer once; NCCL
    ``src/graph/tuning.cc`` ``NCCL_ALGO_NVLS``), whose busbw -- by nccl-tests' ring formula,
    ``doc/PERFORMANCE.md`` -- is not a link rate: the fitted ``nvlink_gb_s`` then overstates
    the ring collectives (all-gather, reduce-scatter, all-to-all) that dse prices with it."""
    return (f"nvlink: WARNING the all-reduce fit needs nvlink_gb_s {achieved / 1e9:.0f} GB/s, above the NVLink line "
            f"rate ({line_rate / 1e9:.0f} GB/s): NCCL ran NVLS (in-switch reduction), whose busbw is "
            f"not a link rate; fit all_gather / reduce_scatter / alltoall runs (or NCCL_NVLS_ENABLE=0 "
            f"all-reduce runs) for nvlink_gb_s")


def toml_text(name: str, base: str, keys: dict, notes: list[str], sources: list[str]) -> str:
    lines = [f"# written by `dse calibrate` {time.strftime('%Y-%m-%d')} from:"]
    lines += [f"#   {s}" for s in sources]
    lines += [f"# {n}" for n in notes]
    lines += [f"[{name}]", f'base = "{base}"',
              f'description = "{base} calibrated to measurements ({", ".join(Path(s).name for s in sources)})"']
    lines += [f"{k} = {v!r}" for k, v in keys.items()]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- CLI

def register(sub) -> None:
    s = sub.add_parser("calibrate", help="fit eff_gemm and NVLink/NIC bandwidth+latency to "
                       "GEMM and nccl-tests measurements; writes a hardware TOML")
    s.add_argument("--base", required=True, help="catalog name the file starts from")
    s.add_argument("--gemm", help="CSV with columns m,n,k,dtype,tflops, or the printed output of "
                   "Transformer Engine's benchmarks/gemm/benchmark_gemm.py (best run with --pre-quantize)")
    s.add_argument("--nccl", nargs="+", default=[], help="nccl-tests output files")
    s.add_argument("--name", default=None, help="table name (default <base>-calibrated)")
    s.add_argument("-o", "--output", required=True, help="hardware TOML to write")
    s.set_defaults(fn=cmd_calibrate)


def cmd_calibrate(a) -> int:
    require(bool(a.gemm or a.nccl), "command line", "--gemm/--nccl", "give at least one input")
    from dse.report.atomic import atomic_write, check_output_file
    out = check_output_file(a.output, "-o")
    from dse.spec.hardware import get_hardware
    is_file = str(a.base).endswith(".toml") or ".toml:" in str(a.base)
    require(not is_file, "--base", "base", f"must be a catalog name or a vendor spelling of one "
            f"(the calibrated file starts from it: `dse list hardware`), but got {a.base!r}")
    a.base = get_hardware(a.base, where="--base").name    # the catalog's spelling in the TOML
    name = f"{a.base}-calibrated" if a.name is None else a.name
    require(re.fullmatch(r"[A-Za-z0-9_.-]+", name) is not None, "--name", "name",
            f"must be letters, digits, '_', '.' or '-', but got {name!r}")
    gemm, read_notes = read_gemm_input(a.gemm) if a.gemm else (None, [])
    runs = [parse_nccl(p) for p in a.nccl]
    keys, notes, _ = calibrate(a.base, gemm, runs)
    notes = read_notes + notes
    text = toml_text(name, a.base, keys, notes, ([a.gemm] if a.gemm else []) + list(a.nccl))

    def write_and_load(tmp):          # the file must load before it replaces anything
        Path(tmp).write_text(text)
        get_hardware(str(tmp), where=str(out))
    atomic_write(out, write_and_load)
    for n in notes:
        print(n)
    print(f"wrote {out} ([{name}], base {a.base}); use --hardware {out}")
    return 0
