"""The vectorized screen: memory first, then the time model on the survivors.

Flow (docs/architecture.md): specs -> arrays of design points -> masks -> costs -> DataFrame.
Points are the Cartesian product (hardware spec) x (layout).  Both passes run in
chunks through one ``jit(vmap(...))`` each, by the one runner of every sweep
(:mod:`dse.sweep.runner`: its padding policy, dispatch overlapped with copy-back).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import jax
import numpy as np
import pandas as pd

from dse.spec.hardware import GIB, Hardware, stack
from dse.spec.layout import PRECISION_NAMES, RECOMPUTE_NAMES, Layout, Workload
from dse.spec.model import Model
from dse.sweep.grid import FIELDS, GridOptions, enumerate_layouts
from dse.sweep.runner import MAX_CHUNK, run_chunked
from dse.train.memory_parts import MEM_MARGIN, MemoryParts, gib_columns, memory_parts, usable_bytes
from dse.train.step import BREAKDOWN, StepResult, train_step

CHUNK = MAX_CHUNK


@jax.jit
def _memory_chunk(model, wl, lay, hw):
    return jax.vmap(memory_parts, in_axes=(None, None, 0, 0))(model, wl, lay, hw)


@jax.jit
def _time_chunk(model, wl, lay, hw):
    return jax.vmap(train_step, in_axes=(None, None, 0, 0))(model, wl, lay, hw)


def hardware_columns(hws: list[Hardware]) -> dict[str, np.ndarray]:
    """Several hardware specs as one numpy column per pytree leaf (row = spec)."""
    st = stack(hws)
    return {f: np.asarray(getattr(st, f)) for f in Hardware._leaf_fields}


def _points(model, wl, hw_cols, lay_cols, h_idx, l_idx):
    """The argument builder of one padded chunk of (hardware, layout) points."""
    def args_for(idx):
        hw = Hardware(**{f: v[h_idx[idx]] for f, v in hw_cols.items()})
        lay = Layout(**{f: v[l_idx[idx]] for f, v in lay_cols.items()})
        return model, wl, lay, hw
    return args_for


@dataclass
class SweepResult:
    """Arrays over all (hardware x layout) points; ``feasible`` is the memory mask (total
    <= ``(1 - mem_margin) x HBM``) and time fields are NaN where infeasible; ``mem_parts``
    the per-GPU breakdown (:class:`dse.train.memory_parts.MemoryParts`) of every point."""

    hw_index: np.ndarray
    layouts: dict[str, np.ndarray]       # per point
    mem_bytes: np.ndarray
    hbm_bytes: np.ndarray
    feasible: np.ndarray
    result: dict[str, np.ndarray]        # StepResult fields, NaN where infeasible
    hw_names: list[str]
    timings_s: dict[str, float] = field(default_factory=dict)
    mem_parts: MemoryParts | None = None
    mem_margin: float = 0.0

    @property
    def n_points(self) -> int:
        return len(self.hw_index)


def sweep_points(model: Model, wl: Workload, hws: list[Hardware], lay_cols: dict[str, np.ndarray],
                 chunk: int = CHUNK, progress: bool = False, mem_margin: float = 0.0) -> SweepResult:
    """Evaluate every (hardware, layout) pair: memory for all, time for the feasible
    (those within ``(1 - mem_margin) x HBM``, :mod:`dse.train.memory_parts`)."""
    hw_cols = hardware_columns(hws)
    cap_all = hw_cols["hbm_bytes"]
    # both passes see the usable capacity: block recompute then picks the fewest layers
    # that fit *within the margin* (HBM capacity moves nothing else in the cost model)
    hw_cols = {**hw_cols, "hbm_bytes": usable_bytes(cap_all, mem_margin).astype(cap_all.dtype)}
    n_l = len(next(iter(lay_cols.values())))
    h_idx = np.repeat(np.arange(len(hws), dtype=np.int64), n_l)
    l_idx = np.tile(np.arange(n_l, dtype=np.int64), len(hws))
    bar = None
    if progress and len(h_idx) > 200_000:
        from tqdm import tqdm
        bar = tqdm(total=2 * len(h_idx), desc="sweep", unit="pt", leave=False)
    t0 = time.perf_counter()
    parts = run_chunked(_memory_chunk, _points(model, wl, hw_cols, lay_cols, h_idx, l_idx),
                        len(h_idx), chunk, bar)
    mem = parts.total_bytes
    t1 = time.perf_counter()
    cap = cap_all[h_idx]
    feasible = mem <= hw_cols["hbm_bytes"][h_idx]
    fi = np.nonzero(feasible)[0]
    res = {f: np.full(len(h_idx), np.nan) for f in StepResult._fields}
    if len(fi):
        out = run_chunked(_time_chunk, _points(model, wl, hw_cols, lay_cols, h_idx[fi], l_idx[fi]),
                          len(fi), chunk, bar)
        for f in StepResult._fields:
            res[f][fi] = getattr(out, f)
    if bar is not None:
        bar.update(2 * len(h_idx) - bar.n)
        bar.close()
    t2 = time.perf_counter()
    res["mem_bytes"] = mem
    return SweepResult(h_idx, {f: v[l_idx] for f, v in lay_cols.items()}, mem, cap, feasible,
                       res, [h.name for h in hws], {"memory_s": t1 - t0, "time_s": t2 - t1},
                       parts, mem_margin)


def sweep(model: Model, hws: list[Hardware], gpus: int, global_batch: int, seq_len: int,
          precision: int = 1, opt: GridOptions = GridOptions(), progress: bool = False,
          attention: int = 1, framework: int = 0, tp_overlap: int = 0,
          mem_margin: float = MEM_MARGIN) -> pd.DataFrame:
    """Every valid layout x hardware for one workload, as a DataFrame sorted fastest
    first (infeasible rows last, with their reason in ``status``); a layout is feasible
    when it fits in ``(1 - mem_margin) x HBM`` (:mod:`dse.train.memory_parts`)."""
    cols = enumerate_layouts(model, gpus, global_batch, seq_len, opt)
    wl = Workload(global_batch=global_batch, seq_len=seq_len, precision=precision, attention=attention,
                  framework=framework, tp_overlap=tp_overlap)
    if len(cols["tp"]) == 0:
        return pd.DataFrame()
    sr = sweep_points(model, wl, hws, cols, progress=progress, mem_margin=mem_margin)
    df = to_dataframe(sr)
    df.insert(0, "model", model.name)
    df.insert(2, "gpus", gpus)
    df.insert(3, "global_batch", global_batch)
    df.insert(4, "seq_len", seq_len)
    df.insert(5, "precision", PRECISION_NAMES[precision])
    return df.sort_values(["feasible", "step_time_s"], ascending=[False, True],
                          kind="stable").reset_index(drop=True)


def oom_status(mem_bytes: float, hbm_bytes: float, mem_margin: float = 0.0) -> str:
    """The status of a point that does not fit (training and inference sweeps); with a
    margin, a point that fits the HBM but not the margin says so."""
    if mem_margin > 0 and mem_bytes <= hbm_bytes:
        return (f"out of memory: needs {mem_bytes / GIB:.1f} GiB > "
                f"{usable_bytes(hbm_bytes, mem_margin) / GIB:.1f} GiB usable "
                f"({hbm_bytes / GIB:.1f} GiB HBM less the {mem_margin:.0%} safety margin)")
    return f"out of memory: needs {mem_bytes / GIB:.1f} GiB > {hbm_bytes / GIB:.1f} GiB HBM"


def to_dataframe(sr: SweepResult) -> pd.DataFrame:
    df = pd.DataFrame({"hardware": np.asarray(sr.hw_names, dtype=object)[sr.hw_index]})
    for f in FIELDS:
        df[f] = sr.layouts[f]
    df["recompute"] = df["recompute"].map(RECOMPUTE_NAMES)
    df["sp"] = df["sp"].astype(bool)
    df["feasible"] = sr.feasible
    df["mem_gib"] = sr.mem_bytes / GIB
    df["hbm_gib"] = sr.hbm_bytes / GIB
    if sr.mem_parts is not None:
        for c, v in gib_columns(sr.mem_parts).items():
            df[c] = v
    status = np.full(sr.n_points, "ok", dtype=object)
    bad = ~sr.feasible
    if bad.any():
        status[bad] = [oom_status(m, c, sr.mem_margin)
                       for m, c in zip(sr.mem_bytes[bad], sr.hbm_bytes[bad])]
    df["status"] = status
    for f in ("step_time_s", "tokens_per_s", "mfu") + BREAKDOWN + ("recompute_layers",):
        df[f] = sr.result[f]
    return df


def top_k(df: pd.DataFrame, k: int = 10) -> pd.DataFrame:
    return df[df["feasible"]].nsmallest(k, "step_time_s")
