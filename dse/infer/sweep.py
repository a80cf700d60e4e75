"""Inference screen: every (hardware, tp, pp, batch) point of one serving replica, under
static or continuous batching (``batching``).

Flow (docs/architecture.md): specs -> arrays of design points -> memory mask -> costs -> DataFrame.

Points: ``tp * pp == gpus_per_replica``; ``tp`` divides ``num_attention_heads`` (KV heads
are replicated when ``tp > num_kv_heads``, :mod:`dse.infer.kv_cache`); ``pp <=
num_layers``; batch in the powers of two up to ``batch`` (and ``batch`` itself).
Memory feasibility runs first over all points (one ``jit(vmap)``), then
:func:`dse.infer.step.inference_step` (one more ``jit(vmap)``) on the feasible ones;
infeasible rows stay with their reason in ``status`` and NaN times.  Both passes run
through the one chunked runner of every sweep (:mod:`dse.sweep.runner`, its padding
policy), so repeated sweeps reuse the compiled functions.

``batching = "static"`` (the default of this function; :func:`dse.infer.step.inference_step`):
``batch`` requests are prefilled together and decoded together; TTFT = the batch's
prefill, TPOT = the decode step at the mean context, no engine host time.

``batching = "continuous"`` (the default of ``dse infer`` and the serving study;
:mod:`dse.infer.continuous`): ``batch`` is the number of requests in flight on the
replica (closed loop) under an engine profile (:mod:`dse.infer.engines`; per hardware
by default: TensorRT-LLM on NVIDIA, vLLM on AMD).  A first ``jit(vmap)`` over the
(hardware, tp, pp) layouts computes the KV pool, the KV slots and the tuned running-batch
limit (it does not depend on ``batch``); a second over the points computes the
steady-state mixed iteration (TPOT, with the engine's host time and launch costs), TTFT
(slot wait + scheduling + the prompt's prefill), e2e and output tokens/s.  A point is
infeasible when the KV pool holds no request (the engine's memory policy replaces
``mem_margin`` here) or the precision has no tensor cores.
"""

from __future__ import annotations

from functools import partial

import jax
import numpy as np
import pandas as pd

from dse.spec.study import SERVING_BATCHING
from dse.errors import InputError, require
from dse.infer.continuous import (Continuous, Replica, Slots, concurrency_point,
                                  default_engine, engine_rule, kv_element_bytes, slots)
from dse.infer.engines import PROFILES
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

OBJECTIVES = {"tokens_per_s": False, "prefill_s": True, "decode_s_per_token": True,
              "ttft_s": True, "tpot_s": True}  # ascending?
BATCHING = SERVING_BATCHING          # the one list (dse.spec.study)


@jax.jit
def _memory(model, wl, hw, tp, pp):
    return jax.vmap(_memory_parts, in_axes=(None, 0, 0, 0, 0))(model, wl, hw, tp, pp)


@jax.jit
def _time(model, wl, hw, tp, pp):
    return jax.vmap(inference_step, in_axes=(None, 0, 0, 0, 0))(model, wl, hw, tp, pp)


@partial(jax.jit, static_argnums=0)
def _slots(eng, model, hw, tp, pp, precision, kv_bytes, S, O):
    one = lambda h, t, p: slots(Replica(model, h, t, p, precision, kv_bytes), eng, S, O)
    return jax.vmap(one)(hw, tp, pp)


@partial(jax.jit, static_argnums=0)
def _continuous(eng, model, hw, tp, pp, n, sl, precision, kv_bytes, S, O):
    one = lambda h, t, p, k, s: concurrency_point(Replica(model, h, t, p, precision, kv_bytes),
                                                  eng, k, S, O, s)
    return jax.vmap(one)(hw, tp, pp, n, sl)


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


def _engines(hws: list[Hardware], engine) -> list[str]:
    """The engine profile name per hardware entry (module docstring), checked: ``None``
    (each GPU's default), one name for all, or one name (or None) per hardware entry."""
    if engine is None or isinstance(engine, str):
        engine = [engine] * len(hws)
    require(len(engine) == len(hws), "sweep_inference", "engine",
            f"must name one engine per hardware entry, but got {len(engine)} for {len(hws)}")
    names = [default_engine(h) if e is None else e for h, e in zip(hws, engine)]
    for h, e in zip(hws, names):
        why = engine_rule(e, h)
        if why:
            raise InputError("sweep_inference", "engine", why)
    return names


