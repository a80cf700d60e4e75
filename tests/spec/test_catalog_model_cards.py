"""Catalog entries added from their Hugging Face config.json (dse/spec/catalog/models.toml,
each entry's ``source``) give the parameter count their model card states: an independent
check of the layer shapes typed in (a wrong width or layer count moves the total by far
more than the 1.5 % allowed; the cards round to 0.1 B).  The small excess of some is what
the catalog does not carry: QKV biases (Qwen2.5), GLM-4.5's multi-token-prediction layer."""

import pytest

from dse.spec.model import get_model

CARDS = [   # (catalog name or repo id, total parameters on the model card)
    ("Qwen/Qwen2.5-72B-Instruct", 72.7e9),
    ("Qwen/Qwen2.5-32B-Instruct", 32.5e9),
    ("Qwen/QwQ-32B", 32.5e9),
    ("Qwen/Qwen2.5-14B-Instruct", 14.7e9),
    ("Qwen/Qwen2.5-7B-Instruct", 7.61e9),
    ("Qwen/Qwen3-14B", 14.8e9),
    ("Qwen/Qwen3-4B", 4.0e9),
    ("meta-llama/Llama-3.2-1B-Instruct", 1.24e9),
    ("meta-llama/Llama-3.2-3B-Instruct", 3.21e9),
    ("mistralai/Mistral-7B-Instruct-v0.3", 7.25e9),
    ("mistralai/Mistral-Large-Instruct-2407", 123e9),
    ("mistralai/Mistral-Small-24B-Instruct-2501", 23.6e9),
    ("microsoft/phi-4", 14.7e9),
    ("google/gemma-2-27b-it", 27.2e9),
    ("google/gemma-3-27b-it", 27.0e9),
    ("deepseek-ai/DeepSeek-V2-Lite", 15.7e9),
    ("zai-org/GLM-4.5", 355e9),
]


@pytest.mark.parametrize("name,total", CARDS)
def test_parameter_count_matches_the_model_card(name, total):
    assert get_model(name).num_params() == pytest.approx(total, rel=0.015)


def test_moe_entries_activate_what_their_cards_say():
    """DeepSeek-V2-Lite: 2.4B activated (card; 2.66 with the embedding and head counted
    here), GLM-4.5: 32B activated."""
    lite, glm = get_model("deepseek-v2-lite"), get_model("glm-4.5")
    assert (lite.num_experts, lite.top_k, lite.num_shared_experts, lite.kv_lora_rank) == (64, 6, 2, 512)
    assert lite.active_params(input_embedding=False) == pytest.approx(2.4e9, rel=0.05)
    assert glm.active_params(input_embedding=False) == pytest.approx(32e9, rel=0.05)


def test_sliding_window_entries_keep_their_global_layers():
    """Gemma 2 alternates local (4096) and global layers; Gemma 3 has 5 local (1024) per global."""
    g2, g3 = get_model("gemma2-27b"), get_model("gemma3-27b")
    assert (g2.sliding_window, g2.window_layers, g2.num_layers) == (4096, 23, 46)
    assert (g3.sliding_window, g3.window_layers, g3.num_layers) == (1024, 52, 62)
