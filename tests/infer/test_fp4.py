"""fp4 (NVFP4 / MXFP4) serving precision: weight bytes, fp4 GEMM peak, hardware check."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.errors import InputError
from dse.infer.engines import PROFILES
from dse.infer.memory import weight_params_per_gpu
from dse.infer.predict_rows import predict_inference_row
from dse.infer.serving import Deployment, iteration_s, prefill_s, weights_bytes
from dse.spec.hardware import check_precision, get_hardware
from dse.spec.layout import PRECISION_MXFP4, PRECISION_NVFP4
from dse.spec.model import get_model
from dse.cost.rates import rates

B200 = get_hardware("b200")
H100 = get_hardware("h100-sxm-80gb")
MODELS = [get_model(n) for n in ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B",
                                 "mistralai/Mixtral-8x7B-v0.1")]


def _dep(model, precision, tp=1, hw=B200):
    return Deployment(model, hw, PROFILES["trtllm"], tp, 1, precision, 1.0)


def test_catalog_fp4_peaks_dense():
    want = {"b200": 9000, "gb200": 10000, "b300": 13500, "gb300": 15000,
            "rtx-pro-6000": 2015.2, "mi355x": 10066.4}
    for name, tflops in want.items():
        hw = get_hardware(name)
        assert float(hw.peak_fp4_flops_per_s) == pytest.approx(tflops * 1e12)
        # dense, not the sparse figure: at most 3x the dense fp8 peak
        assert float(hw.peak_fp4_flops_per_s) <= 3.0 * float(hw.peak_fp8_flops_per_s)
    for name in ("h100-sxm-80gb", "h200-sxm-141gb", "a100-sxm-80gb", "mi300x"):
        assert float(get_hardware(name).peak_fp4_flops_per_s) == 0.0


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from([1, 2, 4, 8]))
def test_fp4_weights_half_of_fp8_plus_scales(model, tp):
    lin, other = (float(x) for x in weight_params_per_gpu(model, tp, 1))
    w8 = weights_bytes(_dep(model, 2, tp))
    for code, scale in ((PRECISION_NVFP4, 1 / 16), (PRECISION_MXFP4, 1 / 32)):
        w4 = weights_bytes(_dep(model, code, tp))
        assert w4 - other * 2.0 == pytest.approx((w8 - other * 2.0) * (0.5 + scale), rel=1e-5)
        assert lin * 0.5 < w4 - other * 2.0 < lin * 0.5625 + 1


def test_fp4_gemm_runs_on_fp4_peak():
    r = rates(B200, PRECISION_NVFP4)
    assert float(r.peak_linear_flops_per_s) > 1.9 * float(rates(B200, 2).peak_linear_flops_per_s)
    m = MODELS[1]
    # compute-bound prefill is faster in fp4 than fp8; decode (weight stream) faster too
    assert prefill_s(_dep(m, PRECISION_NVFP4, 4), 8, 4096) < prefill_s(_dep(m, 2, 4), 8, 4096)
    assert iteration_s(_dep(m, PRECISION_NVFP4, 4), 8, 2000) < iteration_s(_dep(m, 2, 4), 8, 2000)


def test_fp4_needs_fp4_tensor_cores():
    with pytest.raises(InputError):
        check_precision(H100, PRECISION_NVFP4, "x")
    check_precision(B200, PRECISION_NVFP4, "x")


def _row(**kw):
    base = dict(id="x", model="meta-llama/Llama-3.1-70B", hardware="b200", gpus=4, tp=4, pp=1,
                precision="fp4", engine="trtllm", scenario="offline_throughput",
                input_len=1000, output_len=1000)
    return {**base, **kw}


def test_fp4_rows():
    r = predict_inference_row(_row())
    assert r["status"] == "ok" and r["chosen_precision"] == "nvfp4"
    amd = predict_inference_row(_row(hardware="mi355x", engine="vllm (0.10.1)"))
    assert amd["status"] == "ok" and amd["chosen_precision"] == "mxfp4"
    assert "NVIDIA GPUs only" in predict_inference_row(_row(hardware="mi355x"))["status"]
    assert "no fp4" in predict_inference_row(_row(hardware="h100-sxm-80gb"))["status"]
    assert "MXFP4" in predict_inference_row(_row(hardware="mi355x", precision="nvfp4"))["status"]
    fp8 = predict_inference_row(_row(precision="fp8"))
    assert r["predicted_output_tok_s"] > fp8["predicted_output_tok_s"]


def test_infer_sweep_fp4():
    from dse.infer.sweep import sweep_inference
    m = MODELS[0]
    df = sweep_inference(m, [B200, H100], 1, 4, 512, 64, PRECISION_NVFP4)
    assert set(df[df.hardware == "h100-sxm-80gb"].status.str.startswith("infeasible")) == {True}
    b = df[(df.hardware == "b200") & df.feasible]
    assert len(b) and (b.precision == "nvfp4").all()
    w8 = sweep_inference(m, [B200], 1, 4, 512, 64, 2)
    assert b.weights_gib.max() < 0.75 * w8.weights_gib.max()     # 16-bit embeddings stay
