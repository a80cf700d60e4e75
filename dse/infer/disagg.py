"""Disaggregated prefill and decode (xPyD) as a serving layout.

``x`` prefill replicas and ``y`` decode replicas, each a :class:`dse.infer.serving.
Deployment` of its own (own ``tp`` / ``pp`` / EP); a request's prompt runs on a prefill
replica, its KV cache moves to a decode replica, which generates the remaining tokens
(DistServe, Zhong et al. 2024, arXiv:2401.09670; Splitwise, Patel et al. 2024; vLLM
``--kv-transfer-config`` with NIXL / LMCache connectors; SGLang
``--disaggregation-mode prefill|decode`` with Mooncake / NIXL transfer; TensorRT-LLM
disaggregated serving with ``cache_transceiver_config``).

**KV transfer** (:func:`kv_transfer_s`): the request's whole cache, ``2 L g d el S``
bytes (every layer, every KV head once, at the KV precision), leaves the prefill
replica's GPUs and reaches the decode replica's GPUs over ``min(G_p, G_d)`` links in
parallel, each a :class:`dse.graph.ops.P2P` (NVLink when both pools sit in one NVLink
domain, ``x G_p + y G_d <= nvlink_domain``, else the NIC).  Serial after the prefill
(no layer-wise overlap: the conservative setting of the engines' default connectors).

**Scenarios** (S prompt, O output tokens):

* prefill pool capacity, requests/s: ``x b_p / t_prefill(b_p)`` with the prefill batch
  ``b_p = max(1, floor(max_num_tokens / S))`` (one token budget per prefill pass);
* decode pool: ``y dp`` streams each running B sequences (KV slots at ``S + O``
  held, engine caps), ``t_d = t_iter(B, 0)`` at the mean context ``S + O/2``; capacity
  ``y dp B / ((O - 1) t_d)`` requests/s (the first token comes from prefill);
* ``offline_throughput``: rate = min(prefill, decode capacity) -- throughput is limited
  by the slower pool; when prefill limits, the decode batch is the one that rate keeps
  busy (Little: ``B = rate (O - 1) t_d / (y dp)``, fixed point);
* ``concurrency`` (N in flight): decode batch ``min(N / (y dp), slots)``; TTFT =
  prefill of one prompt + transfer; throughput = min(N O / e2e, offline capacity);
* ``poisson_rate``: prefill as M/D/1 per prefill replica, decode as the mean-value
  fixed point of :func:`dse.infer.serving.poisson` with no prompt tokens in the decode
  iterations; above either pool's capacity the row is saturated (offline figures);
* ``fixed_batch`` / ``latency``: the batch prefilled in one pass, transferred, decoded.

TTFT = prefill (+ queueing) + KV transfer; TPOT from the decode pool; tokens/s/GPU over
all ``x G_p + y G_d`` GPUs.  Units: seconds, bytes, tokens.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from dse.graph.ops import P2P, time_s
from dse.infer.serving import (Deployment, ServingResult, gpus_per_replica, iteration_s,
                               kv_slots, md1_wait_s, prefill_s, streams)
from dse.infer.kv_cache import kv_cache_bytes
from dse.cost.rates import rates


class Disaggregated(NamedTuple):
    prefill: Deployment
    decode: Deployment
    x: int                      # prefill replicas
    y: int                      # decode replicas

    @property
    def gpus(self) -> int:
        return self.x * gpus_per_replica(self.prefill) + self.y * gpus_per_replica(self.decode)


def kv_request_bytes(dep: Deployment, tokens: float) -> float:
    """Whole KV cache of one request of ``tokens`` tokens (no TP replication): the one
    formula, :func:`dse.infer.kv_cache.kv_cache_bytes` at tp = pp = 1 (windowed layers
    hand over only their window)."""
    return float(kv_cache_bytes(dep.model, 1.0, tokens, 1, 1, dep.kv_bytes))


def kv_transfer_s(dis: Disaggregated, S: float, requests: float = 1.0) -> float:
    """Seconds to move ``requests`` caches of S tokens from a prefill to a decode replica
    (module docstring)."""
    hw = dis.prefill.hw
    links = min(gpus_per_replica(dis.prefill), gpus_per_replica(dis.decode))
    inside = dis.gpus <= float(hw.nvlink_domain_gpus)
    stride = 1.0 if inside else float(hw.nvlink_domain_gpus)
    op = P2P(requests * kv_request_bytes(dis.prefill, S) / links, stride, name="kv transfer",
             group="disagg")
    return float(time_s(op, hw, rates(hw, dis.prefill.precision)))


def _prefill_batch(dep: Deployment, S: float) -> float:
    return max(1.0, math.floor(dep.engine.max_num_tokens / max(S, 1.0)))


def prefill_capacity(dis: Disaggregated, S: float) -> float:
    """Requests/s the prefill pool completes."""
    b = _prefill_batch(dis.prefill, S)
    return dis.x * b / prefill_s(dis.prefill, b, S)


def _decode_cap(dis: Disaggregated, S: float, O: float) -> float:
    """Running sequences per decode stream: KV slots, ``max_batch``, and ``max_num_tokens``
    (decode tokens only: no prompt shares the decode pool's iterations)."""
    d = dis.decode
    return max(min(kv_slots(d, S, O), float(d.engine.max_batch), float(d.engine.max_num_tokens)), 0.0)


def _decode_t(dis: Disaggregated, B: float, S: float, O: float) -> float:
    return iteration_s(dis.decode, max(B, 1.0), S + O / 2.0)


def _infeasible(why: str) -> ServingResult:
    return ServingResult(math.nan, math.nan, math.nan, math.nan, math.nan, 0.0, f"infeasible: {why}")


def offline(dis: Disaggregated, S: float, O: float) -> ServingResult:
    B = _decode_cap(dis, S, O)
    if B < 1:
        return _infeasible("the decode pool's weights leave no KV cache for one sequence")
    units = streams(dis.decode, dis.y)
    t_d = _decode_t(dis, B, S, O)
    rate_d = units * B / (max(O - 1.0, 1.0) * t_d)
    rate_p = prefill_capacity(dis, S)
    note = "decode-limited"
    if rate_p < rate_d:                       # prefill limits: smaller decode batch
        note = "prefill-limited"
        for _ in range(40):
            B = min(B, max(rate_p * max(O - 1.0, 1.0) * t_d / units, 1.0))
            t_new = _decode_t(dis, B, S, O)
            if abs(t_new - t_d) <= 1e-6 * t_d:
                break
            t_d = t_new
    rate = min(rate_p, rate_d)
    b_p = _prefill_batch(dis.prefill, S)
    ttft = prefill_s(dis.prefill, b_p, S) + kv_transfer_s(dis, S, b_p) + _front(dis)
    tps = rate * O
    return ServingResult(tps, tps / dis.gpus, ttft, t_d, ttft + (O - 1.0) * t_d, B, note)


def _front(dis: Disaggregated) -> float:
    """The HTTP front end a served request crosses (``frontend_s`` of the prefill pool's
    engine, :mod:`dse.infer.engines` "Front end"), once on the way in and once out."""
    return dis.prefill.engine.frontend_s


def concurrency(dis: Disaggregated, n: float, S: float, O: float) -> ServingResult:
    """Closed loop, ``n`` in flight on an xPyD deployment: ``B = min(n / units, cap)``
    decode, service time ``e2e_run = prefill(1, S) + KV transfer + (O - 1) t_dec``,
    tokens/s ``min(n O / e2e_run, offline)``; Little's law (Little 1961): each request
    spends ``n O / tokens/s``, the excess over ``e2e_run`` waiting ahead of its first
    token."""
    cap = _decode_cap(dis, S, O)
    if cap < 1:
        return _infeasible("the decode pool's weights leave no KV cache for one sequence")
    units = streams(dis.decode, dis.y)
    B = min(n / units, cap)
    t_d = _decode_t(dis, B, S, O)
    run_ttft = prefill_s(dis.prefill, 1.0, S) + kv_transfer_s(dis, S) + _front(dis)
    run_e2e = run_ttft + (O - 1.0) * t_d
    off = offline(dis, S, O)
    demand = n * O / run_e2e
    tps = min(demand, off.tokens_per_s)
    # Little's law on the closed loop: n requests in the system at tps / O completions/s
    # spend n O / tps each; where the pools cap tps below the demand, the excess over the
    # service time waits in a queue (the decode pool's slots or the slower pool), ahead
    # of the first token.  Compared, not subtracted, below the cap: n O / (n O / e2e_run)
    # - e2e_run rounds to a few ulps, not 0.
    wait = n * O / tps - run_e2e if tps < demand else 0.0
    ttft = wait + run_ttft
    e2e = wait + run_e2e
    note = ("" if wait <= 0.0 else
            "queued: concurrency above the decode pool's KV slots" if n / units > cap else
            "queued: concurrency above what the prefill pool sustains")
    return ServingResult(tps, tps / dis.gpus, ttft, t_d, e2e, B, note)


def poisson(dis: Disaggregated, rate: float, S: float, O: float) -> ServingResult:
    off = offline(dis, S, O)
    if off.note.startswith("infeasible"):
        return off
    if rate * O >= off.tokens_per_s:
        return off._replace(note="saturated: arrival rate above the slower pool's capacity")
    cap = _decode_cap(dis, S, O)
    lam = rate / streams(dis.decode, dis.y)
    t = _decode_t(dis, 1.0, S, O)
    for _ in range(60):
        B = lam * (O - 1.0) * t
        if B > cap:
            return off._replace(note="saturated: arrival rate above the decode pool's KV slots")
        t_new = _decode_t(dis, B, S, O)
        if abs(t_new - t) <= 1e-4 * t:
            t = t_new
            break
        t = 0.5 * (t + t_new)
    t_pf = prefill_s(dis.prefill, 1.0, S)
    wait = md1_wait_s(rate / dis.x * prefill_s(dis.prefill, 1.0, S, overhead=False), t_pf)
    ttft = t_pf + wait + kv_transfer_s(dis, S) + _front(dis)
    e2e = ttft + (O - 1.0) * t
    tps = rate * O
    return ServingResult(tps, tps / dis.gpus, ttft, t, e2e, lam * (O - 1.0) * t, "")


def fixed_batch(dis: Disaggregated, batch: float, S: float, O: float) -> ServingResult:
    """``batch`` requests per decode replica, prefilled together on one prefill replica."""
    b = batch / dis.decode.dp
    ttft = prefill_s(dis.prefill, batch, S) + kv_transfer_s(dis, S, batch)
    tpot = iteration_s(dis.decode, b, S + O / 2.0) if O > 1 else 0.0
    e2e = ttft + (O - 1.0) * tpot
    tps = batch * O / e2e * dis.y
    return ServingResult(tps, tps / dis.gpus, ttft, tpot, e2e, b, "")
