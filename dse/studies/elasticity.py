"""Elasticities of a study's step time to the hardware knobs at a chosen layout, for the
hbm3d and codesign reports: which knob matters at the layout the study picked.

The definitions are :mod:`dse.sensitivity`'s (``e = d ln T / d ln x``, knobs
:data:`dse.sensitivity.KNOBS` moved by :func:`dse.sensitivity.perturb`), restricted to the
**design knobs** a hardware designer sets: rates, capacities, latencies, the throttle
derate and the clock composite (efficiency constants, tile shapes, the ``clock_hz``
label -- the peaks are stored, not derived -- and ``tdp_w``, which is not in the time
model, are left out).  Two ways, as ``dse sensitivity`` does:

* ``elasticity_ad``: forward-mode automatic differentiation (``jax.jacfwd``) of
  ``ln T(u)`` through the cost model.  It is the same derivative ``dse sensitivity``
  takes with reverse-mode ``jax.grad``; for the dozen design knobs forward mode compiled
  several times faster on CPU (measured at hbm3d's 256-GPU point over every knob: 46 s against
  139 s on a loaded 2-core machine).  A study asks for it at one or two layouts, so the
  Jacobian's jaxpr now runs on the host (:func:`dse.host_eval.host_call`, as ``dse
  sensitivity`` does) instead of being compiled: ``make study STUDY=hbm3d`` from an empty
  JAX cache 83.5 -> 60.2 s on the 2-core machine, its tracked outputs byte-identical;
* ``elasticity_fd``: the +-1 % central finite difference, evaluated by the sweep's
  already-compiled kernel on the perturbed hardware (:func:`dse.sweep.run.sweep_points`,
  one layout, 2 x knobs hardware rows: no new compile), with the one-sided halves.

``kink`` is set as in :func:`dse.sensitivity.elasticities` (AD and FD, or the two one-sided
differences, differ by more than ``2e-3 + 5 %``); ``elasticity`` is the value a report
quotes: the AD slope, or the finite difference at a kink.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from dse.host_eval import host_call
from dse.sensitivity import FD_STEP, KNOBS, perturb
from dse.spec.hardware import Hardware
from dse.spec.layout import RECOMPUTE, Layout, Workload
from dse.studies.common import layout_label
from dse.sweep.run import sweep_points

DESIGN_KINDS = ("rate", "capacity", "latency", "derate")
NOT_DESIGN = ("clock_hz", "tdp_w")
DESIGN_COMPOSITES = ("clock (+peaks, L2 bw)",)
DESIGN_KNOBS = tuple(k for k in KNOBS if (k.kind in DESIGN_KINDS and k.name not in NOT_DESIGN)
                     or k.name in DESIGN_COMPOSITES)


def row_layout(row) -> Layout:
    """A sweep row's layout as a :class:`~dse.spec.layout.Layout`."""
    rc = row["recompute"]
    return Layout(tp=int(row["tp"]), pp=int(row["pp"]), dp=int(row["dp"]), cp=int(row["cp"]),
                  ep=int(row.get("ep", 1)), mbs=int(row["mbs"]), vpp=int(row["vpp"]),
                  recompute=RECOMPUTE[rc] if isinstance(rc, str) else int(rc), zero=int(row["zero"]),
                  sp=int(bool(row["sp"])))


def _layout_cols(lay: Layout) -> dict[str, np.ndarray]:
    return {f: np.asarray([int(getattr(lay, f))], dtype=np.int32)
            for f in ("tp", "pp", "dp", "cp", "ep", "mbs", "vpp", "recompute", "zero", "sp")}


def _log_t(u, model, wl, lay, hw, knobs):
    from dse.train.step import train_step
    return jnp.log(train_step(model, wl, lay, perturb(hw, u, knobs)).step_time_s)


@functools.lru_cache(maxsize=None)
def _jacobian(knobs):
    """``jax.jacfwd`` of :func:`_log_t` in ``u`` for these knobs: one function per knob set,
    so :func:`dse.host_eval.host_call` keeps one host plan for every layout and hardware of
    the same structure (the layout and hardware are traced arguments, not constants)."""
    return jax.jacfwd(functools.partial(_log_t, knobs=knobs))


