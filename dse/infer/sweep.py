"""Inference screen: every (hardware, layout, batch) point of one serving replica, under
static or continuous batching (``batching``).

Flow (docs/architecture.md): specs -> arrays of design points -> costs -> masks -> DataFrame.

Layouts: ``(tp, pp, ep, attn_dp)`` with ``tp * attn_dp * pp == gpus_per_replica`` from
the serving layout rules (:func:`dse.infer.expert_parallel.serving_layouts`,
:func:`dse.spec.layout_rules.serving_layout_violations`): ``tp`` divides
``num_attention_heads`` (KV heads are replicated when ``tp > num_kv_heads``,
:mod:`dse.infer.kv_cache`), ``pp <= num_layers``; MoE models may split the experts over
``ep`` GPUs and run attention data-parallel over ``attn_dp`` ranks (default ``ep =
attn_dp = 1``, the layouts before EP; under either batching, ``batch / attn_dp`` requests
per attention rank).  Batch: the powers of two up
to ``batch`` (and ``batch`` itself), or an explicit list.

**Static batching: one call.**  The grid is (hardware x layout) rows times the batch
axis.  Each row's hardware and layout work runs once per row and every batch of the row
in the same program: ``jit(vmap_rows(vmap_batches(...)))``; ``vmap`` maps only what
depends on its axis, so the row-level terms (rates, weights) are not repeated per batch.
Padding policy (fixed, so repeated sweeps reuse the compiled programs): the batch axis to
the next power of two (at least :data:`MIN_BATCH_PAD`) by repeating its last value, the
rows by the one chunked runner of every sweep (:mod:`dse.sweep.runner`: powers of 8, at
most :data:`POINTS_PER_CHUNK` points per chunk).  The frame is built from numpy columns
(status as codes into a message table, string columns by one take) and ordered with one
stable argsort.

**Continuous batching: distinct batches.**  Two programs per engine profile and
attention-DP group (below; the engine's branches are static), each through the chunked
runner: (1) per layout row, the KV slots and the
tuned running-batch limit ``B*`` (:func:`dse.infer.continuous.slots`); (2) per distinct
(row, admitted batch ``B = min(n, B*)``, status) pair (:func:`distinct_batches`), the
iteration, TTFT, run time and memory of ``B`` admitted requests
(:func:`dse.infer.continuous.admitted_point`, the expensive part), the pair's row
gathered from the engine's row tables on the device.  Every concurrency from ``B*`` up
admits ``B*`` and repeats that iteration, so a row whose concurrency axis runs past its
limit costs ``B*`` evaluations, not one per concurrency (the serving-search benchmark:
835,584 points, 444,030 pairs).  The frame is ordered at pair level (a pair's points are
consecutive in grid order and share feasibility and tokens/s, so this is the stable
point-level order) and each pair is then spread over its concurrencies in that order
with the slot wait on top (:func:`dse.infer.continuous.queued_point`, numpy float32): the
per-point columns are written once, already ordered.

**Attention-DP groups.**  The layout rows of an engine are run as two calls, the rows
with ``attn_dp`` = 1 and those with ``attn_dp`` > 1 (:func:`_replica`), so each program
traces only its branch of :func:`dse.infer.continuous.cycle`
(:func:`dse.infer.continuous.attn_dp_case`): with the group unknown a mixing engine's
pair costs the single-rank iteration and the two lattice iterations of the busiest DP
rank and keeps one, per point.  Same numbers; the serving-search benchmark
(:func:`dse.bench.run_serving_search_bench`) went from 1.06 M to 2.4-2.6 M points/s on one
2-core machine in one session (README, "Speed").

**Compile options.**  On the CPU backend a continuous-batching call of at most
:data:`FAST_COMPILE_POINTS` (row, concurrency) points per engine and group (a serving study's grid)
compiles its programs with LLVM's optimizations off (``xla_backend_optimization_level =
0``), its pairs in one chunk of that size (one shape per engine profile): there the
compile is the cost, seconds per engine profile, and the run milliseconds.  The slots
program (rows x 5 candidate batches, a few hundred rows at most) always compiles so on
the CPU.  Larger calls (the serving-search benchmark's 32768-pair chunks, whose run is
7x slower unoptimized), static batching and every GPU compile keep XLA's defaults.
Results agree to float32 rounding (relative 1e-7).  The calls of one step (an engine and
attention-DP group each, so each its own program) are dispatched from a thread each
(:func:`dse.sweep.runner.run_concurrently`): their XLA compiles run side by side
(the serving study, cold cache, 2 cores: 72 -> 57 s; same output).

``batching = "static"`` (the default of this function; :func:`dse.infer.step.inference_step`):
``batch`` requests are prefilled together and decoded together; TTFT = the batch's
prefill, TPOT = the decode step at the mean context, no engine host time; a point is
feasible when its memory fits (the time of an infeasible point is computed and dropped:
NaN).

``batching = "continuous"`` (the default of ``dse infer`` and the serving study;
:mod:`dse.infer.continuous`): ``batch`` is the number of requests in flight on the
replica (closed loop), ``batch / attn_dp`` per attention rank, under an engine profile
(:mod:`dse.infer.engines`; per hardware by default: TensorRT-LLM on NVIDIA, vLLM on
AMD).  Per row: the KV pool, the KV slots and the tuned running-batch limit; per point:
the steady-state mixed iteration (TPOT, with the engine's host time and launch costs),
TTFT (slot wait + scheduling + the prompt's prefill), e2e and output tokens/s (the
replica's: ``attn_dp`` ranks).  A point is infeasible when the KV pool holds no request
(the engine's memory policy replaces ``mem_margin`` here), the precision has no tensor
cores, or fewer requests are in flight than attention-DP ranks.
"""

