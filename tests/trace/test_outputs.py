"""Trace outputs: the columnar (NodeTable) fast path writes exactly what the node-by-node
writer writes, every output file is replaced atomically, and --out is checked first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dse.cli import main
from dse.spec.hardware import get_hardware
from dse.spec.layout import Layout, Workload
from dse.spec.model import get_model
from dse.trace import chakra, perfetto
from dse.trace.generate import generate_trace_set

HW = get_hardware("h100-sxm-80gb")
CASES = [  # (model, layout, workload): the schedule and collective kinds the generator has
    ("llama3-8b", dict(tp=2, pp=2, dp=2, zero=0), dict(global_batch=8, seq_len=1024)),
    ("llama3-8b", dict(tp=2, pp=2, dp=2, zero=2, sp=1), dict(global_batch=8, seq_len=1024)),
    ("llama3-8b", dict(tp=2, pp=2, dp=2, zero=3), dict(global_batch=8, seq_len=1024)),
    ("llama3-8b", dict(tp=2, pp=2, dp=2, vpp=2, zero=1, sp=1, recompute=2),
     dict(global_batch=16, seq_len=1024)),
    ("llama3-8b", dict(tp=2, pp=1, dp=2, cp=2, zero=3, sp=1, recompute=1),
     dict(global_batch=8, seq_len=4096, attention=0)),
    ("mixtral-8x7b", dict(tp=2, pp=2, dp=4, ep=4, zero=1, sp=1), dict(global_batch=16, seq_len=1024)),
]


def gen(case):
    model, lay, wl = case
    return generate_trace_set(get_model(model), Workload(**wl), Layout(**{"mbs": 1, **lay}), HW)


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def test_table_writer_equals_node_writer(case, tmp_path):
    ts = gen(case)
    assert all(t.table is not None for t in ts.roles.values())    # generator gives tables
    chakra.write_trace_set(ts, tmp_path / "table")                 # bulk encoding
    nodes = {r: t.nodes for r, t in ts.roles.items()}              # materialize
    assert all(t.table is None for t in ts.roles.values())
    chakra.write_trace_set(ts, tmp_path / "nodes")                 # node by node
    assert files(tmp_path / "table") == files(tmp_path / "nodes")
    back = chakra.read_trace_set(tmp_path / "table")
    assert {r: t.nodes for r, t in back.roles.items()} == nodes
    for t in nodes.values():                    # ids in program order, deps sorted, earlier
        assert [n.id for n in t] == list(range(len(t)))
        assert all(n.data_deps == sorted(set(n.data_deps)) and all(d < n.id for d in n.data_deps)
                   for n in t)


def test_edits_after_materializing_are_written(tmp_path):
    ts = gen(CASES[0])
    node = ts.roles["stage0"].nodes[3]
    node.duration_s = 1.25
    chakra.write_trace_set(ts, tmp_path)
    assert chakra.read_trace_set(tmp_path).roles["stage0"].nodes[3].duration_s == 1.25


class Boom(OSError):
    pass


def fail_on_call(monkeypatch, method: str, k: int):
    """Make the k-th call (1-based) of Path.<method> write half of its data, then fail."""
    real = getattr(Path, method)
    calls = {"n": 0}

    def flaky(self, data, *a, **kw):
        calls["n"] += 1
        if calls["n"] == k:
            real(self, data[: len(data) // 2], *a, **kw)
            raise Boom("disk full (injected)")
        return real(self, data, *a, **kw)

    monkeypatch.setattr(Path, method, flaky)


@pytest.mark.parametrize("k", [1, 2, 3])   # roles.json, stage0.et, stage1.et
def test_failed_rewrite_leaves_previous_trace_set(k, tmp_path, monkeypatch):
    chakra.write_trace_set(gen(CASES[0]), tmp_path)
    before = files(tmp_path)
    other = gen(CASES[1])                    # a different trace set over the same files
    fail_on_call(monkeypatch, "write_bytes", k)
    with pytest.raises(Boom):
        chakra.write_trace_set(other, tmp_path)
    monkeypatch.undo()
    assert files(tmp_path) == before         # nothing replaced, no temporary files left
    chakra.read_trace_set(tmp_path)
    chakra.write_trace_set(other, tmp_path)  # and the retry goes through
    assert files(tmp_path) != before


def test_failed_timeline_write_leaves_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "timeline.json"
    perfetto.write_chrome_trace([(0, 0, "a", 0.0, 1.0, "compute")], path)
    before = path.read_bytes()
    fail_on_call(monkeypatch, "write_text", 1)
    with pytest.raises(Boom):
        perfetto.write_chrome_trace([(0, 0, "b", 0.0, 2.0, "compute")], path)
    monkeypatch.undo()
    assert files(tmp_path) == {"timeline.json": before}
    json.loads(before)


ARGS = ["trace", "--model", "llama3-8b", "--hardware", "a100-sxm-80gb", "--gpus", "8",
        "--tp", "2", "--global-batch", "8", "--seq", "1024"]


def test_out_that_is_a_file_is_refused_before_work(tmp_path, capsys, monkeypatch):
    import dse.trace.generate as g
    monkeypatch.setattr(g, "generate_trace_set", lambda *a: pytest.fail("work started"))
    f = tmp_path / "f"
    f.write_text("keep")
    for out in (f, f / "sub"):
        assert main(ARGS + ["--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--out" in err[0] and str(f) in err[0]
    assert f.read_text() == "keep"


def test_refused_trace_creates_no_out_dir(tmp_path, capsys):
    out = tmp_path / "a" / "b"
    assert main(ARGS + ["--tp-overlap", "--out", str(out)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not (tmp_path / "a").exists()


def test_rerun_replaces_outputs(tmp_path, capsys):
    out = tmp_path / "t"
    assert main(ARGS + ["--out", str(out)]) == 0
    first = files(out)
    assert set(first) == {"stage0.et", "roles.json", "timeline.json"}
    assert main(ARGS + ["--out", str(out), "--global-batch", "16"]) == 0
    assert files(out).keys() == first.keys() and files(out) != first
    assert chakra.read_trace_set(out).meta["micro_batches"] == "4"


# ---------------------------------------------------------------- ZeRO-3 per FSDP unit

# megatron deepspeed fsdp fsdp2; DeepSpeed's pipeline engine runs no ZeRO-3 (layout rule)
Z3 = [(fw, pp) for fw in (0, 1, 2, 3) for pp in (1, 2) if not (fw == 1 and pp > 1)]


@pytest.mark.parametrize("fw,pp", Z3, ids=lambda x: str(x))
def test_zero3_trace_issues_the_models_per_unit_collectives(fw, pp):
    """Per role, the trace's ZeRO-3 collectives are the model's (dse.train.zero3): as many
    unit / root all-gathers and reduce-scatters as its per-step counts, each with the
    bytes and time of the graph's op (dse.graph.train.zero3_ops), copy-outs likewise."""
    import jax

    from dse.graph.ops import time_s
    from dse.cost.rates import rates
    from dse.spec.numerics import as_float
    from dse.train.step import step_and_schedule

    model = get_model("llama3-8b")
    lay = Layout(tp=2, pp=pp, dp=4, mbs=1, zero=3)
    wl = Workload(global_batch=16, seq_len=1024, framework=fw)

    def model_side(model, wl, lay, hw):
        _, sched, g = step_and_schedule(model, wl, lay, hw)
        m, w, l = as_float(model, wl, lay)
        r = rates(hw, w.precision)
        return sched.zero3_calls, [(getattr(o, "size_bytes", 0.0) * o.calls, time_s(o, hw, r)) for o in g.zero3]

    calls, ops = jax.device_get(jax.jit(model_side)(model, wl, lay, HW))
    ts = generate_trace_set(model, wl, lay, HW)
    names = ("param all-gather", "grad reduce-scatter", "root param all-gather",
             "root grad reduce-scatter")
    for role, t in ts.roles.items():
        nodes = t.nodes
        for i, key in enumerate(names):
            hits = [n for n in nodes if n.name.rsplit(" dp", 1)[0].split(" u")[0].endswith(key)
                    and ("root" in key) == ("root" in n.name) and not n.name.endswith("copy-out")]
            assert len(hits) == pytest.approx(float(calls[i])), (role, key)
            assert all(n.group_dim == "dp" for n in hits)
            assert all(n.comm_bytes == pytest.approx(float(ops[i][0]), rel=1e-6) for n in hits)
            assert all(n.duration_s == pytest.approx(float(ops[i][1]), rel=1e-6) for n in hits)
        copies = [n for n in nodes if n.name.endswith("copy-out")]
        assert len(copies) == (pytest.approx(float(calls[4])) if float(ops[4][1]) > 0 else 0)
