"""The most loaded attention-DP rank of a mixed pass: whole prompts per rank, the
iteration at the pace of the busiest one.

**Why a maximum.**  With attention data parallelism (TensorRT-LLM
``enable_attention_dp``) every MoE layer all-gathers the tokens of all ``dp`` ranks and
reduce-scatters the results (``CutlassFusedMoE.forward_chunk``,
``tensorrt_llm/_torch/modules/fused_moe/fused_moe_cutlass.py``; :mod:`dse.infer.moe_serving`),
a barrier per layer, so each layer -- and the iteration -- lasts as long as the rank with
the most work: "the execution time for the Attention module in any given iteration is
bounded by the rank with the highest workload, ``time_i = max_m time_{i,m}``"
(TensorRT-LLM tech blog 10, "ADP Balance Strategy",
``docs/source/blogs/tech_blog/blog10_ADP_Balance_Strategy.md``, "Mathematical Modeling").

**Whole requests per rank.**  A new request's prompt runs on one rank only.  The
PyExecutor's request queue (``tensorrt_llm/_torch/pyexecutor/executor_request_queue.py``,
``_schedule_attention_dp_requests`` / ``_balance_requests_across_ranks``) sets a target
``expected_num_active_requests = max(ceil((active + new) / dp), max_r active_r)`` and
hands the new requests, longest first, to the rank with the fewest active tokens (a heap),
skipping ranks already at the target.  So the running (decode) batches stay level across
ranks -- each rank runs ``b`` sequences, as the streams of :mod:`dse.infer.serving` assume
-- but with every rank at its cap (a full queue, the offline steady state) a new request
can only go to a rank whose request just finished: rank ``r`` admits as many prompts as
it completed.  Its completions are its own stream (its ``b`` requests, each done once
every ``O`` iterations), and the ranks' phases are not aligned: the blog's baseline
("Round-Robin Token Distribution") shows the contexts landing on one rank per iteration,
``[*C0*, g01, ...], [g10, ...]``, the others decoding, and measures a mean balance ratio
(mean / max tokens per rank) of 54 % on 8 GB200 GPUs (DeepSeek-V3, DP 8).  The opt-in
``attention_dp_config.enable_balance`` (the blog's "ADP Balance", ``timeout_iters``) makes
ranks wait for each other; it is off by default and not modelled.  An iteration in which
no rank runs a prompt is a CUDA-graph replay on every rank: under attention DP the
``CUDAGraphRunner`` (``tensorrt_llm/_torch/pyexecutor/cuda_graph_runner.py``) all-gathers
``[can_run_cuda_graph, batch_size]`` over the ranks and replays only when every rank is
generation-only (padding the batch to the widest rank's), else all ranks run eagerly.

**The order statistic.**  Per iteration rank ``r`` runs ``X_r`` new whole prompts, the
``X_r`` independent and identically distributed with the per-rank law of the caller
(mean ``q``, the ``B / O`` completions per iteration):

* deterministic load (fixed lengths, :func:`lattice_pmf`): the least-variance integer
  count of mean q, ``X = floor(q) + Bernoulli(q - floor(q))`` -- each rank's admissions
  are evenly spaced, their phase independent of the other ranks';
* dataset-driven lengths: ``X ~ Poisson(q)`` (the caller's
  :func:`dse.infer.serving.poisson_counts`).

The most loaded rank runs ``M = max_r X_r``, with the exact law of the maximum of
``dp`` i.i.d. counts, ``P(M <= m) = F(m)^dp`` (e.g. David & Nagaraja 2003, "Order
Statistics", eq. 2.1.1), and the MoE layers see the whole group's ``S sum_r X_r`` prompt
tokens, whose mean given the maximum is also exact:
``E[sum X; M <= m] = dp E[X; X <= m] F(m)^(dp - 1)`` (the other ``dp - 1`` ranks at most m
too), differenced over m (:func:`most_loaded_cases`).  ``E[M] >= q`` (the maximum of
counts of mean q), equal at ``dp`` = 1, growing with dp at a fixed group total ``dp q``
(:func:`imbalance`, ``E[M] / q``).  The attention and the dense layers of the pass run at
the busiest rank's load (``b + M S`` tokens); the MoE layers at the group's.
:mod:`dse.infer.serving` evaluates the iteration at every ``m`` and averages (the group
total at its conditional mean there: the MoE pass is costed once per case).

Units: prompts (counts), probabilities.
"""

from __future__ import annotations

import math
from typing import NamedTuple


class RankCase(NamedTuple):
    """One value of the busiest rank's new-prompt count (:func:`most_loaded_cases`)."""
    prob: float             # P(M = max_prompts)
    max_prompts: float      # M: whole prompts the most loaded rank runs this pass
    group_prompts: float    # E[sum_r X_r | M]: prompts of all dp ranks (the MoE layers)


def lattice_pmf(q: float) -> list[tuple[int, float]]:
    """``(n, P(n))`` of the least-variance integer count of mean ``q`` >= 0:
    ``floor(q) + Bernoulli(q - floor(q))`` (module docstring)."""
    q = max(float(q), 0.0)
    lo = math.floor(q)
    f = q - lo
    return [(lo, 1.0)] if f <= 0.0 else [(lo, 1.0 - f), (lo + 1, f)]


def most_loaded_cases(pmf: list[tuple[int, float]], dp: int) -> list[RankCase]:
    """The law of ``M = max`` of ``dp`` i.i.d. counts of law ``pmf`` (``(n, P(n))``,
    increasing n), with the group total's conditional mean (module docstring):
    ``P(M = m) = F(m)^dp - F(m-1)^dp``, ``E[sum; M = m] = G(m) - G(m-1)``,
    ``G(m) = dp E[X; X <= m] F(m)^(dp - 1)``.  Cases of zero probability are dropped."""
    dp = max(int(round(dp)), 1)
    out: list[RankCase] = []
    F_prev = partial_prev = 0.0
    for n, p in pmf:
        F = F_prev + p
        # both differences in closed form, free of the cancellation of F^dp - F_prev^dp
        # when p << F (a rare case of probability 1e-13 would otherwise lose 4 digits):
        # F^k - F_prev^k = p sum_{i<k} F^i F_prev^(k-1-i)
        w = _power_step(F, F_prev, p, dp)
        dG = dp * (partial_prev * _power_step(F, F_prev, p, dp - 1) + n * p * F ** (dp - 1))
        if w > 0.0:
            out.append(RankCase(w, float(n), dG / w))
        F_prev, partial_prev = F, partial_prev + n * p
    return out


def _power_step(F: float, F_prev: float, p: float, k: int) -> float:
    """``F^k - F_prev^k`` for ``F = F_prev + p`` >= 0, as ``p sum_{i<k} F^i F_prev^(k-1-i)``
    (the factorisation of a difference of powers; exact where the subtraction is not)."""
    return p * sum(F ** i * F_prev ** (k - 1 - i) for i in range(k))


def imbalance(pmf: list[tuple[int, float]], dp: int) -> float:
    """``E[M] / E[X]``: the busiest rank's prompts over the mean rank's (>= 1, 1 at
    ``dp`` = 1); 1 when no prompts run."""
    mean = sum(n * p for n, p in pmf)
    if mean <= 0.0:
        return 1.0
    return sum(c.prob * c.max_prompts for c in most_loaded_cases(pmf, dp)) / mean
