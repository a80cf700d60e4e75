"""What a serving row's launch command states: the engine flags a source wrote in a row's
``engine`` / ``notes`` text (CLI flags and TensorRT-LLM LLM-API options), read into the engine
profile's limits (:func:`launch_settings`).  Each value is checked -- a positive integer, or a
share in (0, 1] -- and a setting stated twice with different values is an
:class:`dse.errors.InputError` naming the column, which :mod:`dse.infer.predict_rows` turns into
the row's ``invalid`` status.  Sources for each engine's flags are at the readers below and in
:mod:`dse.infer.engines`.
"""

from __future__ import annotations

import math
import re
from dataclasses import fields, replace

from dse.errors import InputError
from dse.infer.engines import (FLAG_MAX, PROFILES, TGI_NAMES, VLLM_V1_NAMES, YAML_FALSE_RE, EngineProfile,
                               bool_setting_values, engine_text, flag_value, version3, vllm_async,
                               vllm_v0_mla, yaml_bool)
from dse.infer.launch_layout import trt_attention_dp
from dse.infer.tgi import tgi_v2_prefill_tokens

# a launch flag (regex of its name after ``--``) -> the EngineProfile field its positive integer sets
# (max_model_len and max_input_tokens are returned apart: :func:`launch_settings`)
_LAUNCH = {"max_num_tokens": r"max[-_](?:num[-_](?:batched[-_])?tokens|batch[-_]prefill[-_]tokens|"
                             r"prefill[-_]token[-_]num)",
           "max_batch": r"max[-_](?:batch[-_]size|num[-_]seqs|running[-_]requests|concurrent[-_]requests)",
           "max_model_len": r"max[-_]model[-_]len",
           "max_input_tokens": r"max[-_]input[-_](?:tokens|length)",
           "recv_interval": r"scheduler[-_]recv[-_]interval",
           "scheduler_steps": r"num[-_]continuous[-_]decode[-_]steps",
           "graph_max_batch": r"cuda[-_]graph[-_]max[-_]bs|max[-_]cudagraph[-_]capture[-_]size"}

# The share of GPU memory the engine's KV pool is sized from, as each engine defines it (the
# profile's ``mem_fraction`` with its ``kv_after_weights`` / ``static_fraction``): vLLM
# --gpu-memory-utilization (of the GPU), SGLang --mem-fraction-static (weights + KV, of the
# GPU), TensorRT-LLM free_gpu_memory_fraction (LLM API kv_cache_config) or trtllm-bench
# --kv_cache_free_gpu_mem_fraction (of the memory free after the weights), LMDeploy
# --cache-max-entry-count (of the memory free after the weights)
_MEM_FRACTION = re.compile(r"(?:(?<![-\w])--(gpu[-_]memory[-_]utilization|mem[-_]fraction[-_]static|"
                           r"kv[-_]cache[-_]free[-_]gpu[-_]mem[-_]fraction|cache[-_]max[-_]entry[-_]count)"
                           r"(?![-\w])(?:=|[ \t]+)|\b(free_gpu_memory_fraction)\s*[:=]\s*)([^\s,;)]*)",
                           re.IGNORECASE)


def stated_mem_fraction(row) -> float | None:
    """The memory share a row's launch states (``_MEM_FRACTION``), or None; it must be a
    number in (0, 1] and stated once (:class:`InputError` naming the flag otherwise)."""
    got = []
    for m in _MEM_FRACTION.finditer(row_text(row)):
        flag, raw = m.group(1) or m.group(2), m.group(3).rstrip(".:]")
        v = _as_float(raw, math.nan)
        if not (0.0 < v <= 1.0):
            raise InputError("row", "notes", f"{flag} must be a number in (0, 1] (a share of GPU "
                             f"memory), but got {raw!r}")
        got.append((flag, v))
    if len({v for _, v in got}) > 1:
        said = ", ".join(f"{f} {v:g}" for f, v in got)
        raise InputError("row", "notes", f"the KV memory share must be stated once, but got {said}")
    return got[0][1] if got else None


# CUDA graphs switched off at launch: SGLang --disable-cuda-graph, vLLM --enforce-eager,
# TensorRT-LLM's LLM API ``cuda_graph_config: null`` / ``use_cuda_graph: false``
_NO_GRAPHS = re.compile(r"--(?:disable[-_]cuda[-_]graph|enforce[-_]eager)(?![-\w])(?!\s*[= ]\s*(?:false|0)\b)"
                        r"|\bcuda_graph_config\s*[:=]\s*(?:null|none)\b"
                        r"|\buse_cuda_graph\s*[:=]\s*" + YAML_FALSE_RE, re.IGNORECASE)


