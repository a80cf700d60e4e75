"""ZeRO-3 / FSDP per-unit physics (dse.train.zero3) and the framework profiles: property
tests (hypothesis) and the CLI/predict value ``fsdp``."""

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from dse.graph.ops import time_s
from dse.spec.frameworks import PROFILES, profile
from dse.spec.layout import FRAMEWORK, Layout, Workload, framework_code
from dse.train.step import step_and_schedule, train_step
from dse.cost.rates import rates
from dse.cost.collectives import comm_sm_fraction, overlapped_cost_s
from dse.train.zero3 import zero3_exposed_s
from tests.helpers import a100, h100, host_step, llama70b

MODEL = llama70b()
STEP = host_step          # one point each: no XLA compile (tests.helpers.host_step)
SET = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FW = sorted(PROFILES)


def _z3(dp, mbs, rc, pp=1):
    return Layout(tp=1, pp=pp, dp=dp, mbs=mbs, recompute=rc, zero=3)


def test_fsdp_is_a_framework_value():
    assert framework_code("fsdp") == FRAMEWORK["fsdp"] == 2
    assert framework_code("torchtitan") == framework_code("fsdp2") == 3
    for code, p in PROFILES.items():
        assert p.sources, p.name       # every profile cites its framework's code
        assert profile(code) is p


@SET
@given(fw=st.sampled_from(FW), dp=st.sampled_from([16, 64, 256, 1024]), mbs=st.sampled_from([1, 2]),
       rc=st.sampled_from([0, 2]), pp=st.sampled_from([1, 4]), factor=st.floats(1.01, 16.0))
def test_zero3_never_faster_on_a_slower_nic(fw, dp, mbs, rc, pp, factor):
    hw = h100()
    slower = hw.replace(nic_bw_bytes_per_s=hw.nic_bw_bytes_per_s / factor)
    wl = Workload(global_batch=4 * dp * mbs, seq_len=4096, precision=1, framework=fw)
    lay = _z3(dp, mbs, rc, pp)
    t0 = float(train_step(MODEL, wl, lay, hw).step_time_s)
    t1 = float(train_step(MODEL, wl, lay, slower).step_time_s)
    assert t1 >= t0 * (1 - 1e-6)


def _args(draw_vals):
    g, r, g0, r0, cf, cb, head, n, m = draw_vals
    return (g, r, g0, r0, cf, cb, head, n, m)


pos = st.floats(1e-5, 1.0)
ARGS = st.tuples(pos, pos, pos, pos, pos, pos, pos, st.sampled_from([8.0, 40.0, 80.0]),
                 st.sampled_from([1.0, 4.0, 32.0]))


@settings(max_examples=200, deadline=None)
@given(a=ARGS, regather=st.booleans(), sync=st.booleans(), root=st.booleans(),
       d0=st.integers(0, 3), d1=st.integers(0, 3))
def test_deeper_prefetch_never_slower(a, regather, sync, root, d0, d1):
    lo, hi = sorted((d0, d1))
    kw = dict(regather=regather, sync_every=sync, root_regather=root, num_sms=132.0)
    t_lo = float(zero3_exposed_s(*_args(a), lo, **kw)[0])
    t_hi = float(zero3_exposed_s(*_args(a), hi, **kw)[0])
    assert t_hi <= t_lo * (1 + 1e-6)


def _bound(comm, window, num_sms, other=0.0):
    """The bound on any schedule (dse.train.zero3): ``max(raw - W, f raw - O)``."""
    f = float(comm_sm_fraction(num_sms))
    return max(comm - window, f * comm - other, 0.0)


@settings(max_examples=200, deadline=None)
@given(a=ARGS, root=st.booleans(), depth=st.integers(0, 2))
def test_per_unit_cost_at_least_the_ideal_overlap(a, root, depth):
    """Re-gathering every micro-batch and reducing every micro-batch (FSDP, DeepSpeed),
    the per-unit cost is never below the whole-buffer bound ``m * max(C - W, f C)`` of
    the same bytes (one stream of ``C = 2 ag + rs`` seconds beside the micro-batch's
    compute ``W``), less the one re-gather the framework skips (the root's under FSDP1,
    the last block's under FSDP2), nor below the bound of exactly the collectives it
    runs."""
    g, r, g0, r0, cf, cb, head, n, m = _args(a)
    new, raw = zero3_exposed_s(*_args(a), depth, regather=True, sync_every=True, root_regather=root,
                               num_sms=132.0)
    whole = m * _bound(2.0 * (n * g + g0) + n * r + r0, n * (cf + cb), 132.0)
    skipped = m * (g if root else g0)
    assert float(new) >= (whole - float(skipped)) * (1 - 1e-5) - 1e-9
    assert float(new) >= _bound(float(raw), m * n * (cf + cb), 132.0) * (1 - 1e-5)


