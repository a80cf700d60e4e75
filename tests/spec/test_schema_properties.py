"""Property tests per input schema (issue 12 item 1): one random thing broken in an
otherwise valid file -- an unknown key, a required key dropped, a value of the wrong type,
non-finite, out of bounds or not among its choices -- fed to the subcommand that reads
it, in-process.  Each must exit 2 with exactly one line naming the file and the field,
no traceback, and write nothing."""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from dse.cli import main
from dse.io import load_toml
from dse.spec.hardware import CATALOG as HW_CATALOG, HARDWARE_FIELDS
from dse.spec.model import CATALOG as MODEL_CATALOG, HF_FIELDS, MODEL_FIELDS
from dse.spec.network_schema import FAULTS_FIELDS, TOPOLOGY_FIELDS
from dse.spec.study import STUDY_SCHEMAS
from tests.spec.mutate import broken, path_text
from tests.spec.tomlw import dumps

REPO = Path(__file__).resolve().parents[2]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TRAIN = ["--gpus", "8", "--tp", "8", "--global-batch", "8", "--seq", "1024"]


def run_in_tmp(files: dict[str, str], args: list[str]) -> tuple[int, str, set[str], set[str]]:
    """Write ``files`` into a fresh directory, run ``dse args`` there; (rc, stderr,
    files before, files after)."""
    with tempfile.TemporaryDirectory() as d:
        for name, text in files.items():
            (Path(d) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(d) / name).write_text(text)
        before = {str(p.relative_to(d)) for p in Path(d).rglob("*")}
        cwd = os.getcwd()
        err, out = StringIO(), StringIO()
        try:
            os.chdir(d)
            with redirect_stderr(err), redirect_stdout(out):
                rc = main(args)
        finally:
            os.chdir(cwd)
        after = {str(p.relative_to(d)) for p in Path(d).rglob("*")}
    return rc, err.getvalue(), before, after


def assert_one_line(rc: int, err: str, file: str, field: str, before: set, after: set) -> None:
    lines = err.strip().splitlines()
    assert rc == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"error: {file}: "), lines[0]
    assert f"{field}:" in lines[0] or f"{field}." in lines[0] or f"{field}[" in lines[0], (field, lines[0])
    assert after == before, after - before


HW = load_toml(HW_CATALOG)["h100-sxm-80gb"]
BASED = {"base": "h100-sxm-80gb", "hbm_gib": 96, "eff_gemm": 0.8}
MODEL = load_toml(MODEL_CATALOG)["llama3-8b"]
HF = {"num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,
      "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
      "max_position_embeddings": 8192, "hidden_act": "silu", "rms_norm_eps": 1e-5,
      "tie_word_embeddings": False, "model_type": "llama"}
TOPOLOGY = {"name": "sw8", "num_gpus": 8,
            "dim": [{"kind": "switch", "size": 8, "bw_gb_s": 450, "latency_us": 1.5, "algo": "ring"}],
            "collectives": {"cross_dim": "hierarchical"}}
FAULTS = {"fault": [{"kind": "slow_link", "link": "n0.gpu3->nvsw", "factor": 2.0},
                    {"kind": "link_down", "link": "nvsw->n0.gpu1"},
                    {"kind": "straggler", "rank": 5, "factor": 1.3},
                    {"kind": "packet_loss", "link": "n0.*", "p": 0.01, "recovery": "go_back_n",
                     "window_packets": 32}]}


