"""Collectives as phases of concurrent point-to-point flows over a topology.

A collective on ``n`` GPUs with buffer size ``S`` bytes becomes a list of :class:`Phase`
objects.  Phases run one after another; the flows of one phase run concurrently and share
links (max-min, :mod:`dse.sim.engine`).  A phase that lumps ``k`` algorithm steps with an
identical flow set carries their summed bytes and ``k`` latencies: it ends
``k * max(route latency)`` after its last flow drains.  (Fluid model of NCCL's chunked
pipelining; exact for the step-by-step schedule whenever rates stay constant during the
collective, because every step is then bottlenecked by the same slowest flow.)

Size convention (nccl-tests, ``doc/PERFORMANCE.md``): ``S`` is the full buffer -- the
all-reduce buffer, the all-gather *output*, the reduce-scatter *input*, the all-to-all
send buffer per rank, the broadcast buffer.  Flow bytes below are fractions of ``S``
(:attr:`Phase.frac`).

Algorithms and their alpha-beta costs on ``n`` ranks with link bandwidth ``B`` and
per-step latency ``a`` (Thakur, Rabenseifner & Gropp, "Optimization of collective
communication operations in MPICH", IJHPCA 2005; Patarasuk & Yuan, "Bandwidth optimal
all-reduce algorithms for clusters of workstations", JPDC 2009):

- ring all-reduce: ``2(n-1)`` steps of ``S/n`` -> ``2(n-1)/n * S/B + 2(n-1) a``;
- ring reduce-scatter / all-gather: ``n-1`` steps of ``S/n`` -> ``(n-1)/n * S/B + (n-1) a``;
- tree all-reduce (NCCL's double binary tree, Sanders, Speck & Traff 2009): two
  complementary binary trees each carry ``S/2``; reduce up then broadcast down, each
  pipelined over ``depth = floor(log2 n)`` levels -> about ``2 S/B + 2 depth a``;
- broadcast: pipelined chain from the root (``group[0]``): ``S/B + (n-1) a``;
- all-to-all: ``n(n-1)`` concurrent flows of ``S/n`` (NCCL issues ``n-1`` send/recv
  pairs per rank) -> ``(n-1)/n * S/B + a`` on a non-blocking switch;
- hierarchical (NCCL's behaviour when a group spans NVLink domains): intra-domain
  reduce-scatter of ``S``, inter-domain all-reduce of ``S/n_local`` among GPUs with the
  same local index, intra-domain all-gather of ``S``;
- send/recv: one flow of ``S``, one latency.

Bus bandwidth (nccl-tests ``doc/PERFORMANCE.md``): ``busbw = algbw * factor`` with
``algbw = S / t`` and factor ``2(n-1)/n`` for all-reduce, ``(n-1)/n`` for all-gather,
reduce-scatter and all-to-all, ``1`` for broadcast and send/recv (:func:`busbw_factor`).

The algorithm is chosen per dimension (:attr:`DimSpec.algo`, default ring) when a group
lies inside one dimension, and by ``Topology.cross_dim_algo`` (default hierarchical) when
it spans several; reduce-scatter and all-gather always use rings, as NCCL does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from dse.sim.topology import Topology

ALL_REDUCE = "all_reduce"
REDUCE_SCATTER = "reduce_scatter"
ALL_GATHER = "all_gather"
ALL_TO_ALL = "all_to_all"
BROADCAST = "broadcast"
SEND = "send"
KINDS = (ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL, BROADCAST, SEND)


@dataclass(frozen=True)
class Phase:
    """Concurrent flows ``src[i] -> dst[i]`` (GPU ids) of ``frac[i] * S`` bytes each,
    lumping ``steps`` algorithm steps (latency ``steps * max route latency``)."""

    src: tuple[int, ...]
    dst: tuple[int, ...]
    frac: tuple[float, ...]
    steps: int


def busbw_factor(kind: str, n: int) -> float:
    """nccl-tests bus-bandwidth factor: ``busbw = algbw * busbw_factor(kind, n)``
    (``doc/PERFORMANCE.md``: all-reduce ``2(n-1)/n``; reduce-scatter, all-gather,
    all-to-all ``(n-1)/n``; broadcast and send/recv ``1``)."""
    if n <= 1:
        return 1.0 if kind in (BROADCAST, SEND) else 0.0
    if kind == ALL_REDUCE:
        return 2 * (n - 1) / n
    if kind in (REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL):
        return (n - 1) / n
    return 1.0


def ring_time_s(kind: str, size_bytes: float, n: int, bw_bytes_per_s: float,
                latency_s: float) -> float:
    """Alpha-beta time of a ring collective on an uncontended network:
    ``busbw_factor * S / B + steps * alpha`` with ``steps = 2(n-1)`` (all-reduce) or
    ``n-1`` (reduce-scatter, all-gather) -- Thakur et al. 2005, NCCL PERFORMANCE.md."""
    if n <= 1:
        return 0.0
    steps = 2 * (n - 1) if kind == ALL_REDUCE else n - 1
    return busbw_factor(kind, n) * size_bytes / bw_bytes_per_s + steps * latency_s


def ring(kind: str, gpus: Sequence[int]) -> list[Phase]:
    """Ring all-reduce / reduce-scatter / all-gather in group order: one lumped phase of
    flows ``g[i] -> g[i+1]`` carrying ``steps * S/n`` with ``steps = 2(n-1)`` or
    ``n-1``."""
    n = len(gpus)
    if n <= 1:
        return []
    steps = 2 * (n - 1) if kind == ALL_REDUCE else n - 1
    src = tuple(gpus)
    dst = tuple(gpus[(i + 1) % n] for i in range(n))
    return [Phase(src, dst, (steps / n,) * n, steps)]


def tree_allreduce(gpus: Sequence[int]) -> list[Phase]:
    """Double binary tree all-reduce: tree 1 is the heap-ordered binary tree over the
    group (parent of position ``i`` is ``(i-1)//2``), tree 2 the same over the reversed
    group, so interior nodes of one are leaves of the other.  Each tree carries ``S/2``:
    a reduce phase (child -> parent) then a broadcast phase (parent -> child), each
    pipelined over ``depth`` levels."""
    n = len(gpus)
    if n <= 1:
        return []
    depth = max(1, n.bit_length() - 1)
    up_s, up_d = [], []
    for order in (list(gpus), list(gpus)[::-1]):
        for i in range(1, n):
            up_s.append(order[i])
            up_d.append(order[(i - 1) // 2])
    f = (0.5,) * len(up_s)
    return [Phase(tuple(up_s), tuple(up_d), f, depth),
            Phase(tuple(up_d), tuple(up_s), f, depth)]


def broadcast_chain(gpus: Sequence[int]) -> list[Phase]:
    """Pipelined chain broadcast from ``gpus[0]``: flows ``g[i] -> g[i+1]`` of ``S``,
    ``n-1`` latencies."""
    n = len(gpus)
    if n <= 1:
        return []
    return [Phase(tuple(gpus[:-1]), tuple(gpus[1:]), (1.0,) * (n - 1), n - 1)]


def all_to_all(gpus: Sequence[int]) -> list[Phase]:
    """All-to-all: every GPU sends ``S/n`` to every other GPU concurrently."""
    n = len(gpus)
    if n <= 1:
        return []
    src = tuple(a for a in gpus for b in gpus if a != b)
    dst = tuple(b for a in gpus for b in gpus if a != b)
    return [Phase(src, dst, (1.0 / n,) * len(src), 1)]


def send(src: int, dst: int) -> list[Phase]:
    """Point-to-point: one flow of ``S``."""
    return [Phase((src,), (dst,), (1.0,), 1)]


def merge(parts: Sequence[list[Phase]], scale: float = 1.0) -> list[Phase]:
    """Run several phase lists side by side (phase ``i`` of every list together),
    scaling bytes by ``scale``."""
    out = []
    for i in range(max((len(p) for p in parts), default=0)):
        src, dst, frac, steps = [], [], [], 0
        for p in parts:
            if i < len(p):
                src += p[i].src
                dst += p[i].dst
                frac += [x * scale for x in p[i].frac]
                steps = max(steps, p[i].steps)
        out.append(Phase(tuple(src), tuple(dst), tuple(frac), steps))
    return out


def _split(topo: Topology, gpus: Sequence[int], d0: int) -> list[list[int]] | None:
    """Local groups: members that agree on every coordinate except ``d0``, in order of
    first appearance; ``None`` if they are not all of one size."""
    groups: dict[tuple, list[int]] = {}
    for g in gpus:
        key = tuple(c for d, c in enumerate(topo.coords(g)) if d != d0)
        groups.setdefault(key, []).append(g)
    locs = list(groups.values())
    if len({len(x) for x in locs}) != 1:
        return None
    return locs


def hierarchical(topo: Topology, kind: str, gpus: Sequence[int]) -> list[Phase] | None:
    """Two-level decomposition over the innermost spanned dimension (recursing for the
    inter-domain part): all-reduce = local RS(S) + inter AR(S/n_l) + local AG(S);
    reduce-scatter = local RS(S) + inter RS(S/n_l); all-gather = inter AG(S/n_l) +
    local AG(S).  ``None`` when the group is not regular (unequal local groups)."""
    spanned = topo.spanned_dims(gpus)
    locs = _split(topo, gpus, spanned[0])
    if locs is None or len(locs[0]) == 1:
        return None
    nl = len(locs[0])
    inter = [[loc[i] for loc in locs] for i in range(nl)]
    if kind == ALL_REDUCE:
        rs = merge([ring(REDUCE_SCATTER, loc) for loc in locs])
        mid = merge([plan(topo, ALL_REDUCE, grp) for grp in inter], 1.0 / nl)
        ag = merge([ring(ALL_GATHER, loc) for loc in locs])
        return rs + mid + ag
    if kind == REDUCE_SCATTER:
        return (merge([ring(REDUCE_SCATTER, loc) for loc in locs])
                + merge([plan(topo, REDUCE_SCATTER, grp) for grp in inter], 1.0 / nl))
    if kind == ALL_GATHER:
        return (merge([plan(topo, ALL_GATHER, grp) for grp in inter], 1.0 / nl)
                + merge([ring(ALL_GATHER, loc) for loc in locs]))
    return None


def plan(topo: Topology, kind: str, gpus: Sequence[int],
         algo: str | None = None) -> list[Phase]:
    """Phases of collective ``kind`` on GPUs ``gpus`` (in group order).

    ``algo`` overrides the topology's choice ("ring", "tree", "hierarchical").  Groups
    inside one dimension use that dimension's ``algo``; groups spanning several use
    ``topo.cross_dim_algo``; irregular groups fall back to a flat ring.
    """
    gpus = list(gpus)
    n = len(gpus)
    if n <= 1:
        return []
    if kind == SEND:
        return send(gpus[0], gpus[1])
    if kind == ALL_TO_ALL:
        return all_to_all(gpus)
    if kind == BROADCAST:
        return broadcast_chain(gpus)
    if algo is None:
        spanned = topo.spanned_dims(gpus)
        if len(spanned) == 1:
            algo = topo.dims[spanned[0]].algo
        else:
            algo = topo.cross_dim_algo
    if algo == "hierarchical" and len(topo.spanned_dims(gpus)) > 1:
        h = hierarchical(topo, kind, gpus)
        if h is not None:
            return h
    if algo == "tree" and kind == ALL_REDUCE:
        return tree_allreduce(gpus)
    return ring(kind, gpus)
