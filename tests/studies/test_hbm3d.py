"""The hbm3d variants study end to end on a reduced GPU list (studies/hbm3d.toml)."""

import dataclasses
import re
from pathlib import Path

import pandas as pd
import pytest

from dse.report import variants as report
from dse.studies import variants
from dse.studies.common import load_study
from dse.studies.variants_infer import available
from dse.study import run_study

STUDY = Path(__file__).resolve().parents[2] / "studies" / "hbm3d.toml"
COLUMNS = {"variant", "workload", "gpus", "layout", "metric", "step_time_s", "speedup_reoptimized",
           "baseline_layout", "step_time_at_baseline_layout_s", "speedup_at_baseline_layout", "mem_gib",
           "status", "compute_s", "tp_comm_s", "bubble_s", "dp_comm_s"}


def small_study(tmp_path: Path, inference: bool) -> Path:
    text = STUDY.read_text()
    text = re.sub(r'^name = "hbm3d"', 'name = "hbm3d_small"', text, flags=re.M)
    text = re.sub(r"^gpus = \[.*\]$", "gpus = [64]", text, flags=re.M)
    text = re.sub(r"^breakdown_gpus = .*$", "breakdown_gpus = [64]", text, flags=re.M)
    if inference:
        text = re.sub(r"^batch = \[.*\]$", "batch = [1, 8]", text, flags=re.M)
    else:
        text = text[:text.index("[inference]")]
    p = tmp_path / "hbm3d_small.toml"
    p.write_text(text)
    return p


def check_training(out: Path):
    s = pd.read_csv(out / "summary.csv")
    assert COLUMNS <= set(s.columns)
    t = s[s["workload"].str.startswith("train") & (s["gpus"] == 64)].set_index("variant")
    assert len(t) == 5 and (t["status"] == "ok").all()
    sp = t["speedup_reoptimized"]
    c, d = sp["C: 3D HBM 4x BW"], sp["D: C + 27% throttle"]
    assert c >= d >= 0.999
    assert t["speedup_at_baseline_layout"]["C: 3D HBM 4x BW"] >= t["speedup_at_baseline_layout"]["D: C + 27% throttle"]
    assert sp["baseline: A100 80GB PCIe"] == pytest.approx(1.0)
    # capacity changes no kernel time: at the baseline's layout B is exactly the baseline
    assert t["speedup_at_baseline_layout"]["B: 160 GB HBM (2.5D)"] == pytest.approx(1.0, abs=1e-6)
    for f in ("speedup.png", "breakdown_64gpus.png", "report.md", "manifest.json", "sensitivity.csv"):
        assert (out / f).exists(), f
    rep = (out / "report.md").read_text()
    assert "published" in rep and "1.80x" in rep
    return s


def test_hbm3d_small_training_only(tmp_path, monkeypatch):
    study = small_study(tmp_path, inference=False)
    monkeypatch.chdir(tmp_path)
    res = variants.run(*load_study(str(study)))        # compute -> results -> report
    out = report.write(res)
    check_training(out)
    text = (out / "report.md").read_text()
    assert "no `[inference]` table" in text
    # deterministic: the run times go to the manifest, not into report.md
    plots = {"speedup": ["speedup.png"], "breakdown": ["breakdown_64gpus.png"], "inference": []}
    again = report.report(dataclasses.replace(res, sweep_s=res.sweep_s + 123.4, infer_s=9.9), plots)
    assert again == text


@pytest.mark.skipif(not available()[0], reason="dse.infer.sweep not importable")
def test_hbm3d_small_with_inference(tmp_path, monkeypatch):
    study = small_study(tmp_path, inference=True)
    monkeypatch.chdir(tmp_path)
    out = Path(run_study(str(study)))
    s = check_training(out)
    dec = s[s["workload"].str.startswith("inference decode")].set_index(["variant", "workload"])["speedup_reoptimized"]
    for w in dec.index.get_level_values(1).unique():
        assert dec[("C: 3D HBM 4x BW", w)] >= dec[("D: C + 27% throttle", w)] > 1.0
    assert (out / "inference.png").exists()
