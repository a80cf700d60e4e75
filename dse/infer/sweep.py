"""Inference screen: every (hardware, tp, pp, batch) point of one serving replica.

Flow (docs/architecture.md): specs -> arrays of design points -> memory mask -> costs -> DataFrame.

Points: ``tp * pp == gpus_per_replica``; ``tp`` divides ``num_attention_heads`` (KV heads
are replicated when ``tp > num_kv_heads``, :mod:`dse.infer.kv_cache`); ``pp <=
num_layers``; batch in the powers of two up to ``batch`` (and ``batch`` itself).
Memory feasibility runs first over all points (one ``jit(vmap)``), then
:func:`dse.infer.step.inference_step` (one more ``jit(vmap)``) on the feasible ones;
infeasible rows stay with their reason in ``status`` and NaN times.  Both passes run
through the one chunked runner of every sweep (:mod:`dse.sweep.runner`, its padding
policy), so repeated sweeps reuse the compiled functions.
"""

from __future__ import annotations

import jax
import numpy as np
import pandas as pd

from dse.errors import InputError, require
from dse.infer.memory import serving_memory
from dse.infer.step import DECODE_BREAKDOWN, InferenceResult, inference_step
from dse.infer.workload import InferenceWorkload
from dse.spec.hardware import GIB, Hardware
from dse.sweep.run import hardware_columns, oom_status
from dse.sweep.runner import run_chunked
from dse.spec.layout import SERVING_PRECISION_NAMES
from dse.spec.model import Model
from dse.spec.numerics import as_float
from dse.train.memory_parts import MEM_MARGIN, usable_bytes
from dse.cost.rates import rates


def _memory_parts(model, wl, hw, tp, pp):
    """The serving memory breakdown of one point (:func:`dse.infer.memory.serving_memory`)."""
    model, wl, tp, pp = as_float(model, wl, tp, pp)
    return serving_memory(model, wl, tp, pp, rates(hw, wl.precision))

OBJECTIVES = {"tokens_per_s": False, "prefill_s": True, "decode_s_per_token": True}  # ascending?


@jax.jit
def _memory(model, wl, hw, tp, pp):
    return jax.vmap(_memory_parts, in_axes=(None, 0, 0, 0, 0))(model, wl, hw, tp, pp)


@jax.jit
def _time(model, wl, hw, tp, pp):
    return jax.vmap(inference_step, in_axes=(None, 0, 0, 0, 0))(model, wl, hw, tp, pp)


