"""Megatron-Core's selective ``recompute_modules`` (dse.spec.layout.RECOMPUTE_MODULES):
parsing, the physics of each module (memory it frees, forward work it adds), and the
``--recompute-modules`` flag / ``recompute_modules`` column.

Each design point runs on the host (tests.helpers.host_step's mechanism: no XLA compile)."""

from __future__ import annotations

import pytest

from dse.errors import InputError
from dse.host_eval import host_design_point
from dse.spec.hardware import get_hardware
from dse.spec.layout import (RECOMPUTE_MODULES, RECOMPUTE_MODULES_DEFAULT, Layout, Workload,
                             recompute_modules_code, recompute_modules_names)
from dse.spec.model import get_model
from dse.train.memory_parts import step_and_memory

B200 = get_hardware("b200")
# DeepSeek-V3 has every kind the modules touch: MLA, routed + shared experts, dense layers
DSV3 = get_model("deepseek-v3")
DSV3_LAY = Layout(tp=1, pp=8, dp=32, ep=32, vpp=2, recompute=1, zero=1)


def _point(model, lay, modules, hw=B200, precision=1, gbs=4096):
    wl = Workload(global_batch=gbs, seq_len=4096, precision=precision,
                  recompute_modules=recompute_modules_code(modules))
    r, _ = host_design_point(step_and_memory, model, wl, lay, hw)
    return float(r.step_time_s), float(r.mem_bytes)


@pytest.mark.parametrize("text, code", [
    ("core_attn", 1), ("[mla_up_proj, mlp]", 2 | 16), ("layernorm+moe_act", 4 | 8),
    ("'mla_up_proj' 'mlp'", 2 | 16), ("none", 0), ("[]", 0), ("[ ]", 0), ("MLP", 16), (["mlp", "moe_act"], 24)])
def test_module_lists_parse_as_runs_write_them(text, code):
    assert recompute_modules_code(text) == code


def test_names_round_trip():
    for code in range(64):
        names = recompute_modules_names(code)
        assert recompute_modules_code(names) == code


@pytest.mark.parametrize("text, says", [
    ("moe", "not modelled"), ("mlp,mlp", "twice"), ("core_attn,flash", "'flash'"),
    ("mla-up-proj", "must be module names"), ("", "must name modules or none"), (",", "must name modules"),
    ("[", "must name modules"), ("\x00\xff", "must be module names"), ("none,mlp", "'none'")])
def test_bad_module_lists_are_refused_by_name(text, says):
    with pytest.raises(InputError) as e:
        recompute_modules_code(text, where="x.csv row 3")
    assert says in str(e.value) and "recompute_modules" in str(e.value)


def test_default_is_megatron_core_default():
    """Megatron-Core's ``recompute_modules`` defaults to ["core_attn"]: a Workload that
    states nothing is the same point as one that states it."""
    assert RECOMPUTE_MODULES_DEFAULT == RECOMPUTE_MODULES["core_attn"]
    assert Workload(global_batch=8, seq_len=8).recompute_modules == RECOMPUTE_MODULES_DEFAULT


def test_each_module_frees_memory_and_adds_forward_work():
    """Adding a module to the list never keeps more activations and never runs faster
    (each recomputes a forward it frees); on DeepSeek-V3 every module has work to do, so
    each strictly does both.  The chain adds them one at a time to ``core_attn``."""
    chain = ["core_attn", "mla_up_proj", "layernorm", "moe_act", "mlp", "shared_experts"]
    t_prev, m_prev = _point(DSV3, DSV3_LAY, "core_attn")
    for i in range(2, len(chain) + 1):
        t, m = _point(DSV3, DSV3_LAY, ",".join(chain[:i]))
        assert t > t_prev and m < m_prev, (chain[i - 1], t, t_prev, m, m_prev)
        t_prev, m_prev = t, m


