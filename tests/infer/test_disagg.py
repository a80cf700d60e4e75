"""Disaggregated prefill/decode (xPyD): transfer, TTFT, pool limits (dse.infer.disagg)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.infer.disagg import (Disaggregated, concurrency, kv_request_bytes, kv_transfer_s,
                              offline, poisson, prefill_capacity)
from dse.infer.engines import PROFILES
from dse.infer.predict_rows import predict_inference_row
from dse.infer.serving import Deployment, iteration_s, prefill_s
from dse.spec.hardware import get_hardware
from dse.spec.model import get_model

H100 = get_hardware("h100-sxm-80gb")
L70 = get_model("meta-llama/Llama-3.1-70B")


def _dis(x, y, tp_p=4, tp_d=4):
    e = PROFILES["sglang"]
    return Disaggregated(Deployment(L70, H100, e, tp_p, 1, 2, 1.0),
                         Deployment(L70, H100, e, tp_d, 1, 2, 1.0), x, y)


def test_kv_transfer_bytes_and_link():
    d = _dis(1, 1)                              # 8 GPUs: one NVLink domain
    assert kv_request_bytes(d.prefill, 1000) == 2 * 80 * 8 * 128 * 1.0 * 1000
    nv = kv_transfer_s(d, 1000)
    nic = kv_transfer_s(_dis(2, 2), 1000)       # 16 GPUs: over the NIC
    assert nic > 5 * nv
    # at least bytes per link / NIC bandwidth
    assert nic >= kv_request_bytes(d.prefill, 1000) / 4 / float(H100.nic_bw_bytes_per_s)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.sampled_from([512.0, 2000.0, 8000.0]),
       st.sampled_from([64.0, 256.0, 1024.0]))
def test_throughput_limited_by_slower_pool(x, y, S, O):
    d = _dis(x, y)
    r = offline(d, S, O)
    rate_p = prefill_capacity(d, S)
    assert r.tokens_per_s <= rate_p * O * (1 + 1e-9)
    # decode pool bound: y streams x KV/engine cap per decode-only iteration
    assert r.tokens_per_s * (O - 1) / O <= y * r.batch / r.tpot_s * (1 + 1e-6)
    # more prefill replicas never lower the throughput
    assert offline(_dis(x + 1, y), S, O).tokens_per_s >= r.tokens_per_s * (1 - 1e-9)


def test_ttft_is_prefill_plus_transfer():
    d = _dis(2, 2)
    r = concurrency(d, 8, 2000, 200)
    assert r.ttft_s == pytest.approx(prefill_s(d.prefill, 1.0, 2000) + kv_transfer_s(d, 2000))
    assert r.tpot_s == pytest.approx(iteration_s(d.decode, 4.0, 2100))
    p = poisson(d, 0.5, 2000, 200)
    assert p.ttft_s > prefill_s(d.prefill, 1.0, 2000) + kv_transfer_s(d, 2000)
    assert "saturated" in poisson(d, 1e4, 2000, 200).note


def test_concurrency_past_the_slower_pool_waits_by_littles_law():
    """One prefill replica feeding three decode replicas on long prompts: past what the
    prefill pool sustains, tokens/s is flat and each request spends n O / tokens/s in the
    system (Little's law), the excess ahead of its first token."""
    d = _dis(1, 3)
    S, O = 8000.0, 64.0
    lo, hi = concurrency(d, 4, S, O), concurrency(d, 256, S, O)
    assert hi.note.startswith("queued") and hi.tokens_per_s <= offline(d, S, O).tokens_per_s * (1 + 1e-9)
    assert hi.e2e_s == pytest.approx(256 * O / hi.tokens_per_s, rel=1e-9)
    assert hi.e2e_s - hi.ttft_s == pytest.approx((O - 1) * hi.tpot_s, rel=1e-9)   # wait is before token 1
    assert hi.ttft_s > 10 * lo.ttft_s
    # below capacity nothing waits: no rounding residue turns into a queue note
    for n in range(1, 17):
        r = concurrency(_dis(2, 2), n, 2000.0, 200.0)
        assert r.note == "" and r.ttft_s == concurrency(_dis(2, 2), 1, 2000.0, 200.0).ttft_s, n


def test_disagg_rows():
    base = dict(id="x", model="meta-llama/Llama-3.1-70B", hardware="h100-sxm-80gb", gpus=16,
                tp=4, pp=1, precision="fp8", engine="sglang", scenario="offline_throughput",
                input_len=2000, output_len=200)
    r = predict_inference_row({**base, "disagg": "2P2D"})
    assert r["status"].startswith("ok") and r["chosen_disagg"] == "2P2D"
    r = predict_inference_row({**base, "disagg": "1P2D", "prefill_tp": 8, "gpus": 16})
    assert r["status"].startswith("ok")
    bad = predict_inference_row({**base, "disagg": "1P1D"})
    assert bad["status"].startswith("infeasible") and "gpus" in bad["status"]


@pytest.mark.parametrize("scen, load, needle", [
    ("fixed_batch", {}, "invalid: batch_or_concurrency: is required for fixed_batch"),
    ("concurrency", {}, "invalid: batch_or_concurrency: is required for concurrency"),
    ("latency", {"batch_or_concurrency": 4}, "invalid: batch_or_concurrency: must be 1 (or blank) for latency"),
    ("poisson_rate", {}, "invalid: request_rate: is required for poisson_rate"),
    ("poisson_rate", {"request_rate": -3}, "invalid: request_rate: must be a number > 0")])
@pytest.mark.parametrize("disagg", [None, "2P2D"])
def test_a_scenario_without_its_load_is_refused_on_both_paths(scen, load, needle, disagg):
    """predict_rows.scenario_load: one check of the count or rate each scenario needs, for
    a colocated and a disaggregated deployment alike; latency with a stated batch of 1
    is accepted."""
    from dse.predict import predict_frame
    import pandas as pd
    base = dict(id="x", model="meta-llama/Llama-3.1-70B", hardware="h100-sxm-80gb", gpus=16,
                tp=4, pp=1, precision="fp8", engine="sglang", scenario=scen, input_len=2000,
                output_len=200, **({"disagg": disagg} if disagg else {}))
    ok = dict(base, id="ok", scenario="latency", batch_or_concurrency=1)
    p = predict_frame(pd.DataFrame([ok, dict(base, **load)]), "rows.csv")
    assert p.status[0].startswith("ok"), p.status[0]
    assert p.status[1].startswith(needle), p.status[1]

