"""The vectorized screen: every (hardware, layout) point's memory and step time, the memory
mask, a DataFrame.

Flow (docs/architecture.md): specs -> arrays of design points -> masks -> costs -> DataFrame.
Points are the Cartesian product (hardware spec) x (layout), evaluated in
(layout x hardware) blocks of one nested ``jit(vmap(vmap(...)))`` (:mod:`dse.sweep.blocks`:
layout-only work shared across hardware variants, a few compiled block shapes, dispatch
overlapped with copy-back).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from dse.spec.hardware import GIB, Hardware, stack
from dse.spec.layout import (PRECISION_NAMES, RECOMPUTE_MODULES, RECOMPUTE_MODULES_AUTO,
                             RECOMPUTE_MODULES_DEFAULT, RECOMPUTE_NAMES, Workload, recompute_modules_names)
from dse.spec.model import Model
from dse.sweep.grid import FIELDS, GridOptions, enumerate_layouts
from dse.sweep.blocks import MASK_FIRST_BELOW, evaluate_all, evaluate_masked
from dse.sweep.runner import MAX_CHUNK
from dse.train.memory_parts import MEM_MARGIN, MemoryParts, gib_columns, usable_bytes
from dse.train.step import BREAKDOWN, StepResult

CHUNK = MAX_CHUNK


def hardware_columns(hws: list[Hardware]) -> dict[str, np.ndarray]:
    """Several hardware specs as one numpy column per pytree leaf (row = spec)."""
    st = stack(hws)
    return {f: np.asarray(getattr(st, f)) for f in Hardware._leaf_fields}


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
    """Evaluate every (hardware, layout) pair in (layout x hardware) blocks
    (:mod:`dse.sweep.blocks`: layout-only work shared across the hardware of a block);
    ``feasible`` is the memory mask (total within ``(1 - mem_margin) x HBM``,
    :mod:`dse.train.memory_parts`), and time fields are NaN where a point does not fit.
    ``chunk`` is accepted for compatibility; the block shape is the sweep's own."""
    hw_cols = hardware_columns(hws)
    cap_all = hw_cols["hbm_bytes"]
    # both passes see the usable capacity: block recompute then picks the fewest layers
    # that fit *within the margin* (HBM capacity moves nothing else in the cost model)
    hw_cols = {**hw_cols, "hbm_bytes": usable_bytes(cap_all, mem_margin).astype(cap_all.dtype)}
    n_l = len(next(iter(lay_cols.values())))
    n_h = len(hws)
    h_idx = np.repeat(np.arange(n_h, dtype=np.int64), n_l)
    l_idx = np.tile(np.arange(n_l, dtype=np.int64), n_h)
    bar = None
    if progress and len(h_idx) > 200_000:
        from tqdm import tqdm
        bar = tqdm(total=len(h_idx), desc="sweep", unit="pt", leave=False)
    t0 = time.perf_counter()
    evaluate = evaluate_masked if n_h < MASK_FIRST_BELOW else evaluate_all
    res, parts = evaluate(model, wl, lay_cols, hw_cols, n_l, n_h, bar)
    if bar is not None:
        bar.close()
    t1 = time.perf_counter()
    mem = res["mem_bytes"]
    cap = cap_all[h_idx]
    feasible = mem <= hw_cols["hbm_bytes"][h_idx]
    for f in StepResult._fields:
        if f != "mem_bytes":
            res[f][~feasible] = np.nan
    return SweepResult(h_idx, {f: v[l_idx] for f, v in lay_cols.items()}, mem, cap, feasible,
                       res, [h.name for h in hws], {"sweep_s": t1 - t0}, parts, mem_margin)


