"""Flows on links: the fluid network model of the simulator.

Concurrent flows share every link by max-min fairness, computed by progressive filling
(Bertsekas & Gallager, *Data Networks*, 2nd ed., sec. 6.5.2: raise all unfrozen flow
rates equally until a link saturates, freeze the flows through it, repeat).
:class:`FlowNet` keeps the flows in flight as arrays (path, remaining bytes, rate,
owner), re-solves the rates only for the flows connected -- through shared links,
transitively -- to a link whose flow set changed, and reports which owners' flows have
drained.  :func:`route_phases` turns the phases of :mod:`dse.sim.collectives` into routed
:class:`PhasePlan` s (a phase ends ``steps * max(route latency)`` after its last flow
drains).  :func:`aggregate_plans` keeps, of a phase that runs many symmetric member
groups side by side (a rank class's collective), only the representative group's flows
(flow aggregation, below).  :func:`union_length` measures a set of busy intervals.

Flow aggregation.  A coalesced rank class puts the flows of every member group on the
network (:mod:`dse.sim.engine`).  When those groups are *link-disjoint* (no link carries
flows of two of them) and *fault-identical* (every group's flows, sorted, see the same
bandwidth factors and detours), each group is an isomorphic copy of the others: it
meets the same capacities and -- because every class's representative group is the one
holding the class's representative rank, so the groups of one rank's collectives and
sends overlap where the real ones do -- the same competing flows.  Then only the
representative group's flows enter the max-min solve; the phase keeps the latency and
the per-link byte accounting of *all* groups (so link utilisation is unchanged).  On a
rail-optimised network this is one flow set per rail class instead of one per rank pair.
Anything else (groups sharing an oversubscribed spine link, a group crossing a slowed or
failed link that another does not) keeps every flow.

Units: seconds, bytes, bytes/s.
"""

from __future__ import annotations

import math

import numpy as np

from dse.sim import collectives as coll
from dse.sim.faults import ResolvedFaults
from dse.sim.topology import Topology


