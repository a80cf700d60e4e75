"""The busiest EP rank of dropless MoE training (dse.graph.moe.ep_busiest_factor): the
force-balanced router's random logits (Megatron-Core ``RandomSTE``) route each token to
a uniform random k-subset of the experts, and the layer waits for the most loaded rank."""

import numpy as np
import pytest

from dse.graph.moe import ep_busiest_factor, moe_input_tokens
from dse.graph.ops import Collective, Gemm
from dse.graph.train import layer_ops
from dse.cost.load_balance import ep_load_factor
from dse.predict import predict_row
from dse.spec.layout import PRECISION_FP8, Layout, Workload
from dse.spec.model import get_model
from dse.spec.numerics import as_float

QWEN = "qwen3-235b-a22b"


def _lay(**k):
    return as_float(Layout(**{**dict(tp=2, pp=8, dp=16, ep=32, vpp=4, mbs=1, sp=1, zero=1), **k}))


def _wl(seq=4096):
    return as_float(Workload(global_batch=2048, seq_len=seq, precision=PRECISION_FP8))


def _simulated_max_over_mean(tokens, k, experts, ep, trials, rng):
    """Monte Carlo of the force-balanced router: top-k of standard-normal logits per
    token, experts split evenly over ``ep`` ranks; mean over trials of max rank load /
    mean rank load."""
    out = []
    for _ in range(trials):
        logits = rng.standard_normal((tokens, experts))
        top = np.argpartition(-logits, k - 1, axis=1)[:, :k]
        per_rank = np.bincount((top // (experts // ep)).ravel(), minlength=ep)
        out.append(per_rank.max() / per_rank.mean())
    return float(np.mean(out))


@pytest.mark.parametrize("tokens,k,experts,ep", [(256, 8, 128, 32), (1024, 2, 8, 8), (512, 8, 128, 8)])
def test_factor_bounds_the_simulated_router(tokens, k, experts, ep):
    """The Gaussian extreme-value bound sits above the simulated busiest rank and within
    a factor of two of its excess over the mean (the bound is not loose)."""
    sim = _simulated_max_over_mean(tokens, k, experts, ep, 200, np.random.default_rng(0))
    bound = float(ep_load_factor(tokens * k, ep))
    assert sim <= bound
    assert bound - 1.0 <= 2.0 * (sim - 1.0)


def test_factor_is_one_for_dense_models_and_ep_one():
    T = 4096.0
    assert float(ep_busiest_factor(as_float(get_model("llama3-8b")), _lay(ep=1), T)) == 1.0
    assert float(ep_busiest_factor(as_float(get_model(QWEN)), _lay(ep=1), T)) == 1.0


def test_factor_counts_the_pairs_of_the_ep_group():
    """N = e * T_m * k * ep pairs (expert TP e = 1 here: ep 32 folds over TP ranks)."""
    m, lay, T = as_float(get_model(QWEN)), _lay(), 4096.0
    N = 1.0 * float(moe_input_tokens(T, lay)) * 8 * 32
    assert float(ep_busiest_factor(m, lay, T)) == pytest.approx(1 + np.sqrt(2 * np.log(32) * 31 / N), rel=1e-5)


def test_busiest_rank_carries_the_factor_in_gemms_and_all_to_alls():
    """The expert GEMMs' rows and the token all-to-all bytes are the balanced shares times
    the factor; fewer tokens per micro-batch give a larger factor."""
    m, lay = as_float(get_model(QWEN)), _lay()
    for seq in (4096, 512):
        wl = _wl(seq)
        T = seq * 1.0
        ops = layer_ops(m, wl, lay, 2.0)
        f = float(ep_busiest_factor(m, lay, T))
        Tm = float(moe_input_tokens(T, lay))
        fc1 = next(op for op in ops if isinstance(op, Gemm) and op.name == "fc1")
        a2a = next(op for op in ops if isinstance(op, Collective) and op.name == "ep all-to-all")
        assert float(fc1.m) == pytest.approx(Tm * 8 * 32 / 128 * f, rel=1e-5)
        assert float(a2a.size_bytes) == pytest.approx(Tm * 8 * 4096 * 2 * f, rel=1e-5)
    assert float(ep_busiest_factor(m, lay, 512.0)) > float(ep_busiest_factor(m, lay, 4096.0)) > 1.0


def test_a100_fp8_training_row_is_refused_with_a_status():
    """No fp8 tensor cores: a clear status, no NaN step time passed off as a prediction."""
    row = dict(id="x", model="l", num_layers=32, hidden_size=4096, ffn_hidden_size=14336,
               num_attention_heads=32, num_kv_heads=8, vocab_size=128256, seq_length=4096,
               global_batch_size=64, micro_batch_size=1, gpu="a100-sxm-80gb", num_gpus=8,
               tp=2, pp=1, dp=4, precision="fp8", measured_iter_time_s=1.0)
    out = predict_row(row, "test")
    assert out["status"] == "infeasible: a100-sxm-80gb has no fp8 tensor cores"
    assert np.isnan(out["predicted_iter_time_s"])


def test_padding_to_capacity_balances_every_rank():
    """Token dropping with the expert inputs padded to capacity (NeMo's
    MegatronTokenDropCallback): every expert computes the mean, factor 1."""
    m, lay, T = as_float(get_model(QWEN)), _lay(), 4096.0
    assert float(ep_busiest_factor(m, lay, T, 1)) == 1.0
    wl = as_float(Workload(global_batch=2048, seq_len=4096, precision=PRECISION_FP8, moe_drop_pad=1))
    fc1 = next(op for op in layer_ops(m, wl, lay, 2.0) if isinstance(op, Gemm) and op.name == "fc1")
    assert float(fc1.m) == pytest.approx(float(moe_input_tokens(T, lay)) * 8 * 32 / 128, rel=1e-6)


def test_token_drop_column_is_validated():
    from dse.errors import InputError
    from dse.predict import _token_drop
    assert _token_drop({"moe_token_drop": "pad"}, "t") == 1
    assert _token_drop({}, "t") == 0
    with pytest.raises(InputError, match="moe_token_drop"):
        _token_drop({"moe_token_drop": "drop"}, "t")
