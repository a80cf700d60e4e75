"""DeepSeek Sparse Attention (DSA: DeepSeek-V3.2, GLM-5): the attention core attends the
indexer's top-k keys, the KV cache keeps every token plus the indexer's keys, and the
indexer adds its projections, a scoring pass over the whole context and a top-k pass
(dse.spec.model "Sparse attention", dse.infer.forward.indexer_ops)."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from dse.errors import InputError
from dse.infer.engines import engine_profile
from dse.infer.forward import indexer_ops
from dse.infer.kv_cache import kv_cache_bytes
from dse.infer.serving import Deployment, iteration_s, prefill_s
from dse.spec.hardware import get_hardware
from dse.spec.model import attention_window, get_model, indexer_params, model_from_dict

V3 = get_model("deepseek-v3")
V32 = get_model("deepseek-v3.2")
H200 = get_hardware("h200-sxm-141gb")
SGLANG = engine_profile("sglang 0.5.9")[0]


def _dep(model):
    return Deployment(model, H200, SGLANG, 8, 1, 2, 1.0)


def test_v32_is_v3_plus_its_indexers():
    """Same shapes as V3; the 61 indexers (q 1536 x 64 x 128, k 7168 x 128, weights
    7168 x 64) add 0.85B parameters."""
    assert (V32.index_topk, V32.index_heads, V32.index_head_dim) == (2048, 64, 128)
    per_layer = 1536 * 64 * 128 + 7168 * 128 + 7168 * 64
    assert indexer_params(V32) == per_layer
    assert V32.num_params() - V3.num_params() == 61 * per_layer
    assert indexer_params(V3) == 0.0


def test_glm5_matches_its_card():
    """GLM-5: 744B total, 40B activated (model card)."""
    m = get_model("zai-org/GLM-5-FP8")
    assert m.name == "glm5"
    assert m.num_params() == pytest.approx(744e9, rel=0.01)
    assert m.active_params(input_embedding=False) == pytest.approx(40e9, rel=0.03)


def test_window_is_sparse_on_every_layer():
    w = attention_window(V32)
    assert (w.keys, w.share, w.sparse) == (2048, 1.0, True)
    assert attention_window(V3) is None


def test_kv_cache_keeps_every_token_and_the_index_keys():
    """Unlike a sliding window the cache grows with the whole context: MLA latent (576
    elements) plus 128 + 4 index-key bytes per token per layer."""
    for c in (1024.0, 8192.0, 65536.0):
        dense = float(kv_cache_bytes(V3, 1, c, 8, 1, 1.0))
        sparse = float(kv_cache_bytes(V32, 1, c, 8, 1, 1.0))
        assert sparse == pytest.approx(dense + 61 * c * 132.0)


def test_long_context_decode_stops_growing_with_the_attention():
    """Past the top-k the MLA core reads 2048 keys whatever the context; what still grows
    is the indexer's ~132 bytes per key (against the latent's 576 x 2)."""
    def grow(m):
        return iteration_s(_dep(m), 64.0, 131072.0) - iteration_s(_dep(m), 64.0, 16384.0)
    assert grow(V32) < 0.5 * grow(V3)
    assert iteration_s(_dep(V32), 64.0, 131072.0) < iteration_s(_dep(V3), 64.0, 131072.0)


def test_short_context_pays_only_the_indexer():
    """Below the top-k the cores are identical, so DSA is slower by its indexer alone."""
    assert iteration_s(_dep(V32), 64.0, 1024.0) > iteration_s(_dep(V3), 64.0, 1024.0)
    assert prefill_s(_dep(V32), 1.0, 1024.0) > prefill_s(_dep(V3), 1.0, 1024.0)


def test_indexer_ops_scale_with_the_context():
    """Decode scoring reads c (d_I + d_I/32) bytes per sequence; prefill scoring does
    2 T H d_I s causal FLOPs."""
    from dse.graph.ops import KVRead, Attention, bytes_moved, flops
    from dse.cost.rates import rates
    r = rates(H200, 2)
    kv = KVRead(4.0, 16.0, 1.0, 10000.0, 576.0, kv_bytes=1.0)
    ops = indexer_ops(V32, 4.0, kv)
    names = [op.name for op in ops]
    assert names == ["indexer q", "indexer k", "indexer weights", "indexer logits", "indexer top-k"]
    scores = ops[3]
    assert float(bytes_moved(scores, H200, r)) >= 4 * 10000 * 132.0
    assert float(flops(scores)) == pytest.approx(2 * 4 * 64 * 10000 * 132, rel=0.05)
    att = Attention(1.0, 16.0, 16.0, 4096.0, 4096.0, 192.0, 192.0, 0.5, 0.0, 1.0)
    pf = indexer_ops(V32, 4096.0, att)[3]
    assert float(flops(pf)) == pytest.approx(2 * 4096 * 64 * 128 * 4096 * 0.5)
    assert indexer_ops(V3, 4.0, kv) == ()


@settings(max_examples=25, deadline=None)
@given(c=st.floats(64.0, 2.0e5), dc=st.floats(1.0, 5.0e4), b=st.integers(1, 256))
def test_decode_never_gets_faster_with_more_context(c, dc, b):
    dep = _dep(V32)
    assert iteration_s(dep, float(b), c + dc) >= iteration_s(dep, float(b), c) * (1 - 1e-6)


def test_hf_config_reads_the_indexer(tmp_path):
    cfg = {"architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32",
           "num_hidden_layers": 61, "hidden_size": 7168, "intermediate_size": 18432,
           "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
           "num_experts_per_tok": 8, "first_k_dense_replace": 3, "num_attention_heads": 128,
           "num_key_value_heads": 128, "kv_lora_rank": 512, "q_lora_rank": 1536,
           "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
           "vocab_size": 129280, "max_position_embeddings": 163840, "hidden_act": "silu",
           "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
           "index_topk": 2048, "index_n_heads": 64, "index_head_dim": 128}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    m = get_model(str(p))
    assert (m.index_topk, m.index_heads, m.index_head_dim) == (2048, 64, 128)
    assert m.num_params() == V32.num_params()


@pytest.mark.parametrize("extra,field", [
    ({"index_topk": 2048}, "index_heads"),
    ({"index_topk": 2048, "index_heads": 64}, "index_head_dim"),
    ({"index_topk": 2048, "index_heads": 64, "index_head_dim": 128, "sliding_window": 4096},
     "index_topk"),
])
def test_incomplete_indexer_is_refused(extra, field):
    base = {"num_layers": 4, "hidden_size": 1024, "ffn_hidden_size": 4096,
            "num_attention_heads": 8, "num_kv_heads": 8, "vocab_size": 1000}
    with pytest.raises(InputError) as e:
        model_from_dict({**base, **extra}, "m.toml", "m")
    assert e.value.field == field


def test_prompt_attention_adds_only_the_indexer_scoring():
    """A mixed pass's separate prompt attention adds the indexer's scoring and top-k for
    the prompt queries; its projections are in the pass's token count, not launched again."""
    from dse.cost.rates import rates
    from dse.graph.ops import time_s
    from dse.infer.forward import indexer_scoring_ops, prompt_attention_s
    from dse.infer.prefill import prefill_attention
    r = rates(H200, 2)
    fa32, fa3 = prefill_attention(V32, 2.0, 4096.0, 8), prefill_attention(V3, 2.0, 4096.0, 8)
    scoring = indexer_scoring_ops(V32, 0.0, fa32)
    assert [op.name for op in scoring] == ["indexer logits", "indexer top-k"]
    extra = prompt_attention_s(V32, fa32, H200, r) - time_s(fa32, H200, r)
    assert float(extra) == pytest.approx(float(sum(time_s(op, H200, r) for op in scoring)))
    assert prompt_attention_s(V3, fa3, H200, r) == time_s(fa3, H200, r)
