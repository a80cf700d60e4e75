"""Hybrid linear attention (Qwen3-Next, Qwen3.5: Gated DeltaNet layers beside gated
full-attention layers; dse.spec.model "Hybrid linear attention"): the parameter count of
the cards, a KV cache only on the full layers plus a per-sequence recurrent state, and a
decode step whose context-dependent part shrinks to the full layers' share."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from dse.cost.linear_attention import deltanet_chunk_flops
from dse.errors import InputError
from dse.graph.ops import flops
from dse.graph.train import layer_ops
from dse.infer.engines import engine_profile
from dse.infer.forward import linear_attention_ops
from dse.infer.kv_cache import kv_cache_bytes, recurrent_state_bytes
from dse.infer.serving import Deployment, iteration_s, prefill_s
from dse.graph.ops import Attention, KVRead
from dse.spec.hardware import get_hardware
from dse.spec.layout import Layout, Workload
from dse.spec.model import get_model, linear_attention_params, linear_share, model_from_dict

Q35 = get_model("qwen3.5-397b-a17b")
QN = get_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
B200 = get_hardware("b200")
SGLANG = engine_profile("sglang 0.5.9")[0]


def _dep(model, tp=8):
    return Deployment(model, B200, SGLANG, tp, 1, 2, 1.0)


@pytest.mark.parametrize("name,total,active", [
    ("qwen3.5-397b-a17b", 397e9, 17e9), ("qwen3.5-122b-a10b", 122e9, 10e9),
    ("qwen3.5-35b-a3b", 35e9, 3e9), ("qwen3-next-80b-a3b", 80e9, 3e9)])
def test_cards(name, total, active):
    """Totals within 1 %, activated within the cards' rounding (A3B cards round 3.5 -> 3)."""
    m = get_model(name)
    assert m.num_params() == pytest.approx(total, rel=0.01)
    assert m.active_params() == pytest.approx(active, rel=0.3)


def test_deltanet_layer_parameters():
    """Qwen3-Next: in_proj_qkvz 2048 -> 12288, in_proj_ba -> 64, conv 4 x 8192,
    out_proj 4096 -> 2048, A_log + dt_bias 64, norm 128 (HF Qwen3NextGatedDeltaNet)."""
    assert linear_attention_params(QN) == 2048 * 12288 + 2048 * 64 + 4 * 8192 + 4096 * 2048 + 64 + 128
    assert linear_share(QN) == 36 / 48 and linear_share(get_model("llama3-8b")) == 0.0


def test_kv_cache_is_the_full_layers_plus_a_fixed_state():
    """15 of 60 layers cache K and V (one 256-wide KV head per GPU at TP 8); the 45
    DeltaNet layers hold 8 x 128 x 128 fp32 plus 3 x 12288/8 bf16 conv inputs each."""
    state = 45 * (8 * 128 * 128 * 4 + 3 * 12288 / 8 * 2)
    assert float(recurrent_state_bytes(Q35, 1, 8, 1)) == pytest.approx(state)
    for c in (1.0, 4096.0, 131072.0):
        per_seq = float(kv_cache_bytes(Q35, 1, c, 8, 1, 2.0))
        assert per_seq == pytest.approx(15 * c * 2 * 256 * 2.0 + state)


def test_decode_context_cost_is_the_full_layers_share():
    """From 8k to 128k of context the step grows by the full layers' KV reads only: a
    quarter of what an all-full-attention model of the same shapes adds."""
    full = Q35.replace(linear_layers=0)
    grow = lambda m: iteration_s(_dep(m), 32.0, 131072.0) - iteration_s(_dep(m), 32.0, 8192.0)
    assert grow(Q35) == pytest.approx(0.25 * grow(full), rel=0.05)


def test_decode_state_traffic_scales_with_the_batch():
    """Each decode sequence reads and writes its whole state on every DeltaNet layer."""
    kv = KVRead(64.0, 4.0, 1.0, 1000.0, 256.0)
    ops = {op.name: op for op in linear_attention_ops(Q35, 64.0, kv, 8.0, 2.0)}
    st_op = ops["deltanet recurrent state"]
    per_seq = 8 * 128 * 128 * 4 + 3 * 12288 / 8 * 2
    assert float(st_op.bytes_moved) == pytest.approx(2 * 64 * per_seq)
    assert float(st_op.calls) == pytest.approx(0.75)
    assert float(flops(ops["deltanet chunked scan"])) == 0.0        # no prompt tokens
    assert float(ops["deltanet chunked scan"].calls) == 0.0          # and no launch


