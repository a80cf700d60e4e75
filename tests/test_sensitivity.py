"""dse.sensitivity: jax.grad elasticities agree with finite differences on smooth knobs,
the homogeneity identity holds, and `dse sensitivity` writes its CSV and tornado PNG."""

import numpy as np
import pandas as pd
import pytest

from dse.cli import main
from dse.infer.workload import InferenceWorkload
from dse.sensitivity import KNOBS, elasticities, infer_time_fn, train_time_fn
from dse.spec.hardware import get_hardware
from dse.spec.layout import Layout, Workload
from dse.spec.model import get_model


@pytest.fixture(scope="module")
def train_tp8():
    """llama3-8b, 8 x H100, TP8 SP: NVLink all-gathers / reduce-scatters on the critical
    path, so NVLink bandwidth matters."""
    model, hw = get_model("llama3-8b"), get_hardware("h100-sxm-80gb")
    wl = Workload(global_batch=64, seq_len=4096)
    lay = Layout(tp=8, pp=1, dp=1, mbs=1, recompute=1, zero=1, sp=1)
    return elasticities(train_time_fn(model, wl, lay), hw).set_index("knob")


@pytest.fixture(scope="module")
def decode():
    """llama3-8b decode on one H100 at batch 8: HBM-bound (weights + KV streamed per token)."""
    model, hw = get_model("llama3-8b"), get_hardware("h100-sxm-80gb")
    iwl = InferenceWorkload(batch=8, prompt_len=2048, gen_len=256)
    return elasticities(infer_time_fn(model, iwl, 1, 1), hw).set_index("knob")


def test_ad_matches_finite_differences_on_smooth_knobs(train_tp8, decode):
    hbm = decode.loc["hbm_bw_bytes_per_s"]
    assert hbm["elasticity_ad"] < -0.5                 # memory-bound: HBM bandwidth dominates
    assert hbm["elasticity_ad"] == pytest.approx(hbm["elasticity_fd"], rel=0.01)
    nvl = train_tp8.loc["nvlink_bw_bytes_per_s"]
    assert nvl["elasticity_ad"] < -0.01                # TP collectives are exposed
    assert nvl["elasticity_ad"] == pytest.approx(nvl["elasticity_fd"], rel=0.02)
    for df in (train_tp8, decode):
        smooth = df[~df["kink"] & (df["elasticity_ad"].abs() > 0.01)]
        assert len(smooth) >= 3
        np.testing.assert_allclose(smooth["elasticity_ad"], smooth["elasticity_fd"], rtol=0.05)
        assert not df.loc["hbm_bw_bytes_per_s", "kink"]


def test_homogeneity_rates_up_latencies_down(train_tp8, decode):
    """Every time is work / rate, a latency, or a max/sum of such: scaling all rates by k
    and all latencies by 1/k scales T by 1/k, so e(rates) - e(latencies) = -1."""
    for df in (train_tp8, decode):
        lhs = df.loc["all rates", "elasticity_ad"] - df.loc["all latencies", "elasticity_ad"]
        assert lhs == pytest.approx(-1.0, abs=1e-3)
        assert -1.0 < df.loc["all rates", "elasticity_ad"] < 0.0


def test_composites_are_sums_of_their_leaves(train_tp8):
    """The gradient is linear: a knob moving several leaves has the sum of their
    elasticities; the derate 1 - throttle equals HBM bandwidth when throttle_clock = 0."""
    ad = train_tp8["elasticity_ad"]
    for kn in KNOBS:
        if kn.kind == "composite":
            assert ad[kn.name] == pytest.approx(sum(ad[f] for f in kn.fields), abs=1e-4)
    assert ad["1 - throttle"] == pytest.approx(ad["hbm_bw_bytes_per_s"], abs=1e-5)
    assert ad["tdp_w"] == 0.0 and ad["peak_fp8_flops_per_s"] == 0.0


def test_cli_writes_csv_and_tornado(tmp_path, capsys):
    out = tmp_path / "sens"
    rc = main(["sensitivity", "--model", "llama3-70b", "--hardware", "h100-sxm-80gb", "--gpus", "64",
               "--global-batch", "1024", "--seq", "4096", "-o", str(out)])
    assert rc == 0, capsys.readouterr().err
    assert "fastest feasible layout" in capsys.readouterr().out
    df = pd.read_csv(out / "sensitivity.csv")
    assert len(df) == len(KNOBS)
    for c in ("knob", "elasticity_ad", "elasticity_fd", "kink", "layout", "time_s", "fits"):
        assert c in df.columns
    assert df["fits"].all() and np.isfinite(df["elasticity_ad"]).all()
    png = (out / "tornado.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    assert (out / "manifest.json").exists()
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_cli_infer_explicit_layout(tmp_path, capsys):
    rc = main(["sensitivity", "--infer", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb",
               "--gpus", "2", "--tp", "2", "--batch", "4", "--prompt", "512", "--gen", "64",
               "-o", str(tmp_path)])
    assert rc == 0, capsys.readouterr().err
    df = pd.read_csv(tmp_path / "sensitivity.csv").set_index("knob")
    assert (df["layout"].str.startswith("TP2 PP1 batch 4")).all()
    assert df.loc["hbm_bw_bytes_per_s", "elasticity_ad"] < -0.3


@pytest.mark.parametrize("extra,needle", [
    (["--tp", "3"], "tp"),
    (["--infer", "--metric", "ttft"], "metric"),
])
def test_bad_input_exit_2(tmp_path, capsys, extra, needle):
    rc = main(["sensitivity", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "8",
               "-o", str(tmp_path), *extra])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and needle in err


def test_output_that_is_a_file_exits_2(tmp_path, capsys):
    f = tmp_path / "x"
    f.write_text("")
    rc = main(["sensitivity", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "8",
               "--tp", "8", "-o", str(f)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "directory" in err
