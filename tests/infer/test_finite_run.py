"""A finite benchmark run's start-up burst (dse.infer.finite_run): the first min(N, P)
requests of a closed loop arrive at once and queue behind each other's prefill; all P
queued at once wait for slots.  A run long against its burst keeps the steady state.
The drain at a closed loop's end (random lengths) costs throughput."""

import math

import numpy as np
import pytest

from dse.errors import InputError
from dse.infer.engines import PROFILES, engine_profile
from dse.infer.finite_run import closed_loop_run, drain_factor, num_prompts, queued_run
from dse.infer.lockstep import (lockstep_concurrency, pass_tokens, staggered_one_wave, wave_cap,
                                wave_prefill)
from dse.infer.predict_rows import all_queued, uniform_o2
from dse.infer.serving import Deployment, concurrency, offline
from dse.spec.hardware import get_hardware
from dse.spec.model import get_model

DEP = Deployment(get_model("llama3-70b"), get_hardware("h100-sxm-80gb"),
                 engine_profile("vllm 0.10.0")[0], 4, 1, 2, 1.0)
S, O = 2048.0, 512.0


def _steady(n):
    return concurrency(DEP, n, S, O, 1, spread=True)


@pytest.mark.parametrize("text,P", [
    ("bench_serving --num-prompts 500 --max-concurrency 64", 500),
    ("--num_prompts=40", 40), ("no flag here", None),
    ("the runner is not recorded, so --num-prompts is 3200 or 640", None)])
def test_num_prompts_is_read_from_the_client_flags(text, P):
    assert num_prompts({"engine": "vllm", "notes": text, "dataset": ""}) == P


@pytest.mark.parametrize("text", ["--num-prompts 0", "--num-prompts 12x", "--num-prompts 10 --num-prompts 20"])
def test_bad_num_prompts_is_refused(text):
    with pytest.raises(InputError) as e:
        num_prompts({"engine": "", "notes": text})
    assert e.value.field == "notes"


def test_one_wave_run_is_the_burst():
    """P = N: every request is in the start-up burst, so the mean TTFT is the wave's
    prefill behind the HTTP front end (vLLM V1's OpenAI server: ``frontend_s``)."""
    n = 64.0
    res = _steady(n)
    burst, _ = wave_prefill(DEP, n, S, pass_tokens(DEP, S))
    burst += DEP.engine.frontend_s
    assert DEP.engine.frontend_s > 0
    run = closed_loop_run(res, DEP, n, 64, S, O, 1, None, "mean")
    assert run.ttft_s == pytest.approx(max(burst, res.ttft_s))
    assert run.ttft_s > res.ttft_s
    assert run.e2e_s - run.ttft_s == pytest.approx(res.e2e_s - res.ttft_s)    # decode unchanged
    assert run.tokens_per_s == res.tokens_per_s


def test_long_run_tends_to_the_steady_state():
    n = 64.0
    res = _steady(n)
    short = closed_loop_run(res, DEP, n, 128, S, O, 1, None, "mean")
    long = closed_loop_run(res, DEP, n, 10**7, S, O, 1, None, "mean")
    assert res.ttft_s < long.ttft_s < short.ttft_s
    assert long.ttft_s == pytest.approx(res.ttft_s, rel=0.01)


def test_median_ignores_a_minority_burst():
    """InferenceX sends 10 x N prompts and reports medians: the burst is a tenth of them."""
    res = _steady(16.0)
    assert closed_loop_run(res, DEP, 16.0, 160, S, O, 1, None, "median (p50)").ttft_s == res.ttft_s
    assert closed_loop_run(res, DEP, 16.0, 20, S, O, 1, None, "median").ttft_s > res.ttft_s


def test_unknown_run_length_keeps_the_steady_state():
    res = _steady(16.0)
    assert closed_loop_run(res, DEP, 16.0, None, S, O, 1, None, "mean") == res