def _flat_values(text: str, key: str) -> list[str]:
    """Every raw value ``text`` gives the top-level LLM-API option ``key`` (``key: v``)."""
    return re.findall(rf"(?<![.\w]){re.escape(key)}\s*[:=]\s*([^\s,;}}]+)", text)


def _as_float(raw: str | None, default: float):
    """``raw`` as a float (``default`` when None; NaN when it is not a number, so the
    caller's range check refuses it)."""
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError:
        return math.nan


def option_values(text: str, section: str, key: str) -> list[str]:
    """Every value a row's text gives the LLM-API option ``section.key`` (TensorRT-LLM's
    ``extra_llm_api_options`` YAML as sources write it: dotted ``section.key: v``, a flow map
    ``section: {..., key: v}`` or an indented block under ``section:``)."""
    sec, k = re.escape(section), re.escape(key)
    pat = (rf"\b{sec}\.{k}\s*[:=]\s*([^\s,;}}]+)"
           rf"|\b{sec}\s*:\s*\{{[^{{}}]*?\b{k}\s*:\s*([^\s,;}}]+)"
           rf"|\b{sec}:[ \t]*\n(?:[ \t]+[^\n]*\n)*?[ \t]+{k}:\s*([^\s,;}}]+)")
    return [next(v for v in m if v) for m in re.findall(pat, text, re.IGNORECASE)]


def _option_int(text: str, section: str, key: str, also: tuple = ()) -> int | None:
    """The one positive-integer value of option ``section.key`` (or of the flat keys ``also``)
    in ``text``, None if unstated; a bad or twice-different value is :class:`InputError`."""
    raw = option_values(text, section, key) + [v for a in also for v in _flat_values(text, a)]
    vals = set()
    for r in raw:
        if not (r.isdigit() and 0 < int(r) <= FLAG_MAX):
            raise InputError("row", "notes", f"{section}.{key} must be a positive integer, but got {r!r}")
        vals.add(int(r))
    if len(vals) > 1:
        raise InputError("row", "notes", f"{section}.{key} must be stated once, but got {sorted(vals)}")
    return vals.pop() if vals else None


# TensorRT-LLM attention-DP balancing (LLM API ``attention_dp_config``, defaults enable_balance
# false, timeout_iters 50: ``tensorrt_llm/llmapi/llm_args.py`` AttentionDpConfig): PyExecutor
# ``_balance_adp_requests`` holds every context request until all attention-DP ranks have one,
# counting the iterations in which they do not and releasing what waits when the count reaches
# ``timeout_iters`` (then resetting it).  Under a load whose arrivals rarely cover every rank at
# once that is a release every ``timeout_iters`` iterations: the engine looks at its queue that
# often, as SGLang's ``--scheduler-recv-interval`` (``EngineProfile.recv_interval``).
ADP_BALANCE_TIMEOUT_ITERS = 50


def _adp_balance_interval(text: str) -> int | None:
    """The iterations between the context releases of TensorRT-LLM's attention-DP balancing
    (above) where the row's launch enables it with attention DP on, else None."""
    on = [yaml_bool(v, "attention_dp_config.enable_balance", "row", "notes")
          for v in option_values(text, "attention_dp_config", "enable_balance")]
    if not (on and on[-1] and trt_attention_dp(text)):
        return None
    n = _option_int(text, "attention_dp_config", "timeout_iters")
    return ADP_BALANCE_TIMEOUT_ITERS if n is None else n


def _flat_option(text: str, key: str) -> str | None:
    """The one value of the top-level LLM-API option ``key`` in ``text`` (None if unstated);
    two different values are :class:`InputError`."""
    vals = set(_flat_values(text, key))
    if len(vals) > 1:
        raise InputError("row", "notes", f"{key} must be stated once, but got {sorted(vals)}")
    return vals.pop() if vals else None


def _batch_wait_interval(text: str) -> int | None:
    """TensorRT-LLM's batch waiting without attention DP (LLM API ``batch_wait_timeout_iters``,
    ``batch_wait_max_tokens_ratio``, both 0 = off by default; PyExecutor ``_waiting_requests``):
    while decode requests run, new context requests are held until ``batch_wait_timeout_iters``
    iterations have passed or the iteration's scheduled tokens reach ``ratio x max_num_tokens``
    (with ratio 0 that holds at once, so both must be set).  Under sparse arrivals -- a few
    prompts per timeout, far below the token threshold -- the engine releases context every
    ``batch_wait_timeout_iters`` iterations, which this returns (None where off or with attention
    DP on); at denser arrivals the token threshold releases sooner, so it is an upper bound."""
    raw_t = _flat_option(text, "batch_wait_timeout_iters")
    raw_r = _flat_option(text, "batch_wait_max_tokens_ratio")
    if raw_t is None or trt_attention_dp(text):
        return None
    if not (raw_t.isdigit() and int(raw_t) <= FLAG_MAX):
        raise InputError("row", "notes", f"batch_wait_timeout_iters must be a whole number >= 0, "
                         f"but got {raw_t!r}")
    ratio = _as_float(raw_r, 0.0)
    if not (0.0 <= ratio <= 1.0):
        raise InputError("row", "notes", f"batch_wait_max_tokens_ratio must be a number in [0, 1], "
                         f"but got {raw_r!r}")
    return int(raw_t) if int(raw_t) > 0 and ratio > 0 else None


