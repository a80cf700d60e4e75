"""Dispatch a study file to its runner by ``kind`` (the :data:`RUNNERS` registry), then
to the report writer of the same kind (docs/architecture.md: compute → results → report).

A runner (``dse.studies.<kind>.run``) parses the study file, computes and returns a typed
results object (:mod:`dse.report.results`); the writer (``dse.report.<kind>.write``)
turns it into the files of ``results/<name>/`` and returns that folder."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from dse.errors import require
from dse.studies.common import load_study

Runner = Callable[[dict, Path, "str | None", "int | None"], object]


def _runner(module: str, search: bool = False) -> Runner:
    """``module.run``, imported when called; ``search`` runners take storage and trials."""
    def run(d: dict, p: Path, storage: str | None, trials: int | None):
        fn = importlib.import_module(module).run
        return fn(d, p, storage=storage, trials=trials) if search else fn(d, p)
    return run


#: study ``kind`` -> runner.  A new kind is one entry here, one module in dse/studies and
#: one writer ``dse/report/<kind>.py``.
RUNNERS: dict[str, Runner] = {
    "layout": _runner("dse.studies.layout"),
    "variants": _runner("dse.studies.variants"),
    "codesign": _runner("dse.studies.codesign", search=True),
    "faults": _runner("dse.studies.faults"),
    "upgrade": _runner("dse.studies.upgrade"),
    "serving": _runner("dse.studies.serving"),
}
#: study ``kind`` -> module with ``write(results) -> Path``.
REPORTS: dict[str, str] = {kind: f"dse.report.{kind}" for kind in RUNNERS}
KINDS = tuple(RUNNERS)
SEARCH_KINDS = ("codesign",)


def execute(d: dict, p: Path, storage: str | None = None, trials: int | None = None,
            seed: int | None = None) -> Path:
    """Run a loaded study (``d`` from :func:`load_study`) and write its results; returns
    the results folder.  ``seed`` overrides a search study's ``[search] seed`` (each
    worker still derives its own sampler seed from it, dse.search.runner)."""
    kind = d["kind"]
    require(kind in RUNNERS, str(p), "kind", f"must be one of {list(KINDS)}, but got {kind!r}")
    if seed is not None:
        require(kind in SEARCH_KINDS, str(p), "--seed",
                f"applies only to a search study (kind {' or '.join(SEARCH_KINDS)}), "
                f"but this study's kind is {kind!r}")
        d = {**d, "search": {**d.get("search", {}), "seed": seed}}
    for flag, v in (("--storage", storage), ("--trials", trials)):
        require(v is None or kind in SEARCH_KINDS, str(p), flag,
                f"applies only to a search study (kind {' or '.join(SEARCH_KINDS)}), "
                f"but this study's kind is {kind!r}")
    from dse.report.manifest import note_start
    note_start()                 # "-dirty" = dirty before this run, not made so by it
    results = RUNNERS[kind](d, p, storage, trials)
    out = importlib.import_module(REPORTS[kind]).write(results)
    from dse.report.html import write_report_html
    write_report_html(out)       # one self-contained report.html beside report.md
    return out


def run_study(path: str, storage: str | None = None, trials: int | None = None,
              seed: int | None = None):
    d, p = load_study(path)
    out = execute(d, p, storage, trials, seed)
    print(f"wrote {out}/")
    return out