def test_prefill_scan_flops():
    """Prompt tokens run the chunkwise kernel: C (6 d_k + 4 d_v) + 6 d_k d_v per token per
    value head (64 / 8 heads per GPU), on 3 of 4 layers."""
    att = Attention(1.0, 4.0, 1.0, 4096.0, 4096.0, 256.0, 256.0, 0.5, 0.0, 1.0)
    ops = {op.name: op for op in linear_attention_ops(Q35, 4096.0, att, 8.0, 2.0)}
    assert deltanet_chunk_flops(Q35) == 64 * (6 * 128 + 4 * 128) + 6 * 128 * 128
    assert float(flops(ops["deltanet chunked scan"])) == pytest.approx(
        0.75 * 4096 * 8 * deltanet_chunk_flops(Q35))
    assert float(ops["deltanet recurrent state"].calls) == 0.0       # no decode sequence
    assert prefill_s(_dep(Q35), 1.0, 32768.0) < prefill_s(_dep(Q35.replace(linear_layers=0)), 1.0, 32768.0)


@settings(max_examples=25, deadline=None)
@given(c=st.floats(16.0, 2.0e5), dc=st.floats(1.0, 5.0e4), b=st.integers(1, 256))
def test_decode_never_gets_faster_with_more_context(c, dc, b):
    dep = _dep(QN, 4)
    assert iteration_s(dep, float(b), c + dc) >= iteration_s(dep, float(b), c) * (1 - 1e-6)


def test_training_graph_splits_the_layer_kinds():
    """Training: attention and its projections on the full share only, the DeltaNet
    projections and scan on the rest."""
    wl, lay = Workload(global_batch=64, seq_len=4096), Layout(tp=1, pp=1, dp=8, mbs=1)
    ops = {(op.name, op.phase): op for op in layer_ops(QN, wl, lay, 2.0)}
    assert float(ops[("attention", "fwd")].calls) == pytest.approx(0.25)
    assert float(ops[("qkv", "fwd")].calls) == pytest.approx(0.25)
    assert float(ops[("deltanet in_proj_qkvz", "fwd")].calls) == pytest.approx(0.75)
    assert ("deltanet chunked scan", "bwd") in ops


@pytest.mark.parametrize("key", ["full_attention_interval", "layer_types"])
def test_hf_config_reads_the_hybrid(tmp_path, key):
    cfg = {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next",
           "num_hidden_layers": 48, "hidden_size": 2048, "intermediate_size": 5120,
           "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
           "num_experts": 512, "num_experts_per_tok": 10, "decoder_sparse_step": 1,
           "mlp_only_layers": [], "num_attention_heads": 16, "num_key_value_heads": 2,
           "head_dim": 256, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
           "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
           "vocab_size": 151936, "max_position_embeddings": 262144, "hidden_act": "silu",
           "rms_norm_eps": 1e-6, "tie_word_embeddings": False}
    if key == "full_attention_interval":
        cfg[key] = 4
    else:
        cfg[key] = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(48)]
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    m = get_model(str(p))
    assert (m.linear_layers, m.linear_value_heads, m.attn_output_gate) == (36, 32, 1)
    assert m.num_params() == QN.num_params()


@pytest.mark.parametrize("extra,field", [
    ({"linear_layers": 3}, "linear_key_heads"),
    ({"linear_layers": 4, "linear_key_heads": 1, "linear_value_heads": 1, "linear_key_head_dim": 8,
      "linear_value_head_dim": 8, "linear_conv_kernel": 4}, "linear_layers"),
])
def test_incomplete_hybrid_is_refused(extra, field):
    base = {"num_layers": 4, "hidden_size": 1024, "ffn_hidden_size": 4096,
            "num_attention_heads": 8, "num_kv_heads": 8, "vocab_size": 1000}
    with pytest.raises(InputError) as e:
        model_from_dict({**base, **extra}, "m.toml", "m")
    assert e.value.field == field