def test_queued_run_waits_for_slots():
    """P requests queued at once: the first B start in a burst, request i > B waits
    (i - B) / r for a slot, a mean of (P - B)^2 / (2 P r)."""
    res = offline(DEP, S, O, 1)
    B = res.batch
    P = int(4 * B)
    r = res.tokens_per_s / O
    burst, _ = wave_prefill(DEP, B, S, pass_tokens(DEP, S))
    burst += DEP.engine.frontend_s
    run = queued_run(res, DEP, P, S, O, 1, None, "mean")
    expect = (B / P) * max(burst, res.ttft_s) + (1 - B / P) * res.ttft_s + (P - B) ** 2 / (2 * P * r)
    assert run.ttft_s == pytest.approx(expect)
    med = queued_run(res, DEP, P, S, O, 1, None, "median")
    assert med.ttft_s == pytest.approx(res.ttft_s + (P / 2 - B) / r)
    assert math.isclose(queued_run(res, DEP, None, S, O, 1, None, "mean").ttft_s, res.ttft_s)


def test_a_run_smaller_than_the_running_batch_is_one_wave():
    """P requests queued at once with P below what the KV cache and the engine admit: all of
    them run together and nothing follows, so the running batch is P (not the larger batch
    a full queue sustains) and the run is the one wave of P (lockstep on a prefill-first
    engine, staggered cohorts with no later ones on an in-flight batching engine); P above
    the wave cap is the queued steady state."""
    P = 100
    v0 = DEP._replace(engine=PROFILES["vllm"])
    assert P < wave_cap(v0, S, O) and not v0.engine.mixed_batches
    run = all_queued(v0, P, S, O, 1, None, "mean", 1.0, True)
    assert run.batch == P
    assert run == closed_loop_run(lockstep_concurrency(v0, P, S, O, 1), v0, P, P, S, O, 1,
                                  None, "mean")
    assert run.tokens_per_s < offline(v0, S, O, 1).tokens_per_s            # a smaller batch
    trt = DEP._replace(engine=engine_profile("trtllm")[0])
    one = all_queued(trt, P, S, O, 1, None, "mean", 1.0, True)
    assert one.batch == P and one.tpot_s == staggered_one_wave(trt, P, S, O, 1).tpot_s
    # a prefill-first engine's wave holds the final footprint S + O: a run above that
    # (though below the staggered cap) queues
    S2 = O2 = 8192.0                                   # long requests: the KV cache binds
    over = int(wave_cap(v0, S2, O2, final=True)) + 1
    assert over <= wave_cap(v0, S2, O2)
    assert all_queued(v0, over, S2, O2, 1, None, "mean", 1.0, True) == queued_run(
        offline(v0, S2, O2, 1), v0, over, S2, O2, 1, None, "mean")
    big = int(4 * wave_cap(DEP, S, O))
    assert all_queued(DEP, big, S, O, 1, None, "mean", 1.0, True) == queued_run(
        offline(DEP, S, O, 1), DEP, big, S, O, 1, None, "mean")
    # lengths drawn from a dataset, or the run length unknown: the queued steady state
    assert all_queued(DEP, P, S, O, 1, None, "mean", 1.2, False) == queued_run(
        offline(DEP, S, O, 1, o2=1.2), DEP, P, S, O, 1, None, "mean")
    assert all_queued(DEP, None, S, O, 1, None, "mean", 1.0, True) == offline(DEP, S, O, 1)


def _simulated_drain(n, P, O_max, r, tpot, ttft, trials, rng):
    """Closed loop from one shared queue: ``n`` slots start together, each takes the next
    request when its last one ends; a request lasts ``ttft + (O - 1) tpot`` with ``O``
    uniform in ``[r O_max, O_max]``.  Mean over trials of (steady ``n O / e``) over the
    run's ``P O / duration``, inverted: the throughput factor the drain leaves."""
    out = []
    for _ in range(trials):
        dur = ttft + (rng.uniform(r * O_max, O_max, P) - 1.0) * tpot
        free = np.zeros(n)
        for d in dur:
            i = int(np.argmin(free))
            free[i] += d
        out.append((dur.sum() / n) / free.max())
    return float(np.mean(out))


