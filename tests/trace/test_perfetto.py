"""Chrome trace-event JSON and the dependency-honouring list schedule."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.errors import InputError
from dse.trace import perfetto
from dse.trace.graph import CollectiveKind, NodeKind, RankTrace, TraceNode, TraceSet


@st.composite
def dag_traces(draw) -> RankTrace:
    """Random DAGs; deps point to earlier *or later* list positions (ids shuffled)."""
    n = draw(st.integers(1, 15))
    order = draw(st.permutations(range(n)))          # topological order of node i
    nodes = []
    for i in range(n):
        earlier = [j for j in range(n) if order[j] < order[i]]
        pick = st.lists(st.sampled_from(earlier), max_size=3, unique=True) if earlier \
            else st.just([])
        kind = draw(st.sampled_from(NodeKind))
        nodes.append(TraceNode(
            id=100 + i, name=f"n{i}", kind=kind,
            duration_s=draw(st.floats(0, 1e-2, allow_nan=False)),
            comm_kind=CollectiveKind.ALL_REDUCE if kind is NodeKind.COLLECTIVE else None,
            stream=draw(st.integers(0, 2)),
            data_deps=[100 + j for j in draw(pick)], ctrl_deps=[100 + j for j in draw(pick)]))
    # program order on each stream must agree with the DAG, else the trace deadlocks
    nodes.sort(key=lambda nd: order[nd.id - 100])
    return RankTrace(rank=draw(st.integers(0, 64)), nodes=nodes)


def _events(doc: dict, ph: str) -> list[dict]:
    return [e for e in doc["traceEvents"] if e["ph"] == ph]


@settings(max_examples=100, deadline=None)
@given(dag_traces())
def test_schedule_respects_deps_and_streams(trace):
    ts = TraceSet(roles={"r": trace}, rank_role=["r"] * (trace.rank + 1))
    with tempfile.TemporaryDirectory() as tmp:
        path = perfetto.write_chrome_trace(perfetto.timeline_from_trace_set(ts),
                                           Path(tmp) / "t.json",
                                           process_names=perfetto.process_names(ts))
        doc = json.loads(path.read_text())
    assert doc["displayTimeUnit"] == "ms"
    spans = {e["args"]["id"]: e for e in _events(doc, "X")}
    assert len(spans) == len(trace.nodes)
    eps = 1e-6
    for n in trace.nodes:
        e = spans[n.id]
        assert e["ts"] >= 0 and e["dur"] >= 0
        assert (e["pid"], e["tid"], e["name"]) == (trace.rank, n.stream, n.name)
        assert e["dur"] == pytest.approx(n.duration_s * 1e6)
        for d in n.data_deps + n.ctrl_deps:
            assert e["ts"] >= spans[d]["ts"] + spans[d]["dur"] - eps
    by_stream: dict[int, list[dict]] = {}
    for n in trace.nodes:                       # program order per stream, no overlap
        by_stream.setdefault(n.stream, []).append(spans[n.id])
    for evs in by_stream.values():
        for a, b in zip(evs, evs[1:]):
            assert b["ts"] >= a["ts"] + a["dur"] - eps
    # every node starts as soon as its last predecessor ends (a list schedule, no idling)
    for n in trace.nodes:
        prev = [spans[d] for d in n.data_deps + n.ctrl_deps]
        same = by_stream[n.stream]
        k = same.index(spans[n.id])
        prev += same[k - 1:k] if k else []
        want = max((p["ts"] + p["dur"] for p in prev), default=0.0)
        assert spans[n.id]["ts"] == pytest.approx(want, abs=eps)


def test_chrome_trace_document(tmp_path):
    timeline = [(0, 0, "gemm", 0.0, 1e-3, "compute"),
                perfetto.TimelineEvent(0, 1, "allreduce", 5e-4, 2e-3, "collective",
                                       {"comm_bytes": 1e6}),
                (3, 0, "gemm", 1e-3, 1e-3, "compute")]
    path = perfetto.write_chrome_trace(timeline, tmp_path / "sub" / "t.json",
                                       process_names={3: "rank 3 (stage1)"},
                                       meta={"model": "llama3-8b"})
    doc = json.loads(path.read_text())
    x = _events(doc, "X")
    assert {(e["pid"], e["tid"], e["name"]) for e in x} == \
        {(0, 0, "gemm"), (0, 1, "allreduce"), (3, 0, "gemm")}
    ar = next(e for e in x if e["name"] == "allreduce")
    assert ar["ts"] == pytest.approx(500.0) and ar["dur"] == pytest.approx(2000.0)
    assert ar["cat"] == "collective" and ar["args"] == {"comm_bytes": 1e6}
    names = {(e["pid"], e.get("tid"), e["name"]): e["args"] for e in _events(doc, "M")}
    assert names[(0, 0, "process_name")] == {"name": "rank 0"}
    assert names[(3, 0, "process_name")] == {"name": "rank 3 (stage1)"}
    assert names[(0, 1, "thread_name")] == {"name": "comm stream 1"}
    assert names[(0, 0, "thread_name")] == {"name": "compute"}
    assert doc["otherData"] == {"model": "llama3-8b"}
    for e in doc["traceEvents"]:
        assert {"ph", "pid", "name"} <= e.keys()


@pytest.mark.parametrize("bad", [(0, 0, "x", -1.0, 1.0, "c"), (0, 0, "x", 0.0, -1.0, "c"),
                                 (0, 0, "x", 0.0, float("nan"), "c")])
def test_bad_event_rejected(tmp_path, bad):
    with pytest.raises(InputError, match="event 0"):
        perfetto.write_chrome_trace([bad], tmp_path / "t.json")


def _trace(*nodes: TraceNode) -> TraceSet:
    return TraceSet(roles={"r": RankTrace(rank=0, nodes=list(nodes))}, rank_role=["r"])


def test_overlap_of_compute_and_comm_streams():
    ts = _trace(TraceNode(id=1, name="a", kind=NodeKind.COMPUTE, duration_s=1.0),
                TraceNode(id=2, name="ar", kind=NodeKind.COLLECTIVE, duration_s=3.0, stream=1,
                          data_deps=[1]),
                TraceNode(id=3, name="b", kind=NodeKind.COMPUTE, duration_s=1.0),
                TraceNode(id=4, name="c", kind=NodeKind.COMPUTE, duration_s=1.0,
                          data_deps=[2]))
    times = perfetto.schedule_rank_trace(ts.roles["r"])
    assert times == {1: (0.0, 1.0), 2: (1.0, 4.0), 3: (1.0, 2.0), 4: (4.0, 5.0)}


@pytest.mark.parametrize("nodes, rule", [
    ([TraceNode(id=1, name="a", kind=NodeKind.COMPUTE, data_deps=[2]),
      TraceNode(id=2, name="b", kind=NodeKind.COMPUTE, stream=1, data_deps=[1])], "DAG"),
    ([TraceNode(id=1, name="a", kind=NodeKind.COMPUTE, data_deps=[2]),   # stream order
      TraceNode(id=2, name="b", kind=NodeKind.COMPUTE)], "DAG"),
    ([TraceNode(id=1, name="a", kind=NodeKind.COMPUTE, ctrl_deps=[7])], "unknown"),
    ([TraceNode(id=1, name="a", kind=NodeKind.COMPUTE),
      TraceNode(id=1, name="b", kind=NodeKind.COMPUTE)], "unique"),
])
def test_bad_graphs_rejected(nodes, rule):
    with pytest.raises(InputError, match=rule):
        perfetto.timeline_from_trace_set(_trace(*nodes))


def _reference_document(timeline, process_names=None, meta=None) -> str:
    """The document as json.dumps writes it (the writer's former implementation)."""
    events, pids, tids = [], set(), set()
    for ev in map(lambda e: perfetto.TimelineEvent(*e), timeline):
        x = {"ph": "X", "pid": ev.rank, "tid": ev.stream, "ts": ev.start_s * 1e6,
             "dur": ev.dur_s * 1e6, "name": ev.name, "cat": ev.category}
        if ev.args:
            x["args"] = ev.args
        events.append(x)
        pids.add(ev.rank)
        tids.add((ev.rank, ev.stream))
    events.sort(key=lambda e: (e["pid"], e["tid"], e["ts"]))
    labels = []
    for pid in sorted(pids):
        labels += [{"ph": "M", "pid": pid, "tid": 0, "name": "process_name",
                    "args": {"name": (process_names or {}).get(pid, f"rank {pid}")}},
                   {"ph": "M", "pid": pid, "tid": 0, "name": "process_sort_index",
                    "args": {"sort_index": pid}}]
    for pid, tid in sorted(tids):
        labels.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                       "args": {"name": perfetto.stream_name(tid)}})
    doc = {"traceEvents": labels + events, "displayTimeUnit": "ms"}
    if meta:
        doc["otherData"] = dict(meta)
    return json.dumps(doc, ensure_ascii=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(
    st.integers(0, 3), st.integers(0, 4), st.text(max_size=6),
    st.floats(0, 1e3, allow_nan=False), st.floats(0, 10, allow_nan=False), st.text(max_size=4),
    st.one_of(st.none(), st.dictionaries(st.text(max_size=3), st.one_of(
        st.integers(-5, 10**12), st.floats(allow_nan=True), st.text(max_size=4), st.booleans(),
        st.none(), st.lists(st.integers(0, 3), max_size=2)), max_size=3))), max_size=12),
    st.dictionaries(st.text(max_size=3), st.text(max_size=5), max_size=2))
