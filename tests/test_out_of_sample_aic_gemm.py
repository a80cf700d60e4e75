"""OUT-OF-SAMPLE, kernel level: dse's GEMM cost against NVIDIA AIConfigurator's measured GEMM
database on H100, H200, B200 and GB200 (tests/data/aic_gemm_kernels.csv + .md: TensorRT-LLM
1.3.0rc20 ``Linear`` layers timed under CUDA graphs, 125 shapes m, n, k in {1024 ... 16384}
per GPU and dtype; bf16 and fp8 everywhere, nvfp4 on Blackwell).

One number here sets constants: :data:`dse.spec.efficiency.B200_OVER_H100_GEMM`, B200's
fraction of its peak over H100's at the same shapes (median over the 27 shapes with every
dimension >= 4096), which the catalog's B200 and GB200 entries carry
(:func:`dse.spec.efficiency.b200_sm_gemm`).  The rest are checks: the same sweep's H200 / H100
ratio is the model's 1, its B200 nvfp4 / fp8 ratio the model's ``FP4_OVER_FP8``.

The fp8 and nvfp4 timings include TensorRT-LLM's dynamic activation quantization (the
collector's note); the model prices that as memory passes of their own, so their
model / measured ratios read high.  What is compared across GPUs is the ratio to H100's, the
in-training discount the fitted Hopper constants carry.  The bounds are REGRESSION GUARDS.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dse.spec.efficiency import B200_OVER_H100_GEMM, FP4_OVER_FP8, b200_sm_gemm
from dse.spec.hardware import get_hardware
from tests.helpers import training_gemm_s

CSV = Path(__file__).parent / "data" / "aic_gemm_kernels.csv"
PEAK = {"bf16": "peak_bf16_flops_per_s", "fp8": "peak_fp8_flops_per_s", "nvfp4": "peak_fp4_flops_per_s"}
BIG = 4096


@pytest.fixture(scope="module")
def data():
    d = pd.read_csv(CSV)
    peak = [getattr(get_hardware(g), PEAK[t]) for g, t in zip(d["gpu"], d["dtype"])]
    d["fraction"] = 2.0 * d["m"] * d["n"] * d["k"] / (d["latency_ms"] * 1e-3) / np.array(peak)
    d["big"] = (d[["m", "n", "k"]] >= BIG).all(axis=1)
    return d


def ratio(d, gpu, ref, dtype, ref_dtype=None, big=True):
    """Median over shared shapes of ``gpu``'s fraction of peak over ``ref``'s."""
    key = ["m", "n", "k"]
    a = d[(d["gpu"] == gpu) & (d["dtype"] == dtype) & (d["big"] | (not big))].set_index(key)["fraction"]
    b = d[(d["gpu"] == ref) & (d["dtype"] == (ref_dtype or dtype))].set_index(key)["fraction"]
    return float((a / b).dropna().median())


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_b200_constant_is_the_data_median(data, dtype):
    assert ratio(data, "b200", "h100-sxm-80gb", dtype) == pytest.approx(B200_OVER_H100_GEMM[dtype], abs=5e-4)


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_h200_over_h100_is_one_as_modelled(data, dtype):
    """Same SM, same 700 W: the model gives H200 H100's fractions; the sweep agrees."""
    assert 0.97 <= ratio(data, "h200-sxm-141gb", "h100-sxm-80gb", dtype) <= 1.05
    h100, h200 = get_hardware("h100-sxm-80gb"), get_hardware("h200-sxm-141gb")
    assert (h200.eff_gemm, h200.eff_gemm_fp8) == (h100.eff_gemm, h100.eff_gemm_fp8)


def test_b200_nvfp4_over_fp8_is_fp4_over_fp8(data):
    assert ratio(data, "b200", "b200", "nvfp4", "fp8", big=False) == pytest.approx(FP4_OVER_FP8, rel=0.03)


def test_catalog_b200_sm_carries_the_derivation():
    want = b200_sm_gemm()
    for name in ("b200", "gb200"):
        hw = get_hardware(name)
        assert (hw.eff_gemm, hw.eff_gemm_fp8, hw.eff_gemm_fp4) == pytest.approx(want, abs=1e-4)
    h100 = get_hardware("h100-sxm-80gb")
    for name in ("b300", "gb300"):       # Blackwell Ultra's SM keeps Hopper's (module docstring)
        hw = get_hardware(name)
        assert (hw.eff_gemm, hw.eff_gemm_fp8) == (h100.eff_gemm, h100.eff_gemm_fp8)


def model_over_measured(data, gpu, dtype) -> float:
    """Median over the big shapes of the model's GEMM time over the measured latency."""
    hw = get_hardware(gpu)
    s = data[(data["gpu"] == gpu) & (data["dtype"] == dtype) & data["big"]]
    model = [training_gemm_s(hw, dtype, m, n, k) for m, n, k in zip(s["m"], s["n"], s["k"])]
    return float(np.median(np.array(model) * 1e3 / s["latency_ms"].to_numpy()))


@pytest.mark.parametrize("gpu, dtype", [("b200", "bf16"), ("b200", "fp8"), ("gb200", "bf16")])
def test_blackwell_discount_near_hopper(data, gpu, dtype):
    """REGRESSION GUARD: the model / measured ratio (the in-training discount: the fitted
    constants sit below the bare kernels) of B200's SM within 10 % of H100's, as the B200
    constant makes it (B200 0.96 / 0.96, GB200 bf16 0.94 today; before it B200's was 0.86 /
    0.86 of H100's).  GB200 fp8 is left out: its measured fraction of peak is 0.796 of
    H100's against B200's 0.894, i.e. its fp8 GEMMs run 1 % slower than B200's in TFLOP/s on
    an 11 % higher peak, which neither its power nor its clock explains; the table prints
    it (0.83 of H100's)."""
    ref = model_over_measured(data, "h100-sxm-80gb", dtype)
    assert 0.90 <= model_over_measured(data, gpu, dtype) / ref <= 1.10


def test_print_table(data, capsys):
    """The table docs/accuracy.md quotes (``pytest -s -k print``)."""
    with capsys.disabled():
        print("\nOUT-OF-SAMPLE GEMM kernels: model / AIConfigurator measured (median over shapes >= 4096)")
        for gpu in ("h100-sxm-80gb", "h200-sxm-141gb", "b200", "gb200"):
            cells = [f"{t} {model_over_measured(data, gpu, t):.3f}" for t in ("bf16", "fp8")]
            print(f"  {gpu:16s} " + "  ".join(cells))