def replica_layouts(model: Model, gpus_per_replica: int) -> list[tuple[int, int]]:
    """Every (tp, pp) with tp * pp == gpus_per_replica, tp | heads, pp <= layers."""
    return [(tp, gpus_per_replica // tp) for tp in range(1, gpus_per_replica + 1)
            if gpus_per_replica % tp == 0 and model.num_attention_heads % tp == 0
            and gpus_per_replica // tp <= model.num_layers]


def batch_sizes(batch: int) -> list[int]:
    """Powers of two up to ``batch``, and ``batch`` itself."""
    out = [1 << i for i in range(batch.bit_length()) if (1 << i) <= batch]
    return out if out[-1] == batch else out + [batch]


def _check(model, hws, gpus_per_replica, batch, prompt_len, gen_len, precision):
    where = "sweep_inference"
    require(len(hws) > 0, where, "hws", "must name at least one hardware spec")
    for name, v, lo in (("gpus_per_replica", gpus_per_replica, 1), ("batch", batch, 1),
                        ("prompt_len", prompt_len, 1), ("gen_len", gen_len, 1)):
        require(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= lo,
                where, name, f"`{name} >= {lo}` must hold (an integer), but got ({name}={v!r})")
    require(precision in SERVING_PRECISION_NAMES, where, "precision",
            f"must be one of {sorted(SERVING_PRECISION_NAMES)} ({SERVING_PRECISION_NAMES}), "
            f"but got {precision!r}")
    if not replica_layouts(model, gpus_per_replica):
        raise InputError(where, "gpus_per_replica",
                         f"`num_attention_heads % tp == 0 and gpus_per_replica / tp <= "
                         f"num_layers` must hold for some tp dividing gpus_per_replica, but "
                         f"got (num_attention_heads={model.num_attention_heads}, num_layers="
                         f"{model.num_layers}, gpus_per_replica={gpus_per_replica})")


def _points(hw_cols, h_idx, tp, pp, bs, prompt_len, gen_len, precision):
    """The argument builder of one padded chunk of inference points (dse.sweep.runner)."""
    def args_for(idx):
        hw = Hardware(**{f: v[h_idx[idx]] for f, v in hw_cols.items()})
        k = len(idx)
        wl = InferenceWorkload(batch=bs[idx].astype(np.float32),
                               prompt_len=np.full(k, prompt_len, np.float32),
                               gen_len=np.full(k, gen_len, np.float32),
                               precision=np.full(k, precision, np.int32))
        return wl, hw, tp[idx].astype(np.float32), pp[idx].astype(np.float32)
    return args_for


def sweep_inference(model: Model, hws: list[Hardware], gpus_per_replica: int, batch: int,
                    prompt_len: int, gen_len: int, precision: int = 1,
                    mem_margin: float = MEM_MARGIN) -> pd.DataFrame:
    """Every (hardware, tp, pp, batch) point as a DataFrame, feasible rows first, each
    group by decreasing ``tokens_per_s``.  Columns: hardware, tp, pp, batch, prefill_s,
    decode_s_per_token, tokens_per_s, mem_gib, feasible, status, plus model,
    prompt_len, gen_len, precision, hbm_gib, kv_gib, weights_gib, the memory breakdown
    (mem_weights_gib, mem_kv_gib, mem_activations_gib, mem_reserve_gib: allocator
    workspace + fragmentation) and the decode breakdown (decode_gemm_s,
    decode_attention_s, decode_comm_s, decode_elementwise_s).  A point is feasible when it
    fits in ``(1 - mem_margin) x HBM`` (:mod:`dse.train.memory_parts`)."""
    _check(model, hws, gpus_per_replica, batch, prompt_len, gen_len, precision)
    hw_cols = hardware_columns(hws)
    lays = replica_layouts(model, gpus_per_replica)
    bss = batch_sizes(batch)
    grid = np.array([(h, tp, pp, b) for h in range(len(hws)) for tp, pp in lays for b in bss],
                    dtype=np.int64)
    h_idx, tp, pp, bs = grid.T
    n = len(grid)
    args_for = _points(hw_cols, h_idx, tp, pp, bs, prompt_len, gen_len, precision)

    parts = run_chunked(lambda *a: _memory(model, *a), args_for, n)
    mem = parts.total_bytes
    cap = hw_cols["hbm_bytes"][h_idx]
    status = np.full(n, "ok", dtype=object)
    no_fp8 = (((precision == 2) & (hw_cols["peak_fp8_flops_per_s"][h_idx] <= 0))
              | ((precision >= 3) & (hw_cols["peak_fp4_flops_per_s"][h_idx] <= 0)))
    oom = mem > usable_bytes(cap, mem_margin)
    for i in np.nonzero(oom)[0]:
        status[i] = oom_status(mem[i], cap[i], mem_margin)
    for i in np.nonzero(no_fp8)[0]:
        status[i] = (f"infeasible: {hws[h_idx[i]].name} has no "
                     f"{'fp8' if precision == 2 else 'fp4'} tensor cores")
    feasible = ~oom & ~no_fp8

    res = {f: np.full(n, np.nan) for f in InferenceResult._fields}
    fi = np.nonzero(feasible)[0]
    if len(fi):
        out = run_chunked(lambda *a: _time(model, *a), lambda idx: args_for(fi[idx]), len(fi))
        for f in InferenceResult._fields:
            res[f][fi] = getattr(out, f)

    df = pd.DataFrame({
        "model": model.name,
        "hardware": np.asarray([h.name for h in hws], dtype=object)[h_idx],
        "tp": tp, "pp": pp, "batch": bs,
        "prompt_len": prompt_len, "gen_len": gen_len,
        "precision": SERVING_PRECISION_NAMES[precision],
        "prefill_s": res["prefill_s"],
        "decode_s_per_token": res["decode_s_per_token"],
        "tokens_per_s": res["tokens_per_s"],
        "mem_gib": mem / GIB,
        "hbm_gib": cap / GIB,
        "kv_gib": res["kv_bytes"] / GIB,
        "weights_gib": res["weights_bytes"] / GIB,
        "mem_weights_gib": parts.weights_bytes / GIB,
        "mem_kv_gib": parts.kv_bytes / GIB,
        "mem_activations_gib": parts.activations_bytes / GIB,
        "mem_reserve_gib": (mem - parts.weights_bytes - parts.kv_bytes - parts.activations_bytes) / GIB,
        "feasible": feasible,
        "status": status,
    })
    for f in DECODE_BREAKDOWN:
        df[f] = res[f]
    return df.sort_values(["feasible", "tokens_per_s"], ascending=[False, False],
                          kind="stable").reset_index(drop=True)


def best_inference(df: pd.DataFrame, objective: str = "tokens_per_s") -> pd.Series | None:
    """The feasible row that is best for ``objective`` (highest ``tokens_per_s``, lowest
    ``prefill_s`` or ``decode_s_per_token``); None when no row is feasible."""
    require(objective in OBJECTIVES, "best_inference", "objective",
            f"must be one of {sorted(OBJECTIVES)}, but got {objective!r}")
    ok = df[df["feasible"]]
    if ok.empty:
        return None
    i = ok[objective].idxmin() if OBJECTIVES[objective] else ok[objective].idxmax()
    return ok.loc[i]
