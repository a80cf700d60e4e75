"""The per-operator table is a faithful expansion of the step: its exposed times sum to
the breakdown, and its FLOPs are the textbook count."""

import pytest

from dse.spec.layout import RECOMPUTE, Layout, Workload
from dse.train.ops_table import ops_table
from dse.train.step import BREAKDOWN
from tests.helpers import h100, llama70b

LAYOUTS = [
    Layout(tp=4, pp=4, dp=4, mbs=1, vpp=5, recompute=RECOMPUTE["block"], zero=1, sp=1),
    Layout(tp=8, pp=1, dp=8, mbs=1, recompute=RECOMPUTE["full"], zero=3, sp=0),
    Layout(tp=2, pp=2, dp=4, cp=4, mbs=1, recompute=RECOMPUTE["selective"], zero=2, sp=1),
    Layout(tp=4, pp=8, dp=2, mbs=2, recompute=RECOMPUTE["none"], zero=0, sp=1),
]


@pytest.mark.parametrize("lay", LAYOUTS, ids=lambda l: f"tp{l.tp}pp{l.pp}dp{l.dp}cp{l.cp}z{l.zero}r{l.recompute}")
def test_exposed_times_sum_to_breakdown(lay):
    wl = Workload(global_batch=256, seq_len=8192)
    df, r = ops_table(llama70b(), wl, lay, h100())
    per_term = df.groupby("term")["exposed_s"].sum()
    for term in BREAKDOWN:
        assert per_term.get(term, 0.0) == pytest.approx(float(getattr(r, term)), rel=1e-4, abs=1e-6), term
    assert df["exposed_s"].sum() == pytest.approx(float(r.step_time_s), rel=1e-4)
    assert (df["exposed_s"] <= df["time_s"] * (1 + 1e-6)).all()
    assert set(df["bound"]) <= {"tensor", "hbm", "l2", "launch", "nvlink", "nic", "schedule"}


def test_flops_match_six_n_tokens_plus_causal_attention():
    """Dense model, no recompute, pp = 1: the table's FLOPs over all GPUs are 6 N tokens
    (N without the input embedding, which does no GEMM) plus causal attention,
    3 x 4 B s^2 a d L / 2, within 1 %."""
    model = llama70b()
    seq, batch = 4096, 64
    lay = Layout(tp=4, pp=1, dp=8, mbs=1, zero=1, sp=1)
    df, r = ops_table(model, Workload(global_batch=batch, seq_len=seq), lay, h100())
    total = df["flops"].sum() * lay.tp * lay.dp * lay.cp
    n = model.num_params() - model.vocab_size * model.hidden_size * (0 if model.tied_embeddings else 1)
    attn = 3 * 4 * batch * seq**2 * model.num_attention_heads * model.head_dim * model.num_layers / 2
    expected = 6 * n * batch * seq + attn
    assert total == pytest.approx(expected, rel=0.01)
    assert total == pytest.approx(float(r.model_flops), rel=1e-4)


def test_tokens_per_step_above_int32_stays_positive():
    """16384 x 131072 = 2^31 tokens per step overflowed int32 (negative tokens/s): every
    integer enters the cost code as float32 (dse.spec.numerics)."""
    import jax

    from dse.spec.model import get_model
    from dse.train.step import train_step
    wl = Workload(global_batch=16384, seq_len=131072)
    lay = Layout(tp=8, pp=1, dp=8, cp=16, mbs=1, recompute=RECOMPUTE["full"], zero=3, sp=1)
    r = jax.jit(train_step)(get_model("llama3-8b"), wl, lay, h100())
    assert float(r.tokens_per_s) == pytest.approx(16384 * 131072 / float(r.step_time_s), rel=1e-5)
    assert float(r.tokens_per_s) > 0 and float(r.step_time_s) > 0
