"""MoE routing passes and the expert-parallel load imbalance of the serving layer
(dse.infer.moe_serving, hooked into dse.infer.forward.forward_ops)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.graph.ops import KVRead, MemPass
from dse.infer.forward import forward_ops, stage_kernels
from dse.cost.load_balance import ep_busiest_experts, ep_load_factor
from dse.infer.moe_serving import MOE_ROUTING_KERNELS, routing_bytes
from dse.spec.model import get_model

MIX = get_model("mistralai/Mixtral-8x7B-v0.1")
QWEN = get_model("Qwen/Qwen3-30B-A3B")
L8 = get_model("meta-llama/Llama-3.1-8B")
NAME = "moe top-k/permute/finalize"


def _layer(model, tokens, tp=1, ep=1, dp=1, precision=1):
    att = KVRead(tokens, model.num_attention_heads / tp, 1.0, 1000.0, 128.0)
    g = forward_ops(model, tokens, tokens, att, tp, 1, precision, 2.0, ep, dp)
    return {op.name: op for op in g.layer}


def test_no_imbalance_without_ep():
    assert float(ep_load_factor(1.0, 1)) == 1.0
    assert float(ep_load_factor(1e6, 1)) == 1.0


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([2, 4, 8, 16, 32]), st.integers(1, 1 << 16), st.integers(1, 1 << 16))
def test_imbalance_falls_with_pairs_and_exceeds_one(ep, a, b):
    lo, hi = sorted((a, b))
    f_lo, f_hi = float(ep_load_factor(lo, ep)), float(ep_load_factor(hi, ep))
    assert f_hi <= f_lo + 1e-6 and f_hi > 1.0


def test_imbalance_bounds_the_simulated_most_loaded_rank():
    """Multinomial routing of N pairs over ep ranks (uniform): the formula is the
    Gaussian bound on E[max], above the simulated mean of the maximum and within 10 %
    of it once the counts are large."""
    rng = np.random.default_rng(0)
    for ep, n in ((4, 512), (8, 512), (8, 16384), (32, 4096)):
        counts = rng.multinomial(n, [1.0 / ep] * ep, size=4000)
        sim = counts.max(axis=1).mean() / (n / ep)
        f = float(ep_load_factor(n, ep))
        assert sim <= f + 1e-3, (ep, n, sim, f)
        assert f - 1.0 <= 1.6 * (sim - 1.0) + 0.01, (ep, n, sim, f)


def test_routing_bytes_formula():
    # T = 10 tokens, P = 20 pairs, h = 100, E = 8, el = 2, q = 1
    assert float(routing_bytes(10.0, 20.0, 100.0, 8.0, 2.0, 1.0)) == (1 + 2) * 100 * 30 + 4 * 10 * 8


def test_routing_pass_only_on_moe_models():
    dense = _layer(L8, 64.0)[NAME]
    moe = _layer(MIX, 64.0)[NAME]
    assert isinstance(moe, MemPass) and float(dense.calls) == 0.0 and float(moe.calls) == 1.0
    assert float(moe.kernels) == MOE_ROUTING_KERNELS
    # TP: every GPU routes all T tokens, k pairs each (ep = 1)
    h = MIX.hidden_size
    assert float(moe.bytes_moved) == (2 + 2) * h * (64 + 64 * MIX.top_k) + 4 * 64 * MIX.num_experts


def test_routing_pass_counts_launches():
    """A MoE layer launches its 3 linears (fc1, fc2, router) and the 4 routing kernels
    where a dense layer launches fc1 / fc2: one linear + MOE_ROUTING_KERNELS more."""
    att = KVRead(8.0, QWEN.num_attention_heads, 1.0, 1000.0, 128.0)
    att_d = KVRead(8.0, L8.num_attention_heads, 1.0, 1000.0, 128.0)
    head_emb = 6.0        # kernels outside the layers are alike for both models: bound
    per_moe = float(stage_kernels(QWEN, 8.0, 8.0, att, 1, 1, 1, 2.0)) / QWEN.num_layers
    per_dense = float(stage_kernels(L8, 8.0, 8.0, att_d, 1, 1, 1, 2.0)) / L8.num_layers
    assert abs((per_moe - per_dense) - (1.0 + MOE_ROUTING_KERNELS)) < head_emb / QWEN.num_layers


def test_ep_rank_carries_the_imbalance():
    """Under EP over attention-DP ranks the expert GEMM is costed on the most loaded
    rank: its tokens per expert times the hit experts is the mean pairs x the factor."""
    T, ep = 16.0, 8
    fc1 = _layer(MIX, T, 1, ep, ep)["fc1"]
    pairs = float(fc1.m * fc1.count)
    mean = T * ep * MIX.top_k / ep
    assert abs(pairs / mean - float(ep_load_factor(T * ep * MIX.top_k, ep))) < 1e-4


def test_grouped_expert_gemm_is_split_only_when_its_tiles_leave_sms_idle():
    """Stream-K splits K over idle SMs (dse.graph.ops.skinny_split); the tiles of all the
    experts of one grouped GEMM share the SMs, so 128 experts of 512 tokens fill a B200
    (4 x 6 tiles each) and run unsplit, while one such problem alone is split."""
    from dse.graph.ops import bound_terms, skinny_split
    from dse.spec.hardware import get_hardware
    from dse.cost.rates import rates
    hw = get_hardware("b200")
    _, alone = skinny_split(512.0, 1536.0, 2048.0, hw)
    _, grouped = skinny_split(512.0, 1536.0, 2048.0, hw, 128.0)
    assert float(alone) > 1.0 and float(grouped) == 1.0
    fc1 = _layer(QWEN, 8192.0, precision=3)["fc1"]
    assert float(fc1.count) == 128.0
    r = rates(hw, 3)
    _, t_hbm, _ = (float(x) for x in bound_terms(fc1, hw, r)[:3])
    # unsplit: bf16 C written once, fp4 A and B read once, at the achieved bandwidth
    el = float(r.linear_bytes)
    per_expert = 512 * 1536 * 2.0 + (512 * 2048 + 2048 * 1536) * el
    assert t_hbm == pytest.approx(128 * per_expert / float(r.hbm_bw_bytes_per_s), rel=1e-4)


def _simulated_busiest_experts(tokens, k, experts, ep, trials, rng):
    """Monte Carlo of uniform top-k routing of ``tokens`` tokens: the distinct experts
    the busiest of ``ep`` ranks (``experts / ep`` consecutive experts each) must read."""
    out = []
    for _ in range(trials):
        chosen = np.argsort(rng.random((tokens, experts)), axis=1)[:, :k]
        hit = np.unique(chosen)
        out.append(np.bincount(hit // (experts // ep), minlength=ep).max())
    return float(np.mean(out))


def test_busiest_rank_experts_bounds_the_simulated_count():
    """The busiest rank's distinct experts (dse.cost.load_balance.ep_busiest_experts): the
    Gaussian bound on the hypergeometric maximum lies above the simulated mean maximum and
    within 30 % of it, for decode batches of DeepSeek-R1's 256 experts (top-8)."""
    rng = np.random.default_rng(1)
    for tokens, ep in ((1, 8), (4, 8), (16, 8), (4, 4), (64, 32)):
        sim = _simulated_busiest_experts(tokens, 8, 256, ep, 2000, rng)
        hit = 256.0 * (1.0 - (1.0 - 8.0 / 256.0) ** tokens)
        bound = float(ep_busiest_experts(hit, 256, ep))
        assert sim <= bound + 0.05 and bound <= 1.3 * sim, (tokens, ep, sim, bound)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([1, 2, 4, 8, 16, 32]), st.floats(0.0, 256.0))
