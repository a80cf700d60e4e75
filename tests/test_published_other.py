"""Published measurements *outside* the calibration set, never used to choose a constant
(tests/data/published_other.csv says where each comes from).  They check that the model
generalises beyond the rows it was calibrated on."""

from pathlib import Path

import pytest

from dse.predict import predict_frame, read_csv

CSV = Path(__file__).parent / "data" / "published_other.csv"


@pytest.mark.validation
def test_out_of_sample_iteration_times_within_10_percent():
    p = predict_frame(read_csv(str(CSV)), str(CSV))
    assert (p["status"] == "ok").all()
    err = (p["predicted_iter_time_s"] / p["measured_iter_time_s"] - 1).abs()
    assert (err <= 0.10).all(), dict(zip(p["id"], err.round(3)))


@pytest.mark.validation
def test_out_of_sample_peak_memory_within_10_percent():
    """BLOOM-176B's ~60 GB per GPU, with the framework it ran (Megatron-DeepSpeed)."""
    p = predict_frame(read_csv(str(CSV)), str(CSV))
    m = p.dropna(subset=["measured_mem_gib"])
    assert len(m) >= 1
    err = (m["predicted_mem_gib"] / m["measured_mem_gib"] - 1).abs()
    assert (err <= 0.10).all(), dict(zip(m["id"], err.round(3)))