def launch_texts(row) -> dict:
    """The columns a row states its launch command in: ``engine`` and ``notes``."""
    return {c: str(row.get(c, "")) for c in ("engine", "notes")}


def row_text(row, cols=("engine", "notes")) -> str:
    """The row's ``cols`` joined into one text, for the patterns read across them."""
    return " ".join(str(row.get(c, "")) for c in cols)


def stated_limit(row, key: str, yaml: bool = False) -> int | None:
    """The value of the launch flag ``_LAUNCH[key]`` the row's ``engine`` / ``notes`` state,
    or None; each value must be a positive integer and a flag stated twice must agree
    (:class:`InputError` naming the column).  ``yaml``: the key form of vLLM's ``--config``
    file counts too (:func:`dse.infer.engines.flag_values`; TensorRT-LLM's nested
    ``extra_llm_api_options`` keys are read apart, :func:`_option_int`)."""
    return flag_value(launch_texts(row), _LAUNCH[key], "row", yaml=yaml)


#: TensorRT-LLM's attention window set at launch: ``run.py --max_attention_window_size N``,
#: the LLM API's ``kv_cache_config: max_attention_window: [N, ...]`` (a list, repeated over
#: the layers) or ``kv_cache_config.max_attention_window: N``; group 1 the value as written
_WINDOW = re.compile(r"(?<![-\w])(?:--)?(?:kv_cache_config\.)?max[-_]attention[-_]window(?:[-_]size)?"
                     r"(?![-\w])\s*(?:[:=]\s*|[ \t]+)?(\[[^\]\n]*\]?|[^\s,;}]*)", re.IGNORECASE)


def stated_window(row) -> int | None:
    """The one attention window (tokens) a row's launch states for every layer through
    TensorRT-LLM's ``max_attention_window`` (``_WINDOW``); 0 where it states a per-layer
    list of several windows (``[128, 131072]``, gpt-oss's local / global pattern: a kind
    dse takes from the checkpoint, not from a launch, :func:`dse.infer.engines.served_model`);
    None where it states none.  Each value must be a positive integer <= FLAG_MAX and the
    flag stated twice must agree -- otherwise :class:`InputError` naming the column."""
    got = set()
    for field, text in launch_texts(row).items():
        for m in _WINDOW.finditer(text):
            raw = m.group(1).rstrip(".,;:)")
            items = [x.strip() for x in raw.strip("[]").split(",")] if raw.startswith("[") else [raw]
            bad = [x for x in items if not (x.isdigit() and 0 < int(x) <= FLAG_MAX)]
            if bad:                       # an empty value is one bad item
                raise InputError("row", field, f"max_attention_window must be a positive integer "
                                 f"<= {FLAG_MAX} (or a list of them), but got {raw or 'no value'!r}")
            vals = {int(x) for x in items}
            got.add(vals.pop() if len(vals) == 1 else 0)
    if len(got) > 1:
        raise InputError("row", "notes", f"max_attention_window must be stated once, but got {sorted(got)}")
    return got.pop() if got else None


def _vllm_scheduling(eng: EngineProfile, text: str, engine: str) -> EngineProfile:
    """A vLLM V1 profile with the scheduling the whole launch text states: async scheduling
    named in ``notes`` -- ``--async-scheduling`` on the command line, or ``async-scheduling:
    true`` in the ``--config`` YAML file, whose keys are the CLI arguments' long names (vLLM docs,
    configuration/serve_args.md, "Configuration file": "The argument names must be the long
    form") -- or
    switched off there (``--no-async-scheduling``, ``async-scheduling: false``); the release
    rule of :func:`dse.infer.engines.vllm_async` otherwise.  The row's limits set so far are
    kept; only the fields in which the two V1 profiles differ (the name and whether the host
    step runs beside the GPU pass) are taken from the one the launch names."""
    want = "vllm_v1_async" if vllm_async(text.lower(), version3(engine_text(engine))) else "vllm_v1"
    if want == eng.name:
        return eng
    return replace(eng, **{f: getattr(PROFILES[want], f) for f in _V1_SCHEDULING_FIELDS})


