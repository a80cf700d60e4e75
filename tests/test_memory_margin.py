"""The per-GPU memory breakdown in every output, and the safety margin chosen layouts keep
(dse.train.memory_parts)."""

from pathlib import Path

import jax
import numpy as np
import pandas as pd
import pytest

from dse.cli import main
from dse.errors import InputError
from dse.predict import predict_frame
from dse.spec.layout import Layout, Workload
from dse.sweep.grid import GridOptions
from dse.sweep.run import sweep
from dse.train.memory_parts import MEM_COLUMNS, MEM_MARGIN, check_margin, memory_parts
from dse.train.step import train_step
from tests.helpers import a100, h100, llama70b

OPT = GridOptions(mbs=(1, 2), vpp=(1, 2))


@pytest.fixture(scope="module")
def frames():
    m = llama70b()
    return (sweep(m, [h100()], 32, 256, 4096, opt=OPT),
            sweep(m, [h100()], 32, 256, 4096, opt=OPT, mem_margin=0.0))


def test_sweep_parts_sum_to_the_total(frames):
    df, _ = frames
    assert set(MEM_COLUMNS) <= set(df.columns)
    total = df[list(MEM_COLUMNS)].sum(axis=1)
    assert total.to_numpy() == pytest.approx(df["mem_gib"].to_numpy(), rel=1e-5)
    assert (df[list(MEM_COLUMNS)] >= 0).all().all()


def test_sweep_parts_equal_the_scalar_step():
    m, hw = llama70b(), a100()
    df = sweep(m, [hw], 32, 256, 4096, opt=GridOptions(mbs=(1,), vpp=(1,), recompute=(0,)))
    r = df[df.feasible].iloc[0]
    lay = Layout(tp=int(r.tp), pp=int(r.pp), dp=int(r.dp), cp=int(r.cp), ep=int(r.ep), mbs=int(r.mbs),
                 vpp=int(r.vpp), recompute=0, zero=int(r.zero), sp=int(r.sp))
    wl = Workload(global_batch=256, seq_len=4096, precision=1)
    p = jax.jit(memory_parts)(m, wl, lay, hw)
    assert r.mem_weights_gib == pytest.approx(float(p.weights_bytes) / 2**30, rel=1e-5)
    assert r.mem_optimizer_gib == pytest.approx(float(p.optimizer_bytes) / 2**30, rel=1e-5)
    assert r.mem_gib == pytest.approx(float(jax.jit(train_step)(m, wl, lay, hw).mem_bytes) / 2**30, rel=1e-5)


def test_margin_masks_layouts_inside_it(frames):
    df, d0 = frames
    ok = df[df.feasible]
    assert (ok.mem_gib <= (1 - MEM_MARGIN) * ok.hbm_gib + 1e-4).all()
    assert d0.feasible.sum() > df.feasible.sum()          # some winners sit inside 3 %
    squeezed = df[~df.feasible & (df.mem_gib <= df.hbm_gib)]
    assert len(squeezed) and squeezed.status.str.contains("3% safety margin").all()
    assert df[df.feasible].step_time_s.min() >= d0[d0.feasible].step_time_s.min() * (1 - 1e-6)


def test_margin_validation():
    assert check_margin("0.05") == 0.05
    for bad in ("-0.1", "0.5", "x", "nan"):
        with pytest.raises(InputError, match="mem_margin"):
            check_margin(bad)


ROW = dict(id=1, source="T", model="GPT 7.5B", num_layers=36, hidden_size=4096, ffn_hidden_size=16384,
           num_attention_heads=32, num_kv_heads=32, vocab_size=51200, seq_length=2048,
           global_batch_size=512, micro_batch_size=16, gpu="a100-sxm-80gb", num_gpus=128, tp=4, pp=1,
           dp=32, cp=1, ep=1, vpp=1, sequence_parallel="false", recompute="full", zero_stage=0,
           precision="fp16", measured_iter_time_s=3.7)


def test_predict_carries_the_breakdown_and_judges_given_layouts_without_margin():
    rows = pd.DataFrame([ROW])
    out = predict_frame(rows, "t.csv")
    cols = [f"predicted_{c}" for c in MEM_COLUMNS]
    assert out[cols].sum(axis=1)[0] == pytest.approx(out.predicted_mem_gib[0], rel=1e-5)
    used = float(out.predicted_mem_gib[0])
    # a margin that leaves less than the layout needs: the given layout still predicts
    # (it is what the run used), flagged as inside the margin; nothing is chosen
    tight = 1 - (used - 0.5) / 80.0
    squeezed = predict_frame(rows, "t.csv", mem_margin=tight)
    assert squeezed.status[0] == "ok" and not squeezed.mem_within_margin[0]
    assert squeezed.predicted_iter_time_s[0] == pytest.approx(out.predicted_iter_time_s[0])
    assert out.mem_within_margin[0]


