"""A row whose benchmark client draws lengths with ``--random-range-ratio r`` < 1 is predicted at
the mean lengths with their spread, not as a fixed-length closed loop
(dse.infer.predict_rows.range_ratio)."""

import pandas as pd
import pytest
from hypothesis import given, strategies as st

from dse.infer.predict_rows import uniform_o2
from dse.predict import predict_frame


def _row(**k):
    base = dict(id="r", model="llama3-70b", hardware="h200-sxm-141gb", gpus=8, tp=8, pp=1, precision="fp8",
                engine="sglang 0.5.9", scenario="concurrency", batch_or_concurrency=32, input_len=1024,
                output_len=1024)
    base.update(k)
    return base


@given(st.floats(0.01, 1.0))
def test_uniform_spread_is_the_second_moment_of_the_uniform_draw(r):
    """E[x^2] / E[x]^2 for x uniform in [r, 1]: ((1 + r + r^2) / 3) / ((1 + r) / 2)^2, and the
    midpoint rule over a fine grid agrees."""
    exact = (1 + r + r * r) / 3 / ((1 + r) / 2) ** 2
    assert uniform_o2(r) == pytest.approx(exact, rel=1e-12)
    n = 4000
    x = [r + (1 - r) * (i + 0.5) / n for i in range(n)]
    assert uniform_o2(r) == pytest.approx(sum(v * v for v in x) / n / (sum(x) / n) ** 2, rel=1e-6)
    assert uniform_o2(1.0) == 1.0 and uniform_o2(r) >= 1.0


def test_a_range_ratio_below_one_predicts_the_mean_lengths_and_one_keeps_fixed_lengths():
    p = predict_frame(pd.DataFrame([_row(id="fixed"), _row(id="one", notes="--random-range-ratio 1"),
                                    _row(id="r08", notes="bench_serving --random-range-ratio 0.8 --ignore-eos"),
                                    _row(id="mean", input_len=922, output_len=922, dataset="ShareGPT")]),
                      "rows.csv").set_index("id")
    assert p.loc["one", "predicted_tpot_ms"] == p.loc["fixed", "predicted_tpot_ms"]
    assert (p.loc["r08", "chosen_input_len"], p.loc["r08", "chosen_output_len"]) == (921.6, 921.6)
    # variable lengths stagger: no lockstep prefill burst in the first token
    assert p.loc["r08", "predicted_ttft_ms"] < p.loc["fixed", "predicted_ttft_ms"]


@pytest.mark.parametrize("bad", ["--random-range-ratio 0", "--random-range-ratio 1.5",
                                 "--random-range-ratio abc", "--random-range-ratio 0.5 --random-range-ratio 0.8"])
def test_a_bad_range_ratio_is_the_rows_invalid_status(bad):
    p = predict_frame(pd.DataFrame([_row(notes=bad)]), "rows.csv")
    assert p.status[0].startswith("invalid: notes: --random-range-ratio must be")


@pytest.mark.parametrize("text,flagged", [("sglang 0.5.9 --speculative-algorithm EAGLE", True),
                                          ("trtllm 1.1 (MTP3)", True), ("vllm 0.11 ngram", True),
                                          ("trtllm 1.1 (spec decoding off)", False), ("no MTP", False),
                                          ("sglang 0.5.9", False)])
def test_a_speculative_decoding_row_is_predicted_and_says_it_is_not_modelled(text, flagged):
    p = predict_frame(pd.DataFrame([_row(engine=text if "sglang" in text or "vllm" in text or "trtllm" in text
                                         else "sglang 0.5.9", notes="" if "sglang" in text else text)]),
                      "rows.csv")
    assert p.predicted_tpot_ms[0] > 0
    assert ("speculative decoding" in p.status[0]) == flagged
    assert p.status[0].startswith("ok")
