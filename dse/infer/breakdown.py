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

Units: seconds; scalars in, floats out (a few selected points, on the host).
"""

from __future__ import annotations

from typing import NamedTuple

import jax

from dse.cost.rates import rates
from dse.graph.ops import KVRead
from dse.infer.continuous import kv_element_bytes
from dse.infer.engines import PROFILES, served_model
from dse.infer.forward import OpTimes, stage_time
from dse.infer.serving import (Deployment, _hw_for, decode_attention, iteration_s,
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
def _stage_kinds(model: Model, hw: Hardware, precision, sequences, att: KVRead, tp, pp, ep, dp,
                 linear_bw_scale, quant_kernels=0.0) -> OpTimes:
    """OpTimes of one decode stage pass of ``sequences`` sequences (one compile for every
    point: all arguments are leaves)."""
    return stage_time(model, sequences, sequences, att, tp, pp, precision, hw,
                      rates(hw, precision), ep, dp, linear_bw_scale, None, quant_kernels)


def decode_breakdown(dep: Deployment, batch: float, context: float) -> DecodeBreakdown:
    """The decode-only iteration of ``batch`` running sequences per attention rank at mean
    KV length ``context`` tokens, by kind (module docstring)."""
    b = float(batch)
    if not (b >= 1.0 and context >= 1.0):
        raise ValueError(f"`batch >= 1 and context >= 1` must hold, but got (batch={batch}, context={context})")
    hw = _hw_for(dep, dep.engine.graph_replay(b, 0.0))
    bs = b / stage_micro_batches(dep, b)
    kinds = _stage_kinds(dep.model, hw, dep.precision, bs, decode_attention(dep, bs, float(context)),
                         dep.tp, dep.pp, dep.ep, dep.dp, dep.engine.linear_bw_eff,
                         dep.engine.quant_kernels)
    gpu = [float(x) * dep.pp for x in kinds]
    total = float(iteration_s(dep, b, float(context)))
    return DecodeBreakdown(*gpu, max(total - sum(gpu), 0.0), total)


def row_breakdown(model: Model, hw: Hardware, row, precision: int, context: float,
                  engine=None) -> DecodeBreakdown:
    """:func:`decode_breakdown` of one continuous-batching point of the serving sweep
    (:func:`dse.infer.sweep.sweep_inference` columns ``engine``, ``tp``, ``pp``, ``ep``,
    ``attn_dp``, ``admitted``; a mapping or a namedtuple): its replica at the admitted
    batch per attention rank, the engine's KV element size at ``precision``.  ``engine``:
    the launched profile the sweep ran (:func:`dse.infer.continuous.launched_engine`); None
    takes the row's profile as the catalog has it."""
    get = row.get if hasattr(row, "get") else (lambda k: getattr(row, k))
    eng = engine if engine is not None else PROFILES[get("engine")]
    dp = int(get("attn_dp"))
    dep = Deployment(served_model(model, eng), hw, eng, int(get("tp")), int(get("pp")), precision,
                     kv_element_bytes(eng, precision), int(get("ep")), dp)
    return decode_breakdown(dep, float(get("admitted")) / dp, context)


LABELS = {"gemm_s": "GEMM (linears, experts)", "attention_s": "attention (KV-cache read)",
          "comm_s": "communication", "elementwise_s": "element-wise", "host_s": "host (not hidden)"}


def breakdown_lines(parts: dict, total_s: float) -> list[str]:
    """The table of a decode iteration's ``parts`` (kind -> seconds, :data:`LABELS` keys)
    with each kind's share of ``total_s``, and one sentence naming the largest part --
    computed from the numbers, never a fixed verdict."""
    if not total_s > 0:
        raise ValueError(f"`total_s > 0` must hold, but got {total_s!r}")
    lines = [f"  {'kind':<28}{'ms':>10}{'share':>8}"]
    for k, v in parts.items():
        lines.append(f"  {LABELS[k]:<28}{v * 1e3:>10.3f}{v / total_s:>8.1%}")
    lines.append(f"  {'total':<28}{total_s * 1e3:>10.3f}{sum(parts.values()) / total_s:>8.1%}")
    (big, v1), *rest = sorted(parts.items(), key=lambda kv: kv[1], reverse=True)
    nxt = (f" ({v1 / rest[0][1]:.1f}x the next, {LABELS[rest[0][0]]})." if rest and rest[0][1] > 0 else ".")
    lines.append(f"  The largest part is {LABELS[big]}, {v1 / total_s:.0%} of the iteration" + nxt)
    return lines
