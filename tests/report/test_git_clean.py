"""Studies leave ``git status`` clean when nothing but timings changed: every volatile
field (timestamps, seconds, the command line) is in ``manifest.json`` only, which is
untracked; the other files are byte-identical from run to run; ``-dirty`` in the manifest
means the tree was dirty *before* the run."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from dse.report import manifest
from tests.report.test_browser import small_layout_study

ROOT = Path(__file__).resolve().parents[2]
UNTRACKED = {"manifest.json", "sweep.parquet"}      # .gitignore: results/*/<these>


def _tracked(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name not in UNTRACKED}


def test_study_twice_writes_identical_tracked_files(tmp_path, monkeypatch):
    from dse.study import run_study
    study = small_layout_study(tmp_path)
    monkeypatch.chdir(tmp_path)
    out = Path(run_study(str(study)))
    first = _tracked(out)
    m1 = json.loads((out / "manifest.json").read_text())
    out2 = Path(run_study(str(study)))
    assert out2 == out
    second = _tracked(out)
    assert sorted(first) == sorted(second)
    differ = [f for f in first if first[f] != second[f]]
    assert not differ, f"rewritten with new content: {differ}"
    assert {"report.md", "report.html", "best.csv", "heatmap_tp_pp.png"} <= set(first)
    m2 = json.loads((out / "manifest.json").read_text())
    assert "sweep_seconds" in m1 and "written_utc" in m2     # the timings are in the manifest


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="not a git checkout")
def test_manifests_are_ignored_by_git():
    for name in ("llama70b", "codesign", "a100_to_h100"):
        for f in ("manifest.json", "report.html"):
            r = subprocess.run(["git", "check-ignore", "-q", f"results/{name}/{f}"], cwd=ROOT)
            assert r.returncode == 0, f"results/{name}/{f} must be ignored by .gitignore"
    tracked = subprocess.run(["git", "ls-files", "results"], cwd=ROOT, capture_output=True,
                             text=True).stdout.split()
    assert not [t for t in tracked if t.endswith("manifest.json")]


def test_dirty_means_dirty_before_the_run(tmp_path, monkeypatch):
    states = iter(["abc123", "abc123-dirty"])        # clean at the start, dirty after writing
    monkeypatch.setattr(manifest, "_git_rev", lambda: next(states))
    manifest.note_start()
    try:
        manifest.write_manifest(tmp_path)
        assert json.loads((tmp_path / "manifest.json").read_text())["git_revision"] == "abc123"
    finally:
        monkeypatch.setattr(manifest, "_REV_AT_START", None)
