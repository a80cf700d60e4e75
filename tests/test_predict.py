import pandas as pd
import pytest

from dse.predict import predict_frame

ROW = dict(id=1, source="T", model="GPT 7.5B", num_layers=36, hidden_size=4096, ffn_hidden_size=16384,
           num_attention_heads=32, num_kv_heads=32, vocab_size=51200, seq_length=2048,
           global_batch_size=512, micro_batch_size=16, gpu="a100-sxm-80gb", num_gpus=128, tp=4, pp=1,
           dp=32, cp=1, ep=1, vpp=1, sequence_parallel="false", recompute="full", zero_stage=0,
           precision="fp16", measured_iter_time_s=3.7)


def test_predict_fixed_and_blank_fields():
    blank = dict(ROW, id=2, micro_batch_size=None, recompute=None, zero_stage=None, vpp=None, sequence_parallel=None)
    out = predict_frame(pd.DataFrame([ROW, blank]), "t.csv")
    assert (out["status"] == "ok").all()
    assert out.loc[0, "chosen_mbs"] == 16 and out.loc[0, "chosen_recompute"] == "full"
    # searching blank fields can only be as fast or faster than the fixed choice
    assert out.loc[1, "predicted_iter_time_s"] <= out.loc[0, "predicted_iter_time_s"] * (1 + 1e-6)
    assert 0 < out.loc[0, "predicted_mfu"] < 1


def test_infeasible_row_kept_with_reason():
    bad = dict(ROW, tp=3)
    oom = dict(ROW, tp=1, dp=128, micro_batch_size=4, recompute="none", num_layers=96, hidden_size=12288,
               ffn_hidden_size=49152, num_attention_heads=96, num_kv_heads=96)
    fp8 = dict(ROW, precision="fp8")
    out = predict_frame(pd.DataFrame([bad, oom, fp8]), "t.csv")
    assert len(out) == 3
    assert out.loc[0, "status"].startswith("infeasible")
    assert out.loc[1, "status"].startswith("out of memory")
    assert "fp8" in out.loc[2, "status"]


def test_a_row_with_no_valid_layout_names_the_rule_and_column_it_breaks():
    """dse.predict._grid_conflict: fixed fields that no layout satisfies get the broken
    rule under the row's own column name (sequence_parallel, not the sweep's sp)."""
    rows = [dict(ROW, id=1, tp=1, dp=128, micro_batch_size=4, sequence_parallel="TRUE"),
            dict(ROW, id=2, pp=1, vpp=4),
            dict(ROW, id=3, tp=4, dp=32, cp=1, sequence_parallel="true")]
    out = predict_frame(pd.DataFrame(rows), "t.csv")
    assert out.loc[0, "status"] == "infeasible: sequence_parallel: sequence parallelism needs tp > 1"
    assert out.loc[1, "status"].startswith("infeasible: vpp: `pp > 1 and pp*vpp <= num_layers + 2`")
    assert out.loc[2, "status"] == "ok"


def test_embeddings_tied_for_gpt_style_untied_for_swiglu():
    """Megatron ties input and output embeddings unless told not to; Llama-style (SwiGLU)
    recipes pass --untie-embeddings-and-output-weights."""
    from dse.predict import row_model
    gpt, _ = row_model(ROW, "t.csv")
    llama, _ = row_model(dict(ROW, ffn_hidden_size=11008), "t.csv")
    assert gpt.tied_embeddings == 1 and gpt.dropout == 1
    assert llama.tied_embeddings == 0 and llama.gated_mlp == 1


def test_framework_column_changes_memory_accounting_and_rejects_unknown():
    """DeepSpeed keeps 16-bit grads plus an fp32 gradient buffer (+2 B/param over
    Megatron's fp32 main grads) and a reduce bucket when dp > 1."""
    rows = [dict(ROW, id=i, framework=f) for i, f in enumerate(("megatron", "deepspeed", None))]
    out = predict_frame(pd.DataFrame(rows), "t.csv")
    meg, ds, blank = out["predicted_mem_gib"]
    assert ds > meg and blank == meg
    bad = predict_frame(pd.DataFrame([dict(ROW, framework="jax"), ROW]), "t.csv")
    assert bad.loc[0, "status"].startswith("invalid: framework: must be one of")
    assert bad.loc[1, "status"] == "ok"