from __future__ import annotations


import jax
from typing import NamedTuple

import numpy as np
import pandas as pd

from dse.spec.study import SERVING_BATCHING
from dse.errors import InputError, require
from dse.infer.continuous import (Admitted, Replica, Slots, admitted_point,
                                  default_engine, launched_engine, kv_element_bytes, queued_point,
                                  slots)
from dse.infer.engines import served_model
from dse.infer.kv_reason import no_admission_reason
from dse.infer.expert_parallel import experts_per_gpu, serving_layouts
from dse.infer.memory import serving_memory
from dse.infer.step import DECODE_BREAKDOWN, InferenceResult, inference_step
from dse.infer.workload import InferenceWorkload
from dse.spec.hardware import GIB, Hardware
from dse.sweep.run import oom_status
from dse.sweep.runner import (chunk_size, collect_chunked, dispatch_chunked, pad_index, run_chunked,
                              run_concurrently)
from dse.spec.layout import SERVING_PRECISION_NAMES
from dse.spec.model import Model
from dse.spec.numerics import as_float
from dse.train.memory_parts import MEM_MARGIN, usable_bytes
from dse.cost.rates import rates


def _memory_parts(model, wl, hw, tp, pp, ep=1, dp=1):
    """The serving memory breakdown of one point (:func:`dse.infer.memory.serving_memory`)."""
    model, wl, tp, pp, ep, dp = as_float(model, wl, tp, pp, ep, dp)
    return serving_memory(model, wl, tp, pp, rates(hw, wl.precision), ep, dp)

OBJECTIVES = {"tokens_per_s": False, "prefill_s": True, "decode_s_per_token": True,
              "ttft_s": True, "tpot_s": True}  # ascending?
BATCHING = SERVING_BATCHING          # the one list (dse.spec.study)
MIN_BATCH_PAD = 8                    # the batch axis is padded to a power of two >= this
POINTS_PER_CHUNK = 1 << 15           # layout rows per chunk: this many points / padded batches
FAST_COMPILE_POINTS = 1 << 12        # CPU calls up to this many points per engine: FAST_COMPILE
FAST_COMPILE = {"xla_backend_optimization_level": 0}   # XLA:CPU, LLVM's optimizations off


def _static(model, hw, tp, pp, ep, dp, bs, S, O, precision):
    """Memory breakdown and :func:`dse.infer.step.inference_step` of a chunk of layout
    rows (``hw``, ``tp``, ``pp``, ``ep``, ``dp``: one entry per row) at every batch of
    ``bs`` (the replica's, shared by every row; ``bs / dp`` per attention rank): outputs
    ``[rows, batches]``, per rank.  Work that does not depend on the batch runs once per
    row (``vmap`` maps only what depends on the mapped axis)."""
    def row(h, t, p, e, d):
        def point(b):
            wl = InferenceWorkload(batch=b / d, prompt_len=S, gen_len=O, precision=precision)
            return _memory_parts(model, wl, h, t, p, e, d), inference_step(model, wl, h, t, p, e, d)
        return jax.vmap(point)(bs)
    return jax.vmap(row)(hw, tp, pp, ep, dp)


