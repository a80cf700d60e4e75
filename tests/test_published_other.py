"""Published measurements *outside* the calibration set, never used to choose a constant.
They check that the model generalises beyond the rows it was calibrated on: other
frameworks (Megatron-DeepSpeed, PyTorch FSDP in llm-foundry and torchtitan, NeMo 2 /
Megatron-Bridge), other models (MPT, Llama 3.1 405B, Nemotron-4) and another GPU (B200).

Data and provenance (every number with the table line it was copied from):
tests/data/published_other.csv (BLOOM-176B and Megatron-Turing NLG 530B: Megatron-DeepSpeed
on A100, attention unfused as both ran before FlashAttention), published_nemo.csv + .md and
published_nemo_gb200_moe.md (NeMo and Megatron-Bridge performance summaries: dense fp8
pre-training on B200, GB200 and H100), published_moe.csv (the same tables' Mixtral and
Qwen3 mixture-of-experts rows), published_fsdp.csv + .md (llm-foundry MPT and
torchtitan, A100 and H100), published_bridge_catalog.csv + .md (Megatron-Bridge's
DeepSeek-V3, GPT-OSS-120B and Kimi-K2 rows, predicted with their catalog tables),
published_bridge_nvfp4.csv + .md (its NVFP4 Llama pre-training rows), published_amd_training.csv + .md
(MLPerf Training v5.1 on MI355X and Primus / ROCm Megatron-LM logs on MI325X), published_mlperf_training.csv
+ .md (MLPerf Training v4.0-v5.1 on NVIDIA H100 to GB300).  The bounds sit a little above today's
errors (docs/accuracy.md quotes them) so that a regression fails; the H100 FSDP bound is
loose on purpose, as is the MoE one: documented gaps (docs/accuracy.md), not targets."""

from pathlib import Path

import pytest

from dse.predict import has_prediction, predict_frame, read_csv

DATA = Path(__file__).parent / "data"


def _predict(name):
    p = predict_frame(read_csv(str(DATA / name)), name)
    p["ape"] = (p["predicted_iter_time_s"] / p["measured_iter_time_s"] - 1).abs()
    return p


@pytest.mark.validation
def test_bloom176b_iteration_time_within_10_percent():
    p = _predict("published_other.csv")
    p = p[p["id"] == "bloom176b"]
    assert len(p) == 1 and (p["status"] == "ok").all()
    assert (p["ape"] <= 0.10).all(), dict(zip(p["id"], p["ape"].round(3)))


@pytest.mark.validation
def test_mtnlg530b_deep_pipeline_runs():
    """MT-NLG 530B on 280 / 350 / 420 DGX A100 (TP8 x PP35, 3 layers per stage, global
    batch 1920): the deepest pipelines we hold, never used for a constant.  Today the model
    is 6-10 % too fast (9-13 % before DeepSpeed's blocking pipeline transfers,
    dse.train.pipe_transfers), more so as data parallelism grows and each pipeline gets
    fewer micro-batches (240 -> 160).  A regression guard a little above today's error,
    not the target (the issue's is <= 10 % held out)."""
    p = _predict("published_other.csv")
    p = p[p["id"].str.startswith("mtnlg530b")]
    assert len(p) == 3 and (p["status"] == "ok").all()
    err = p["predicted_iter_time_s"] / p["measured_iter_time_s"] - 1
    assert err.abs().mean() <= 0.09, dict(zip(p["id"], err.round(3)))
    assert (err.abs() <= 0.12).all(), dict(zip(p["id"], err.round(3)))


@pytest.mark.validation
def test_bloom176b_peak_memory_within_10_percent():
    """BLOOM-176B's ~60 GB per GPU, with the framework it ran (Megatron-DeepSpeed)."""
    p = _predict("published_other.csv")
    m = p.dropna(subset=["measured_mem_gib"])
    assert len(m) >= 1
    err = (m["predicted_mem_gib"] / m["measured_mem_gib"] - 1).abs()
    assert (err <= 0.10).all(), dict(zip(m["id"], err.round(3)))


