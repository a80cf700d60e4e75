"""Sensitivity of one design point's time to every continuous hardware knob.

At a fixed layout (model, workload, parallel layout held constant) the elasticity of the
time ``T`` to a knob ``x`` is

    e = d ln T / d ln x = (dT/dx) * x / T

so ``e = -1`` means "T halves when x doubles", ``e = 0`` "x does not matter here".  Each
knob is moved by a log-scale factor: the fields it names become ``x * exp(u)`` and
``e = d ln T / d u`` at ``u = 0``, computed two ways:

* ``elasticity_ad``: reverse-mode ``jax.grad`` of ``ln T(u)`` through the cost model, one
  pass for all knobs;
* ``elasticity_fd``: the central finite difference ``(ln T(+h) - ln T(-h)) / 2h`` at
  ``h = 0.01`` (~ +-1 %), with its one-sided halves ``elasticity_fd_up``/``_down``.

The cost model is piecewise: rooflines are ``max(compute, memory)``, wave and tile
quantization are ``ceil``, overlapped communication is ``max(0, comm - window)``, and
collectives switch algorithm on comparisons (``stride < nvlink_domain``).  On a flat
piece of a ``ceil`` or on the losing side of a ``max`` the gradient is exactly zero; at a
tie of a ``max`` JAX takes one side; across a ``ceil`` step or a comparison the function
jumps, which no derivative sees.  So the AD value is the *local* slope of the piece the
point sits on, and the finite difference says what a +-1 % change really does.  The
``kink`` column is true where they disagree (or the two one-sided differences do):
read the finite-difference value there.

Knobs (:data:`KNOBS`): every float leaf of :class:`~dse.spec.hardware.Hardware` except
the ``throttle_clock`` switch, moved alone with every other leaf held fixed (so
``num_sms`` at fixed peak FLOP/s only moves wave quantization and the SMs NCCL
occupies, and ``clock_hz`` alone moves nothing: the peaks are stored, not derived);
``throttle`` as the derate ``1 - throttle`` (a true elasticity even at throttle 0); and
composites that move several leaves together as :mod:`dse.spec.variants` does:
``clock`` (clock, every peak, L2 bandwidth), ``num_sms`` with the peaks, every rate at
once, every latency at once.  Discrete knobs (SM count, NVLink domain, GEMM tile,
cluster) are differentiated as their continuous relaxation; their finite difference
often crosses a step.

Homogeneity: every time in the model is a byte or FLOP count over a rate, a latency, or
a max/sum of such, so scaling every rate by k and every latency by 1/k scales T by 1/k:
``e(all rates) - e(all latencies) = -1`` (a test checks it).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from dse.errors import require
from dse.host_eval import host_call
from dse.report.atomic import write_csv
from dse.spec.hardware import GIB, KIB, MIB, Hardware

FD_STEP = 0.01          # the +-1 % of the finite-difference check (in ln x)
SHOW_MIN = 1e-3         # |elasticity| below this is left off the tornado chart


@dataclasses.dataclass(frozen=True)
class Knob:
    """One direction in hardware space: ``fields`` scaled together by ``exp(u)``
    (``derate``: ``1 - throttle`` scaled instead)."""

    name: str
    fields: tuple[str, ...]
    kind: str                 # rate | latency | capacity | efficiency | discrete | derate | composite
    unit: str = ""            # human unit of ``value`` in the CSV
    scale: float = 1.0        # SI per human unit
    note: str = ""


PEAKS = ("peak_fp32_flops_per_s", "peak_tf32_flops_per_s", "peak_bf16_flops_per_s",
         "peak_fp16_flops_per_s", "peak_fp8_flops_per_s", "peak_fp4_flops_per_s")
RATES = PEAKS + ("hbm_bw_bytes_per_s", "l2_bw_bytes_per_s", "nvlink_bw_bytes_per_s",
                 "nic_bw_bytes_per_s", "sfu_ex2_per_sm_clk")   # the last: the exponential rate
LATENCIES = ("nvlink_latency_s", "nic_latency_s", "kernel_launch_s")

# field -> (kind, unit, SI per unit, note)
_LEAVES = {
    **{p: ("rate", "TFLOP/s", 1e12, "") for p in PEAKS},
    "num_sms": ("discrete", "SMs", 1.0, "peaks held fixed: wave quantization and NCCL SM share only"),
    "clock_hz": ("rate", "GHz", 1e9, "peaks are stored: alone it moves the SFU exponential rate "
                 "only; see the clock composite"),
    "smem_per_sm_bytes": ("capacity", "KiB", KIB, ""),
    "l2_bytes": ("capacity", "MiB", MIB, ""),
    "l2_bw_bytes_per_s": ("rate", "TB/s", 1e12, ""),
    "hbm_bytes": ("capacity", "GiB", GIB, "moves time only through block recompute"),
    "hbm_bw_bytes_per_s": ("rate", "TB/s", 1e12, ""),
    "nvlink_domain_gpus": ("discrete", "GPUs", 1.0, ""),
    "nvlink_bw_bytes_per_s": ("rate", "GB/s", 1e9, "per GPU per direction"),
    "nvlink_latency_s": ("latency", "us", 1e-6, "per hop"),
    "nic_bw_bytes_per_s": ("rate", "GB/s", 1e9, "per GPU per direction"),
    "nic_latency_s": ("latency", "us", 1e-6, "per hop"),
    "tdp_w": ("capacity", "W", 1.0, "not used by the time model"),
    "eff_gemm": ("efficiency", "", 1.0, ""),
    "eff_gemm_fp8": ("efficiency", "", 1.0, ""),
    "eff_gemm_fp4": ("efficiency", "", 1.0, ""),
    "eff_attn": ("efficiency", "", 1.0, ""),
    "eff_attn_bwd": ("efficiency", "", 1.0, ""),
    "eff_attn_fa2": ("efficiency", "", 1.0, "FA2-class kernel speed relative to eff_attn's"),
    "eff_hbm": ("efficiency", "", 1.0, ""),
    "eff_nvlink": ("efficiency", "", 1.0, ""),
    "eff_nic": ("efficiency", "", 1.0, ""),
    "kernel_launch_s": ("latency", "us", 1e-6, ""),
    "tile_m": ("discrete", "", 1.0, ""),
    "tile_n": ("discrete", "", 1.0, ""),
    "gemm_cluster": ("discrete", "SMs", 1.0, ""),
    "host_cpu_slowdown": ("latency", "x", 1.0, "host Python time / an x86 DGX host's"),
    "dram_latency_s": ("latency", "ns", 1e-9, "serving only: the ramp of a CUDA-graph-replayed kernel"),
    "sfu_ex2_per_sm_clk": ("rate", "per SM per clock", 1.0,
                           "softmax exponentials (MUFU.EX2); x SMs x clock = exp/s (dse.cost.rates)"),
}
_SKIP = {"throttle", "throttle_clock", "power_clock", "fp8_transpose"}   # fp8_transpose: a 0/1 flag

KNOBS: tuple[Knob, ...] = tuple(
    [Knob(f, (f,), *_LEAVES[f]) for f in Hardware._leaf_fields if f not in _SKIP]
    + [Knob("1 - throttle", ("throttle",), "derate", "", 1.0,
            "derate factor on HBM bw (and clock-derived rates if throttle_clock)"),
       Knob("clock (+peaks, L2 bw)", ("clock_hz", "l2_bw_bytes_per_s") + PEAKS, "composite",
            note="as the variants 'clock' knob"),
       Knob("num_sms (+peaks)", ("num_sms",) + PEAKS, "composite",
            note="as the variants 'num_sms' knob"),
       Knob("all rates", RATES, "composite", note="every peak and bandwidth"),
       Knob("all latencies", LATENCIES, "composite", note="per-hop and kernel launch")])
_missing = set(Hardware._leaf_fields) - _SKIP - set(_LEAVES)
if _missing:  # a new Hardware leaf must be given a kind and unit here
    raise RuntimeError(f"dse.sensitivity: no knob entry for Hardware fields {sorted(_missing)}")


def perturb(hw: Hardware, u, knobs=KNOBS) -> Hardware:
    """``hw`` with knob ``k`` scaled by ``exp(u[k])`` (composites scale each of their
    fields; ``1 - throttle`` is scaled for the derate knob)."""
    vals = {f: jnp.asarray(getattr(hw, f), jnp.float32) for f in Hardware._leaf_fields}
    for i, kn in enumerate(knobs):
        s = jnp.exp(u[i])
        if kn.kind == "derate":
            vals["throttle"] = 1.0 - (1.0 - vals["throttle"]) * s
        else:
            for f in kn.fields:
                vals[f] = vals[f] * s
    return hw.replace(**vals)


def elasticities(time_fn, hw: Hardware, knobs=KNOBS, h: float = FD_STEP) -> pd.DataFrame:
    """One row per knob: value, AD and finite-difference elasticities of ``time_fn(hw)``
    (a positive JAX scalar, e.g. a step time), and the ``kink`` flag (module docstring).

    ``time_fn`` must be traceable by JAX in its hardware argument."""
    k = len(knobs)
    log_t = lambda u: jnp.log(time_fn(perturb(hw, u, knobs)))
    u0 = jnp.zeros(k, jnp.float32)
    # one design point and 2k perturbations of it: run on the host, no XLA compile
    # (dse.host_eval: the same programs jax.jit would compile, a few seconds cold
    # instead of ~30 s for a large model)
    lt0, g = host_call(jax.value_and_grad(log_t), u0)
    steps = jnp.concatenate([h * jnp.eye(k), -h * jnp.eye(k)]).astype(jnp.float32)
    lts = np.asarray(host_call(jax.vmap(log_t), steps), dtype=np.float64)
    lt0 = float(lt0)
    up, down = (lts[:k] - lt0) / h, (lt0 - lts[k:]) / h
    fd = (lts[:k] - lts[k:]) / (2 * h)
    ad = np.asarray(g, dtype=np.float64)
    tol = lambda a, b: 2e-3 + 0.05 * np.maximum(np.abs(a), np.abs(b))
    kink = (np.abs(ad - fd) > tol(ad, fd)) | (np.abs(up - down) > tol(up, down)) | ~np.isfinite(fd)
    rows = []
    for i, kn in enumerate(knobs):
        if kn.kind == "derate":
            value = 1.0 - float(hw.throttle)
        elif len(kn.fields) == 1:
            value = float(getattr(hw, kn.fields[0])) / kn.scale
        else:
            value = math.nan
        rows.append({"knob": kn.name, "kind": kn.kind, "fields": " ".join(kn.fields),
                     "value": value, "unit": kn.unit, "elasticity_ad": ad[i],
                     "elasticity_fd": fd[i], "elasticity_fd_up": up[i],
                     "elasticity_fd_down": down[i], "kink": bool(kink[i]), "note": kn.note})
    df = pd.DataFrame(rows)
    df.attrs["time_s"] = math.exp(lt0)
    return df


def train_time_fn(model, wl, lay):
    """Hardware -> training step time (s) at a fixed model, workload and layout."""
    from dse.train.step import train_step
    return lambda hw: train_step(model, wl, lay, hw).step_time_s


def infer_time_fn(model, iwl, tp: int, pp: int, metric: str = "decode_s_per_token"):
    """Hardware -> ``decode_s_per_token`` or ``prefill_s`` of one serving replica."""
    from dse.infer.step import inference_step
    return lambda hw: getattr(inference_step(model, iwl, hw, tp, pp), metric)


def out_dir(path: str) -> Path:
    """``-o DIR``: checked now (a file there, or a folder that cannot be made, is bad
    input, exit 2); created by :func:`dse.report.atomic.make_output_dir` only when the
    point is valid, so bad input leaves no folder behind."""
    from dse.report.atomic import check_output_dir
    return check_output_dir(path, "-o", create=False)


# ---------------------------------------------------------------------------- command line

_LAYOUT_FLAGS = ("tp", "pp", "dp", "cp", "ep", "mbs", "vpp", "recompute", "zero")


def register(sub) -> None:
    """Add ``dse sensitivity`` to the CLI's subparsers."""
    from dse.cli_layout import _gpu_count, _positive_int, _zero_stage, seq_arg
    s = sub.add_parser("sensitivity", help="elasticity of step (or decode) time to every "
                       "hardware knob at one layout; CSV + tornado PNG")
    s.add_argument("--model", required=True, help="catalog name, config.json or .toml")
    s.add_argument("--hardware", required=True, help="catalog name or .toml file")
    s.add_argument("--gpus", required=True, type=_gpu_count,
                   help="GPUs (training) or GPUs per replica (--infer)")
    s.add_argument("--global-batch", type=_positive_int, default=1024)
    seq_arg(s)
    s.add_argument("--precision", default="bf16")
    s.add_argument("--attention", default="flash", help="flash | unfused")
    s.add_argument("--framework", default="megatron", help="megatron | deepspeed | fsdp | fsdp2")
    s.add_argument("--tp-overlap", action="store_true", help="TP comm/GEMM overlap (needs --sp)")
    for f in ("tp", "pp", "dp", "cp", "ep", "mbs", "vpp"):
        s.add_argument(f"--{f}", type=_positive_int, default=None)
    s.add_argument("--recompute", default=None, help="none | selective | full | block")
    s.add_argument("--zero", type=_zero_stage, default=None, help="ZeRO stage (0-3)")
    s.add_argument("--sp", action="store_true", help="sequence parallelism")
    s.add_argument("--infer", action="store_true",
                   help="differentiate serving time instead (--tp/--pp, --batch, --prompt, --gen)")
    s.add_argument("--metric", default=None,
                   help="with --infer: decode_s_per_token (default) | prefill_s")
    s.add_argument("--batch", type=_positive_int, default=64,
                   help="with --infer: the batch (with --tp/--pp) or the largest tried")
    s.add_argument("--prompt", type=_positive_int, default=2048)
    s.add_argument("--gen", type=_positive_int, default=256)
    s.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="folder for sensitivity.csv, tornado.png, manifest.json")
    s.set_defaults(fn=cmd_sensitivity)


