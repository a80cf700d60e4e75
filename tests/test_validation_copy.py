"""The repository's validation data (``data/validation``) is the shared set
(``../shared/validation``) byte for byte, where that exists beside the checkout."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REPO = ROOT / "data" / "validation"
SHARED = ROOT.parent / "shared" / "validation"


def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_repo_copy_present_and_small():
    files = _files(REPO)
    for f in ("calibration.csv", "vtrain.csv", "inference/calibration.csv", "README.md"):
        assert f in files, f
    assert sum(map(len, files.values())) < 4 * 2**20


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/validation not beside this checkout")
def test_repo_copy_identical_to_shared():
    repo, shared = _files(REPO), _files(SHARED)
    assert sorted(repo) == sorted(shared)
    differ = [f for f in repo if repo[f] != shared[f]]
    assert not differ, f"data/validation differs from ../shared/validation in {differ}: copy it again"