def _replay_s(c, kernels, other, f):
    """Event replay of the mechanism: a collective transfers for ``c`` seconds from t = 0
    while the compute stream runs ``kernels`` seconds of kernels (at ``1 - f`` while the
    collective transfers, then at full speed) and then ``other`` seconds of its own
    collectives; the pass ends when both are done.  Returns the cost beyond
    ``kernels + other``."""
    done_under_comm = (1.0 - f) * c                  # kernel work done while it transfers
    t_kernels = kernels / (1.0 - f) if kernels <= done_under_comm else c + kernels - done_under_comm
    return max(t_kernels + other, c) - (kernels + other)


@settings(max_examples=200, deadline=None)
@given(c=pos, k=pos, o=st.floats(0.0, 0.5), sms=st.sampled_from([24.0, 108.0, 132.0]))
def test_overlap_cost_is_the_replayed_mechanism(c, k, o, sms):
    """``overlapped_cost_s`` is the closed form of the SM-sharing mechanism the simulator
    replays (dse.sim.engine): compute at ``1 - f`` while the collective transfers, the
    collective at link speed, the stream's own collectives not slowed."""
    f = float(comm_sm_fraction(sms))
    closed = float(overlapped_cost_s(c, k + o, k, f))
    assert closed == pytest.approx(_replay_s(c, k, o, f), rel=1e-5, abs=1e-9)


def test_gather_bound_chain_costs_its_gathers():
    """A chain of unit gathers slower than the compute beside them (and than the slowed
    compute) costs exactly its gathers: the slowed compute is off the critical path, so
    no ``f x hidden`` charge on top of the exposed gathers."""
    g, cf, n, m = 1.0, 0.5, 8.0, 1.0
    cost, raw = zero3_exposed_s(g, 0.0, g, 0.0, cf, cf, cf, n, m, 1, regather=True,
                                sync_every=False, root_regather=False, num_sms=132.0)
    # forward: root + first gather, then 7 gathers beyond their unit's forward;
    # backward (no reduce-scatter): the first gather beyond the LM head, 7 beyond backward
    expected = 2 * g + (n - 1) * (g - cf) + (g - cf) + (n - 1) * (g - cf)
    assert float(cost) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("fw", ["fsdp", "fsdp2", "deepspeed", "megatron"])
def test_step_per_unit_at_least_the_whole_buffer_ideal(fw):
    """At the step level, pure ZeRO-3 DP on 512 A100s: the per-unit DP cost is at least
    the bound of the collectives it runs (same counts, one message)."""
    wl = Workload(global_batch=1024, seq_len=4096, precision=1, framework=framework_code(fw))
    lay = _z3(512, 1, 2)
    res, sched, graph = step_and_schedule(MODEL, wl, lay, a100())
    assert float(res.dp_comm_s) >= 0.0
    r = rates(a100(), 1)
    ag, rs, ag0, rs0, _ = graph.zero3
    n_ag, n_rs, n_ag0, n_rs0, _ = sched.zero3_calls
    # the same bytes as one message per kind: a single latency instead of one per unit
    raw = float(sched.dp_raw_s)
    per_msg = sum(float(c) * float(time_s(op, a100(), r)) for op, c in
                  ((ag, n_ag), (rs, n_rs), (ag0, n_ag0), (rs0, n_rs0)))
    assert raw >= per_msg * (1 - 1e-6)
    m = 1024 / 512
    window = float(res.compute_s + res.recompute_s)
    assert float(res.dp_comm_s) >= _bound(raw, window, a100().num_sms) * (1 - 1e-5)
    assert m == 2.0


def test_alpha_matters_at_scale():
    """A 7B-class model at mbs 1: per-unit latency grows with the DP degree (flat ring),
    so the same per-GPU work takes longer on 1024 ranks than on 64."""
    from dse.spec.model import get_model
    model = get_model("llama3-8b")
    hw = h100()
    t = {}
    for dp in (64, 1024):
        wl = Workload(global_batch=dp, seq_len=2048, precision=1, framework=framework_code("fsdp2"))
        t[dp] = float(train_step(model, wl, _z3(dp, 1, 0), hw).dp_comm_s)
    assert t[1024] > t[64]
