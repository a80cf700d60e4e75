"""Where one serving iteration's time goes: the steady decode-only iteration of a replica,
split by operator kind -- the reduction of the same operator graph the serving model
costs (:func:`dse.infer.forward.stage_time`), not a second model.

For ``b`` running sequences per attention rank at mean context ``c`` (the steady state of
:mod:`dse.infer.continuous`: ``c = S + O/2``), ``m = min(b, pp)`` micro-batches:

    gemm, attention, comm, elementwise = pp x OpTimes(one stage pass of b/m sequences)
    host = iteration - (gemm + attention + comm + elementwise)
    iteration = :func:`dse.infer.serving.iteration_s` (b, c)

* ``attention`` is the decode attention core: the KV-cache read of every running
  sequence (:class:`dse.graph.ops.KVRead`), the part that grows with context and batch;
* ``gemm`` the linears (weight stream at small batch, tensor cores at large), MoE
  experts included; ``comm`` the TP all-reduces / attention-DP gathers and the pipeline
  hand-off; ``elementwise`` norms, rotary, activation, KV append, routing passes and the
  embedding / LM head's memory passes; each kind carries its kernels' launch gaps (CUDA
  graph replay or not, :meth:`dse.infer.engines.EngineProfile.graph_replay`);
* ``host`` is what the engine adds on the host and does not hide: the per-iteration and
  per-sequence scheduling time (:meth:`dse.infer.engines.EngineProfile.with_host_s`:
  all of it when serial, only the excess over the GPU pass with an overlap scheduler),
  the eager issue floor of a pass that is not a graph replay, and with ``pp`` > 1 the
  per-micro-batch host work of :func:`dse.infer.pipeline.pipelined_iteration_s`.

Sum: no overlap between kinds (one stream), so the five parts add up to the iteration
exactly.  The decode-only iteration is not the time per output token of a mixing
engine, whose TPOT also carries the prompt passes of new requests
(:func:`dse.infer.continuous.steady_cycle`); callers show both.

**One prompt's prefill** (:func:`prefill_breakdown`), the compute part of TTFT: the static
prefill pass of a single ``S``-token prompt, :func:`dse.infer.serving.prefill_s` with batch 1
(``pp`` stage passes, no CUDA graph, the engine's host time), split the same way with
``attention`` the causal attention core over the prompt (:func:`dse.infer.prefill.
prefill_attention`, at the engine's context-attention rate). It is what a prompt costs
alone: the TTFT a row predicts adds the wait for the running pass, the slot queue and, on
engines that chunk or mix, the decode tokens sharing its passes.

Units: seconds; scalars in, floats out (a few selected points, on the host).
"""

from __future__ import annotations

from typing import NamedTuple

import jax

from dse.cost.rates import rates
from dse.infer.continuous import kv_element_bytes
from dse.infer.engines import PROFILES, served_model
from dse.infer.forward import OpTimes, context_attention_rates, stage_time
from dse.infer.prefill import prefill_attention
from dse.infer.serving import (Deployment, _hw_for, decode_attention, iteration_s, prefill_s,
                               stage_micro_batches)
from dse.spec.hardware import Hardware
from dse.spec.model import Model

KINDS = ("gemm_s", "attention_s", "comm_s", "elementwise_s", "host_s")


class DecodeBreakdown(NamedTuple):
    """Seconds of one steady decode-only iteration by kind (module docstring); the five
    parts sum to ``iteration_s``."""
    gemm_s: float
    attention_s: float
    comm_s: float
    elementwise_s: float
    host_s: float
    iteration_s: float


@jax.jit
def _stage_kinds(model: Model, hw: Hardware, precision, tokens, sequences, att, tp, pp, ep, dp,
                 linear_bw_scale, quant_kernels, fp8_attn) -> OpTimes:
    """OpTimes of one stage pass of ``tokens`` tokens in ``sequences`` sequences with the
    attention ``att`` (a decode :class:`~dse.graph.ops.KVRead`, or a prompt's
    :class:`~dse.graph.ops.Attention` at the engine's context-attention rate, ``fp8_attn``),
    as :func:`dse.infer.serving._pass_s` costs it (one compile for every point: all
    arguments are leaves)."""
    r = rates(hw, precision)
    return stage_time(model, tokens, sequences, att, tp, pp, precision, hw, r, ep, dp,
                      linear_bw_scale, None, quant_kernels,
                      context_attention_rates(r, precision, fp8_attn))


def decode_breakdown(dep: Deployment, batch: float, context: float) -> DecodeBreakdown:
    """The decode-only iteration of ``batch`` running sequences per attention rank at mean
    KV length ``context`` tokens, by kind (module docstring)."""
    b = float(batch)
    if not (b >= 1.0 and context >= 1.0):
        raise ValueError(f"`batch >= 1 and context >= 1` must hold, but got (batch={batch}, context={context})")
    hw = _hw_for(dep, dep.engine.graph_replay(b, 0.0))
    bs = b / stage_micro_batches(dep, b)
    kinds = _stage_kinds(dep.model, hw, dep.precision, bs, bs,
                         decode_attention(dep, bs, float(context)), dep.tp, dep.pp, dep.ep, dep.dp,
                         dep.engine.linear_bw_eff, dep.engine.quant_kernels, 0.0)
    gpu = [float(x) * dep.pp for x in kinds]
    total = float(iteration_s(dep, b, float(context)))
    return DecodeBreakdown(*gpu, max(total - sum(gpu), 0.0), total)


