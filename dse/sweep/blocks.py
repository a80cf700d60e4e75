"""Block evaluation of (layout x hardware) design points: the training sweep's kernel.

A block is ``LB`` layouts x ``HB`` hardware specs, evaluated by a *nested* ``vmap``
(outer over layouts, inner over hardware) of the scalar step
(:func:`dse.train.step.train_step`).  JAX batches an operation over an axis only if it
depends on that axis, so everything of a step that depends on the layout alone -- the
operator graph's shapes, bytes and FLOPs, parameter and activation counts, micro-batch
and schedule arithmetic -- is computed once per layout and shared by the ``HB`` hardware
variants.  Fields with one value over the whole sweep (:func:`constant_fields`: a
variant grid's SM count, tile sizes, clocks, efficiencies; a dense model's ``ep``)
enter as 0-d leaves that neither ``vmap`` maps, so what depends on them and the layout
alone (tile and wave counts, compute time at a fixed peak) is per layout too, and only
the terms that mix a varied hardware knob with the layout run per point.  (XLA's cost
analysis for ``make bench``'s sweep: ~3,900 FLOPs per point with every field mapped,
~700 for the streamed kernel -- step, memory mask and reductions -- with constant
fields unmapped.)

Block shapes: ``HB`` is the smallest of 1, 2, 4, ..., 64 that holds the hardware count;
``LB`` a power of 8 from 64 to ``block_points() / HB`` (:func:`dse.sweep.runner.chunk_size`);
so a sweep compiles one of a few shapes whatever its size.  The last block is padded
by repeating its first layout / hardware; padded points are marked invalid.  Point
``p = h * n_layouts + l`` (hardware-major, as :class:`dse.sweep.run.SweepResult`).

Blocks run ``D`` at a time, one per JAX device (:mod:`dse.sweep.devices`), dispatched one
super-block ahead of their copy-back (:func:`iterate_blocks`), so the devices compute the
next blocks while the host converts the last.
"""

from __future__ import annotations

from typing import Iterator

import jax
import jax.numpy as jnp
import numpy as np

from dse.spec.hardware import Hardware
from dse.spec.layout import Layout
from dse.sweep.devices import device_mesh, sharded_blocks
from dse.sweep.runner import chunk_size
from dse.train.memory_parts import MemoryParts, memory_parts
from dse.train.step import train_step

MAX_POINTS = 1 << 18           # points per block (LB x HB) on a CPU device
MAX_POINTS_ACCEL = 1 << 22     # on a GPU: fewer, larger blocks amortize the per-block host work
HB_MAX = 64


def block_points() -> int:
    """Points per block on the default backend (:data:`MAX_POINTS`, or
    :data:`MAX_POINTS_ACCEL` on an accelerator)."""
    return MAX_POINTS if jax.default_backend() == "cpu" else MAX_POINTS_ACCEL


