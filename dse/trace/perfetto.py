"""Chrome trace-event JSON timelines (open in ui.perfetto.dev or chrome://tracing).

Format: Google's "Trace Event Format" document (docs.google.com/document/d/
1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU): a JSON object whose ``traceEvents`` list
holds complete events ``{"ph": "X", "pid", "tid", "ts", "dur", "name", "cat", "args"}``
with ``ts``/``dur`` in microseconds, and metadata events ``{"ph": "M", "name":
"process_name" | "thread_name", "args": {"name": ...}}`` that label pids and tids;
``displayTimeUnit`` ("ms" or "ns") and ``otherData`` (free-form) are top-level keys.
Here pid = global rank and tid = stream (0 = compute, 1.. = communication streams).

:func:`timeline_from_trace_set` gives a timeline without the simulator: per role, a list
schedule in which a node starts once its data and control dependencies have finished and
the previous node of its stream (in program order: streams issue in order, as CUDA streams
do) has finished, and runs for ``duration_s``.
"""

from __future__ import annotations

import json
import math
from collections import deque
from operator import itemgetter
from pathlib import Path
from typing import Iterable, NamedTuple

from dse.errors import InputError, require
from dse.report.atomic import atomic_write
from dse.trace.graph import CollectiveKind, NodeKind, RankTrace, TraceSet


class TimelineEvent(NamedTuple):
    """One span on one rank's stream; seconds.  ``args`` shows in the Perfetto details
    pane (optional, so plain 6-tuples (rank, stream, name, start_s, dur_s, category) do)."""

    rank: int
    stream: int
    name: str
    start_s: float
    dur_s: float
    category: str
    args: dict | None = None


def stream_name(stream: int) -> str:
    return "compute" if stream == 0 else f"comm stream {stream}"


def write_chrome_trace(timeline: Iterable[tuple], path: Path, *,
                       process_names: dict[int, str] | None = None,
                       thread_names: dict[tuple[int, int], str] | None = None,
                       meta: dict[str, str] | None = None) -> Path:
    """Write ``timeline`` (TimelineEvents or 6-tuples) as Chrome trace-event JSON.

    ``process_names`` maps rank -> label (default "rank <r>"), ``thread_names`` maps
    (rank, stream) -> label (default :func:`stream_name`), ``meta`` goes to ``otherData``.
    The file is written to a temporary file beside ``path`` and renamed into place
    (:func:`dse.report.atomic.atomic_write`): a failure leaves an earlier file intact.
    """
    path = Path(path)
    events, seen_pids, seen_tids = [], set(), set()
    for i, ev in enumerate(timeline):
        if type(ev) is not TimelineEvent:
            ev = TimelineEvent(*ev)
        if not (math.isfinite(ev.start_s) and math.isfinite(ev.dur_s)
                and ev.start_s >= 0 and ev.dur_s >= 0):
            require(False, str(path), f"event {i} ({ev.name!r})", "`0 <= start_s` and `0 <= dur_s` "
                    f"must hold, but got (start_s={ev.start_s!r}, dur_s={ev.dur_s!r})")
        x = {"ph": "X", "pid": ev.rank, "tid": ev.stream, "ts": ev.start_s * 1e6,
             "dur": ev.dur_s * 1e6, "name": ev.name, "cat": ev.category}
        if ev.args:
            x["args"] = ev.args
        events.append(x)
        seen_pids.add(ev.rank)
        seen_tids.add((ev.rank, ev.stream))
    events.sort(key=itemgetter("pid", "tid", "ts"))
    labels = []
    for pid in sorted(seen_pids):
        name = (process_names or {}).get(pid, f"rank {pid}")
        labels += [{"ph": "M", "pid": pid, "tid": 0, "name": "process_name",
                    "args": {"name": name}},
                   {"ph": "M", "pid": pid, "tid": 0, "name": "process_sort_index",
                    "args": {"sort_index": pid}}]
    for pid, tid in sorted(seen_tids):
        name = (thread_names or {}).get((pid, tid), stream_name(tid))
        labels.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                       "args": {"name": name}})
    doc = {"traceEvents": labels + events, "displayTimeUnit": "ms"}
    if meta:
        doc["otherData"] = dict(meta)
    text = json.dumps(doc, ensure_ascii=False, check_circular=False)   # a tree: same text
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, lambda t: Path(t).write_text(text, encoding="utf-8"))


