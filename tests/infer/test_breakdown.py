"""The decode iteration by operator kind (dse.infer.breakdown) and `dse infer --ops`: the
parts add up to the serving model's own iteration, move with the physics they name, and
the printed sentence is computed from them."""

import subprocess
import sys

import pytest

from dse.cost.rates import rates
from dse.infer.breakdown import breakdown_lines, decode_breakdown
from dse.infer.engines import PROFILES
from dse.infer.serving import Deployment, iteration_s, kv_bytes_per_token
from dse.spec.hardware import get_hardware
from dse.spec.model import get_model

H100 = get_hardware("h100-sxm-80gb")
L8 = get_model("meta-llama/Llama-3.1-8B")
MIX = get_model("mistralai/Mixtral-8x7B-v0.1")


def _dep(model=L8, engine="trtllm", tp=1, pp=1, precision=1, kv_bytes=2.0, ep=1, dp=1):
    return Deployment(model, H100, PROFILES[engine], tp, pp, precision, kv_bytes, ep, dp)


@pytest.mark.parametrize("kw,b,ctx", [({}, 64, 1500.0),
                                      ({"tp": 2, "pp": 2}, 32, 600.0),
                                      ({"engine": "vllm", "tp": 2}, 300, 900.0),   # past vLLM's graphs: eager
                                      ({"model": MIX, "tp": 4, "ep": 4, "precision": 2, "kv_bytes": 1.0}, 128, 2000.0)])
def test_parts_sum_to_the_serving_iteration(kw, b, ctx):
    d = _dep(**kw)
    br = decode_breakdown(d, b, ctx)
    assert min(br[:5]) >= 0.0
    assert br.iteration_s == pytest.approx(iteration_s(d, b, ctx), rel=1e-6)
    assert sum(br[:5]) == pytest.approx(br.iteration_s, rel=1e-5)


def test_attention_is_the_kv_read_and_grows_with_context_alone():
    d = _dep()
    short, long = decode_breakdown(d, 64, 1000.0), decode_breakdown(d, 64, 4000.0)
    assert long.attention_s > 3.0 * short.attention_s       # the KV read is linear in context
    assert long.gemm_s == pytest.approx(short.gemm_s, rel=1e-6)
    # the roofline: the whole cache of every sequence is read once per step
    kv = kv_bytes_per_token(d) * 64 * 4000.0
    assert long.attention_s >= kv / float(rates(H100, 1).hbm_bw_bytes_per_s) * (1 - 1e-6)


def test_serial_host_time_is_the_host_part():
    # vLLM 0.6 runs its scheduler between GPU passes (serial): the host part is at least it
    d = _dep(engine="vllm")
    br = decode_breakdown(d, 32, 800.0)
    assert br.host_s >= PROFILES["vllm"].host_s(32) * (1 - 1e-6)


def test_lines_name_the_largest_part_from_the_numbers():
    lines = breakdown_lines({"gemm_s": 0.002, "attention_s": 0.006, "comm_s": 0.0,
                             "elementwise_s": 0.001, "host_s": 0.001}, 0.010)
    assert "60.0%" in lines[2] and "100.0%" in lines[-2]
    assert lines[-1].strip().startswith("The largest part is attention (KV-cache read), 60%")
    assert "3.0x the next, GEMM" in lines[-1]
    with pytest.raises(ValueError):
        breakdown_lines({"gemm_s": 1.0}, 0.0)
    with pytest.raises(ValueError):
        decode_breakdown(_dep(), 0.0, 100.0)


