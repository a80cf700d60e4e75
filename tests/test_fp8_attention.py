"""FP8 attention as a run states it (``Workload.fp8_attention``: Transformer Engine's
``fp8_dpa``, Megatron's ``fp8_dot_product_attention``): the fused kernel's matmuls on the
fp8 tensor peak, its exponentials unchanged, only inside an FP8 recipe; and where users
state it (CLI, API, the ``dse predict`` column or its Megatron name)."""

from __future__ import annotations

import pytest

from dse.cost.rates import rates
from dse.errors import InputError
from dse.graph.ops import Attention, time_s
from dse.host_eval import host_design_point
from dse.spec.hardware import get_hardware
from dse.spec.layout import Layout, Workload, fp8_attention_code
from dse.spec.model import get_model
from dse.train.memory_parts import step_and_memory

H100 = get_hardware("h100-sxm-80gb")


def _core(**kw):
    return Attention(batch=1.0, heads=32.0, kv_heads=8.0, s_q=8192.0, s_kv=8192.0, d=128.0,
                     d_fused=128.0, causal=0.5, dropout=0.0, fused=1.0, **kw)


@pytest.mark.parametrize("backward", [False, True])
def test_fp8_kernel_runs_its_matmuls_on_the_fp8_peak_and_keeps_its_exponentials(backward):
    r = rates(H100, 2)                                   # an fp8 recipe: linear peak = fp8 peak
    t16 = float(time_s(_core(backward=backward), H100, r))
    t8 = float(time_s(_core(backward=backward, fp8=1.0), H100, r))
    # only the tensor-core part halves: faster, but never twice as fast (the SFU time stays)
    assert t16 / 2 < t8 < t16
    no_exp = H100.replace(sfu_ex2_per_sm_clk=0.0)
    r0 = rates(no_exp, 2)
    assert float(time_s(_core(backward=backward, fp8=1.0), no_exp, r0)) == pytest.approx(
        float(time_s(_core(backward=backward), no_exp, r0)) / 2, rel=0.05)   # + launch, I/O


def test_step_is_faster_in_fp8_recipes_and_unchanged_outside_them():
    m = get_model("llama3-8b")
    lay = Layout(tp=2, pp=1, dp=4, mbs=1)
    step = lambda prec, f: float(host_design_point(
        step_and_memory, m, Workload(global_batch=64, seq_len=8192, precision=prec, fp8_attention=f),
        lay, H100)[0].step_time_s)
    assert step(2, 1) < step(2, 0)
    assert step(1, 1) == step(1, 0)        # a bf16 Workload built by hand: no FP8 attention


def test_codes_and_refusals():
    assert [fp8_attention_code(v, 2) for v in (None, False, True, 0, 1)] == [0, 0, 1, 0, 1]
    assert fp8_attention_code(True, None) == 1       # precision not known at this point
    assert fp8_attention_code(False, 1) == 0
    for bad in ("yes", 2, 0.5):
        with pytest.raises(InputError, match="fp8_attention: must be true or false"):
            fp8_attention_code(bad, 2)
    for prec in (0, 1, 3):
        with pytest.raises(InputError, match="needs precision fp8 or mxfp8"):
            fp8_attention_code(True, prec)


def test_cli_api_and_predict_column(tmp_path, capsys):
    import dse
    from dse.cli import main
    from dse.predict import predict_frame, read_csv
    args = ["estimate", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "8"]
    assert main(args + ["--precision", "fp8", "--fp8-attention"]) == 0
    assert ", fp8 attention" in capsys.readouterr().out
    assert main(args + ["--fp8-attention"]) == 2                 # bf16 by default
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fp8_attention" in err[0] and "'bf16'" in err[0]
    with pytest.raises(InputError, match="fp8_attention"):
        dse.estimate(model="llama3-8b", hardware="h100-sxm-80gb", gpus=8, fp8_attention=True)
    e = dse.estimate(model="llama3-8b", hardware="h100-sxm-80gb", gpus=8, tp=2, precision="fp8",
                     fp8_attention=True, seq_len=8192, global_batch=64)
    e0 = dse.estimate(model="llama3-8b", hardware="h100-sxm-80gb", gpus=8, tp=2, precision="fp8",
                      seq_len=8192, global_batch=64)
    assert e.step_time_s < e0.step_time_s
    head = ("id,model,num_layers,hidden_size,ffn_hidden_size,num_attention_heads,num_kv_heads,vocab_size,"
            "seq_length,global_batch_size,micro_batch_size,gpu,num_gpus,tp,pp,dp,precision,recompute,"
            "fp8_attention,fp8_dot_product_attention,measured_iter_time_s")
    arch = "m,16,2048,8192,16,16,32000,8192,64,1,h100-sxm-80gb,8,2,1,4"
    f = tmp_path / "rows.csv"
    f.write_text("\n".join([head, f"a,{arch},fp8,none,true,,1.0", f"b,{arch},fp8,none,,,1.0",
                            f"c,{arch},fp8,none,,TRUE,1.0",           # Megatron's name
                            f"d,{arch},bf16,none,true,,1.0",          # not an FP8 recipe
                            f"e,{arch},fp8,none,true,false,1.0",      # the two names disagree
                            f"g,{arch},fp8,none,sometimes,,1.0"]) + "\n")
    p = predict_frame(read_csv(str(f)), str(f)).set_index("id")
    assert (p.loc[["a", "b", "c"], "status"] == "ok").all()
    assert p.loc["a", "predicted_iter_time_s"] < p.loc["b", "predicted_iter_time_s"]
    assert p.loc["c", "predicted_iter_time_s"] == p.loc["a", "predicted_iter_time_s"]
    assert "fp8_attention" in p.loc["d", "status"] and "fp8 or mxfp8" in p.loc["d", "status"]
    assert "must agree" in p.loc["e", "status"]
    assert "fp8_attention" in p.loc["g", "status"] and "'sometimes'" in p.loc["g", "status"]
