"""Files of a faults study (dse/studies/faults.py) from its
:class:`~dse.report.results.FaultsResults`: ``summary.csv``, ``simulations.csv``,
``faults.png``, ``report.md`` and ``manifest.json``."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from dse.report.atomic import save_fig, write_csv, write_text
from dse.report.manifest import write_manifest
from dse.report.results import FaultsResults


def write(res: FaultsResults) -> Path:
    out = res.head.out
    write_csv(res.summary, out / "summary.csv", index=False)
    timing = ["wall_s", "events_per_s"]       # volatile: in the untracked manifest only
    write_csv(res.simulations.drop(columns=timing, errors="ignore"), out / "simulations.csv", index=False)
    _plot(res.summary, out / "faults.png", res.title)
    sims = res.simulations
    write_text(out / "report.md", report(res))
    write_manifest(out, res.head.study_file, {
        "elapsed_s": res.elapsed_s, "topology": res.topology,
        "simulator_events_per_s_median": float(sims["events_per_s"].median()) if len(sims) else None,
        "simulator_wall_s_max": float(sims["wall_s"].max()) if len(sims) else None,
        "simulator_runs": [{"scenario": str(r["scenario"]), "layout": str(r["layout"]),
                            "wall_s": float(r["wall_s"]), "events_per_s": float(r["events_per_s"])}
                           for _, r in sims.iterrows()]})
    return out


def _plot(summ: pd.DataFrame, png: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    x = np.arange(len(summ))
    fig, ax = plt.subplots(figsize=(10, 5.2))
    wd = 0.38
    fix = summ["fixed_step_s"].replace(math.inf, np.nan)
    rec = summ["rechosen_step_s"].replace(math.inf, np.nan)
    b1 = ax.bar(x - wd / 2, fix, wd, label=f"vectorized screen's best layout, held fixed ({summ['fixed_layout'][0]})",
                color="#4c72b0")
    b2 = ax.bar(x + wd / 2, rec, wd, label="fastest simulated candidate under the scenario (re-chosen)",
                color="#dd8452")
    for bars in (b1, b2):
        for b in bars:
            hgt = b.get_height()
            if np.isfinite(hgt):
                ax.text(b.get_x() + b.get_width() / 2, hgt, f"{hgt:.2f}", ha="center",
                        va="bottom", fontsize=7)
    def wrap(lbl: str) -> str:
        w = lbl.split()
        return " ".join(w[:3]) + "\n" + " ".join(w[3:])

    ticks = [f"{s}\nre-chosen: " + ("same" if r == summ["fixed_layout"][0] else "\n" + wrap(r))
             for s, r in zip(summ["scenario"], summ["rechosen_layout"])]
    ax.set_xticks(x, ticks, fontsize=7)
    ax.set_ylabel("simulated step time (s)")
    ax.set_xlabel("fault scenario")
    top = np.nanmax(np.concatenate([fix.to_numpy(), rec.to_numpy()]))
    ax.set_ylim(0, top * 1.25)
    ax.set_title(f"Simulated step time under single faults\n{title}", fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    save_fig(fig, png, dpi=130)
    plt.close(fig)


def _ratio_range(healthy: pd.DataFrame, interleaved: bool) -> str:
    """"a% to b%" (simulated / vectorized - 1) over the healthy rows with (or without)
    ``vpp`` in the layout label; "none" if there are no such rows."""
    sel = healthy["layout"].str.contains("vpp") == interleaved
    r = (healthy["simulated_step_s"] / healthy["vectorized_step_s"] - 1.0)[sel]
    if not len(r):
        return "none among the candidates"
    return f"{r.min():+.1%} to {r.max():+.1%}"


def report(res: FaultsResults) -> str:
    summ, simdf, title, cand, distinct, plain = (res.summary, res.simulations, res.title, res.candidates,
                                                 res.distinct, res.plain)

    def fmt(v):
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    def md(df):
        cols = list(df.columns)
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in df.itertuples(index=False)]
        return "\n".join(lines)

    healthy = simdf[simdf["scenario"] == "healthy"]
    agree = (healthy["simulated_step_s"] / healthy["vectorized_step_s"] - 1).abs().max()
    if res.pinned:
        who = f"Candidates: the {len(cand)} layout(s) pinned by `[study] layouts` (no screen).  Each is"
    else:
        who = (f"Candidates: the {len(cand)} fastest feasible layouts of the vectorized screen, one per\n"
               f"distinct ({distinct}) combination{f' ({plain})' if plain else ''}.  Each is")
    text = f"""# Faults study

{title}.

{who}
replayed by the event-driven simulator (flow-level, max-min link sharing) on a topology
built from the hardware's NVLink domain and NIC bandwidth (effective bandwidths, as the
cost model uses them), healthy and under each scenario's faults.  "Fixed" keeps the
vectorized screen's best layout; "re-chosen" is the fastest simulated candidate under the
scenario (healthy included, so the two can differ even without a fault).

Packet loss is applied to every scale-out link with go-back-N recovery (RoCE NICs),
window 64 packets: goodput = (1-p)/(1-p+64p) = 0.61 of the link bandwidth at p = 1%.

## Summary

{md(summ)}

![faults](faults.png)

## All simulations

{md(simdf.drop(columns=["wall_s", "events_per_s"]))}

Healthy simulated vs vectorized step time: largest relative difference {agree:.1%}.

Simulator speed and the study's run time are in `manifest.json` (and per simulation in
`simulations.csv`).
The full micro-batch count is simulated (no reduction); the simulator's symmetry
coalescing (one representative per rank class, flows of every group kept) is what keeps
a 1024-GPU step to seconds.

Interleaved candidates (`vpp > 1`) are generated with Megatron's interleaved 1F1B schedule
(`vpp` model chunks per rank, micro-batches in groups of `pp`, asynchronous p2p on
communication streams; `dse.trace.generate`).  Healthy simulated / vectorized step time:
{_ratio_range(healthy, True)} for the interleaved candidates, {_ratio_range(healthy, False)}
for the others (the replay slows compute by the SM share of the collectives it
overlaps, as the cost model does).  The differences come from the DP-overlap terms of the
vectorized model
(`dse/train/step.py`): it credits interleaved layouts only the 1F1B overlap window
(the simulated schedule hides more of a ZeRO-0/1 gradient reduction behind the other
chunks' passes), and its ZeRO-2 term has no per-pass tail (the reduce-scatter of the
last layer of every backward pass cannot overlap).  A fault splits the classes it
touches, which costs more classes but no approximation at the faulty ranks.
"""
    return text
