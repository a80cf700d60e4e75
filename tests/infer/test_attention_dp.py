"""The busiest attention-DP rank (dse/infer/attention_dp.py) and what it does to a serving
iteration (dse/infer/serving.py): exact order statistics, imbalance >= 1 and = 1 at dp 1,
monotone in dp at a fixed group load, never a faster mixed iteration than the even
spread's busiest pass, and no change for dp = 1 deployments."""

import math

import pytest
from hypothesis import example, given, settings, strategies as st

from dse.infer import serving as SV
from dse.infer.attention_dp import imbalance, lattice_pmf, most_loaded_cases
from dse.infer.engines import PROFILES
from dse.spec.hardware import get_hardware
from dse.spec.model import get_model

R1 = get_model("deepseek-r1")
H200 = get_hardware("h200-sxm-141gb")


def brute(pmf, dp):
    """Enumerate every joint count of dp i.i.d. ranks: P(M = m), E[sum | M = m]."""
    import itertools
    out = {}
    for combo in itertools.product(pmf, repeat=dp):
        w = math.prod(p for _, p in combo)
        m = max(n for n, _ in combo)
        s = sum(n for n, _ in combo)
        pw, ps = out.get(m, (0.0, 0.0))
        out[m] = (pw + w, ps + w * s)
    return {m: (w, s / w) for m, (w, s) in out.items() if w > 0}


@given(st.floats(0.0, 3.0), st.integers(1, 5))
@example(1.0005899581609095e-13, 1)   # a rare case: F^dp - F_prev^dp cancelled 4 digits
@settings(max_examples=40, deadline=None)
def test_cases_match_brute_force(q, dp):
    pmf = lattice_pmf(q)
    ref = brute(pmf, dp)
    cases = most_loaded_cases(pmf, dp)
    assert sum(c.prob for c in cases) == pytest.approx(1.0)
    for c in cases:
        w, s = ref[int(c.max_prompts)]
        assert c.prob == pytest.approx(w, rel=1e-9, abs=1e-12)
        assert c.group_prompts == pytest.approx(s, rel=1e-9, abs=1e-9)
    # the group total is conserved: sum P(m) E[sum | m] = dp q
    assert sum(c.prob * c.group_prompts for c in cases) == pytest.approx(dp * q, abs=1e-9)


def test_poisson_cases_match_brute_force():
    pmf = SV.poisson_counts(0.7)
    ref = brute(pmf, 3)
    for c in most_loaded_cases(pmf, 3):
        w, s = ref[int(c.max_prompts)]
        assert c.prob == pytest.approx(w, rel=1e-9)
        assert c.group_prompts == pytest.approx(s, rel=1e-9)


@given(st.floats(0.01, 4.0), st.integers(1, 8), st.booleans())
@settings(max_examples=60, deadline=None)
def test_imbalance_at_least_one_and_one_at_dp1(q, dp, poisson):
    pmf = SV.poisson_counts(q) if poisson else lattice_pmf(q)
    assert imbalance(pmf, dp) >= 1.0 - 1e-9
    assert imbalance(pmf, 1) == pytest.approx(1.0, abs=1e-9)


@given(st.floats(0.05, 8.0), st.booleans())
@settings(max_examples=40, deadline=None)
def test_busiest_rank_load_monotone_in_dp_at_fixed_group_load(total, poisson):
    """Splitting the same group load over more ranks: the busiest rank's share of it
    (E[M] / (dp q) x dp = imbalance) never falls."""
    prev = 0.0
    for dp in (1, 2, 4, 8):
        q = total / dp
        pmf = SV.poisson_counts(q) if poisson else lattice_pmf(q)
        imb = imbalance(pmf, dp)
        assert imb >= prev - 1e-9
        prev = imb


def test_exact_small_case():
    """q = 1/4 per rank over 4 ranks: the busiest rank runs a prompt with probability
    1 - (3/4)^4, the group then 1 / that on average."""
    cases = most_loaded_cases(lattice_pmf(0.25), 4)
    p1 = 1.0 - 0.75 ** 4
    assert [c.max_prompts for c in cases] == [0.0, 1.0]
    assert cases[1].prob == pytest.approx(p1)
    assert cases[1].group_prompts == pytest.approx(1.0 / p1)
    assert imbalance(lattice_pmf(0.25), 4) == pytest.approx(p1 / 0.25)


def _dep(dp, engine="trtllm_pytorch"):
    return SV.Deployment(R1, H200, PROFILES[engine], 1, 1, 2, 1.0, ep=dp, dp=dp)


@pytest.mark.parametrize("q", [0.5, 1.0, 2.5])
def test_busiest_pass_never_faster_than_even_spread(q):
    """Every prompt-carrying case of the busiest rank runs at least one whole prompt, so
    its pass is no faster than the even spread's (q S tokens on every rank) whenever the
    busiest rank carries at least the mean; and the MoE group's total is conserved."""
    dep = _dep(4)
    S, b, ctx = 1024.0, 64.0, 1536.0
    even = SV.iteration_s(dep, b, ctx, q * S, S)
    for c in SV.rank_cases(dep, q, False):
        if c.max_prompts >= q:
            t = SV.iteration_s(dep, b, ctx, c.max_prompts * S, S,
                               group_prompt_tokens=c.group_prompts * S)
            assert t >= even * (1.0 - 1e-6)


def test_dp1_unchanged_and_group_default():
    """dp = 1: the cycle is a single rank's whole-prompt mix (a 1024-token pass in a share
    0.3 of the iterations, dse.infer.serving.prefill_share); group_prompt_tokens = dp p is
    the default pass (moe_tokens = dp tokens in dse.infer.forward)."""
    dep1 = _dep(1)
    c = SV.cycle(dep1, 64.0, 1536.0, 0.3, 1024.0, False)
    sh = SV.prefill_share(dep1, 64.0, 0.3, 1024.0)
    assert tuple(sh) == pytest.approx((0.3, 1024.0))
    t = (sh.share * SV.iteration_s(dep1, 64.0, 1536.0, sh.tokens, 1024.0)
         + (1.0 - sh.share) * SV.iteration_s(dep1, 64.0, 1536.0))
    assert c.mean_s == pytest.approx(t)
    dep4 = _dep(4)
    a = SV.iteration_s(dep4, 64.0, 1536.0, 512.0, 1024.0)
    b = SV.iteration_s(dep4, 64.0, 1536.0, 512.0, 1024.0, group_prompt_tokens=4 * 512.0)
    assert a == pytest.approx(b, rel=1e-6)


def test_more_group_prompts_slow_the_moe_part():
    """At the same busiest rank, a heavier group (more MoE tokens) is never faster."""
    dep = _dep(8)
    t = [SV.iteration_s(dep, 64.0, 1536.0, 1024.0, 1024.0, group_prompt_tokens=g * 1024.0)
         for g in (1.0, 2.0, 4.0, 8.0)]
    assert all(x <= y * (1 + 1e-6) for x, y in zip(t, t[1:]))
