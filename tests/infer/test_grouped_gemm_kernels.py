"""Mixtral-8x7B's expert GEMMs against TensorRT-LLM's measured CUTLASS MoE layers
(``tests/data/aic_mixtral_moe_kernels.csv``, provenance beside it): the dense GEMM model on
the experts' shapes, and the grouped-GEMM factor fitted on the serving calibration rows
(:data:`dse.infer.forward.MOE_GROUPED_GEMM_EFF`) measured against the kernels -- docs/accuracy.md,
"Mixtral's grouped GEMMs against TensorRT-LLM's measured MoE layers"."""

from pathlib import Path

import pandas as pd
import pytest

from dse.cost.rates import rates
from dse.infer.forward import MOE_GROUPED_GEMM_EFF
from dse.spec.hardware import get_hardware
from dse.spec.model import get_model
from tests.helpers import expert_gemms_s

DATA = Path(__file__).resolve().parents[1] / "data"
MIXTRAL = get_model("mistralai/Mixtral-8x7B-v0.1")
PRECISION = {"bfloat16": 1, "fp8": 2}


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    df = pd.read_csv(DATA / "aic_mixtral_moe_kernels.csv")
    assert (df["hidden_size"] == MIXTRAL.hidden_size).all()
    assert (df["inter_size"] == MIXTRAL.ffn_hidden_size).all()
    assert (df["num_experts"] == MIXTRAL.num_experts).all() and (df["topk"] == MIXTRAL.top_k).all()
    return df


def ratios(df: pd.DataFrame, factor: float) -> pd.Series:
    """Model / measured time of each row: the layer's two expert GEMMs
    (:func:`tests.helpers.expert_gemms_s`, at ``factor`` times the dense GEMM efficiency)
    against the measured whole MoE layer (routing, activation and combine included)."""
    out = []
    for (gpu, dtype), g in df.groupby(["gpu", "moe_dtype"]):
        hw = get_hardware(gpu)
        r = rates(hw, PRECISION[dtype])
        r = r._replace(eff_linear=r.eff_linear * factor)
        for row in g.itertuples():
            t = expert_gemms_s(MIXTRAL, hw, r, float(row.num_tokens), PRECISION[dtype])
            out.append((row.Index, t / (row.latency_ms * 1e-3)))
    idx, vals = zip(*out)
    return pd.Series(vals, index=idx).reindex(df.index)


def test_long_prompts_run_at_the_dense_gemm_rate(table):
    """From 4096 tokens per layer (1024 per expert, compute-bound), balanced routing: the
    dense GEMM model prices the measured layers at a median 1.16-1.29 per GPU and precision
    today (a regression guard of the dense GEMM model on these shapes; the layer's routing
    and activation kernels are not in the model's side of the ratio)."""
    big = table[(table["num_tokens"] >= 4096) & (table["distribution"] == "balanced")]
    med = ratios(big, 1.0).groupby([big["gpu"], big["moe_dtype"]]).median()
    assert len(med) == 4
    assert med.between(1.0, 1.4).all(), med


def test_the_fitted_factor_doubles_a_long_prompts_expert_time(table):
    """The open conflict the docs record: the calibration rows' factor 0.5 prices those
    long-prompt layers at more than twice the kernels' time, while below 256 tokens per
    layer (weight-stream bound) the factor barely matters.  If this fails, the factor moved:
    update docs/accuracy.md."""
    bal = table[table["distribution"] == "balanced"]
    big = bal[bal["num_tokens"] >= 4096]
    assert ratios(big, MOE_GROUPED_GEMM_EFF).median() > 2.0
    small = bal[(bal["num_tokens"] >= 16) & (bal["num_tokens"] <= 128)]
    fitted, dense = ratios(small, MOE_GROUPED_GEMM_EFF), ratios(small, 1.0)
    assert (fitted / dense).max() < 1.15
    assert dense.between(0.7, 1.1).all(), dense.describe()
