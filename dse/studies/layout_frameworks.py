"""Pure ZeRO-3 data parallelism against the best hybrid layout under every framework
profile (:mod:`dse.spec.frameworks`), at the layout study's published cases.

Per published case (hardware, GPU count, sequence length) and per profile, one sweep
with that profile's ``Workload.framework`` (the megatron profile reuses the study's own
sweep):

* **pure ZeRO-3**: the fastest feasible layout with TP = PP = CP = 1 and ZeRO-3 (best
  micro-batch and recompute), as the study's ``speedup_vs_zero3_dp`` baseline;
* **best hybrid**: the fastest feasible layout the framework can run: the sweep
  enumerates only those (:mod:`dse.spec.layout_rules`: under the deepspeed profile a
  layout with PP > 1 must have ZeRO <= 1, as DeepSpeed's pipeline engine asserts);
* ``ratio = t_zero3 / t_hybrid``, and per breakdown term (``dse.train.step`` BREAKDOWN)
  ``delta = term(zero3) - term(hybrid)``: the term with the largest delta is the one that
  explains the ratio; the most negative one (``offset_term``) is what the hybrid pays
  that pure ZeRO-3 does not (TP communication, its GEMMs' smaller shapes, the bubble);
* ``needed_extra_s``: how many more seconds per step the ZeRO-3 layout would have to
  spend (e.g. exposed gathers) for the published ratio: ``r_pub x t_hybrid - t_zero3``.
"""

from __future__ import annotations

import pandas as pd

from dse.report.plots import BREAKDOWN_LABELS
from dse.spec.layout import FRAMEWORK_NAMES
from dse.studies.common import layout_label
from dse.sweep.run import sweep

BREAKDOWN = list(BREAKDOWN_LABELS)


def compare(df: pd.DataFrame, framework: int, published: float) -> dict:
    """The row of one (case, framework): ZeRO-3 and hybrid layouts, times, ratio, deltas."""
    ok = df[df["feasible"].astype(bool)].sort_values("step_time_s", kind="stable")
    z = ok[(ok.tp == 1) & (ok.pp == 1) & (ok.cp == 1) & (ok.zero == 3)]
    r = {"framework": FRAMEWORK_NAMES[framework], "published_ratio": published}
    if not len(ok) or not len(z):
        r["status"] = "no layout fits" if not len(ok) else "pure ZeRO-3 DP does not fit"
        return r
    h, z = ok.iloc[0], z.iloc[0]
    th, tz = float(h["step_time_s"]), float(z["step_time_s"])
    deltas = {c: float(z[c]) - float(h[c]) for c in BREAKDOWN}
    top = max(deltas, key=lambda c: abs(deltas[c]))
    back = min(deltas, key=lambda c: deltas[c])      # what the hybrid pays that ZeRO-3 does not
    r.update(status="ok", zero3_layout=layout_label(z), zero3_step_time_s=tz, zero3_mem_gib=float(z["mem_gib"]),
             hybrid_layout=layout_label(h), hybrid_step_time_s=th, hybrid_mem_gib=float(h["mem_gib"]),
             ratio=tz / th, gap_s=tz - th, top_term=top, top_term_delta_s=deltas[top],
             offset_term=back, offset_term_delta_s=deltas[back],
             needed_extra_s=published * th - tz if published else float("nan"),
             zero3_recompute=str(z["recompute"]), hybrid_recompute=str(h["recompute"]),
             **{f"delta_{c}": v for c, v in deltas.items()},
             **{f"zero3_{c}": float(z[c]) for c in BREAKDOWN}, **{f"hybrid_{c}": float(h[c]) for c in BREAKDOWN})
    return r


def framework_table(wl, published: pd.DataFrame, full: pd.DataFrame) -> pd.DataFrame:
    """One row per (published case, framework profile); empty without published cases."""
    if published is None or not len(published):
        return pd.DataFrame()
    hws = {h.name: h for h in wl.hardware}
    rows = []
    cases = published.drop_duplicates(["hardware", "gpus", "seq_len", "global_batch"])
    for _, p in cases.iterrows():
        sel = ((full["hardware"] == p["hardware"]) & (full["gpus"] == p["gpus"])
               & (full["seq_len"] == p["seq_len"]) & (full["global_batch"] == p["global_batch"]))
        for fw in sorted(FRAMEWORK_NAMES):
            df = full[sel] if fw == 0 else sweep(wl.model, [hws[p["hardware"]]], int(p["gpus"]),
                                                 int(p["global_batch"]), int(p["seq_len"]), wl.precision,
                                                 framework=fw)
            rows.append({"hardware": p["hardware"], "gpus": int(p["gpus"]), "seq_len": int(p["seq_len"]),
                         "global_batch": int(p["global_batch"]),
                         **compare(df, fw, float(p["published_speedup"]))})
    return pd.DataFrame(rows)