def _replica(model, precision, kv_bytes, dp_group, h, t, p, e, d) -> Replica:
    """One row's :class:`dse.infer.continuous.Replica` in a program of attention-DP group
    ``dp_group`` (static; module docstring, "Attention-DP groups"): ``"one"`` every row's
    dp is 1 (a Python 1.0, so :func:`dse.infer.continuous.cycle` traces the single-rank
    branch only), ``"many"`` every row's dp > 1 (the lattice branch only)."""
    if dp_group == "one":
        return Replica(model, h, t, p, precision, kv_bytes, e, 1.0)
    return Replica(model, h, t, p, precision, kv_bytes, e, d, dp_many=dp_group == "many")


def _row_slots(eng, dp_group, model, hw, tp, pp, ep, dp, precision, kv_bytes, S, O):
    """The KV slots and tuned running-batch limit of a chunk of layout rows (one entry per
    row of ``hw``, ``tp``, ``pp``, ``ep``, ``dp``; attention-DP group ``dp_group``,
    :func:`_replica`): :func:`dse.infer.continuous.slots`."""
    return jax.vmap(lambda h, t, p, e, d: slots(
        _replica(model, precision, kv_bytes, dp_group, h, t, p, e, d), eng, S, O))(hw, tp, pp, ep, dp)


def _admitted(eng, dp_group, model, hw, tp, pp, ep, dp, sl, row, B, precision, kv_bytes, S, O):
    """:func:`dse.infer.continuous.admitted_point` of a chunk of (layout row, distinct
    admitted batch) pairs: ``row`` and ``B`` one entry per pair, the row's index into the
    row tables ``hw``, ``tp``, ``pp``, ``ep``, ``dp`` and ``sl`` (its
    :class:`dse.infer.continuous.Slots`), gathered here, on the device; every row of
    attention-DP group ``dp_group`` (:func:`_replica`)."""
    hw, tp, pp, ep, dp, sl = jax.tree_util.tree_map(lambda x: x[row], (hw, tp, pp, ep, dp, sl))
    return jax.vmap(lambda h, t, p, e, d, s, b: admitted_point(
        _replica(model, precision, kv_bytes, dp_group, h, t, p, e, d), eng, b, S, O, s))(
            hw, tp, pp, ep, dp, sl, B)


_static_jit = jax.jit(_static)
#: the continuous-batching programs (module docstring, "Compile options"), each as
#: (XLA's defaults, :data:`FAST_COMPILE`); the engine and the attention-DP group static
_SLOTS = (jax.jit(_row_slots, static_argnums=(0, 1)),
          jax.jit(_row_slots, static_argnums=(0, 1), compiler_options=FAST_COMPILE))
_ADMITTED = (jax.jit(_admitted, static_argnums=(0, 1)),
             jax.jit(_admitted, static_argnums=(0, 1), compiler_options=FAST_COMPILE))


def _fast_compile(n_points: int) -> bool:
    """Whether a continuous-batching call of ``n_points`` (row, concurrency) points per
    engine compiles its pair program with :data:`FAST_COMPILE` (module docstring, "Compile
    options")."""
    return n_points <= FAST_COMPILE_POINTS and jax.default_backend() == "cpu"


class Pairs(NamedTuple):
    """The distinct (row, admitted batch, status) pairs of a grid, flat and row-major (a
    row's pairs consecutive, in concurrency order), each a run of consecutive points."""
    row: np.ndarray         # the pair's layout row
    batch: np.ndarray       # its admitted batch B (per attention rank)
    code: np.ndarray        # its status code
    start: np.ndarray       # its first point (flat grid index)
    count: np.ndarray       # its number of points


