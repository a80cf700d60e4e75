"""A finite benchmark run's start-up burst (dse.infer.finite_run): the first min(N, P)
requests of a closed loop arrive at once and queue behind each other's prefill; all P
queued at once wait for slots.  A run long against its burst keeps the steady state."""

import math

import pytest

from dse.errors import InputError
from dse.infer.engines import engine_profile
from dse.infer.finite_run import closed_loop_run, num_prompts, queued_run
from dse.infer.lockstep import pass_tokens, wave_prefill
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
    """P = N: every request is in the start-up burst, so the mean TTFT is the wave's."""
    n = 64.0
    res = _steady(n)
    burst, _ = wave_prefill(DEP, n, S, pass_tokens(DEP, S))
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
    run = queued_run(res, DEP, P, S, O, 1, None, "mean")
    expect = (B / P) * max(burst, res.ttft_s) + (1 - B / P) * res.ttft_s + (P - B) ** 2 / (2 * P * r)
    assert run.ttft_s == pytest.approx(expect)
    med = queued_run(res, DEP, P, S, O, 1, None, "median")
    assert med.ttft_s == pytest.approx(res.ttft_s + (P / 2 - B) / r)
    assert math.isclose(queued_run(res, DEP, None, S, O, 1, None, "mean").ttft_s, res.ttft_s)


def test_open_loop_past_capacity_queues_the_run():
    """Poisson arrivals at twice the capacity mu: request i waits i (1/mu - 1/lambda) - B/mu
    from i0 = B / (mu a) on, a mean of a (P - i0)^2 / (2 P); below capacity nothing grows."""
    from dse.infer.finite_run import saturated_run
    from dse.infer.serving import poisson
    off = offline(DEP, S, O, 1)
    mu = off.tokens_per_s / O
    sat = poisson(DEP, 2.0 * mu, S, O, 1)
    assert sat.note.startswith("saturated")
    P = 2000
    a = 1 / mu - 1 / (2 * mu)
    i0 = sat.batch / (mu * a)
    run = saturated_run(sat, DEP, P, 2.0 * mu, O, 1, "mean")
    assert run.ttft_s == pytest.approx(sat.ttft_s + a * (P - i0) ** 2 / (2 * P))
    assert run.e2e_s - run.ttft_s == pytest.approx(sat.e2e_s - sat.ttft_s)
    assert saturated_run(sat, DEP, None, 2.0 * mu, O, 1, "mean") == sat
    below = poisson(DEP, 0.5 * mu, S, O, 1)
    assert saturated_run(below, DEP, P, 0.5 * mu, O, 1, "mean") == below
    # more requests at the same overload wait longer on average
    assert saturated_run(sat, DEP, 4 * P, 2.0 * mu, O, 1, "mean").ttft_s > run.ttft_s