def test_writer_text_is_json_dumps_of_the_document(events, meta):
    """The direct writer gives json.dumps's text byte for byte (unicode, quotes, floats
    by repr, NaN, nested args, bools)."""
    import numpy as np
    events = [e if i % 2 else (e[0], e[1], e[2], np.float64(e[3]), e[4], e[5], e[6])
              for i, e in enumerate(events)]
    with tempfile.TemporaryDirectory() as d:
        path = perfetto.write_chrome_trace(events, Path(d) / "t.json", process_names={1: "é \"x\""},
                                           meta=meta)
        got = Path(path).read_text(encoding="utf-8")
    assert got == _reference_document(events, process_names={1: "é \"x\""}, meta=meta)


@settings(max_examples=100, deadline=None)
@given(dag_traces())
def test_one_pass_schedule_equals_the_general_one_on_program_order(trace):
    """Nodes in an order that runs (every dependency earlier: the generator's program
    order) take the one-pass schedule, which equals Kahn's algorithm on them."""
    ids = {n.id for n in trace.nodes}
    placed, order, rest = set(), [], list(trace.nodes)
    while rest:                                   # stable topological order of the DAG
        k = next(i for i, n in enumerate(rest)
                 if all(d in placed or d not in ids for d in n.data_deps + n.ctrl_deps))
        placed.add(rest[k].id)
        order.append(rest.pop(k))
    ordered = RankTrace(rank=trace.rank, nodes=order)
    fast = perfetto._schedule_in_order(ordered.nodes)
    assert fast is not None
    assert fast == perfetto._schedule_any_order(ordered, "t")