def distinct_batches(n, tuned, code) -> Pairs:
    """The (row, B, status) pairs of the points ``n`` (``[rows, batches]`` requests in
    flight per attention rank, ascending along a row) of rows whose tuned limit is
    ``tuned`` (``[rows]``), with status codes ``code`` (``[rows, batches]``): ``B = min(n,
    B*)`` (:func:`dse.infer.continuous.admitted_batch`), so every concurrency from B* up
    shares one pair.  A new pair starts wherever B or the status changes along a row."""
    adm = np.where(tuned[:, None] >= 1.0, np.minimum(n, tuned[:, None]), np.float32(1.0))
    new = np.ones(adm.shape, bool)
    new[:, 1:] = (adm[:, 1:] != adm[:, :-1]) | (code[:, 1:] != code[:, :-1])
    start = np.flatnonzero(new)
    count = np.diff(np.append(start, adm.size))
    return Pairs(start // adm.shape[1], adm.reshape(-1)[start], code.reshape(-1)[start], start, count)


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


def _batches(batch: int, batches) -> np.ndarray:
    """The batch / concurrency axis: powers of two up to ``batch`` (and ``batch``), or the
    explicit ``batches`` (sorted, distinct, integers >= 1)."""
    if batches is None:
        return np.asarray(batch_sizes(batch), np.int64)
    vals = list(batches)
    require(len(vals) > 0, "sweep_inference", "batches", "must list at least one batch")
    for v in vals:
        require(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1,
                "sweep_inference", "batches", f"must be integers >= 1, but got {v!r}")
    return np.unique(np.asarray(vals, np.int64))


def _engines(hws: list[Hardware], engine, model: Model) -> list:
    """The engine profile per hardware entry (module docstring), checked and launched on
    that GPU (:func:`dse.infer.continuous.launched_engine`: an engine text with its release
    takes that release's launch limits): ``None`` (each GPU's default), one setting for
    all, or one setting (or None) per hardware entry."""
    if engine is None or isinstance(engine, str):
        engine = [engine] * len(hws)
    require(len(engine) == len(hws), "sweep_inference", "engine",
            f"must name one engine per hardware entry, but got {len(engine)} for {len(hws)}")
    return [launched_engine(default_engine(h) if e is None else e, h, model)
            for h, e in zip(hws, engine)]


def hardware_table(hws: list[Hardware]) -> dict[str, np.ndarray]:
    """One float32 numpy column per Hardware leaf (row = spec), as
    :func:`dse.sweep.run.hardware_columns` builds it, without a JAX dispatch per leaf."""
    return {f: np.asarray([getattr(h, f) for h in hws], np.float32) for f in Hardware._leaf_fields}


class _Status:
    """Per-point status as codes into a table of messages ("ok" = 0): a message is
    formatted once however many points share it, and the column is built by one take."""

    def __init__(self, n: int):
        self.msgs = ["ok"]
        self.code = np.zeros(n, np.int32)

    def set(self, where, msg: str) -> None:
        self.msgs.append(msg)
        self.code[where] = len(self.msgs) - 1

    def column(self):
        return _strings(self.msgs, self.code)


def _strings(uniques, codes):
    """A pandas string column ``uniques[codes]`` (the dtype pandas infers for Python
    strings), built by one take instead of converting an object array."""
    return pd.array(list(uniques), dtype="str").take(np.asarray(codes, np.int64))


def _pad_pow2(n: int) -> int:
    p = MIN_BATCH_PAD
    while p < n:
        p *= 2
    return p


class _Grid:
    """The serving grid: hardware (H) x layout (L) rows, each at every batch (B); points
    row-major (hardware, then layout, then batch), as the frame lists them."""

    def __init__(self, hws, lays, bss):
        self.H, self.L, self.B = len(hws), len(lays["tp"]), len(bss)
        self.rows = self.H * self.L
        self.h_row = np.repeat(np.arange(self.H), self.L)
        self.l_row = np.tile(np.arange(self.L), self.H)
        self.lays = lays
        self.bss = bss
        self.Bp = _pad_pow2(self.B)
        self.bs_pad = np.concatenate([bss, np.full(self.Bp - self.B, bss[-1])]).astype(np.float32)
        self.max_rows = max(POINTS_PER_CHUNK // self.Bp, 1)

    def per_point(self, row_values):
        """A per-row array repeated over the batch axis (point order)."""
        return np.repeat(np.asarray(row_values), self.B)

    def row_args(self, hw_cols, rows, *fields):
        """Arguments of one padded chunk of rows: the hardware pytree and the layout fields."""
        h = self.h_row[rows]
        l = self.l_row[rows]
        hw = Hardware(**{f: v[h] for f, v in hw_cols.items()})
        return (hw, *(self.lays[f][l].astype(np.float32) for f in fields))

    def run(self, fn, args_for, rows: np.ndarray):
        """``fn`` over the given rows through the one chunked runner (:mod:`dse.sweep.runner`,
        its padding policy), outputs unpadded to ``[len(rows), ...]``."""
        return run_chunked(fn, lambda idx: args_for(rows[idx]), len(rows), max_chunk=self.max_rows)

    def points(self, x):
        """``[rows, Bp]`` outputs -> one value per point (padding dropped)."""
        return np.asarray(x)[:, :self.B].reshape(-1)


def sweep_inference(model: Model, hws: list[Hardware], gpus_per_replica: int, batch: int,
                    prompt_len: int, gen_len: int, precision: int = 1,
                    mem_margin: float = MEM_MARGIN, batching: str = "static",
                    engine: str | list | None = None, ep=None, attn_dp=None,
                    batches=None) -> pd.DataFrame:
    """Every (hardware, layout, batch) point as a DataFrame, feasible rows first, each
    group by decreasing ``tokens_per_s``.  Layouts are (tp, pp, ep, attn_dp) of one
    replica of ``gpus_per_replica = tp * attn_dp * pp`` GPUs
    (:func:`dse.infer.expert_parallel.serving_layouts`: ``ep`` / ``attn_dp`` None = 1,
    ``"auto"`` or a list; either batching).  ``batches``
    replaces the default batch axis (powers of two up to ``batch``) by an explicit list.
    Columns in both modes: model, hardware, tp, pp, ep, attn_dp, batch
    (static: the batch; continuous: requests in flight per replica), prompt_len,
    gen_len, precision, batching, ttft_s, tpot_s, e2e_s, output_tok_s (output tokens/s
    of the replica, prefill included), tokens_per_s, mem_gib, hbm_gib, weights_gib,
    feasible, status.  Static adds prefill_s, decode_s_per_token (= ttft_s, tpot_s),
    tokens_per_s = batch / decode_s_per_token, kv_gib, the memory breakdown
    (mem_weights_gib, mem_kv_gib, mem_activations_gib, mem_reserve_gib: allocator
    workspace + fragmentation) and the decode breakdown (decode_gemm_s,
    decode_attention_s, decode_comm_s, decode_elementwise_s); a point is feasible when
    it fits in ``(1 - mem_margin) x HBM`` (:mod:`dse.train.memory_parts`).  Continuous
    adds engine, queue_s (slot wait, inside ttft_s), admitted (running sequences),
    slots (tuned running-batch limit), kv_slots, kv_pool_gib (per GPU), experts_per_gpu;
    tokens_per_s = output_tok_s and mem_gib is what the admitted requests use; admitted,
    slots and kv_slots count the replica's ``attn_dp`` ranks together."""
    require(batching in BATCHING, "sweep_inference", "batching",
            f"must be one of {list(BATCHING)}, but got {batching!r}")
    _check(model, hws, gpus_per_replica, batch, prompt_len, gen_len, precision)
    lays = serving_layouts(model, gpus_per_replica, ep, attn_dp)
    engines = _engines(hws, engine, model) if batching == "continuous" else None
    hw_cols = hardware_table(hws)
    grid = _Grid(hws, lays, _batches(batch, batches))
    bs = np.tile(grid.bss, grid.rows)
    base = {"model": model.name, "hardware": _Str([h.name for h in hws], grid.h_row),
            **{f: _Row(lays[f][grid.l_row]) for f in ("tp", "pp", "ep", "attn_dp")},
            "batch": bs, "prompt_len": prompt_len, "gen_len": gen_len,
            "precision": SERVING_PRECISION_NAMES[precision], "batching": batching}
    if batching == "continuous":
        cols, order, rp, n_ok = _continuous_frame(model, hw_cols, engines, grid, prompt_len,
                                                  gen_len, precision, hws)
    else:
        h_pt = grid.per_point(grid.h_row)
        l_pt = grid.per_point(grid.l_row)
        cap = hw_cols["hbm_bytes"][h_pt]
        no_fp8 = _no_fp8(hw_cols, precision)[h_pt]
        status = _Status(len(bs))
        cols = _static_frame(model, hw_cols, grid, prompt_len, gen_len, precision, mem_margin,
                             status, no_fp8, hws, h_pt, l_pt, bs, cap)
        feasible = cols["feasible"]
        order = _order(feasible, cols["tokens_per_s"])
        rp = order // grid.B                               # the row of each ordered point
        n_ok = int(np.count_nonzero(feasible))
    cols["hbm_gib"] = _Row(hw_cols["hbm_bytes"][grid.h_row] / GIB)
    out = {k: _take(v, order, rp, n_ok, len(bs)) for k, v in {**base, **cols}.items()}
    return pd.DataFrame(out, copy=False)      # fresh arrays: no consolidation copy


class _Row(NamedTuple):
    """A column constant over each row's batches: one value per (hardware, layout) row,
    expanded only once, in the frame's order (:func:`_take`)."""
    values: np.ndarray


class _Str(NamedTuple):
    """A string column as codes into ``uniques``, per row (``codes`` of length rows) or
    per point; built by one take in the frame's order."""
    uniques: list
    codes: np.ndarray


class _Ordered(NamedTuple):
    """A per-point column already in the frame's order (numpy or a pandas string array)."""
    values: object


class _Feasible(NamedTuple):
    """A per-point float32 column (over ``div``) that is NaN where the point is
    infeasible: ordered, the feasible points come first (:func:`_order`), so only the tail
    is set to NaN."""
    values: np.ndarray
    div: float = 1.0


def _take(v, order, rp, n_ok, n):
    """Column ``v`` in the frame's order: per-point arrays by ``order``, per-row ones by
    the ordered points' rows ``rp``, strings as one take of their ordered codes."""
    if isinstance(v, _Row):
        return v.values[rp]
    if isinstance(v, _Ordered):
        return v.values
    if isinstance(v, _Str):
        return _strings(v.uniques, v.codes[rp] if len(v.codes) != n else v.codes[order])
    if isinstance(v, _Feasible):
        out = v.values[order].astype(np.float64)
        if v.div != 1.0:
            out /= v.div
        out[n_ok:] = np.nan
        return out
    if hasattr(v, "shape") and v.shape == (n,):
        return v[order]
    return v


def _order(feasible, tokens):
    """Feasible points first, each group by decreasing tokens/s, NaN last, ties in grid
    order: the stable ``sort_values(["feasible", "tokens_per_s"], ascending=False)`` of
    pandas, without sorting the frame (every infeasible point's tokens/s is NaN, so that
    group keeps grid order)."""
    ok = np.flatnonzero(feasible)
    t = tokens[ok]
    key = np.where(np.isnan(t), np.inf, -t)
    return np.concatenate([ok[np.argsort(key, kind="stable")], np.flatnonzero(~feasible)])


def _no_fp8(hw_cols, precision):
    """Per hardware: whether the precision has no tensor cores on it."""
    return (((precision == 2) & (hw_cols["peak_fp8_flops_per_s"] <= 0))
            | ((precision >= 3) & (hw_cols["peak_fp4_flops_per_s"] <= 0)))


def _no_fp8_message(hw: Hardware, precision) -> str:
    return f"infeasible: {hw.name} has no {'fp8' if precision == 2 else 'fp4'} tensor cores"


def _no_fp8_status(status, no_fp8, hws, h_idx, precision):
    for h in np.unique(h_idx[no_fp8]):
        status.set(no_fp8 & (h_idx == h), _no_fp8_message(hws[h], precision))


def _static_frame(model, hw_cols, grid, prompt_len, gen_len, precision, mem_margin, status,
                  no_fp8, hws, h_pt, l_pt, bs, cap) -> dict:
    S, O, prec = np.float32(prompt_len), np.float32(gen_len), np.int32(precision)
    bs_pad = grid.bs_pad
    parts, res = grid.run(lambda *a: _static_jit(model, *a, bs_pad, S, O, prec),
                          lambda rows: grid.row_args(hw_cols, rows, "tp", "pp", "ep", "attn_dp"),
                          np.arange(grid.rows))
    parts = type(parts)(*(grid.points(x) for x in parts))
    res = {f: grid.points(getattr(res, f)) for f in InferenceResult._fields}
    mem = parts.total_bytes
    oom = mem > usable_bytes(cap, mem_margin)
    for i in np.nonzero(oom)[0]:
        status.set(i, oom_status(mem[i], cap[i], mem_margin))
    dp_pt = grid.lays["attn_dp"][l_pt].astype(np.float64)
    few = bs < dp_pt
    if (few & ~oom).any():
        status.set(few & ~oom, "infeasible: a batch smaller than the attention-DP ranks "
                   "(batch < attn_dp)")
    _no_fp8_status(status, no_fp8, hws, h_pt, precision)
    feasible = ~oom & ~no_fp8 & ~few
    for f in InferenceResult._fields:
        res[f] = np.where(feasible, res[f].astype(np.float64), np.nan)
    e2e = res["prefill_s"] + (gen_len - 1.0) * res["decode_s_per_token"]
    cols = {
        "prefill_s": res["prefill_s"],
        "decode_s_per_token": res["decode_s_per_token"],
        "tokens_per_s": res["tokens_per_s"] * dp_pt,     # the replica's attn_dp ranks
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
        "status": status.column(),
    }
    for f in DECODE_BREAKDOWN:
        cols[f] = res[f]
    return cols


def _continuous_frame(model, hw_cols, engines, grid, prompt_len, gen_len, precision,
                      hws) -> tuple[dict, np.ndarray, np.ndarray, int]:
    """Continuous batching (module docstring, "Distinct batches"): the rows' slots, then
    one :func:`dse.infer.continuous.admitted_point` per distinct (row, admitted batch,
    status) pair, ordered by the frame's rule at pair level and spread over the pair's
    concurrencies in that order.  Every engine's chunks are dispatched before the first
    copy-back, so the device computes the next engine's chunks while the host converts
    the last.  Returns the columns (row-level ones per row, per-point ones in frame
    order), the frame order of the grid's points, their rows and the feasible count."""
    S, O, prec = np.float32(prompt_len), np.float32(gen_len), np.int32(precision)
    R, B = grid.rows, grid.B
    uniq = sorted(set(engines), key=lambda e: (e.name, repr(e)))   # launched profiles (hashable)
    eng_names = [e.name for e in uniq]
    eng_code = np.asarray([uniq.index(e) for e in engines], np.int64)[grid.h_row]
    dp_row = grid.lays["attn_dp"][grid.l_row].astype(np.float32)
    lay = ("tp", "pp", "ep", "attn_dp")
    # one call per (engine, attention-DP group) that has rows; call_of_row: each row's call;
    # each engine costs the model as it serves it (dse.infer.engines.served_model)
    served = {eng: served_model(model, eng) for eng in uniq}
    calls = []
    call_of_row = np.empty(R, np.int64)
    for e, eng in enumerate(uniq):
        for g, in_group in (("one", dp_row <= 1), ("many", dp_row > 1)):
            rows = np.flatnonzero((eng_code == e) & in_group)
            if len(rows):
                call_of_row[rows] = len(calls)
                calls.append((eng, g, rows, int(_fast_compile(len(rows) * B)),
                              np.float32(kv_element_bytes(eng, precision))))
    # 1. per row: the KV slots and the tuned limit B*
    runs = run_concurrently([lambda eng=eng, g=g, rows=rows, kvb=kvb: dispatch_chunked(
        lambda *a, fn=_SLOTS[int(jax.default_backend() == "cpu")]: fn(
            eng, g, served[eng], *a, prec, kvb, S, O),
        lambda r: grid.row_args(hw_cols, rows[r], *lay), len(rows))
        for eng, g, rows, _, kvb in calls])
    sl = {f: np.empty(R, np.float32) for f in Slots._fields}
    for (_, _, rows, _, _), pending in zip(calls, runs):
        out = collect_chunked(pending)
        for f in Slots._fields:
            sl[f][rows] = getattr(out, f)
    # status by precedence (the later wins): no KV slot (per row), batch < attn_dp, no fp8/fp4
    msgs = ["ok", "infeasible: fewer requests in flight than attention-DP ranks (batch < attn_dp)"]
    row_code = np.zeros(R, np.int32)
    no_kv_row = sl["tuned"] < 1
    for r in np.flatnonzero(no_kv_row):
        msgs.append(no_admission_reason(float(sl["weights_bytes"][r]), float(sl["kv_pool_bytes"][r]),
                                        float(sl["kv_bytes_per_seq"][r]), prompt_len + gen_len,
                                        eng_names[eng_code[r]]))
        row_code[r] = len(msgs) - 1
    no_fp8_row = _no_fp8(hw_cols, precision)[grid.h_row]
    for h in np.unique(grid.h_row[no_fp8_row]):
        msgs.append(_no_fp8_message(hws[h], precision))
        row_code[no_fp8_row & (grid.h_row == h)] = len(msgs) - 1
    few = grid.bss[None, :] < dp_row[:, None]
    code = np.where(few & ~(no_kv_row | no_fp8_row)[:, None], 1, row_code[:, None])
    # 2. per distinct (row, admitted batch, status): what every concurrency admitting it shares
    n = grid.bss.astype(np.float32)[None, :] / dp_row[:, None]      # requests per attention rank
    pr = distinct_batches(n, sl["tuned"], code)
    jobs, sels = [], []
    for i, (eng, g, rows, fast, kvb) in enumerate(calls):
        sel = np.flatnonzero(call_of_row[pr.row] == i)
        local = np.searchsorted(rows, pr.row[sel]).astype(np.int32)   # index into the call's rows
        table = pad_index(rows, chunk_size(len(rows)))    # padded as the runner pads (fixed shapes)
        tables = (*grid.row_args(hw_cols, table, *lay), Slots(**{f: v[table] for f, v in sl.items()}))
        sels.append(sel)
        jobs.append(lambda eng=eng, g=g, fast=fast, kvb=kvb, tables=tables, local=local,
                    p_B=pr.batch[sel], n=len(sel): dispatch_chunked(
            lambda *a: _ADMITTED[fast](eng, g, served[eng], *tables, *a, prec, kvb, S, O),
            lambda i: (local[i], p_B[i]), n, chunk=FAST_COMPILE_POINTS if fast else None))
    runs = list(zip(sels, run_concurrently(jobs)))
    adm = {f: np.empty(len(pr.row), np.float32) for f in Admitted._fields}
    for sel, pending in runs:
        out = collect_chunked(pending)
        for f in Admitted._fields:
            adm[f][sel] = getattr(out, f)
    # 3. the frame order at pair level (each pair's points are consecutive in grid order and
    # share feasibility and tokens/s, so this is the stable point-level order of _order),
    # then every pair spread over its concurrencies, with the slot wait (numpy, float32)
    p_ok = pr.code == 0
    po = _order(p_ok, np.where(p_ok, adm["tokens_per_s"] * dp_row[pr.row], np.nan))
    count = pr.count[po]
    first = np.cumsum(count) - count
    order = np.repeat(pr.start[po] - first, count) + np.arange(R * B)
    rp = np.repeat(pr.row[po], count)
    n_ok = int(count[:np.count_nonzero(p_ok)].sum())
    spread = lambda x: np.repeat(x[po], count)
    dp_pt = dp_row[rp]
    res = queued_point(grid.bss.astype(np.float32)[order % B] / dp_pt, spread(pr.batch),
                       Admitted(**{f: spread(v) for f, v in adm.items()}), O,
                       # queued_point reads these two of the slots; the others stay per row
                       Slots(**sl)._replace(tuned=sl["tuned"][rp], kv_slots=sl["kv_slots"][rp]),
                       xp=np)

    def pt(x, div=1.0):
        out = np.asarray(x, np.float32).astype(np.float64)
        if div != 1.0:
            out /= div
        out[n_ok:] = np.nan
        return _Ordered(out)

    tokens = pt(res.tokens_per_s * dp_pt)
    f64 = lambda x: x.astype(np.float64)
    feasible = np.zeros(R * B, bool)
    feasible[:n_ok] = True
    return {
        "engine": _Str(eng_names, eng_code),
        "ttft_s": pt(res.ttft_s), "tpot_s": pt(res.tpot_s), "e2e_s": pt(res.e2e_s),
        "queue_s": pt(res.queue_s),
        "output_tok_s": tokens, "tokens_per_s": tokens,
        "admitted": pt(res.admitted * dp_pt),
        "slots": _Row(f64(sl["tuned"]) * dp_row), "kv_slots": _Row(f64(sl["kv_slots"]) * dp_row),
        "mem_gib": pt(res.mem_bytes, GIB),
        "kv_pool_gib": _Row(f64(sl["kv_pool_bytes"]) / GIB),
        "weights_gib": _Row(f64(sl["weights_bytes"]) / GIB),
        "experts_per_gpu": _Row(experts_per_gpu(model, grid.lays["ep"][grid.l_row])),
        "feasible": _Ordered(feasible),
        "status": _Ordered(_strings(msgs, spread(pr.code))),
    }, order, rp, n_ok


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
