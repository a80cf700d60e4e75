"""Event-driven replay of execution traces over a topology, with congestion and faults.

Execution semantics (per rank):

- Every stream issues its nodes in program order (CUDA stream semantics).  The head
  node of a stream is *issued* once its data and control dependencies on that rank have
  finished and the stream's previous node has finished.
- COMPUTE nodes run for ``duration_s * straggler factor``.
- A COLLECTIVE starts when *all* ranks of its group have issued it; nodes are matched by
  group and per-group sequence number (the k-th collective a rank issues on a group meets
  the k-th of every other member, as NCCL requires).  It then runs the phases of
  :func:`dse.sim.collectives.plan` as flows and finishes on every member at once.
- SEND starts its flow when issued (eager/buffered; deadlock-free for any send/recv
  order) and finishes when the data has arrived; RECV finishes once it is issued *and*
  the matching send's data has arrived.  Matching is by (source, destination, tag,
  per-channel sequence number).  A peer off the grid (``RankGrid.neighbor == -1``) makes
  the node a no-op.

Network model: flow-level fluid simulation.  Concurrent flows share every link by max-min
fairness, computed by progressive filling (Bertsekas & Gallager, *Data Networks*, 2nd ed.,
sec. 6.5.2: raise all unfrozen flow rates equally until a link saturates, freeze the flows
through it, repeat), recomputed whenever the set of flows changes.  A phase of a
collective ends ``steps * max(route latency)`` after its last flow drains (per-hop
latency, summed along the route; :mod:`dse.sim.collectives`).

Symmetry coalescing (``coalesce=True``): ranks are partitioned by colour refinement
(1-dimensional Weisfeiler-Leman): start from (role, straggler factor, "touches a faulty
link"), then repeatedly split by the multiset of colours of each communication group
used by the trace and by the colours of send/recv peers, until stable.  Ranks of one
class execute identical programs against identically-coloured partners, so one
representative per class is simulated; its collectives and sends nevertheless put the
flows of *every* member group on the network, so contention between groups (e.g. several
DP rings on one oversubscribed spine) is kept.  A class finishes a communication when its
slowest member group does (the bulk-synchronous approximation; ``coalesce=False``
simulates every rank separately and is exact).

Output: :class:`SimResult`.  Units: seconds, bytes, bytes/s.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from dse.errors import InputError, require
from dse.sim import collectives as coll
from dse.sim.faults import Fault, FaultSet, ResolvedFaults, resolve
from dse.sim.topology import Topology
from dse.trace.graph import NodeKind, RankGrid, TraceSet
from dse.trace.perfetto import TimelineEvent, write_chrome_trace

_COMP, _COLL, _SEND, _RECV = 0, 1, 2, 3
_KIND = {NodeKind.COMPUTE: _COMP, NodeKind.COLLECTIVE: _COLL, NodeKind.SEND: _SEND,
         NodeKind.RECV: _RECV}
_CAT = ("compute", "collective", "send", "recv")
_EV_DONE, _EV_PHASE = 0, 1


@dataclass
class Job:
    """One training job: its trace set, the rank grid that gives every rank its concrete
    groups and peers, and the GPU of its rank 0 (``rank_offset``)."""

    trace: TraceSet
    grid: RankGrid | None = None
    rank_offset: int = 0
    name: str = ""


@dataclass
class SimResult:
    """Replay outcome.  Per-rank arrays are indexed by global GPU id (``rank_offset +
    rank``; GPUs used by no job hold 0).  ``exposed_comm_s`` is the time some
    communication of the rank is in flight (from issue, including waiting for peers, to
    completion) while none of its compute is: ``|comm U compute| - |compute|``.
    ``link_util = link_bytes / (nominal bandwidth * step_time_s)``.  The timeline holds
    the events of one representative rank per class (``class_of_rank``).  ``blocked``
    names why the replay could not finish (no route, deadlock); then ``step_time_s`` is
    ``inf``.  ``num_events`` counts processed events (node completions and phase ends
    popped from the event heap, plus one per flow started and per flow finished);
    ``events_per_s = num_events / wall_s``.  ``rank_node_events`` is the number of
    (rank, node) executions the replay stands for (class size x nodes), and
    ``num_rate_updates`` the number of max-min solves."""

    step_time_s: float
    job_step_time_s: list[float]
    rank_busy_s: np.ndarray
    rank_compute_s: np.ndarray
    rank_exposed_comm_s: np.ndarray
    link_names: list[str]
    link_bytes: np.ndarray
    link_util: np.ndarray
    timeline: list[TimelineEvent]
    blocked: str | None
    class_of_rank: np.ndarray
    num_classes: int
    num_events: int
    num_rate_updates: int
    rank_node_events: int
    wall_s: float
    events_per_s: float
    meta: dict[str, str] = field(default_factory=dict)

    def write_chrome_trace(self, path) -> object:
        """Write the timeline as Chrome/Perfetto trace-event JSON."""
        return write_chrome_trace(self.timeline, path, meta=self.meta)

    def busiest_links(self, k: int = 10) -> list[tuple[str, float]]:
        order = np.argsort(-self.link_util)[:k]
        return [(self.link_names[i], float(self.link_util[i])) for i in order]


# ---- static per-role program ------------------------------------------------------------

class _Role:
    """A role's op list flattened into arrays and per-channel sequence numbers."""

    def __init__(self, name: str, nodes, uses_grid: bool):
        self.name = name
        self.n = len(nodes)
        idx = {}
        for i, nd in enumerate(nodes):
            if nd.id in idx:
                raise InputError(f"trace role {name!r}", f"node {nd.id}",
                                 "node ids must be unique within a role")
            idx[nd.id] = i
        self.names = [nd.name for nd in nodes]
        self.kind = [_KIND[NodeKind(nd.kind)] for nd in nodes]
        self.dur = [float(nd.duration_s) for nd in nodes]
        self.stream = [int(nd.stream) for nd in nodes]
        self.bytes = [float(nd.comm_bytes or nd.tensor_bytes) for nd in nodes]
        self.ckind = [(nd.comm_kind.value if hasattr(nd.comm_kind, "value")
                       else str(nd.comm_kind or "all_reduce")) for nd in nodes]
        for i, nd in enumerate(nodes):
            if self.kind[i] == _COLL and self.ckind[i] not in coll.KINDS[:-1]:
                raise InputError(f"trace role {name!r}", f"node {nd.id}.comm_kind",
                                 f"comm_kind must be one of {list(coll.KINDS[:-1])}, but "
                                 f"got {self.ckind[i]!r}")
        self.succ: list[list[int]] = [[] for _ in nodes]
        self.ndeps = [0] * self.n
        for i, nd in enumerate(nodes):
            deps = set(nd.data_deps) | set(nd.ctrl_deps)
            for d in deps:
                if d not in idx:
                    raise InputError(f"trace role {name!r}", f"node {nd.id}.deps",
                                     f"dependency {d} must name a node of the same role")
                self.succ[idx[d]].append(i)
            self.ndeps[i] = len(deps)
        self.stream_ids = sorted(set(self.stream))
        pos = {s: k for k, s in enumerate(self.stream_ids)}
        self.sidx = [pos[s] for s in self.stream]       # stream index per node
        self.queues: list[list[int]] = [[] for _ in self.stream_ids]
        for i, k in enumerate(self.sidx):
            self.queues[k].append(i)
        self.is_comp = np.array([k == _COMP for k in self.kind], dtype=bool)
        # channels and per-channel sequence numbers (program order)
        self.chan: list[tuple] = [()] * self.n
        self.seq = [0] * self.n
        self.literal = False
        counters: dict[tuple, int] = {}
        for i, nd in enumerate(nodes):
            k = self.kind[i]
            if k == _COMP:
                continue
            dim = nd.group_dim if uses_grid else ""
            if k == _COLL:
                ch = ("d", dim) if dim else ("l", tuple(nd.group))
            else:
                ch = (("d", dim, int(nd.peer_delta)) if dim else ("p", int(nd.peer)))
                ch = ch + (int(nd.tag), k)
            if not dim:
                self.literal = True
            self.chan[i] = ch
            self.seq[i] = counters.get(ch, 0)
            counters[ch] = self.seq[i] + 1
        self.coll_dims = {c[1] for c in self.chan if c and c[0] == "d" and len(c) == 2}
        self.p2p_dims = {(c[1], c[2]) for c in self.chan if c and c[0] == "d" and len(c) > 2}


