"""The operator graphs carry MLA, shared experts and dense-first / interleaved layers:
their GEMM FLOPs are the model's active parameters (the one count,
:func:`dse.spec.model.layer_params`), and the serving KV cache of an MLA model is its
latent (DeepSeek-V2 arXiv:2405.04434 Table 1: (d_c + d_h^R) l elements per token)."""

import dataclasses

import pytest

from dse.graph.ops import Gemm, KVRead, flops
from dse.infer.forward import forward_ops
from dse.infer.kv_cache import kv_cache_bytes
from dse.spec.layout import Layout, Workload
from dse.spec.model import get_model
from dse.spec.numerics import as_float
from dse.train.ops_table import ops_table
from tests.helpers import h100

MOE = ["deepseek-v3", "llama4-maverick", "qwen2-57b-a14b", "qwen3-30b-a3b", "mixtral-8x7b"]


def _layer_active(m):
    """Active parameters of the mean layer without embeddings and norms."""
    head = m.vocab_size * m.hidden_size
    return (m.active_params(input_embedding=False) - head - m.hidden_size) / m.num_layers


@pytest.mark.parametrize("name", MOE)
def test_training_flops_are_six_active_params_plus_attention(name):
    """pp = 1, no recompute: the step's FLOPs over all GPUs are 6 N_active tokens (the
    LM head included, the input embedding no GEMM) plus causal attention
    3 x 4 B s^2 a d L / 2 (d the mean q.k / v head dim for MLA), within 1 %."""
    m = dataclasses.replace(get_model(name), mtp_layers=0)
    seq, batch = 4096, 16
    lay = Layout(tp=1, pp=1, dp=8, ep=8, mbs=1, zero=1, sp=0)
    df, r = ops_table(m, Workload(global_batch=batch, seq_len=seq), lay, h100())
    total = df["flops"].sum() * lay.tp * lay.dp * lay.cp
    n = m.active_params(input_embedding=False)
    attn = 3 * 4 * batch * seq**2 * m.num_attention_heads * m.head_dim * m.num_layers / 2
    assert total == pytest.approx(6 * n * batch * seq + attn, rel=0.01)
    names = set(df["op"])
    assert {"q down", "kv up"} <= names if m.kv_lora_rank else not names & {"q down", "kv up"}
    assert ("shared fc1" in names) == (m.num_shared_experts > 0)
    assert ("dense fc1" in names) == (m.first_k_dense > 0 or m.moe_layer_step > 1)


def test_multi_token_prediction_adds_a_layer_a_projection_and_a_head_per_depth():
    """DeepSeek-V3's MTP module (mtp_layers 1, dse.graph.train.mtp_ops): 6 x (the mean
    layer's active parameters + the 2h x h projection + the LM head) per token, plus one
    layer's attention, within 1 %; and nothing when mtp_layers is 0."""
    m = get_model("deepseek-v3")
    assert m.mtp_layers == 1
    seq, batch = 4096, 16
    lay = Layout(tp=1, pp=1, dp=8, ep=8, mbs=1, zero=1, sp=0)
    wl = Workload(global_batch=batch, seq_len=seq)
    flops = lambda mm: ops_table(mm, wl, lay, h100())[0]["flops"].sum() * lay.dp
    extra = flops(m) - flops(dataclasses.replace(m, mtp_layers=0))
    per_token = _layer_active(m) + 2 * m.hidden_size ** 2 + m.vocab_size * m.hidden_size
    attn = 3 * 4 * batch * seq**2 * m.num_attention_heads * m.head_dim / 2
    assert extra == pytest.approx(6 * per_token * batch * seq + attn, rel=0.01)


@pytest.mark.parametrize("name", MOE + ["llama3-8b"])
def test_serving_layer_gemm_flops_are_two_active_params_per_token(name):
    """tp = 1, a 4096-token prefill (every expert hit): one layer's GEMM FLOPs are
    2 T x the mean layer's active parameters (router included)."""
    m = get_model(name)
    T = 4096.0
    g = forward_ops(m, T, 1.0, KVRead(1.0, 1.0, 1.0, 1.0, 1.0), 1.0, 1.0, 1, 2.0)
    gemm = sum(float(flops(op)) for op in g.layer if isinstance(op, Gemm))
    assert gemm == pytest.approx(2 * T * _layer_active(m), rel=2e-3)


def test_old_models_get_no_new_operators():
    g = forward_ops(get_model("mixtral-8x7b"), 64.0, 1.0, KVRead(1.0, 1.0, 1.0, 1.0, 1.0), 2, 1, 1, 2.0)
    assert [op.name for op in g.layer if isinstance(op, Gemm)] == ["qkv", "out proj", "fc1", "fc2", "router"]


@pytest.mark.parametrize("tp", [1, 8])
def test_mla_kv_cache_is_the_latent_on_every_tp_rank(tp):
    m = get_model("deepseek-v3")
    b, c = 4, 1000
    assert float(kv_cache_bytes(m, b, c, tp, 1, 1.0)) == 61 * b * c * (512 + 64)
    mm = as_float(m)
    assert float(kv_cache_bytes(mm, b, c, tp, 1, 1.0)) == pytest.approx(61 * b * c * 576, rel=1e-6)


def test_mla_decode_reads_the_latent_and_does_absorbed_flops():
    from dse.cost.attention import decode_attention_bytes
    from dse.infer.decode import decode_attention
    m = get_model("deepseek-v3")
    b, c, tp = 8, 2048, 8
    op = decode_attention(m, b, c, tp)
    kv_bytes = decode_attention_bytes(op.batch, op.heads, op.kv_heads, c, op.d, 1.0) - 2 * b * op.heads * op.d
    assert float(kv_bytes) == pytest.approx(b * c * 576, rel=1e-6)
    # q.k over r + rho = 576 and p.v over r = 512 dims for each of the a/tp heads
    assert float(flops(op)) == pytest.approx(2 * b * (128 / tp) * c * (576 + 512), rel=1e-6)
