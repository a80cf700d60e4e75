"""Files of a codesign study (dse/studies/codesign.py) from its
:class:`~dse.report.results.CodesignResults`: ``trials.csv``, ``reference_points.csv``,
``pareto.png``, ``report.md`` and ``manifest.json``."""

from __future__ import annotations

from pathlib import Path

from dse.report.atomic import write_csv, write_text
from dse.report.codesign_plots import pareto_plot
from dse.report.manifest import write_manifest
from dse.report.results import CodesignResults


def write(res: CodesignResults) -> Path:
    out = res.head.out
    write_csv(res.trials, out / "trials.csv", index=False)
    write_csv(res.refs, out / "reference_points.csv", index=False)
    pareto_plot(res.done, res.refs, f"{res.model_name} training on {res.gpus} GPUs (seq {res.seq_len}, global "
                f"batch {res.global_batch}): \n{len(res.done)} hardware designs around {res.base.name}, each with "
                "its best layout", out / "pareto.png")
    write_text(out / "report.md", report(res))
    write_manifest(out, res.head.study_file, {"storage": res.storage, "trials": int(len(res.trials)),
                                              "search_seconds": round(res.search_s, 1)})
    return out


def report(res: CodesignResults) -> str:
    d = {"name": res.head.name, "description": res.head.description}
    done, refs, url, base, gpus = res.done, res.refs, res.storage, res.base, res.gpus
    KNOB_UNITS = res.knob_units
    front = done[done["pareto"]].sort_values("cluster_cost")
    pcols = [c for c in done.columns if c in KNOB_UNITS]
    lines = [f"# {d['name']}: {d.get('description', '')}", "",
             f"{len(done)} completed trials (Optuna, batched ask/tell; storage `{url}`; run time in "
             "`manifest.json`). "
             f"Each trial is a variant of `{base.name}`; the layout is re-optimized for every trial by the "
             "vectorized sweep. Cost is the linear proxy declared in the study file (arbitrary units, "
             f"x {gpus} GPUs).", "", "![pareto](pareto.png)", "", "## Pareto front", "",
             "| step time (s) | cluster cost | " + " | ".join(f"{c} ({KNOB_UNITS[c]})" if KNOB_UNITS[c] else c
                                                   for c in pcols) + " |",
             "|---|---|" + "---|" * len(pcols)]
    for _, r in front.iterrows():
        lines.append(f"| {r['step_time_s']:.3f} | {r['cluster_cost']:.0f} | " +
                     " | ".join(f"{r[c]:.3g}" for c in pcols) + " |")
    if len(refs):
        lines += ["", "## Reference designs (same workload, same cost proxy)", "",
                  "| design | step time (s) | cluster cost |", "|---|---|---|"]
        for _, r in refs.iterrows():
            lines.append(f"| {r['name']} | {r['step_time_s']:.3f} | {r['cluster_cost']:.0f} |")
    lines += ["", f"Browse the trials: `make dashboard STUDY={d['name']}`. Resume or add trials: run "
              f"`make study STUDY={d['name']}` again (the study's trial target is study-wide); more workers: "
              f"`dse study studies/{d['name']}.toml --storage <same URL>` in another shell or machine.", ""]
    return "\n".join(lines)