def layout_name(lay) -> str:
    from dse.spec.layout import RECOMPUTE_NAMES
    return (f"TP{lay.tp} PP{lay.pp} DP{lay.dp} CP{lay.cp} EP{lay.ep} mbs{lay.mbs} vpp{lay.vpp} "
            f"{RECOMPUTE_NAMES[int(lay.recompute)]} ZeRO-{lay.zero}{' SP' if lay.sp else ''}")


def _train_point(a):
    """(model, hw, time_fn, label, mem_bytes, source) of the training point."""
    import argparse

    from dse.cli_layout import resolve_layout
    from dse.spec.layout import RECOMPUTE, Layout
    from dse.sweep.grid import FIELDS
    from dse.train.step import train_step
    require(a.metric is None, "--metric", "metric", "applies only with --infer (training "
            f"sensitivity is of the step time), but got {a.metric!r}")
    explicit = a.sp or any(getattr(a, f) is not None for f in _LAYOUT_FLAGS)
    ns = argparse.Namespace(**vars(a))
    for f in ("tp", "pp", "cp", "ep", "mbs", "vpp"):
        setattr(ns, f, getattr(a, f) or 1)
    ns.recompute = a.recompute or "none"
    ns.zero = 1 if a.zero is None else a.zero
    model, hw, wl, lay = resolve_layout(ns)   # validates the flags (exit 2 if bad)
    source = "layout from the command line"
    if not explicit:
        from dse.sweep.run import sweep
        df = sweep(model, [hw], a.gpus, wl.global_batch, wl.seq_len, wl.precision,
                   attention=wl.attention, framework=wl.framework, tp_overlap=wl.tp_overlap)
        if df.empty or not df["feasible"].any():
            reason = "no valid layout" if df.empty else df["status"].iloc[0]
            raise _NoPoint(f"no feasible layout for {model.name} on {a.gpus} x {hw.name}: {reason}")
        row = df[df["feasible"]].iloc[0]
        kw = {f: int(row[f]) for f in FIELDS if f not in ("recompute", "sp")}
        lay = Layout(**kw, recompute=RECOMPUTE[row["recompute"]], sp=int(bool(row["sp"])))
        source = "fastest feasible layout of `dse sweep`"
    mem = float(train_step(model, wl, lay, hw).mem_bytes)
    return model, hw, train_time_fn(model, wl, lay), layout_name(lay), mem, source, "step time"