def test_mla_up_proj_is_the_worst_bridge_row_fix():
    """Megatron-Bridge 26.04.01 DeepSeek-V3 MXFP8 on 256 B200 (PP8 VPP2 EP32, DeepEP, A2A
    overlap) runs ``recompute_modules [mla_up_proj, mlp]``: plain selective does not fit in
    179 GiB (so ``dse predict`` had to take block recompute, +40 %), the stated modules fit
    with room to spare, at a step time near the measured 19.69 s (tests/data/
    published_bridge_catalog.csv row mb260401_b200_dsv3_mx_256g; a regression guard, not a fit)."""
    wl = dict(global_batch=4096, seq_len=4096, precision=5, moe_a2a_overlap=1, moe_dispatcher=1)
    out = {}
    for mods in ("core_attn", "mla_up_proj,mlp"):
        w = Workload(**wl, recompute_modules=recompute_modules_code(mods))
        r, _ = host_design_point(step_and_memory, DSV3, w, DSV3_LAY, B200)
        out[mods] = float(r.step_time_s), float(r.mem_bytes) / 2**30
    assert out["core_attn"][1] > B200.hbm_bytes / 2**30 > out["mla_up_proj,mlp"][1] + 20
    assert abs(out["mla_up_proj,mlp"][0] / 19.6923 - 1) < 0.05


def test_modules_a_model_lacks_change_nothing():
    """mla_up_proj on a model without MLA, moe_act / shared_experts on a dense model, and
    layernorm where Transformer Engine fuses the norms into the linears (a dense non-MLA
    layer) recompute nothing: the same time and memory as core_attn alone."""
    llama = get_model("llama3-70b")
    lay = Layout(tp=8, pp=4, dp=2, recompute=1, sp=1)
    base = _point(llama, lay, "core_attn", gbs=64)
    for mods in ("core_attn,mla_up_proj", "core_attn,moe_act,shared_experts", "core_attn,layernorm"):
        assert _point(llama, lay, mods, gbs=64) == pytest.approx(base, rel=1e-6), mods


def test_empty_list_with_flash_is_no_recompute():
    """With FlashAttention the attention core keeps no scores, so selective recompute of
    nothing (``none``) or of ``core_attn`` alone is the same point as no recompute."""
    llama = get_model("llama3-8b")
    lay = Layout(tp=2, pp=1, dp=4, recompute=1)
    none = _point(llama, Layout(tp=2, pp=1, dp=4, recompute=0), "core_attn", gbs=32)
    assert _point(llama, lay, "none", gbs=32) == pytest.approx(none, rel=1e-6)
    assert _point(llama, lay, "core_attn", gbs=32) == pytest.approx(none, rel=1e-6)