def sweep_inference(model: Model, hws: list[Hardware], gpus_per_replica: int, batch: int,
                    prompt_len: int, gen_len: int, precision: int = 1,
                    mem_margin: float = MEM_MARGIN, batching: str = "static",
                    engine: str | list | None = None) -> pd.DataFrame:
    """Every (hardware, tp, pp, batch) point as a DataFrame, feasible rows first, each
    group by decreasing ``tokens_per_s``.  Columns in both modes: model, hardware, tp, pp,
    batch (static: the batch; continuous: requests in flight per replica), prompt_len,
    gen_len, precision, batching, ttft_s, tpot_s, e2e_s, output_tok_s (output tokens/s of
    the replica, prefill included), tokens_per_s, mem_gib, hbm_gib, weights_gib, feasible,
    status.  Static adds prefill_s, decode_s_per_token (= ttft_s, tpot_s), tokens_per_s =
    batch / decode_s_per_token, kv_gib, the memory breakdown (mem_weights_gib,
    mem_kv_gib, mem_activations_gib, mem_reserve_gib: allocator workspace +
    fragmentation) and the decode breakdown (decode_gemm_s, decode_attention_s,
    decode_comm_s, decode_elementwise_s); a point is feasible when it fits in ``(1 -
    mem_margin) x HBM`` (:mod:`dse.train.memory_parts`).  Continuous adds engine,
    queue_s (slot wait, inside ttft_s), admitted (running sequences), slots (tuned
    running-batch limit), kv_slots, kv_pool_gib; tokens_per_s = output_tok_s and mem_gib
    is what the admitted requests use."""
    require(batching in BATCHING, "sweep_inference", "batching",
            f"must be one of {list(BATCHING)}, but got {batching!r}")
    _check(model, hws, gpus_per_replica, batch, prompt_len, gen_len, precision)
    engines = _engines(hws, engine) if batching == "continuous" else None
    hw_cols = hardware_columns(hws)
    lays = replica_layouts(model, gpus_per_replica)
    bss = batch_sizes(batch)
    grid = np.array([(h, tp, pp, b) for h in range(len(hws)) for tp, pp in lays for b in bss],
                    dtype=np.int64)
    h_idx, tp, pp, bs = grid.T
    n = len(grid)
    cap = hw_cols["hbm_bytes"][h_idx]
    status = np.full(n, "ok", dtype=object)
    no_fp8 = (((precision == 2) & (hw_cols["peak_fp8_flops_per_s"][h_idx] <= 0))
              | ((precision >= 3) & (hw_cols["peak_fp4_flops_per_s"][h_idx] <= 0)))
    base = {"model": model.name,
            "hardware": np.asarray([h.name for h in hws], dtype=object)[h_idx],
            "tp": tp, "pp": pp, "batch": bs, "prompt_len": prompt_len, "gen_len": gen_len,
            "precision": SERVING_PRECISION_NAMES[precision], "batching": batching}
    if batching == "continuous":
        df = _continuous_frame(model, hw_cols, engines, grid, len(lays), len(bss), prompt_len,
                               gen_len, precision, status, no_fp8, hws, base)
    else:
        df = _static_frame(model, hw_cols, grid, prompt_len, gen_len, precision, mem_margin,
                           status, no_fp8, hws, base)
    df["hbm_gib"] = cap / GIB
    return df.sort_values(["feasible", "tokens_per_s"], ascending=[False, False],
                          kind="stable").reset_index(drop=True)


def _no_fp8_status(status, no_fp8, hws, h_idx, precision):
    for i in np.nonzero(no_fp8)[0]:
        status[i] = (f"infeasible: {hws[h_idx[i]].name} has no "
                     f"{'fp8' if precision == 2 else 'fp4'} tensor cores")


