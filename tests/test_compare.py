"""`dse compare` (dse.compare): the best layout per (hardware, GPU count), table and plot."""

import pandas as pd
import pytest

from dse.cli import main
from dse.comparison import best_per_cell, compare_frame
from dse.errors import InputError
from dse.spec.hardware import get_hardware
from dse.spec.model import get_model
from dse.sweep.run import sweep

HW = ["a100-sxm-80gb", "h100-sxm-80gb"]


def test_best_per_cell_is_the_sweeps_fastest():
    model, hws = get_model("llama3-8b"), [get_hardware(h) for h in HW]
    df = compare_frame(model, hws, [16, 8], 64, 2048, gpu_hour_usd=[1.0, 2.0])
    assert list(zip(df["hardware"], df["gpus"])) == [(h, g) for h in HW for g in (8, 16)]
    assert (df["status"] == "ok").all()
    for g in (8, 16):
        s = sweep(model, hws, g, 64, 2048)
        best = s[s["feasible"]].groupby("hardware")["step_time_s"].min()
        got = df[df["gpus"] == g].set_index("hardware")["step_time_s"]
        pd.testing.assert_series_equal(got.sort_index(), best.sort_index(), check_names=False)
    h100 = df[df["hardware"] == "h100-sxm-80gb"]
    assert (h100["usd_per_mtok"] > 0).all() and (df["energy_kwh_per_mtok"] > 0).all()


def test_objective_energy_never_uses_more_energy():
    model, hws = get_model("llama3-8b"), [get_hardware("h100-sxm-80gb")]
    fast = compare_frame(model, hws, [16], 64, 2048)
    green = compare_frame(model, hws, [16], 64, 2048, objective="energy_kwh_per_mtok")
    assert green["energy_kwh_per_mtok"][0] <= fast["energy_kwh_per_mtok"][0]
    assert green["step_time_s"][0] >= fast["step_time_s"][0]


def test_infeasible_and_unfillable_cells_keep_a_row():
    model, hws = get_model("llama3-70b"), [get_hardware("a100-sxm-40gb")]
    df = compare_frame(model, hws, [2, 64], 32, 2048)
    small = df[df["gpus"] == 2].iloc[0]
    assert small["status"].startswith("out of memory: the smallest memory need is")
    assert small["mem_gib"] > 40 and pd.isna(small["step_time_s"])
    rows = best_per_cell(pd.DataFrame(), ["a100-sxm-40gb"], 3, "step_time_s")   # empty sweep
    assert "no valid layout" in rows[0]["status"]


def test_oom_reason_names_the_usable_share_under_a_margin():
    """llama3-8b on one B200 needs ~147 GiB: above the 70 % left by a 0.3 margin, below the
    HBM. The reason must compare against what the margin leaves, not the full HBM."""
    df = compare_frame(get_model("llama3-8b"), [get_hardware("b200")], [1], 1, 4096,
                       mem_margin=0.3)
    st = df.iloc[0]["status"]
    assert "GiB usable" in st and "30% safety margin" in st, st
    need, usable = (float(x.split(" GiB")[0]) for x in st.split("need is ")[1].split(" > ")[:2])
    assert need > usable


def test_bad_objective():
    with pytest.raises(InputError):
        compare_frame(get_model("llama3-8b"), [get_hardware("h100-sxm-80gb")], [8], 64, 2048,
                      objective="usd_per_mtok")          # needs a price


def test_cli_writes_table_csv_and_plot(tmp_path, capsys):
    rc = main(["compare", "--model", "llama3-8b", "--hardware", *HW, "--gpus", "8", "16",
               "--global-batch", "64", "--seq", "2048", "--gpu-hour-usd", "2",
               "--train-tokens", "1T", "-o", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "best = fastest step" in out and "$/Mtok" in out and "train_d" in out
    table = [l for l in out.splitlines() if not l.startswith("wrote ")]   # the path line varies
    assert max(len(l) for l in table) <= 120, [l for l in table if len(l) > 120]
    df = pd.read_csv(tmp_path / "compare.csv")
    assert len(df) == 4 and {"layout", "tokens_per_s", "usd_per_mtok", "train_days"} <= set(df)
    assert (tmp_path / "compare.png").stat().st_size > 10_000
    assert (tmp_path / "manifest.json").exists()


def test_cli_bad_input_exit_2(capsys):
    base = ["compare", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "8",
            "--global-batch", "64"]
    assert main(base + ["--precision", "fp7"]) == 2
    assert main(["compare", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "h100-sxm-80gb",
                 "--gpus", "8", "--global-batch", "64"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "precision" in err[0] and "repeat" in err[1]


@pytest.mark.parametrize("gpus", ["8", "3"])
def test_cli_no_cell_fits_prints_each_cells_reason(gpus, tmp_path, capsys):
    """llama3-70b at global batch 1024 fits on neither 8 nor 3 H100s: the reasons print (the
    smallest memory need per cell, as a mixed run prints them), the CSV keeps the row, exit 1."""
    rc = main(["compare", "--model", "llama3-70b", "--hardware", "h100-sxm-80gb", "--gpus", gpus,
               "--global-batch", "1024", "-o", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert rc == 1
    assert f"h100-sxm-80gb x {gpus}: " in out
    df = pd.read_csv(tmp_path / "o" / "compare.csv")
    assert len(df) == 1 and df["status"].iloc[0] != "ok"
    assert not (tmp_path / "o" / "compare.png").exists()
