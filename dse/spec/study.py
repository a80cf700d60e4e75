"""Study files: the validated ``[workload]`` (parsed by dse.studies.common) and the
schema of each study kind (:data:`STUDY_SCHEMAS`, checked at load).

Here, below both dse/studies and dse/report, so a report can read a study's workload
without importing the study runners (docs/architecture.md, "Rooms")."""

from __future__ import annotations

from dataclasses import dataclass

from dse.errors import require
from dse.spec.hardware import Hardware
from dse.spec.layout import PRECISION, RECOMPUTE
from dse.spec.model import Model
from dse.spec.network_schema import FAULT
from dse.spec.schema import Field, keys_at, validate_table
from dse.spec.variants import VARIANT_FIELDS


@dataclass(frozen=True)
class StudyWorkload:
    model: Model
    seq_lens: tuple[int, ...]
    global_batches: tuple[int, ...]
    gpus: tuple[int, ...]
    hardware: tuple[Hardware, ...]
    precision: int


# ---- the study file schemas, one per kind -----------------------------------------------
# Checked at load (dse.studies.common.load_study) with every problem of the file in one
# message; each runner then checks what spans fields (a report's GPU count among
# workload.gpus, low <= high, a variant's base).  Wording is the runners' own
# ("must be an integer >= 1", "must be a finite number with `0 <= base`").

#: Largest accepted sizes: the sweep's int32 arrays, and divisor enumerations that end.
INT_LIMITS = {"gpus": 1 << 20, "global_batch": 1 << 20, "seq_len": 1 << 24}
INT_MAX = 2**31 - 1
# The key lists below are declared once, here; the runners (dse/studies/*, dse/search)
# import them.
#: study ``kind`` values (dse.study.RUNNERS has one runner for each; a test pins it)
STUDY_KINDS = ("layout", "variants", "codesign", "faults", "upgrade", "serving")
#: continuous hardware knobs a codesign search may vary, with the unit a trial's value is
#: written in for dse.spec.variants.apply_overrides ("" = a bare number)
CODESIGN_KNOBS = {"hbm_bw": "TB/s", "hbm_capacity": "GiB", "l2": "MiB", "l2_bw": "TB/s",
                  "nvlink_bw": "GB/s", "nic_bw": "GB/s", "clock": "GHz", "num_sms": "",
                  "throttle": ""}
_KNOB_DOC_UNITS = {"num_sms": "SMs", "throttle": "fraction"}     # how `dse list` names them
#: the codesign [cost] terms: study key -> (unit, Hardware attribute, SI per unit)
COST_KEYS = {"per_bf16_pflops": ("PFLOP/s", "peak_bf16_flops_per_s", 1e15),
             "per_hbm_tb_s": ("TB/s", "hbm_bw_bytes_per_s", 1e12),
             "per_hbm_gib": ("GiB", "hbm_bytes", 2.0**30),
             "per_l2_mib": ("MiB", "l2_bytes", 2.0**20),
             "per_nvlink_gb_s": ("GB/s", "nvlink_bw_bytes_per_s", 1e9),
             "per_nic_gb_s": ("GB/s", "nic_bw_bytes_per_s", 1e9)}
SAMPLERS = ("nsga2", "tpe")           # Optuna samplers of dse.search.runner
#: codesign objectives (every one minimized) with their axis labels, and the default pair
CODESIGN_OBJECTIVES = {"step_time_s": "training step time (s)",
                       "cluster_cost": "cluster cost proxy (study units, all GPUs)",
                       "energy_kwh_per_mtok": "energy per million tokens (kWh)",
                       "usd_per_mtok": "cost per million tokens (USD)"}
CODESIGN_DEFAULT_OBJECTIVES = ("step_time_s", "cluster_cost")
#: the [tco] prices: key -> (unit, default, doc)
TCO_FIELDS_UNITS = {"usd_per_cost_unit": ("USD", 1000.0, "USD per unit of the [cost] proxy (capex)"),
                    "amortization_years": ("years", 4.0, "capex amortization period"),
                    "usd_per_kwh": ("USD/kWh", 0.10, "electricity price"),
                    "pue": ("", 1.2, "power usage effectiveness (facility / IT power)")}
TCO_DEFAULTS = {k: dflt for k, (_, dflt, _) in TCO_FIELDS_UNITS.items()}
#: integer layout columns of a pinned faults-study layout (+ recompute, sp)
LAYOUT_KEYS = ("tp", "pp", "dp", "cp", "ep", "mbs", "vpp", "zero")