def test_cli_infer_ops_prints_the_table():
    out = subprocess.run([sys.executable, "-m", "dse.cli", "infer", "--model", "llama3-8b",
                          "--hardware", "h100-sxm-80gb", "--gpus", "1", "--batch", "16",
                          "--prompt", "512", "--gen", "128", "--top", "2", "--ops"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "decode-only iteration of the top point" in text and "TPOT" in text
    for label in ("GEMM", "attention (KV-cache read)", "communication", "element-wise",
                  "host (not hidden)", "total", "The largest part is"):
        assert label in text, label
    assert "prefill of one 512-token prompt alone at the top point" in text
    assert ("also waits for the running pass" in text) != ("is shorter" in text)   # one reading, from the numbers
    assert "attention (prompt, causal)" in text and "of the prefill" in text


def test_cli_infer_ops_static_uses_the_sweeps_decode_columns():
    out = subprocess.run([sys.executable, "-m", "dse.cli", "infer", "--model", "llama3-8b",
                          "--hardware", "a100-sxm-80gb", "--gpus", "1", "--batch", "8",
                          "--batching", "static", "--top", "1", "--ops"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "decode step of the top point" in text and "static batch 8" in text
    assert "host (not hidden)" not in text and "100.0%" in text


def test_predict_rows_carry_the_decode_and_prefill_breakdowns():
    """`dse predict` on inference rows: predicted_decode_* and predicted_prefill_* (ms) each
    sum to their total (predicted_decode_ms, predicted_prefill_ms), every part >= 0, on the
    rows that are predicted (a slice of the serving calibration)."""
    from dse.infer.predict_rows import DECODE_COLUMNS, PREFILL_COLUMNS
    from dse.predict import predict_frame, read_csv
    from tests.helpers import validation_dir
    src = str(validation_dir() / "inference" / "calibration.csv")
    p = predict_frame(read_csv(src).head(12), src)
    ok = p[p["status"].str.startswith("ok")]
    assert len(ok) >= 6
    for cols in (DECODE_COLUMNS, PREFILL_COLUMNS):
        total, parts = ok[cols[0]], ok[list(cols[1:])]
        assert (parts >= 0).all().all() and (total > 0).all()
        assert ((parts.sum(axis=1) - total).abs() <= 1e-5 * total).all()


@pytest.mark.parametrize("kw,S", [({}, 2048.0),
                                  ({"tp": 2, "pp": 2}, 700.0),
                                  ({"engine": "vllm", "tp": 2}, 96.0),       # eager: the issue floor binds
                                  ({"model": MIX, "tp": 4, "ep": 4, "precision": 2, "kv_bytes": 1.0}, 4096.0)])
def test_prefill_parts_sum_to_the_serving_prefill(kw, S):
    """One prompt's prefill by kind: the parts add up to the serving model's static prefill
    of that prompt, and the GPU kinds alone are its pass without the engine's host time
    wherever the eager issue floor does not bind."""
    from dse.infer.breakdown import prefill_breakdown
    from dse.infer.serving import prefill_s
    d = _dep(**kw)
    br = prefill_breakdown(d, S)
    assert min(br[:5]) >= 0.0
    assert br.prefill_s == pytest.approx(prefill_s(d, 1.0, S), rel=1e-6)
    assert sum(br[:5]) == pytest.approx(br.prefill_s, rel=1e-5)
    if d.engine.eager_op_s == 0.0:
        assert sum(br[:4]) == pytest.approx(prefill_s(d, 1.0, S, overhead=False), rel=1e-5)


def test_prefill_attention_grows_quadratically_and_gemm_linearly():
    from dse.infer.breakdown import prefill_breakdown
    d = _dep()
    short, long = prefill_breakdown(d, 4096.0), prefill_breakdown(d, 16384.0)
    assert long.gemm_s == pytest.approx(4.0 * short.gemm_s, rel=0.05)      # tokens x weights
    assert long.attention_s > 10.0 * short.attention_s                       # causal: ~S^2
    # the roofline: the prompt's layer-linear FLOPs (every weight but the embedding and the
    # LM head, which a prefill runs for its last token only) at the tensor peak bound the part
    layer_params = L8.num_params() - 2 * L8.vocab_size * L8.hidden_size
    flops = 2.0 * 16384.0 * layer_params
    assert long.gemm_s >= flops / float(H100.peak_bf16_flops_per_s) * (1 - 1e-6)
    with pytest.raises(ValueError):
        prefill_breakdown(d, 0.0)
