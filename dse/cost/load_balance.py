"""Expert-parallel load imbalance: how much busier the most loaded of ``ep`` ranks is than
the mean, for token-expert pairs routed uniformly (shared by training and serving).

With ``N`` pairs on ``ep`` ranks (uniform routing: Megatron-Core's force-balanced random
router, ``moe_utils.apply_random_logits``; a serving router at its balanced limit) rank
``r`` receives ``N_r ~ Binomial(N, 1/ep)``, mean ``mu = N / ep``, standard deviation
``sigma = sqrt(N (1/ep)(1 - 1/ep))``.  A dropless MoE layer ends at a barrier (the combine
all-to-all, or the all-reduce that sums EP partials), so it lasts as long as its most
loaded rank: the expected maximum of ``ep`` such counts is at most
``mu + sigma sqrt(2 ln ep)`` (the Gaussian extreme-value bound ``E max_i X_i <= mu + sigma
sqrt(2 ln n)`` for n normal variables; Boucheron, Lugosi & Massart 2013, "Concentration
Inequalities", sec. 2.5), i.e. the mean rank's pairs scaled by

    imbalance = 1 + sqrt(2 ln(ep) (ep - 1) / N)        (1 for ep = 1)

It is large only where few pairs are in flight (N = 512 pairs over 8 ranks: 1.19) and
tends to 1 for big batches.  Learned routers are more skewed (DeepSeek-V3 rebalances with
EPLB, arXiv:2412.19437 sec. 3.4), which this uniform-routing bound does not carry.
"""

from __future__ import annotations

import jax.numpy as jnp


def ep_load_factor(pairs, ep):
    """Pairs the most loaded of ``ep`` ranks receives over the mean, for ``pairs``
    token-expert pairs routed uniformly: ``1 + sqrt(2 ln(ep) (ep - 1) / pairs)``, 1 for
    ``ep`` = 1 (module docstring)."""
    ep = jnp.maximum(ep * 1.0, 1.0)
    n = jnp.maximum(pairs * 1.0, 1.0)
    return 1.0 + jnp.sqrt(2.0 * jnp.log(ep) * (ep - 1.0) / n)


def ep_busiest_experts(hit, experts, ep):
    """Distinct experts the busiest of ``ep`` ranks must read, when ``hit`` of the
    ``experts`` are touched in a pass (uniform routing).  Given ``H = hit``, the touched set
    is a uniform ``H``-subset of the ``E`` experts, so rank ``r`` (which holds ``E / ep``
    of them) holds ``X_r ~ Hypergeometric(E, E / ep, H)``: mean ``H / ep``, variance
    ``H (1/ep)(1 - 1/ep)(E - H)/(E - 1)``.  Sampling without replacement is no more spread
    than with (Hoeffding 1963, "Probability inequalities for sums of bounded random
    variables", sec. 6), so the same Gaussian extreme-value bound as
    :func:`ep_load_factor` applies:

        busiest = min(E / ep, H / ep + sqrt(2 ln(ep) H (1/ep)(1 - 1/ep)(E - H)/(E - 1)))

    It matters where decode reads expert *weights*: a small batch touches few experts and
    the busiest rank streams up to twice the mean's (H = 30.5 of 256 experts over 8 ranks:
    3.8 mean, 7.3 by the bound, 6.6 in a simulation of uniform top-8 routing), while a
    batch that touches every expert has no spread at all (the finite-population factor
    ``E - H`` vanishes).  ``H / ep`` for ``ep`` = 1."""
    ep = jnp.maximum(ep * 1.0, 1.0)
    E = jnp.maximum(experts * 1.0, 1.0)
    H = jnp.clip(hit * 1.0, 0.0, E)
    fpc = jnp.maximum(E - H, 0.0) / jnp.maximum(E - 1.0, 1.0)
    spread = jnp.sqrt(2.0 * jnp.log(ep) * H * (1.0 / ep) * (1.0 - 1.0 / ep) * fpc)
    return jnp.minimum(E / ep, H / ep + spread)
