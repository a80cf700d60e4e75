"""Prediction intervals (dse.intervals): the stored fit matches its residuals, the
residuals match a fresh prediction of a sample of their rows, and every output carries
the band."""

import hashlib
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse import intervals
from dse.predict import predict_frame, read_csv
from tests.helpers import validation_dir

VAL = validation_dir()
STORED = json.loads(intervals.DATA.read_text())
RES = pd.read_csv(intervals.RESIDUALS, dtype={"id": str})
ROW = dict(id=1, source="T", model="GPT 7.5B", num_layers=36, hidden_size=4096, ffn_hidden_size=16384,
           num_attention_heads=32, num_kv_heads=32, vocab_size=51200, seq_length=2048,
           global_batch_size=512, micro_batch_size=16, gpu="a100-sxm-80gb", num_gpus=128, tp=4, pp=1,
           dp=32, cp=1, ep=1, vpp=1, sequence_parallel="false", recompute="full", zero_stage=0,
           precision="fp16", measured_iter_time_s=3.7)


def test_stored_quantiles_are_the_fit_of_the_stored_residuals():
    fresh = intervals.fit_cells(RES)
    assert fresh.keys() == STORED["cells"].keys()
    for kind, cells in fresh.items():
        assert cells.keys() == STORED["cells"][kind].keys()
        for cell, c in cells.items():
            s = STORED["cells"][kind][cell]
            assert c["n"] == s["n"]
            assert c["q10"] == pytest.approx(s["q10"], abs=1e-5)
            assert c["q90"] == pytest.approx(s["q90"], abs=1e-5)
            assert c["q10"] <= c["q90"]


@pytest.mark.skipif(not VAL.exists(), reason="no validation data (data/validation, ../shared/validation)")
def test_inputs_unchanged_since_the_fit():
    for name, sha in STORED["inputs"].items():
        got = hashlib.sha256((VAL / name).read_bytes()).hexdigest()
        assert got == sha, f"{name} changed: rerun scripts/fit_intervals.py"