def _infer_point(a):
    from dse.infer.step import inference_step
    from dse.infer.sweep import best_inference, replica_layouts, sweep_inference
    from dse.infer.workload import InferenceWorkload
    from dse.spec.hardware import check_precision, get_hardware
    from dse.spec.layout import precision_code
    from dse.spec.model import get_model
    a.metric = a.metric or "decode_s_per_token"
    require(a.metric in ("decode_s_per_token", "prefill_s"), "--metric", "metric",
            f"must be decode_s_per_token or prefill_s, but got {a.metric!r}")
    model, hw = get_model(a.model), get_hardware(a.hardware)
    prec = precision_code(a.precision)
    check_precision(hw, prec, "--precision")
    if a.tp is not None or a.pp is not None:
        tp = a.tp or a.gpus // (a.pp or 1)
        pp = a.pp or a.gpus // tp
        require((tp, pp) in replica_layouts(model, a.gpus), "command line", "tp, pp",
                f"`tp * pp == gpus`, `num_attention_heads % tp == 0` and `pp <= num_layers` "
                f"must hold, but got (tp={tp}, pp={pp}, gpus={a.gpus}, "
                f"num_attention_heads={model.num_attention_heads})")
        batch, source = a.batch, "layout from the command line"
    else:
        df = sweep_inference(model, [hw], a.gpus, a.batch, a.prompt, a.gen, prec)
        best = best_inference(df, "tokens_per_s" if a.metric == "decode_s_per_token" else a.metric)
        if best is None:
            raise _NoPoint(f"no (tp, pp, batch) of {model.name} fits on {a.gpus} x {hw.name}: "
                           f"{df['status'].iloc[0]}")
        tp, pp, batch = int(best["tp"]), int(best["pp"]), int(best["batch"])
        source = "highest-throughput feasible point of `dse infer`"
    iwl = InferenceWorkload(batch=batch, prompt_len=a.prompt, gen_len=a.gen, precision=prec)
    mem = float(inference_step(model, iwl, hw, tp, pp).mem_bytes)
    label = f"TP{tp} PP{pp} batch {batch}, prompt {a.prompt}, gen {a.gen}"
    what = "decode time per token" if a.metric == "decode_s_per_token" else "prefill time"
    return model, hw, infer_time_fn(model, iwl, tp, pp, a.metric), label, mem, source, what