def schedule_rank_trace(trace: RankTrace, where: str = "trace") -> dict[int, tuple[float, float]]:
    """Node id -> (start_s, end_s) under the list schedule described in the module doc.

    Raises :class:`InputError` on duplicate ids, unknown dependencies or a cycle."""
    fast = _schedule_in_order(trace.nodes)
    return fast if fast is not None else _schedule_any_order(trace, where)


def _schedule_any_order(trace: RankTrace, where: str) -> dict[int, tuple[float, float]]:
    """:func:`schedule_rank_trace` for nodes in any list order (Kahn's algorithm)."""
    nodes = {}
    for n in trace.nodes:
        require(n.id not in nodes, where, f"node {n.id}", "node ids must be unique")
        nodes[n.id] = n
    preds: dict[int, set[int]] = {}
    last_on_stream: dict[int, int] = {}
    for n in trace.nodes:
        deps = set(n.data_deps) | set(n.ctrl_deps)
        missing = sorted(d for d in deps if d not in nodes)
        require(not missing, where, f"node {n.id}: deps",
                f"every dependency must be a node of this trace, but got unknown {missing[:5]}")
        if n.stream in last_on_stream:
            deps.add(last_on_stream[n.stream])
        last_on_stream[n.stream] = n.id
        preds[n.id] = deps
    succs: dict[int, list[int]] = {i: [] for i in nodes}
    for i, deps in preds.items():
        for d in deps:
            succs[d].append(i)
    waiting = {i: len(deps) for i, deps in preds.items()}
    ready = deque(i for i in nodes if waiting[i] == 0)
    times: dict[int, tuple[float, float]] = {}
    while ready:
        i = ready.popleft()
        start = max((times[d][1] for d in preds[i]), default=0.0)
        times[i] = (start, start + nodes[i].duration_s)
        for s in succs[i]:
            waiting[s] -= 1
            if waiting[s] == 0:
                ready.append(s)
    if len(times) < len(nodes):
        stuck = sorted(set(nodes) - times.keys())[:5]
        raise InputError(where, "data_deps/ctrl_deps", "dependencies plus in-order streams "
                         f"must form a DAG, but nodes {stuck} are on a cycle or wait on one")
    return times


def _schedule_in_order(nodes) -> dict[int, tuple[float, float]] | None:
    """The list schedule in one pass when the nodes come in an order that runs (every
    dependency earlier in the list, ids unique, durations finite -- the generator's
    program order): a node starts at the latest end of its dependencies and its stream's
    previous node, as in the general algorithm; ``None`` otherwise."""
    times: dict[int, tuple[float, float]] = {}
    last_on_stream: dict[int, float] = {}
    isfinite = math.isfinite
    for n in nodes:
        if n.id in times or not isfinite(n.duration_s):
            return None
        ends = [last_on_stream[n.stream]] if n.stream in last_on_stream else []
        for d in (*n.data_deps, *n.ctrl_deps):
            t = times.get(d)
            if t is None:
                return None
            ends.append(t[1])
        start = max(ends) if ends else 0.0
        times[n.id] = (start, start + n.duration_s)
        last_on_stream[n.stream] = start + n.duration_s
    return times


def timeline_from_trace_set(ts: TraceSet) -> list[TimelineEvent]:
    """Events for every role, on the role's representative rank (the pid)."""
    events = []
    value = {**{k: k.value for k in NodeKind}, **{k: k.value for k in CollectiveKind}}
    for role, trace in ts.roles.items():
        times = schedule_rank_trace(trace, f"role {role!r}")
        for n in trace.nodes:
            start, _ = times[n.id]
            kind = value[n.kind]
            args = {"id": n.id, "role": role, "kind": kind}
            if n.num_ops:
                args["num_ops"] = n.num_ops
            if n.comm_bytes:
                args["comm_bytes"] = n.comm_bytes
            if n.comm_kind is not None:
                args["comm_kind"] = value[n.comm_kind]
            if n.group_dim:
                args["group_dim"] = n.group_dim
            if n.peer >= 0:
                args["peer"] = n.peer
            category = kind if n.comm_kind is None else f"{kind},{value[n.comm_kind]}"
            events.append(TimelineEvent(trace.rank, n.stream, n.name, start, n.duration_s,
                                        category, args))
    return events


def process_names(ts: TraceSet) -> dict[int, str]:
    """rank -> "rank <r> (<role>)" for each role's representative rank."""
    return {t.rank: f"rank {t.rank} ({role})" for role, t in ts.roles.items()}
