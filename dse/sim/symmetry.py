"""Symmetry classes of ranks: which ranks the simulator may replay as one.

Colour refinement (1-dimensional Weisfeiler-Leman): start from (role, straggler factor,
"touches a faulty link"), then repeatedly split by the multiset of colours of each
communication group used by the trace and by the colours of send/recv peers, until
stable.  Ranks of one class execute identical programs against identically-coloured
partners, so one representative per class is simulated; the engine nevertheless puts
the flows of *every* member group on the network (contention between groups is kept)
and finishes a class's communication when its slowest member group does (the
bulk-synchronous approximation).  Without a rank grid, with literal groups/peers, or
with ``coalesce=False`` every rank is its own class (exact).
"""

from __future__ import annotations

import numpy as np

from dse.sim.faults import ResolvedFaults
from dse.sim.program import RoleProgram


def _groups(grid, dim: str, R: int) -> np.ndarray:
    """(R, n) matrix of ``grid.group(r, dim)`` for every rank (vectorized)."""
    if dim == "ep":
        return np.array([grid.group(r, dim) for r in range(R)], dtype=np.int64)
    stride, n = grid._strides()[dim]
    r = np.arange(R, dtype=np.int64)
    base = r - ((r // stride) % n) * stride
    return base[:, None] + np.arange(n, dtype=np.int64)[None, :] * stride


def _neighbors(grid, dim: str, delta: int, R: int) -> np.ndarray:
    """``grid.neighbor(r, dim, delta)`` for every rank (vectorized; -1 off the grid)."""
    stride, n = grid._strides()[dim]
    r = np.arange(R, dtype=np.int64)
    c = (r // stride) % n + delta
    return np.where((c >= 0) & (c < n), r + delta * stride, -1)


def rank_classes(trace, grid, rank_offset: int, roles: dict[str, RoleProgram],
                 rf: ResolvedFaults, coalesce: bool) -> np.ndarray:
    """Class id per job-local rank of ``trace`` placed at GPU ``rank_offset``."""
    R = trace.num_ranks
    if not coalesce or grid is None or any(r.literal for r in roles.values()):
        return np.arange(R)
    keys = {}
    init = np.zeros(R, np.int64)
    for r in range(R):
        g = rank_offset + r
        k = (trace.rank_role[r], rf.rank_factor.get(g, 1.0), g in rf.touched_gpus)
        init[r] = keys.setdefault(k, len(keys))
    dims = sorted(set().union(*(ro.coll_dims for ro in roles.values())))
    p2p = set().union(*(ro.p2p_dims for ro in roles.values()))
    p2p = sorted(p2p | {(d, -k) for d, k in p2p})
    gmats = [_groups(grid, d, R) for d in dims]
    nbrs = [_neighbors(grid, d, k, R) for d, k in p2p]
    col = init
    ncol = len(np.unique(col))
    while True:
        feats = [col[:, None]]
        for gm in gmats:
            feats.append(np.sort(col[gm], axis=1))
        for nb in nbrs:
            feats.append(np.where(nb >= 0, col[np.maximum(nb, 0)], -1)[:, None])
        m = np.concatenate(feats, axis=1)
        _, new = np.unique(m, axis=0, return_inverse=True)
        new = new.reshape(-1)
        nnew = int(new.max()) + 1
        col = new
        if nnew == ncol:
            break
        ncol = nnew
    return col
