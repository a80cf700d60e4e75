"""Concurrency sweeps split into a fixed per-step TPOT and a per-request slope
(dse.infer.tpot_sweeps), and `dse validate` reporting them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from dse.infer.tpot_sweeps import COLUMNS, sweep_summary, tpot_sweeps

DATA = Path(__file__).parents[1] / "data"


def _row(c, meas, pred, **kw):
    return {"id": f"r{c}-{kw.get('hardware', 'h100-sxm-80gb')}", "source_id": "s",
            "model": "m", "hardware": "h100-sxm-80gb", "precision": "fp8", "engine": "vllm",
            "gpus": 8, "tp": 8, "pp": 1, "input_len": 1024, "output_len": 1024,
            "scenario": "concurrency", "batch_or_concurrency": c, "status": "ok",
            "measured_tpot_ms": meas, "predicted_tpot_ms": pred, **kw}


def test_a_line_is_recovered_and_the_summary_says_which_part_is_short():
    cs = [4, 8, 16, 32, 64]
    rows = [_row(c, 10.0 + 0.5 * c, 7.0 + 0.6 * c) for c in cs]
    # a second sweep on other hardware: the model's fixed part above, its slope below
    rows += [_row(c, 5.0 + 0.2 * c, 6.0 + 0.1 * c, hardware="mi300x") for c in cs]
    s = tpot_sweeps(pd.DataFrame(rows))
    assert list(s.columns) == COLUMNS and len(s) == 2
    h = s.set_index("hardware")
    assert h.loc["h100-sxm-80gb", "fixed_ms_measured"] == pytest.approx(10.0)
    assert h.loc["h100-sxm-80gb", "fixed_ms_predicted"] == pytest.approx(7.0)
    assert h.loc["h100-sxm-80gb", "slope_ms_measured"] == pytest.approx(0.5)
    assert h.loc["mi300x", "slope_ms_predicted"] == pytest.approx(0.1)
    assert (s["points"] == 5).all() and (s["c_min"] == 4).all() and (s["c_max"] == 64).all()
    text = sweep_summary(s)
    # fixed gaps -3 and +1 ms: median -1; slopes +20 % and -50 %: median -15 %
    assert text.startswith("2 concurrency sweep(s)") and "1.00 ms below the measured" in text
    assert "the smaller in 1 of 2" in text and "slope 15% below" in text


def test_rows_that_cannot_be_fitted_are_left_out():
    rows = [_row(4, 10.0, 8.0), _row(8, 12.0, 9.0),
            _row(16, np.nan, 9.5),                              # no measured TPOT
            _row(32, float("inf"), 9.5), _row(64, -1.0, 9.5),   # not a finite number > 0
            _row(128, 40.0, np.nan, status="out of memory: needs 90 GiB"),
            _row(256, 50.0, 30.0, scenario="offline_throughput"),
            _row(4, 9.0, 8.0, model="other")]                   # a sweep of one concurrency
    s = tpot_sweeps(pd.DataFrame(rows))
    assert len(s) == 1 and s.iloc[0]["points"] == 2
    assert s.iloc[0]["slope_ms_measured"] == pytest.approx(0.5)   # (12 - 10) / (8 - 4)
    assert sweep_summary(tpot_sweeps(pd.DataFrame(rows[:1]))).startswith("no concurrency sweep")
    assert tpot_sweeps(pd.DataFrame([{"id": 1, "status": "ok"}])).empty   # training-like frame


@settings(max_examples=40, deadline=None)
@given(a=st.floats(0.1, 100.0), b=st.floats(0.0, 5.0),
       cs=st.lists(st.integers(1, 4096), min_size=2, max_size=12, unique=True))
def test_the_fit_of_an_exact_line_is_that_line(a, b, cs):
    rows = [_row(c, a + b * c, 2.0 * a + b * c) for c in cs]
    s = tpot_sweeps(pd.DataFrame(rows)).iloc[0]
    assert s["fixed_ms_measured"] == pytest.approx(a, rel=1e-6, abs=1e-6 * (1 + b * max(cs)))
    assert s["slope_ms_measured"] == pytest.approx(b, rel=1e-6, abs=1e-9 * (1 + a))
    assert s["fixed_ms_predicted"] - s["fixed_ms_measured"] == pytest.approx(
        a, rel=1e-6, abs=1e-6 * (1 + b * max(cs)))


def test_validate_writes_and_prints_the_sweeps(tmp_path, capsys):
    """Three measured InferenceX points of one MI300X sweep, through `dse validate`."""
    from dse.cli import main
    rows = pd.read_csv(DATA / "published_serving.csv")
    sweep = rows[rows["id"].isin(["o244", "o245", "o246"])]
    f = tmp_path / "sweep.csv"
    sweep.to_csv(f, index=False)
    assert main(["validate", str(f), "--out", str(tmp_path / "v")]) in (0, None)
    out = capsys.readouterr().out
    assert "TPOT of each concurrency sweep" in out and "1 concurrency sweep(s)" in out
    s = pd.read_csv(tmp_path / "v" / "tpot_sweeps.csv")
    assert len(s) == 1 and s.loc[0, "points"] == 3 and s.loc[0, "hardware"] == "mi300x"
    pred = pd.read_csv(tmp_path / "v" / "predictions.csv")
    b, a = np.polyfit(pred["batch_or_concurrency"], pred["measured_tpot_ms"], 1)
    assert s.loc[0, "fixed_ms_measured"] == pytest.approx(a) and s.loc[0, "slope_ms_measured"] == pytest.approx(b)
    b, a = np.polyfit(pred["batch_or_concurrency"], pred["predicted_tpot_ms"], 1)
    assert s.loc[0, "fixed_ms_predicted"] == pytest.approx(a)
    assert s.loc[0, "ids"] == "o244;o245;o246"
    for png in ("scatter.png", "bias_by_source.png", "tpot_sweeps.png"):
        assert (tmp_path / "v" / png).stat().st_size > 10_000, png


def test_serving_plots_label_their_axes_with_units(monkeypatch):
    """Every panel of the three serving validation plots has axis labels with units, a title
    and a legend (on the figure for the scatter's shared one)."""
    from dse.report import serving_validation_plots as svp
    figs = []
    monkeypatch.setattr(svp, "save_fig", lambda fig, path, dpi=130, **kw: figs.append(fig))
    monkeypatch.setattr(svp.plt, "close", lambda fig: None)
    cs = [4, 8, 16]
    pred = pd.DataFrame([_row(c, 10.0 + 0.5 * c, 7.0 + 0.6 * c) for c in cs])
    errors = pd.DataFrame([{"id": r["id"], "source": "s", "metric": m, "measured": v, "predicted": v * 1.1,
                            "error": 0.1} for r in pred.to_dict("records")
                           for m, v in (("tpot_ms", r["measured_tpot_ms"]), ("output_tok_s", 100.0))])
    svp.scatter(errors, "results/x.png")
    svp.bias_by_source(errors, "results/x.png")
    svp.tpot_sweeps_plot(pred, tpot_sweeps(pred), "results/x.png")
    assert len(figs) == 3
    scatter_fig, bias_fig, sweep_fig = figs
    assert scatter_fig.legends and [ax.get_xscale() for ax in scatter_fig.axes] == ["log", "log"]
    for ax in scatter_fig.axes:
        assert "measured" in ax.get_xlabel() and "predicted" in ax.get_ylabel() and ax.get_title()
    assert "(ms)" in scatter_fig.axes[1].get_ylabel() and "tokens/s" in scatter_fig.axes[0].get_ylabel()
    ax = bias_fig.axes[0]
    assert ax.get_yscale() == "linear" and "(%)" in ax.get_ylabel() and ax.get_legend() is not None
    ax = sweep_fig.axes[0]
    assert ax.get_xlabel() == "requests in flight" and ax.get_ylabel() == "TPOT (ms)"
    assert ax.get_legend() is not None and sweep_fig._suptitle.get_text()