def sweep(model: Model, hws: list[Hardware], gpus: int, global_batch: int, seq_len: int,
          precision: int = 1, opt: GridOptions = GridOptions(), progress: bool = False,
          attention: int = 1, framework: int = 0, tp_overlap: int = 0,
          mem_margin: float = MEM_MARGIN, recipe: dict | None = None) -> pd.DataFrame:
    """Every valid layout x hardware for one workload, as a DataFrame sorted fastest
    first (infeasible rows last, with their reason in ``status``); a layout is feasible
    when it fits in ``(1 - mem_margin) x HBM`` (:mod:`dse.train.memory_parts`).  ``recipe``:
    the Workload's recipe switches (:func:`dse.spec.layout.recipe_codes`; None = all off)."""
    cols = enumerate_layouts(model, gpus, global_batch, seq_len, opt, framework)
    recipe = dict(recipe or {})
    auto = recipe.get("recompute_modules") == RECOMPUTE_MODULES_AUTO
    if auto:
        recipe["recompute_modules"] = RECOMPUTE_MODULES_DEFAULT
    wl = Workload(global_batch=global_batch, seq_len=seq_len, precision=precision, attention=attention,
                  framework=framework, tp_overlap=tp_overlap, **recipe)
    if len(cols["tp"]) == 0:
        return pd.DataFrame()
    sr = sweep_points(model, wl, hws, cols, progress=progress, mem_margin=mem_margin)
    df = to_dataframe(sr)
    if auto:
        df = with_module_lists(df, model, wl, hws, cols, mem_margin)
    df.insert(0, "model", model.name)
    df.insert(2, "gpus", gpus)
    df.insert(3, "global_batch", global_batch)
    df.insert(4, "seq_len", seq_len)
    df.insert(5, "precision", PRECISION_NAMES[precision])
    return df.sort_values(["feasible", "step_time_s"], ascending=[False, True],
                          kind="stable").reset_index(drop=True)


def module_candidates(model: Model) -> list[int]:
    """The ``recompute_modules`` lists an ``auto`` sweep tries (:data:`RECOMPUTE_MODULES`),
    each with ``core_attn``: every combination of the modules that have work on this model
    (:func:`dse.graph.train.module_recompute_ops`) -- ``mla_up_proj`` with MLA, ``layernorm``
    with MLA or MoE layers (a dense layer's norms are fused into its linears), ``moe_act``
    with MoE, ``mlp`` with dense MLP layers, ``shared_experts`` with shared experts -- the
    default (``core_attn`` alone) first."""
    from dse.spec.model import dense_layer_fraction, is_mla, shared_ffn
    moe, mla = model.num_experts > 1, bool(is_mla(model))
    has = {"mla_up_proj": mla, "layernorm": mla or moe, "moe_act": moe,
           "mlp": not moe or float(dense_layer_fraction(model)) > 0,
           "shared_experts": moe and shared_ffn(model) > 0}
    bits = [RECOMPUTE_MODULES[m] for m, on in has.items() if on]
    return [RECOMPUTE_MODULES_DEFAULT | sum(b for i, b in enumerate(bits) if k >> i & 1)
            for k in range(1 << len(bits))]


def with_module_lists(df: pd.DataFrame, model: Model, wl: Workload, hws, cols, mem_margin) -> pd.DataFrame:
    """``df`` (the sweep with ``core_attn`` alone) with a ``recompute_modules`` column, and
    each selective layout that does not fit swept again with every other list of
    :func:`module_candidates`; where some list makes it fit, its row becomes the fastest
    list that fits.  A layout that fits with ``core_attn`` keeps it: every further module
    only adds forward work (:func:`dse.graph.train.module_recompute_ops`), and the other
    recompute settings ignore the list.  The list is a leaf of the Workload: the passes
    share one compiled program."""
    base = df.assign(recompute_modules=recompute_modules_names(RECOMPUTE_MODULES_DEFAULT))
    miss = base[(base["recompute"] == RECOMPUTE_NAMES[1]) & ~base["feasible"]]
    if miss.empty:
        return base
    lay = miss[list(FIELDS)].drop_duplicates()
    sub = {f: lay[f].to_numpy().astype(cols[f].dtype) for f in FIELDS if f not in ("recompute", "sp")}
    sub["recompute"] = np.full(len(lay), 1, dtype=cols["recompute"].dtype)
    sub["sp"] = lay["sp"].to_numpy().astype(cols["sp"].dtype)
    # lists by size: a list that holds one that already fits a layout is slower there and
    # no smaller (more recompute), so each layout is swept only until it fits everywhere
    fits = [[] for _ in range(len(lay))]
    found = []
    for code in sorted(module_candidates(model)[1:], key=lambda c: bin(c).count("1")):
        todo = np.array([not any(f & ~code == 0 for f in fl) for fl in fits])
        if not todo.any():
            continue
        w = replace(wl, recompute_modules=code)
        part = {f: v[todo] for f, v in sub.items()}
        d = to_dataframe(sweep_points(model, w, hws, part, mem_margin=mem_margin))
        ok = d[d["feasible"]]
        # a layout is settled once the list fits it on every hardware (rows in point order
        # h * n + l)
        everywhere = d["feasible"].to_numpy().reshape(len(hws), int(todo.sum())).all(axis=0)
        for i in np.flatnonzero(todo)[everywhere]:
            fits[i].append(code)
        found.append(ok.assign(recompute_modules=recompute_modules_names(code)))
    key = ["hardware", *FIELDS]
    out = pd.concat([base, *found], ignore_index=True)
    out = out.sort_values(["feasible", "step_time_s"], ascending=[False, True], kind="stable")
    return out.drop_duplicates(subset=key, keep="first").reset_index(drop=True)