class PrefillBreakdown(NamedTuple):
    """Seconds of one prompt's static prefill pass by kind (module docstring); the five
    parts sum to ``prefill_s``."""
    gemm_s: float
    attention_s: float
    comm_s: float
    elementwise_s: float
    host_s: float
    prefill_s: float


def prefill_breakdown(dep: Deployment, prompt_len: float) -> PrefillBreakdown:
    """The static prefill pass of one ``prompt_len``-token prompt by kind (module
    docstring): ``pp`` stage passes, and the engine's host time and eager issue floor as
    the rest of :func:`dse.infer.serving.prefill_s`."""
    S = float(prompt_len)
    if not S >= 1.0:
        raise ValueError(f"`prompt_len >= 1` must hold, but got {prompt_len!r}")
    eng = dep.engine
    kinds = _stage_kinds(dep.model, _hw_for(dep, False), dep.precision, S, 1.0,
                         prefill_attention(dep.model, 1.0, S, dep.tp), dep.tp, dep.pp, dep.ep,
                         dep.dp, eng.linear_bw_eff, eng.quant_kernels, eng.fp8_context_attn)
    gpu = [float(x) * dep.pp for x in kinds]
    total = float(prefill_s(dep, 1.0, S))
    return PrefillBreakdown(*gpu, max(total - sum(gpu), 0.0), total)


def _getter(row):
    """A row's field reader: a mapping (a DataFrame row) or a namedtuple (``itertuples``)."""
    return row.get if hasattr(row, "get") else (lambda k: getattr(row, k))


def row_deployment(model: Model, hw: Hardware, row, precision: int, engine=None) -> Deployment:
    """The replica of one continuous-batching point of the serving sweep
    (:func:`dse.infer.sweep.sweep_inference` columns ``engine``, ``tp``, ``pp``, ``ep``,
    ``attn_dp``; a mapping or a namedtuple), the engine's KV element size at ``precision``.
    ``engine``: the launched profile the sweep ran
    (:func:`dse.infer.continuous.launched_engine`); None takes the row's profile as the
    catalog has it."""
    get = _getter(row)
    eng = engine if engine is not None else PROFILES[get("engine")]
    return Deployment(served_model(model, eng), hw, eng, int(get("tp")), int(get("pp")), precision,
                      kv_element_bytes(eng, precision), int(get("ep")), int(get("attn_dp")))


def row_breakdown(model: Model, hw: Hardware, row, precision: int, context: float,
                  engine=None) -> DecodeBreakdown:
    """:func:`decode_breakdown` of one continuous-batching point of the serving sweep
    (:func:`row_deployment`; column ``admitted`` too) at its admitted batch per attention
    rank."""
    dep = row_deployment(model, hw, row, precision, engine)
    return decode_breakdown(dep, float(_getter(row)("admitted")) / dep.dp, context)


LABELS = {"gemm_s": "GEMM (linears, experts)", "attention_s": "attention (KV-cache read)",
          "comm_s": "communication", "elementwise_s": "element-wise", "host_s": "host (not hidden)"}
#: a prefill pass's attention is the causal core over the prompt, not a KV-cache read
PREFILL_LABELS = {**LABELS, "attention_s": "attention (prompt, causal)"}


def breakdown_lines(parts: dict, total_s: float, what: str = "iteration",
                    labels: dict = LABELS) -> list[str]:
    """The table of a pass's ``parts`` (kind -> seconds, ``labels`` keys: :data:`LABELS` for
    a decode iteration, :data:`PREFILL_LABELS` for a prefill pass, ``what``) with each
    kind's share of ``total_s``, and one sentence naming the largest part -- computed from
    the numbers, never a fixed verdict."""
    if not total_s > 0:
        raise ValueError(f"`total_s > 0` must hold, but got {total_s!r}")
    lines = [f"  {'kind':<28}{'ms':>10}{'share':>8}"]
    for k, v in parts.items():
        lines.append(f"  {labels[k]:<28}{v * 1e3:>10.3f}{v / total_s:>8.1%}")
    lines.append(f"  {'total':<28}{total_s * 1e3:>10.3f}{sum(parts.values()) / total_s:>8.1%}")
    (big, v1), *rest = sorted(parts.items(), key=lambda kv: kv[1], reverse=True)
    nxt = (f" ({v1 / rest[0][1]:.1f}x the next, {labels[rest[0][0]]})." if rest and rest[0][1] > 0 else ".")
    lines.append(f"  The largest part is {labels[big]}, {v1 / total_s:.0%} of the {what}" + nxt)
    return lines
