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
from dse.trace.generate import generate_trace_set, pipeline_order, rank_grid
from dse.trace.graph import NodeKind
from dse.train.layer import layer_cost
from dse.cost.rates import rates

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


def test_interleaved_order_is_megatrons():
    # pp=2, vpp=2, m=4 (forward_backward_pipelining_with_interleaving, group size pp):
    # rank 0 warms up (2-0-1)*2 + (2-1)*2 = 4 chunks, rank 1 warms up 2
    fmt = lambda s: " ".join(("F" if f else "B") + f"{mb}{c}" for f, mb, c in
                             pipeline_order(2, 2, 4, s))
    assert fmt(0) == "F00 F10 F01 F11 F20 B01 F30 B11 F21 B00 F31 B10 B21 B31 B20 B30"
    assert fmt(1) == "F00 F10 F01 B01 F11 B11 F20 B00 F30 B10 F21 B21 F31 B31 B20 B30"


@pytest.mark.parametrize("pp,vpp,m", [(2, 1, 3), (4, 1, 2), (4, 2, 8), (4, 3, 4), (8, 2, 16)])
def test_pipeline_order_runs_every_pass_once_backward_after_forward(pp, vpp, m):
    for s in range(pp):
        order = pipeline_order(pp, vpp, m, s)
        assert sorted(order) == sorted((f, mb, c) for f in (True, False) for mb in range(m)
                                       for c in range(vpp))
        pos = {x: i for i, x in enumerate(order)}
        assert all(pos[(True, mb, c)] < pos[(False, mb, c)] for mb in range(m)
                   for c in range(vpp))
        first_b = next(i for i, x in enumerate(order) if not x[0])
        want = (min(pp - s - 1, m) if vpp == 1 else min((pp - s - 1) * 2 + (vpp - 1) * pp,
                                                          m * vpp))
        assert first_b == (want if want == m * vpp else want + 1)   # warm-up, then F, B


def test_interleaved_trace_chunks_and_async_p2p():
    lay, wl, ts = gen(tp=2, pp=4, dp=1, vpp=2)         # 32 layers: 4 per chunk, m = 8
    assert ts.meta["schedule"].startswith("interleaved")
    for s in range(4):
        nodes = ts.roles[f"stage{s}"].nodes
        fwd = [n.name for n in nodes if n.name.startswith("mb0 L") and n.name.endswith("fwd")]
        assert len(fwd) == 8                            # 2 chunks x 4 layers
        p2p = [n for n in nodes if n.kind in (NodeKind.SEND, NodeKind.RECV)]
        assert all(n.stream == (3 if n.kind is NodeKind.SEND else 4) for n in p2p)
        n_emb = sum("embedding" in n.name for n in nodes)
        n_head = sum("lm-head+loss" in n.name for n in nodes)
        assert (n_emb, n_head) == ((8, 0) if s == 0 else (0, 8) if s == 3 else (0, 0))
    by = {n.name: n for n in ts.roles["stage3"].nodes}
    # last rank, chunk 0 -> rank 0, chunk 1 (wrap); chunk 1 is the last virtual stage
    assert (by["mb0 c0 send act"].peer_delta, by["mb0 c0 send act"].tag) == (-3, 2)
    assert "mb0 c1 send act" not in by and (by["mb0 c1 recv act"].peer_delta,
                                            by["mb0 c1 recv act"].tag) == (-1, 0)
    by0 = {n.name: n for n in ts.roles["stage0"].nodes}
    assert (by0["mb0 c1 recv act"].peer_delta, by0["mb0 c1 recv act"].tag) == (3, 2)
    assert (by0["mb0 c1 send grad"].peer_delta, by0["mb0 c1 send grad"].tag) == (3, 3)
    assert "mb0 c0 send grad" not in by0 and "mb0 c0 recv act" not in by0
    # the first layer pass of a chunk waits for its receive (data dependency)
    recv = by0["mb0 c1 recv act"]
    assert recv.id in by0["mb0 L4 fwd"].data_deps


def test_interleaved_replay_is_deadlock_free_exact_and_shrinks_the_bubble():
    from dse.sim import simulate
    from dse.sim.topology import topology_for_hardware
    topo = topology_for_hardware(HW, 8)
    steps = {}
    for vpp in (1, 2):
        lay, wl, ts = gen(tp=2, pp=4, dp=1, vpp=vpp)
        res = simulate(ts, topo, grid=rank_grid(lay), record_timeline=False)
        exact = simulate(ts, topo, grid=rank_grid(lay), coalesce=False, record_timeline=False)
        assert res.blocked is None and exact.step_time_s == pytest.approx(res.step_time_s)
        steps[vpp] = res.step_time_s
    assert steps[2] < steps[1]


def test_interleaving_needs_micro_batches_divisible_by_pp():
    from dse.errors import InputError
    lay = Layout(tp=2, pp=4, dp=1, mbs=1, vpp=2)
    with pytest.raises(InputError, match="micro_batches"):
        generate_trace_set(M, Workload(global_batch=6, seq_len=1024), lay, HW)


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


@pytest.mark.parametrize("L, mtp, pp, vpp, want", [
    # DeepSeek-V3 at PP 8: Megatron-Bridge's [E+8, 8 x 6, 5+mtp+L]
    (61, 1, 8, 1, [[8]] * 7 + [[5]]),
    (61, 1, 8, 2, [[4, 4]] * 7 + [[4, 1]]),
    # Llama 3.1 405B at PP 8 (126 layers): the loss and the embedding each count as a layer
    (126, 0, 8, 1, [[15]] + [[16]] * 6 + [[15]]),
    (94, 0, 8, 1, [[11]] + [[12]] * 6 + [[11]]),      # Qwen3-235B
    (80, 0, 4, 2, [[10, 10]] * 4),                     # even: nothing moves
    (13, 0, 1, 1, [[13]]),
])
def test_chunk_layer_counts_are_the_priced_uneven_split(L, mtp, pp, vpp, want):
    from dse.trace.generate import chunk_layer_counts
    from dse.train.memory import layers_per_stage
    L_st = int(layers_per_stage(get_model("llama3-8b").replace(num_layers=L),
                                Layout(pp=pp, vpp=vpp)))
    assert chunk_layer_counts(pp, vpp, L_st, L, mtp) == want


