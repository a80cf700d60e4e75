"""Typed results of the study runners (docs/architecture.md, "Rooms").

A runner in dse/studies computes one of these and returns it; the writer of the same
kind in dse/report turns it into files (tables, plots, ``report.md``, ``manifest.json``).
The types live here, below both, so dse/report imports nothing from dse/studies.  Each
holds the DataFrames and scalars its report needs; wall-clock timings go to the
manifest only, never into ``report.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dse.spec.hardware import Hardware
from dse.spec.study import StudyWorkload


@dataclass(frozen=True, eq=False)
class StudyHeader:
    """What every report starts from: the study's name, description, file, output folder."""
    name: str
    description: str
    study_file: Path
    out: Path


@dataclass(frozen=True)
class VariantsStudy:
    """A parsed ``kind = "variants"`` study file."""
    wl: StudyWorkload
    hws: tuple[Hardware, ...]
    tables: tuple[dict, ...]          # the raw [[variants]] tables, for the report
    baseline: str
    breakdown_gpus: tuple[int, ...]
    published: tuple[dict, ...]
    inference: dict | None


@dataclass(frozen=True, eq=False)
class VariantsResults:
    head: StudyHeader
    study: VariantsStudy
    full: pd.DataFrame                # every swept point (sweep.parquet)
    train: pd.DataFrame               # one row per (workload, GPU count, variant)
    sens: pd.DataFrame                # baseline diagnostics (sensitivity.csv)
    summary: pd.DataFrame             # train + inference rows (summary.csv)
    inf_tab: pd.DataFrame | None      # inference rows, None when not run
    inf_sens: pd.DataFrame | None     # inference diagnostics (inference_sensitivity.csv)
    inf_note: str                     # why inference was not run ("" when it was)
    sweep_s: float                    # wall time, for the manifest
    infer_s: float
    elastic: pd.DataFrame | None = None  # step-time elasticities at the baseline's layout
    elastic_named: dict | None = None    # {sensitivity knob: name} of the knobs the study varies


@dataclass(frozen=True, eq=False)
class UpgradeResults:
    head: StudyHeader
    wl: StudyWorkload
    src: Hardware
    targets: tuple[Hardware, ...]
    breakdown_gpus: int
    full: pd.DataFrame                # every swept point
    summary: pd.DataFrame             # one row per (GPU count, target)
    headroom: pd.DataFrame            # batch headroom per (GPU count, GPU)
    breakdown: pd.DataFrame           # breakdown rows at breakdown_gpus (empty if none fits)
    breakdown_labels: tuple[str, ...]
    run_s: float


@dataclass(frozen=True, eq=False)
class LayoutResults:
    head: StudyHeader
    wl: StudyWorkload
    full: pd.DataFrame
    summary: pd.DataFrame             # best layout per configuration (best.csv)
    published: pd.DataFrame           # published cases against ours
    heatmap_sel: dict
    heatmap: pd.DataFrame             # the sweep rows of the heatmap's configuration
    breakdown_sel: dict
    breakdown: pd.DataFrame           # fastest layouts and the ZeRO-3 DP baseline
    breakdown_labels: tuple[str, ...]
    sweep_s: float
    memory_limits: pd.DataFrame | None = None  # configurations memory decides (no fit, low MFU)
    frameworks: pd.DataFrame | None = None     # pure ZeRO-3 vs best hybrid per framework profile


@dataclass(frozen=True, eq=False)
class CodesignResults:
    head: StudyHeader
    trials: pd.DataFrame              # every trial (trials.csv)
    done: pd.DataFrame                # completed trials with objectives and `pareto`
    refs: pd.DataFrame                # reference designs
    storage: str
    base: Hardware
    model_name: str
    gpus: int
    seq_len: int
    global_batch: int
    knob_units: dict
    search_s: float
    objectives: tuple[str, ...] = ("step_time_s", "cluster_cost")
    objective_labels: dict | None = None     # objective -> axis label
    tco: dict | None = None                  # [tco] prices (cost per token)
    elastic: pd.DataFrame | None = None      # step-time elasticities of the base at its best layout
    elastic_named: dict | None = None        # {sensitivity knob: name} of the searched knobs


@dataclass(frozen=True, eq=False)
class FaultsResults:
    head: StudyHeader
    summary: pd.DataFrame             # one row per scenario
    simulations: pd.DataFrame         # one row per (scenario, candidate)
    candidates: pd.DataFrame
    title: str
    distinct: str
    plain: str                        # the plain top layouts when `distinct` is set
    topology: str
    elapsed_s: float
    pinned: bool = False              # candidates pinned by `[study] layouts` (no screen)