@pytest.mark.skipif(not VAL.exists(), reason="no validation data (data/validation, ../shared/validation)")
@pytest.mark.parametrize("name", ["calibration.csv", "vtrain.csv", "inference/calibration.csv"])
def test_residuals_match_a_fresh_prediction_of_a_sample(name):
    """Regenerate-and-compare on every k-th stored row: fails when the cost model moved
    and the fit is stale (rerun scripts/fit_intervals.py)."""
    stored = RES[RES["file"] == name]
    sample = stored.iloc[:: max(len(stored) // 8, 1)]
    df = read_csv(str(VAL / name))
    df = df[df["id"].astype(str).isin(set(sample["id"]))]
    p = predict_frame(df, name, intervals=False)
    if name.startswith("inference"):
        from dse.infer.predict_rows import measured_system_tok_s
        got = np.log(p["predicted_output_tok_s"].astype(float) / measured_system_tok_s(p))
    else:
        got = np.log(p["predicted_iter_time_s"].astype(float) / p["measured_iter_time_s"].astype(float))
    got = pd.Series(got.to_numpy(), index=p["id"].astype(str))
    want = sample.set_index("id")["residual"]
    assert len(want) >= 5
    stale = {i: (want[i], got[i]) for i in want.index if not abs(want[i] - got[i]) < 0.01}
    assert not stale, f"stale interval fit, rerun scripts/fit_intervals.py: {stale}"


def test_band_math_and_fallback():
    q10, q90, basis = intervals.band_for("training", "megatron/hopper")
    assert basis.startswith("megatron/hopper (n=")
    cell, new = STORED["cells"]["training"]["megatron/hopper"], STORED["cells"]["training"]["new_source"]
    # never narrower than the new-source band (the cell's own spread is in sample)
    assert q10 == min(cell["q10"], new["q10"]) and q90 == max(cell["q90"], new["q90"])
    assert (q10, q90) != (cell["q10"], cell["q90"]) and "widened to the new-source spread" in basis
    lo, hi = intervals.apply_band(10.0, q10, q90)
    assert lo == pytest.approx(10 * np.exp(-q90)) and hi == pytest.approx(10 * np.exp(-q10))
    assert lo < 10.0 < hi
    q10o, q90o, basis = intervals.band_for("training", "fsdp/blackwell")
    assert (q10o, q90o) == (new["q10"], new["q90"])
    assert basis.startswith("new-source spread") and "not in the calibration files" in basis
    small = [c for c, v in STORED["cells"]["serving"].items() if v["n"] < intervals.MIN_ROWS]
    assert small
    assert f"< {intervals.MIN_ROWS}" in intervals.band_for("serving", small[0])[2]


def test_a_fit_without_the_new_source_band_falls_back_to_the_pooled_one(monkeypatch):
    cells = {"training": {"overall": {"n": 50, "q10": -0.1, "q90": 0.2},
                          "megatron/hopper": {"n": 20, "q10": -0.05, "q90": 0.3}}}
    monkeypatch.setattr(intervals, "load", lambda: cells)
    assert intervals.band_for("training", "megatron/hopper")[:2] == (-0.1, 0.3)
    q10, q90, basis = intervals.band_for("training", "fsdp/blackwell")
    assert (q10, q90) == (-0.1, 0.2) and basis.startswith("overall, n=50")


def _new(res, src):
    return intervals.new_source_quantiles(pd.Series(res, dtype=float), pd.Series(src))


def test_new_source_band_weighs_every_source_the_same():
    """Two sources without scatter inside either: the new run's residual is one source's
    mean or the other's with equal odds, however many rows each holds."""
    b = _new([0.2] * 1000 + [-0.3] * 3, ["big"] * 1000 + ["small"] * 3)
    assert (b["q10"], b["q90"]) == (-0.3, 0.2) and b["sources"] == 2 and b["n"] == 1003
    # one source: its own weighted quantiles (inverted CDF)
    r = np.linspace(-0.5, 0.5, 11)
    one = _new(r, ["s"] * 11)
    assert one["q10"] == pytest.approx(np.quantile(r, 0.1, method="inverted_cdf"))
    assert one["q90"] == pytest.approx(np.quantile(r, 0.9, method="inverted_cdf"))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcd"), st.floats(-2, 2)), min_size=1, max_size=40),
       st.integers(2, 4))
def test_new_source_band_properties(rows, k):
    """q10 <= q90, inside [min mean + min deviation, max mean + max deviation], and
    repeating every row of one source k times leaves the band unchanged (a source's
    weight does not grow with its row count)."""
    src, res = [s for s, _ in rows], [r for _, r in rows]
    b = _new(res, src)
    assert b["q10"] <= b["q90"]
    frame = pd.DataFrame({"s": src, "r": res})
    dev = frame["r"] - frame.groupby("s")["r"].transform("mean")
    means = frame.groupby("s")["r"].mean()
    assert means.min() + dev.min() - 1e-6 <= b["q10"] and b["q90"] <= means.max() + dev.max() + 1e-6
    first = src[0]
    rep = frame[frame.s == first]
    more = pd.concat([frame] + [rep] * (k - 1), ignore_index=True)
    b2 = _new(more["r"], more["s"])
    assert b2["q10"] == pytest.approx(b["q10"], abs=2e-6) and b2["q90"] == pytest.approx(b["q90"], abs=2e-6)


def test_predict_rows_carry_the_band():
    out = predict_frame(pd.DataFrame([ROW, dict(ROW, gpu="b200")]), "t.csv")
    assert (out.predicted_iter_time_lo_s < out.predicted_iter_time_s).all()
    assert (out.predicted_iter_time_s < out.predicted_iter_time_hi_s).all()
    assert out.interval_basis[0].startswith("megatron/ampere")
    assert out.interval_basis[1].startswith("new-source spread")


def test_compare_frame_carries_the_band():
    from dse.comparison import compare_frame
    from tests.helpers import h100, llama70b
    df = compare_frame(llama70b(), [h100()], [64], 256, 2048)
    r = df.iloc[0]
    assert r.status == "ok" and r.step_time_lo_s < r.step_time_s < r.step_time_hi_s
    assert r.mem_weights_gib > 0 and "megatron/hopper" in r.interval_basis


def test_validate_reports_coverage(tmp_path, capsys):
    f = tmp_path / "runs.csv"
    pd.DataFrame([ROW, dict(ROW, id=2, measured_iter_time_s=100.0)]).to_csv(f, index=False)
    from dse.validate import run_validation
    pred = run_validation(str(f), str(tmp_path / "out"))
    out = capsys.readouterr().out
    assert "interval coverage: " in out and "in_band" in out and "bias" in out
    assert "above (slower than hi)" in out
    from dse.validate import coverage_table
    cov = coverage_table(pred)
    assert cov.loc["overall", "rows"] == 2 and cov.loc["overall", "above"] >= 0.5   # 100 s row
    t = pd.read_csv(tmp_path / "out" / "mape_by_source.csv", index_col=0)
    assert t.loc["overall", "in_band"] <= 0.5
    assert {"predicted_iter_time_lo_s", "predicted_mem_activations_gib"} <= set(pred.columns)


def test_validation_plots_label_axes_and_show_the_band(tmp_path, monkeypatch):
    """bias_by_source / scatter / error_breakdown: signed error on linear axes with units,
    legends and titles, each row's interval drawn."""
    from dse.report import validation_plots as vp
    figs = []
    monkeypatch.setattr(vp, "save_fig", lambda fig, path, dpi=130, **kw: figs.append(fig))
    monkeypatch.setattr(vp.plt, "close", lambda fig: None)
    pred = predict_frame(pd.DataFrame([ROW, dict(ROW, id=2, source="U", measured_iter_time_s=5.0)]), "t")
    pred["error"] = (pred["predicted_iter_time_s"] - pred["measured_iter_time_s"]) / pred["measured_iter_time_s"]
    vp.bias_by_source(pred, tmp_path / "b.png")
    vp.scatter(pred, tmp_path / "s.png")
    vp.error_breakdown(pred, tmp_path / "e.png")
    assert len(figs) == 3
    for fig in figs:
        for ax in fig.axes:
            assert ax.get_xlabel() or ax.get_xticklabels()
            assert "(%)" in ax.get_ylabel() or "(s)" in ax.get_ylabel()
            assert ax.get_title() and ax.get_legend() is not None
    bias_ax = figs[0].axes[0]
    assert bias_ax.get_yscale() == "linear" and "signed error" in bias_ax.get_ylabel()
    assert figs[1].axes[1].get_yscale() == "linear"
    assert any("interval" in t.get_text() for t in bias_ax.get_legend().get_texts())