def at_layout(model, wl: Workload, hw: Hardware, row, knobs=DESIGN_KNOBS, h: float = FD_STEP,
              **meta) -> pd.DataFrame:
    """One row per knob (value, ``elasticity_ad``, ``elasticity_fd`` and its halves, ``kink``,
    ``elasticity``) of the step time at ``row``'s layout on ``hw``, with ``meta`` columns
    (e.g. ``gpus``), the hardware, the layout label and the step time in front."""
    lay = row_layout(row)
    k = len(knobs)
    u0 = np.zeros(k, np.float32)
    # one design point: its Jacobian run on the host (dse.host_eval: the program jax.jit
    # would compile, without the ~10-20 s compile, which a study's one or two calls never pay back)
    ad = np.asarray(host_call(_jacobian(tuple(knobs)), u0, model, wl, lay, hw.replace(name="hw")),
                    dtype=np.float64)
    steps = np.concatenate([np.zeros((1, k)), h * np.eye(k), -h * np.eye(k)]).astype(np.float32)
    hws = [perturb(hw, jnp.asarray(u), knobs).replace(name=f"p{i}") for i, u in enumerate(steps)]
    sr = sweep_points(model, wl, hws, _layout_cols(lay))
    lts = np.log(np.asarray(sr.result["step_time_s"], dtype=np.float64))
    lt0 = lts[0]
    up, down = (lts[1:k + 1] - lt0) / h, (lt0 - lts[k + 1:]) / h
    fd = (lts[1:k + 1] - lts[k + 1:]) / (2 * h)
    tol = lambda a, b: 2e-3 + 0.05 * np.maximum(np.abs(a), np.abs(b))     # as dse.sensitivity
    kink = (np.abs(ad - fd) > tol(ad, fd)) | (np.abs(up - down) > tol(up, down)) | ~np.isfinite(fd)
    rows = []
    for i, kn in enumerate(knobs):
        value = (1.0 - float(hw.throttle) if kn.kind == "derate" else
                 float(getattr(hw, kn.fields[0])) / kn.scale if len(kn.fields) == 1 else math.nan)
        rows.append({"knob": kn.name, "kind": kn.kind, "fields": " ".join(kn.fields), "value": value,
                     "unit": kn.unit, "elasticity_ad": ad[i], "elasticity_fd": fd[i],
                     "elasticity_fd_up": up[i], "elasticity_fd_down": down[i], "kink": bool(kink[i]),
                     "elasticity": fd[i] if kink[i] else ad[i], "design": True, "note": kn.note})
    df = pd.DataFrame(rows)
    head = {"hardware": hw.name, **meta, "layout": layout_label(row), "step_time_s": float(math.exp(lt0))}
    for i, (key, v) in enumerate(head.items()):
        df.insert(i, key, v)
    return df


#: study knob (dse.spec.variants / codesign [knobs]) -> (sensitivity knob, reader's name)
STUDY_KNOBS = {"hbm_bw": ("hbm_bw_bytes_per_s", "HBM bandwidth"), "hbm_capacity": ("hbm_bytes", "HBM capacity"),
               "l2": ("l2_bytes", "L2 capacity"), "l2_bw": ("l2_bw_bytes_per_s", "L2 bandwidth"),
               "nvlink_bw": ("nvlink_bw_bytes_per_s", "NVLink bandwidth"),
               "nic_bw": ("nic_bw_bytes_per_s", "NIC bandwidth"), "clock": ("clock (+peaks, L2 bw)", "clock"),
               "throttle": ("1 - throttle", "1 - throttle"), "num_sms": ("num_sms (+peaks)", "SM count")}


def named(keys) -> dict[str, str]:
    """{sensitivity knob: reader's name} for the study knobs in ``keys`` (others ignored)."""
    return {STUDY_KNOBS[k][0]: STUDY_KNOBS[k][1] for k in keys if k in STUDY_KNOBS}
