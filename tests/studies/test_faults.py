"""The faults study on a small workload: outputs, re-chosen layouts, bad input."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from dse.errors import InputError
from dse.studies.common import load_study
from dse.study import execute as run

STUDY = """
name = "faults-small"
kind = "faults"
description = "small faults study"

[workload]
model = "llama3-8b"
seq_len = 1024
global_batch = 32
gpus = 16
hardware = "a100-sxm-80gb"

[study]
candidates = 2
distinct = ["tp", "pp"]

[[scenario]]
name = "slow rail link"
fault = [{{ kind = "slow_link", link = "{link}", factor = 4.0 }}]

[[scenario]]
name = "straggler"
fault = [{{ kind = "straggler", rank = 3, factor = 1.1 }}]
"""


def _write(tmp_path, link="rail1.up.n0"):
    p = tmp_path / "faults-small.toml"
    p.write_text(STUDY.format(link=link))
    return p


def test_faults_study_writes_results(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    d, p = load_study(str(_write(tmp_path)))
    out = run(d, p)
    s = pd.read_csv(out / "summary.csv")
    assert list(s["scenario"]) == ["healthy", "slow rail link", "straggler"]
    assert (s["rechosen_step_s"] <= s["fixed_step_s"] + 1e-12).all()
    assert (s["fixed_step_s"].iloc[1:] >= s["fixed_step_s"].iloc[0] * (1 - 1e-9)).all()
    assert s["fixed_slowdown"].iloc[2] > 1.0            # a straggler always costs time
    for f in ("faults.png", "report.md", "manifest.json", "simulations.csv"):
        assert (out / f).exists()
    assert json.loads((out / "manifest.json").read_text())["study_sha256"]


def test_fault_on_missing_link_is_input_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    d, p = load_study(str(_write(tmp_path, link="rail9.up.n77")))
    with pytest.raises(InputError, match="link"):
        run(d, p)


def test_study_file_parses():
    d, p = load_study("studies/faults.toml")
    assert d["kind"] == "faults" and len(d["scenario"]) == 4


def test_16k_study_file_parses_and_pins_a_fitting_layout():
    from dse.spec.hardware import get_hardware
    from dse.spec.layout import Workload
    from dse.spec.model import get_model
    from dse.studies.faults import _pinned_layouts, _pinned_rows
    d, p = load_study("studies/faults-16k.toml")
    assert d["kind"] == "faults" and d["workload"]["gpus"] == 16384
    pinned = _pinned_layouts(d["study"]["layouts"], str(p))
    rows = _pinned_rows(pinned, get_model("llama3-405b"),
                        Workload(global_batch=2048, seq_len=8192),
                        get_hardware("h100-sxm-80gb"), 16384, str(p))
    assert rows["feasible"].all() and (rows[["tp", "pp", "dp", "vpp"]].values
                                       == [[8, 16, 128, 4]]).all()


def test_pinned_layout_that_does_not_fit_is_input_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = STUDY.format(link="rail1.up.n0").replace(
        'distinct = ["tp", "pp"]', 'layouts = [{ tp = 1, pp = 1, dp = 16, mbs = 2 }]')
    text = text.replace('model = "llama3-8b"', 'model = "llama3-70b"')
    p = tmp_path / "f.toml"
    p.write_text(text)
    d, p = load_study(str(p))
    with pytest.raises(InputError, match="fit in memory"):
        run(d, p)
