"""Streaming sweeps: 10^8-10^9 (layout x hardware) points in bounded memory.

The layout grid (one GPU count's valid layouts, at most a few 10^5 rows) and the
hardware list stay as small tables; points are never materialized.  Each
(layout x hardware) block (:mod:`dse.sweep.blocks`) is evaluated and *reduced on the
device*; only the reductions come back:

* ``top``: the ``k`` fastest feasible points overall (``jax.lax.top_k`` per block,
  merged on the host over blocks: exact);
* ``best``: the fastest feasible layout per hardware spec (a min down each block's
  hardware column, merged: exact);
* ``pareto``: per hardware, the Pareto front of (step time, memory per GPU), both
  minimized.  A block marks its front candidates: when every hardware column has the
  same memory per layout (memory depends on the hardware only through its HBM
  capacity; checked on the device), one sort of the layouts by memory serves every
  column and, per column, the fastest point of each run of equal memory is a candidate
  iff it beats every run with less memory; otherwise each column is sorted by
  (memory, step time) and a running minimum of step time down it marks the front.  The
  host takes the exact front of the blocks' candidates (exact: a global front point is
  a candidate of its block; a block with more than :func:`front_cap` candidates is
  fronted on the host instead);
* ``hist``: per hardware, a histogram of log10(step time) over :data:`HIST_EDGES_S`
  (feasible points; bins from the log spacing, :func:`hist_bins`, and one scatter-add),
  and the count of feasible points.

In the common case no reduction sorts more than one column of a block (per-column sorts
and a binary search per point took over 90% of a block's time on ``make bench``'s
sweep on XLA's CPU backend), and running minima and counts are ``associative_scan``
passes.

Every point is written only when asked (``parquet=``): one Parquet row group per block,
written as it streams (pyarrow ``ParquetWriter``), to a temporary file renamed at the end.

Peak resident memory is the block's working set plus the reductions, whatever the
number of points (``make bench`` measures it for 10^8 points).  A test checks that the
streamed reductions equal the in-memory sweep's on a small sweep.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from dse.spec.hardware import Hardware
from dse.spec.layout import Workload
from dse.spec.model import Model
from dse.sweep.blocks import block_shape, evaluate_pairs, iterate_blocks, nested_step
from dse.sweep.devices import device_mesh
from dse.sweep.grid import FIELDS
from dse.train.memory_parts import usable_bytes

FRONT_CAP = 4096


def front_cap(block_points: int) -> int:
    """Front candidates a block returns: :data:`FRONT_CAP`, or 1/64 of a larger block."""
    return max(FRONT_CAP, block_points // 64)
HIST_EDGES_S = np.logspace(-3, 6, 91)          # 1 ms .. 11.6 days, 10 bins per decade
MAX_POINTS = 2**31 - 1                          # point ids are int32 on the device


def hist_bins(t):
    """Bin of each step time in :data:`HIST_EDGES_S` (``edges[b] < t <= edges[b + 1]``,
    clipped to the end bins: ``np.searchsorted(edges, t) - 1``): ``floor(10 (log10 t + 3))``
    from the log spacing, corrected by one where rounding puts ``t`` across an edge --
    a few element-wise operations instead of a binary search per point."""
    nb = len(HIST_EDGES_S) - 1
    edges = jnp.asarray(HIST_EDGES_S, jnp.float32)
    b = jnp.clip(jnp.floor((jnp.log10(t) + 3.0) * 10.0), 0, nb - 1).astype(jnp.int32)
    b = jnp.where(t <= edges[b], b - 1, jnp.where(t > edges[b + 1], b + 1, b))
    return jnp.clip(b, 0, nb - 1)


def _scan(op, x):
    """Inclusive scan of ``op`` down axis 0 by ``jax.lax.associative_scan`` (log-depth
    element-wise passes): ``lax.cummin`` / ``jnp.cumsum`` lower to a windowed reduction
    that XLA's CPU backend runs ~10x slower on a block."""
    return jax.lax.associative_scan(op, x, axis=0)


def _compact(mask, size: int):
    """Indices of the true entries of a 1-D ``mask`` (the first ``size``, padded with 0):
    ``jnp.nonzero(mask, size=size)`` from a scanned cumulative count and one scatter."""
    pos = _scan(jnp.add, mask.astype(jnp.int32)) - 1
    return jnp.zeros(size, jnp.int32).at[jnp.where(mask, pos, size)].set(
        jnp.arange(mask.size, dtype=jnp.int32), mode="drop")


