"""Shared test fixtures-as-functions (no pytest magic, so helpers' conftest stays theirs)."""

from dse.spec.hardware import get_hardware
from dse.spec.model import get_model


def a100():
    return get_hardware("a100-sxm-80gb")


def h100():
    return get_hardware("h100-sxm-80gb")


def llama70b():
    return get_model("llama3-70b")


def host_step(model, wl, lay, hw):
    """``train_step`` of one design point run on the host without an XLA compile
    (dse.host_eval.host_design_point, as ``dse estimate`` runs it): for tests that
    check the model's figures at a few points, not the compiled or vectorized path."""
    from dse.host_eval import host_design_point
    from dse.train.step import train_step
    return host_design_point(train_step, model, wl, lay, hw)


def expert_gemms_s(model, hw, r, tokens, precision):
    """Seconds of one MoE layer's two expert GEMMs over ``tokens`` tokens (TP 1, one
    stage) at the rates ``r``: :func:`dse.infer.forward.forward_ops`' ``experts`` through
    ``op_times``, the model's side of a measured-kernel comparison."""
    from dse.graph.ops import KVRead
    from dse.infer.forward import forward_ops, op_times
    att = KVRead(tokens, model.num_attention_heads * 1.0, 8.0, 100.0, 64.0)   # not in the experts
    g = forward_ops(model, tokens, tokens, att, 1, 1, precision, r.act_bytes)
    return float(op_times(g.experts, hw, r).total_s)


def validation_dir():
    """The validation data: the repository's copy ``data/validation`` (kept identical to
    ``../shared/validation``), else ``../shared/validation`` beside the checkout."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    repo = root / "data" / "validation"
    return repo if repo.is_dir() else root.parent / "shared" / "validation"


def predicted_or_skip(csv):
    """Every row of the validation file ``csv`` predicted (dse.predict.predict_frame); the
    calling test is skipped, saying where the data was looked for, when it is absent."""
    import pytest

    from dse.predict import predict_frame, read_csv
    if not csv.exists():
        pytest.skip(f"{csv} not present (data/validation, else ../shared/validation)")
    return predict_frame(read_csv(str(csv)), str(csv))


def throughput_errors(csv):
    """Every row of the out-of-sample serving file ``csv`` (a ``pathlib.Path``) predicted,
    with ``err`` = predicted / measured output tok/s - 1."""
    from dse.predict import predict_frame, read_csv
    p = predict_frame(read_csv(str(csv)), csv.name)
    p["err"] = p["predicted_output_tok_s"] / p["measured_output_tok_s"] - 1.0
    return p


def training_gemm_s(hardware, precision: str, m, n, k, name: str = "g") -> float:
    """Seconds of one ``m x n x k`` training GEMM on ``hardware`` (a catalog name or a
    Hardware) at ``precision`` (``bf16``: the 16-bit rate, else the linear layers'), priced
    by the training cost path (:class:`dse.graph.ops.Gemm` through :func:`dse.graph.ops.time_s`)."""
    from dse.cost.rates import rates
    from dse.graph.ops import Gemm, time_s
    from dse.spec.layout import PRECISION
    hw = get_hardware(hardware) if isinstance(hardware, str) else hardware
    rate = "16" if precision == "bf16" else "linear"
    return float(time_s(Gemm(float(m), float(n), float(k), 1.0, name=name, rate=rate), hw,
                        rates(hw, PRECISION[precision])))
