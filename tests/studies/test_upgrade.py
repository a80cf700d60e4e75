"""The A100 -> H100 upgrade study on one GPU count (studies/a100_to_h100.toml)."""

import re
from pathlib import Path

import pandas as pd

from dse.cli import main
from dse.study import run_study

STUDY = Path(__file__).resolve().parents[2] / "studies" / "a100_to_h100.toml"


def test_a100_to_h100_small(tmp_path, monkeypatch):
    text = STUDY.read_text()
    text = re.sub(r"^gpus = \[.*\]$", "gpus = [64]", text, flags=re.M)
    text = re.sub(r"^breakdown_gpus = .*$", "breakdown_gpus = 64", text, flags=re.M)
    p = tmp_path / "up.toml"
    p.write_text(text)
    monkeypatch.chdir(tmp_path)
    out = Path(run_study(str(p)))
    s = pd.read_csv(out / "summary.csv").set_index("to")
    h100 = s.loc["h100-sxm-80gb"]
    assert h100["speedup_same_layout"] > 1.5
    assert h100["speedup_reoptimized"] >= h100["speedup_same_layout"] * (1 - 1e-6)
    # H100 SXM has no more HBM than A100 80GB: no larger batch fits at the same layout
    assert h100["batch_headroom_ratio"] <= 1.0
    assert s.loc["h200-sxm-141gb", "batch_headroom_ratio"] >= 1.0
    for f in ("speedup.png", "batch_headroom.png", "breakdown_64gpus.png", "report.md", "manifest.json",
              "headroom.csv"):
        assert (out / f).exists(), f


def test_upgrade_bad_target_exits_2(tmp_path, capsys):
    p = tmp_path / "bad.toml"
    p.write_text(STUDY.read_text().replace('"h200-sxm-141gb"', '"h900"'))
    assert main(["study", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "upgrade.to" in err
