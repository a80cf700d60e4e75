"""The HTTP front end a served request crosses (``EngineProfile.frontend_s``, vLLM V1's
OpenAI server): once on the way in and once with its tokens out, so TTFT and e2e carry it
once, TPOT not at all, and a closed loop's client holds its slot that much longer."""

from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from dse.infer.engines import PROFILES, VLLM_V1_FRONTEND_S, engine_profile, launch_defaults
from dse.infer.lockstep import staggered_concurrency, staggered_one_wave
from dse.infer.predict_rows import predict_inference_row
from dse.infer.serving import Deployment, concurrency, poisson
from dse.spec.hardware import get_hardware
from dse.spec.model import get_model

H100 = get_hardware("h100-sxm-80gb")
MODEL = get_model("llama3-70b")


def _pair(text="vllm 0.13.0"):
    """The same deployment with and without the front end."""
    eng = launch_defaults(engine_profile(text)[0], text, float(H100.hbm_bytes), H100.name,
                          "concurrency", 4, 1, MODEL)
    on = Deployment(MODEL, H100, eng, 4, 1, 2, 1.0)
    return on, on._replace(engine=replace(eng, frontend_s=0.0))


def test_only_vllm_v1_servers_have_a_front_end():
    assert PROFILES["vllm_v1"].frontend_s == PROFILES["vllm_v1_async"].frontend_s == VLLM_V1_FRONTEND_S
    assert all(p.frontend_s == 0.0 for n, p in PROFILES.items() if not n.startswith("vllm_v1"))


@pytest.mark.parametrize("text,scenario,front", [
    ("vllm 0.13.0", "concurrency", VLLM_V1_FRONTEND_S),
    ("vllm 0.13.0", "poisson_rate", VLLM_V1_FRONTEND_S),
    ("vllm 0.13.0 (benchmark_throughput)", "offline_throughput", 0.0),   # the offline LLM class
    ("vllm 0.13.0", "latency", 0.0),
    ("vllm (0.9.0.2.dev108 ROCm, AMD MLPerf harness)", "poisson_rate", 0.0),   # LoadGen in-process
    ("vllm 0.6.0", "concurrency", 0.0)])                                  # V0: no measurement
def test_front_end_follows_how_the_engine_is_reached(text, scenario, front):
    eng = launch_defaults(engine_profile(text)[0], text, float(H100.hbm_bytes), H100.name,
                          scenario, 4, 1, MODEL)
    assert eng.frontend_s == front


@settings(max_examples=25, deadline=None)
@given(n=st.sampled_from([1.0, 4.0, 16.0, 64.0]), S=st.integers(128, 8192), O=st.integers(2, 2048))
def test_closed_loop_carries_the_front_end_once(n, S, O):
    """Below the slots: TTFT and e2e longer by exactly the front end, TPOT unchanged,
    tokens/s lower by the longer time each client holds its slot.  Above them the queue
    wait is Little's law on that client cycle: longer by the front end times ``n / B``."""
    on, off = _pair()
    a, b = concurrency(on, n, S, O, 1, spread=True), concurrency(off, n, S, O, 1, spread=True)
    f = on.engine.frontend_s
    scale = max(n / b.batch, 1.0)
    assert a.ttft_s - b.ttft_s == pytest.approx(f * scale, rel=1e-6)
    assert a.e2e_s - b.e2e_s == pytest.approx(f * scale, rel=1e-6)
    assert a.tpot_s == b.tpot_s
    run_b, run_a = b.e2e_s / scale, a.e2e_s / scale      # a request's own cycle, unqueued
    assert a.tokens_per_s == pytest.approx(b.tokens_per_s * run_b / run_a, rel=1e-9)


@pytest.mark.parametrize("wave", [staggered_concurrency, staggered_one_wave])
def test_fixed_length_waves_carry_the_front_end(wave):
    on, off = _pair()
    a, b = wave(on, 16.0, 1024.0, 256.0, 1), wave(off, 16.0, 1024.0, 256.0, 1)
    f = on.engine.frontend_s
    assert a.ttft_s - b.ttft_s == pytest.approx(f)
    assert a.e2e_s - b.e2e_s == pytest.approx(f)
    assert a.tpot_s == pytest.approx(b.tpot_s)
    assert a.tokens_per_s < b.tokens_per_s


def test_open_loop_throughput_is_the_arrival_rate():
    on, off = _pair()
    a, b = poisson(on, 2.0, 1024.0, 256.0, 1), poisson(off, 2.0, 1024.0, 256.0, 1)
    assert a.ttft_s - b.ttft_s == pytest.approx(on.engine.frontend_s)
    assert a.tokens_per_s == b.tokens_per_s == pytest.approx(2.0 * 256.0)


def test_a_row_through_the_server_is_slower_to_its_first_token_than_the_offline_class():
    row = {"model": "llama3-70b", "hardware": "h100-sxm-80gb", "gpus": 4, "tp": 4,
           "precision": "bf16", "scenario": "poisson_rate", "request_rate": 1.0,
           "input_len": 1024, "output_len": 128}
    served = predict_inference_row({**row, "engine": "vllm 0.13.0"})
    harness = predict_inference_row({**row, "engine": "vllm 0.13.0 (MLPerf harness)"})
    gap_ms = served["predicted_ttft_ms"] - harness["predicted_ttft_ms"]
    assert gap_ms == pytest.approx(VLLM_V1_FRONTEND_S * 1e3, rel=1e-6)
    assert served["predicted_tpot_ms"] == pytest.approx(harness["predicted_tpot_ms"])
