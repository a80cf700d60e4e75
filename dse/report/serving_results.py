"""Typed results of the serving study (``kind = "serving"``): the parsed study file and
what :mod:`dse.studies.serving` computes from it, for :mod:`dse.report.serving`.

Beside :mod:`dse.report.results` (same role, kept apart so that module stays small);
below both dse/studies and dse/report, so the writer imports nothing from the runner.
Wall-clock timings travel here only to reach the untracked ``manifest.json``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from dse.report.results import StudyHeader
from dse.spec.hardware import Hardware
from dse.spec.model import Model


#: the best-per-SLA scope of the layouts without EP / attention DP (``ep = attn_dp = 1``)
TP_PP = "tp_pp"


@dataclass(frozen=True)
class SLA:
    """A service-level target: a point meets it when ``ttft_ms <= ttft`` and ``tpot_ms <=
    tpot`` (time to first token, time per output token, milliseconds)."""
    name: str
    ttft_ms: float
    tpot_ms: float

    def text(self) -> str:
        return f"TTFT ≤ {self.ttft_ms:g} ms, TPOT ≤ {self.tpot_ms:g} ms"


@dataclass(frozen=True)
class ServingStudy:
    """A parsed ``kind = "serving"`` study file."""
    models: tuple[Model, ...]
    model_ids: tuple[str, ...]          # as the study file names them (report titles)
    hardware: tuple[Hardware, ...]
    precisions: tuple[tuple[str, ...], ...]   # per hardware, in study-file order
    gpus: int                           # GPUs of the deployment (replicas x replica size)
    input_len: int                      # prompt tokens per request
    output_len: int                     # generated tokens per request
    max_batch: int                      # batches: powers of two up to this, and it
    slas: tuple[SLA, ...]
    batching: str = "continuous"        # continuous | static (dse.infer.sweep)
    engines: tuple[str, ...] = ()       # engine profile per hardware entry (continuous)
    ep: object = None                   # EP degrees searched: "auto", a tuple of ints, None (= 1)
    attn_dp: object = None              # attention-DP ranks searched: as ``ep``
    engine_texts: tuple[str, ...] = ()  # the engine setting as written (a profile name, or an engine
    #                                     text with its release: its launch limits, launched_engine)

    def launched(self, i: int, model: Model):
        """The engine profile hardware entry ``i`` runs ``model`` with
        (:func:`dse.infer.continuous.launched_engine` of the setting as written)."""
        from dse.infer.continuous import launched_engine
        text = self.engine_texts[i] if self.engine_texts else self.engines[i]
        return launched_engine(text, self.hardware[i], model)

    def searches_ep(self, model: Model) -> bool:
        """Whether layouts with EP or attention DP are searched for ``model`` (an MoE model
        under an axis other than 1)."""
        wide = lambda v: v == "auto" or (isinstance(v, tuple) and max(v) > 1)
        return model.num_experts > 1 and (wide(self.ep) or wide(self.attn_dp))


@dataclass(frozen=True, eq=False)
class ServingResults:
    head: StudyHeader
    study: ServingStudy
    points: pd.DataFrame                # every (model, hardware, precision, layout, batch) point
    pareto: pd.DataFrame                # the non-dominated feasible points per (model, hardware)
    best: pd.DataFrame                  # one row per (model, hardware, SLA, scope): best that meets it
    run_s: float                        # wall time of the sweeps, for the manifest
    pareto_tp_pp: pd.DataFrame | None = None   # the fronts without EP / attention DP (MoE
                                               # models searched with them; scope tp_pp)
    decode: pd.DataFrame | None = None  # each winner's decode-only iteration by operator kind
                                        # (continuous batching; dse.infer.breakdown)