def _front_shared(t2, mem, p2):
    """Front candidates when every hardware column of the block has the same memory per
    layout (memory depends on the hardware only through its HBM capacity): one sort of
    the layouts by memory serves every column.  Per column, the fastest point of each run
    of equal memory (``segment_min`` over the runs) is a candidate iff it is faster than
    every run before it (exact, up to ties in step time, which the host resolves)."""
    order = jnp.argsort(mem[:, 0], stable=True)
    ms = mem[order, 0]
    ts, ps = t2[order], p2[order]
    n = ms.shape[0]
    run = _scan(jnp.add, jnp.concatenate([jnp.zeros(1, jnp.int32), (ms[1:] != ms[:-1]).astype(jnp.int32)]))
    run_min = jax.ops.segment_min(ts, run, num_segments=n, indices_are_sorted=True)     # (runs, HB)
    before = jnp.concatenate([jnp.full((1, t2.shape[1]), jnp.inf, t2.dtype), _scan(jnp.minimum, run_min)[:-1]])
    m_run = run_min[run]
    return jnp.isfinite(ts) & (ts == m_run) & (m_run < before[run]), ps


def _front_per_column(t2, mem, p2):
    """Front candidates in general: each hardware column sorted by (memory, step time),
    a running minimum of step time down the column marks its front exactly (a point is
    on it iff it is faster than every point of its hardware with less memory)."""
    mem2 = jnp.where(jnp.isfinite(t2), mem, jnp.inf)
    order = jnp.lexsort((t2, mem2), axis=0)
    ts = jnp.take_along_axis(t2, order, axis=0)
    ps = jnp.take_along_axis(p2, order, axis=0)
    prev = jnp.concatenate([jnp.full((1, t2.shape[1]), jnp.inf, t2.dtype), _scan(jnp.minimum, ts)[:-1]], axis=0)
    return jnp.isfinite(ts) & (ts < prev), ps


def reduce_points(t, mem, cap, l_idx, h_idx, valid, n_l, k: int):
    """The reductions of one (LB, HB) block of step times ``t`` and memory ``mem`` (module
    docstring); ``cap`` the usable HBM per hardware column (or one for all).  Per-hardware
    reductions run along the layout axis (axis 0): no sorts of the whole block, and the
    one scatter (the histogram) is a single pass."""
    lb, hb = t.shape
    fits = valid & (mem <= jnp.broadcast_to(cap, (hb,))[None, :])
    t2 = jnp.where(fits, t, jnp.inf)
    p2 = h_idx[None, :] * n_l + l_idx[:, None]                    # global point ids
    # top-k (smallest step time; ties by point id: the hardware-major ravel is point order)
    neg, pos = jax.lax.top_k(-t2.T.ravel(), k)
    top = (-neg, p2.T.ravel()[pos])
    # best per hardware column: min time, then the smallest point id reaching it
    best_t = t2.min(axis=0)
    best_p = jnp.where(jnp.isfinite(t2) & (t2 == best_t[None, :]), p2, jnp.iinfo(jnp.int32).max).min(axis=0)
    # histogram of log10 step time per hardware column
    nb = len(HIST_EDGES_S) - 1
    hcol = jnp.broadcast_to(jnp.arange(hb)[None, :], t2.shape)
    hist = jax.ops.segment_sum(jnp.isfinite(t2).astype(jnp.int32).ravel(), (hcol * nb + hist_bins(t2)).ravel(),
                               num_segments=hb * nb).reshape(hb, nb)
    # Pareto candidates per hardware column over (t, mem)
    on_front, ps = jax.lax.cond(jnp.all(mem == mem[:, :1]), _front_shared, _front_per_column, t2, mem, p2)
    on_front = on_front.ravel()
    n_front = on_front.sum()
    cap = front_cap(lb * hb)
    sel = _compact(on_front, cap)
    front = (ps.ravel()[sel], jnp.arange(cap) < n_front, n_front)
    return top, (best_t, best_p), hist, front, fits


def _reduce_block(model, wl, lay, hw, l_idx, h_idx, valid, n_l, k: int, with_rows: bool):
    """One (LB, HB) block evaluated (:func:`dse.sweep.blocks.nested_step`) and reduced
    (:func:`reduce_points`)."""
    r = nested_step(model, wl, lay, hw)                          # leaves (LB, HB)
    top, best, hist, front, fits = reduce_points(r.step_time_s, r.mem_bytes, hw.hbm_bytes, l_idx, h_idx,
                                                 valid, n_l, k)
    rows = (r, fits) if with_rows else None
    return top, best, hist, front, rows


