"""`dse predict` / `dse validate` for the inference schema
(``../shared/validation/inference/README.md``; rows recognised by their ``scenario``
column).

Each row becomes a :class:`dse.infer.serving.Deployment` (model by Hugging Face repo id
-- a re-published quantized one too -- or catalog name, hardware by catalog name or a
vendor spelling of one SKU, ``tp`` x ``pp`` per replica, ``replicas`` = ``gpus / (tp
pp)``, engine profile parsed from ``engine`` and its release,
:func:`dse.infer.engines.engine_profile`, with the limits it launches with,
:func:`dse.infer.engines.launch_defaults`) and one scenario of
:mod:`dse.infer.serving`.  Outputs: ``predicted_output_tok_s`` (whole system),
``predicted_output_tok_s_per_gpu``, ``predicted_ttft_ms``, ``predicted_tpot_ms``,
``predicted_e2e_latency_ms``, the settings chosen for blank fields (``chosen_*``) and a
``status`` (``ok``, or why the row cannot be expressed; other rows are unaffected).

Blank settings, as a tuned deployment would choose them:

* ``precision`` blank: bf16 (every engine's default for these checkpoints).  fp8 means
  fp8 weights and activations; ``fp4`` means 4-bit block-scaled weights and activations
  in the hardware's native format (NVFP4 on NVIDIA Blackwell, MXFP4 on AMD CDNA4;
  ``nvfp4`` / ``mxfp4`` name one explicitly), GEMMs on ``peak_tflops_fp4``; hardware
  without fp4 tensor cores gets an ``infeasible`` status, except for a checkpoint that
  stores its experts in MXFP4 (gpt-oss, ``mxfp4_experts``): ``fp4`` is then its own
  MXFP4, served weight-only (W4A16 experts, bf16 linears: ``chosen_precision``
  ``mxfp4-w4a16``) where the GPU has no fp4 tensor cores; the KV cache is fp8 too where the source says so
  (``fp8_kv_cache`` / ``FP8 KV`` in ``notes``, or ``kv_precision`` = fp8) or where the
  engine makes it the default of an fp8 model (TensorRT-LLM, ``fp8_kv_with_fp8``), else 16-bit.
* ``tp`` blank: the smallest power of two whose weights leave room for a KV cache;
  ``pp`` blank: 1; ``replicas`` blank: ``gpus / (tp pp)``.
* ``input_len`` / ``output_len`` blank (dataset-driven): the dataset's mean lengths
  and the spread of its output lengths (:data:`DATASETS`, documented properties of the
  public datasets; the spread enters as ``o2``, :func:`dse.infer.serving.resident_output`).
* ``batch_or_concurrency`` blank in ``offline_throughput``: the running batch the KV pool
  and the engine's limits allow (:func:`dse.infer.serving.running_batch`); given, it caps
  the engine's running batch (its ``max_batch_size`` / ``max_num_seqs``).
* ``request_rate``, where given, must be a number > 0 on every row (``inf``: all requests
  at once, as the offline rows write it); it sets the arrivals of ``poisson_rate`` rows:
  a row that states its run length (``num_prompts`` column or ``--num-prompts``) is
  simulated pass by pass (:mod:`dse.infer.open_loop_run`: its ramp, queue and drain), one
  that does not gets the steady state of an endless run (:func:`dse.infer.serving.poisson`,
  a fixed point of the iteration under Poisson arrivals with an M/D/1 prefill wait).

``latency_stat``: ``median`` end-to-end latency uses the dataset's median output length
(ShareGPT's output lengths are close to exponential: median = ln 2 x mean); TTFT and
TPOT are reported as means (the model has no per-request spread).  MoE: ``ep`` blank
= 1 (experts split over TP); ``ep`` > 1 splits the experts over ``ep`` of the replica's
GPUs (``tp % ep == 0``, each expert TP-split over ``tp / ep``); the optional ``attn_dp``
column (default 1) runs attention data-parallel on that many ranks of ``tp`` GPUs each,
with ``ep = tp * attn_dp``, each MoE layer all-gathering the ranks' tokens and
reduce-scattering the results (:mod:`dse.infer.moe_serving`), and every iteration at
the pace of the busiest rank (:mod:`dse.infer.attention_dp`).  With ``attn_dp`` / ``ep``
blank (the calibration schema has neither), the engine's own launch flags say them --
SGLang ``--enable-dp-attention --dp-size N`` / ``--ep-size``, TensorRT-LLM
``enable_attention_dp`` / ``--ep_size`` / "DEP*n*", vLLM ``--data-parallel-size`` /
``--enable-expert-parallel`` -- and ``tp`` is read in that engine's meaning
(:mod:`dse.infer.launch_layout`; ``chosen_layout_from`` names what was read);
``gpus = replicas * tp * attn_dp * pp``.  Disaggregated prefill/decode: a ``disagg`` column reading
``xPyD`` (x prefill and y decode replicas, :mod:`dse.infer.disagg`), with optional
``prefill_tp`` / ``decode_tp`` (default ``tp``); ``gpus = (x prefill_tp + y decode_tp) pp``.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

import numpy as np
import pandas as pd

from dse.errors import InputError
from dse.na_cells import blank_cell, na_word_status
from dse.row_status import has_prediction, is_prediction
from dse.infer.continuous import engine_rule
from dse.infer.engines import FLAG_MAX, TGI_NAMES, engine_profile, launch_defaults, served_model
from dse.infer.launch_flags import (launch_settings, launch_texts as _launch_texts, row_text as _row_text,
                                    stated_limit)
from dse.infer.launch_layout import stated_layout
from dse.infer.finite_run import closed_loop_run, num_prompts, queued_run
from dse.infer.open_loop_run import finite_open_loop
from dse.infer.lockstep import (lockstep_concurrency, staggered_concurrency, staggered_one_wave,
                                wave_cap)
from dse.infer.serving import (Deployment, concurrency, fixed_batch, offline, poisson, streams,
                               weights_bytes)
from dse.spec.hardware import flop_per_sm_clk, get_hardware, missing_tensor_cores, sustained_clock
from dse.spec.layout import SERVING_PRECISION
from dse.spec.layout_rules import serving_layout_violations
from dse.spec.model import get_model

REQUIRED_INFERENCE = ("id", "model", "hardware", "gpus", "scenario")
SCENARIOS = ("fixed_batch", "offline_throughput", "concurrency", "poisson_rate", "latency")
OUTPUTS = ("predicted_output_tok_s", "predicted_output_tok_s_per_gpu", "predicted_ttft_ms",
           "predicted_tpot_ms", "predicted_e2e_latency_ms")
MEASURED = {"output_tok_s": "measured_output_tok_s", "ttft_ms": "measured_ttft_ms",
            "tpot_ms": "measured_tpot_ms", "e2e_latency_ms": "measured_e2e_latency_ms"}

# Mean (and median output) lengths of the public datasets serving benchmarks use:
#   MLPerf llama2-70b (OpenOrca, 24,576 samples): reference output 294.45 tokens/sample
#     (MLPerf Inference rules / the calibration notes); mean input ~286 tokens
#     (mlcommons/inference language/llama2-70b README dataset statistics; ASSUMPTION
#     where not re-read).
#   MLPerf mixtral-8x7b (15,000 samples, OpenOrca + GSM8K + MBXP): output ~145.9
#     tokens/sample (offline runs' tokens/samples); input ~256 (ASSUMPTION).
#   ShareGPT as sglang.bench_serving samples it: mean input ~226, output ~194 tokens
#     (benchmark/benchmark_vllm_060: 22.03 req/s at 4281.5 output tok/s -> 194.4;
#     input from the bench_serving summary "Total input tokens" of the same README
#     family, ASSUMPTION); output lengths ~exponential -> median ln2 x mean and
#     E[O^2] / E[O]^2 = 2 (the second moment of an exponential), which sets the KV a
#     running request holds on average (dse.infer.serving, "Length spread").
#   The MLPerf sets' output spread is not documented here: E[O^2] / E[O]^2 = 1 (every
#     request at the mean; ASSUMPTION, which understates their KV footprint).
# Values: (mean input, mean output, median output, E[O^2] / E[O]^2).
DATASETS = {
    "mlperf llama2-70b": (286.0, 294.45, 294.45, 1.0),
    "mlperf mixtral-8x7b": (256.0, 145.9, 145.9, 1.0),
    "sharegpt": (226.0, 194.4, 194.4 * math.log(2.0), 2.0),
}


def is_inference_frame(df: pd.DataFrame) -> bool:
    return "scenario" in df.columns


def _num(row, col, default=None):
    v = row.get(col)
    if blank_cell(v):
        return default
    if isinstance(v, (bool, np.bool_)):      # a "true" cell read as a boolean is not a count
        raise InputError("row", col, f"must be a number, but got {v!r}")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputError("row", col, f"must be a number, but got {v!r}") from None
    return f


def scenario_load(row, scen: str) -> tuple[int | None, float | None]:
    """``(batch_or_concurrency, request_rate)`` as the row's scenario needs them, checked:
    ``fixed_batch`` and ``concurrency`` need the count; ``latency`` is batch 1 by
    definition, so a stated count must be 1; ``poisson_rate`` needs a rate (its value,
    > 0 or inf for every request at once, is checked with the row's other fields in
    :func:`predict_inference_row`).  :class:`InputError` naming the column otherwise."""
    n = _posint(row, "batch_or_concurrency")
    if scen in ("fixed_batch", "concurrency") and n is None:
        raise InputError("row", "batch_or_concurrency", f"is required for {scen}")
    if scen == "latency" and n not in (None, 1):
        raise InputError("row", "batch_or_concurrency", f"must be 1 (or blank) for latency, which "
                         f"is batch 1; a batch of {n} is the fixed_batch scenario")
    rate = None
    if scen == "poisson_rate":
        rate = _num(row, "request_rate")
        if rate is None:
            raise InputError("row", "request_rate", "is required for poisson_rate")
    return n, rate


#: upper bounds of the integer columns (dse.predict's training bounds): GPU counts and
#: parallel degrees as `dse sweep --gpus`, requests in flight, tokens per request
MAX_POSINT = {"batch_or_concurrency": 1 << 20, "input_len": 1 << 24, "output_len": 1 << 24,
              "num_prompts": FLAG_MAX}
MAX_DEGREE = 1 << 20


def _posint(row, col, default=None):
    f = _num(row, col, default)
    if f is None:
        return None
    top = MAX_POSINT.get(col, MAX_DEGREE)
    if not (math.isfinite(f) and f == int(f) and 0 < f <= top):
        raise InputError("row", col, f"must be a positive integer <= {top}, but got {row.get(col)!r}")
    return int(f)


def run_length(row) -> int | None:
    """The run's request count ``P``: the row's ``num_prompts`` column where it is filled
    (a positive integer, :func:`_posint`), else the ``--num-prompts`` its text states
    (:func:`dse.infer.finite_run.num_prompts`), else None; a column and a flag that
    disagree describe two runs, an :class:`InputError` naming the column."""
    stated = num_prompts(row)
    col = _posint(row, "num_prompts")
    if col is None:
        return stated
    if stated is not None and stated != col:
        raise InputError("row", "num_prompts", f"must agree with the --num-prompts the row's text "
                         f"states ({stated}), but got {col}")
    return col


def _dataset_key(row):
    ds = str(row.get("dataset", "")).lower()
    for key in DATASETS:
        if key.split()[0] in ds and all(k in ds for k in key.split()[1:]):
            return key
    if "sharegpt" in ds:
        return "sharegpt"
    return None


def _dataset_lengths(row):
    key = _dataset_key(row)
    return None if key is None else DATASETS[key]


def _kv_fp8(row, prec: str, eng=None) -> bool:
    """fp8 KV cache: the ``kv_precision`` column; else the source's words; else the
    engine's default for an fp8 / fp4 model (:mod:`dse.infer.engines`)."""
    if not blank_cell(row.get("kv_precision")):
        kv = str(row["kv_precision"]).strip().lower()
        if kv not in ("fp8", "bf16", "fp16"):
            raise InputError("row", "kv_precision", f"must be fp8, bf16, fp16 or blank, but got "
                             f"{row['kv_precision']!r}")
        return kv == "fp8"
    text = _row_text(row, ("notes", "precision_as_written", "engine")).lower()
    low = prec in ("fp8", "nvfp4", "mxfp4")
    said = "fp8_kv" in text or "fp8 kv" in text or "o_fp8" in text
    return low and (said or bool(eng is not None and eng.fp8_kv_with_fp8))