#: the fields in which the two vLLM V1 profiles differ (:func:`_vllm_scheduling`)
_V1_SCHEDULING_FIELDS = tuple(f.name for f in fields(EngineProfile)
                              if getattr(PROFILES["vllm_v1"], f.name) != getattr(PROFILES["vllm_v1_async"], f.name))


def launch_settings(row, eng: EngineProfile, model=None) -> tuple[EngineProfile, float | None]:
    """The engine limits the source's launch command states (``--max_num_tokens``,
    ``--max-num-batched-tokens``, ``--max_batch_size`` / ``--max-num-seqs`` /
    ``--max-running-requests`` / TGI's ``--max-concurrent-requests`` / LMDeploy's
    ``--max-prefill-token-num`` / TGI's ``--max-batch-prefill-tokens`` / SGLang's
    ``--scheduler-recv-interval`` and ``--num-continuous-decode-steps`` (N decode steps per
    scheduling pass, as vLLM's multi-step ``scheduler_steps``), the largest CUDA-graph batch
    (SGLang ``--cuda-graph-max-bs``, vLLM ``--max-cudagraph-capture-size``, TensorRT-LLM
    ``cuda_graph_config`` ``max_batch_size``), each flag also as a key of a vLLM ``--config`` YAML
    file (``max-num-batched-tokens: 8192``, :func:`dse.infer.engines.flag_values`),
    TensorRT-LLM's attention-DP balancing (``attention_dp_config``: a context release every
    ``timeout_iters`` iterations, :func:`_adp_balance_interval`) and batch waiting
    (``batch_wait_timeout_iters``, :func:`_batch_wait_interval`)
    and graphs switched off (``--disable-cuda-graph``, ``--enforce-eager``,
    ``cuda_graph_config: null``), TensorRT-LLM's ``max_attention_window`` (one window for every
    layer, :func:`stated_window`, served by :func:`dse.infer.engines.served_model`), and the KV pool's memory share (:func:`stated_mem_fraction`)
    in ``engine`` or ``notes``) replace the profile's defaults; TGI before 3.0 derives its prefill budget
    from ``--max-input-tokens`` (:func:`dse.infer.tgi.tgi_v2_prefill_tokens`);
    also ``--max-model-len`` (``None`` if not stated; :func:`dse.infer.lockstep.pass_tokens`).
    Each value must be a positive integer (:func:`dse.infer.engines.flag_values`) and a
    limit stated twice must agree.  With ``model`` given and no token budget stated, vLLM
    V0's unchunked budget for MLA models applies (:func:`dse.infer.engines.vllm_v0_mla`,
    ``max(max_model_len, 2048)``)."""
    got = {k: v for k in _LAUNCH if (v := stated_limit(row, k, eng.name.startswith("vllm"))) is not None}
    text, texts = row_text(row), launch_texts(row)
    if eng.name in VLLM_V1_NAMES:
        bool_setting_values(texts, r"async[-_]scheduling")    # a bad value is the row's error
        eng = _vllm_scheduling(eng, text, str(row.get("engine", "")))
    trt_bs = _option_int(text, "cuda_graph_config", "max_batch_size", also=("cuda_graph_max_batch_size",))
    if trt_bs is not None and "graph_max_batch" not in got:
        got["graph_max_batch"] = trt_bs
    adp = _adp_balance_interval(text)
    adp = adp if adp is not None else _batch_wait_interval(text)
    if adp is not None and "recv_interval" not in got:
        got["recv_interval"] = adp
    bool_setting_values(texts, "use_cuda_graph")    # a bad value is the row's error
    if _NO_GRAPHS.search(text):
        got["cuda_graphs"] = False
    window = stated_window(row)
    if window is not None and eng.name.startswith("trtllm"):   # TensorRT-LLM's flag (served_model)
        got["full_window"], got["attention_window"] = False, window   # 0: per-layer, the checkpoint's
    frac = stated_mem_fraction(row)
    if frac is not None and eng.name not in TGI_NAMES:     # TGI sizes its pool otherwise (dse.infer.tgi)
        got["mem_fraction"] = frac
    mml = got.pop("max_model_len", None)
    max_input = got.pop("max_input_tokens", None)
    if model is not None and "max_num_tokens" not in got:
        eng = vllm_v0_mla(eng, str(row.get("engine", "")), model, mml)
    if eng.name == "tgi" and max_input is not None and "max_num_tokens" not in got:
        got["max_num_tokens"] = tgi_v2_prefill_tokens(max_input)
    if got:
        eng = EngineProfile(**{**eng.__dict__, **got})
    return eng, (float(mml) if mml is not None else None)