@dataclass
class StreamResult:
    """Reductions of a streamed sweep; point ids are ``h * n_layouts + l``."""
    n_points: int
    n_feasible: int
    top: pd.DataFrame          # k fastest feasible points, with every result column
    best: pd.DataFrame         # fastest feasible layout per hardware
    pareto: pd.DataFrame       # (step time, memory) front per hardware
    hist: np.ndarray           # (hardware, bins) counts of feasible points
    hist_edges_s: np.ndarray
    hw_names: list
    parquet: str | None = None

    def quantiles(self, qs=(0.05, 0.5, 0.95)) -> pd.DataFrame:
        """Step-time quantiles per hardware from the histogram (bin centres, log scale)."""
        centres = np.sqrt(self.hist_edges_s[:-1] * self.hist_edges_s[1:])
        out = []
        for name, h in zip(self.hw_names, self.hist):
            c = np.cumsum(h)
            row = {"hardware": name, "feasible": int(c[-1]) if len(c) else 0}
            for q in qs:
                row[f"q{int(q * 100):02d}_step_time_s"] = (float(centres[np.searchsorted(c, q * c[-1])])
                                                          if c[-1] else np.nan)
            out.append(row)
        return pd.DataFrame(out)


def _host_front(model, wl, hw_cols, lay_cols, l_idx, h_idx, n_l):
    """A block's front candidates when the device pre-filter overflows: every feasible
    point of the block evaluated and fronted on the host (exact; rare)."""
    hi = np.repeat(h_idx, len(l_idx))
    li = np.tile(l_idx, len(h_idx))
    res, _ = evaluate_pairs(model, wl, hw_cols, lay_cols, hi, li)
    ok = res["mem_bytes"] <= hw_cols["hbm_bytes"][hi]
    df = pd.DataFrame({"hardware": hi[ok], "mem_gib": res["mem_bytes"][ok], "step_time_s": res["step_time_s"][ok],
                       "point": hi[ok] * n_l + li[ok]})
    pts = _front(df)["point"].to_numpy() if len(df) else np.zeros(0, np.int64)
    return pts, np.ones(len(pts), bool)


def _front(df: pd.DataFrame) -> pd.DataFrame:
    """Exact 2-D Pareto front (min step_time_s, min mem_gib) per hardware: rows sorted by
    (hardware, memory, step time[, point]), a row is kept iff it is faster than every
    earlier row of its hardware; of points equal in both, the one with the smallest
    ``point`` id (or the first row)."""
    key = ["hardware", "mem_gib", "step_time_s"] + (["point"] if "point" in df else [])
    s = df.sort_values(key, kind="stable")
    t = s["step_time_s"]
    prev = t.groupby(s["hardware"], sort=False).cummin().groupby(s["hardware"], sort=False).shift(1)
    keep = t < prev.fillna(np.inf)
    return s[keep.to_numpy()].sort_values(["hardware", "step_time_s"], kind="stable").reset_index(drop=True)


