"""Re-published quantized checkpoints of a catalog architecture resolve to it
(dse.spec.model.requantized_base); anything else stays a one-line error."""

import pytest

from dse.errors import InputError
from dse.spec.model import get_model, requantized_base


@pytest.mark.parametrize("repo,name", [
    ("nvidia/DeepSeek-R1-0528-FP4-v2", "deepseek-r1"),
    ("amd/DeepSeek-R1-0528-MXFP4-Preview", "deepseek-r1"),
    ("nvidia/Llama-3.3-70B-Instruct-FP4", "llama3-70b"),
    ("amd/Llama-3.1-70B-Instruct-FP8-KV", "llama3-70b"),
    ("RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8", "llama3-70b"),
    ("nvidia/Qwen3-235B-A22B-FP4", "qwen3-235b-a22b"),
    ("deepseek-ai/DeepSeek-V3.1", "deepseek-v3"),            # same layer shapes: an hf_ids entry
    ("unsloth/Llama-3.3-70B-Instruct", "llama3-70b"),         # a mirror under another organisation
    ("Meta-Llama-3.1-8B-Instruct", "llama3-8b"),              # the repo name alone
    ("mixtral-8x7b-instruct-v0.1", "mixtral-8x7b"),
])
def test_requantized_repos_resolve(repo, name):
    assert get_model(repo).name == get_model(name).name


@pytest.mark.parametrize("repo", ["foo/bar-FP8", "nvidia/Unknown-70B-FP4", "meta-llama/Llama-9-1B",
                                  "Llama-9-1B", "-FP8"])
def test_unknown_repos_are_refused(repo):
    assert requantized_base(repo) is None
    with pytest.raises(InputError, match="must be a catalog name"):
        get_model(repo)


def test_gpt_oss_20b_matches_its_model_card():
    """openai/gpt-oss-20b (config.json; model card arXiv:2508.10925 Table 1: 20.91B total)."""
    m = get_model("openai/gpt-oss-20b")
    assert (m.num_layers, m.num_experts, m.top_k, m.mxfp4_experts) == (24, 32, 4, True)
    assert m.num_params() == pytest.approx(20.91e9, rel=0.01)


def test_kimi_k2_matches_its_technical_report():
    """moonshotai/Kimi-K2-Instruct (DeepSeek-V3 layout; arXiv:2507.20534: "1.04 trillion",
    the model card "1T"; the config's shapes give 1.026T)."""
    m = get_model("moonshotai/Kimi-K2-Instruct")
    assert (m.num_experts, m.top_k, m.first_k_dense, m.kv_lora_rank) == (384, 8, 1, 512)
    assert m.num_params() == pytest.approx(1.04e12, rel=0.015)


def test_glm45_air_matches_its_model_card():
    """zai-org/GLM-4.5-Air (config.json; model card: 106B total), and its FP8 re-publication."""
    m = get_model("zai-org/GLM-4.5-Air")
    assert get_model("zai-org/GLM-4.5-Air-FP8").name == m.name == get_model("glm-4.5-air").name
    assert (m.num_experts, m.top_k, m.first_k_dense, m.num_shared_experts) == (128, 8, 1, 1)
    assert m.num_params() == pytest.approx(106e9, rel=0.015)


def test_qwen3_coder_matches_its_model_card():
    """Qwen/Qwen3-Coder-480B-A35B-Instruct (model card: 480B total, 35B activated)."""
    m = get_model("Qwen/Qwen3-Coder-480B-A35B-Instruct")
    assert (m.num_layers, m.num_experts, m.top_k) == (62, 160, 8)
    assert m.num_params() == pytest.approx(480e9, rel=0.01)