def _static_frame(model, hw_cols, grid, prompt_len, gen_len, precision, mem_margin, status,
                  no_fp8, hws, base) -> pd.DataFrame:
    h_idx, tp, pp, bs = grid.T
    n = len(grid)
    args_for = _points(hw_cols, h_idx, tp, pp, bs, prompt_len, gen_len, precision)
    parts = run_chunked(lambda *a: _memory(model, *a), args_for, n)
    mem = parts.total_bytes
    cap = hw_cols["hbm_bytes"][h_idx]
    oom = mem > usable_bytes(cap, mem_margin)
    for i in np.nonzero(oom)[0]:
        status[i] = oom_status(mem[i], cap[i], mem_margin)
    _no_fp8_status(status, no_fp8, hws, h_idx, precision)
    feasible = ~oom & ~no_fp8

    res = {f: np.full(n, np.nan) for f in InferenceResult._fields}
    fi = np.nonzero(feasible)[0]
    if len(fi):
        out = run_chunked(lambda *a: _time(model, *a), lambda idx: args_for(fi[idx]), len(fi))
        for f in InferenceResult._fields:
            res[f][fi] = getattr(out, f)
    e2e = res["prefill_s"] + (gen_len - 1.0) * res["decode_s_per_token"]
    df = pd.DataFrame({
        **base,
        "prefill_s": res["prefill_s"],
        "decode_s_per_token": res["decode_s_per_token"],
        "tokens_per_s": res["tokens_per_s"],
        "ttft_s": res["prefill_s"], "tpot_s": res["decode_s_per_token"], "e2e_s": e2e,
        "output_tok_s": bs * float(gen_len) / e2e,
        "mem_gib": mem / GIB,
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
    return df


def _continuous_frame(model, hw_cols, engines, grid, n_lays, n_bss, prompt_len, gen_len,
                      precision, status, no_fp8, hws, base) -> pd.DataFrame:
    """Continuous batching (module docstring): layouts first, then points, per engine."""
    h_idx, tp, pp, bs = grid.T
    n = len(grid)
    lay = np.arange(n) // n_bss                 # the (hardware, tp, pp) row of each point
    first = np.arange(0, n, n_bss)              # one point per layout
    S, O = np.float32(prompt_len), np.float32(gen_len)
    f32 = lambda x: np.asarray(x, np.float32)
    sl = {f: np.full(len(first), np.nan) for f in Slots._fields}
    res = {f: np.full(n, np.nan) for f in Continuous._fields}
    eng_of = np.asarray(engines, dtype=object)
    for name in sorted(set(engines)):
        eng = PROFILES[name]
        kvb = np.float32(kv_element_bytes(eng, precision))
        li = np.nonzero(eng_of[h_idx[first]] == name)[0]

        def lay_args(idx, li=li):
            p = first[li[idx]]
            hw = Hardware(**{f: v[h_idx[p]] for f, v in hw_cols.items()})
            return hw, f32(tp[p]), f32(pp[p])
        out = run_chunked(lambda *a: _slots(eng, model, *a, np.int32(precision), kvb, S, O),
                          lay_args, len(li))
        for f in Slots._fields:
            sl[f][li] = getattr(out, f)
        pts = np.nonzero((eng_of[h_idx] == name) & ~no_fp8 & (sl["tuned"][lay] >= 1))[0]
        if not len(pts):
            continue

        def pt_args(idx, pts=pts):
            p = pts[idx]
            hw = Hardware(**{f: v[h_idx[p]] for f, v in hw_cols.items()})
            s = Slots(*(f32(sl[f][lay[p]]) for f in Slots._fields))
            return hw, f32(tp[p]), f32(pp[p]), f32(bs[p]), s
        out = run_chunked(lambda *a: _continuous(eng, model, *a, np.int32(precision), kvb, S, O),
                          pt_args, len(pts))
        for f in Continuous._fields:
            res[f][pts] = getattr(out, f)
    no_kv = sl["tuned"][lay] < 1
    for i in np.nonzero(no_kv)[0]:
        status[i] = (f"infeasible: the weights ({sl['weights_bytes'][lay[i]] / GIB:.1f} GiB per GPU) "
                     f"leave no KV cache for one request under {engines[h_idx[i]]} (KV pool "
                     f"{max(sl['kv_pool_bytes'][lay[i]], 0.0) / GIB:.1f} GiB)")
    _no_fp8_status(status, no_fp8, hws, h_idx, precision)
    feasible = ~no_kv & ~no_fp8
    return pd.DataFrame({
        **base,
        "engine": eng_of[h_idx],
        "ttft_s": res["ttft_s"], "tpot_s": res["tpot_s"], "e2e_s": res["e2e_s"],
        "queue_s": res["queue_s"],
        "output_tok_s": res["tokens_per_s"], "tokens_per_s": res["tokens_per_s"],
        "admitted": res["admitted"], "slots": sl["tuned"][lay], "kv_slots": sl["kv_slots"][lay],
        "mem_gib": np.where(feasible, res["mem_bytes"], np.nan) / GIB,
        "kv_pool_gib": sl["kv_pool_bytes"][lay] / GIB,
        "weights_gib": sl["weights_bytes"][lay] / GIB,
        "feasible": feasible,
        "status": status,
    })


def best_inference(df: pd.DataFrame, objective: str = "tokens_per_s") -> pd.Series | None:
    """The feasible row that is best for ``objective`` (highest ``tokens_per_s``, lowest
    ``prefill_s`` or ``decode_s_per_token``); None when no row is feasible."""
    have = sorted(o for o in OBJECTIVES if o in df.columns)
    require(objective in have, "best_inference", "objective",
            f"must be one of {have}, but got {objective!r}")
    ok = df[df["feasible"]]
    if ok.empty:
        return None
    i = ok[objective].idxmin() if OBJECTIVES[objective] else ok[objective].idxmax()
    return ok.loc[i]
