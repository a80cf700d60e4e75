"""The ``[workload]`` table of a study file, validated (parsed by dse.studies.common).

Here, below both dse/studies and dse/report, so a report can read a study's workload
without importing the study runners (docs/architecture.md, "Rooms")."""

from __future__ import annotations

from dataclasses import dataclass

from dse.spec.hardware import Hardware
from dse.spec.model import Model


@dataclass(frozen=True)
class StudyWorkload:
    model: Model
    seq_lens: tuple[int, ...]
    global_batches: tuple[int, ...]
    gpus: tuple[int, ...]
    hardware: tuple[Hardware, ...]
    precision: int