class _ClassState:
    __slots__ = ("job", "role", "members", "rep", "gpu", "factor", "deps", "head", "busy",
                 "issue_t", "end_t", "ndone", "t_end")

    def __init__(self, job: int, role: _Role, members: list[int], rep: int, gpu: int,
                 factor: float):
        self.job, self.role, self.members, self.rep = job, role, members, rep
        self.gpu, self.factor = gpu, factor
        self.deps = list(role.ndeps)
        self.head = [0] * len(role.queues)
        self.busy = [False] * len(role.queues)
        self.issue_t = [0.0] * role.n
        self.end_t = [math.nan] * role.n
        self.ndone = 0
        self.t_end = 0.0


# ---- symmetry classes ----------------------------------------------------------------

def _classes(job: Job, roles: dict[str, _Role], rf: ResolvedFaults,
             coalesce: bool) -> np.ndarray:
    """Colour refinement of the job's ranks (module docstring); class id per rank."""
    ts, grid = job.trace, job.grid
    R = ts.num_ranks
    if not coalesce or grid is None or any(r.literal for r in roles.values()):
        return np.arange(R)
    keys = {}
    init = np.zeros(R, np.int64)
    for r in range(R):
        g = job.rank_offset + r
        k = (ts.rank_role[r], rf.rank_factor.get(g, 1.0), g in rf.touched_gpus)
        init[r] = keys.setdefault(k, len(keys))
    dims = sorted(set().union(*(ro.coll_dims for ro in roles.values())))
    p2p = set().union(*(ro.p2p_dims for ro in roles.values()))
    p2p = sorted(p2p | {(d, -k) for d, k in p2p})
    gmats = [np.array([grid.group(r, d) for r in range(R)], dtype=np.int64) for d in dims]
    nbrs = [np.array([grid.neighbor(r, d, k) for r in range(R)], dtype=np.int64)
            for d, k in p2p]
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