MXFP4_WEIGHT_ONLY = "mxfp4-w4a16"   # chosen_precision of an MXFP4 checkpoint on a GPU without fp4


_RANGE_RATIO = re.compile(r"random[-_ ]range[-_ ]ratio\s*[= ]\s*([^\s,;:)]+)", re.IGNORECASE)


def range_ratio(row) -> float | None:
    """The benchmark client's ``--random-range-ratio r`` a row states (``engine``, ``notes``
    or ``dataset``), or None.  With ``r`` < 1 the random dataset draws each request's
    lengths uniformly in ``[r L, L]`` around the nominal ``input_len`` / ``output_len``
    (SGLang ``bench_serving.py`` ``sample_random_requests``: ``randint(int(L r), L + 1)``;
    vLLM ``benchmark_serving`` before its 2025 symmetric rewrite, and SemiAnalysis
    InferenceMAX's fork of it, "80-100 % of ISL/OSL" at 0.8), so the row is predicted at
    the mean lengths ``L (1 + r) / 2`` with the spread of :func:`uniform_o2`, not as a
    fixed-length closed loop.  ``r`` must be a number in (0, 1]."""
    text = _row_text(row, ("engine", "notes", "dataset"))
    vals = {m.group(1).rstrip(".") for m in _RANGE_RATIO.finditer(text)}
    if not vals:
        return None
    try:
        nums = {float(v) for v in vals}
    except ValueError:
        raise InputError("row", "notes", f"--random-range-ratio must be a number in (0, 1], but "
                         f"got {sorted(vals)}") from None
    if len(nums) > 1 or not all(0.0 < v <= 1.0 for v in nums):
        raise InputError("row", "notes", f"--random-range-ratio must be stated once as a number in "
                         f"(0, 1], but got {sorted(vals)}")
    return nums.pop()


