"""MoE / MLA architecture fields: parameter counts of real models against their model
cards (out of sample: published totals, never used to fit anything), Hugging Face
config.json parsing of the MoE / MLA keys (excerpts of the public configs in
tests/data/hf/, each naming its repo), the catalog and its aliases, and bad input."""

import json
from pathlib import Path

import pytest

from dse.errors import InputError
from dse.spec.model import (catalog, dense_layer_fraction, get_model, layer_counts,
                            layer_params)

HF = Path(__file__).resolve().parents[1] / "data" / "hf"

# (fixture, total B, active B, active counts the input embedding, source)
CARDS = [
    ("deepseek-v3", 671.0, 36.6, False,
     "DeepSeek-V3 report arXiv:2412.19437 (671B total); deepseek-ai/DeepSeek-V3 "
     "README_WEIGHTS.md: 36.6B activated incl. the 0.9B output head"),
    ("qwen3-235b-a22b", 235.0, 22.0, True, "Qwen/Qwen3-235B-A22B model card: 235B total, 22B activated"),
    ("qwen3-30b-a3b", 30.5, 3.3, True, "Qwen/Qwen3-30B-A3B model card: 30.5B total, 3.3B activated"),
    ("qwen2-57b-a14b", 57.0, 14.0, True, "Qwen2 report arXiv:2407.10671 Table 1: 57B total, 14B activated"),
    ("mixtral-8x22b", 141.0, 39.0, True, "Mistral AI Mixtral 8x22B announcement: 141B total, 39B active"),
    ("gpt-oss-120b", 116.83, 5.13, False, "OpenAI gpt-oss model card Table 1: 116.83B total, 5.13B active"),
    ("llama4-scout", 109.0, 17.0, True, "meta-llama/Llama-4-Scout-17B-16E model card: 109B total, 17B active"),
    ("llama4-maverick", 400.0, 17.0, True, "meta-llama/Llama-4-Maverick-17B-128E model card: 400B total, 17B active"),
]


@pytest.mark.parametrize("fixture,total_b,active_b,with_emb,source", CARDS, ids=[c[0] for c in CARDS])
def test_out_of_sample_parameter_counts_match_model_cards(fixture, total_b, active_b, with_emb, source):
    m = get_model(str(HF / f"{fixture}.json"))
    assert m.num_params() / 1e9 == pytest.approx(total_b, rel=0.02), source
    assert m.active_params(with_emb) / 1e9 == pytest.approx(active_b, rel=0.02), source


def test_qwen2_moe_uses_the_expert_width_not_the_dense_width():
    """Qwen2-57B-A14B was read as 367 B (intermediate_size 18944 taken per expert)."""
    m = get_model(str(HF / "qwen2-57b-a14b.json"))
    assert (m.moe_ffn_hidden_size, m.num_shared_experts, m.shared_expert_ffn_hidden_size) == (2560, 1, 20480)
    assert 56e9 < m.num_params() < 59e9


def test_deepseek_v3_config_is_parsed():
    m = get_model(str(HF / "deepseek-v3.json"))
    assert (m.num_experts, m.top_k, m.first_k_dense, m.num_shared_experts) == (256, 8, 3, 1)
    assert (m.kv_lora_rank, m.q_lora_rank, m.qk_rope_head_dim, m.qk_nope_head_dim,
            m.v_head_dim) == (512, 1536, 64, 128, 128)
    assert [float(x) for x in layer_counts(m)] == [58.0, 3.0]
    assert float(dense_layer_fraction(m)) == pytest.approx(3 / 61)
    # one MLA block: q_a + q_b + kv_a + kv_b + o (HF DeepseekV3Attention shapes)
    want = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168
    assert float(layer_params(m).attention) == want


def test_llama4_text_config_and_interleaved_moe():
    mav = get_model(str(HF / "llama4-maverick.json"))
    assert (mav.moe_ffn_hidden_size, mav.ffn_hidden_size, mav.moe_layer_step) == (8192, 16384, 2)
    assert [float(x) for x in layer_counts(mav)] == [24.0, 24.0]
    scout = get_model(str(HF / "llama4-scout.json"))
    assert [float(x) for x in layer_counts(scout)] == [48.0, 0.0]
    assert scout.num_shared_experts == 1 and float(dense_layer_fraction(scout)) == 0.0


# catalog name -> fixture with the same layer shapes
SAME = {"deepseek-v3": "deepseek-v3", "deepseek-r1": "deepseek-v3", "qwen3-235b-a22b": "qwen3-235b-a22b",
        "qwen3-30b-a3b": "qwen3-30b-a3b", "qwen2-57b-a14b": "qwen2-57b-a14b",
        "mixtral-8x22b": "mixtral-8x22b", "gpt-oss-120b": "gpt-oss-120b",
        "llama4-scout": "llama4-scout", "llama4-maverick": "llama4-maverick",
        "gemma2-27b": "gemma-2-27b"}


