"""A training row whose `model` label names a catalog model is predicted with the catalog's
architecture (MLA, shared experts, dense first layers ...) when its columns agree with it
(dse.predict.row_model, dse.spec.model_names)."""

import subprocess
import sys

import pandas as pd
import pytest

from dse.predict import predict_frame, row_model
from dse.spec.model import catalog
from dse.spec.model_names import catalog_name_of

# DeepSeek-V3 as a published MoE table gives it (Megatron-Bridge performance summary
# shape: 256 GPUs, EP 32, PP 8); ffn_hidden_size is one routed expert's width
DSV3 = dict(id="d", source="T", model="DeepSeekV3", num_layers=61, hidden_size=7168,
            ffn_hidden_size=2048, num_attention_heads=128, num_kv_heads=128, vocab_size=129280,
            num_experts=256, top_k=8, seq_length=4096, global_batch_size=1024, micro_batch_size=1,
            gpu="b200", num_gpus=256, tp=1, pp=8, cp=1, ep=32, vpp=None, sequence_parallel=None,
            recompute=None, zero_stage=1, precision="fp8", measured_iter_time_s=10.0)


@pytest.mark.parametrize("label, name", [
    ("DeepSeekV3", "deepseek-v3"), ("deepseek-ai/DeepSeek-V3", "deepseek-v3"),
    ("Llama 3.1 70B", "llama3-70b"), ("Llama3.1-405B", "llama3-405b"), ("GPT-3 175B", "gpt3-175b"),
    ("LLAMA4-Maverick", "llama4-maverick"), ("GPT OSS 120B", "gpt-oss-120b"), ("Kimi_K2", "kimi-k2"),
    ("Qwen3_30B_a3B", "qwen3-30b-a3b"), ("GPT 175B (GPT-3)", None), ("mpt-7b", None), ("", None),
    (None, None), (float("nan"), None)])
def test_catalog_name_of_published_labels(label, name):
    assert catalog_name_of(label) == name


def test_agreeing_columns_take_the_catalog_architecture():
    """The catalog's MLA and shared expert change what the columns alone would predict;
    the row's seq_length and vocab_size are kept."""
    m, arch = row_model(dict(DSV3, seq_length=2048, vocab_size=129536), "t.csv")
    cat = catalog()["deepseek-v3"]
    assert arch == "deepseek-v3"
    assert (m.kv_lora_rank, m.num_shared_experts, m.first_k_dense) == (cat.kv_lora_rank, 1, 3)
    assert (m.seq_length, m.vocab_size) == (2048, 129536)
    plain, arch2 = row_model(dict(DSV3, model="my MoE"), "t.csv")
    assert arch2 == "columns" and plain.kv_lora_rank == 0
    out = predict_frame(pd.DataFrame([DSV3, dict(DSV3, id="x", model="my MoE")]), "t.csv",
                        intervals=False)
    assert list(out["model_arch"]) == ["deepseek-v3", "columns"]
    assert (out["status"] == "ok").all()
    assert out.loc[0, "predicted_mem_gib"] != pytest.approx(out.loc[1, "predicted_mem_gib"], rel=1e-3)


@pytest.mark.parametrize("change", [dict(num_layers=60), dict(hidden_size=4096, num_attention_heads=32,
                                    num_kv_heads=32), dict(top_k=6), dict(ffn_hidden_size=4096),
                                    dict(head_dim=64)])
def test_disagreeing_columns_keep_the_row_columns(change):
    _, arch = row_model(dict(DSV3, **change), "t.csv")
    assert arch == "columns"


def test_either_ffn_width_or_head_dim_of_the_catalog_agrees():
    for change in (dict(ffn_hidden_size=18432), dict(head_dim=192), dict(head_dim=128)):
        assert row_model(dict(DSV3, **change), "t.csv")[1] == "deepseek-v3"


def test_blank_architecture_columns_come_from_the_catalog():
    blank = {c: None for c in ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
                               "num_kv_heads", "vocab_size", "num_experts", "top_k")}
    full = predict_frame(pd.DataFrame([DSV3]), "t.csv", intervals=False)
    short = predict_frame(pd.DataFrame([dict(DSV3, **blank)]), "t.csv", intervals=False)
    assert short.loc[0, "status"] == "ok"
    assert short.loc[0, "predicted_iter_time_s"] == pytest.approx(full.loc[0, "predicted_iter_time_s"])
    unknown = predict_frame(pd.DataFrame([dict(DSV3, model="my MoE", **blank)]), "t.csv")
    assert unknown.loc[0, "status"].startswith("invalid: num_layers: must be given")


