"""Files of a codesign study (dse/studies/codesign.py) from its
:class:`~dse.report.results.CodesignResults`: ``trials.csv``, ``reference_points.csv``,
``pareto.png``, (``elasticities.csv``, ``tornado.png``), ``report.md`` and
``manifest.json``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dse.report import elasticity as el
from dse.report.atomic import write_csv, write_text
from dse.report.codesign_plots import pareto_plot
from dse.report.manifest import write_manifest
from dse.report.markdown import md_table
from dse.report.results import CodesignResults

FMT = {"step_time_s": "{:.3f}", "cluster_cost": "{:.0f}", "energy_kwh_per_mtok": "{:.3f}",
       "usd_per_mtok": "{:.3f}", "gpu_power_w": "{:.0f}", "tdp_w": "{:.0f}"}
HEAD = {"step_time_s": "step time (s)", "cluster_cost": "cluster cost", "energy_kwh_per_mtok": "kWh / Mtok",
        "usd_per_mtok": "USD / Mtok", "gpu_power_w": "W / GPU", "tdp_w": "TDP (W)"}


def write(res: CodesignResults) -> Path:
    out = res.head.out
    write_csv(res.trials, out / "trials.csv", index=False)
    write_csv(res.refs, out / "reference_points.csv", index=False)
    pareto_plot(res.done, res.refs, f"{res.model_name} training on {res.gpus} GPUs (seq {res.seq_len}, global "
                f"batch {res.global_batch}): {len(res.done)} hardware designs around {res.base.name}, each with "
                "its best layout", out / "pareto.png", res.objectives, res.objective_labels)
    if res.elastic is not None and len(res.elastic):
        write_csv(res.elastic, out / "elasticities.csv", index=False, float_format="%.6g")
        r = res.elastic.iloc[0]
        el.tornado_png(res.elastic, f"Step-time elasticities of {res.base.name} (the search's base), {res.gpus} "
                       f"GPUs, seq {res.seq_len}, global batch {res.global_batch}\nlayout held fixed: {r['layout']} "
                       f"(its fastest); T = {r['step_time_s']:.4g} s; design knobs", out / "tornado.png")
    write_text(out / "report.md", report(res))
    write_manifest(out, res.head.study_file, {"storage": res.storage, "trials": int(len(res.trials)),
                                              "search_seconds": round(res.search_s, 1)})
    return out


def _cell(c: str, v) -> str:
    return FMT.get(c, "{:.3g}").format(v) if isinstance(v, (int, float, np.floating)) and np.isfinite(v) else "–"


def extremes_sentence(front, objectives, labels) -> str:
    """What the front spans, per objective, and what the best design for each costs in the others."""
    if not len(front):
        return "No trial completed."
    parts = []
    for o in objectives:
        b = front.loc[front[o].idxmin()]
        others = ", ".join(f"{HEAD.get(p, p)} {_cell(p, b[p])}" for p in objectives if p != o)
        parts.append(f"the lowest {HEAD.get(o, o)} on the front is {_cell(o, b[o])} (at {others})")
    return "Over the front, " + "; ".join(parts) + "."


def report(res: CodesignResults) -> str:
    done, refs, url, base, gpus = res.done, res.refs, res.storage, res.base, res.gpus
    obj = list(res.objectives)
    KNOB_UNITS = res.knob_units
    front = done[done["pareto"]].sort_values(obj[1:] + obj[:1]).drop_duplicates(subset=obj)
    pcols = [c for c in done.columns if c in KNOB_UNITS]
    per_tok = any(o in ("energy_kwh_per_mtok", "usd_per_mtok") for o in obj)
    lines = [f"# {res.head.name}: {res.head.description}", "",
             f"{len(done)} completed trials (Optuna, batched ask/tell; storage `{url}`; run time in "
             "`manifest.json`). "
             f"Each trial is a variant of `{base.name}`; the layout is re-optimized for every trial by the "
             "vectorized sweep. Objectives (all minimized, chosen by `[search] objectives`): "
             + ", ".join(f"`{o}`" for o in obj) + ". Cost is the linear proxy declared in the study file "
             f"(arbitrary units, x {gpus} GPUs)."]
    if per_tok and res.tco:
        t = res.tco
        lines[-1] += (" Energy per million tokens: board power from the trial's clock and HBM bandwidth "
                      "(`dse/cost/energy.py`: HBM at 3.9 pJ/bit, the rest as clock cubed), averaged over "
                      "the step by `dse/cost/energy.py` (idle + utilization), times PUE "
                      f"{t['pue']:g}. Cost per million tokens: GPU-hours x (the proxy x {t['usd_per_cost_unit']:g} "
                      f"USD per unit over {t['amortization_years']:g} years) + energy x {t['usd_per_kwh']:g} USD/kWh. "
                      "Reference designs use their catalog TDP.")
    lines += ["", "![pareto](pareto.png)", "", "## Pareto front", "",
              f"{int(done['pareto'].sum())} non-dominated trials ({len(front)} distinct); "
              + extremes_sentence(front, obj, res.objective_labels), "",
              "| " + " | ".join(HEAD.get(o, o) for o in obj) + " | "
              + " | ".join(f"{c} ({KNOB_UNITS[c]})" if KNOB_UNITS[c] else c for c in pcols) + " |",
              "|" + "---|" * (len(obj) + len(pcols))]
    for _, r in front.iterrows():
        lines.append("| " + " | ".join(_cell(o, r[o]) for o in obj) + " | "
                     + " | ".join(f"{r[c]:.3g}" for c in pcols) + " |")
    if len(refs):
        cols = [c for c in ["step_time_s", "cluster_cost", "energy_kwh_per_mtok", "usd_per_mtok", "tdp_w",
                            "gpu_power_w"] if c in refs]
        lines += ["", "## Reference designs (same workload, same cost proxy and prices)", "",
                  "| design | " + " | ".join(HEAD.get(c, c) for c in cols) + " |", "|---|" + "---|" * len(cols)]
        for _, r in refs.iterrows():
            lines.append(f"| {r['name']} | " + " | ".join(_cell(c, r[c]) for c in cols) + " |")
    e = res.elastic
    if e is not None and len(e):
        r = e.iloc[0]
        lines += ["", "## Which knob matters at the base design (automatic differentiation)", "",
                  f"Elasticity d ln T / d ln knob of {base.name}'s step time at its fastest layout ({r['layout']}, "
                  f"T = {r['step_time_s']:.4g} s), by forward-mode AD through the cost model, checked against a "
                  "±1 % finite difference (`dse/studies/elasticity.py`; all knobs: `dse sensitivity`).", "",
                  md_table(el.top_table(e)), "", el.sentence(e, f"At {base.name}", res.elastic_named), "",
                  "![tornado](tornado.png)"]
    lines += ["", f"Browse the trials: `make dashboard STUDY={res.head.name}`. Resume or add trials: run "
              f"`make study STUDY={res.head.name}` again (the study's trial target is study-wide); more workers: "
              f"`dse study studies/{res.head.name}.toml --storage <same URL>` in another shell or machine.", ""]
    return "\n".join(lines)