def test_drain_factor_bounds_a_simulated_closed_loop():
    """The drain (dse.infer.finite_run.drain_factor) against a simulated shared-queue closed
    loop at InferenceX's settings (range ratio 0.8, 10 or 50 requests per slot): never
    above the simulation's factor (it bounds the loss from above) and within 3 % of it."""
    rng = np.random.default_rng(2)
    r, O, tpot, ttft = 0.8, 1024, 0.02, 0.1
    o2 = uniform_o2(r)
    Om = O * (1 + r) / 2
    e = ttft + (Om - 1) * tpot
    for n, k in ((4, 10), (16, 10), (64, 10), (4, 50)):
        sim = _simulated_drain(n, n * k, O, r, tpot, ttft, 200, rng)
        f = drain_factor(n, n * k, Om, tpot, e, o2)
        assert f <= sim + 1e-3 and sim - f <= 0.03, (n, k, f, sim)


def test_no_drain_for_fixed_lengths_or_one_slot():
    assert drain_factor(64, 640, 1000.0, 0.02, 20.0, 1.0) == 1.0
    assert drain_factor(1, 40, 1000.0, 0.02, 20.0, uniform_o2(0.8)) == 1.0
    assert drain_factor(8, 80, 1000.0, 0.02, 20.0, uniform_o2(0.5)) < drain_factor(8, 80, 1000.0, 0.02, 20.0, uniform_o2(0.9))
    assert drain_factor(8, 80, 1000.0, float("nan"), 20.0, uniform_o2(0.8)) == 1.0   # no number, no drain


@pytest.mark.parametrize("cell,P", [(500, 500), ("500", 500), (500.0, 500), (None, None), ("", None),
                                    (float("nan"), None)])
def test_num_prompts_column_states_the_run_length(cell, P):
    """A row's ``num_prompts`` column states P directly (blank: the flags, here none)."""
    from dse.infer.predict_rows import run_length
    assert run_length({"engine": "vllm", "notes": "", "num_prompts": cell}) == P


@pytest.mark.parametrize("cell", ["abc", 0, -3, 2.5, "inf", float("inf"), 2**40, True, "1e3x"])
def test_bad_num_prompts_column_is_refused(cell):
    from dse.infer.predict_rows import run_length
    with pytest.raises(InputError) as e:
        run_length({"engine": "", "notes": "", "num_prompts": cell})
    assert e.value.field == "num_prompts"


def test_num_prompts_column_and_flag_must_agree():
    from dse.infer.predict_rows import run_length
    row = {"engine": "", "notes": "bench_serving --num-prompts 500", "num_prompts": 500}
    assert run_length(row) == 500
    with pytest.raises(InputError) as e:
        run_length(dict(row, num_prompts=400))
    assert e.value.field == "num_prompts" and "500" in str(e.value)


def test_predict_takes_the_column_and_names_a_bad_cell():
    """``dse predict``: a Poisson row with ``num_prompts`` pays the run's drain (below the
    steady ``rate x O``); a bad cell is that row's status, the others are predicted."""
    import pandas as pd
    from dse.predict import predict_frame
    row = dict(id="a", source_id="s", model="meta-llama/Llama-3.1-8B", hardware="h100-sxm-80gb", gpus=1,
               tp=1, pp=1, precision="bf16", engine="trtllm", scenario="poisson_rate",
               request_rate=8.0, input_len=512, output_len=256)
    frame = pd.DataFrame([row, dict(row, id="b", num_prompts=200), dict(row, id="c", num_prompts="x")])
    p = predict_frame(frame, "runs.csv", intervals=False)
    assert list(p.status[:2]) == ["ok", "ok"]
    assert p.predicted_output_tok_s[0] == pytest.approx(8.0 * 256)
    assert p.predicted_output_tok_s[1] < p.predicted_output_tok_s[0]
    assert str(p.status[2]).startswith("invalid") and "num_prompts" in str(p.status[2])