def _s(key: str, doc: str, **kw) -> Field:
    return Field(key, kind="string", doc=doc, **kw)


def _i(key: str, doc: str, lo: int = 1, unit: str = "", **kw) -> Field:
    hi = kw.pop("hi", INT_MAX)
    return Field(key, kind="integer", lo=lo, hi=hi, unit=unit, doc=doc,
                 rule=kw.pop("rule", f"must be an integer >= {lo} and <= {hi}, but got {{v!r}}"), **kw)


def _n(key: str, doc: str, lo: float = 0.0, lo_open: bool = False, unit: str = "", **kw) -> Field:
    return Field(key, lo=lo, lo_open=lo_open, unit=unit, doc=doc,
                 rule="must be a finite number with `{chain}`, but got {v!r}", **kw)


def _ints(key: str, doc: str, hi: int = INT_MAX, **kw) -> Field:
    return Field(key, kind="integers", lo=1, hi=hi, doc=doc, rule=f"must be a positive integer <= {hi} "
                 "or a non-empty list of them, but got {v!r}", **kw)


_HEADER = (
    _s("name", "results go to results/<name>/ (one path component)", required=True),
    _s("kind", "study kind", required=True, choices=STUDY_KINDS),
    _s("description", "one line for the report", default=""),
)


def _workload(hardware: bool) -> Field:
    hw = (Field("hardware", kind="strings", doc="catalog names or .toml paths"),) if hardware else ()
    return Field("workload", kind="table", doc="the training job", fields=(
        _s("model", "catalog name, Hugging Face id, config.json or .toml"),
        _ints("seq_len", "sequence lengths", hi=INT_LIMITS["seq_len"], unit="tokens"),
        _ints("global_batch", "sequences per step", hi=INT_LIMITS["global_batch"]),
        _ints("gpus", "GPU counts", hi=INT_LIMITS["gpus"], unit="GPUs"),
        *hw,
        _s("precision", "training precision", choices=tuple(PRECISION), default="bf16"),
    ))


_PICK = (_s("hardware", "one of workload.hardware"), _i("gpus", "one of workload.gpus", unit="GPUs"),
         _i("seq_len", "one of workload.seq_len", unit="tokens"))
_VARIANTS = Field("variants", kind="tables", label="name", fields=VARIANT_FIELDS,
                  doc="hardware variants (dse.spec.variants: base + overrides)")

LAYOUT_STUDY: tuple[Field, ...] = _HEADER + (
    _workload(True),
    Field("report", kind="table", default={}, doc="what the report shows", fields=(
        Field("heatmap", kind="table", fields=_PICK, doc="the TP x PP heatmap's point"),
        Field("breakdown", kind="table", doc="the step-breakdown plot's point",
              fields=_PICK + (_i("top", "layouts shown", default=8),)),
        Field("published", kind="tables", doc="published layouts to compare with", fields=(
            _i("gpus", "GPUs", required=True, unit="GPUs"), _s("hardware", "GPU", required=True),
            _i("seq_len", "tokens (default: every workload.seq_len)", unit="tokens"),
            _s("layout", "as published", required=True),
            _n("speedup", "published speedup over pure DP (ZeRO-3)", lo_open=True, required=True, unit="x"),
            _s("source", "citation"))),
    )),
)

VARIANTS_STUDY: tuple[Field, ...] = _HEADER + (
    _s("baseline", "the variant speedups are relative to (default: the first)"),
    _workload(True),
    _VARIANTS,
    Field("report", kind="table", default={}, doc="what the report shows", fields=(
        Field("breakdown_gpus", kind="integers", lo=1, doc="GPU counts of the breakdown plots",
              rule="must be among workload.gpus, but got {v!r}"),
        Field("published", kind="tables", doc="published speedups to compare with", fields=(
            _s("variant", "a variant name", required=True),
            Field("speedup", lo=0.0, lo_open=True, required=True, unit="x", doc="published speedup",
                  rule="must be a number > 0, but got {v!r}"),
            _s("metric", "what the speedup measures"), _s("source", "citation"))),
    )),
    Field("inference", kind="table", doc="prefill / decode speedups per variant", fields=(
        _s("model", "catalog name, Hugging Face id, config.json or .toml", required=True),
        _i("gpus_per_replica", "GPUs of one serving replica", rule="must be one positive integer, but got {v!r}",
           required=True, unit="GPUs"),
        _ints("batch", "batch sizes", required=True),
        _i("prompt_len", "prompt tokens", rule="must be one positive integer, but got {v!r}", required=True,
           unit="tokens"),
        _i("gen_len", "generated tokens", rule="must be one positive integer, but got {v!r}", required=True,
           unit="tokens"),
        _s("precision", "serving precision", default="bf16"),
    )),
)

