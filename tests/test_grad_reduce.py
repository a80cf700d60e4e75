"""Megatron-Core's ``grad_reduce_in_fp32`` as a run states it (``Workload.grad_reduce_fp32``):
the bytes of the main-gradient buffer and of its data-parallel reduce
(dse.graph.train.main_grad_bytes), and where users state it."""

from __future__ import annotations

import pytest

from dse.errors import InputError
from dse.graph.train import main_grad_bytes
from dse.host_eval import host_design_point
from dse.spec.hardware import get_hardware
from dse.spec.layout import Layout, Workload, grad_reduce_code
from dse.spec.model import get_model
from dse.train.memory_parts import step_and_memory


@pytest.mark.parametrize("precision, stated, want", [
    (1, -1, 4.0), (1, 1, 4.0), (1, 0, 2.0),      # bf16: Megatron-LM's fp32 default, or as stated
    (2, -1, 2.0), (2, 1, 4.0), (2, 0, 2.0),      # fp8: the megatron profile's 16-bit default
    (0, 0, 4.0), (0, -1, 4.0)])                  # fp32 training keeps fp32 gradients
def test_main_grad_bytes(precision, stated, want):
    wl = Workload(global_batch=8, seq_len=8, precision=precision, grad_reduce_fp32=stated)
    assert float(main_grad_bytes(wl)) == want


def test_codes_and_refusals():
    assert [grad_reduce_code(v) for v in (None, "", "default", True, False, "TRUE", "false")] == \
        [-1, -1, -1, 1, 0, 1, 0]
    for bad in ("maybe", 1, "0", 2.5):
        with pytest.raises(InputError, match="grad_reduce_in_fp32"):
            grad_reduce_code(bad)


def test_sixteen_bit_gradients_halve_the_buffer_and_the_reduce():
    """bf16 GPT-OSS-120B, EP 8 over 64 B200 (Megatron-Bridge's recipe): 16-bit main gradients
    take half the gradient memory, and the data-parallel reduce moves half the bytes, so the
    step is never slower."""
    m, hw = get_model("gpt-oss-120b"), get_hardware("b200")
    lay = Layout(tp=1, pp=1, dp=64, ep=8, mbs=4, recompute=0)
    out = {}
    for stated in (1, 0):
        wl = Workload(global_batch=1280, seq_len=4096, grad_reduce_fp32=stated)
        r, parts = host_design_point(step_and_memory, m, wl, lay, hw)
        out[stated] = float(r.step_time_s), float(parts.grads_bytes), float(r.dp_comm_s)
    assert out[0][1] == pytest.approx(out[1][1] / 2, rel=1e-6)
    assert out[0][0] <= out[1][0] and out[0][2] < out[1][2]


def test_cli_and_predict_column(tmp_path, capsys):
    from dse.cli import main
    from dse.predict import predict_frame, read_csv
    args = ["estimate", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "8"]
    assert main(args + ["--grad-reduce-in-fp32", "false"]) == 0
    capsys.readouterr()
    assert main(args + ["--grad-reduce-in-fp32", "sometimes"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "grad_reduce_in_fp32" in err[0]
    head = ("id,model,num_layers,hidden_size,ffn_hidden_size,num_attention_heads,num_kv_heads,vocab_size,"
            "seq_length,global_batch_size,micro_batch_size,gpu,num_gpus,tp,pp,dp,precision,recompute,"
            "grad_reduce_in_fp32,measured_iter_time_s")
    arch = "m,16,2048,8192,16,16,32000,2048,64,1,a100-sxm-80gb,8,2,1,4,bf16,none"
    f = tmp_path / "rows.csv"
    f.write_text("\n".join([head, f"a,{arch},false,1.0", f"b,{arch},,1.0", f"c,{arch},yes,1.0"]) + "\n")
    p = predict_frame(read_csv(str(f)), str(f))
    assert p.loc[0, "status"] == "ok" and p.loc[1, "status"] == "ok"
    assert p.loc[0, "predicted_mem_grads_gib"] == pytest.approx(p.loc[1, "predicted_mem_grads_gib"] / 2, rel=1e-6)
    assert "grad_reduce_in_fp32" in p.loc[2, "status"] and "'yes'" in p.loc[2, "status"]