def uniform_o2(r: float) -> float:
    """``E[O^2] / E[O]^2`` of lengths uniform in ``[r L, L]``: ``1 + (1 - r)^2 / (3 (1 + r)^2)``
    (variance ``((1 - r) L)^2 / 12`` over the squared mean ``((1 + r) L / 2)^2``)."""
    return 1.0 + (1.0 - r) ** 2 / (3.0 * (1.0 + r) ** 2)


_POWER = re.compile(r"(\d+(?:\.\d+)?)\s*w\s*(?:tgp|tdp|power limit)\b", re.IGNORECASE)


def _power_limited(row, hw):
    """The hardware at the power limit the row states -- a ``power_w`` column, else a
    ``<N>W TGP`` / ``TDP`` in ``hardware_as_written`` (MLPerf's "H200-SXM-141GB-CTS, 1000W
    TGP") -- with its sustained clock (:mod:`dse.spec.power`); unchanged without one."""
    p = _num(row, "power_w")
    if p is None:
        m = _POWER.search(str(row.get("hardware_as_written", "")))
        p = float(m.group(1)) if m else None
    if p is None:
        return hw
    if not (math.isfinite(p) and p > 0):
        raise InputError("row", "power_w", f"must be a finite number > 0 (watts), but got {p!r}")
    try:
        clk = sustained_clock(hw.generation, p, float(hw.num_sms), float(hw.clock_hz), "row", "power_w",
                              flop_per_sm_clk(hw))      # only SKUs of the reference's datapath
    except InputError:
        raise InputError("row", "power_w", f"must exceed the {hw.generation} static power "
                         f"(dse.spec.power), but got {p!r}") from None
    return hw.replace(tdp_w=p, power_clock=clk)


_TAIL_STAT = re.compile(r"\b(?:p(?!50\b)\d+(?:\.\d+)?|percentile|max(?:imum)?|min(?:imum)?|std(?:dev)?|tail)\b",
                        re.IGNORECASE)