def _measure(start_s: np.ndarray, end_s: np.ndarray) -> float:
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


# ---- the simulator ------------------------------------------------------------------

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
    L1 = cap.shape[0]
    L = L1 - 1
    rem = cap.astype(np.float64).copy()
    idx = np.arange(F)
    P = paths
    while True:
        cnt = np.bincount(P.ravel(), minlength=L1)
        cnt[L] = 0
        used = np.flatnonzero(cnt)
        share = rem[used] / cnt[used]
        j = int(np.argmin(share))
        inc = float(share[j])
        rate[idx] += inc
        rem[used] -= inc * cnt[used]
        sat = np.zeros(L1, dtype=bool)
        sat[used] = rem[used] <= 1e-9 * cap[used]
        sat[used[j]] = True
        frz = sat[P].any(axis=1)
        if frz.all():
            return rate
        keep = ~frz
        idx = idx[keep]
        P = P[keep]


class _PhasePlan:
    __slots__ = ("paths", "frac", "latency_s", "lk_ids", "lk_frac")

    def __init__(self, paths, frac, latency_s, lk_ids, lk_frac):
        self.paths, self.frac, self.latency_s = paths, frac, latency_s
        self.lk_ids, self.lk_frac = lk_ids, lk_frac


class _Run:
    """A communication in flight: its phases, bytes and the nodes it completes."""

    __slots__ = ("plans", "size", "phase", "outstanding", "on_done")

    def __init__(self, plans, size, on_done):
        self.plans, self.size, self.on_done = plans, size, on_done
        self.phase = 0
        self.outstanding = 0


