"""Bad input exits with status 2 and one line naming the field (DESIGN.md)."""

import subprocess
import sys

import pytest

from dse.cli import main


def run(*args):
    p = subprocess.run([sys.executable, "-m", "dse.cli", *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("args,needle", [
    (["sweep", "--model", "llama9-1t", "--hardware", "a100-sxm-80gb", "--gpus", "8", "--global-batch", "8"], "model"),
    (["sweep", "--model", "llama3-8b", "--hardware", "tpu-v9", "--gpus", "8", "--global-batch", "8"], "hardware"),
    (["estimate", "--model", "llama3-70b", "--hardware", "a100-sxm-80gb", "--gpus", "48", "--tp", "3"], "tp"),
    (["estimate", "--model", "llama3-70b", "--hardware", "a100-sxm-80gb", "--gpus", "30", "--tp", "4"], "gpus"),
    (["sweep", "--model", "llama3-8b", "--hardware", "a100-sxm-80gb", "--gpus", "0", "--global-batch", "8"], "gpus"),
    (["sweep", "--model", "llama3-8b", "--hardware", "a100-sxm-80gb", "--gpus", "8", "--global-batch", "8",
      "--precision", "int3"], "precision"),
    (["estimate", "--model", "llama3-8b", "--hardware", "a100-sxm-80gb", "--gpus", "8", "--precision", "fp8"],
     "fp8 tensor cores"),
])
def test_bad_input_exit_2(args, needle, capsys):
    rc = main(args)
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and needle in err


def test_bad_hardware_toml_files(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[x\n")
    rc, _, err = run("sweep", "--model", "llama3-8b", "--hardware", str(bad), "--gpus", "8", "--global-batch", "8")
    assert rc == 2 and "valid TOML" in err and len(err.strip().splitlines()) == 1
    neg = tmp_path / "neg.toml"
    from dse.io import tomllib
    from dse.spec.hardware import CATALOG
    txt = CATALOG.read_text()
    # copy the a100 table with a negative HBM bandwidth
    d = tomllib.loads(txt)["a100-sxm-80gb"]
    d.pop("sources", None)
    d["hbm_bw_tb_s"] = -1.0
    lines = ["[mygpu]"] + [f"{k} = {v!r}" if not isinstance(v, str) else f'{k} = "{v}"' for k, v in d.items()]
    neg.write_text("\n".join(lines).replace("True", "true").replace("False", "false"))
    rc, _, err = run("sweep", "--model", "llama3-8b", "--hardware", str(neg), "--gpus", "8", "--global-batch", "8")
    assert rc == 2 and "hbm_bw_tb_s > 0" in err


def test_sweep_prints_top_layouts():
    rc, out, err = run("sweep", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "16",
                       "--global-batch", "128", "--seq", "4096", "--top", "3")
    assert rc == 0, err
    assert "step_s" in out and "mfu" in out and "tp_comm" in out and "ep_comm" in out
    assert max(len(line) for line in out.splitlines()) <= 120


def test_sweep_over_a_hardware_knob_grid(tmp_path, capsys):
    import pandas as pd
    out_csv = tmp_path / "all.csv"
    rc = main(["sweep", "--model", "llama3-8b", "--hardware", "a100-pcie-80gb", "--gpus", "8",
               "--global-batch", "64", "--seq", "2048", "--vary", "hbm_bw=1x,4x", "--vary", "throttle=0,0.5",
               "-o", str(out_csv)])
    assert rc == 0
    df = pd.read_csv(out_csv)
    names = sorted(df["hardware"].unique())
    assert len(names) == 4 and "a100-pcie-80gb[hbm_bw=4x,throttle=0.5]" in names
    best = df[df["feasible"]].groupby("hardware")["step_time_s"].min()
    # 4x HBM bandwidth is never slower; a 50 % bandwidth throttle is never faster
    assert best["a100-pcie-80gb[hbm_bw=4x,throttle=0.0]"] <= best["a100-pcie-80gb[hbm_bw=1x,throttle=0.0]"]
    assert best["a100-pcie-80gb[hbm_bw=1x,throttle=0.5]"] >= best["a100-pcie-80gb[hbm_bw=1x,throttle=0.0]"]


def test_vary_bad_knob_exit_2(capsys):
    rc = main(["sweep", "--model", "llama3-8b", "--hardware", "a100-pcie-80gb", "--gpus", "8",
               "--global-batch", "64", "--vary", "warp_drive=2x"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "warp_drive" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("spec", ["nvlink_domain=1.5", "nvlink_domain=0.3x", "num_sms=100.5"])
def test_vary_counts_must_be_whole(spec, capsys):
    """SMs and GPUs per NVLink domain are counts: --vary refuses fractions, as a hardware
    TOML does."""
    rc = main(["sweep", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "8",
               "--global-batch", "64", "--vary", spec])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "whole number" in err and len(err.splitlines()) == 1


def test_infer_command_prints_throughput(capsys):
    rc = main(["infer", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "2",
               "--batch", "8", "--prompt", "512", "--gen", "64", "--top", "3"])
    out = capsys.readouterr().out
    assert rc == 0 and "continuous batching" in out and "tpot_s" in out and "tokens_per_s" in out
    rc = main(["infer", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", "--gpus", "2",
               "--batch", "8", "--prompt", "512", "--gen", "64", "--top", "3", "--batching", "static"])
    out = capsys.readouterr().out
    assert rc == 0 and "decode_s_per_token" in out and "tokens_per_s" in out


def test_version_prints_the_package_version(capsys):
    from importlib.metadata import version
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"dse {version('dse')}"


def test_bare_dse_prints_usage_and_exits_2(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: dse") and "estimate" in err and "list" in err


def test_bare_dse_subprocess_exits_2():
    rc, out, err = run()
    assert rc == 2 and "usage: dse" in err


def test_list_models_and_hardware(capsys):
    from dse.spec.hardware import catalog as hw_catalog
    from dse.spec.model import catalog as model_catalog
    assert main(["list", "models"]) == 0
    out = capsys.readouterr().out
    for name in model_catalog():
        assert name in out
    assert "8.0B" in out and "params" in out            # llama3-8b's parameter count
    assert main(["list", "hardware"]) == 0
    out = capsys.readouterr().out
    for name in hw_catalog():
        assert name in out


def test_list_knobs_are_the_vary_knobs(capsys):
    from dse.spec.variants import KNOBS
    assert main(["list", "knobs"]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert {ln.split()[0] for ln in lines} == set(KNOBS) | {"throttle"}


def test_list_studies_with_their_kind(tmp_path, capsys):
    (tmp_path / "a.toml").write_text('name = "a"\nkind = "layout"\ndescription = "first"\n')
    (tmp_path / "b.toml").write_bytes(b"\xff\xfe")
    assert main(["list", "studies", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert any(ln.split()[:2] == ["a", "layout"] for ln in out.splitlines())
    assert "b" in out and "UTF-8" in out                  # a bad file is named, not a traceback
    assert main(["list", "studies", "--dir", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--dir" in err


def test_list_repo_studies(capsys):
    from pathlib import Path
    d = Path(__file__).parents[1] / "studies"
    assert main(["list", "studies", "--dir", str(d)]) == 0
    out = capsys.readouterr().out
    assert any(ln.split()[:2] == ["llama70b", "layout"] for ln in out.splitlines())


def test_list_bad_choice_exit_2(capsys):
    assert main(["list", "gpus"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.parametrize("cmd", ["sweep", "estimate", "infer", "predict", "validate", "bench",
                                 "study", "dashboard", "list", "trace"])
def test_every_subcommand_help_has_defaults_and_an_example(cmd, capsys):
    import argparse

    from dse.cli import build_parser
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    if cmd not in sub.choices:
        pytest.skip(f"{cmd} is not registered")
    assert main([cmd, "--help"]) == 0
    out = capsys.readouterr().out
    assert f"example:\n  dse {cmd}" in out
    flat = " ".join(out.split())                         # help text wraps anywhere
    if cmd not in ("predict",):                          # predict has no option with a default
        assert "(default: " in flat
    assert "(default: None)" not in flat and "(default: False)" not in flat


def test_study_refuses_an_empty_storage(capsys):
    """--storage "" is not "the default storage": one line, status 2, nothing run."""
    rc = main(["study", "studies/codesign.toml", "--storage", ""])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "--storage" in err


def test_list_engines_shows_every_profile_with_its_figures(capsys):
    """`dse list engines`: one row per serving engine profile, the host figures read from
    the profile and the releases routed to it; --fields is refused (not a file kind)."""
    from dse.infer.engines import PROFILES
    assert main(["list", "engines"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in out[1:]}
    assert set(rows) == set(PROFILES)
    assert ">= 0.14" in rows["vllm_v1_async"] and " yes " in rows["vllm_v1_async"]
    assert " no " in rows["vllm_v1"] and "to 512 tokens" in rows["vllm_v1"]
    assert f"{PROFILES['vllm'].overhead_per_iter_s * 1e3:.3g}" in rows["vllm"].split()[1]
    # the HTTP front end (vLLM V1's OpenAI server): its own column, after "host overlapped"
    assert rows["vllm_v1_async"].split()[4] == f"{PROFILES['vllm_v1_async'].frontend_s * 1e3:.3g}" != "0"
    assert rows["trtllm"].split()[4] == "0"
    assert main(["list", "engines", "--fields"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--fields" in err
