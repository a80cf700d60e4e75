"""The sweep's top table (dse.report.top_table, `dse sweep`): ties, width, every term,
the infeasible message."""

import pandas as pd

from dse.cli import main
from dse.report.top_table import drop_ties, format_top, top_rows
from dse.train.step import BREAKDOWN

SWEEP = ["sweep", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "16",
         "--global-batch", "128", "--seq", "4096"]


def rows():
    base = {"hardware": "h", "tp": 1, "pp": 1, "dp": 8, "cp": 1, "ep": 1, "mbs": 1, "vpp": 1,
            "recompute": "none", "zero": 1, "sp": False, "step_time_s": 1.0, "tokens_per_s": 10.0,
            "mfu": 0.5, "mem_gib": 10.0, **{f: 0.1 for f in BREAKDOWN}}
    return pd.DataFrame([base, {**base, "recompute": "selective"}, {**base, "zero": 2},
                         {**base, "step_time_s": 1.1, "mem_gib": 9.0, "tp": 2, "dp": 4}])


def test_exact_ties_dropped_and_named():
    kept, n, knobs = drop_ties(rows())
    assert len(kept) == 2 and n == 2 and knobs == ["recompute", "zero"]
    top, n, knobs = top_rows(rows(), 1)
    assert len(top) == 1 and n == 2
    top, n, _ = top_rows(rows().iloc[[3, 0]].reset_index(drop=True), 1)
    assert n == 0          # the ties are of a row not shown


def test_format_fits_width_and_keeps_every_term():
    text = format_top(rows(), list(rows().columns), width=60)
    assert max(len(l) for l in text.splitlines()) <= 60
    for h in ("compute", "recomp", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "bubble", "dp_comm", "optim"):
        assert h in text


def test_sweep_says_how_many_ties_and_fits_120(capsys):
    assert main(SWEEP + ["--top", "5"]) == 0
    out = capsys.readouterr().out
    assert "exact ties of these dropped" in out
    assert max(len(l) for l in out.splitlines()) <= 120
    assert main(SWEEP + ["--top", "5", "--columns", "250"]) == 0
    assert max(len(l) for l in capsys.readouterr().out.splitlines()) > 120


def test_energy_columns_in_csv(tmp_path, capsys):
    out = tmp_path / "all.csv"
    assert main(SWEEP + ["--gpu-hour-usd", "2.5", "--train-tokens", "1T", "-o", str(out)]) == 0
    df = pd.read_csv(out)
    ok = df[df["feasible"]]
    for c in ("gpu_power_w", "energy_kwh_per_mtok", "usd_per_mtok", "train_days", "train_usd"):
        assert ok[c].notna().all() and (ok[c] > 0).all()
    assert "$/Mtok" in capsys.readouterr().out


def test_bad_energy_flags_exit_2(capsys):
    assert main(SWEEP + ["--gpu-hour-usd", "-1"]) == 2
    assert main(SWEEP + ["--train-tokens", "lots"]) == 2
    assert main(SWEEP + ["--gpu-hour-usd", "1", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "train-tokens" in err[1] and "gpu_hour_usd" in err[2]


def test_infeasible_sweep_quotes_the_smallest_need(capsys, tmp_path):
    rc = main(["sweep", "--model", "llama3-405b", "--hardware", "a100-sxm-40gb", "--gpus", "8",
               "--global-batch", "64", "--seq", "4096", "-o", str(tmp_path / "x.csv")])
    out = capsys.readouterr().out
    assert rc == 1 and "smallest memory need" in out and " on a100-sxm-40gb" in out
    need = float(out.split("need is ")[1].split(" GiB")[0])
    df = pd.read_csv(tmp_path / "x.csv")          # every point is still written, with its status
    assert not df["feasible"].any() and abs(need - df["mem_gib"].min()) < 0.06
