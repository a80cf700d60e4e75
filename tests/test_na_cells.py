"""A cell written as a missing-value word ("nan", "NA", "null") is refused per row, not read
as blank (dse.na_cells): the row gets ``invalid: <column>: ...``, every other row is
predicted, and a free-text column may say "None"."""

import pandas as pd

from dse.predict import predict_frame, read_csv


def _write(tmp_path, src, edits):
    df = pd.read_csv(src, dtype=str, keep_default_na=False).head(3)
    for (i, col), text in edits.items():
        df.loc[i, col] = text
    p = tmp_path / "rows.csv"
    df.to_csv(p, index=False)
    return str(p)


def test_serving_row_with_nan_word_is_invalid(tmp_path):
    p = _write(tmp_path, "tests/data/published_serving.csv",
               {(1, "gpus"): "nan", (2, "notes"): "None"})
    out = predict_frame(read_csv(p), p)
    assert out.loc[1, "status"].startswith("invalid: gpus:") and "'nan'" in out.loc[1, "status"]
    assert out.loc[0, "status"] == "ok" and out.loc[2, "status"] == "ok"


def test_training_row_with_na_word_is_invalid(tmp_path):
    p = _write(tmp_path, "tests/data/published_nemo.csv", {(0, "num_kv_heads"): "NA"})
    out = predict_frame(read_csv(p), p, intervals=False)
    assert out.loc[0, "status"].startswith("invalid: num_kv_heads:")
    assert not out.loc[1, "status"].startswith("invalid")