def test_a_file_may_omit_architecture_columns_only_with_a_model_column(tmp_path):
    cols = ["id", "source", "model", "seq_length", "global_batch_size", "micro_batch_size", "gpu",
            "num_gpus", "tp", "pp", "cp", "ep", "zero_stage", "precision"]
    ok = tmp_path / "ok.csv"
    pd.DataFrame([DSV3])[cols].to_csv(ok, index=False)
    bad = tmp_path / "bad.csv"
    pd.DataFrame([DSV3])[[c for c in cols if c != "model"]].to_csv(bad, index=False)
    (tmp_path / "results").mkdir()
    out = tmp_path / "results" / "o.csv"
    run = lambda f: subprocess.run([sys.executable, "-m", "dse.cli", "predict", str(f), "-o", str(out)],
                                   capture_output=True, text=True, cwd=tmp_path)
    # the refusals in a real process (exit status, one line on stderr); they stop before
    # any layout is costed
    r = run(bad)
    assert r.returncode == 2 and "num_layers" in r.stderr and "model" in r.stderr
    unnamed = tmp_path / "unnamed.csv"
    pd.DataFrame([DSV3, dict(DSV3, id="e", model="my MoE")])[cols].to_csv(unnamed, index=False)
    r = run(unnamed)
    assert r.returncode == 2 and "row 3 (id e)" in r.stderr
    # the accepted file through the same entry point in this process, whose DeepSeek-V3
    # programs the other tests of this file have compiled
    from dse.cli import main
    assert main(["predict", str(ok), "-o", str(out)]) == 0
    assert pd.read_csv(out).loc[0, "model_arch"] == "deepseek-v3"


@pytest.mark.parametrize("label, name", [
    ("DeepSeekV3 (w/o MTP)", "deepseek-v3"), ("DeepSeek-V3 671B", "deepseek-v3"),
    ("Mixtral 8x7B", "mixtral-8x7b"), ("Llama 2 70B", "llama2-70b"), ("Llama-3.1-405B 405B", "llama3-405b"),
    ("GPT 175B (GPT-3)", None), ("Nemotron-4 340B", None)])
def test_catalog_name_of_drops_remarks_and_sizes(label, name):
    assert catalog_name_of(label) == name


def test_a_moe_row_in_the_calibration_schema_is_the_catalog_moe():
    """The calibration schema has no expert columns: a Mixtral row with `ep` and the
    dense-looking columns is the catalog's 8-expert top-2 model, not an infeasible dense
    one; an MLA row may count the latent as one KV head."""
    mixtral = dict(DSV3, model="Mixtral 8x7B", num_layers=32, hidden_size=4096, ffn_hidden_size=14336,
                   num_attention_heads=32, num_kv_heads=8, vocab_size=32000, num_experts=None,
                   top_k=None, gpu="h100-sxm-80gb", num_gpus=64, pp=1, ep=8)
    m, arch = row_model(mixtral, "t.csv")
    assert arch == "mixtral-8x7b" and (m.num_experts, m.top_k) == (8, 2)
    assert row_model(dict(DSV3, num_kv_heads=1), "t.csv")[1] == "deepseek-v3"


def test_moe_ffn_hidden_size_column():
    """Megatron's --moe-ffn-hidden-size as a column: the routed experts' width beside the
    dense layers' ffn_hidden_size; it must agree with the catalog's expert width."""
    m, arch = row_model(dict(DSV3, ffn_hidden_size=18432, moe_ffn_hidden_size=2048), "t.csv")
    assert arch == "deepseek-v3"
    m, arch = row_model(dict(DSV3, model="my MoE", ffn_hidden_size=18432, moe_ffn_hidden_size=2048), "t.csv")
    assert arch == "columns" and (m.ffn_hidden_size, m.moe_ffn_hidden_size) == (18432, 2048)
    assert row_model(dict(DSV3, ffn_hidden_size=18432, moe_ffn_hidden_size=1024), "t.csv")[1] == "columns"


def test_mtp_layers_column_and_the_head_stage_deficit():
    """DeepSeek-V3 trains with one MTP module by default (catalog mtp_layers 1, HF
    num_nextn_predict_layers); a row's mtp_layers 0 ("w/o MTP") removes it and predicts a
    shorter step; the head's stage then gives up the whole slack (Megatron-Bridge's
    DeepSeek-V3 layouts), not one layer."""
    from dse.spec.hf_config import hf_config_table
    from dse.train.memory import head_stage_deficit
    from pathlib import Path
    table, _ = hf_config_table(Path(__file__).parent / "data" / "hf" / "deepseek-v3.json")
    assert table["mtp_layers"] == 1 and catalog()["deepseek-v3"].mtp_layers == 1
    assert row_model(dict(DSV3, mtp_layers=0), "t.csv")[0].mtp_layers == 0
    assert row_model(DSV3, "t.csv")[0].mtp_layers == 1
    out = predict_frame(pd.DataFrame([DSV3, dict(DSV3, id="n", mtp_layers=0)]), "t.csv", intervals=False)
    assert out.loc[0, "predicted_iter_time_s"] > out.loc[1, "predicted_iter_time_s"]
    assert float(head_stage_deficit(3.0, 1)) == 3.0 and float(head_stage_deficit(3.0, 0)) == 1.0
    bad = predict_frame(pd.DataFrame([dict(DSV3, mtp_layers=-1)]), "t.csv")
    assert bad.loc[0, "status"].startswith("invalid: mtp_layers")


def test_a_disagreeing_row_reads_its_blanks_as_before():
    """A scaled-down proxy that names a catalog model but changes its layers keeps the
    columns' reading of a blank num_kv_heads (MHA), not the catalog's GQA."""
    proxy = dict(DSV3, model="Llama3-8B", num_layers=4, hidden_size=4096, ffn_hidden_size=14336,
                 num_attention_heads=32, num_kv_heads=None, vocab_size=128256, num_experts=None,
                 top_k=None, ep=1)
    m, arch = row_model(proxy, "t.csv")
    assert arch == "columns" and m.num_kv_heads == 32
