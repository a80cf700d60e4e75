"""The published-measurement suite: the whole calibration set, MAPE bounds.

Run alone with ``pytest -m validation``.  Bounds are the project's acceptance bounds
(issue: overall iteration-time MAPE <= 8 %); the per-source bound is checked for the
sources the model is expected to meet (see docs/accuracy.md for the known limits).
"""

from pathlib import Path

import pandas as pd
import pytest

from dse.predict import mape_table, predict_frame, read_csv
from tests.helpers import predicted_or_skip, validation_dir

CSV = validation_dir() / "calibration.csv"
OVERALL_MAPE_BOUND = 0.08


@pytest.fixture(scope="module")
def predictions():
    return predicted_or_skip(CSV)


@pytest.mark.validation
def test_every_row_predicted_or_explained(predictions):
    assert len(predictions) == len(read_csv(str(CSV)))
    assert predictions["status"].notna().all()
    assert (predictions["status"] == "ok").all(), predictions.loc[predictions["status"] != "ok", "status"].tolist()


@pytest.mark.validation
def test_overall_mape_bound(predictions):
    t = mape_table(predictions)
    assert t.loc["overall", "mape"] <= OVERALL_MAPE_BOUND, t.to_string()


@pytest.mark.validation
@pytest.mark.parametrize("source", ["S1", "S3", "S4", "S9"])
def test_per_source_mape_bound(predictions, source):
    t = mape_table(predictions)
    assert t.loc[source, "mape"] <= 0.12, t.to_string()


@pytest.mark.validation
def test_pre_flashattention_rows_with_unfused_attention(predictions):
    """Clearly separated from the headline: S1 (Narayanan et al., SC'21) ran Megatron-LM
    in 2021, before FlashAttention existed (Dao et al., May 2022), and the file's
    ``attention`` column says ``unfused``.  With that column the rows must be within 6 %,
    and better than the same rows forced to FlashAttention (the column must matter)."""
    df = read_csv(str(CSV))
    s1 = df[df["source"] == "S1"]
    assert (s1["attention"] == "unfused").all(), s1["attention"].tolist()
    told = predictions[predictions["source"] == "S1"]
    err = (told["predicted_iter_time_s"] / told["measured_iter_time_s"] - 1).abs()
    assert err.mean() <= 0.06, err.round(3).tolist()
    forced = s1.copy()
    forced["attention"] = "flash"
    p = predict_frame(forced, str(CSV))
    flash_err = (p["predicted_iter_time_s"] / p["measured_iter_time_s"] - 1).abs()
    assert err.mean() < flash_err.mean(), (err.mean(), flash_err.mean())


@pytest.mark.validation
def test_bloom_probe_memory_with_their_framework(predictions):
    """Clearly separated from the headline: the rows that publish memory (S12) ran
    Megatron-DeepSpeed, whose bf16 optimizer keeps 16-bit grads and an fp32 gradient
    buffer; the file's ``framework`` column says so (and agrees with
    tests/data/calibration_run_facts.csv).  With that column peak memory must be within
    the issue's 10 %, and better than the same rows under Megatron's accounting."""
    facts = pd.read_csv(Path(__file__).parent / "data" / "calibration_run_facts.csv").set_index("source")
    df = read_csv(str(CSV))
    mem_rows = df[df["measured_mem_gib"].notna()]
    assert (mem_rows["framework"] == mem_rows["source"].map(facts["framework"])).all()
    told = predictions[predictions["measured_mem_gib"].notna()]
    err = (told["predicted_mem_gib"] / told["measured_mem_gib"] - 1).abs()
    assert err.mean() <= 0.10, err.round(3).tolist()
    forced = mem_rows.copy()
    forced["framework"] = "megatron"
    p = predict_frame(forced, str(CSV))
    megatron_err = (p["predicted_mem_gib"] / p["measured_mem_gib"] - 1).abs()
    assert err.mean() < megatron_err.mean(), (err.mean(), megatron_err.mean())
