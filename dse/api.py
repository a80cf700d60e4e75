"""The Python API: the CLI's commands as functions that take names (strings) and return
DataFrames or an :class:`Estimate`, with the CLI's defaults.

Re-exported by ``import dse`` (lazily: importing ``dse`` loads neither JAX nor these
modules, and configures nothing)::

    >>> import dse
    >>> df = dse.sweep(model="llama3-70b", hardware="h100-sxm-80gb", gpus=64,
    ...                global_batch=1024, seq_len=4096)          # every layout, fastest first
    >>> e = dse.estimate(model="llama3-70b", hardware="h100-sxm-80gb", gpus=64,
    ...                  tp=4, pp=4, vpp=5, sp=True, recompute="block")
    >>> e.fits, e.step_time_s, e.breakdown["tp_comm_s"], e.ops.head()
    >>> dse.compare(model="llama3-70b", hardware=["a100-sxm-80gb", "h100-sxm-80gb"],
    ...             gpus=[64, 256], global_batch=1024, seq_len=4096)
    >>> dse.serve(model="llama3-70b", hardware="h100-sxm-80gb", gpus=8)   # = dse.infer(...)

``model`` is a catalog name, a Hugging Face ``config.json`` path or a ``.toml`` path (or a
:class:`~dse.spec.model.Model`); ``hardware`` a catalog name or ``.toml`` path (or a
:class:`~dse.spec.hardware.Hardware`), or a list of them where several are allowed.
``precision`` is ``"fp32"|"tf32"|"bf16"|"fp16"|"fp8"``, ``recompute``
``"none"|"selective"|"full"|"block"``, ``attention`` ``"flash"|"unfused"``,
``framework`` ``"megatron"|"deepspeed"|"fsdp"|"fsdp2"`` (:mod:`dse.spec.frameworks`).  Bad input raises
:class:`dse.errors.InputError` with a one-line message naming the argument and the rule
(the CLI prints the same line and exits 2).  ``seq_len`` defaults to 4096
(``dse.cli_layout.DEFAULT_SEQ``), as the CLI's ``--seq`` does; a model config's
``max_position_embeddings`` is never used.

Results: the sweep's rows carry ``status`` (``ok`` or why the layout does not fit) and
NaN times where it does not; an :class:`Estimate` of a layout that does not fit has
``fits=False``, its ``status`` says why, and its times are NaN (``raw`` still holds what
the step would take with unlimited memory).  Energy and cost columns
(``gpu_power_w``, ``energy_kwh_per_mtok``, ``gpu_hours_per_mtok``, with a price
``usd_per_mtok``, with a token budget ``train_days``/``train_mwh``/``train_usd``) are
:mod:`dse.cost.energy`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dse.cli_layout import DEFAULT_SEQ
from dse.errors import require

__all__ = ["sweep", "estimate", "Estimate", "compare", "serve", "infer"]


# --- argument helpers -------------------------------------------------------------------

def _model(model, where):
    from dse.spec.model import Model, get_model
    if isinstance(model, Model):
        return model
    require(isinstance(model, str), where, "model",
            f"must be a catalog name or a file path (a string), but got {model!r}")
    return get_model(model, where)


def _hardware_list(hardware, where, vary=None):
    from dse.cli import vary_hardware
    from dse.spec.hardware import Hardware, get_hardware
    items = hardware if isinstance(hardware, (list, tuple)) else [hardware]
    require(len(items) > 0, where, "hardware", "must name at least one hardware")
    hws = []
    for h in items:
        if isinstance(h, Hardware):
            hws.append(h)
        else:
            require(isinstance(h, str), where, "hardware",
                    f"must be a catalog name or a .toml path (a string), but got {h!r}")
            hws.append(get_hardware(h, where))
    if vary is not None:
        vary = [vary] if isinstance(vary, str) else list(vary)
    return hws, vary_hardware(hws, vary or [])


def _pos_int(v, name, where, allow_none=False):
    """A positive integer within the CLI's bound for it (:mod:`dse.cli_layout`): GPU counts
    and parallel degrees ``<= GPUS_MAX`` (2^20, what the layout enumeration takes), every
    other integer ``<= INT_MAX`` (2^31 - 1, exact in every array type)."""
    from dse.cli_layout import GPUS_MAX, INT_MAX
    if v is None and allow_none:
        return None
    top = GPUS_MAX if name in ("gpus", "dp", "tp", "pp", "cp", "ep", "vpp", "attn_dp") else INT_MAX
    require(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 0 < v <= top, where, name,
            f"`1 <= {name} <= {top}` must hold (an integer), but got ({name}={v!r})")
    return int(v)


def _code(fn, value, name, where):
    require(isinstance(value, str), where, name, f"must be a string, but got {value!r}")
    return fn(value, where)


def _workload_codes(precision, attention, framework, where):
    from dse.spec.layout import attention_code, framework_code, precision_code
    return (_code(precision_code, precision, "precision", where),
            _code(attention_code, attention, "attention", where),
            _code(framework_code, framework, "framework", where))


def _recipe(moe_a2a_overlap, cuda_graphs, moe_dispatcher, where, recompute_modules="core_attn",
            allow_auto: bool = False, grad_reduce_in_fp32=None, fp8_attention=False,
            precision=None, ddp_bucket_size=None) -> dict:
    from dse.spec.layout import recipe_codes
    return recipe_codes(moe_a2a_overlap, cuda_graphs, moe_dispatcher, where, recompute_modules, allow_auto,
                        grad_reduce_in_fp32, fp8_attention, precision, ddp_bucket_size)


def _check_precision(hws, prec, where):
    from dse.spec.hardware import check_precision
    for hw in hws:
        check_precision(hw, prec, where)


def _train_tokens(train_tokens, where):
    from dse.cost.energy import parse_tokens
    return None if train_tokens is None else parse_tokens(train_tokens, where)


# --- training ---------------------------------------------------------------------------

def sweep(model, hardware, gpus: int, global_batch: int, seq_len: int = DEFAULT_SEQ,
          precision: str = "bf16", *, attention: str = "flash", framework: str = "megatron",
          tp_overlap: bool = False, vary=None, gpu_hour_usd=None, train_tokens=None,
          pue: float = 1.0, mem_margin: float = 0.03, moe_a2a_overlap: bool = False,
          cuda_graphs: str = "none", moe_dispatcher: str = "alltoall",
          recompute_modules="core_attn", grad_reduce_in_fp32=None,
          fp8_attention: bool = False, ddp_bucket_size=None) -> pd.DataFrame:
    """Every valid parallel layout x hardware for one workload, fastest first (the rows
    that do not fit last, NaN times, the reason in ``status``) — ``dse sweep``.

    ``vary``: ``"KNOB=v1,v2"`` or a list of them (``dse sweep --vary``), e.g.
    ``["hbm_bw=1x,2x", "throttle=0,0.3"]``.  ``gpu_hour_usd``: USD per GPU-hour, one or one
    per hardware; ``train_tokens``: a token budget (``1e12``, ``"15T"``); ``pue`` >= 1;
    ``mem_margin``: a layout is feasible in ``(1 - mem_margin) x HBM``
    (:mod:`dse.train.memory_parts`).  Rows carry the memory breakdown (``mem_*_gib``) and
    the 80 % band of the step time (``step_time_lo_s`` / ``_hi_s``, :mod:`dse.intervals`).
    ``moe_a2a_overlap``, ``cuda_graphs`` (``none`` | ``full_iteration``), ``moe_dispatcher``
    (``alltoall`` | ``deepep`` | ``hybridep``), ``recompute_modules`` (Megatron-Core's list
    for selective recompute, a list of names or ``"mla_up_proj,mlp"``; default
    ``core_attn``; ``"auto"`` sweeps every list the model has and adds a ``recompute_modules``
    column), ``grad_reduce_in_fp32`` (None = the framework's default; False for Megatron-Bridge /
    NeMo performance recipes), ``fp8_attention`` (the fused attention in FP8, Transformer
    Engine's ``fp8_dpa``; precision fp8 or mxfp8 only), ``ddp_bucket_size`` (parameters per
    data-parallel gradient bucket, Megatron-Core ``--ddp-bucket-size``; None = the framework's
    rule): the recipe switches of :class:`dse.spec.layout.Workload` (the ``dse predict``
    columns of the same names).

    Example::

        >>> df = dse.sweep(model="llama3-8b", hardware=["a100-sxm-80gb", "h100-sxm-80gb"],
        ...                gpus=8, global_batch=64, seq_len=2048, gpu_hour_usd=[1.5, 3.0])
        >>> df[df.feasible].groupby("hardware").head(1)[["hardware", "tp", "pp", "step_time_s", "usd_per_mtok"]]
    """
    from dse.cli import per_variant
    from dse.cost.energy import add_energy_columns
    from dse.sweep.run import sweep as run_sweep
    where = "dse.sweep"
    m = _model(model, where)
    base, hws = _hardware_list(hardware, where, vary)
    gpus = _pos_int(gpus, "gpus", where)
    global_batch = _pos_int(global_batch, "global_batch", where)
    seq = _pos_int(seq_len, "seq_len", where)
    prec, att, fw = _workload_codes(precision, attention, framework, where)
    _check_precision(hws, prec, where)
    from dse.intervals import sweep_band
    from dse.train.memory_parts import check_margin
    df = run_sweep(m, hws, gpus, global_batch, seq, prec, attention=att, framework=fw,
                   tp_overlap=int(bool(tp_overlap)), mem_margin=check_margin(mem_margin, where),
                   recipe=_recipe(moe_a2a_overlap, cuda_graphs, moe_dispatcher, where, recompute_modules,
                                  allow_auto=True, grad_reduce_in_fp32=grad_reduce_in_fp32,
                                  fp8_attention=fp8_attention, precision=prec,
                                  ddp_bucket_size=ddp_bucket_size))
    df = sweep_band(df, framework)
    prices = gpu_hour_usd if gpu_hour_usd is None or isinstance(gpu_hour_usd, (list, tuple)) else [gpu_hour_usd]
    return add_energy_columns(df, {h.name: float(h.tdp_w) for h in hws},
                              per_variant(prices, base, hws), _train_tokens(train_tokens, where),
                              pue, where)


@dataclass(frozen=True, eq=False)
class Estimate:
    """One explicit layout's step: time, breakdown, memory, energy, and whether it fits.

    Times are NaN when ``fits`` is False (``status`` says why; ``raw`` keeps the
    unconstrained :class:`~dse.train.step.StepResult`).  ``ops`` is the per-operator
    table (:func:`dse.train.ops_table.ops_table`): one row per operator of one GPU of the
    heaviest stage, with count, FLOPs, bytes, time, exposed time, breakdown term, bound.
    """

    model: object
    hardware: object
    workload: object
    layout: object
    gpus: int
    fits: bool
    status: str
    step_time_s: float
    tokens_per_s: float
    mfu: float
    mem_gib: float
    hbm_gib: float
    recompute_layers: float
    breakdown: dict
    energy: dict
    raw: object = field(repr=False)
    _ops: list = field(default_factory=list, repr=False)
    memory: dict = field(default_factory=dict)     # mem_*_gib (dse.train.memory_parts)
    step_time_lo_s: float = math.nan               # 80 % band (dse.intervals)
    step_time_hi_s: float = math.nan
    within_margin: bool = False                    # fits but inside the memory safety margin

    @property
    def ops(self) -> pd.DataFrame:
        if not self._ops:
            from dse.train.ops_table import ops_table
            self._ops.append(ops_table(self.model, self.workload, self.layout, self.hardware)[0])
        return self._ops[0]

    def to_series(self) -> pd.Series:
        """Everything but ``ops`` as one row (the sweep's column names)."""
        from dse.spec.layout import RECOMPUTE_NAMES
        lay = {f: int(getattr(self.layout, f)) for f in ("tp", "pp", "dp", "cp", "ep", "mbs", "vpp", "zero")}
        return pd.Series({"model": self.model.name, "hardware": self.hardware.name, "gpus": self.gpus,
                          **lay, "recompute": RECOMPUTE_NAMES[int(self.layout.recompute)],
                          "sp": bool(self.layout.sp), "fits": self.fits, "status": self.status,
                          "step_time_s": self.step_time_s, "tokens_per_s": self.tokens_per_s,
                          "mfu": self.mfu, "mem_gib": self.mem_gib, "hbm_gib": self.hbm_gib,
                          **self.memory, "step_time_lo_s": self.step_time_lo_s,
                          "step_time_hi_s": self.step_time_hi_s, "within_margin": self.within_margin,
                          **self.breakdown, **self.energy})

    def __str__(self) -> str:
        from dse.comparison import layout_label
        s = self.to_series()
        head = (f"{self.model.name} on {self.gpus} x {self.hardware.name}: {layout_label(s)}, "
                f"global batch {int(self.workload.global_batch)} x {int(self.workload.seq_len)} tokens")
        mem = f"memory per GPU {self.mem_gib:.1f} of {self.hbm_gib:.1f} GiB"
        if not self.fits:
            return f"{head}\n  {mem}: DOES NOT FIT ({self.status})"
        terms = ", ".join(f"{k[:-2]} {v:.3f}" for k, v in self.breakdown.items())
        warn = " -- inside the memory safety margin" if self.within_margin else ""
        return (f"{head}\n  {mem} (fits{warn})\n  step {self.step_time_s:.3f} s "
                f"(80 % band {self.step_time_lo_s:.3f}-{self.step_time_hi_s:.3f} s), "
                f"{self.tokens_per_s:,.0f} tokens/s, MFU {self.mfu:.1%}\n  exposed s: {terms}")

    __repr__ = __str__


def estimate(model, hardware, gpus: int, *, tp: int = 1, pp: int = 1, dp: int | None = None,
             cp: int = 1, ep: int = 1, mbs: int = 1, vpp: int = 1, recompute: str = "none",
             zero: int = 1, sp: bool = False, global_batch: int = 1024,
             seq_len: int = DEFAULT_SEQ, precision: str = "bf16", attention: str = "flash",
             framework: str = "megatron", tp_overlap: bool = False, gpu_hour_usd=None,
             train_tokens=None, pue: float = 1.0, mem_margin: float = 0.03,
             moe_a2a_overlap: bool = False, cuda_graphs: str = "none",
             moe_dispatcher: str = "alltoall", recompute_modules="core_attn",
             grad_reduce_in_fp32=None, fp8_attention: bool = False, ddp_bucket_size=None) -> Estimate:
    """Step time, breakdown, memory and energy of one explicit layout — ``dse estimate``
    (same defaults: global batch 1024, ZeRO-1, dp = gpus / (tp pp cp)).  The layout is
    judged against the full HBM (it is the user's); ``within_margin`` is True when it fits
    but not in ``(1 - mem_margin) x HBM``.  ``memory``: the per-GPU breakdown in GiB.
    ``moe_a2a_overlap`` / ``cuda_graphs`` / ``moe_dispatcher`` / ``recompute_modules`` /
    ``grad_reduce_in_fp32`` / ``fp8_attention`` / ``ddp_bucket_size``: as :func:`sweep`.

    Example::

        >>> e = dse.estimate(model="llama3-70b", hardware="h100-sxm-80gb", gpus=64, tp=4,
        ...                  pp=4, vpp=5, sp=True, recompute="block", seq_len=4096)
        >>> print(e)                      # a summary; e.fits, e.step_time_s, e.breakdown
        >>> e.ops.sort_values("exposed_s", ascending=False).head()
    """
    from dse.cost.energy import add_energy_columns
    from dse.spec.hardware import GIB
    from dse.spec.layout import Layout, Workload, recompute_code
    from dse.sweep.grid import check_layout
    from dse.sweep.run import oom_status
    from dse.train.step import BREAKDOWN
    where = "dse.estimate"
    m = _model(model, where)
    hws, _ = _hardware_list(hardware, where)
    require(len(hws) == 1, where, "hardware", f"must be one hardware, but got {len(hws)}")
    hw = hws[0]
    gpus = _pos_int(gpus, "gpus", where)
    knobs = {k: _pos_int(v, k, where) for k, v in
             dict(tp=tp, pp=pp, cp=cp, ep=ep, mbs=mbs, vpp=vpp).items()}
    require(isinstance(zero, (int, np.integer)) and not isinstance(zero, bool) and 0 <= zero <= 3,
            where, "zero", f"`0 <= zero <= 3` must hold (an integer), but got (zero={zero!r})")
    require(isinstance(sp, (bool, np.bool_)) or sp in (0, 1), where, "sp", f"must be True or False, but got {sp!r}")
    dp = _pos_int(dp, "dp", where, allow_none=True) or max(gpus // (knobs["tp"] * knobs["pp"] * knobs["cp"]), 1)
    global_batch = _pos_int(global_batch, "global_batch", where)
    seq = _pos_int(seq_len, "seq_len", where)
    prec, att, fw = _workload_codes(precision, attention, framework, where)
    lay = Layout(**knobs, dp=dp, recompute=_code(recompute_code, recompute, "recompute", where),
                 zero=int(zero), sp=int(bool(sp)))
    check_layout(m, gpus, global_batch, seq, lay, where=where, framework=fw)
    _check_precision([hw], prec, where)
    wl = Workload(global_batch=global_batch, seq_len=seq, precision=prec, attention=att,
                  framework=fw, tp_overlap=int(bool(tp_overlap)),
                  **_recipe(moe_a2a_overlap, cuda_graphs, moe_dispatcher, where, recompute_modules,
                            grad_reduce_in_fp32=grad_reduce_in_fp32, fp8_attention=fp8_attention,
                            precision=prec, ddp_bucket_size=ddp_bucket_size))
    from dse.intervals import apply_band, band_for, training_cell_of
    from dse.host_eval import host_design_point
    from dse.train.memory_parts import check_margin, gib_columns, step_and_memory
    margin = check_margin(mem_margin, where)
    r, parts = host_design_point(step_and_memory, m, wl, lay, hw)   # one point: no XLA compile
    memory = {k: float(v) for k, v in gib_columns(parts).items()}
    mem, cap = float(r.mem_bytes), float(hw.hbm_bytes)
    fits = mem <= cap
    t = (lambda x: float(x)) if fits else (lambda x: math.nan)
    breakdown = {f: t(getattr(r, f)) for f in BREAKDOWN}
    row = pd.DataFrame([{"hardware": hw.name, "gpus": gpus, "global_batch": global_batch,
                         "seq_len": seq, "step_time_s": t(r.step_time_s),
                         "tokens_per_s": t(r.tokens_per_s), **breakdown}])
    energy = add_energy_columns(row, {hw.name: float(hw.tdp_w)}, gpu_hour_usd,
                                _train_tokens(train_tokens, where), pue, where)
    energy = {c: float(energy[c][0]) for c in energy.columns if c not in row.columns}
    q10, q90, _ = band_for("training", training_cell_of(framework, hw.generation))
    lo, hi = apply_band(t(r.step_time_s), q10, q90)
    return Estimate(model=m, hardware=hw, workload=wl, layout=lay, gpus=gpus, fits=fits,
                    status="ok" if fits else oom_status(mem, cap), step_time_s=t(r.step_time_s),
                    tokens_per_s=t(r.tokens_per_s), mfu=t(r.mfu), mem_gib=mem / GIB,
                    hbm_gib=cap / GIB, recompute_layers=float(r.recompute_layers),
                    breakdown=breakdown, energy=energy, raw=r, memory=memory,
                    step_time_lo_s=lo, step_time_hi_s=hi, within_margin=fits and mem > cap * (1 - margin))


def compare(model, hardware, gpus, global_batch: int, seq_len: int = DEFAULT_SEQ,
            precision: str = "bf16", *, attention: str = "flash", framework: str = "megatron",
            tp_overlap: bool = False, objective: str = "step_time_s", gpu_hour_usd=None,
            train_tokens=None, pue: float = 1.0, mem_margin: float = 0.03,
            moe_a2a_overlap: bool = False, cuda_graphs: str = "none",
            moe_dispatcher: str = "alltoall", recompute_modules="core_attn",
            grad_reduce_in_fp32=None, fp8_attention: bool = False,
            ddp_bucket_size=None) -> pd.DataFrame:
    """The best feasible layout per (hardware, GPU count) — ``dse compare``: one row per
    cell with the layout, ``step_time_s``, ``tokens_per_s``, ``mfu``, ``mem_gib``, energy
    and cost per million tokens, and ``status`` (``ok``, or the smallest memory need and
    its layout when nothing fits).  ``objective``: ``step_time_s`` (default),
    ``energy_kwh_per_mtok``, ``gpu_hours_per_mtok`` or ``usd_per_mtok`` (needs a price).
    ``moe_a2a_overlap`` / ``cuda_graphs`` / ``moe_dispatcher`` / ``recompute_modules`` /
    ``grad_reduce_in_fp32`` / ``fp8_attention`` / ``ddp_bucket_size``: as :func:`sweep`.

    Example::

        >>> dse.compare(model="llama3-70b", hardware=["a100-sxm-80gb", "h100-sxm-80gb"],
        ...             gpus=[64, 256], global_batch=1024, seq_len=4096, gpu_hour_usd=[1.8, 3.5])
    """
    from dse.comparison import compare_frame
    from dse.train.memory_parts import check_margin
    where = "dse.compare"
    m = _model(model, where)
    _, hws = _hardware_list(hardware, where)
    counts = [_pos_int(g, "gpus", where) for g in (gpus if isinstance(gpus, (list, tuple)) else [gpus])]
    global_batch = _pos_int(global_batch, "global_batch", where)
    seq = _pos_int(seq_len, "seq_len", where)
    prec, att, fw = _workload_codes(precision, attention, framework, where)
    _check_precision(hws, prec, where)
    return compare_frame(m, hws, counts, global_batch, seq, prec, att, fw, int(bool(tp_overlap)),
                         gpu_hour_usd, _train_tokens(train_tokens, where), pue, objective, where,
                         check_margin(mem_margin, where), framework,
                         _recipe(moe_a2a_overlap, cuda_graphs, moe_dispatcher, where, recompute_modules,
                                 grad_reduce_in_fp32=grad_reduce_in_fp32, fp8_attention=fp8_attention,
                                 precision=prec, ddp_bucket_size=ddp_bucket_size))


# --- inference --------------------------------------------------------------------------

def serve(model, hardware, gpus: int, batch: int = 64, prompt: int = 2048, gen: int = 256,
          precision: str = "bf16", *, vary=None, batching: str = "continuous", engine=None,
          ep=None, attn_dp=None, mem_margin: float | None = None) -> pd.DataFrame:
    """Every serving point (hardware, tp, pp, batch) of one replica of ``gpus`` GPUs —
    ``dse infer``, with its defaults: ``ttft_s`` (time to first token), ``tpot_s`` (per output token),
    ``tokens_per_s`` (decode throughput of the replica), memory with the KV cache,
    ``feasible``/``status``; feasible rows first, highest throughput first.  Batches are
    the powers of two up to ``batch``.  ``batching``: ``continuous`` (default, in-flight
    batching as the engines run; ``batch`` = requests in flight) or ``static``;
    ``engine``: a continuous-batching profile (default trtllm on NVIDIA, vllm on AMD;
    an error with ``batching="static"``); ``ep`` / ``attn_dp``: a list of degrees or
    ``"auto"`` (default: every valid one under continuous batching, 1 under static), as
    ``--ep`` / ``--attn-dp``; ``mem_margin`` as ``--mem-margin``.  Precision fp32 / tf32
    is rejected (:mod:`dse.infer.serve_options`).  ``dse.infer(...)`` is the same function.

    Example::

        >>> df = dse.serve(model="llama3-8b", hardware="h100-sxm-80gb", gpus=1, batch=32)
        >>> df.iloc[0][["engine", "tp", "batch", "tokens_per_s", "ttft_s"]]     # the best point
    """
    from dse.infer.sweep import sweep_inference
    where = "dse.serve"
    m = _model(model, where)
    _, hws = _hardware_list(hardware, where, vary)
    from dse.infer.serve_options import serving_options
    from dse.train.memory_parts import MEM_MARGIN, check_margin
    gpus = _pos_int(gpus, "gpus", where)
    batch, prompt, gen = (_pos_int(v, n, where) for v, n in ((batch, "batch"), (prompt, "prompt"), (gen, "gen")))
    prec = serving_options(precision, batching, engine, hws, where)
    degrees = [_degrees(v, n, batching, where) for v, n in ((ep, "ep"), (attn_dp, "attn_dp"))]
    margin = check_margin(MEM_MARGIN if mem_margin is None else mem_margin, where)
    return sweep_inference(m, hws, gpus, batch, prompt, gen, prec, mem_margin=margin,
                           batching=batching, engine=engine, ep=degrees[0], attn_dp=degrees[1])


def _degrees(v, name, batching, where):
    """``ep`` / ``attn_dp`` as the CLI's ``--ep`` / ``--attn-dp`` (dse.cli._degrees): None ->
    every valid degree under continuous batching (1 under static), ``"auto"``, or a list."""
    if v is None:
        return "auto" if batching == "continuous" else None
    if isinstance(v, str) and v == "auto":
        return "auto"
    vals = list(v) if isinstance(v, (list, tuple)) else [v]
    return [_pos_int(x, name, where) for x in vals]


infer = serve