class _Sim:
    def __init__(self, jobs: list[Job], topo: Topology, rf: ResolvedFaults,
                 coalesce: bool, record_timeline: bool):
        self.topo, self.rf, self.record = topo, rf, record_timeline
        self.jobs = jobs
        L = topo.num_links
        self.L = L
        cap = topo.link_cap_bytes_per_s * rf.cap_factor
        self.cap = np.concatenate([cap, [np.inf]])
        self.link_bytes = np.zeros(L)
        self.dlinks = np.zeros(L + 1, dtype=bool)   # links whose flow set changed
        self.now = 0.0
        self.heap: list = []
        self.blocked: str | None = None
        self.n_events = 0
        self.n_rate = 0
        # flows
        self.f_paths = np.full((0, 1), L, dtype=np.int64)
        self.f_rem = np.zeros(0)
        self.f_rate = np.zeros(0)
        self.f_owner = np.zeros(0, dtype=np.int64)
        self.t_last = 0.0
        self.t_flow = math.inf
        self.dirty = False
        self.runs: dict[int, _Run] = {}
        self.run_id = 0
        self.routes: dict[tuple[int, int], tuple[list[int], float] | None] = {}
        self.plans: dict[tuple, list[_PhasePlan]] = {}
        # classes
        self.cls: list[_ClassState] = []
        self.job_cls_of: list[np.ndarray] = []   # job-local rank -> global class id
        self.job_roles: list[dict[str, _Role]] = []
        self.coll_info: dict[tuple, tuple] = {}
        self.arrivals: dict[tuple, list] = {}
        self.p2p: dict[tuple, object] = {}
        self.class_of_gpu = np.full(topo.num_gpus, -1, dtype=np.int64)
        for j, job in enumerate(jobs):
            ts = job.trace
            uses_grid = job.grid is not None
            roles = {nm: _Role(nm, rt.nodes, uses_grid) for nm, rt in ts.roles.items()}
            self.job_roles.append(roles)
            col = _classes(job, roles, rf, coalesce)
            base = len(self.cls)
            order: dict[int, int] = {}
            for r in range(ts.num_ranks):
                order.setdefault(int(col[r]), len(order))
            cls_of = np.array([base + order[int(c)] for c in col], dtype=np.int64)
            members: list[list[int]] = [[] for _ in order]
            for r in range(ts.num_ranks):
                members[cls_of[r] - base].append(r)
            for mem in members:
                rep = mem[0]
                gpu = job.rank_offset + rep
                self.cls.append(_ClassState(j, roles[ts.rank_role[rep]], mem, rep, gpu,
                                            rf.rank_factor.get(gpu, 1.0)))
            self.job_cls_of.append(cls_of)
            self.class_of_gpu[job.rank_offset: job.rank_offset + ts.num_ranks] = cls_of

    # ---- heap -------------------------------------------------------------------------
    def push(self, t: float, ev: int, a: int, b: int = 0) -> None:
        heapq.heappush(self.heap, (t, ev, a, b))

    # ---- node lifecycle ---------------------------------------------------------------
    def try_issue(self, c: int, s: int) -> None:
        st = self.cls[c]
        if st.busy[s]:
            return
        q = st.role.queues[s]
        h = st.head[s]
        if h >= len(q):
            return
        i = q[h]
        if st.deps[i] > 0:
            return
        st.busy[s] = True
        st.issue_t[i] = self.now
        k = st.role.kind[i]
        if k == _COMP:
            self.push(self.now + st.role.dur[i] * st.factor, _EV_DONE, c, i)
        elif k == _COLL:
            self.issue_coll(c, i)
        elif k == _SEND:
            self.issue_send(c, i)
        else:
            self.issue_recv(c, i)

    def complete(self, c: int, i: int) -> None:
        st = self.cls[c]
        role = st.role
        t1 = self.now
        st.end_t[i] = t1
        st.ndone += 1
        if t1 > st.t_end:
            st.t_end = t1
        s = role.sidx[i]
        st.busy[s] = False
        st.head[s] += 1
        deps = st.deps
        sidx = role.sidx
        for j in role.succ[i]:
            deps[j] -= 1
            if deps[j] == 0:
                self.try_issue(c, sidx[j])
        self.try_issue(c, s)

    def done_now(self, c: int, i: int) -> None:
        self.push(self.now, _EV_DONE, c, i)

    # ---- collectives ------------------------------------------------------------------
    def _coll_groups(self, c: int, i: int) -> tuple[tuple, tuple, list[tuple[int, ...]]]:
        st = self.cls[c]
        ch = st.role.chan[i]
        key = (st.job, c, ch)
        info = self.coll_info.get(key)
        if info is None:
            job = self.jobs[st.job]
            cls_of = self.job_cls_of[st.job]
            if ch[0] == "d":
                groups = {tuple(job.grid.group(r, ch[1])) for r in st.members}
            else:
                groups = {ch[1]}
            groups = sorted(groups)
            for g in groups:
                for r in g:
                    require(0 <= r < len(cls_of), f"job {st.job}",
                            f"node {st.role.names[i]!r}.group",
                            f"`0 <= rank < {len(cls_of)}` must hold, but got rank={r}")
            T = tuple(sorted({int(cls_of[r]) for g in groups for r in g}))
            inst = [tuple(job.rank_offset + r for r in g) for g in groups]
            info = (ch, T, inst)
            self.coll_info[key] = info
        return info

    def issue_coll(self, c: int, i: int) -> None:
        st = self.cls[c]
        ch, T, inst = self._coll_groups(c, i)
        if all(len(g) <= 1 for g in inst):
            self.done_now(c, i)
            return
        key = (st.job, ch, T, st.role.seq[i])
        arr = self.arrivals.setdefault(key, [])
        arr.append((c, i))
        if len(arr) < len(T):
            return
        del self.arrivals[key]
        arr.sort()
        c0, i0 = arr[0]
        role0 = self.cls[c0].role
        kind = role0.ckind[i0]
        size = max(self.cls[a].role.bytes[b] for a, b in arr)
        pkey = (st.job, ch, T, kind)
        plans = self.plans.get(pkey)
        if plans is None:
            phases = coll.merge([coll.plan(self.topo, kind, g) for g in inst])
            plans = self.prepare(phases, f"{kind} on ranks {inst[0]}")
            if plans is None:
                return
            self.plans[pkey] = plans
        self.start_run(plans, size, ("coll", arr))

    # ---- point to point ---------------------------------------------------------------
    def _peer(self, c: int, i: int) -> int:
        """Job-local rank of the representative's peer (-1 if off the grid)."""
        st = self.cls[c]
        ch = st.role.chan[i]
        if ch[0] == "d":
            return self.jobs[st.job].grid.neighbor(st.rep, ch[1], ch[2])
        return ch[1]

    def issue_send(self, c: int, i: int) -> None:
        st = self.cls[c]
        ch = st.role.chan[i]
        peer = self._peer(c, i)
        if peer < 0:
            self.done_now(c, i)
            return
        cls_of = self.job_cls_of[st.job]
        require(peer < len(cls_of), f"job {st.job}", f"node {st.role.names[i]!r}.peer",
                f"`0 <= peer < {len(cls_of)}` must hold, but got peer={peer}")
        c2 = int(cls_of[peer])
        if ch[0] == "d":
            chan = ("d", ch[1], ch[2], ch[3])
        else:
            chan = ("p", ch[2])
        key = (st.job, c, c2, chan, st.role.seq[i])
        pkey = (st.job, c, "send", ch[:-1])
        plans = self.plans.get(pkey)
        if plans is None:
            job = self.jobs[st.job]
            off = job.rank_offset
            if ch[0] == "d":
                pairs = [(r, job.grid.neighbor(r, ch[1], ch[2])) for r in st.members]
            else:
                pairs = [(st.rep, peer)]
            phases = coll.merge([coll.send(off + a, off + b) for a, b in pairs if b >= 0])
            plans = self.prepare(phases, f"send {st.role.names[i]!r}")
            if plans is None:
                return
            self.plans[pkey] = plans
        self.start_run(plans, st.role.bytes[i], ("send", c, i, key))

    def issue_recv(self, c: int, i: int) -> None:
        st = self.cls[c]
        ch = st.role.chan[i]
        peer = self._peer(c, i)
        if peer < 0:
            self.done_now(c, i)
            return
        cls_of = self.job_cls_of[st.job]
        require(peer < len(cls_of), f"job {st.job}", f"node {st.role.names[i]!r}.peer",
                f"`0 <= peer < {len(cls_of)}` must hold, but got peer={peer}")
        c1 = int(cls_of[peer])
        if ch[0] == "d":
            chan = ("d", ch[1], -ch[2], ch[3])
        else:
            chan = ("p", ch[2])
        key = (st.job, c1, c, chan, st.role.seq[i])
        state = self.p2p.get(key)
        if state == "arrived":
            del self.p2p[key]
            self.done_now(c, i)
        else:
            self.p2p[key] = (c, i)

    # ---- flows ------------------------------------------------------------------------
    def route(self, a: int, b: int):
        r = self.routes.get((a, b), False)
        if r is False:
            links = self.topo.route(a, b, self.rf.down)
            r = None if links is None else (links, self.topo.route_latency_s(links))
            self.routes[(a, b)] = r
        return r

    def prepare(self, phases: list[coll.Phase], what: str) -> list[_PhasePlan] | None:
        out = []
        L = self.L
        for ph in phases:
            rows, fr, lat = [], [], 0.0
            for a, b, f in zip(ph.src, ph.dst, ph.frac):
                if a == b or f <= 0:
                    continue
                r = self.route(a, b)
                if r is None:
                    down = ", ".join(self.rf.down_names[:4])
                    self.blocked = (f"{what}: no route from {self.topo.gpu_name(a)} (GPU {a})"
                                    f" to {self.topo.gpu_name(b)} (GPU {b}); failed links: "
                                    f"{down}")
                    return None
                rows.append(r[0])
                fr.append(f)
                lat = max(lat, r[1])
            if rows:
                H = max(len(x) for x in rows)
                P = np.full((len(rows), H), L, dtype=np.int64)
                for k, x in enumerate(rows):
                    P[k, :len(x)] = x
                frac = np.asarray(fr)
                w = np.bincount(P.ravel(), weights=np.repeat(frac, H), minlength=L + 1)[:L]
                ids = np.flatnonzero(w)
                out.append(_PhasePlan(P, frac, ph.steps * lat, ids, w[ids]))
            else:
                out.append(_PhasePlan(None, None, 0.0, None, None))
        return out

    def start_run(self, plans: list[_PhasePlan], size: float, on_done) -> None:
        rid = self.run_id
        self.run_id += 1
        run = _Run(plans, size, on_done)
        self.runs[rid] = run
        if not plans:
            self.push(self.now, _EV_PHASE, rid)
            return
        self.start_phase(rid, run)

    def start_phase(self, rid: int, run: _Run) -> None:
        pl = run.plans[run.phase]
        if pl.paths is None or run.size <= 0:
            self.push(self.now + pl.latency_s, _EV_PHASE, rid)
            return
        self.settle()
        F = pl.paths.shape[0]
        self.link_bytes[pl.lk_ids] += pl.lk_frac * run.size
        self.dlinks[pl.lk_ids] = True
        P = pl.paths
        W = self.f_paths.shape[1]
        if P.shape[1] != W:
            H = max(P.shape[1], W)
            if P.shape[1] < H:
                P = np.concatenate([P, np.full((F, H - P.shape[1]), self.L, np.int64)], 1)
            else:
                n = self.f_paths.shape[0]
                self.f_paths = np.concatenate(
                    [self.f_paths, np.full((n, H - W), self.L, np.int64)], 1)
        self.f_paths = np.concatenate([self.f_paths, P])
        self.f_rem = np.concatenate([self.f_rem, pl.frac * run.size])
        self.f_rate = np.concatenate([self.f_rate, np.zeros(F)])
        self.f_owner = np.concatenate([self.f_owner, np.full(F, rid, np.int64)])
        run.outstanding = F
        self.dirty = True
        self.n_events += F

    def settle(self) -> None:
        dt = self.now - self.t_last
        if dt > 0 and self.f_rem.size:
            self.f_rem -= self.f_rate * dt
        self.t_last = self.now

    def recompute(self) -> None:
        """Re-solve max-min rates for the flows connected (through shared links,
        transitively) to a link whose flow set changed; other rates cannot change."""
        self.settle()
        F = self.f_rem.size
        dl = self.dlinks
        if F == 0:
            self.t_flow = math.inf
            dl[:] = False
            return
        L = self.L
        dl[L] = False
        P = self.f_paths
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
            self.n_rate += 1
            if n_aff == F:
                self.f_rate = maxmin_rates(P, self.cap)
            else:
                self.f_rate[aff] = maxmin_rates(P[aff], self.cap)
        dl[:] = False
        self.t_flow = self.now + float(np.min(self.f_rem / self.f_rate))

    def finish_flows(self) -> None:
        self.settle()
        ttf = self.f_rem / self.f_rate
        done = ttf <= 1e-12 + 1e-9 * self.now
        done[int(np.argmin(ttf))] = True
        owners = self.f_owner[done]
        self.n_events += owners.size
        self.dlinks[self.f_paths[done].ravel()] = True
        keep = ~done
        self.f_paths = self.f_paths[keep]
        self.f_rem = self.f_rem[keep]
        self.f_rate = self.f_rate[keep]
        self.f_owner = self.f_owner[keep]
        if self.f_paths.shape[0] == 0:
            self.f_paths = np.full((0, 1), self.L, dtype=np.int64)
        self.dirty = True
        if owners[0] == owners[-1] and owners.min() == owners.max():
            pairs = [(int(owners[0]), owners.size)]
        else:
            rids, cnt = np.unique(owners, return_counts=True)
            pairs = zip(rids.tolist(), cnt.tolist())
        for rid, k in pairs:
            run = self.runs[rid]
            run.outstanding -= k
            if run.outstanding == 0:
                self.push(self.now + run.plans[run.phase].latency_s, _EV_PHASE, rid)

    def phase_end(self, rid: int) -> None:
        run = self.runs[rid]
        run.phase += 1
        if run.phase < len(run.plans):
            self.start_phase(rid, run)
            return
        del self.runs[rid]
        od = run.on_done
        if od[0] == "coll":
            for c, i in od[1]:
                self.complete(c, i)
        else:
            _, c, i, key = od
            self.complete(c, i)
            waiter = self.p2p.pop(key, None)
            if waiter is None:
                self.p2p[key] = "arrived"
            else:
                self.complete(*waiter)

    # ---- main loop --------------------------------------------------------------------
    def run(self) -> None:
        for c, st in enumerate(self.cls):
            for s in range(len(st.role.queues)):
                self.try_issue(c, s)
        heap = self.heap
        while self.blocked is None:
            if heap and heap[0][0] <= self.now:
                t, ev, a, b = heapq.heappop(heap)
                self.n_events += 1
                if ev == _EV_DONE:
                    self.complete(a, b)
                else:
                    self.phase_end(a)
                continue
            if self.dirty:
                self.recompute()
                self.dirty = False
            th = heap[0][0] if heap else math.inf
            tf = self.t_flow
            if tf == math.inf and th == math.inf:
                break
            if tf <= th:
                self.now = max(tf, self.now)
                self.finish_flows()
            else:
                self.now = th

    def deadlock_reason(self) -> str | None:
        for st in self.cls:
            if st.ndone < st.role.n:
                waits = []
                for s, q in enumerate(st.role.queues):
                    h = st.head[s]
                    if h < len(q):
                        i = q[h]
                        what = ("waits for its dependencies" if st.deps[i] > 0 else
                                "waits for its peers")
                        waits.append(f"stream {st.role.stream_ids[s]} at {st.role.names[i]!r} "
                                     f"({_CAT[st.role.kind[i]]}) {what}")
                return (f"deadlock: job {st.job} rank {st.rep} (role {st.role.name!r}) "
                        f"stopped after {st.ndone}/{st.role.n} nodes: " + "; ".join(waits))
        return None