def test_estimate_flag(capsys):
    from dse.cli import main
    args = ["estimate", "--model", "deepseek-v3", "--hardware", "b200", "--gpus", "256", "--global-batch",
            "4096", "--pp", "8", "--vpp", "2", "--ep", "32", "--precision", "mxfp8", "--recompute", "selective"]
    main(args + ["--recompute-modules", "[mla_up_proj, mlp]"])
    assert "selective (mla_up_proj+mlp)" in capsys.readouterr().out
    assert main(args + ["--recompute-modules", "moe"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "recompute_modules" in err[0] and "'moe'" in err[0]
    assert main(args + ["--recompute-modules", "auto"]) == 2
    assert "search setting" in capsys.readouterr().err
    sweep = ["sweep", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "8", "--global-batch", "32",
             "--stream", "--recompute-modules", "auto"]
    assert main(sweep) == 2
    assert "drop --stream" in capsys.readouterr().err


def test_predict_column(tmp_path):
    """A stated list makes a blank ``recompute`` selective; a list beside full recompute
    or an unknown module gets a row status naming the column, and the other rows are
    predicted."""
    from dse.predict import predict_frame, read_csv
    head = ("id,model,num_layers,hidden_size,ffn_hidden_size,num_attention_heads,num_kv_heads,vocab_size,"
            "seq_length,global_batch_size,micro_batch_size,gpu,num_gpus,tp,pp,dp,precision,recompute,"
            "recompute_modules,measured_iter_time_s")
    arch = "m,16,2048,8192,16,16,32000,2048,64,1,a100-sxm-80gb,8,2,1,4,bf16"
    f = tmp_path / "rows.csv"
    rows = [f"r{i},{arch},{rc},{mods},1.0" for i, (rc, mods) in
            enumerate([("", "core_attn"), ("full", "mlp"), ("", "moe"), ("selective", "bogus")])]
    f.write_text("\n".join([head, *rows]) + "\n")
    p = predict_frame(read_csv(str(f)), str(f))
    assert p.loc[0, "status"].startswith("ok") and p.loc[0, "chosen_recompute"] == "selective"
    assert p.loc[0, "chosen_recompute_modules"] == "core_attn"
    for i, says in ((1, "applies only to recompute = selective"), (2, "not modelled"), (3, "'bogus'")):
        assert "recompute_modules" in p.loc[i, "status"] and says in p.loc[i, "status"], p.loc[i, "status"]


def test_api_estimate_takes_the_list():
    import dse
    kw = dict(model="deepseek-v3", hardware="b200", gpus=256, global_batch=4096, pp=8, vpp=2, ep=32,
              precision="mxfp8", recompute="selective")
    plain = dse.estimate(**kw)
    light = dse.estimate(**kw, recompute_modules=["mla_up_proj", "mlp"])
    assert light.workload.recompute_modules == 2 | 16
    assert light.mem_gib < plain.mem_gib and light.step_time_s > plain.step_time_s
    with pytest.raises(InputError, match="recompute_modules"):
        dse.estimate(**kw, recompute_modules="attention")


def test_auto_candidates_are_the_lists_a_model_has():
    from dse.sweep.run import module_candidates
    names = lambda m: [recompute_modules_names(c) for c in module_candidates(get_model(m))]
    assert names("llama3-70b") == ["core_attn", "core_attn+mlp"]
    assert sorted(names("mixtral-8x7b")) == sorted(["core_attn", "core_attn+layernorm", "core_attn+moe_act",
                                                    "core_attn+layernorm+moe_act"])
    dsv3 = names("deepseek-v3")          # MLA, routed + shared experts, dense first layers
    assert dsv3[0] == "core_attn" and len(dsv3) == 32 and len(set(dsv3)) == 32


def test_auto_sweep_fits_selective_layouts_with_the_fastest_list():
    """``--recompute-modules auto``: a selective layout that does not fit with core_attn alone
    comes back with the fastest list that makes it fit (Llama-3 8B at 8k tokens on 40 GB
    A100s: ``mlp``); every other row is the plain sweep's, and each layout appears once."""
    import dse
    kw = dict(model="llama3-8b", hardware="a100-sxm-40gb", gpus=8, global_batch=64, seq_len=8192)
    key = ["hardware", "tp", "pp", "dp", "cp", "ep", "mbs", "vpp", "recompute", "zero", "sp"]
    plain = dse.sweep(**kw).set_index(key)
    auto = dse.sweep(**kw, recompute_modules="auto")
    assert not auto.duplicated(subset=key).any() and len(auto) == len(plain)
    moved = auto[auto["recompute_modules"] != "core_attn"].set_index(key)
    assert len(moved) > 0 and moved["feasible"].all()
    assert (moved.index.get_level_values("recompute") == "selective").all()
    assert not plain.loc[moved.index, "feasible"].any()
    same = auto[auto["recompute_modules"] == "core_attn"].set_index(key)
    assert (same["step_time_s"].fillna(-1) == plain.loc[same.index, "step_time_s"].fillna(-1)).all()
    with pytest.raises(InputError, match="search setting"):
        dse.estimate(model="llama3-8b", hardware="a100-sxm-40gb", gpus=8, recompute="selective",
                     recompute_modules="auto")