@pytest.mark.parametrize("name", sorted(SAME))
def test_catalog_agrees_with_the_config_json(name):
    cat = catalog()[name]
    hf = get_model(str(HF / f"{SAME[name]}.json"))
    assert cat.replace(seq_length=0, name="", description="") == hf.replace(seq_length=0, name="", description="")


@pytest.mark.parametrize("alias,table", [
    ("llama3.1-8b", "llama3-8b"), ("llama3.1-70b", "llama3-70b"), ("llama3.3-70b", "llama3-70b"),
    ("llama3.1-405b", "llama3-405b"), ("deepseek-ai/DeepSeek-R1", "deepseek-r1"),
    ("Qwen/Qwen3-235B-A22B", "qwen3-235b-a22b"), ("openai/gpt-oss-120b", "gpt-oss-120b"),
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "llama4-maverick"), ("Qwen/Qwen3-8B", "qwen3-8b"),
    ("Qwen3-235B-A22B", "qwen3-235b-a22b"), (" Mixtral-8x7B ", "mixtral-8x7b"),   # any letter case
])
def test_short_names_and_hf_ids_resolve(alias, table):
    assert get_model(alias) is catalog()[table]


def test_dense_qwen3_counts():
    # Qwen/Qwen3-8B and Qwen/Qwen3-32B model cards: 8.2B and 32.8B parameters
    assert get_model("qwen3-8b").num_params() / 1e9 == pytest.approx(8.2, rel=0.01)
    assert get_model("qwen3-32b").num_params() / 1e9 == pytest.approx(32.8, rel=0.01)


def _write(tmp_path, **over):
    c = json.loads((HF / "deepseek-v3.json").read_text())
    c.update(over)
    p = tmp_path / "m" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps(c))
    return str(p)


@pytest.mark.parametrize("over,field", [
    ({"qk_rope_head_dim": 0}, "qk_rope_head_dim"),
    ({"moe_layer_freq": 2}, "moe_layer_freq"),
    ({"mlp_only_layers": [3, 7]}, "mlp_only_layers"),
    ({"kv_lora_rank": -1}, "kv_lora_rank"),
    ({"first_k_dense_replace": 61}, "first_k_dense"),
])
def test_bad_moe_mla_values_name_the_field(tmp_path, over, field):
    with pytest.raises(InputError) as e:
        get_model(_write(tmp_path, **over))
    assert field in str(e.value)


def test_bad_toml_arch_field(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text("[x]\nnum_layers = 2\nhidden_size = 64\nffn_hidden_size = 128\nnum_attention_heads = 4\n"
                 "num_kv_heads = 4\nvocab_size = 100\nkv_lora_rank = -3\n")
    with pytest.raises(InputError, match="x.kv_lora_rank: must be a non-negative integer"):
        get_model(str(p))


def test_gemma_mlp_is_gated_and_its_embeddings_tied_without_the_keys(tmp_path):
    """Gemma's GeGLU MLP (``gelu_pytorch_tanh``, transformers ``GemmaMLP``: gate, up and down
    projections) is gated, and ``Gemma2Config`` / ``Gemma3TextConfig`` tie the embeddings
    by default: a Gemma config without ``tie_word_embeddings`` was read as 20.6 B (a plain
    MLP, untied) instead of the model card's 27.2 B."""
    g2 = get_model(str(HF / "gemma-2-27b.json"))
    assert (g2.gated_mlp, g2.tied_embeddings, g2.sliding_window, g2.window_layers) == (1, 1, 4096, 23)
    assert g2.num_params() == pytest.approx(27.2e9, rel=0.01)
    text = {"model_type": "gemma3_text", "head_dim": 128, "hidden_activation": "gelu_pytorch_tanh",
            "hidden_size": 5376, "intermediate_size": 21504, "num_attention_heads": 32,
            "num_hidden_layers": 62, "num_key_value_heads": 16, "rms_norm_eps": 1e-6,
            "sliding_window": 1024, "sliding_window_pattern": 6, "vocab_size": 262208}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "gemma3", "text_config": text}))
    g3 = get_model(str(path))
    assert (g3.gated_mlp, g3.tied_embeddings, g3.window_layers) == (1, 1, 52)
    assert g3.replace(seq_length=0, name="", description="") == \
        catalog()["gemma3-27b"].replace(seq_length=0, name="", description="")
    # the default is the family's: a Llama-style config without the key stays untied
    path.write_text(json.dumps({**text, "model_type": "llama", "hidden_activation": "silu"}))
    assert get_model(str(path)).tied_embeddings == 0
