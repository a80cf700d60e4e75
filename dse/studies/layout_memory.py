"""Where memory decides a layout study's answer: the configurations where no layout fits
(a memory cliff) and those whose best layout is far below its series' MFU.

For each (hardware, GPU count, sequence length, global batch) of the sweep:

* ``least_mem_gib`` / ``least_mem_layout``: the layout that needs the least memory per
  GPU (feasible or not; every layout is in the sweep with its need), against
  ``hbm_gib`` and ``usable_gib = (1 - margin) x HBM`` (:mod:`dse.train.memory_parts`);
* where nothing fits within the margin but the least need is within the raw HBM, the
  same configuration swept again with **no** margin (``sweep(..., mem_margin=0)``): the
  fastest layout that would then run (``no_margin_layout``, its step time and MFU).
  That is what a planner without a margin would pick -- the layout memory forces (often
  full recompute on the highest TP x PP), usually at a fraction of the MFU of its
  neighbours;
* ``low_mfu``: a configuration that fits but whose best layout's MFU is below
  ``LOW_MFU_FRAC`` of the median best MFU of its (hardware, sequence length) series;
  its recompute mode and memory (need vs usable) are reported beside it.

Everything is computed from the sweep; nothing here is a fixed string about one row.
"""

from __future__ import annotations

import pandas as pd

from dse.spec.hardware import GIB
from dse.studies.common import layout_label
from dse.sweep.run import sweep
from dse.train.memory_parts import MEM_MARGIN

KEYS = ["hardware", "gpus", "seq_len", "global_batch"]
#: a fitting configuration is "low MFU" below this fraction of its series' median MFU
LOW_MFU_FRAC = 0.75


def memory_limits(full: pd.DataFrame, summary: pd.DataFrame, wl, margin: float = MEM_MARGIN) -> pd.DataFrame:
    """One row per configuration that is memory-limited (no fit, or low MFU); columns as
    the module docstring.  Empty when every configuration fits at a normal MFU."""
    hws = {h.name: h for h in wl.hardware}
    med = summary.groupby(["hardware", "seq_len"])["mfu"].median()
    best = summary.set_index(KEYS)
    rows = []
    for key, g in full.groupby(KEYS, sort=True):
        hw_name, gpus, seq, gbs = key
        hbm = float(hws[hw_name].hbm_bytes) / GIB
        usable = hbm * (1.0 - margin)
        least = g.loc[g["mem_gib"].idxmin()]
        r = {"hardware": hw_name, "gpus": int(gpus), "seq_len": int(seq), "global_batch": int(gbs),
             "hbm_gib": hbm, "usable_gib": usable, "margin": margin,
             "least_mem_gib": float(least["mem_gib"]), "least_mem_layout": layout_label(least),
             "fits": bool(g["feasible"].any()), "low_mfu_frac": LOW_MFU_FRAC}
        if not r["fits"]:
            r["kind"] = "no layout fits"
            if r["least_mem_gib"] <= hbm and margin > 0:
                raw = sweep(wl.model, [hws[hw_name]], int(gpus), int(gbs), int(seq), wl.precision, mem_margin=0.0)
                ok = raw[raw["feasible"]]
                if len(ok):
                    b = ok.iloc[0]
                    r.update(no_margin_layout=layout_label(b), no_margin_recompute=str(b["recompute"]),
                             no_margin_step_time_s=float(b["step_time_s"]), no_margin_mfu=float(b["mfu"]),
                             no_margin_mem_gib=float(b["mem_gib"]), no_margin_fitting=int(len(ok)))
            rows.append(r)
            continue
        b = best.loc[key]
        m = float(med.loc[(hw_name, seq)])
        if float(b["mfu"]) < LOW_MFU_FRAC * m:
            r.update(kind="low MFU", best_layout=str(b["layout"]), best_recompute=str(b["recompute"]),
                     best_mfu=float(b["mfu"]), best_mem_gib=float(b["mem_gib"]), series_median_mfu=m)
            rows.append(r)
    return pd.DataFrame(rows)