def test_chunk_layer_counts_hold_every_layer_and_the_heaviest_rank_sets_l_st():
    """Every layer placed once; no rank above ``L_st``; without interleaving (slack < pp)
    some rank holds ``L_st`` -- the stage the vectorized model's pace prices."""
    from dse.trace.generate import chunk_layer_counts
    for L in (7, 13, 61, 94, 95, 126):
        for pp in (1, 2, 3, 4, 8):
            for vpp in (1, 2, 3):
                if pp * vpp > L:
                    continue
                L_st = vpp * -(-L // (pp * vpp))
                for mtp in (0, 1):
                    c = chunk_layer_counts(pp, vpp, L_st, L, mtp)
                    assert sum(map(sum, c)) == L and min(map(min, c)) >= 0
                    ranks = [sum(r) for r in c]
                    assert max(ranks) <= L_st and (vpp > 1 or pp == 1 or max(ranks) == L_st)


def test_the_head_stage_gives_up_no_more_layers_than_it_holds():
    """DeepSeek-V3 at PP 32 (L_st 2, slack 3): MTP would take all three short layers from the
    head's stage, which holds two -- it holds none, the third falls on the embedding's stage,
    and the vectorized step prices that stage (head + MTP beside no decoder layer) as the
    trace replays it."""
    from dse.sim import simulate
    from dse.sim.topology import topology_for_hardware
    from dse.trace.generate import chunk_layer_counts, model_step_time_s
    from dse.train.memory import head_stage_deficit
    assert float(head_stage_deficit(3.0, 1.0)) == 3.0 and float(head_stage_deficit(3.0, 1.0, 2.0)) == 2.0
    assert float(head_stage_deficit(3.0, 0.0, 2.0)) == 1.0
    c = chunk_layer_counts(32, 1, 2, 61, 1)
    assert c[-1] == [0] and c[0] == [1] and sum(map(sum, c)) == 61
    hw, model = get_hardware("h100-sxm-80gb"), get_model("deepseek-v3")
    lay = Layout(tp=1, pp=32, dp=8, ep=8, mbs=1, zero=1)
    wl = Workload(global_batch=256, seq_len=4096, precision=2)
    ts = generate_trace_set(model, wl, lay, hw)
    res = simulate(ts, topology_for_hardware(hw, 256), grid=rank_grid(lay), record_timeline=False)
    assert res.step_time_s == pytest.approx(model_step_time_s(model, wl, lay, hw), rel=0.05)


def test_deepseek_v3_trace_runs_the_split_the_model_prices():
    """The trace's head stage holds the 5 layers beside MTP and the loss, as the vectorized
    model's schedule (dse.train.step.pipeline_stages) prices: the list schedule then agrees
    with the vectorized step (with every stage at 8 layers it was 23 % longer)."""
    from dse.sim import simulate
    from dse.sim.topology import topology_for_hardware
    from dse.trace.generate import model_step_time_s
    hw, model = get_hardware("h100-sxm-80gb"), get_model("deepseek-v3")
    lay = Layout(tp=1, pp=8, dp=8, ep=8, mbs=1, zero=1)
    wl = Workload(global_batch=128, seq_len=4096, precision=2)
    ts = generate_trace_set(model, wl, lay, hw)
    fwd = lambda role: [n for n in ts.roles[role].nodes if n.name.startswith("mb0 L")
                        and n.name.endswith(" fwd")]
    assert [len(fwd(f"stage{s}")) for s in range(8)] == [8] * 7 + [5]
    res = simulate(ts, topology_for_hardware(hw, 64), grid=rank_grid(lay), record_timeline=False)
    assert res.step_time_s == pytest.approx(model_step_time_s(model, wl, lay, hw), rel=0.05)


def test_an_empty_interleaved_chunk_still_waits_for_its_data():
    """DeepSeek-V3 at PP 8 x VPP 4 (L_st 8, two layers a chunk): the head's rank gives its
    last chunk's layers up to MTP; a chunk with no layers still waits for what it receives
    before it sends on (or runs the LM head), and the replay stays deadlock-free."""
    from dse.sim import simulate
    from dse.sim.topology import topology_for_hardware
    from dse.trace.generate import chunk_layer_counts
    assert chunk_layer_counts(8, 4, 8, 61, 1)[7] == [2, 2, 1, 0]
    hw, model = get_hardware("h100-sxm-80gb"), get_model("deepseek-v3")
    lay = Layout(tp=1, pp=8, dp=8, ep=8, mbs=1, zero=1, vpp=4)
    ts = generate_trace_set(model, Workload(global_batch=128, seq_len=4096, precision=2), lay, hw)
    nodes = {n.name: n for n in ts.roles["stage7"].nodes}
    head, recv = nodes["mb0 lm-head+loss"], nodes["mb0 c3 recv act"]
    waits = [n for n in ts.roles["stage7"].nodes if n.name == "mb0 c3 recv act wait"]
    assert len(waits) == 1 and recv.id in waits[0].data_deps
    assert waits[0].id in head.data_deps or waits[0].id in head.ctrl_deps
    res = simulate(ts, topology_for_hardware(hw, 64), grid=rank_grid(lay), record_timeline=False)
    assert res.blocked is None and res.step_time_s > 0