def stream_sweep(model: Model, wl: Workload, hws: list[Hardware], lay_cols: dict,
                 k: int = 10, parquet: str | None = None, progress: bool = False,
                 mem_margin: float = 0.0) -> StreamResult:
    """Every (hardware x layout) point, reduced on the device (module docstring); a
    point is feasible when it fits in ``(1 - mem_margin) x HBM``."""
    from dse.sweep.run import hardware_columns, rows_frame
    n_l, n_h = len(lay_cols["tp"]), len(hws)
    n = n_l * n_h
    if n > MAX_POINTS:
        from dse.errors import InputError
        raise InputError("sweep", "points", f"`layouts x hardware <= {MAX_POINTS}` must hold, but got {n}")
    hw_cols = hardware_columns(hws)
    cap_all = hw_cols["hbm_bytes"]
    hw_cols = {**hw_cols, "hbm_bytes": usable_bytes(cap_all, mem_margin).astype(cap_all.dtype)}
    lay_cols = {f: np.asarray(lay_cols[f]) for f in FIELDS}
    bar = None
    if progress and n > 2_000_000:
        from tqdm import tqdm
        bar = tqdm(total=n, desc="stream", unit="pt", leave=False)
    writer = tmp = None
    if parquet:
        import pyarrow as pa
        import pyarrow.parquet as pq
        tmp = f"{parquet}.tmp-{os.getpid()}"
    top_t, top_p = np.full(0, np.inf), np.zeros(0, np.int64)
    best_t, best_p = np.full(n_h, np.inf), np.full(n_h, -1, np.int64)
    hist = np.zeros((n_h, len(HIST_EDGES_S) - 1), np.int64)
    front_p: list[np.ndarray] = []
    kk = min(k, 1 << 16)

    lb, hb = block_shape(-(-n_l // device_mesh().size), n_h)
    static = (("k", min(kk, lb * hb)), ("with_rows", parquet is not None))
    try:
        for l_idx, h_idx, valid, out in iterate_blocks(_reduce_block, model, wl, lay_cols, hw_cols, n_l, n_h,
                                                       bar, static):
            (tt, tp), (bt, bp), hh, (fp, fmask, fcount), rows = out
            if int(fcount) > len(fp):        # too many candidates: this block's front exactly on the host
                fp, fmask = _host_front(model, wl, hw_cols, lay_cols, l_idx, h_idx, n_l)
                fcount = 0
            top_t, top_p = np.concatenate([top_t, tt]), np.concatenate([top_p, tp.astype(np.int64)])
            o = np.lexsort((top_p, top_t))[:k]
            top_t, top_p = top_t[o], top_p[o]
            k_h = len(h_idx)
            bt_all, bp_all = np.full(n_h, np.inf), np.full(n_h, -1, np.int64)
            bt_all[h_idx], bp_all[h_idx] = bt[:k_h], bp[:k_h].astype(np.int64)
            hh_all = np.zeros_like(hist)
            hh_all[h_idx] = hh[:k_h]
            bt, bp, hh = bt_all, bp_all, hh_all
            better = (bt < best_t) | ((bt == best_t) & np.isfinite(bt) & (bp < best_p))
            best_t, best_p = np.where(better, bt, best_t), np.where(better, bp, best_p)
            hist += hh
            front_p.append(fp[fmask].astype(np.int64))
            if rows is not None:
                r, fits = rows
                kl, kh = len(l_idx), len(h_idx)
                cut = lambda x: np.asarray(x)[:kl, :kh].T.ravel()      # hardware-major
                res = {f: cut(getattr(r, f)) for f in r._fields}
                f_ok = cut(fits)
                li = np.tile(l_idx, kh)
                hi = np.repeat(h_idx, kl)
                df = rows_frame(res, f_ok, {f: v[li] for f, v in lay_cols.items()}, hi,
                                cap_all[hi], [h.name for h in hws], mem_margin=mem_margin)
                table = pa.Table.from_pandas(df, preserve_index=False)
                if writer is None:
                    writer = pq.ParquetWriter(tmp, table.schema)
                writer.write_table(table)
    finally:
        if bar is not None:
            bar.close()
        if writer is not None:
            writer.close()
    if tmp and writer is not None:
        os.replace(tmp, parquet)

    def frames(*point_sets: np.ndarray) -> list:
        """Full rows (every result column) of each set of selected points, sorted by point:
        the union evaluated in one vmapped call, so the sets share one compiled chunk
        shape (:func:`dse.sweep.runner.chunk_size`) and one dispatch."""
        sets = [np.unique(p[p >= 0]) for p in point_sets]
        points = np.unique(np.concatenate(sets))
        if not len(points):
            return [pd.DataFrame() for _ in sets]
        hi, li = points // n_l, points % n_l
        res, parts = evaluate_pairs(model, wl, hw_cols, lay_cols, hi, li)
        fits = res["mem_bytes"] <= hw_cols["hbm_bytes"][hi]
        d = rows_frame(res, fits, {f: v[li] for f, v in lay_cols.items()}, hi, cap_all[hi],
                       [h.name for h in hws], parts, mem_margin)
        d.insert(0, "point", points)
        return [d[d["point"].isin(s)].reset_index(drop=True) if len(s) else pd.DataFrame()
                for s in sets]

    top_df, best_df, front_df = frames(top_p[np.isfinite(top_t)], best_p,
                                       np.concatenate(front_p) if front_p else np.zeros(0, np.int64))
    if len(top_df):
        top_df = top_df.sort_values(["step_time_s", "point"], kind="stable").reset_index(drop=True)
    if len(front_df):
        front_df = _front(front_df[front_df["feasible"]])
    return StreamResult(n, int(hist.sum()), top_df, best_df, front_df, hist, HIST_EDGES_S,
                        [h.name for h in hws], parquet)


__all__ = ["stream_sweep", "StreamResult"]
