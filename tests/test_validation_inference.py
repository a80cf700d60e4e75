"""The published serving measurements (../shared/validation/inference/calibration.csv):
every row predicted or explained, and regression guards on the error.

Run alone with ``pytest -m validation``.  The bounds are REGRESSION GUARDS set a little
above the error this revision reaches (docs/accuracy.md, "Serving"), not the issue's
acceptance bounds (row-mean <= 12 %, each metric <= 20 %), which are not met yet.
"""


import pytest

from dse.infer.predict_rows import error_tables
from dse.predict import read_csv
from tests.helpers import predicted_or_skip, validation_dir

CSV = validation_dir() / "inference" / "calibration.csv"
ROW_MEAN_REGRESSION_GUARD = 0.14
METRIC_REGRESSION_GUARD = {"output_tok_s": 0.12, "ttft_ms": 0.24, "tpot_ms": 0.28,
                           "e2e_latency_ms": 0.17}


@pytest.fixture(scope="module")
def predictions():
    return predicted_or_skip(CSV)


@pytest.mark.validation
def test_every_serving_row_predicted(predictions):
    assert len(predictions) == len(read_csv(str(CSV)))
    assert predictions["status"].str.startswith("ok").all(), \
        predictions.loc[~predictions["status"].str.startswith("ok"), ["id", "status"]].values.tolist()


@pytest.mark.validation
def test_serving_row_mean_regression_guard(predictions):
    *_, overall = error_tables(predictions)
    assert overall["row_mape"] <= ROW_MEAN_REGRESSION_GUARD, overall


@pytest.mark.validation
@pytest.mark.parametrize("metric", sorted(METRIC_REGRESSION_GUARD))
def test_serving_metric_regression_guard(predictions, metric):
    _, by_m, _, _ = error_tables(predictions)
    assert by_m.loc[metric, "mape"] <= METRIC_REGRESSION_GUARD[metric], by_m.to_string()
