"""A finite open-loop run simulated iteration by iteration (dse.infer.open_loop_run): the
limits it must reach -- the arrival rate below capacity, the offline capacity past it,
an empty server when requests are sparse -- and monotone in the load."""

import math

import numpy as np
import pytest

from dse.infer.engines import engine_profile
from dse.infer.open_loop_run import _iter_s, finite_open_loop, iteration_table, simulate_run
from dse.infer.serving import Deployment, bench_tuned, offline, tuned_batch
from dse.spec.hardware import get_hardware
from dse.spec.model import get_model

DEP = Deployment(get_model("llama3-70b"), get_hardware("h100-sxm-80gb"),
                 engine_profile("vllm 0.10.0")[0], 4, 1, 2, 1.0)
S, O = 512.0, 128.0


@pytest.fixture(scope="module")
def table():
    return iteration_table(DEP, tuned_batch(DEP, S, O), S, O)


@pytest.fixture(scope="module")
def mu():
    """Requests per second the deployment completes all queued (its capacity)."""
    return offline(DEP, S, O, 1).tokens_per_s / O


def _run(table, rate, P, median=False):
    eng = bench_tuned(DEP, S, O).engine
    return simulate_run(table, rate, P, S, O, tuned_batch(DEP, S, O), float(eng.max_num_tokens),
                        bool(eng.mixed_batches), eng.scheduling_wait(1) - 0.5, float(eng.frontend_s),
                        median)


def test_the_table_is_the_steady_models_iteration(table):
    """Grid points reproduce dse.infer.serving.cycle; between them the interpolation stays
    within the neighbours; more sequences or more prompts never make a pass shorter."""
    from dse.infer.serving import cycle, resident_output
    g, q, t = table
    ctx = S + resident_output(O) / 2.0
    assert _iter_s(table, g[3], 2.0) == pytest.approx(cycle(bench_tuned(DEP, S, O), float(g[3]), ctx, 2.0, S, False).mean_s)
    mid = _iter_s(table, math.sqrt(g[3] * g[4]), 3.0)
    assert min(t[3:5, 2:4].ravel()) <= mid <= max(t[3:5, 2:4].ravel())
    assert (np.diff(t, axis=0) >= -1e-12).all() and (np.diff(t, axis=1) >= -1e-12).all()


def test_below_capacity_a_long_run_delivers_the_arrival_rate(table, mu):
    """At half the capacity, 4000 requests: output tokens/s within 3 % of lambda O (the ramp
    and the drain cost one request's time against the run's 4000 / lambda), and the mean
    running batch is Little's lambda x time in service within 10 %."""
    rate = 0.5 * mu
    r = _run(table, rate, 4000)
    assert r.tokens_per_s == pytest.approx(rate * O, rel=0.03)
    assert r.tokens_per_s <= rate * O
    service = r.e2e_s - r.ttft_s + r.tpot_s          # decode span and the first pass, about
    assert r.mean_batch == pytest.approx(rate * service, rel=0.10)


def test_past_capacity_the_run_delivers_the_offline_capacity_and_queues(table, mu):
    """At three times the capacity the server runs full: tokens/s within 10 % of the
    all-queued steady state, and a longer run queues longer (mean TTFT grows with P)."""
    short, long = _run(table, 3 * mu, 1000), _run(table, 3 * mu, 3000)
    assert long.tokens_per_s == pytest.approx(offline(DEP, S, O, 1).tokens_per_s, rel=0.10)
    assert long.ttft_s > 2.0 * short.ttft_s > 0


def test_sparse_arrivals_meet_an_empty_server(table):
    """A request every 100 s: TTFT is one pass with its prompt at batch 1 plus the engine's
    look-ahead and front end, TPOT the batch-1 decode pass."""
    eng = bench_tuned(DEP, S, O).engine
    r = _run(table, 0.01, 5)
    t1, own = _iter_s(table, 1.0, 0.0), _iter_s(table, 1.0, 1.0)
    assert r.tpot_s == pytest.approx(t1, rel=1e-3)   # the fluid trickles 1e-4 of a request per pass
    lookahead = (eng.scheduling_wait(1) - 0.5) * t1
    assert r.ttft_s == pytest.approx(own + lookahead + eng.frontend_s, rel=0.02)
    assert r.mean_batch <= 1.0 + 1e-9
    # so sparse that the run's clock would lose its passes: the closed form, same values
    far = _run(table, 1e-300, 5)
    assert far.ttft_s == pytest.approx(r.ttft_s, rel=1e-3) and far.tpot_s == pytest.approx(r.tpot_s, rel=1e-3)
    assert 0 < far.tokens_per_s < 1e-290 and math.isfinite(far.e2e_s)


@pytest.mark.parametrize("P", [50, 500])
def test_more_load_is_never_faster(table, mu, P):
    """Over rates from a tenth to four times the capacity: TTFT, TPOT and e2e never fall
    and tokens/s never falls as the rate grows (the run's arrivals only come sooner)."""
    runs = [_run(table, f * mu, P) for f in (0.1, 0.3, 0.6, 1.0, 1.5, 4.0)]
    for a, b in zip(runs, runs[1:]):
        assert b.ttft_s >= a.ttft_s * (1 - 1e-6)
        assert b.tokens_per_s >= a.tokens_per_s * (1 - 1e-6)
        # a pass that carries more prompts at once pays its fixed (eager) cost once:
        # TPOT may dip a little where arrivals bunch, never by more than a few percent
        assert b.tpot_s >= a.tpot_s * 0.95
    assert runs[-1].tpot_s > runs[0].tpot_s and runs[-1].e2e_s > runs[0].e2e_s


def test_median_and_the_deployment_wrapper(table, mu):
    """The median is a request's value (between the run's extremes); the wrapper splits
    rate and requests over two replicas (the system delivers twice one replica's run of
    half) and declines what it cannot simulate."""
    mean, med = _run(table, mu, 400), _run(table, mu, 400, median=True)
    assert med.tokens_per_s == mean.tokens_per_s and med.ttft_s > 0
    one = finite_open_loop(DEP, mu, 400, S, O, 1)
    two = finite_open_loop(DEP, 2 * mu, 800, S, O, 2)
    assert two.tokens_per_s == pytest.approx(2 * one.tokens_per_s, rel=1e-9)
    assert two.tokens_per_s_per_gpu == pytest.approx(one.tokens_per_s_per_gpu, rel=1e-9)
    assert two.ttft_s == pytest.approx(one.ttft_s, rel=1e-9)
    for rate in (math.inf, 0.0, float("nan")):
        assert finite_open_loop(DEP, rate, 400, S, O, 1) is None