def oom_status(mem_bytes: float, hbm_bytes: float, mem_margin: float = 0.0) -> str:
    """The status of a point that does not fit (training and inference sweeps); with a
    margin, a point that fits the HBM but not the margin says so."""
    if mem_margin > 0 and mem_bytes <= hbm_bytes:
        return (f"out of memory: needs {mem_bytes / GIB:.1f} GiB > "
                f"{usable_bytes(hbm_bytes, mem_margin) / GIB:.1f} GiB usable "
                f"({hbm_bytes / GIB:.1f} GiB HBM less the {mem_margin:.0%} safety margin)")
    return f"out of memory: needs {mem_bytes / GIB:.1f} GiB > {hbm_bytes / GIB:.1f} GiB HBM"


def rows_frame(result: dict, feasible: np.ndarray, layouts: dict, hw_index: np.ndarray,
               hbm_bytes: np.ndarray, hw_names: list[str], parts=None,
               mem_margin: float = 0.0) -> pd.DataFrame:
    """One row per point: hardware, layout, feasibility and status, memory, step time and
    its breakdown (the sweep's columns); time fields NaN where a point does not fit."""
    n = len(hw_index)
    df = pd.DataFrame({"hardware": np.asarray(hw_names, dtype=object)[hw_index]})
    for f in FIELDS:
        df[f] = layouts[f]
    df["recompute"] = df["recompute"].map(RECOMPUTE_NAMES)
    df["sp"] = df["sp"].astype(bool)
    df["feasible"] = feasible
    mem = result["mem_bytes"]
    df["mem_gib"] = mem / GIB
    df["hbm_gib"] = hbm_bytes / GIB
    if parts is not None:
        for c, v in gib_columns(parts).items():
            df[c] = v
    status = np.full(n, "ok", dtype=object)
    bad = ~feasible
    if bad.any():     # vectorized: the same texts as oom_status
        m, c = mem[bad], hbm_bytes[bad]
        need = np.char.mod("%.1f", m / GIB)
        have = np.char.mod("%.1f", c / GIB)
        plain = np.char.add(np.char.add(np.char.add("out of memory: needs ", need), " GiB > "),
                            np.char.add(have, " GiB HBM"))
        if mem_margin > 0:
            usable = np.char.mod("%.1f", usable_bytes(c, mem_margin) / GIB)
            tail = f" GiB HBM less the {mem_margin:.0%} safety margin)"
            marg = np.char.add(np.char.add(np.char.add(np.char.add(
                "out of memory: needs ", need), " GiB > "), np.char.add(usable, " GiB usable (")),
                np.char.add(have, tail))
            plain = np.where(m <= c, marg, plain)
        status[bad] = plain.astype(object)
    df["status"] = status
    for f in ("step_time_s", "tokens_per_s", "mfu") + BREAKDOWN + ("recompute_layers",):
        df[f] = np.where(feasible, result[f], np.nan)
    return df


def to_dataframe(sr: SweepResult) -> pd.DataFrame:
    return rows_frame(sr.result, sr.feasible, sr.layouts, sr.hw_index, sr.hbm_bytes, sr.hw_names,
                      sr.mem_parts, sr.mem_margin)


def top_k(df: pd.DataFrame, k: int = 10) -> pd.DataFrame:
    return df[df["feasible"]].nsmallest(k, "step_time_s")