@pytest.mark.validation
def test_nemo_blackwell_and_h100_fp8_runs():
    """NeMo 25.02-25.07 and Megatron-Bridge 25.09-26.06 dense fp8 pre-training on DGX
    B200, GB200 NVL72 and H100 (Llama 3 8B/70B/405B, GPT-3 175B, Nemotron-4 15B/340B):
    Blackwell's constants are Hopper's, unfitted, so this is the Blackwell check.  Every
    row with tp > 1 states the TP communication overlap its recipe ran (``tp_comm_overlap``,
    read from the NeMo / Megatron-Bridge performance recipes: published_nemo.md)."""
    p = _predict("published_nemo.csv")
    assert (p["status"] == "ok").all()
    # regression guards, a little above today's errors (docs/accuracy.md: 10.1 % overall;
    # B200 13.4, GB200 9.4, H100 7.0 %; without the recipes' TP overlap 6.9 / 9.3 / 5.6 /
    # 8.7 %: the overlap as modelled fits the H100 TP4 rows and makes the Blackwell rows,
    # already fast, faster -- open)
    assert p["ape"].mean() <= 0.11, p[["id", "ape"]].round(3).to_string()
    assert p.loc[p["gpu"] == "b200", "ape"].mean() <= 0.145
    assert p.loc[p["gpu"] == "gb200", "ape"].mean() <= 0.10
    assert p.loc[p["gpu"] == "h100-sxm-80gb", "ape"].mean() <= 0.08


@pytest.mark.validation
def test_nemo_mixture_of_experts_runs():
    """Mixtral 8x7B/8x22B and Qwen3 30B-A3B/235B-A22B from the same tables (optional
    num_experts/top_k columns).  The graph launches the grouped experts eagerly, one
    GEMM per local expert (dse.graph.moe); the rows whose Megatron-Bridge recipe runs
    the 1F1B all-to-all overlap, a full-iteration CUDA graph or the DeepEP / HybridEP
    dispatcher say so in their ``moe_a2a_overlap`` / ``cuda_graphs`` / ``moe_dispatcher``
    columns (tests/data/published_nemo_gb200_moe.md: overlap on the H100 Qwen3-235B rows,
    the 25.11 B200 235B and 25.11 / 26.02 H100 30B rows and the 26.06 GB200 rows).  Rows whose expert parallelism spans TP ranks (MoE parallel folding, expert
    TP 1: dse.graph.moe.expert_tp) are predicted too.  A regression guard: 14.1 % mean
    today (B200 10.9, GB200 8.4, H100 25.2 %)."""
    p = _predict("published_moe.csv")
    ok = p[p["status"] == "ok"]
    assert len(ok) == len(p), p.loc[p["status"] != "ok", ["id", "status"]].to_string()
    assert ok["ape"].mean() <= 0.15, ok[["id", "ape"]].round(3).to_string()
    assert ok.loc[ok["gpu"] != "h100-sxm-80gb", "ape"].mean() <= 0.10


@pytest.mark.validation
def test_fsdp_runs_a100_and_h100():
    """PyTorch FSDP (ZeRO-3 / SHARD_GRAD_OP) training from llm-foundry and torchtitan."""
    p = _predict("published_fsdp.csv")
    ok = p[has_prediction(p["status"])]     # one H100 row is timed over memory (81.1 GiB)
    assert len(ok) == len(p), p.loc[~has_prediction(p["status"]), ["id", "status"]].to_string()
    a100 = ok[ok["gpu"].str.startswith("a100")]
    h100 = ok[ok["gpu"].str.startswith("h100")]
    assert a100["ape"].mean() <= 0.06, a100[["id", "ape"]].round(3).to_string()
    # llm-foundry runs FlashAttention-2-class kernels (dse.cost.attention_kernel): 18 % ->
    # 13.2 % once H100 charged them as such; still predicted too fast at long sequence
    assert h100["ape"].mean() <= 0.15, h100[["id", "ape"]].round(3).to_string()


@pytest.mark.validation
def test_bridge_catalog_models_runs():
    """DeepSeek-V3, GPT-OSS-120B and Kimi-K2 from Megatron-Bridge's performance summaries
    (tests/data/published_bridge_catalog.csv + .md): the schema's columns cannot say MLA,
    shared experts, dense first layers, sliding windows or MTP, so each row's `model`
    label brings its catalog table (dse.predict.row_model); each recipe's
    ``recompute_modules`` list is the row's ``recompute_modules`` column, and its 16-bit
    main gradients (``grad_reduce_in_fp32`` false, every Bridge performance recipe) the
    ``grad_reduce_in_fp32`` column.  A regression guard: today DeepSeek-V3 9.3 %, Kimi-K2
    3.8 %, GPT-OSS-120B 24.3 % too fast (a documented gap: docs/accuracy.md).
    mb2511_h100_gptoss120b_bf16_64g gets no time: its table prints MBS 4 where the recipe
    runs 1 (the .md's "TABLE INCONSISTENT"), and at MBS 4 it needs 106.5 of 80 GiB."""
    p = _predict("published_bridge_catalog.csv")
    inconsistent = p["id"] == "mb2511_h100_gptoss120b_bf16_64g"
    assert p.loc[inconsistent, "status"].str.startswith("out of memory").all()
    rest = p[~inconsistent]
    assert has_prediction(rest["status"]).all(), rest.loc[~has_prediction(rest["status"]), ["id", "status"]].to_string()
    assert (p["model_arch"] != "columns").all()
    mean = lambda m: rest.loc[rest["model"] == m, "ape"].mean()
    assert mean("DeepSeekV3") <= 0.10, rest[["id", "ape"]].round(3).to_string()
    assert mean("Kimi-K2") <= 0.05
    assert mean("GPT-OSS-120B") <= 0.25


