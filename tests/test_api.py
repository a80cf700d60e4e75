"""The Python API (dse.api, re-exported lazily by `import dse`) and its notebook."""

import inspect
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dse
from dse.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(model="llama3-8b", hardware="h100-sxm-80gb", gpus=8, global_batch=64, seq_len=2048)


def test_import_dse_is_cheap_and_configures_nothing():
    code = ("import sys, dse; print('jax' in sys.modules, 'pandas' in sys.modules, "
            "'dse.api' in sys.modules, sorted(n for n in dir(dse) if not n.startswith('_')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=ROOT).stdout
    assert out.startswith("False False False") and "'estimate'" in out and "'sweep'" in out


def test_acceptance_command():
    code = ("import dse; print(dse.sweep(model='llama3-70b', hardware='h100-sxm-80gb', gpus=64, "
            "global_batch=1024, seq_len=4096).head())")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert "llama3-70b" in p.stdout and "[5 rows x" in p.stdout


def test_sweep_is_the_sweep_and_subpackages_still_work():
    from dse.spec.hardware import get_hardware
    from dse.spec.model import get_model
    from dse.sweep.run import sweep
    df = dse.sweep(**SMALL)
    ref = sweep(get_model("llama3-8b"), [get_hardware("h100-sxm-80gb")], 8, 64, 2048)
    np.testing.assert_array_equal(df["step_time_s"].to_numpy(), ref["step_time_s"].to_numpy())
    assert {"energy_kwh_per_mtok", "gpu_hours_per_mtok", "gpu_power_w"} <= set(df)
    assert callable(dse.sweep) and dse.sweep.run.sweep is sweep      # package and function
    assert callable(dse.infer) and hasattr(dse.infer, "sweep_inference")


def test_estimate_agrees_with_the_sweep_row():
    df = dse.sweep(**SMALL)
    for _, r in df[df["feasible"]].iloc[[0, 7, 40]].iterrows():
        e = dse.estimate(model="llama3-8b", hardware="h100-sxm-80gb", gpus=8, tp=int(r.tp),
                         pp=int(r.pp), dp=int(r.dp), cp=int(r.cp), ep=int(r.ep), mbs=int(r.mbs),
                         vpp=int(r.vpp), recompute=r.recompute, zero=int(r.zero), sp=bool(r.sp),
                         global_batch=64, seq_len=2048)
        assert e.fits and e.status == "ok"
        assert e.step_time_s == pytest.approx(r.step_time_s, rel=1e-5)
        assert e.mem_gib == pytest.approx(r.mem_gib, rel=1e-5)
        assert e.breakdown["tp_comm_s"] == pytest.approx(r.tp_comm_s, rel=1e-4, abs=1e-9)
        assert e.energy["energy_kwh_per_mtok"] == pytest.approx(r.energy_kwh_per_mtok, rel=1e-5)
    assert set(e.ops.columns) >= {"op", "phase", "count", "exposed_s", "term", "bound"}
    assert e.ops["exposed_s"].sum() == pytest.approx(e.step_time_s, rel=1e-3)
    assert "fits" in str(e) and e.to_series()["fits"]


def test_infeasible_estimate_is_flagged_not_timed():
    e = dse.estimate(model="llama3-70b", hardware="a100-sxm-40gb", gpus=8, tp=8, global_batch=64,
                     seq_len=2048)
    assert not e.fits and e.status.startswith("out of memory")
    assert math.isnan(e.step_time_s) and all(math.isnan(v) for v in e.breakdown.values())
    assert float(e.raw.step_time_s) > 0 and "DOES NOT FIT" in str(e)


def test_estimate_defaults_are_the_clis():
    from dse.cli import build_parser
    a = build_parser().parse_args(["estimate", "--model", "m", "--hardware", "h", "--gpus", "8"])
    sig = inspect.signature(dse.api.estimate).parameters
    for name in ("tp", "pp", "dp", "cp", "ep", "mbs", "vpp", "recompute", "zero", "sp",
                 "global_batch", "precision", "attention", "framework", "tp_overlap"):
        assert sig[name].default == getattr(a, name), name
    s = build_parser().parse_args(["sweep", "--model", "m", "--hardware", "h", "--gpus", "8",
                                   "--global-batch", "8"])
    sig = inspect.signature(dse.api.sweep).parameters
    for name in ("precision", "attention", "framework", "tp_overlap", "pue"):
        assert sig[name].default == getattr(s, name), name
    assert sig["seq_len"].default == s.seq == 4096
    for fn in (dse.api.estimate, dse.api.compare):
        assert inspect.signature(fn).parameters["seq_len"].default == 4096


@pytest.mark.parametrize("kw, field", [
    (dict(precision="fp7"), "precision"), (dict(precision=2), "precision"),
    (dict(recompute="half"), "recompute"), (dict(framework="jax"), "framework"),
    (dict(gpus=0), "gpus"), (dict(gpus=8.0), "gpus"), (dict(tp=3), "tp"), (dict(zero=4), "zero"),
    (dict(model="llama9"), "model"), (dict(hardware="tpu-v9"), "hardware"), (dict(model=7), "model"),
    (dict(ddp_bucket_size=-1), "ddp_bucket_size"), (dict(ddp_bucket_size="big"), "ddp_bucket_size"),
])
def test_bad_input_is_an_input_error(kw, field):
    args = dict(model="llama3-8b", hardware="h100-sxm-80gb", gpus=8, global_batch=64)
    args.update(kw)
    with pytest.raises(InputError) as e:
        dse.estimate(**args)
    assert e.value.field.startswith(field) and "\n" not in str(e.value)


def test_sweep_fp8_on_a100_is_an_input_error():
    with pytest.raises(InputError, match="fp8"):
        dse.sweep(**{**SMALL, "hardware": "a100-sxm-80gb", "precision": "fp8"})


def test_serve_and_compare():
    df = dse.serve(model="llama3-8b", hardware="h100-sxm-80gb", gpus=1, batch=8, prompt=512, gen=64)
    assert df["feasible"].iloc[0] and df["tokens_per_s"].iloc[0] == df["tokens_per_s"].max()
    same = dse.infer(model="llama3-8b", hardware="h100-sxm-80gb", gpus=1, batch=8, prompt=512, gen=64)
    np.testing.assert_array_equal(df["tokens_per_s"].to_numpy(), same["tokens_per_s"].to_numpy())
    cmp = dse.compare(model="llama3-8b", hardware=["a100-sxm-80gb", "h100-sxm-80gb"], gpus=[8],
                      global_batch=64, seq_len=2048)
    assert len(cmp) == 2 and (cmp["status"] == "ok").all()
    with pytest.raises(InputError):
        dse.serve(model="llama3-8b", hardware="h100-sxm-80gb", gpus=1, batch=0)


def test_notebook_runs():
    """Every code cell of docs/examples/api.ipynb, in order, in one namespace."""
    nb = json.loads((ROOT / "docs" / "examples" / "api.ipynb").read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert len(code) >= 5
    ns: dict = {}
    for i, c in enumerate(code):
        exec(compile("".join(c["source"]), f"api.ipynb cell {i + 1}", "exec"), ns)
    assert ns["big"].fits is False and ns["e"].fits


def test_layout_default_zero_is_the_clis():
    from dse.cli import build_parser
    from dse.spec.layout import Layout
    a = build_parser().parse_args(["estimate", "--model", "m", "--hardware", "h", "--gpus", "8"])
    assert Layout().zero == a.zero == 1


def test_serve_defaults_are_the_clis(tmp_path, capsys):
    """dse.serve takes dse infer's defaults (continuous batching, the hardware's default
    engine, every valid ep / attn_dp, the CLI's margin): the same top row as the command."""
    import pandas as pd
    from dse.cli import build_parser, main
    a = build_parser().parse_args(["infer", "--model", "m", "--hardware", "h", "--gpus", "1"])
    sig = inspect.signature(dse.api.serve).parameters
    for name in ("batch", "prompt", "gen", "precision", "batching", "engine"):
        assert sig[name].default == getattr(a, name), name
    kw = dict(model="llama3-8b", hardware="h100-sxm-80gb", gpus=1, batch=8, prompt=512, gen=64)
    df = dse.serve(**kw)
    assert main(["infer", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "1",
                 "--batch", "8", "--prompt", "512", "--gen", "64", "-o", str(tmp_path / "i.csv")]) == 0
    cli = pd.read_csv(tmp_path / "i.csv")
    for c in ("engine", "tp", "pp", "batch", "tokens_per_s", "ttft_s"):
        assert df[c].iloc[0] == pytest.approx(cli[c].iloc[0], rel=1e-6) if isinstance(df[c].iloc[0], float) \
            else df[c].iloc[0] == cli[c].iloc[0], c


@pytest.mark.parametrize("fn, kw", [
    ("serve", dict(gpus=10**30)), ("sweep", dict(gpus=10**30, global_batch=64)),
    ("estimate", dict(gpus=10**30)), ("estimate", dict(gpus=8, seq_len=2**31)),
    ("compare", dict(gpus=[8, 2**20 + 1], global_batch=64)),
])
def test_api_integers_have_the_clis_bounds(fn, kw):
    """GPU counts above 2^20 (the CLI's --gpus bound) and integers above 2^31 - 1 are an
    InputError at once (they used to hang in the divisor enumeration or overflow)."""
    with pytest.raises(InputError, match="must hold"):
        getattr(dse, fn)(model="llama3-8b", hardware="h100-sxm-80gb", **kw)


@pytest.mark.parametrize("kw, field", [
    (dict(precision="fp32"), "precision"), (dict(precision="tf32"), "precision"),
    (dict(batching="static", engine="vllm"), "engine"), (dict(batching="inflight"), "batching"),
    (dict(engine="trtllm", hardware="mi300x"), "engine"),
])
def test_serve_options_rejected(kw, field):
    with pytest.raises(InputError) as e:
        dse.serve(**{"model": "llama3-8b", "hardware": "h100-sxm-80gb", "gpus": 1, **kw})
    assert e.value.field == field


def test_a_stated_bucket_size_reaches_the_step():
    """``ddp_bucket_size`` (Megatron-Core ``--ddp-bucket-size``): larger buckets, fewer NCCL
    calls, never a slower data-parallel step (dse.graph.train.dp_ops)."""
    args = dict(model="llama3-8b", hardware="h100-sxm-80gb", gpus=256, global_batch=256,
                seq_len=2048, zero=1)
    small, large = (dse.estimate(**args, ddp_bucket_size=b) for b in (10_000_000, 2_000_000_000))
    assert large.step_time_s <= small.step_time_s
    assert large.breakdown["dp_comm_s"] <= small.breakdown["dp_comm_s"]
