"""What a replay reports: :class:`SimResult` and its assembly from the executed
(rank class, node) start and end times.  Units: seconds, bytes, bytes/s."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dse.sim.flows import union_length
from dse.sim.program import CATEGORY
from dse.trace.perfetto import TimelineEvent, write_chrome_trace


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


def assemble(sim, jobs, topology, blocked: str | None, wall_s: float,
             record_timeline: bool) -> SimResult:
    """The :class:`SimResult` of the finished replay ``sim`` (a ``dse.sim.engine._Sim``):
    per-rank busy / compute / exposed-communication time from the union of each class
    representative's node intervals, per-job step time (``inf`` if ``blocked``), link
    utilization against nominal bandwidth, and the timeline."""
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
        u_comp = union_length(t0[cm], t1[cm])
        u_all = union_length(t0[fin], t1[fin])
        gpus = [jobs[st.job].rank_offset + r for r in st.members]
        busy[gpus] = u_all
        comp[gpus] = u_comp
        expo[gpus] = u_all - u_comp
        job_t[st.job] = max(job_t[st.job], st.t_end)
        rank_nodes += st.ndone * len(st.members)
        if record_timeline:
            names, strm, kind = role.names, role.stream, role.kind
            timeline += [TimelineEvent(st.gpu, strm[i], names[i], st.issue_t[i],
                                       st.end_t[i] - st.issue_t[i], CATEGORY[kind[i]])
                         for i in np.flatnonzero(fin).tolist()]
    if blocked:
        job_t = [math.inf] * len(jobs)
    step = max(job_t) if job_t else 0.0
    link_bytes = sim.net.link_bytes
    nominal = topology.link_cap_bytes_per_s
    util = (link_bytes / (nominal * step) if 0 < step < math.inf
            else np.zeros_like(link_bytes))
    timeline.sort(key=lambda e: (e.start_s, e.rank, e.stream))
    meta = {"topology": topology.name, "num_classes": str(len(sim.cls)),
            "plans": str(sim.n_plans), "aggregated_plans": str(sim.n_aggregated)}
    return SimResult(step_time_s=step, job_step_time_s=job_t, rank_busy_s=busy,
                     rank_compute_s=comp, rank_exposed_comm_s=expo,
                     link_names=list(topology.link_names), link_bytes=link_bytes,
                     link_util=util, timeline=timeline, blocked=blocked,
                     class_of_rank=sim.class_of_gpu, num_classes=len(sim.cls),
                     num_events=sim.n_events, num_rate_updates=sim.net.num_solves,
                     rank_node_events=rank_nodes, wall_s=wall_s,
                     events_per_s=sim.n_events / wall_s if wall_s > 0 else 0.0, meta=meta)
