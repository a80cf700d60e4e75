"""Event-driven replay of execution traces over a topology, with congestion and faults.

Execution semantics (per rank; the program and its channels: :mod:`dse.sim.program`):

- Every stream issues its nodes in program order (CUDA stream semantics).  The head
  node of a stream is *issued* once its data and control dependencies on that rank have
  finished and the stream's previous node has finished.
- COMPUTE nodes run for ``duration_s * straggler factor`` of work.  While ``k``
  collectives of the rank are transferring, its compute runs on the SMs they leave:
  at speed ``1 - min(k f, 1/2)``, ``f = comm_sm_fraction`` (NCCL's thread blocks take
  ``f`` of the SMs, ``dse.cost.collectives.overlapped_cost_s``; Rashidi et al., ISCA'21),
  so a collective hidden under compute for ``C`` seconds costs ``f C``.  Sends and
  receives take none (NCCL p2p is copy-engine-light and the cost model charges them
  none); ``f = 0`` turns the interference off.
- A COLLECTIVE starts when *all* ranks of its group have issued it; nodes are matched by
  group and per-group sequence number (the k-th collective a rank issues on a group meets
  the k-th of every other member, as NCCL requires).  It then runs the phases of
  :func:`dse.sim.collectives.plan` as flows and finishes on every member at once.
- SEND starts its flow when issued (eager/buffered; deadlock-free for any send/recv
  order) and finishes when the data has arrived; RECV finishes once it is issued *and*
  the matching send's data has arrived.  Matching is by (source, destination, tag,
  per-channel sequence number).  A peer off the grid (``RankGrid.neighbor == -1``) makes
  the node a no-op.

Network model: flow-level fluid simulation with max-min link sharing
(:mod:`dse.sim.flows`).  A phase of a collective ends ``steps * max(route latency)``
after its last flow drains (per-hop latency, summed along the route;
:mod:`dse.sim.collectives`); a collective whose node carries a fixed ``latency_s`` (NCCL
protocol latency of the framework buckets it stands for,
:attr:`dse.trace.graph.TraceNode.latency_s`) ends that much later still.

Symmetry coalescing (``coalesce=True``): one representative rank per class of
:mod:`dse.sim.symmetry` is simulated; its collectives and sends put the flows of *every*
member group on the network, and a class finishes a communication when its slowest
member group does (``coalesce=False`` simulates every rank separately and is exact).

Flow aggregation (``aggregate=True``, with coalescing): of a communication whose member
groups are link-disjoint, fault-identical copies of each other, only the group holding
the representative rank (of the lowest-numbered class taking part) puts flows into the
max-min solve; latency and per-link bytes still count every group
(:func:`dse.sim.flows.aggregate_plans`).  ``aggregate=False`` keeps every member flow.
With several jobs every flow is kept (the jobs' representative groups need not meet
where their other groups contend).

Output: :class:`~dse.sim.result.SimResult` (:mod:`dse.sim.result`).  Units: seconds,
bytes, bytes/s.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from dse.errors import require
from dse.sim import collectives as coll
from dse.sim.faults import Fault, FaultSet, ResolvedFaults, resolve
from dse.sim.flows import FlowNet, PhasePlan, aggregate_plans
from dse.sim.program import CATEGORY as _CAT
from dse.sim.program import COLL as _COLL
from dse.sim.program import COMP as _COMP
from dse.sim.program import SEND as _SEND
from dse.sim.program import RoleProgram
from dse.sim.result import SimResult, assemble
from dse.sim.symmetry import rank_classes
from dse.sim.topology import Topology
from dse.trace.graph import NodeKind, RankGrid, TraceSet

_EV_DONE, _EV_PHASE, _EV_COMP = 0, 1, 2


@dataclass
class Job:
    """One training job: its trace set, the rank grid that gives every rank its concrete
    groups and peers, and the GPU of its rank 0 (``rank_offset``)."""

    trace: TraceSet
    grid: RankGrid | None = None
    rank_offset: int = 0
    name: str = ""


class _ClassState:
    """Execution state of one rank class (its representative): per-stream queue heads
    and busy flags, remaining dependency counts, issue/end time per node."""

    __slots__ = ("job", "role", "members", "rep", "gpu", "factor", "deps", "head", "busy",
                 "issue_t", "end_t", "ndone", "t_end", "sm_f", "ncomm", "speed", "running")

    def __init__(self, job: int, role: RoleProgram, members: list[int], rep: int, gpu: int,
                 factor: float, sm_f: float = 0.0):
        self.job, self.role, self.members, self.rep = job, role, members, rep
        self.gpu, self.factor = gpu, factor
        self.sm_f = sm_f          # SM fraction one transferring collective takes
        self.ncomm = 0            # collectives transferring now
        self.speed = 1.0          # compute speed (1 - min(ncomm * sm_f, 1/2))
        self.running: dict[int, list] = {}   # compute node -> [work left, since, token]
        self.deps = list(role.ndeps)
        self.head = [0] * len(role.queues)
        self.busy = [False] * len(role.queues)
        self.issue_t = [0.0] * role.n
        self.end_t = [math.nan] * role.n
        self.ndone = 0
        self.t_end = 0.0


class _Run:
    """A communication in flight: its phases, bytes and the nodes it completes."""

    __slots__ = ("plans", "size", "phase", "outstanding", "on_done")

    def __init__(self, plans, size, on_done):
        self.plans, self.size, self.on_done = plans, size, on_done
        self.phase = 0
        self.outstanding = 0


class _Sim:
    """The event loop: node lifecycle per class, collective and send/recv matching,
    communication runs (phases of flows on :class:`FlowNet`)."""

    def __init__(self, jobs: list[Job], topo: Topology, rf: ResolvedFaults,
                 coalesce: bool, record_timeline: bool, sm_f: list[float],
                 aggregate: bool = True):
        self.topo, self.rf, self.record = topo, rf, record_timeline
        self.aggregate = aggregate and len(jobs) == 1
        self.n_plans = 0          # routed communication plans
        self.n_aggregated = 0     # of which reduced to their representative group
        self.jobs = jobs
        self.net = FlowNet(topo, rf)
        self.now = 0.0
        self.heap: list = []
        self.blocked: str | None = None
        self.n_events = 0
        self.runs: dict[int, _Run] = {}
        self.run_id = 0
        self.plans: dict[tuple, list[PhasePlan]] = {}
        # classes
        self.cls: list[_ClassState] = []
        self.job_cls_of: list[np.ndarray] = []   # job-local rank -> global class id
        self.coll_info: dict[tuple, tuple] = {}
        self.arrivals: dict[tuple, list] = {}
        self.p2p: dict[tuple, object] = {}
        self.tokens: dict[int, tuple[int, int]] = {}   # live compute-completion events
        self.n_tok = 0
        self.class_of_gpu = np.full(topo.num_gpus, -1, dtype=np.int64)
        for j, job in enumerate(jobs):
            ts = job.trace
            uses_grid = job.grid is not None
            roles = {nm: RoleProgram(nm, rt.nodes, uses_grid) for nm, rt in ts.roles.items()}
            col = rank_classes(ts, job.grid, job.rank_offset, roles, rf, coalesce)
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
                                            rf.rank_factor.get(gpu, 1.0), sm_f[j]))
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
            work = st.role.dur[i] * st.factor
            if st.sm_f == 0.0:
                self.push(self.now + work, _EV_DONE, c, i)
            else:
                tok = self.n_tok
                self.n_tok += 1
                self.tokens[tok] = (c, i)
                st.running[i] = [work, self.now, tok]
                self.push(self.now + work / st.speed, _EV_COMP, tok)
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

    def comp_done(self, tok: int) -> None:
        ci = self.tokens.pop(tok, None)
        if ci is None:                          # superseded by a speed change
            self.n_events -= 1
            return
        del self.cls[ci[0]].running[ci[1]]
        self.complete(*ci)

    def comm_change(self, c: int, delta: int) -> None:
        """A collective of class ``c`` starts (+1) or stops (-1) transferring: re-time
        the class's running compute at the new speed."""
        st = self.cls[c]
        st.ncomm += delta
        sp = 1.0 - min(st.ncomm * st.sm_f, 0.5)
        if sp == st.speed:
            return
        now, old = self.now, st.speed
        for i, r in st.running.items():
            r[0] = max(r[0] - (now - r[1]) * old, 0.0)
            r[1] = now
            del self.tokens[r[2]]
            tok = self.n_tok
            self.n_tok += 1
            self.tokens[tok] = (c, i)
            r[2] = tok
            self.push(now + r[0] / sp, _EV_COMP, tok)
        st.speed = sp

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
            per = [coll.plan(self.topo, kind, g) for g in inst]
            reps = [self.cls[x].gpu for x in T]
            rep = next((k for k, g in enumerate(inst) if any(r in g for r in reps)), 0)
            plans = self.prepare(per, rep, f"{kind} on ranks {inst[0]}")
            if plans is None:
                return
            self.plans[pkey] = plans
        extra = max(self.cls[a].role.xlat[b] for a, b in arr)
        if extra > 0.0:     # the node's fixed latency (TraceNode.latency_s), after its phases
            plans = [*plans, PhasePlan(None, None, extra, None, None)]
        for c2, _ in arr:
            self.comm_change(c2, +1)
        self.start_run(plans, size, ("coll", arr))

    # ---- point to point ---------------------------------------------------------------
    def _peer(self, c: int, i: int) -> int:
        """Job-local rank of the representative's peer (-1 if off the grid)."""
        st = self.cls[c]
        ch = st.role.chan[i]
        if ch[0] == "d":
            return self.jobs[st.job].grid.neighbor(st.rep, ch[1], ch[2])
        return ch[1]

    def _p2p_match(self, c: int, i: int, sign: int):
        """(peer rank, peer's class, channel key) of a SEND (``sign`` +1) or RECV (-1),
        or None when the peer is off the grid (the node is then a no-op).  A send and
        its receive compute the same channel key: grid channels store the sender's step
        direction, literal ones the tag."""
        st = self.cls[c]
        ch = st.role.chan[i]
        peer = self._peer(c, i)
        if peer < 0:
            return None
        cls_of = self.job_cls_of[st.job]
        require(peer < len(cls_of), f"job {st.job}", f"node {st.role.names[i]!r}.peer",
                f"`0 <= peer < {len(cls_of)}` must hold, but got peer={peer}")
        chan = ("d", ch[1], sign * ch[2], ch[3]) if ch[0] == "d" else ("p", ch[2])
        return peer, int(cls_of[peer]), chan

    def issue_send(self, c: int, i: int) -> None:
        st = self.cls[c]
        ch = st.role.chan[i]
        match = self._p2p_match(c, i, +1)
        if match is None:
            self.done_now(c, i)
            return
        peer, c2, chan = match
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
            per = [coll.send(off + a, off + b) for a, b in pairs if b >= 0]
            plans = self.prepare(per, 0, f"send {st.role.names[i]!r}")   # pairs[0]: rep
            if plans is None:
                return
            self.plans[pkey] = plans
        self.start_run(plans, st.role.bytes[i], ("send", c, i, key))

    def issue_recv(self, c: int, i: int) -> None:
        st = self.cls[c]
        match = self._p2p_match(c, i, -1)
        if match is None:
            self.done_now(c, i)
            return
        _, c1, chan = match
        key = (st.job, c1, c, chan, st.role.seq[i])
        state = self.p2p.get(key)
        if state == "arrived":
            del self.p2p[key]
            self.done_now(c, i)
        else:
            self.p2p[key] = (c, i)

    # ---- communication runs -------------------------------------------------------
    def prepare(self, per: list[list[coll.Phase]], rep: int, what: str
                ) -> list[PhasePlan] | None:
        """Routed plans of the member groups' phase lists ``per`` run side by side,
        reduced to group ``rep``'s flows when aggregation applies (module docstring);
        ``None`` (and ``self.blocked`` set) if some flow has no route."""
        phases = coll.merge(per)
        groups = None
        if self.aggregate and len(per) > 1:
            groups = [np.concatenate([np.full(len(p[k].src), g, np.int64)
                                      for g, p in enumerate(per) if k < len(p)])
                      for k in range(len(phases))]
        plans, why = self.net.route_phases(phases, what, groups)
        if plans is None:
            self.blocked = why
            return None
        self.n_plans += 1
        if groups is not None:
            red = aggregate_plans(plans, rep, self.net.L)
            if red is not None:
                self.n_aggregated += 1
                return red
        return plans

    def start_run(self, plans: list[PhasePlan], size: float, on_done) -> None:
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
        F = self.net.add(pl, run.size, rid, self.now)
        run.outstanding = F
        self.n_events += F

    def finish_flows(self) -> None:
        for rid, k in self.net.finish(self.now):
            self.n_events += k
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
            for c, _ in od[1]:
                self.comm_change(c, -1)
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
        net = self.net
        while self.blocked is None:
            if heap and heap[0][0] <= self.now:
                t, ev, a, b = heapq.heappop(heap)
                self.n_events += 1
                if ev == _EV_DONE:
                    self.complete(a, b)
                elif ev == _EV_COMP:
                    self.comp_done(a)
                else:
                    self.phase_end(a)
                continue
            tf = net.next_finish_s(self.now)
            th = heap[0][0] if heap else math.inf
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