def maxmin_rates(paths: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Max-min fair rates by progressive filling.

    ``paths``: (F, H) link ids per flow, padded with ``L = len(cap) - 1`` (a dummy link
    of infinite capacity); ``cap``: (L+1,) bytes/s.  Every flow must cross at least one
    real link.  Each round raises all unfrozen rates by the smallest fair share
    ``remaining_cap / unfrozen_flows`` over used links, then freezes the flows through
    saturated links (Bertsekas & Gallager, Data Networks, sec. 6.5.2).
    """
    F = paths.shape[0]
    rate = np.zeros(F)
    if F == 0:
        return rate
    L = cap.shape[0] - 1
    # relabel the links the flows use as 0..k-1 (cost independent of the network size)
    ulk, inv = np.unique(paths, return_inverse=True)
    P = inv.reshape(paths.shape)
    capu = cap[ulk].astype(np.float64)
    L1 = ulk.shape[0]
    dummy = L1 - 1 if ulk[-1] == L else -1
    rem = capu.copy()
    idx = np.arange(F)
    while True:
        cnt = np.bincount(P.ravel(), minlength=L1)
        if dummy >= 0:
            cnt[dummy] = 0
        used = np.flatnonzero(cnt)
        share = rem[used] / cnt[used]
        j = int(np.argmin(share))
        inc = float(share[j])
        rate[idx] += inc
        rem[used] -= inc * cnt[used]
        sat = np.zeros(L1, dtype=bool)
        sat[used] = rem[used] <= 1e-9 * capu[used]
        sat[used[j]] = True
        frz = sat[P].any(axis=1)
        if frz.all():
            return rate
        keep = ~frz
        idx = idx[keep]
        P = P[keep]


def union_length(start_s: np.ndarray, end_s: np.ndarray) -> float:
    """Lebesgue measure of the union of intervals ``[start_s[k], end_s[k]]``."""
    n = start_s.shape[0]
    if n == 0:
        return 0.0
    o = np.argsort(start_s, kind="stable")
    st, en = start_s[o], np.maximum.accumulate(end_s[o])
    new = np.empty(n, dtype=bool)
    new[0] = True
    new[1:] = st[1:] > en[:-1]
    first = np.flatnonzero(new)
    last = np.concatenate([first[1:] - 1, [n - 1]])
    return float(np.sum(en[last] - st[first]))


class PhasePlan:
    """One routed phase: ``paths`` (F, H) link ids (padded with the dummy link), the
    fraction ``frac`` of the run's bytes each flow carries, the phase's ``latency_s``,
    and the per-link byte fractions (``lk_ids``, ``lk_frac``) for link accounting.
    ``paths is None`` for a phase without network flows (latency only)."""

    __slots__ = ("paths", "frac", "latency_s", "lk_ids", "lk_frac", "grp", "fault")

    def __init__(self, paths, frac, latency_s, lk_ids, lk_frac, grp=None, fault=None):
        self.paths, self.frac, self.latency_s = paths, frac, latency_s
        self.lk_ids, self.lk_frac = lk_ids, lk_frac
        self.grp = grp        # member group of each flow (aggregation), or None
        self.fault = fault    # per flow: smallest bandwidth factor on its path, -1 if detoured


def aggregate_plans(plans: list[PhasePlan], rep: int, L: int) -> list[PhasePlan] | None:
    """The plans with only member group ``rep``'s flows (module docstring), or ``None``
    when some phase's groups are not link-disjoint and fault-identical (then every flow
    must stay).  ``L`` is the dummy link id."""
    out = []
    for pl in plans:
        if pl.paths is None:
            out.append(pl)
            continue
        g = pl.grp
        keep = g == rep
        if keep.all():
            out.append(pl)
            continue
        n_rep = int(np.count_nonzero(keep))
        if n_rep == 0:
            return None
        ng = int(g.max()) + 1
        cnt = np.bincount(g, minlength=ng)
        if np.any(cnt[cnt > 0] != n_rep):
            return None
        P = pl.paths
        H = P.shape[1]
        lk = P.ravel()
        gg = np.repeat(g, H)
        real = lk != L
        key = np.unique(lk[real] * ng + gg[real])
        lks = key // ng
        if lks.size > 1 and np.any(lks[1:] == lks[:-1]):
            return None                                   # two groups share a link
        fl = pl.fault
        if np.any(fl != 1.0):
            o = np.lexsort((fl, g))
            sig = fl[o].reshape(-1, n_rep)                # one sorted row per group
            if np.any(sig != sig[0]):
                return None
        out.append(PhasePlan(P[keep], pl.frac[keep], pl.latency_s, pl.lk_ids, pl.lk_frac,
                             g[keep], fl[keep]))
    return out


class FlowNet:
    """The flows in flight on ``topo`` with the capacities left by the faults ``rf``.

    ``add`` puts a phase's flows on the network, ``next_finish_s`` re-solves the rates
    where needed and returns when the next flow drains, ``finish`` removes the drained
    flows and returns ``(owner, number of flows)`` pairs.  ``link_bytes`` accumulates
    the bytes every link carried; ``num_solves`` counts max-min solves."""

    def __init__(self, topo: Topology, rf: ResolvedFaults):
        self.topo, self.rf = topo, rf
        L = topo.num_links
        self.L = L
        self.cap = np.concatenate([topo.link_cap_bytes_per_s * rf.cap_factor, [np.inf]])
        self.fcap = np.concatenate([rf.cap_factor, [1.0]])   # bandwidth factor per link
        self.link_bytes = np.zeros(L)
        self.dlinks = np.zeros(L + 1, dtype=bool)   # links whose flow set changed
        self.paths = np.full((0, 1), L, dtype=np.int64)
        self.rem = np.zeros(0)
        self.rate = np.zeros(0)
        self.owner = np.zeros(0, dtype=np.int64)
        self.t_last = 0.0
        self.t_next = math.inf
        self.dirty = False
        self.num_solves = 0
        self.routes: dict[tuple[int, int], tuple[list[int], float, bool] | None] = {}

    # ---- routing ----------------------------------------------------------------------
    def route(self, a: int, b: int):
        """(link ids, latency_s, detoured) of the route a -> b avoiding failed links, or
        None; ``detoured`` is true when failed links made it leave dimension order."""
        r = self.routes.get((a, b), False)
        if r is False:
            links = self.topo.route(a, b, self.rf.down)
            det = bool(self.rf.down) and links != self.topo.route(a, b)
            r = None if links is None else (links, self.topo.route_latency_s(links), det)
            self.routes[(a, b)] = r
        return r

    def route_phases(self, phases: list[coll.Phase], what: str, groups=None
                     ) -> tuple[list[PhasePlan] | None, str | None]:
        """Routed plans of ``phases``, or ``(None, reason)`` if some pair has no route.
        ``groups[i]`` (optional) gives the member group of every flow of phase ``i``
        (for :func:`aggregate_plans`)."""
        out = []
        L = self.L
        for pi, ph in enumerate(phases):
            rows, fr, lat, gl, dt = [], [], 0.0, [], []
            lab = groups[pi] if groups is not None else None
            for k, (a, b, f) in enumerate(zip(ph.src, ph.dst, ph.frac)):
                if a == b or f <= 0:
                    continue
                r = self.route(a, b)
                if r is None:
                    down = ", ".join(self.rf.down_names[:4])
                    return None, (f"{what}: no route from {self.topo.gpu_name(a)} (GPU {a})"
                                  f" to {self.topo.gpu_name(b)} (GPU {b}); failed links: "
                                  f"{down}")
                rows.append(r[0])
                fr.append(f)
                lat = max(lat, r[1])
                if lab is not None:
                    gl.append(lab[k])
                    dt.append(r[2])
            if rows:
                H = max(len(x) for x in rows)
                P = np.full((len(rows), H), L, dtype=np.int64)
                for k, x in enumerate(rows):
                    P[k, :len(x)] = x
                frac = np.asarray(fr)
                w = np.bincount(P.ravel(), weights=np.repeat(frac, H), minlength=L + 1)[:L]
                ids = np.flatnonzero(w)
                grp = fault = None
                if lab is not None:
                    grp = np.asarray(gl, dtype=np.int64)
                    fault = self.fcap[P].min(axis=1)
                    fault[np.asarray(dt, dtype=bool)] = -1.0
                out.append(PhasePlan(P, frac, ph.steps * lat, ids, w[ids], grp, fault))
            else:
                out.append(PhasePlan(None, None, 0.0, None, None))
        return out, None

    # ---- flows ------------------------------------------------------------------------
    def settle(self, now: float) -> None:
        """Drain every flow at its current rate up to ``now``."""
        dt = now - self.t_last
        if dt > 0 and self.rem.size:
            self.rem -= self.rate * dt
        self.t_last = now

    def add(self, pl: PhasePlan, size: float, owner: int, now: float) -> int:
        """Start the flows of ``pl`` carrying ``size`` bytes in all; returns their
        number."""
        self.settle(now)
        F = pl.paths.shape[0]
        self.link_bytes[pl.lk_ids] += pl.lk_frac * size
        self.dlinks[pl.lk_ids] = True
        P = pl.paths
        W = self.paths.shape[1]
        if P.shape[1] != W:
            H = max(P.shape[1], W)
            if P.shape[1] < H:
                P = np.concatenate([P, np.full((F, H - P.shape[1]), self.L, np.int64)], 1)
            else:
                n = self.paths.shape[0]
                self.paths = np.concatenate(
                    [self.paths, np.full((n, H - W), self.L, np.int64)], 1)
        self.paths = np.concatenate([self.paths, P])
        self.rem = np.concatenate([self.rem, pl.frac * size])
        self.rate = np.concatenate([self.rate, np.zeros(F)])
        self.owner = np.concatenate([self.owner, np.full(F, owner, np.int64)])
        self.dirty = True
        return F

    def next_finish_s(self, now: float) -> float:
        """Time the next flow drains, re-solving max-min rates first if the flow set
        changed (only for the flows connected to a changed link; others keep theirs)."""
        if not self.dirty:
            return self.t_next
        self.dirty = False
        self.settle(now)
        F = self.rem.size
        dl = self.dlinks
        if F == 0:
            self.t_next = math.inf
            dl[:] = False
            return self.t_next
        L = self.L
        dl[L] = False
        P = self.paths
        aff = dl[P].any(axis=1)
        n_aff = int(np.count_nonzero(aff))
        if n_aff:
            while n_aff < F:
                lk = np.zeros(L + 1, dtype=bool)
                lk[P[aff].ravel()] = True
                lk[L] = False
                aff2 = lk[P].any(axis=1)
                n2 = int(np.count_nonzero(aff2))
                if n2 == n_aff:
                    break
                aff, n_aff = aff2, n2
            self.num_solves += 1
            if n_aff == F:
                self.rate = maxmin_rates(P, self.cap)
            else:
                self.rate[aff] = maxmin_rates(P[aff], self.cap)
        dl[:] = False
        self.t_next = now + float(np.min(self.rem / self.rate))
        return self.t_next

    def finish(self, now: float) -> list[tuple[int, int]]:
        """Remove the flows drained by ``now`` (at least the first to drain); returns
        ``(owner, number of its flows removed)`` pairs."""
        self.settle(now)
        ttf = self.rem / self.rate
        done = ttf <= 1e-12 + 1e-9 * now
        done[int(np.argmin(ttf))] = True
        owners = self.owner[done]
        self.dlinks[self.paths[done].ravel()] = True
        keep = ~done
        self.paths = self.paths[keep]
        self.rem = self.rem[keep]
        self.rate = self.rate[keep]
        self.owner = self.owner[keep]
        if self.paths.shape[0] == 0:
            self.paths = np.full((0, 1), self.L, dtype=np.int64)
        self.dirty = True
        if owners.min() == owners.max():
            return [(int(owners[0]), owners.size)]
        rids, cnt = np.unique(owners, return_counts=True)
        return list(zip(rids.tolist(), cnt.tolist()))