def block_shape(n_layouts: int, n_hardware: int) -> tuple[int, int]:
    """(LB, HB) for a sweep of that size (module docstring)."""
    hb = 1
    while hb < n_hardware and hb < HB_MAX:
        hb *= 2
    lb = chunk_size(n_layouts, max(block_points() // hb, 64))
    return lb, hb


def _axes(tree):
    """``vmap`` axes of a block input: 0 for a leaf with a point axis, None for a 0-d
    leaf (a field constant over the sweep, :func:`constant_fields`)."""
    return jax.tree_util.tree_map(lambda x: 0 if jnp.ndim(x) else None, tree)


def nested(fn):
    """``fn(model, wl, lay, hw)`` over every (layout, hardware) pair of a block: leaves of
    shape (LB, HB).  0-d leaves of ``lay`` / ``hw`` are fields shared by the whole block
    and are not mapped, so whatever depends on them alone is computed once."""
    def run(model, wl, lay, hw):
        inner = jax.vmap(fn, in_axes=(None, None, None, _axes(hw)))
        return jax.vmap(inner, in_axes=(None, None, _axes(lay), None))(model, wl, lay, hw)
    return run


def nested_step(model, wl, lay: Layout, hw: Hardware):
    """:class:`~dse.train.step.StepResult` of every (layout, hardware) pair of a block."""
    return nested(train_step)(model, wl, lay, hw)


def _step_parts(model, wl, lay, hw, l_idx, h_idx, valid, n_l):
    # one block function: XLA shares the memory model between the step and the breakdown
    return nested(train_step)(model, wl, lay, hw), nested(memory_parts)(model, wl, lay, hw)


def _pad(idx: np.ndarray, n: int) -> np.ndarray:
    return np.concatenate([idx, np.full(n - len(idx), idx[0], dtype=idx.dtype)]) if len(idx) < n else idx


def constant_fields(cols: dict, keep: str | None = None) -> frozenset:
    """Fields of a column table (layouts or hardware specs) with one value in every row:
    they enter a block as 0-d leaves (:func:`nested` does not map them).  ``keep`` stays
    mapped when every field is constant (``vmap`` needs one mapped input)."""
    const = frozenset(f for f, v in cols.items() if len(v) and bool(np.all(v == v[0])))
    if keep is not None and len(const) == len(cols):
        const = const - {keep}
    return const


def block_inputs(lay_cols: dict, hw_cols: dict, l_idx: np.ndarray, h_idx: np.ndarray, lb: int, hb: int,
                 lay_const: frozenset = frozenset(), hw_const: frozenset = frozenset()):
    """Padded (Layout, Hardware) pytrees of one block (the ``*_const`` fields as 0-d
    leaves), and its validity mask (LB, HB)."""
    valid = (np.arange(lb) < len(l_idx))[:, None] & (np.arange(hb) < len(h_idx))[None, :]
    li, hi = _pad(l_idx, lb), _pad(h_idx, hb)
    lay = Layout(**{f: v[0] if f in lay_const else v[li] for f, v in lay_cols.items()})
    hw = Hardware(**{f: v[0] if f in hw_const else v[hi] for f, v in hw_cols.items()})
    return lay, hw, valid, li, hi


def iterate_blocks(block_fn, model, wl, lay_cols: dict, hw_cols: dict, n_l: int, n_h: int,
                   progress=None, static: tuple = ()) -> Iterator:
    """Yield ``(l_idx, h_idx, valid, host outputs)`` of
    ``block_fn(model, wl, lay, hw, l_idx, h_idx, valid, n_l, **dict(static))`` (a
    traceable function of one padded block) for every block: ``D`` blocks at a time, one
    per device (:func:`dse.sweep.devices.sharded_blocks`), the next ``D`` dispatched
    before the last are copied back."""
    mesh = device_mesh()
    n_dev = mesh.size
    lb, hb = block_shape(-(-n_l // n_dev), n_h)
    lay_const, hw_const = constant_fields(lay_cols, "tp"), constant_fields(hw_cols, "hbm_bytes")
    pending = None
    for h0 in range(0, n_h, hb):
        h_idx = np.arange(h0, min(h0 + hb, n_h), dtype=np.int64)
        for l0 in range(0, n_l, n_dev * lb):
            subs = [np.arange(s, min(s + lb, n_l), dtype=np.int64) for s in range(l0, l0 + n_dev * lb, lb)]
            # a device with no layouts left gets a copy of the first block, all invalid
            parts = [block_inputs(lay_cols, hw_cols, sub if len(sub) else subs[0], h_idx, lb, hb,
                                  lay_const, hw_const) for sub in subs]
            lay = jax.tree_util.tree_map(lambda *xs: np.concatenate(xs) if np.ndim(xs[0]) else xs[0],
                                         *(p[0] for p in parts))
            valid = np.concatenate([p[2] & (len(sub) > 0) for p, sub in zip(parts, subs)])
            li = np.concatenate([p[3] for p in parts]).astype(np.int32)
            out = sharded_blocks(block_fn, static, mesh, model, wl, lay, parts[0][1], li,
                                 parts[0][4].astype(np.int32), valid, n_l)
            if pending is not None:
                yield from _collect(pending, progress)
            pending = (subs, h_idx, [p[2] for p in parts], out)
    if pending is not None:
        yield from _collect(pending, progress)


def _collect(pending, progress):
    subs, h_idx, valids, out = pending
    host = jax.tree_util.tree_map(np.asarray, out)
    for d, (l_idx, valid) in enumerate(zip(subs, valids)):
        if not len(l_idx):
            continue
        if progress is not None:
            progress.update(len(l_idx) * len(h_idx))
        yield l_idx, h_idx, valid, jax.tree_util.tree_map(lambda x: x[d], host)


def evaluate_all(model, wl, lay_cols: dict, hw_cols: dict, n_l: int, n_h: int, progress=None):
    """Every point's StepResult fields and memory breakdown
    (:class:`dse.train.memory_parts.MemoryParts`) as flat arrays in point order
    ``h * n_l + l``."""
    from dse.train.step import StepResult
    # (hardware, layout) arrays filled block by block with slice copies; raveled in
    # point order h * n_l + l at the end (a view, no copy)
    res = {f: np.empty((n_h, n_l), dtype=np.float64) for f in StepResult._fields}
    parts = {f: np.empty((n_h, n_l), dtype=np.float64) for f in MemoryParts._fields}
    for l_idx, h_idx, _, (out, mp) in iterate_blocks(_step_parts, model, wl, lay_cols, hw_cols, n_l, n_h,
                                                     progress):
        l0, h0, k_l, k_h = l_idx[0], h_idx[0], len(l_idx), len(h_idx)
        for dst, src in ((res, out), (parts, mp)):
            for f, arr in dst.items():
                arr[h0:h0 + k_h, l0:l0 + k_l] = np.asarray(getattr(src, f))[:k_l, :k_h].T
    res = {f: v.ravel() for f, v in res.items()}
    parts = {f: v.ravel() for f, v in parts.items()}
    return res, MemoryParts(**parts)


@jax.jit
def _pairs(model, wl, lay, hw):
    step = jax.vmap(train_step, in_axes=(None, None, 0, 0))(model, wl, lay, hw)
    return step, jax.vmap(memory_parts, in_axes=(None, None, 0, 0))(model, wl, lay, hw)


MASK_FIRST_BELOW = 4     # hardware specs: below this, prune by memory before the step


def evaluate_pairs(model, wl, hw_cols: dict, lay_cols: dict, h_idx: np.ndarray, l_idx: np.ndarray,
                   tiered: bool = False):
    """StepResult fields and memory breakdown of the listed (hardware, layout) pairs (a
    few selected points, not a grid), through the chunked runner (``tiered``: through
    :func:`dse.sweep.runner.run_tiered`, a few calls of a program on the host)."""
    from dse.sweep.runner import run_chunked, run_tiered
    from dse.train.step import StepResult

    def args_for(idx):
        return (model, wl, Layout(**{f: v[l_idx[idx]] for f, v in lay_cols.items()}),
                Hardware(**{f: v[h_idx[idx]] for f, v in hw_cols.items()}))
    step, parts = (run_tiered if tiered else run_chunked)(_pairs, args_for, len(h_idx))
    return ({f: np.asarray(getattr(step, f), dtype=np.float64) for f in StepResult._fields},
            MemoryParts(*(np.asarray(x, dtype=np.float64) for x in parts)))


_memory_pairs = jax.jit(jax.vmap(memory_parts, in_axes=(None, None, 0, 0)))


def evaluate_masked(model, wl, lay_cols: dict, hw_cols: dict, n_l: int, n_h: int, progress=None):
    """As :func:`evaluate_all` for sweeps with few hardware specs (nothing to share across
    a block's hardware): the memory model first on every point, then the step only on
    the points that fit (time fields NaN elsewhere) -- a third of the points pruned
    before the expensive pass in a typical sweep.  A small call (one ``dse predict`` row's
    candidate layouts) of a program seen a few times runs on the host, not compiled
    (:func:`dse.sweep.runner.run_tiered`)."""
    from dse.sweep.runner import run_tiered
    from dse.train.step import StepResult
    h_idx = np.repeat(np.arange(n_h, dtype=np.int64), n_l)
    l_idx = np.tile(np.arange(n_l, dtype=np.int64), n_h)

    def args_for(idx):
        return (model, wl, Layout(**{f: v[l_idx[idx]] for f, v in lay_cols.items()}),
                Hardware(**{f: v[h_idx[idx]] for f, v in hw_cols.items()}))
    mp = run_tiered(_memory_pairs, args_for, len(h_idx), progress=progress)
    parts = MemoryParts(*(np.asarray(x, dtype=np.float64) for x in mp))
    fits = parts.total_bytes <= hw_cols["hbm_bytes"][h_idx]
    res = {f: np.full(len(h_idx), np.nan) for f in StepResult._fields}
    fi = np.nonzero(fits)[0]
    if len(fi):
        r, _ = evaluate_pairs(model, wl, hw_cols, lay_cols, h_idx[fi], l_idx[fi], tiered=True)
        for f in StepResult._fields:
            res[f][fi] = r[f]
    res["mem_bytes"] = parts.total_bytes.copy()
    return res, parts