def test_busiest_rank_experts_between_mean_and_capacity(ep, hit):
    b = float(ep_busiest_experts(hit, 256, ep))
    assert hit / ep * (1 - 1e-5) - 1e-6 <= b <= 256 / ep * (1 + 1e-5)   # float32
    if ep == 1:
        assert b == pytest.approx(hit, rel=1e-5)
    assert abs(float(ep_busiest_experts(256.0, 256, ep)) - 256 / ep) < 1e-4  # every expert hit


def test_decode_with_ep_reads_the_busiest_ranks_experts():
    """Decode of 4 sequences of DeepSeek-R1 on TP 8 / EP 8: the expert GEMMs stream the
    busiest rank's experts (more than the mean 30.5 / 8), TP 8 / EP 1 the mean (all
    ranks hold every expert)."""
    dsr1 = get_model("deepseek-ai/DeepSeek-R1")
    hit = 256.0 * (1.0 - (1.0 - 8.0 / 256.0) ** 4)
    ep8 = float(_layer(dsr1, 4.0, tp=8, ep=8)["fc1"].count)
    ep1 = float(_layer(dsr1, 4.0, tp=8, ep=1)["fc1"].count)
    w = 1.0 - 3.0 / 61.0                                     # first 3 of 61 layers dense
    assert ep1 == pytest.approx(hit * w, rel=1e-5)
    assert ep8 > 1.4 * hit / 8 * w