def _knob(unit: str, fraction: bool) -> tuple[Field, ...]:
    """``{low, high, log}`` of one knob: a throttle is a fraction in [0, 1); capacities,
    bandwidths, clocks and SM counts are > 0."""
    b = dict(lo=0.0, hi=1.0, hi_open=True) if fraction else dict(lo=0.0, lo_open=True)
    return (_n("low", "lower bound", unit=unit, required=True, **b),
            _n("high", "upper bound", unit=unit, required=True, **b),
            Field("log", kind="bool", default=False, doc="sample on a log scale"))


CODESIGN_STUDY: tuple[Field, ...] = _HEADER + (
    Field("base", kind="string", required=True, doc="the GPU every trial modifies",
          rule="must be a GPU name, but got {v!r}"),
    _workload(True),
    Field("knobs", kind="named", doc="searched hardware knobs {low, high, log} in their units",
          cases=tuple((k, _knob(u or _KNOB_DOC_UNITS[k], k == "throttle")) for k, u in CODESIGN_KNOBS.items())),
    Field("cost", kind="table", default={}, doc="per-GPU cost: base + sum coef x attribute", fields=(
        _n("base", "fixed cost per GPU", unit="$k"),
        *(_n(k, f"cost per {u}", unit=f"$k per {u}") for k, (u, _, _) in COST_KEYS.items()))),
    Field("search", kind="table", default={}, doc="the Optuna search", fields=(
        _i("trials", "trials to evaluate", default=200), _i("batch", "trials per vectorized batch", default=40),
        _s("sampler", "Optuna sampler", choices=SAMPLERS, default="nsga2"),
        _i("seed", "sampler seed", lo=0, hi=2**32 - 1),
        Field("objectives", kind="list", item="string", choices=tuple(CODESIGN_OBJECTIVES), min_items=2,
              doc="at least two distinct objectives, all minimized (default: "
                  f"{', '.join(CODESIGN_DEFAULT_OBJECTIVES)})"))),
    Field("tco", kind="table", default={}, doc="prices of the per-token cost objectives", fields=(
        *(_n(k, doc, unit=u, default=dflt, lo=1.0 if k == "pue" else 0.0, lo_open=k != "pue")
          for k, (u, dflt, doc) in TCO_FIELDS_UNITS.items()),)),
    Field("compare", kind="table", default={}, doc="reference GPUs on the Pareto plot", fields=(
        Field("catalog", kind="list", item="string", doc="catalog GPU names"),
        _s("variants_from", "a study file whose [[variants]] are added"))),
)

FAULTS_STUDY: tuple[Field, ...] = _HEADER + (
    _workload(True),
    Field("study", kind="table", default={}, doc="which layouts are replayed", fields=(
        _i("candidates", "healthy top layouts re-simulated", default=5,
           rule="`candidates >= 1` must hold, but got {v!r}"),
        _s("scale_out", "network built from the hardware", choices=("rail", "fat_tree"), default="rail",
           rule="must be 'rail' or 'fat_tree', but got {v!r}"),
        Field("distinct", kind="list", item="string", choices=LAYOUT_KEYS + ("recompute", "sp"),
              doc="one candidate per combination of these layout columns"),
        Field("layouts", kind="tables", min_items=1, doc="pinned layouts instead of the sweep's top",
              fields=(*(_i(k, f"{k} degree", lo=0, required=k in ("tp", "pp", "dp"),
                           rule="must be a non-negative integer, but got {v!r}") for k in LAYOUT_KEYS),
                      _s("recompute", "activation recompute", choices=tuple(RECOMPUTE), default="none"),
                      Field("sp", kind="bool", default=False, doc="sequence parallelism"))),
    )),
    Field("scenario", kind="tables", min_items=1, doc="fault scenarios",
          rule="must be a non-empty array of tables [[scenario]], but got {v!r}",
          fields=(_s("name", "label", required=True), FAULT)),
)

