"""Study-file loading shared by every study kind: the ``[workload]`` table and checks.

A study file is TOML with ``name``, ``kind``, ``description`` and kind-specific tables;
unknown keys and wrong types exit with status 2 naming the file and the key.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from dse.errors import require
from dse.io import load_toml
from dse.report.atomic import check_output_dir
from dse.report.markdown import layout_label  # noqa: F401  (re-exported for the runners)
from dse.spec.hardware import check_precision, get_hardware
from dse.spec.layout import precision_code
from dse.spec.model import get_model
from dse.spec.study import INT_LIMITS, StudyWorkload, study_keys, validate_study


def check_keys(d: dict, allowed: set[str], where: str, table: str) -> None:
    extra = sorted(set(d) - allowed)
    require(not extra, where, f"{table}{extra[0] if extra else ''}",
            f"unknown key; allowed keys are {sorted(allowed)}")


def int_list(d: dict, key: str, where: str, table: str) -> tuple[int, ...]:
    v = d.get(key)
    v = [v] if isinstance(v, int) else v
    top = INT_LIMITS.get(key, 2**31 - 1)
    require(isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) and 0 < x <= top
                                              for x in v),
            where, f"{table}{key}", f"must be a positive integer <= {top} or a non-empty list of them, "
            f"but got {v!r}")
    return tuple(v)


#: A study name is one path component: its outputs stay in results/<name>/.
STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
RESULTS = Path("results")


def check_name(name, where: str) -> str:
    require(isinstance(name, str) and STUDY_NAME.fullmatch(name) is not None, where, "name",
            f"must be a simple name matching [A-Za-z0-9][A-Za-z0-9._-]* (no '/', '..', blank or "
            f"absolute path: outputs go to results/<name>/), but got {name!r}")
    return name


def load_study(path: str) -> tuple[dict, Path]:
    p = Path(path)
    if not p.exists() and not path.endswith(".toml"):
        p = Path("studies") / f"{path}.toml"
    require(p.exists(), str(p), "file", "must exist (studies/<name>.toml)")
    require(p.is_file(), str(p), "file", "must be a TOML file, but it is a directory")
    d = load_toml(p)
    check_name(d.get("name"), str(p))
    validate_study(d, str(p))        # the kind's schema, every problem at once (dse.spec.study)
    return d, p


def parse_workload(d: dict, where: str, hardware_required: bool = True) -> StudyWorkload:
    w = d.get("workload")
    require(isinstance(w, dict), where, "workload", "table is required")
    check_keys(w, study_keys("layout", "workload"), where, "workload.")
    require(isinstance(w.get("model"), str), where, "workload.model", "must be a string")
    model = get_model(w["model"], where=f"{where}: workload.model")
    hws = w.get("hardware", [])
    hws = [hws] if isinstance(hws, str) else hws
    require(isinstance(hws, list) and (hws or not hardware_required), where, "workload.hardware",
            "must be a non-empty list of catalog names")
    hardware = tuple(get_hardware(h, where=f"{where}: workload.hardware") for h in hws)
    precision = precision_code(str(w.get("precision", "bf16")), f"{where}: workload.precision")
    for hw in hardware:
        check_precision(hw, precision, f"{where}: workload")
    return StudyWorkload(model=model, seq_lens=int_list(w, "seq_len", where, "workload."),
                         global_batches=int_list(w, "global_batch", where, "workload."),
                         gpus=int_list(w, "gpus", where, "workload."), hardware=hardware,
                         precision=precision)


def results_dir(name: str) -> Path:
    """``results/<name>/``, created and checked writable (``name`` a simple name)."""
    check_name(name, "study")
    out = RESULTS / name
    require(out.resolve().parent == RESULTS.resolve(), str(out), "name",
            "must name a folder directly inside results/")
    return check_output_dir(out, "name")


def table(d: dict, key: str, where: str, prefix: str = "") -> dict:
    """``d[key]`` as a table ({} when absent); an error if it is not a table."""
    v = d.get(key, {})
    require(isinstance(v, dict), where, f"{prefix}{key}", f"must be a table, but got {v!r}")
    return v


def number(d: dict, key: str, where: str, table: str, default=None, *, low: float | None = None,
           low_open: bool = False, high: float | None = None, high_open: bool = False) -> float:
    """``d[key]`` (or ``default``) as a finite number in the given bounds; bools and
    strings are errors."""
    v = d.get(key, default)
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if ok and low is not None:
        ok = v > low if low_open else v >= low
    if ok and high is not None:
        ok = v < high if high_open else v <= high
    rng = ""
    if low is not None or high is not None:
        lo = "" if low is None else f"{low} {'<' if low_open else '<='} "
        hi = "" if high is None else f" {'<' if high_open else '<='} {high}"
        rng = f" with `{lo}{key}{hi}`"
    require(ok, where, f"{table}{key}", f"must be a finite number{rng}, but got {v!r}")
    return float(v)


def integer(d: dict, key: str, where: str, table: str, default=None, low: int = 1) -> int:
    """``d[key]`` (or ``default``) as an integer ``>= low`` (not a bool, float or string)."""
    v = d.get(key, default)
    require(isinstance(v, int) and not isinstance(v, bool) and v >= low and v < 2**63, where,
            f"{table}{key}", f"must be an integer >= {low}, but got {v!r}")
    return v
