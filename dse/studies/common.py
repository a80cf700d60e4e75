"""Study-file loading shared by every study kind: the ``[workload]`` table and checks.

A study file is TOML with ``name``, ``kind``, ``description`` and kind-specific tables;
unknown keys and wrong types exit with status 2 naming the file and the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dse.errors import require
from dse.io import load_toml
from dse.spec.hardware import Hardware, check_precision, get_hardware
from dse.spec.layout import precision_code
from dse.spec.model import Model, get_model


@dataclass(frozen=True)
class StudyWorkload:
    model: Model
    seq_lens: tuple[int, ...]
    global_batches: tuple[int, ...]
    gpus: tuple[int, ...]
    hardware: tuple[Hardware, ...]
    precision: int


def check_keys(d: dict, allowed: set[str], where: str, table: str) -> None:
    extra = sorted(set(d) - allowed)
    require(not extra, where, f"{table}{extra[0] if extra else ''}",
            f"unknown key; allowed keys are {sorted(allowed)}")


def int_list(d: dict, key: str, where: str, table: str) -> tuple[int, ...]:
    v = d.get(key)
    v = [v] if isinstance(v, int) else v
    require(isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v),
            where, f"{table}{key}", f"must be a positive integer or a non-empty list of them, but got {v!r}")
    return tuple(v)


def load_study(path: str) -> tuple[dict, Path]:
    p = Path(path)
    if not p.exists() and not path.endswith(".toml"):
        p = Path("studies") / f"{path}.toml"
    require(p.exists(), str(p), "file", "must exist (studies/<name>.toml)")
    d = load_toml(p)
    require(isinstance(d.get("name"), str), str(p), "name", "must be a string")
    require(isinstance(d.get("kind"), str), str(p), "kind", "must be a string")
    return d, p


def parse_workload(d: dict, where: str, hardware_required: bool = True) -> StudyWorkload:
    w = d.get("workload")
    require(isinstance(w, dict), where, "workload", "table is required")
    check_keys(w, {"model", "seq_len", "global_batch", "gpus", "hardware", "precision"}, where, "workload.")
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
    out = Path("results") / name
    out.mkdir(parents=True, exist_ok=True)
    return out


def layout_label(r) -> str:
    s = f"TP{int(r['tp'])} PP{int(r['pp'])} DP{int(r['dp'])}"
    if int(r["cp"]) > 1:
        s += f" CP{int(r['cp'])}"
    if int(r.get("ep", 1)) > 1:
        s += f" EP{int(r['ep'])}"
    s += f" mbs{int(r['mbs'])}"
    if int(r["vpp"]) > 1:
        s += f" vpp{int(r['vpp'])}"
    s += f" {r['recompute']} Z{int(r['zero'])}" + (" SP" if r["sp"] else "")
    return s
