"""Attention data parallelism and expert parallelism read from a row's launch command, for
rows in the calibration schema, which has no ``attn_dp`` column and often no ``ep``: each
engine writes these layouts in its own flags, and its ``--tp`` means something different
under attention DP.

* **SGLang** (``python/sglang/srt/server_args.py``): ``--enable-dp-attention`` with
  ``--dp-size N`` (``--dp N``) runs attention on N data-parallel ranks of ``tp / N`` GPUs
  each -- ``--tp`` counts every GPU of the replica; ``--ep-size N`` (``--ep N``), or
  ``--enable-ep-moe`` / ``--enable-deepep-moe`` / ``--moe-a2a-backend deepep`` without a
  size (the EP size then defaults to the TP size), splits the experts over N GPUs.
* **TensorRT-LLM** (LLM API ``enable_attention_dp``, ``trtllm-serve`` / ``trtllm-bench``
  ``--ep_size``; the perf-overview's "DEP*n*" = ``--tp n --ep n`` with
  ``enable_attention_dp``): attention DP over the ``tp_size`` ranks, each rank's attention
  unsplit (TP 1); ``--ep_size N`` / ``moe_expert_parallel_size: N`` splits the experts;
  "TEP*n*" is TP *n* with EP *n*.
* **vLLM** (``vllm/engine/arg_utils.py``): ``--data-parallel-size N`` (``-dp N``) runs N
  attention ranks of ``--tensor-parallel-size`` GPUs each -- the replica has ``tp x N``
  GPUs -- and ``--enable-expert-parallel`` turns the (DP x TP) MoE group from TP into EP
  (EP = ``tp x N``; without it the experts are TP-split over the group).

The predictor's columns are ``tp`` = GPUs of one attention rank, ``attn_dp`` = attention
ranks, ``ep`` = EP degree, ``gpus = replicas x tp x attn_dp x pp``
(:mod:`dse.infer.predict_rows`).  A row's ``tp`` is the engine's flag as the source
wrote it: SGLang's and TensorRT-LLM's count the whole replica and are divided by the
attention ranks, vLLM's counts one rank.  Only blank columns are filled; a column the row
states wins (the row is then read as written).
"""

from __future__ import annotations

import re

from dse.infer.engines import YAML_FALSE_RE, bool_setting_values, flag_value

_SGLANG_DPA = re.compile(r"--enable[-_]dp[-_]attention\b", re.IGNORECASE)
_SGLANG_EP_ON = re.compile(r"--enable[-_](?:deepep[-_])?(?:ep[-_])?moe\b|--moe[-_]a2a[-_]backend[ =]+deepep\b",
                           re.IGNORECASE)
_TRT_DPA = re.compile(r"enable_attention_dp\b(?!\s*[:=]\s*" + YAML_FALSE_RE + ")", re.IGNORECASE)
_DEP = re.compile(r"(?<![A-Za-z])(DEP|TEP)\s*(\d+)\b")
_YAML_EP = re.compile(r"\bmoe_expert_parallel_size\s*[:=]\s*(\d+)\b")
_VLLM_EP = re.compile(r"--enable[-_]expert[-_]parallel\b", re.IGNORECASE)


def trt_attention_dp(text: str) -> bool:
    """Whether ``text`` turns on TensorRT-LLM's attention DP (``enable_attention_dp``, not
    ``: false``)."""
    return bool(_TRT_DPA.search(text))


def stated_layout(engine: str, texts: dict, gpus: int, tp: int | None, pp: int,
                  ep: int | None, dp: int | None) -> tuple[int | None, int | None, int | None, str]:
    """``(tp, ep, attn_dp, how)`` of a row after its launch flags (module docstring):
    ``engine`` the profile name, ``texts`` the row's launch columns (field -> text: engine,
    notes; a flag's value is read by :func:`dse.infer.engines.flag_value`), ``tp`` / ``ep``
    / ``dp`` its columns (None = blank).  ``how`` says what was read ("" if nothing)."""
    text = " ".join(texts.values())
    bool_setting_values(texts, "enable_attention_dp")        # a bad value is the row's error
    how = []
    if engine.startswith("sglang"):
        n = flag_value(texts, r"dp(?:[-_]size)?", "row")
        if dp is None and n and n > 1 and _SGLANG_DPA.search(text):
            tp, dp = _per_rank(tp, n, gpus, pp)
            how.append(f"--enable-dp-attention --dp-size {n}")
        m = flag_value(texts, r"ep(?:[-_]size)?", "row")
        if ep is None and (m or _SGLANG_EP_ON.search(text)):
            ep = m or (tp or 1) * (dp or 1)
            how.append(f"EP {ep}")
    elif engine.startswith("trtllm"):
        d = _DEP.search(text)
        if d and dp is None and ep is None:
            n = int(d.group(2))
            tp, dp, ep = (1, n, n) if d.group(1) == "DEP" else (n, 1, n)
            how.append(f"{d.group(1)}{n}")
        ranks = tp if tp is not None else gpus // max(pp, 1)     # tp_size counts every rank
        if dp is None and _TRT_DPA.search(text) and ranks > 1:
            tp, dp = 1, ranks
            how.append("enable_attention_dp")
        m = flag_value(texts, r"ep(?:[-_]size)?", "row")
        y = _YAML_EP.findall(text)
        m = m or (int(y[0]) if y else None)
        if ep is None and m:
            ep = m
            how.append(f"EP {ep}")
    elif engine.startswith("vllm"):
        n = flag_value(texts, r"data[-_]parallel[-_]size|dp", "row", dashes="(?:--|-)")
        if dp is None and n and n > 1:
            tp, dp = _per_rank(tp, n, gpus, pp, counts_all=False)
            how.append(f"--data-parallel-size {n}")
        if ep is None and _VLLM_EP.search(text):
            ep = (tp or 1) * (dp or 1)
            how.append(f"--enable-expert-parallel (EP {ep})")
    return tp, ep, dp, "; ".join(how)


def _per_rank(tp: int | None, n: int, gpus: int, pp: int, counts_all: bool = True) -> tuple[int | None, int]:
    """``(GPUs per attention rank, n)``: the engine's ``tp`` counts every GPU of the
    replica (``counts_all``: SGLang's ``--tp``, which must be a multiple of ``--dp-size``)
    and is divided by ``n``, or one rank's (vLLM's ``--tensor-parallel-size``) and stays;
    blank, the replica's ``gpus / pp`` split into ``n`` ranks."""
    if tp is None:
        return max(gpus // (n * pp), 1), n
    if counts_all and tp % n == 0:
        return tp // n, n
    return tp, n