def test_the_valid_bases_are_valid(tmp_path):
    """Every unbroken base loads: what the properties break is the only problem."""
    from dse.spec.hardware import get_hardware
    from dse.spec.model import get_model
    from dse.sim import load_faults, load_topology
    (tmp_path / "hw.toml").write_text(dumps({"gpu": HW}) + dumps({"b": BASED}))
    assert get_hardware(f"{tmp_path}/hw.toml:gpu").hbm_bytes == get_hardware("h100-sxm-80gb").hbm_bytes
    assert get_hardware(f"{tmp_path}/hw.toml:b").hbm_bytes == 96 * 2**30
    (tmp_path / "m.toml").write_text(dumps({"m": MODEL}))
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(HF))
    assert get_model(f"{tmp_path}/m.toml").num_params() == get_model("llama3-8b").num_params()
    assert get_model(f"{tmp_path}/m/config.json").num_params() == get_model("llama3-8b").num_params()
    (tmp_path / "t.toml").write_text(dumps(TOPOLOGY))
    (tmp_path / "f.toml").write_text(dumps(FAULTS))
    assert len(load_faults(tmp_path / "f.toml", load_topology(tmp_path / "t.toml", 8)).faults) == 4


@SETTINGS
@given(broken(HW, HARDWARE_FIELDS))
def test_hardware_file(case):
    d, path = case
    rc, err, before, after = run_in_tmp({"hw.toml": dumps({"gpu": d})},
                                        ["estimate", "--model", "llama3-8b", "--hardware", "hw.toml", *TRAIN])
    assert_one_line(rc, err, "hw.toml", "gpu." + path_text(path), before, after)


@SETTINGS
@given(broken(BASED, HARDWARE_FIELDS, drops=False))
def test_hardware_file_with_base(case):
    d, path = case
    rc, err, before, after = run_in_tmp({"hw.toml": dumps({"gpu": d})},
                                        ["estimate", "--model", "llama3-8b", "--hardware", "hw.toml", *TRAIN])
    assert_one_line(rc, err, "hw.toml", "gpu." + path_text(path), before, after)


@SETTINGS
@given(broken(MODEL, MODEL_FIELDS))
def test_model_toml(case):
    d, path = case
    rc, err, before, after = run_in_tmp({"m.toml": dumps({"m": d})},
                                        ["estimate", "--model", "m.toml", "--hardware", "h100-sxm-80gb", *TRAIN])
    assert_one_line(rc, err, "m.toml", "m." + path_text(path), before, after)


@SETTINGS
@given(broken(HF, HF_FIELDS, skip=("",)))
def test_hf_config_json(case):
    d, path = case
    rc, err, before, after = run_in_tmp({"m/config.json": json.dumps(d)},
                                        ["estimate", "--model", "m/config.json", "--hardware", "h100-sxm-80gb",
                                         *TRAIN])
    assert_one_line(rc, err, "m/config.json", path_text(path), before, after)


@SETTINGS
@given(broken(TOPOLOGY, TOPOLOGY_FIELDS))
def test_topology_file(case):
    d, path = case
    rc, err, before, after = run_in_tmp(
        {"t.toml": dumps(d)}, ["trace", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", *TRAIN,
                               "--out", "tr", "--simulate", "--topology", "t.toml"])
    assert_one_line(rc, err, "t.toml", path_text(path), before, after)


@SETTINGS
@given(broken(FAULTS, FAULTS_FIELDS))
def test_faults_file(case):
    d, path = case
    rc, err, before, after = run_in_tmp(
        {"t.toml": dumps(TOPOLOGY), "f.toml": dumps(d)},
        ["trace", "--model", "llama3-8b", "--hardware", "h100-sxm-80gb", *TRAIN, "--out", "tr", "--simulate",
         "--topology", "t.toml", "--faults", "f.toml"])
    assert_one_line(rc, err, "f.toml", path_text(path), before, after)


STUDIES = {p.stem: load_toml(p) for p in sorted((REPO / "studies").glob("*.toml"))}


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_study_file(name):
    base = STUDIES[name]

    @SETTINGS
    @given(broken(base, STUDY_SCHEMAS[base["kind"]]))
    def prop(case):
        d, path = case
        rc, err, before, after = run_in_tmp({"s.toml": dumps(d)}, ["study", "s.toml"])
        assert_one_line(rc, err, "s.toml", path_text(path), before, after)
    prop()