UPGRADE_STUDY: tuple[Field, ...] = _HEADER + (
    _workload(False),
    Field("upgrade", kind="table", doc="the GPUs compared", fields=(
        _s("from", "source GPU (catalog name or a [[variants]] name)"),
        Field("to", kind="strings", doc="target GPUs; the first is the upgrade studied"),
        _i("breakdown_gpus", "GPU count of the breakdown plot (one of workload.gpus)", unit="GPUs"),
        _ints("headroom_mbs", "micro-batch sizes tried for the batch headroom"))),
    _VARIANTS,
)

#: serving precisions a study may ask for, and its size limits (dse.studies.serving; a
#: test pins them)
SERVING_PRECISIONS = ("bf16", "fp16", "fp8", "fp4")
SERVING_MAX_BATCH = 1 << 16
SERVING_MAX_LEN = 1 << 20
#: batching modes of the serving sweep (dse.infer.sweep.BATCHING is this tuple)
SERVING_BATCHING = ("static", "continuous")
#: the MoE layout axes of the serving search (dse.infer.expert_parallel.serving_layouts):
#: "auto" (every degree the layout rules allow; the default under continuous batching),
#: a positive integer or a list of them (1: experts split over TP only, no attention DP)
SERVING_AXES = {"ep": "expert-parallel degrees: 'auto' (default with continuous batching) or integer(s)",
                "attn_dp": "attention data-parallel ranks per replica: 'auto' (default with continuous "
                           "batching) or integer(s)"}
SERVING_AXIS_RULE = "must be 'auto', a positive integer or a non-empty list of them, but got {v!r}"

SERVING_STUDY: tuple[Field, ...] = _HEADER + (
    Field("serving", kind="table", doc="what is served", fields=(
        Field("models", kind="strings", doc="catalog names or Hugging Face ids"),
        _i("gpus", "GPUs of one replica group", hi=INT_LIMITS["gpus"], unit="GPUs"),
        _i("input_len", "prompt tokens", hi=SERVING_MAX_LEN, unit="tokens"),
        _i("output_len", "generated tokens", hi=SERVING_MAX_LEN, unit="tokens"),
        _i("max_batch", "largest batch tried", hi=SERVING_MAX_BATCH),
        _s("batching", "continuous: requests in flight per replica under the engine profile; "
           "static: one batch prefilled then decoded", default="continuous",
           choices=SERVING_BATCHING),
        *(Field(k, kind="integers", lo=1, hi=INT_LIMITS["gpus"], words=("auto",), doc=doc,
                rule=SERVING_AXIS_RULE) for k, doc in SERVING_AXES.items()))),
    Field("hardware", kind="tables", min_items=1, doc="GPUs and the precisions served on each", fields=(
        _s("name", "catalog name", required=True),
        _s("engine", "engine profile (dse.infer.engines), or an engine with its release routed as "
           "dse predict does, e.g. 'vllm 0.14.1'; default trtllm on NVIDIA, vllm on AMD"),
        Field("precisions", kind="strings", choices=SERVING_PRECISIONS, default=("bf16",),
              doc="fp4: NVFP4 on NVIDIA, MXFP4 on AMD"))),
    Field("sla", kind="tables", min_items=1, doc="latency targets", fields=(
        _s("name", "label", required=True),
        _n("ttft_ms", "time to first token", lo_open=True, unit="ms", required=True),
        _n("tpot_ms", "time per output token", lo_open=True, unit="ms", required=True))),
)

STUDY_SCHEMAS: dict[str, tuple[Field, ...]] = {
    "layout": LAYOUT_STUDY, "variants": VARIANTS_STUDY, "codesign": CODESIGN_STUDY,
    "faults": FAULTS_STUDY, "upgrade": UPGRADE_STUDY, "serving": SERVING_STUDY}


def study_keys(kind: str, *path: str) -> set[str]:
    """The keys the ``kind`` schema declares at ``path`` (:func:`dse.spec.schema.keys_at`):
    what a runner's own table checks allow."""
    return keys_at(STUDY_SCHEMAS[kind], *path)


def validate_study(d: dict, where: str) -> None:
    """Check a study file against the schema of its ``kind`` (every problem at once)."""
    kind = d.get("kind")
    require(isinstance(kind, str), where, "kind", f"must be a string, but got {kind!r}")
    require(kind in STUDY_SCHEMAS, where, "kind", f"must be one of {list(STUDY_KINDS)}, but got {kind!r}")
    validate_table(d, STUDY_SCHEMAS[kind], where)