def test_moe_columns_make_a_mixture_of_experts_row():
    """num_experts/top_k (or Megatron's num_moe_experts/moe_router_topk) turn the row into
    an MoE model; ep > 1 without them is explained, not silently dropped."""
    moe = dict(ROW, id=3, model="Mixtral-like", hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32,
               num_kv_heads=8, num_layers=8, vocab_size=32000, seq_length=4096, global_batch_size=64,
               micro_batch_size=1, gpu="h100-sxm-80gb", num_gpus=16, tp=1, pp=1, dp=16, ep=8,
               recompute=None, zero_stage=1, precision="bf16", sequence_parallel=None)
    rows = [moe, dict(moe, id=4, num_experts=8, top_k=2), dict(moe, id=5, num_moe_experts=8, moe_router_topk=2)]
    out = predict_frame(pd.DataFrame(rows), "t.csv")
    assert out.loc[0, "status"].startswith("infeasible: ep > 1 needs a mixture-of-experts model")
    assert out.loc[1, "status"] == "ok" and out.loc[2, "status"] == "ok"
    assert out.loc[1, "predicted_iter_time_s"] == out.loc[2, "predicted_iter_time_s"]


def test_optional_columns_are_validated_even_on_rows_that_end_early():
    """A row breaking a rule gets ``invalid: <column>: <rule>``; the good row is predicted."""
    bads = [(dict(ROW, tp=3, framework="jax"), "framework"),
            (dict(ROW, precision="fp8", tp_comm_overlap="maybe"), "tp_comm_overlap"),
            (dict(ROW, num_experts="abc"), "num_experts"),
            (dict(ROW, num_experts=8, num_moe_experts=4), "num_moe_experts"),
            (dict(ROW, num_experts=2, moe_router_topk=4), "moe_router_topk"),
            (dict(ROW, num_layers=float("inf")), "num_layers")]
    out = predict_frame(pd.DataFrame([b for b, _ in bads] + [ROW]), "t.csv")
    for i, (_, col) in enumerate(bads):
        assert out.loc[i, "status"].startswith(f"invalid: {col}: "), out.loc[i, "status"]
    assert out["status"].iloc[-1] == "ok"


def test_head_dim_column_decouples_attention_width_from_hidden():
    """Qwen3-style heads: 32 heads of 128 on hidden 2048 -- the attention is twice as wide
    as hidden/heads says, so it costs more time and memory."""
    base = dict(ROW, num_layers=8, hidden_size=2048, ffn_hidden_size=6144, num_attention_heads=32, num_kv_heads=4,
                num_gpus=8, tp=1, dp=8, micro_batch_size=1, global_batch_size=64, recompute="none")
    out = predict_frame(pd.DataFrame([base, dict(base, id=2, head_dim=128), dict(base, id=3, kv_channels=128)]), "t.csv")
    assert (out["status"] == "ok").all()
    assert out.loc[1, "predicted_iter_time_s"] > out.loc[0, "predicted_iter_time_s"]
    assert out.loc[1, "predicted_mem_gib"] > out.loc[0, "predicted_mem_gib"]
    assert out.loc[1, "predicted_iter_time_s"] == out.loc[2, "predicted_iter_time_s"]


def test_deepspeed_rows_are_held_to_the_pipeline_engine_rules():
    """A deepspeed row searches only layouts DeepSpeed's pipeline engine runs (ZeRO <= 1
    and vpp 1 with pp > 1), and a row whose given fields break them says which rule."""
    piped = dict(ROW, id=1, tp=4, pp=4, dp=8, framework="deepspeed", zero_stage=None, vpp=None,
                 micro_batch_size=4)
    bad = dict(piped, id=2, zero_stage=2)
    out = predict_frame(pd.DataFrame([piped, bad]), "t.csv")
    assert out.loc[0, "status"] == "ok"
    assert out.loc[0, "chosen_zero"] <= 1 and out.loc[0, "chosen_vpp"] == 1
    assert out.loc[1, "status"].startswith("infeasible: zero: DeepSpeed's pipeline engine needs `zero <= 1`")


