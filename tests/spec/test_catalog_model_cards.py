"""Catalog entries added from their Hugging Face config.json (dse/spec/catalog/models.toml,
each entry's ``source``) give the parameter count their model card states: an independent
check of the layer shapes typed in (a wrong width or layer count moves the total by far
more than the 1.5 % allowed; the cards round to 0.1 B).  The small excess of some is what
the catalog does not carry: QKV biases (Qwen2.5), GLM-4.5's multi-token-prediction layer."""

import pytest

from dse.spec.model import get_model

CARDS = [   # (catalog name or repo id, total parameters on the model card)
    ("Qwen/Qwen2.5-72B-Instruct", 72.7e9),
    ("EleutherAI/gpt-j-6b", 6.05e9),          # model card: 6,053,381,344 parameters
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
    ("zai-org/GLM-4.6", 355e9),
    ("MiniMaxAI/MiniMax-M2", 230e9),
    ("mistralai/Mistral-7B-v0.1", 7.24e9),
    ("01-ai/Yi-34B", 34.4e9),
    ("codellama/CodeLlama-34b-hf", 33.7e9),
    ("databricks/dbrx-instruct", 132e9),
    ("Qwen/Qwen1.5-72B-Chat", 72.3e9),
    ("Qwen/Qwen1.5-MoE-A2.7B", 14.3e9),
    ("deepseek-ai/DeepSeek-V2", 236e9),
    ("microsoft/Phi-3.5-MoE-instruct", 41.9e9),
    ("CohereForAI/c4ai-command-r-plus", 104e9),
    ("CohereForAI/c4ai-command-r-v01", 35e9),
    ("xai-org/grok-1", 314e9),
    ("microsoft/Phi-3-mini-4k-instruct", 3.82e9),
    ("microsoft/Phi-3-medium-4k-instruct", 14.0e9),
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


@pytest.mark.parametrize("repo,table", [
    ("Qwen/Qwen2-72B-Instruct", "qwen2.5-72b"), ("Qwen/Qwen2-7B-Instruct", "qwen2.5-7b"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "qwen2.5-7b"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "qwen2.5-14b"),
    ("Qwen/Qwen2.5-Coder-32B-Instruct", "qwen2.5-32b"),
    ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", "mistral-small-24b"),
    ("mistralai/Mistral-Nemo-Instruct-2407", "mistral-nemo-12b"), ("google/gemma-2-9b-it", "gemma2-9b"),
    ("MiniMaxAI/MiniMax-M2", "minimax-m2"), ("zai-org/GLM-4.6", "glm45"),
    ("MiniMaxAI/MiniMax-M2.5", "minimax-m2"), ("nvidia/MiniMax-M2.5-NVFP4", "minimax-m2"),
    ("moonshotai/Kimi-K2.5", "kimi-k2"), ("nvidia/Kimi-K2.5-NVFP4", "kimi-k2"),
    ("amd/Kimi-K2.5-MXFP4", "kimi-k2"), ("amd/gpt-oss-120b-w-mxfp4-a-fp8", "gpt-oss-120b"),
    ("deepseek-ai/DeepSeek-Coder-V2-Instruct", "deepseek-v2"),
    ("mistralai/Mistral-7B-Instruct-v0.2", "mistral-7b-v0.2"),
])
def test_repo_ids_with_the_same_shapes_resolve_to_their_table(repo, table):
    assert get_model(repo).name == get_model(table).name


def test_minimax_m2_and_gemma2_9b_shapes():
    """MiniMax-M2: 256 experts, top-8, every layer MoE, ~10B activated (HF transformers docs);
    Gemma 2 9B alternates local (4096) and global layers like its 27B sibling."""
    mm, g9 = get_model("minimax-m2"), get_model("gemma2-9b")
    assert (mm.num_experts, mm.top_k, mm.num_shared_experts, mm.first_k_dense) == (256, 8, 0, 0)
    assert mm.active_params(input_embedding=False) == pytest.approx(10e9, rel=0.06)
    assert (g9.sliding_window, g9.window_layers, g9.num_layers) == (4096, 21, 42)


def test_moe_additions_activate_what_their_cards_say():
    """DBRX 36B of 132B active (16 experts, top-4); DeepSeek-V2 21B of 236B (MLA, 160 + 2
    shared, top-6); Phi-3.5-MoE 6.6B of 42B; Qwen1.5-MoE-A2.7B 2.7B with its embedding."""
    dbrx, v2, phi = get_model("dbrx"), get_model("deepseek-v2"), get_model("phi3.5-moe")
    qmoe = get_model("qwen1.5-moe-a2.7b")
    assert dbrx.active_params(input_embedding=False) == pytest.approx(36e9, rel=0.02)
    assert (v2.num_experts, v2.top_k, v2.num_shared_experts, v2.first_k_dense) == (160, 6, 2, 1)
    assert v2.active_params(input_embedding=False) == pytest.approx(21e9, rel=0.02)
    assert phi.active_params(input_embedding=False) == pytest.approx(6.6e9, rel=0.02)
    assert qmoe.active_params(input_embedding=True) == pytest.approx(2.7e9, rel=0.02)


def test_mistral_v01_and_phi3_keep_a_window_on_every_layer():
    """Mistral 7B v0.1 attends 4096 keys on every layer, Phi-3 2047; v0.2 has no window."""
    v1, v2, phi = get_model("mistral-7b-v0.1"), get_model("mistral-7b-v0.2"), get_model("phi3-mini")
    assert (v1.sliding_window, v1.window_layers, v2.sliding_window) == (4096, 32, 0)
    assert (phi.sliding_window, phi.window_layers) == (2047, 32)