def _sm_fraction(job: Job, given: float | None, j: int) -> float:
    where, fld = ("simulate", "comm_sm_fraction") if given is not None else (
        f"job[{j}]", "trace.meta.comm_sm_fraction")
    v = given if given is not None else job.trace.meta.get("comm_sm_fraction", 0.0)
    try:
        f = float(v)
    except (TypeError, ValueError):
        f = math.nan
    require(0.0 <= f <= 0.5, where, fld, f"`0 <= comm_sm_fraction <= 0.5` must hold, but "
            f"got {v!r}")
    return f


def simulate(jobs: Job | TraceSet | Sequence[Job], topology: Topology,
             faults: FaultSet | Sequence[Fault] | None = None, *,
             grid: RankGrid | None = None, coalesce: bool = True,
             record_timeline: bool = True,
             comm_sm_fraction: float | None = None, aggregate: bool = True) -> SimResult:
    """Replay one training step of one or more jobs on ``topology`` under ``faults``.

    ``jobs``: a :class:`Job`, a list of jobs (disjoint GPU ranges; they contend on shared
    links), or a bare :class:`TraceSet` together with ``grid`` (placed at GPU 0).
    ``coalesce`` simulates one rank per symmetry class (module docstring);
    ``record_timeline`` keeps per-node timeline events of the class representatives;
    ``aggregate`` lets a class's symmetric member groups share one flow set (module
    docstring; ``False`` keeps every member flow).
    ``comm_sm_fraction`` (in [0, 1/2]) is the SM share of one transferring collective
    (module docstring); ``None`` takes each job's from its trace's
    ``meta["comm_sm_fraction"]`` (written by :mod:`dse.trace.generate`), else 0.
    Returns :class:`SimResult`; a missing route or a deadlock is reported in
    ``result.blocked`` (with ``step_time_s = inf``), not raised.
    """
    if isinstance(jobs, TraceSet):
        jobs = [Job(jobs, grid)]
    elif isinstance(jobs, Job):
        jobs = [jobs]
    jobs = list(jobs)
    _check_jobs(jobs, topology)
    sm_f = [_sm_fraction(job, comm_sm_fraction, j) for j, job in enumerate(jobs)]
    rf = resolve(faults, topology)
    wall0 = time.perf_counter()
    sim = _Sim(jobs, topology, rf, coalesce, record_timeline, sm_f, aggregate)
    sim.run()
    blocked = sim.blocked or sim.deadlock_reason()
    wall = time.perf_counter() - wall0
    return assemble(sim, jobs, topology, blocked, wall, record_timeline)