def _check_latency_stat(row) -> None:
    """``latency_stat`` may name a mean or a median (p50), or be a free-text note (``as
    published``): the model predicts means and the ShareGPT median; a tail or spread
    statistic (p90, p99, max, std) it cannot predict is an invalid row, not a mean."""
    stat = str(row.get("latency_stat", "") or "")
    if not blank_cell(stat) and _TAIL_STAT.search(stat):
        raise InputError("row", "latency_stat", "must be a mean or a median (p50): the model has no "
                         f"per-request latency spread, but got {stat!r}")


def _note_unapplied_power(row, res: dict) -> dict:
    """An ok row that states a power limit on hardware without a power model
    (:data:`dse.spec.power.REFERENCE`: B200, MI300X) says in its status that it was not applied."""
    from dse.spec.power import REFERENCE
    stated = not blank_cell(row.get("power_w")) or _POWER.search(str(row.get("hardware_as_written", "")))
    if not (stated and is_prediction(res.get("status", ""))):
        return res
    gen = get_hardware(str(row.get("hardware", "")).strip(), where="hardware").generation
    if str(gen) in REFERENCE:
        return res
    note = f"power limit not applied: {gen} has no power model (dse.spec.power)"
    st = res["status"]
    return {**res, "status": f"ok ({note})" if st == "ok" else f"{st[:-1]}; {note})"}


