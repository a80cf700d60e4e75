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


def _small_gpt():
    from dse.spec.model import Model
    return Model(num_layers=12, hidden_size=1024, ffn_hidden_size=4096, num_attention_heads=16,
                 num_kv_heads=16, vocab_size=50257, seq_length=1024, gated_mlp=0, dropout=1,
                 tied_embeddings=1, name="gpt-h1024-l12")


@pytest.mark.parametrize("tp", [1, 8])
def test_host_bound_small_model_sums_to_step(tp):
    """A 0.2B GPT micro-batch of one sequence on A100 is host-bound (dse.train.layer):
    the table carries the stall as ``host launch stall`` rows and still sums to the step."""
    from dse.spec.hardware import get_hardware
    from dse.spec.layout import ATTENTION, FRAMEWORK, PRECISION
    wl = Workload(global_batch=16, seq_len=1024, precision=PRECISION["fp16"],
                  attention=ATTENTION["unfused"], framework=FRAMEWORK["deepspeed"])
    lay = Layout(tp=tp, pp=1, dp=8 // tp, mbs=1, recompute=RECOMPUTE["full"], zero=1, sp=0)
    df, r = ops_table(_small_gpt(), wl, lay, get_hardware("a100-sxm-80gb"))
    stall = df[df["op"] == "host launch stall"]
    assert set(stall["phase"]) == {"fwd", "bwd", "recompute"}
    assert (stall["bound"] == "launch").all()
    assert df["exposed_s"].sum() == pytest.approx(float(r.step_time_s), rel=1e-4)
    per_term = df.groupby("term")["exposed_s"].sum()
    for term in BREAKDOWN:
        assert per_term.get(term, 0.0) == pytest.approx(float(getattr(r, term)), rel=1e-4, abs=1e-6), term


def test_host_floor_is_kernels_times_host_op_s():
    """In the host-bound regime a layer pass costs exactly its kernel count times
    HOST_OP_S; with a large micro-batch the floor does not bind."""
    import jax.numpy as jnp
    from dse.graph.ops import host_kernels
    from dse.graph.train import layer_ops
    from dse.spec.hardware import get_hardware
    from dse.spec.layout import ATTENTION, FRAMEWORK, PRECISION
    from dse.train.layer import HOST_OP_S, layer_cost
    from dse.cost.rates import rates
    hw = get_hardware("a100-sxm-80gb")
    wl = Workload(global_batch=16, seq_len=1024, precision=PRECISION["fp16"],
                  attention=ATTENTION["unfused"], framework=FRAMEWORK["deepspeed"])
    r = rates(hw, wl.precision)
    lay = Layout(tp=1, pp=1, dp=8, mbs=1, recompute=RECOMPUTE["full"], zero=1, sp=0)
    lc = layer_cost(_small_gpt(), wl, lay, hw, r)
    ops = layer_ops(_small_gpt(), wl, lay, r.act_bytes)
    kern = lambda ph: float(sum(jnp.asarray(op.calls * host_kernels(op)) for op in ops if op.phase == ph))
    assert float(lc.host_stall_fwd_s) > 0 and float(lc.host_stall_bwd_s) > 0
    assert float(lc.fwd_compute_s) == pytest.approx(kern("fwd") * HOST_OP_S.get(wl.framework, HOST_OP_S[0]), rel=1e-6)
    assert float(lc.bwd_compute_s) == pytest.approx(kern("bwd") * HOST_OP_S.get(wl.framework, HOST_OP_S[0]), rel=1e-6)
    big = layer_cost(_small_gpt(), wl, Layout(tp=1, pp=1, dp=1, mbs=16, recompute=RECOMPUTE["full"]), hw, r)
    assert float(big.host_stall_fwd_s) == 0.0 and float(big.host_stall_bwd_s) == 0.0