class _NoPoint(Exception):
    pass


def cmd_sensitivity(a) -> int:
    from dse.report.manifest import write_manifest
    from dse.report.tornado import tornado
    out = out_dir(a.output)
    try:
        model, hw, fn, label, mem, source, what = (_infer_point if a.infer else _train_point)(a)
    except _NoPoint as e:
        print(e)
        return 1
    df = elasticities(fn, hw)
    from dse.report.atomic import make_output_dir
    out = make_output_dir(out, "-o")
    t = df.attrs["time_s"]
    fits = mem <= float(hw.hbm_bytes)
    gpus = f"{a.gpus} GPU{'s' if a.gpus > 1 else ''}" + (" per replica" if a.infer else "")
    meta = {"model": model.name, "hardware": hw.name, "gpus": a.gpus, "layout": label,
            "target": what, "time_s": t, "mem_gib": mem / GIB,
            "hbm_gib": float(hw.hbm_bytes) / GIB, "fits": fits}
    full = pd.concat([pd.DataFrame({k: [v] * len(df) for k, v in meta.items()}), df], axis=1)
    write_csv(full, out / "sensitivity.csv", index=False, float_format="%.6g")
    fit_txt = "fits" if fits else "DOES NOT FIT"
    title = (f"Sensitivity of {what}: {model.name} on {gpus} x {hw.name}\n"
             f"layout held fixed: {label} ({source})\n{what} T = {t:.4g} s, "
             f"memory {mem / GIB:.1f} of {float(hw.hbm_bytes) / GIB:.1f} GiB ({fit_txt})")
    xlabel = f"elasticity d ln({what}) / d ln(knob)"
    tornado(df, title, out / "tornado.png", SHOW_MIN, xlabel)
    write_manifest(out, extra={"sensitivity": meta})
    if not a.infer:
        from dse.cli_layout import print_assumptions
        print_assumptions(a, model)
    print(f"{model.name} on {gpus} x {hw.name}, {label} ({source})")
    print(f"  {what} {t:.4g} s; memory per GPU {mem / GIB:.1f} GiB of "
          f"{float(hw.hbm_bytes) / GIB:.1f} GiB ({fit_txt})")
    top = df.reindex(df["elasticity_ad"].abs().sort_values(ascending=False).index).head(8)
    for _, r in top.iterrows():
        print(f"    {r['knob']:<24} AD {r['elasticity_ad']:+.4f}  FD {r['elasticity_fd']:+.4f}"
              f"{'  kink' if r['kink'] else ''}")
    print(f"  {int(df['kink'].sum())} knob(s) where AD and +-1% finite differences disagree (kink)")
    print(f"wrote {out / 'sensitivity.csv'}, {out / 'tornado.png'}")
    return 0 if fits else 1