def test_predict_chooses_blank_settings_within_the_margin():
    blank = dict(ROW, micro_batch_size=None, recompute=None, tp=None, dp=None)
    a = predict_frame(pd.DataFrame([blank]), "t.csv", mem_margin=0.0)
    b = predict_frame(pd.DataFrame([blank]), "t.csv", mem_margin=0.3)
    assert b.predicted_mem_gib[0] <= 0.7 * 80 * 1.0000001
    assert b.predicted_iter_time_s[0] >= a.predicted_iter_time_s[0] * (1 - 1e-6)


def test_estimate_prints_the_table_and_warns_inside_the_margin(capsys):
    args = ["estimate", "--model", "llama3-70b", "--hardware", "h100-sxm-80gb", "--gpus", "64",
            "--tp", "4", "--pp", "4", "--vpp", "5", "--sp", "--seq", "4096"]
    rc = main(args + ["--recompute", "block"])
    out = capsys.readouterr().out
    for part in ("weights", "grads", "optimizer", "activations", "reserve", "total"):
        assert f"    {part}" in out
    assert rc == 0 and "80 % band" in out
    # a margin wider than the layout's headroom: it still fits (exit 0), with a warning
    import dse
    e = dse.estimate(model="llama3-70b", hardware="h100-sxm-80gb", gpus=64, tp=4, pp=4, vpp=5,
                     sp=True, seq_len=4096, recompute="block")
    margin = round(1 - (e.mem_gib - 1.0) / e.hbm_gib, 3)
    rc = main(args + ["--recompute", "block", "--mem-margin", str(margin)])
    out = capsys.readouterr().out
    assert rc == 0 and f"WITHIN THE {margin:.0%} SAFETY MARGIN" in out
    assert not e.within_margin
    assert dse.estimate(model="llama3-70b", hardware="h100-sxm-80gb", gpus=64, tp=4, pp=4, vpp=5,
                        sp=True, seq_len=4096, recompute="block", mem_margin=margin).within_margin
    assert main(args + ["--mem-margin", "0.7"]) == 2


def test_api_estimate_and_sweep_carry_memory_and_band():
    import dse
    e = dse.estimate(model="llama3-8b", hardware="h100-sxm-80gb", gpus=8, tp=2, seq_len=4096,
                     global_batch=64)
    assert set(e.memory) == set(MEM_COLUMNS)
    assert sum(e.memory.values()) == pytest.approx(e.mem_gib, rel=1e-5)
    assert e.step_time_lo_s < e.step_time_s < e.step_time_hi_s
    s = e.to_series()
    assert "mem_activations_gib" in s and "step_time_hi_s" in s
    df = dse.sweep(model="llama3-8b", hardware="h100-sxm-80gb", gpus=8, global_batch=64, seq_len=2048)
    ok = df[df.feasible]
    assert (ok.step_time_lo_s < ok.step_time_s).all() and (ok.step_time_s < ok.step_time_hi_s).all()
    assert np.isfinite(ok[list(MEM_COLUMNS)].to_numpy()).all()


def test_a_measured_rows_blank_recompute_is_chosen_against_the_full_hbm():
    """NeMo's Llama 3.1 405B FP8 on 256 GB200 (TP4 PP16 VPP4; Megatron-Bridge's recipe sets no
    recompute) needs 182.7 of 185 GiB without recompute here: inside the planning margin.
    `dse predict` / `validate` choose a measured row's blanks against the full HBM (what the
    run did), so it predicts no recompute; the planning margin, asked for, picks block
    recompute and a slower step."""
    nemo = pd.read_csv(Path(__file__).parent / "data" / "published_nemo.csv")
    row = nemo[nemo.id == "mb2511_gb200_llama31_405b_fp8_256g"]
    assert row.recompute.isna().all()
    measured = predict_frame(row.copy(), "nemo.csv")
    planned = predict_frame(row.copy(), "nemo.csv", mem_margin=MEM_MARGIN)
    assert measured.chosen_recompute.iloc[0] == "none"
    assert planned.chosen_recompute.iloc[0] != "none"
    assert float(planned.predicted_iter_time_s.iloc[0]) > 1.05 * float(measured.predicted_iter_time_s.iloc[0])
    hbm = 185.0
    assert (1 - MEM_MARGIN) * hbm < float(measured.predicted_mem_gib.iloc[0]) <= hbm