def _check_jobs(jobs: list[Job], topo: Topology) -> None:
    used = np.zeros(topo.num_gpus, dtype=bool)
    for j, job in enumerate(jobs):
        w = f"job[{j}]"
        n = job.trace.num_ranks
        off = job.rank_offset
        require(isinstance(off, int) and off >= 0 and off + n <= topo.num_gpus, w,
                "rank_offset", f"`0 <= rank_offset` and `rank_offset + num_ranks <= "
                f"num_gpus` must hold, but got (rank_offset={off}, num_ranks={n}, "
                f"num_gpus={topo.num_gpus})")
        require(not used[off:off + n].any(), w, "rank_offset",
                "jobs must occupy disjoint GPUs, but this one overlaps an earlier job")
        used[off:off + n] = True
        if job.grid is not None:
            require(job.grid.size == n, w, "grid", f"`grid.size == num_ranks` must hold, "
                    f"but got (grid.size={job.grid.size}, num_ranks={n})")
        for r, role in enumerate(job.trace.rank_role):
            require(role in job.trace.roles, w, f"rank_role[{r}]",
                    f"role {role!r} must be a key of roles")
        if job.grid is None:
            for nm, rt in job.trace.roles.items():
                for nd in rt.nodes:
                    require(not nd.group_dim or NodeKind(nd.kind) == NodeKind.COMPUTE, w,
                            f"{nm}.node {nd.id}.group_dim", "a job without a RankGrid "
                            "must give literal groups/peers (group_dim empty)")


