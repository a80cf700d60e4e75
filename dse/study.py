"""Dispatch a study file to its runner by ``kind``."""

from __future__ import annotations

from dse.errors import InputError
from dse.studies.common import load_study

KINDS = ("layout", "variants", "codesign", "faults", "upgrade")


def run_study(path: str, storage: str | None = None, trials: int | None = None):
    d, p = load_study(path)
    kind = d["kind"]
    if kind == "layout":
        from dse.studies.layout import run
        out = run(d, p)
    else:
        try:
            mod = __import__(f"dse.studies.{kind}", fromlist=["run"])
        except ModuleNotFoundError:
            raise InputError(str(p), "kind", f"must be one of {list(KINDS)}, but got {kind!r}") from None
        out = mod.run(d, p, storage=storage, trials=trials) if kind == "codesign" else mod.run(d, p)
    print(f"wrote {out}/")
    return out
