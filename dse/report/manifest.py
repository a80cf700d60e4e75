"""Every results folder carries ``manifest.json``: git revision, study-file hash, package
versions, command, time and run timings (docs/architecture.md).

The manifest is the *only* file of a results folder with volatile content (timestamps,
seconds, the command line), and it is untracked (``.gitignore``: ``results/*/manifest.json``),
so a study rerun on unchanged code leaves ``git status`` clean.  ``git_revision`` ends in
``-dirty`` when tracked files differed from HEAD *before* the run (:func:`note_start`,
called by the CLI and :func:`dse.study.execute` before anything is written), not because
the run rewrote its own outputs."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from dse.report.atomic import write_json

PACKAGES = ("dse", "jax", "jaxlib", "numpy", "pandas", "matplotlib", "optuna", "optuna-dashboard",
            "protobuf", "pyarrow")


#: the revision as it was when the current run started (None: no run noted)
_REV_AT_START: str | None = None


def note_start() -> str:
    """Record the tree's revision and dirtiness now, before a run writes its outputs."""
    global _REV_AT_START
    _REV_AT_START = _git_rev()
    return _REV_AT_START


def _git_rev() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parents[2], timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5,
                               cwd=Path(__file__).resolve().parents[2]).stdout.strip()
        return rev + ("-dirty" if dirty else "") if rev else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def write_manifest(out_dir: Path, study_file: Path | None = None, extra: dict | None = None) -> Path:
    versions = {}
    for p in PACKAGES:
        try:
            versions[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            versions[p] = None
    m = {
        "git_revision": _REV_AT_START or _git_rev(),
        "git_revision_note": "-dirty: tracked files differed from HEAD before this run started",
        "study_file": str(study_file) if study_file else None,
        "study_sha256": hashlib.sha256(Path(study_file).read_bytes()).hexdigest() if study_file else None,
        "command": " ".join(sys.argv),
        "python": sys.version.split()[0],
        "packages": versions,
        "written_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if extra:
        m.update(extra)
    path = Path(out_dir) / "manifest.json"
    return write_json(path, m)


def file_sha256(path) -> str:
    """Hex SHA-256 of a file's bytes (manifests record their inputs by it)."""
    import hashlib
    from pathlib import Path
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