@pytest.mark.validation
def test_bridge_nvfp4_training_runs():
    """NVFP4 pre-training (Megatron-Bridge 26.02-26.06, Llama 3 70B / 3.1 405B on GB200 and
    GB300; tests/data/published_bridge_nvfp4.csv + .md): the linears at the fp4 rate with
    the fp4 GEMM ceiling ratio, nothing fitted.  A regression guard: 7.7 % today (+6.2 %
    bias) since the sequence-parallel all-gathers move NVFP4 data
    (dse.graph.train.sp_gather_bytes); 10.9 % / +9.9 % before that, since B200 / GB200's GEMM
    fractions follow a shape-for-shape kernel sweep against H100,
    dse.spec.efficiency.b200_sm_gemm (the GB200 rows went from 0-9 % fast to 3-21 % slow);
    9.1 % / +6.2 % before; 7.4 % / +4.4 % before GB300's ``gemm_fp4`` followed its 1.5x wider 4-bit datapath,
    dse.spec.efficiency.fp4_efficiency, which Transformer Engine's published B300 NVFP4
    GEMM times support -- tests/test_out_of_sample_gemm.py: these rows' excess time is not in
    their GEMMs); the same rows priced as fp8 are 45 % slow."""
    p = _predict("published_bridge_nvfp4.csv")
    assert (p["status"] == "ok").all(), p.loc[p["status"] != "ok", ["id", "status"]].to_string()
    assert p["ape"].mean() <= 0.09, p[["id", "ape"]].round(3).to_string()


@pytest.mark.validation
def test_amd_instinct_training_runs():
    """Pre-training on AMD Instinct (tests/data/published_amd_training.csv + .md: MLPerf
    Training v5.1 Llama 3.1 8B on 8x MI355X, three submitters of one configuration;
    Primus-Megatron / ROCm Megatron-LM logs on MI325X, 16-64 GPUs).  CDNA 3 / 4 constants are
    published microbenchmark fractions, not fitted to a training row (dse.spec.efficiency).
    A regression guard: 9.8 % today, every row fast (MI355X 2-6 %, its GEMM fractions from
    MI355X microbenchmarks; 12-17 % slow while it carried MI300X's; MI325X 4-30 %, Mixtral
    EP8 the worst)."""
    p = _predict("published_amd_training.csv")
    assert (p["status"] == "ok").all(), p.loc[p["status"] != "ok", ["id", "status"]].to_string()
    assert p["ape"].mean() <= 0.11, p[["id", "ape"]].round(3).to_string()


@pytest.mark.validation
def test_mlperf_training_nvidia_runs():
    """MLPerf Training v4.0-v5.1 closed, NVIDIA GPUs (tests/data/published_mlperf_training.csv
    + .md: GPT-3 175B, Llama 3.1 405B and 8B from NVIDIA, Supermicro, CoreWeave, Nebius,
    Dell and the University of Florida on 8-2,560 H100, H200, B200, B300, GB200 and GB300;
    per-step times from the MLLOG training blocks, each row's ``tp_comm_overlap`` and
    ``cuda_graphs`` as its config sets them).  A regression guard a little above today's
    10.7 % (the target for held-out runs is <= 10 %): the H100 and H200 rows within -8..+6 % once
    their stated TP overlap is read, the GB200 / B200 405B rows 12-18 % fast, and the
    512-GPU Llama 3.1 8B row (TP2 CP4, 2,048 tokens per GPU, full-iteration CUDA graphs)
    half its measured time -- the model's GPU work of such small kernels is too short once
    no host floor covers it (open)."""
    p = _predict("published_mlperf_training.csv")
    assert (p["status"] == "ok").all(), p.loc[p["status"] != "ok", ["id", "status"]].to_string()
    assert p["ape"].mean() <= 0.12, p[["id", "ape"]].round(3).to_string()
    hopper = p[p["gpu"].str.startswith(("h100", "h200"))]
    assert len(hopper) == 8 and hopper["ape"].max() <= 0.09, hopper[["id", "ape"]].round(3).to_string()