def predict_inference_row(row: dict) -> dict:
    out = {c: np.nan for c in OUTPUTS}
    scen = str(row.get("scenario", "")).strip().lower()
    if scen not in SCENARIOS:
        raise InputError("row", "scenario", f"must be one of {list(SCENARIOS)}, but got {scen!r}")
    _check_latency_stat(row)
    rate = _num(row, "request_rate")
    if rate is not None and not rate > 0:    # inf = all at once (offline); nan or <= 0: nonsense
        raise InputError("row", "request_rate", f"must be a number > 0 (inf: all requests at once), "
                         f"but got {row.get('request_rate')!r}")
    model = get_model(str(row.get("model", "")).strip(), where="model")
    hw = _power_limited(row, get_hardware(str(row.get("hardware", "")).strip(), where="hardware"))
    prec = str(row.get("precision", "")).strip().lower()
    prec = "bf16" if prec in ("", "nan") else prec
    if prec not in SERVING_PRECISION and prec != "fp4" or prec in ("fp32", "tf32"):
        raise InputError("row", "precision", f"must be bf16, fp16, fp8 or fp4 (nvfp4, mxfp4), "
                         f"but got {prec!r}")
    amd = str(hw.generation).startswith("cdna")
    if prec == "fp4":                      # the hardware's native block-scaled 4-bit format,
        prec = "mxfp4" if amd or int(model.mxfp4_experts) > 0 else "nvfp4"   # or the checkpoint's
    # an MXFP4-expert checkpoint (gpt-oss) labelled fp4 on a GPU without fp4 tensor cores is
    # served as stored: weight-only MXFP4 experts (W4A16) beside bf16 linears, the mode of the
    # "fp8"-labelled rows (dse.infer.moe_serving.mxfp4_expert_rates); no fp8 KV by default
    weight_only = (prec == "mxfp4" and float(hw.peak_fp4_flops_per_s) <= 0
                   and int(model.mxfp4_experts) > 0 and float(hw.peak_fp8_flops_per_s) > 0)
    if weight_only:
        prec = "fp8"
    lack = missing_tensor_cores(hw, SERVING_PRECISION[prec])   # fp8 2, nvfp4 3, mxfp4 4
    if lack:
        peak = " (peak_tflops_fp4 = 0)" if prec in ("nvfp4", "mxfp4") else ""
        return {**out, "status": f"infeasible: {hw.name} has no {lack}{peak}"}
    if prec == "nvfp4" and amd:
        return {**out, "status": f"infeasible: {hw.name} runs MXFP4, not NVFP4"}
    eng, why = engine_profile(row.get("engine", ""))
    why = why or engine_rule(eng.name, hw)
    if why:
        return {**out, "status": f"infeasible: {why}"}
    gpus = _posint(row, "gpus", 1)
    pp = _posint(row, "pp", 1)
    tp, ep, dp, how = stated_layout(eng.name, _launch_texts(row), gpus, _posint(row, "tp", None), pp,
                                    _posint(row, "ep", None), _posint(row, "attn_dp", None))
    ep, dp = ep or 1, dp or 1
    kvb = 1.0 if _kv_fp8(row, "bf16" if weight_only else prec, eng) else 2.0
    code = SERVING_PRECISION[prec]
    chosen = {"chosen_precision": MXFP4_WEIGHT_ONLY if weight_only else prec,
              "chosen_kv_bytes": kvb, "chosen_engine": eng.name}
    if how:                  # the layout read from the launch flags (dse.infer.launch_layout)
        chosen.update(chosen_tp=tp, chosen_ep=ep, chosen_attn_dp=dp, chosen_layout_from=how)
    if tp is None:
        tp = 1
        if dp <= 1:
            while tp < gpus and weights_bytes(Deployment(model, hw, eng, tp, pp, code, kvb)) > 0.7 * float(hw.hbm_bytes):
                tp *= 2
        chosen["chosen_tp"] = tp
    # the limits the engine launches with (some follow the TP size), then the row's flags
    eng = launch_defaults(eng, str(row.get("engine", "")), float(hw.hbm_bytes), hw.name, scen, tp, pp,
                          model)
    eng, max_model_len = launch_settings(row, eng, model)
    chosen["chosen_engine"] = eng.name       # the launch may switch vLLM's scheduling
    model = served_model(model, eng)        # the attention window the engine runs
    why = _layout_violation(model, tp, pp, ep, dp)
    if why:
        return {**out, **chosen, "status": f"infeasible: {why}"}
    if model.num_attention_heads % tp or (model.num_kv_heads % tp and tp % model.num_kv_heads):
        return {**out, **chosen, "status": f"infeasible: tp={tp} does not split "
                f"{model.num_attention_heads} heads / {model.num_kv_heads} KV heads"}
    S, O = _posint(row, "input_len"), _posint(row, "output_len")
    med_O = O
    o2 = 1.0
    fixed_lengths = S is not None and O is not None
    r = range_ratio(row)
    if fixed_lengths and r is not None and r < 1.0:      # lengths drawn in [r L, L]
        S, O, o2 = S * (1.0 + r) / 2.0, O * (1.0 + r) / 2.0, uniform_o2(r)
        med_O = O
        fixed_lengths = False
        chosen.update(chosen_input_len=S, chosen_output_len=O)
    if S is None or O is None:
        ds = _dataset_lengths(row)
        if ds is None:
            return {**out, **chosen, "status": "infeasible: input_len/output_len blank and the "
                    f"dataset {row.get('dataset')!r} has no documented mean lengths"}
        S, O, med_O, o2 = ds
        chosen.update(chosen_input_len=S, chosen_output_len=O)
    max_input = stated_limit(row, "max_input_tokens")
    if eng.name in TGI_NAMES and max_input is not None and S > max_input:
        return {**out, **chosen, "status": f"infeasible: `input_len <= --max-input-tokens` must hold "
                f"(TGI rejects longer prompts), but got (input_len={S:g}, max_input_tokens={max_input:g})"}
    if max_model_len is not None and S + O > max_model_len:
        return {**out, **chosen, "status": f"infeasible: `input_len + output_len <= "
                f"--max-model-len` must hold (the engine rejects longer requests), but got "
                f"(input_len={S:g}, output_len={O:g}, max_model_len={max_model_len:g})"}
    if not blank_cell(row.get("disagg")):
        return _disagg_row(row, out, chosen, scen, model, hw, eng, tp, pp, code, kvb, ep, dp,
                           gpus, S, O, med_O)
    if gpus % (tp * dp * pp):
        return {**out, **chosen, "status": f"infeasible: `tp * attn_dp * pp divides gpus` must "
                f"hold, but got (tp={tp}, attn_dp={dp}, pp={pp}, gpus={gpus})"}
    replicas = _posint(row, "replicas", gpus // (tp * dp * pp))
    if replicas * tp * dp * pp != gpus:
        return {**out, **chosen, "status": f"infeasible: `replicas * tp * attn_dp * pp == gpus` "
                f"must hold, but got (replicas={replicas}, tp={tp}, attn_dp={dp}, pp={pp}, gpus={gpus})"}
    dep = Deployment(model, hw, eng, tp, pp, code, kvb, ep, dp)
    n, rate = scenario_load(row, scen)
    stat = str(row.get("latency_stat", "") or "")
    if scen == "latency":
        res = fixed_batch(dep, 1.0, S, O, replicas)
    elif scen == "fixed_batch":
        res = fixed_batch(dep, n, S, O, replicas)
    elif scen == "offline_throughput" or (scen == "poisson_rate" and math.isinf(rate)):
        if n is not None:          # the row states the running-batch limit it was run with
            dep = dep._replace(engine=replace(eng, max_batch=min(int(eng.max_batch), n)))
        res = all_queued(dep, run_length(row), S, O, replicas, max_model_len, stat, o2,
                         fixed_lengths)
        chosen["chosen_batch"] = res.batch
    elif scen == "concurrency":
        res = closed_loop_run(_closed_loop(dep, n, S, O, replicas, max_model_len, o2,
                                           fixed_lengths),
                              dep, n, run_length(row), S, O, replicas, max_model_len, stat, o2)
    else:
        P = run_length(row)
        # a stated run length: the run itself (its ramp, its queue, its drain); else the
        # steady state of an endless run
        res = finite_open_loop(dep, rate, P, S, O, replicas, o2, stat) if P is not None else None
        if res is None:
            res = poisson(dep, rate, S, O, replicas, o2=o2)
        chosen["chosen_batch"] = res.batch
    return _finish(out, chosen, res, dep, row, S, O, med_O)


def _closed_loop(dep, n, S, O, replicas, max_model_len, o2, fixed_lengths, one_wave=False):
    """``n`` requests in flight: lockstep waves with fixed lengths
    (:func:`dse.infer.lockstep.lockstep_concurrency`, or staggered cohorts on an engine
    that mixes prompts into decode iterations: their cycle, or with ``one_wave`` the
    single wave of a run that sends nothing more,
    :func:`dse.infer.lockstep.staggered_one_wave`), else the steady state of
    dataset-driven lengths (:func:`dse.infer.serving.concurrency`)."""
    if not fixed_lengths:
        return concurrency(dep, n, S, O, replicas, spread=True, o2=o2)
    if dep.engine.mixed_batches:
        wave = staggered_one_wave if one_wave else staggered_concurrency
        return wave(dep, n, S, O, replicas, max_model_len)
    return lockstep_concurrency(dep, n, S, O, replicas, max_model_len)


def all_queued(dep, P, S, O, replicas, max_model_len, stat, o2, fixed_lengths):
    """Every request queued at once (``offline_throughput``, or ``poisson_rate`` at an
    infinite rate) over a run of ``P`` requests: the steady state of a full queue with the
    finite run's start-up burst and queue wait (:func:`dse.infer.finite_run.queued_run`) --
    unless the run sends fewer requests than that steady state runs at once (``P`` below
    its running batch on each stream).  Then no request ever waits and none arrives
    later: the run is one wave of ``P`` requests admitted together, which is a closed
    loop of ``P`` in flight that sends nothing more (:func:`_closed_loop` with ``n = P``
    and its start-up burst, :func:`dse.infer.finite_run.closed_loop_run`); its running
    batch is ``P``, not the larger batch a full queue would sustain (TensorRT-LLM v0.14's
    500-request tables: about 175-350 in flight by Little's law, where the KV cache holds
    600-2000)."""
    # the wave the engine's schedule holds: prefill-first lockstep at the final footprint
    # S + O, staggered in-flight batching at its cohorts' mean (dse.infer.lockstep)
    cap = wave_cap(dep, S, O, final=not dep.engine.mixed_batches)
    if P is None or not fixed_lengths or P / streams(dep, replicas) > cap:
        return queued_run(offline(dep, S, O, replicas, o2=o2), dep, P, S, O, replicas,
                          max_model_len, stat)
    one = _closed_loop(dep, float(P), S, O, replicas, max_model_len, o2, fixed_lengths, True)
    return closed_loop_run(one, dep, float(P), P, S, O, replicas, max_model_len, stat, o2)


def _layout_violation(model, tp: int, pp: int, ep: int, dp: int) -> str:
    """The first serving-layout rule ``(tp, pp, ep, attn_dp)`` breaks ("" if none): the one
    set of rules the serving sweep enumerates with
    (:func:`dse.spec.layout_rules.serving_layout_violations`)."""
    cols = {"tp": [tp], "pp": [pp], "ep": [ep], "attn_dp": [dp]}
    valid, reason = serving_layout_violations(model, tp * dp * pp, cols)
    return "" if valid[0] else str(reason[0]).partition(": ")[2]


_DISAGG = re.compile(r"^\s*(\d+)\s*p\s*(\d+)\s*d\s*$", re.IGNORECASE)


def _finish(out, chosen, res, dep, row, S, O, med_O, prefill_dep=None) -> dict:
    """The predicted columns of a scenario's result (e2e with the median output length
    where the source reports a median), or its infeasible status.  ``prefill_dep``: the
    deployment that runs the prompts where it is not ``dep`` (a disaggregated prefill pool)."""
    if res.note.startswith("infeasible: the weights leave no KV cache"):   # say which, in numbers
        return {**out, **chosen, "status": _no_kv_status(dep, S, O)}
    if res.note.startswith("infeasible"):
        return {**out, **chosen, "status": res.note}
    e2e = res.e2e_s
    stat = str(row.get("latency_stat", "")).lower()
    if "median" in stat and med_O != O:
        e2e = res.ttft_s + (med_O - 1.0) * res.tpot_s
    notes = [n for n in (res.note, speculative_note(row)) if n]
    return {**serving_memory_columns(dep, res.batch, S, O), **decode_columns(dep, res.batch, S, O),
            **prefill_columns(dep if prefill_dep is None else prefill_dep, S),
            "predicted_output_tok_s": res.tokens_per_s,
            "predicted_output_tok_s_per_gpu": res.tokens_per_s_per_gpu,
            "predicted_ttft_ms": res.ttft_s * 1e3, "predicted_tpot_ms": res.tpot_s * 1e3,
            "predicted_e2e_latency_ms": e2e * 1e3, **chosen,
            "status": "ok" if not notes else f"ok ({'; '.join(notes)})"}


_SPECULATIVE = re.compile(r"\b(mtp\d*|eagle-?\d?|medusa|speculative|spec(?:ulative)?[-_ ]decod\w*|"
                          r"draft[-_ ]model|n-?gram|lookahead)\b", re.IGNORECASE)
_NEGATED = re.compile(r"\b(no|not|without|off|none|disabled?|false)\b", re.IGNORECASE)


def speculative_note(row) -> str:
    """A caveat for a row whose engine or notes name speculative decoding (DeepSeek MTP,
    EAGLE, Medusa, n-gram, a draft model): its tokens per step depend on the draft's
    acceptance, which the model does not carry, so it is predicted one token per step;
    "" otherwise."""
    text = _row_text(row)
    for m in _SPECULATIVE.finditer(text):
        near = text[max(m.start() - 12, 0):m.end() + 12]          # "no MTP", "spec decoding off"
        if not _NEGATED.search(near):
            return f"speculative decoding ({m.group(1)}) not modelled: predicted at one token per step"
    return ""


def _no_kv_status(dep, S, O) -> str:
    """:func:`dse.infer.kv_reason.no_admission_reason` for a row's replica: the request's
    final footprint ``S + O`` in the engine's blocks (:func:`dse.infer.serving.kv_slots`)."""
    from dse.infer.kv_cache import kv_cache_bytes
    from dse.infer.kv_reason import no_admission_reason
    from dse.infer.serving import kv_pool_bytes
    blk = dep.engine.block_tokens
    held = math.ceil((S + O) / blk) * blk
    req = float(kv_cache_bytes(dep.model, 1.0, held, dep.tp, dep.pp, dep.kv_bytes))
    return no_admission_reason(weights_bytes(dep), kv_pool_bytes(dep, S), req, S + O, dep.engine.name)


def _disagg_row(row, out, chosen, scen, model, hw, eng, tp, pp, code, kvb, ep, dp, gpus,
                S, O, med_O) -> dict:
    """A row with ``disagg`` = ``xPyD`` (:mod:`dse.infer.disagg`): ``prefill_tp`` /
    ``decode_tp`` default to ``tp``; ``gpus`` must be ``(x prefill_tp + y decode_tp) pp``."""
    from dse.infer import disagg as D
    m = _DISAGG.match(str(row["disagg"]))
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise InputError("row", "disagg", f"must read xPyD with x, y >= 1 (e.g. 1P2D), but got "
                         f"{row['disagg']!r}")
    x, y = int(m.group(1)), int(m.group(2))
    if dp > 1:
        return {**out, **chosen, "status": "infeasible: attention DP inside a disaggregated "
                                           "pool is not modelled"}
    tps = {k: _posint(row, f"{k}_tp", tp) for k in ("prefill", "decode")}
    for k, t in tps.items():
        why = _layout_violation(model, t, pp, ep, 1)
        if why:
            return {**out, **chosen, "status": f"infeasible: {k} pool: {why}"}
        if model.num_kv_heads % t and t % model.num_kv_heads:
            return {**out, **chosen, "status": f"infeasible: {k}_tp={t} does not split "
                    f"{model.num_attention_heads} heads / {model.num_kv_heads} KV heads"}
    need = (x * tps["prefill"] + y * tps["decode"]) * pp
    if need != gpus:
        return {**out, **chosen, "status": f"infeasible: `(x prefill_tp + y decode_tp) pp == gpus` "
                f"must hold, but got ({x}P{y}D, prefill_tp={tps['prefill']}, "
                f"decode_tp={tps['decode']}, pp={pp}, gpus={gpus})"}
    dis = D.Disaggregated(Deployment(model, hw, eng, tps["prefill"], pp, code, kvb, ep, 1),
                          Deployment(model, hw, eng, tps["decode"], pp, code, kvb, ep, 1), x, y)
    chosen["chosen_disagg"] = f"{x}P{y}D"
    n, rate = scenario_load(row, scen)
    if scen in ("latency", "fixed_batch"):
        res = D.fixed_batch(dis, 1.0 if scen == "latency" else n, S, O)
    elif scen == "offline_throughput":
        res = D.offline(dis, S, O)
        chosen["chosen_batch"] = res.batch
    elif scen == "concurrency":
        res = D.concurrency(dis, n, S, O)
    else:
        res = D.offline(dis, S, O) if math.isinf(rate) else D.poisson(dis, rate, S, O)
        chosen["chosen_batch"] = res.batch
    return _finish(out, chosen, res, dis.decode, row, S, O, med_O, dis.prefill)


SERVING_MEM = ("predicted_mem_weights_gib", "predicted_mem_kv_gib",
               "predicted_mem_activations_gib", "predicted_mem_reserve_gib")


DECODE_COLUMNS = ("predicted_decode_ms", "predicted_decode_gemm_ms", "predicted_decode_attention_ms",
                  "predicted_decode_comm_ms", "predicted_decode_elementwise_ms", "predicted_decode_host_ms")


def decode_columns(dep: Deployment, batch: float, S: float, O: float) -> dict:
    """Where the row's decode time goes (:func:`dse.infer.breakdown.decode_breakdown`): the
    steady decode-only iteration of its running batch per attention rank (at least one
    sequence) at the mean context ``S + O/2``, and its five kinds, milliseconds; they sum to
    the first.  A diagnosis beside the predicted TPOT, which also carries prompt passes."""
    from dse.infer.breakdown import KINDS, decode_breakdown
    br = decode_breakdown(dep, max(float(batch) / dep.dp, 1.0), S + O / 2.0)
    return dict(zip(DECODE_COLUMNS, [br.iteration_s * 1e3] + [getattr(br, k) * 1e3 for k in KINDS]))


PREFILL_COLUMNS = ("predicted_prefill_ms", "predicted_prefill_gemm_ms",
                   "predicted_prefill_attention_ms", "predicted_prefill_comm_ms",
                   "predicted_prefill_elementwise_ms", "predicted_prefill_host_ms")


def prefill_columns(dep: Deployment, S: float) -> dict:
    """Where one prompt's prefill goes (:func:`dse.infer.breakdown.prefill_breakdown`): the
    static prefill pass of one ``S``-token prompt alone and its five kinds, milliseconds;
    they sum to the first.  A diagnosis beside the predicted TTFT, which also carries the
    wait for the running pass, the slot queue and the decodes sharing the prompt's passes."""
    from dse.infer.breakdown import KINDS, prefill_breakdown
    br = prefill_breakdown(dep, max(float(S), 1.0))
    return dict(zip(PREFILL_COLUMNS, [br.prefill_s * 1e3] + [getattr(br, k) * 1e3 for k in KINDS]))


def serving_memory_columns(dep: Deployment, batch: float, S: float, O: float) -> dict:
    """Per-GPU memory of the row's replica, GiB: weights, the KV cache its running batch
    holds (``batch`` sequences of the engine's held tokens, :func:`kv_slots`' rule), the
    prefill workspace and the allocator reserve (fixed + fragmentation of the weights).
    The engine pre-allocates its whole KV pool; this is what the batch uses of it."""
    from dse.infer.memory import activation_workspace_bytes
    from dse.infer.kv_cache import kv_cache_bytes
    from dse.infer.workload import InferenceWorkload
    from dse.spec.hardware import GIB
    from dse.train.memory import FRAGMENTATION, RESERVE_BYTES
    from dse.cost.rates import rates
    w = weights_bytes(dep)
    held = S + (O if dep.engine.reserve_final_kv else O / 2.0)
    held = math.ceil(held / dep.engine.block_tokens) * dep.engine.block_tokens
    kv = float(batch) * float(kv_cache_bytes(dep.model, 1.0, held, dep.tp, dep.pp, dep.kv_bytes))
    chunk = min(dep.engine.max_num_tokens, max(S, 1.0))
    wl = InferenceWorkload(batch=1, prompt_len=chunk, gen_len=1, precision=dep.precision)
    acts = float(activation_workspace_bytes(dep.model, wl, dep.tp, dep.pp,
                                            rates(dep.hw, dep.precision).act_bytes))
    reserve = (w + kv + acts) * FRAGMENTATION + RESERVE_BYTES
    return dict(zip(SERVING_MEM, (w / GIB, kv / GIB, acts / GIB, reserve / GIB)))


def predict_inference_frame(df: pd.DataFrame, where: str, mem_margin: float = 0.0,
                            intervals: bool = True) -> pd.DataFrame:
    """Every row predicted; a row that breaks a rule gets ``invalid: <column>: <rule>``
    (or ``infeasible: ...``), the other rows are unaffected.  ``mem_margin`` is accepted
    for symmetry with training and not used: serving engines size their KV pool from
    their own memory fraction (:mod:`dse.infer.engines`), which is the margin they run
    with.  ``intervals``: add the throughput band (:mod:`dse.intervals`)."""
    rows = []
    for i, (label, row) in enumerate(zip(df.index, df.to_dict("records"))):
        bad = na_word_status(df, label)
        if bad:
            rows.append({**{c: np.nan for c in OUTPUTS}, "status": bad})
            continue
        try:
            rows.append(_note_unapplied_power(row, predict_inference_row(row)))
        except InputError as e:        # a model / hardware file the row names: say which
            at = "" if e.where in ("row", "model", "hardware") else f"{e.where}: "
            rows.append({**{c: np.nan for c in OUTPUTS}, "status": f"invalid: {at}{e.field}: {e.rule}"})
    out = pd.concat([df.reset_index(drop=True), pd.DataFrame(rows)], axis=1)
    if intervals:
        from dse.intervals import add_serving_band
        out = add_serving_band(out)
    return out


def measured_system_tok_s(df: pd.DataFrame) -> pd.Series:
    """Measured output tokens/s of the whole system: the column, or per-GPU x gpus."""
    def col(c):                        # an absent column reads as blank (NaN), not a scalar
        return pd.to_numeric(df[c], errors="coerce") if c in df else pd.Series(np.nan, index=df.index)
    tot, per, g = col("measured_output_tok_s"), col("measured_output_tok_s_per_gpu"), col("gpus")
    return tot.where(tot.notna(), per * g)


def error_long(pred: pd.DataFrame) -> pd.DataFrame:
    """One row per (row, measured metric) with a prediction: signed relative error."""
    recs = []
    meas = {"output_tok_s": measured_system_tok_s(pred)}
    for k in ("ttft_ms", "tpot_ms", "e2e_latency_ms"):
        if MEASURED[k] in pred.columns:
            meas[k] = pd.to_numeric(pred[MEASURED[k]], errors="coerce")
    ok = has_prediction(pred["status"])
    for k, m in meas.items():
        p = pd.to_numeric(pred[f"predicted_{k}"], errors="coerce")
        use = ok & np.isfinite(m.astype(float)) & (m > 0) & p.notna()   # as validate's count
        for i in pred.index[use]:
            recs.append({"id": pred.at[i, "id"], "source": pred.at[i, "source_id"], "metric": k,
                         "measured": m[i], "predicted": p[i], "error": p[i] / m[i] - 1.0})
    return pd.DataFrame(recs, columns=["id", "source", "metric", "measured", "predicted", "error"])


def error_tables(pred: pd.DataFrame, errors: pd.DataFrame | None = None):
    """(per source x metric, per metric, per source, overall) MAPE and signed bias; the
    overall row-mean scores each row on every measured figure it has (mean of its
    figures' absolute errors, then mean over rows).  ``errors``: :func:`error_long` of
    ``pred`` where the caller has it already (not modified)."""
    e = (error_long(pred) if errors is None else errors).copy()
    e["ape"] = e["error"].abs()
    agg = dict(n="count", mape=("ape", "mean"), bias=("error", "mean"), max_err=("ape", "max"))
    agg["n"] = ("ape", "count")
    by_sm = e.groupby(["source", "metric"]).agg(**agg)
    by_m = e.groupby("metric").agg(**agg)
    per_row = e.groupby(["source", "id"])["ape"].mean().reset_index()
    by_s = per_row.groupby("source")["ape"].agg(rows="count", row_mape="mean")
    bias_s = e.groupby("source")["error"].mean()
    by_s["bias"] = bias_s
    overall = {"rows": len(per_row), "row_mape": per_row["ape"].mean(), "figures": len(e),
               "figure_mape": e["ape"].mean(), "bias": e["error"].mean()}
    return by_sm, by_m, by_s, overall
