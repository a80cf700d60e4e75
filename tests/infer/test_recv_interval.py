"""SGLang's ``--scheduler-recv-interval N`` and ``--num-continuous-decode-steps N``: the scheduler receives new requests only every N
decode passes, so a request arriving during decode waits N / 2 decode iterations on average
for its prefill (dse.infer.engines.EngineProfile.recv_interval / poll_iterations)."""

import pandas as pd
import pytest

from dse.infer.engines import PROFILES
from dse.predict import predict_frame


def _row(**k):
    base = dict(id="r", model="deepseek-ai/DeepSeek-R1", hardware="b200", gpus=8, tp=8, pp=1,
                precision="fp8", engine="sglang 0.5.9", scenario="concurrency", batch_or_concurrency=16,
                input_len=1024, output_len=1024, notes="--random-range-ratio 0.8")
    base.update(k)
    return base


def test_profiles_poll_every_iteration_by_default():
    assert all(p.recv_interval == 1 for p in PROFILES.values())
    assert PROFILES["sglang_overlap"].poll_iterations == 1


@pytest.mark.parametrize("n", [10, 30])
def test_recv_interval_adds_half_its_decode_iterations_to_ttft_only(n):
    p = predict_frame(pd.DataFrame([
        _row(id="base"),
        _row(id="skip", notes=f"--random-range-ratio 0.8; launch --scheduler-recv-interval {n}")]),
        "rows.csv").set_index("id")
    b, s = p.loc["base"], p.loc["skip"]
    assert s.status == "ok" and b.status == "ok"
    assert s.predicted_tpot_ms == pytest.approx(b.predicted_tpot_ms)
    # 0.5 (n - 1) more mean iterations before the prompt's pass
    assert s.predicted_ttft_ms - b.predicted_ttft_ms == pytest.approx(0.5 * (n - 1) * b.predicted_tpot_ms,
                                                                     rel=0.02)


@pytest.mark.parametrize("bad", ["--scheduler-recv-interval 0", "--scheduler-recv-interval x",
                                 "--scheduler-recv-interval 10 --scheduler_recv_interval 30"])
def test_a_bad_recv_interval_is_the_rows_invalid_status(bad):
    p = predict_frame(pd.DataFrame([_row(notes=bad)]), "rows.csv")
    assert p.status[0].startswith("invalid: notes:"), p.status[0]
    assert "recv" in p.status[0]


def test_continuous_decode_steps_are_scheduler_steps_and_wait_like_multi_step():
    p = predict_frame(pd.DataFrame([
        _row(id="base"),
        _row(id="steps", notes="--random-range-ratio 0.8; launch --num-continuous-decode-steps=4"),
        _row(id="both", notes="--random-range-ratio 0.8; --num-continuous-decode-steps 4 "
                              "--scheduler-recv-interval 10")]), "rows.csv").set_index("id")
    b, s, both = p.loc["base"], p.loc["steps"], p.loc["both"]
    assert s.predicted_ttft_ms - b.predicted_ttft_ms == pytest.approx(1.5 * b.predicted_tpot_ms, rel=0.05)
    # one look at the queue every 4 x 10 decode passes
    assert both.predicted_ttft_ms - b.predicted_ttft_ms == pytest.approx(19.5 * b.predicted_tpot_ms,
                                                                        rel=0.05)
