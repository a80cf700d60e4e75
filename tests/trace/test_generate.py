"""Trace generation from the cost model: roles, schedule, durations, CLI."""

from __future__ import annotations

import json

import jax
import pytest

from dse.cli import main
from dse.spec.hardware import get_hardware
from dse.spec.layout import Layout, Workload
from dse.spec.model import get_model
from dse.trace.chakra import read_trace_set
from dse.trace.generate import _costs, generate_trace_set
from dse.trace.graph import NodeKind
from dse.train.layer import layer_cost
from dse.train.rates import rates

HW = get_hardware("a100-sxm-80gb")
M = get_model("llama3-8b")


def gen(**kw):
    lay = Layout(**{"tp": 2, "pp": 2, "dp": 2, "mbs": 1, "zero": 1, **kw})
    wl = Workload(global_batch=8, seq_len=1024)
    return lay, wl, generate_trace_set(M, wl, lay, HW)


def test_one_role_per_stage_and_rank_order():
    lay, _, ts = gen()
    assert set(ts.roles) == {"stage0", "stage1"}
    assert ts.rank_role == ["stage0"] * 4 + ["stage1"] * 4
    assert {"model", "hardware", "layout"} <= set(ts.meta)
    names0 = [n.name for n in ts.roles["stage0"].nodes]
    names1 = [n.name for n in ts.roles["stage1"].nodes]
    assert any("embedding" in n for n in names0) and not any("embedding" in n for n in names1)
    assert any("lm-head" in n for n in names1) and not any("lm-head" in n for n in names0)


def test_1f1b_order_and_p2p():
    lay, wl, ts = gen()
    m = 8 // (2 * 1)
    # stage 0 of 2: one warm-up forward, then F/B alternation, then one cool-down backward
    seq = [("F" if "send act" in n.name else "B") for n in ts.roles["stage0"].nodes
           if n.kind in (NodeKind.SEND, NodeKind.RECV)]
    assert seq == ["F"] + ["F", "B"] * (m - 1) + ["B"]
    for n in ts.roles["stage1"].nodes:
        if n.kind is NodeKind.RECV and "act" in n.name:
            assert n.group_dim == "pp" and n.peer_delta == -1
        if n.kind is NodeKind.SEND:
            assert n.group_dim == "pp" and n.peer_delta == -1 and n.tag == 1


def test_durations_come_from_layer_cost():
    lay, wl, ts = gen()
    lc = layer_cost(M, wl, lay, HW, rates(HW, wl.precision))
    fwd = [n for n in ts.roles["stage0"].nodes if n.name == "mb0 L0 fwd"][0]
    bwd = [n for n in ts.roles["stage0"].nodes if n.name == "mb0 L0 bwd"][0]
    assert fwd.duration_s == pytest.approx(float(lc.fwd_compute_s), rel=1e-5)
    assert bwd.duration_s == pytest.approx(float(lc.bwd_compute_s), rel=1e-5)
    tp = [n for n in ts.roles["stage0"].nodes if n.group_dim == "tp" and n.name.startswith("mb0 ")]
    per_layer = sum(n.duration_s for n in tp) / (M.num_layers // 2)
    assert per_layer == pytest.approx(float(lc.tp_comm_s), rel=1e-5)


def test_list_schedule_compute_matches_vectorized_compute():
    from dse.train.step import train_step
    lay, wl, ts = gen(pp=1, dp=4)
    r = jax.jit(train_step)(M, wl, lay, HW)
    comp = sum(n.duration_s for n in ts.roles["stage0"].nodes if n.kind is NodeKind.COMPUTE
               and n.name != "optimizer step")
    assert comp == pytest.approx(float(r.compute_s + r.recompute_s), rel=1e-4)


@pytest.mark.parametrize("kw", [dict(zero=0), dict(zero=3), dict(sp=1, recompute=2),
                                dict(cp=2, dp=1, zero=3)])
def test_streams_and_dp_collectives(kw):
    _, _, ts = gen(**kw)
    nodes = ts.roles["stage1"].nodes
    dp = [n for n in nodes if n.group_dim in ("dp", "cp") and n.kind is NodeKind.COLLECTIVE
          and "grad" in n.name]
    assert dp and all(n.stream in (1, 2) for n in dp)
    opt = nodes[-1]
    assert opt.name == "optimizer step" and set(n.id for n in dp) & set(opt.data_deps)
    if kw.get("recompute") == 2:
        assert any("recompute" in n.name for n in nodes)
    if kw.get("sp"):
        assert any(n.group_dim == "tp" and n.comm_kind.value == "all_gather" for n in nodes)


def test_cli_trace_writes_chakra_and_timeline(tmp_path, capsys):
    out = tmp_path / "t"
    rc = main(["trace", "--model", "llama3-8b", "--hardware", "a100-sxm-80gb", "--gpus", "8",
               "--tp", "2", "--pp", "2", "--global-batch", "8", "--seq", "1024",
               "--out", str(out), "--simulate"])
    assert rc == 0
    txt = capsys.readouterr().out
    assert "simulated step time" in txt and "vectorized model" in txt and "util" in txt
    ts = read_trace_set(out)
    assert set(ts.roles) == {"stage0", "stage1"}
    doc = json.loads((out / "timeline.json").read_text())
    assert any(e.get("ph") == "X" for e in doc["traceEvents"])
    rc = main(["trace", "--model", "llama3-8b", "--hardware", "a100-sxm-80gb", "--gpus", "8",
               "--tp", "2", "--global-batch", "8", "--seq", "1024", "--out", str(tmp_path / "u")])
    assert rc == 0 and (tmp_path / "u" / "timeline.json").exists()


BASE = ["trace", "--model", "llama3-8b", "--hardware", "a100-sxm-80gb", "--gpus", "8",
        "--tp", "2", "--global-batch", "8", "--seq", "1024", "--simulate"]


@pytest.mark.parametrize("topo,faults,needle", [
    ('name="x"\n[[dim]]\nkind="hypercube"\nsize=8\nbw_gb_s=100\nlatency_us=1\n', None, "kind"),
    ('name="x"\n[[dim]]\nkind="switch"\nsize=4\nbw_gb_s=100\nlatency_us=1\n', None, "num_gpus"),
    ('name="x"\n[[dim]]\nkind="switch"\nsize=8\nbw_gb_s=-5\nlatency_us=1\n', None, "bw"),
    (None, '[[fault]]\nkind="link_down"\nlink="n9.gpu0->nvsw"\n', "link"),
])
def test_cli_bad_topology_and_faults_exit_2(tmp_path, capsys, topo, faults, needle):
    args = BASE + ["--out", str(tmp_path / "o")]
    if topo:
        (tmp_path / "topo.toml").write_text(topo)
        args += ["--topology", str(tmp_path / "topo.toml")]
    if faults:
        (tmp_path / "f.toml").write_text(faults)
        args += ["--faults", str(tmp_path / "f.toml")]
    rc = main(args)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and needle in err, err


def test_cli_bad_sizes_exit_2(tmp_path, capsys):
    rc = main(["trace", "--model", "llama3-8b", "--hardware", "a100-sxm-80gb", "--gpus", "8",
               "--tp", "3", "--out", str(tmp_path / "o")])
    assert rc == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1


def test_corrupt_trace_is_input_error(tmp_path):
    from dse.errors import InputError
    from dse.trace.chakra import write_trace_set
    _, _, ts = gen()
    write_trace_set(ts, tmp_path)
    et = tmp_path / "stage0.et"
    et.write_bytes(et.read_bytes()[:-7])
    with pytest.raises(InputError):
        read_trace_set(tmp_path)