def test_a_run_a_little_over_the_hbm_is_timed_as_if_it_fit(tmp_path):
    """A published run the memory model puts just over the HBM (llm-foundry MPT-3B on 8x
    H100 at 8192 tokens, micro-batch 3, no recompute: 81.1 > 79.7 GiB) still gets its time,
    the same as on a GPU with room for it, and a status that says so; a layout far over
    the HBM (above OVER_MEMORY_TOLERANCE) gets none."""
    from pathlib import Path
    from dse.predict import OVER_MEMORY_TOLERANCE, has_prediction, read_csv
    csv = Path(__file__).parent / "data" / "published_fsdp.csv"
    df = read_csv(str(csv))
    row = df[df["id"] == "mpt3b_h100_8gpu_8192"]
    out = predict_frame(row, "fsdp.csv").iloc[0]
    assert out["status"].startswith("ok (over memory: needs") and "timed as if it fit" in out["status"]
    assert bool(has_prediction(pd.Series([out["status"]]))[0]) and not out["mem_within_margin"]
    from dse.spec.hardware import get_hardware
    hbm = get_hardware("h100-sxm-80gb").hbm_bytes / 2**30
    assert hbm < out["predicted_mem_gib"] <= hbm * (1 + OVER_MEMORY_TOLERANCE)
    roomy = tmp_path / "roomy.toml"
    roomy.write_text('[roomy]\nbase = "h100-sxm-80gb"\nhbm_gib = 96\n')
    fit = predict_frame(row.assign(gpu=str(roomy)), "fsdp.csv").iloc[0]
    assert fit["status"] == "ok"
    assert out["predicted_iter_time_s"] == pytest.approx(fit["predicted_iter_time_s"], rel=1e-6)
    far = predict_frame(pd.DataFrame([dict(ROW, tp=1, dp=128, micro_batch_size=4, recompute="none",
                                           num_layers=96, hidden_size=12288, ffn_hidden_size=49152,
                                           num_attention_heads=96, num_kv_heads=96)]), "t.csv").iloc[0]
    assert far["status"].startswith("out of memory") and pd.isna(far["predicted_iter_time_s"])


def test_enum_columns_ignore_case_and_name_variants():
    """``BF16`` is ``bf16``, ``Megatron`` is ``megatron``, ``Full`` is ``full`` (the same
    prediction); a serving row's ``Concurrency`` is ``concurrency`` and ``TRT-LLM`` names
    TensorRT-LLM as ``trtllm`` does.  A value outside the vocabulary is still refused."""
    lower = dict(ROW, precision="fp16", framework="megatron", attention="flash", recompute="full")
    upper = dict(ROW, id=2, precision="FP16", framework="Megatron", attention="Flash", recompute="Full")
    bad = dict(ROW, id=3, precision="fp12")
    out = predict_frame(pd.DataFrame([lower, upper, bad]), "t.csv")
    assert out.loc[0, "status"] == out.loc[1, "status"] == "ok"
    assert out.loc[0, "predicted_iter_time_s"] == out.loc[1, "predicted_iter_time_s"]
    assert out.loc[2, "status"].startswith("invalid: precision")
    srv = dict(id="s", model="llama3-8b", hardware="h100-sxm-80gb", gpus=1, tp=1, precision="fp8",
               batch_or_concurrency=8, input_len=128, output_len=128)
    rows = [dict(srv, id="a", engine="trtllm", scenario="concurrency"),
            dict(srv, id="b", engine="TRT-LLM", scenario="Concurrency")]
    s = predict_frame(pd.DataFrame(rows), "s.csv")
    assert (s["status"] == "ok").all() and (s["chosen_engine"] == "trtllm").all()
    assert s.loc[0, "predicted_output_tok_s"] == s.loc[1, "predicted_output_tok_s"]


def test_achieved_fraction_rescales_the_predicted_flops_to_the_measured_time():
    """scripts/achieved_fraction.py: model FLOP/s = predicted_mfu x the 16-bit peak at the
    predicted time, rescaled to the measured time, over the peak of the row's GEMM precision
    (fp8: the fp8 peak); rows without a prediction are not scored."""
    import runpy
    from pathlib import Path

    from dse.spec.hardware import get_hardware
    fractions = runpy.run_path(str(Path(__file__).parents[1] / "scripts" / "achieved_fraction.py"))["fractions"]
    hw = get_hardware("h100-sxm-80gb")
    rows = pd.DataFrame([dict(gpu="h100-sxm-80gb", precision="FP8", predicted_mfu=0.5, predicted_iter_time_s=10.0,
                              measured_iter_time_s=12.5, status="ok"),
                         dict(gpu="h100-sxm-80gb", precision="bf16", predicted_mfu=0.4, predicted_iter_time_s=1.0,
                              measured_iter_time_s=1.0, status="ok (over memory: ...)"),
                         dict(gpu="h100-sxm-80gb", precision="bf16", predicted_mfu=None, predicted_iter_time_s=None,
                              measured_iter_time_s=3.0, status="out of memory")])
    f = fractions(rows)
    assert len(f) == 2
    fp8 = 0.5 * hw.peak_bf16_flops_per_s / hw.peak_fp8_flops_per_s
    assert f.loc[0, "predicted"] == pytest.approx(fp8) and f.loc[0, "measured"] == pytest.approx(fp8 * 0.8)
    assert f.loc[0, "error"] == pytest.approx(-0.2) and f.loc[1, "measured"] == pytest.approx(0.4)