def simulate(jobs: Job | TraceSet | Sequence[Job], topology: Topology,
             faults: FaultSet | Sequence[Fault] | None = None, *,
             grid: RankGrid | None = None, coalesce: bool = True,
             record_timeline: bool = True) -> SimResult:
    """Replay one training step of one or more jobs on ``topology`` under ``faults``.

    ``jobs``: a :class:`Job`, a list of jobs (disjoint GPU ranges; they contend on shared
    links), or a bare :class:`TraceSet` together with ``grid`` (placed at GPU 0).
    ``coalesce`` simulates one rank per symmetry class (module docstring);
    ``record_timeline`` keeps per-node timeline events of the class representatives.
    Returns :class:`SimResult`; a missing route or a deadlock is reported in
    ``result.blocked`` (with ``step_time_s = inf``), not raised.
    """
    if isinstance(jobs, TraceSet):
        jobs = [Job(jobs, grid)]
    elif isinstance(jobs, Job):
        jobs = [jobs]
    jobs = list(jobs)
    _check_jobs(jobs, topology)
    rf = resolve(faults, topology)
    wall0 = time.perf_counter()
    sim = _Sim(jobs, topology, rf, coalesce, record_timeline)
    sim.run()
    blocked = sim.blocked or sim.deadlock_reason()
    wall = time.perf_counter() - wall0
    G = topology.num_gpus
    busy, comp, expo = np.zeros(G), np.zeros(G), np.zeros(G)
    job_t = [0.0] * len(jobs)
    rank_nodes = 0
    timeline: list[TimelineEvent] = []
    for st in sim.cls:
        role = st.role
        t0 = np.asarray(st.issue_t)
        t1 = np.asarray(st.end_t)
        fin = ~np.isnan(t1)
        cm = role.is_comp & fin
        u_comp = _measure(t0[cm], t1[cm])
        u_all = _measure(t0[fin], t1[fin])
        gpus = [jobs[st.job].rank_offset + r for r in st.members]
        busy[gpus] = u_all
        comp[gpus] = u_comp
        expo[gpus] = u_all - u_comp
        job_t[st.job] = max(job_t[st.job], st.t_end)
        rank_nodes += st.ndone * len(st.members)
        if record_timeline:
            names, strm, kind = role.names, role.stream, role.kind
            timeline += [TimelineEvent(st.gpu, strm[i], names[i], st.issue_t[i],
                                       st.end_t[i] - st.issue_t[i], _CAT[kind[i]])
                         for i in np.flatnonzero(fin).tolist()]
    if blocked:
        job_t = [math.inf] * len(jobs)
    step = max(job_t) if job_t else 0.0
    nominal = topology.link_cap_bytes_per_s
    util = (sim.link_bytes / (nominal * step) if 0 < step < math.inf
            else np.zeros_like(sim.link_bytes))
    timeline.sort(key=lambda e: (e.start_s, e.rank, e.stream))
    meta = {"topology": topology.name, "num_classes": str(len(sim.cls))}
    return SimResult(step_time_s=step, job_step_time_s=job_t, rank_busy_s=busy,
                     rank_compute_s=comp, rank_exposed_comm_s=expo,
                     link_names=list(topology.link_names), link_bytes=sim.link_bytes,
                     link_util=util, timeline=timeline, blocked=blocked,
                     class_of_rank=sim.class_of_gpu, num_classes=len(sim.cls),
                     num_events=sim.n_events, num_rate_updates=sim.n_rate,
                     rank_node_events=rank_nodes, wall_s=wall,
                     events_per_s=sim.n_events / wall if wall > 0 else 0.0, meta=meta)
