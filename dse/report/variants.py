"""Files of a variants study (dse/studies/variants.py) from its
:class:`~dse.report.results.VariantsResults`: ``sweep.parquet``, ``summary.csv``,
``sensitivity.csv``, (``inference_sensitivity.csv``), the plots, ``report.md`` and
``manifest.json``.

Every sentence of ``report.md`` that states a number is computed from the results, and
every sentence that names a physical reason (compute-bound, bandwidth-bound, the
throttle slowed compute) is stated only when the numbers support it
(:mod:`dse.report.regimes`); otherwise the report says what the numbers are."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from dse.report import elasticity as el
from dse.report import variants_infer as infer
from dse.report.atomic import write_csv, write_parquet, write_text
from dse.report.manifest import write_manifest
from dse.report.markdown import md_table, pct, pct_span, ratios, span, x
from dse.report.plots import BREAKDOWN_LABELS, breakdown_bars, grouped_bar_panels
from dse.report.regimes import (COMPUTE_BOUND_MAX_HBM_SHARE, DILUTION_MIN, LOSES_LITTLE, SHARE_AGREE_TOL,
                                attention_intensity, compute_bound, far_beyond, gemm_intensity,
                                implied_share, implied_share_clock, l2_negligible, throttle_verdict)
from dse.report.results import VariantsResults
from dse.spec.hardware import GIB, MIB, Hardware
from dse.spec.layout import PRECISION_NAMES
from dse.spec.variants import describe

BREAKDOWN = list(BREAKDOWN_LABELS)


def write(res: VariantsResults) -> Path:
    out = res.head.out
    write_parquet(res.full, out / "sweep.parquet", index=False)
    write_csv(res.sens, out / "sensitivity.csv", index=False)
    if res.inf_sens is not None:
        write_csv(res.inf_sens, out / "inference_sensitivity.csv", index=False)
    write_csv(res.summary, out / "summary.csv", index=False)
    plots = plot_all(res, out)
    plots["tornado"] = elasticity_files(res, out)
    write_text(out / "report.md", report(res, plots))
    write_manifest(out, res.head.study_file,
                   {"points": int(len(res.full)), "sweep_seconds": round(res.sweep_s, 2),
                    "inference_seconds": round(res.infer_s, 2),
                    "variants": {h.name: h.description for h in res.study.hws}})
    return out


# ---------------------------------------------------------------- elasticities

def elasticity_files(res: VariantsResults, out: Path) -> list[str]:
    """``elasticities.csv`` and one tornado chart per GPU count; returns the PNG names."""
    e = res.elastic
    if e is None or not len(e):
        return []
    write_csv(e, out / "elasticities.csv", index=False, float_format="%.6g")
    names = []
    for gpus, g in e.groupby("gpus", sort=True):
        r = g.iloc[0]
        fn = f"tornado_{gpus}gpus.png"
        el.tornado_png(g, f"Step-time elasticities of {r['hardware']}"
                       f"{'' if 'baseline' in r['hardware'] else ' (the baseline)'}, {gpus} GPUs, "
                       f"{r['workload']}\nlayout held fixed: {r['layout']} (its fastest); T = "
                       f"{r['step_time_s']:.4g} s; design knobs only (all knobs in elasticities.csv)", out / fn)
        names.append(fn)
    return names


def elasticity_section(res: VariantsResults) -> list[str]:
    e = res.elastic
    if e is None or not len(e):
        return []
    L = ["## Which hardware knob matters (automatic differentiation)", "",
         "Elasticity d ln T / d ln knob of the baseline's step time at its fastest layout, by forward-mode automatic "
         "differentiation (`jax.jacfwd`) through the cost model (`dse/studies/elasticity.py`, the knobs and "
         "definitions of `dse/sensitivity.py`), checked against a ±1 % central finite difference; where they "
         "disagree (`kink`: a roofline max, a wave-quantization step or an algorithm switch sits at the point) the "
         "finite difference is quoted. -1 = the step halves when the knob doubles; design knobs only here, every "
         "knob in `elasticities.csv`.", ""]
    missing = [g for g in res.study.breakdown_gpus if g not in set(e["gpus"])]
    if missing:
        L += [f"No elasticities at {', '.join(map(str, missing))} GPUs: the baseline has no layout that fits there.", ""]
    for gpus, g in e.groupby("gpus", sort=True):
        png = f"tornado_{gpus}gpus.png"      # as elasticity_files names it
        r = g.iloc[0]
        L += [f"**{gpus} GPUs**, layout {r['layout']}, T = {r['step_time_s']:.4g} s:", "",
              md_table(el.top_table(g)), "",
              el.sentence(g, f"At {gpus} GPUs", res.elastic_named), "", f"![tornado]({png})", ""]
    return L


# ---------------------------------------------------------------- plots

def short(name: str) -> str:
    """``"C: 3D HBM 4x BW"`` -> ``"C"`` (the part before a colon), for plot labels."""
    return name.split(":", 1)[0].strip() or name


def plot_all(res: VariantsResults, out: Path) -> dict:
    """Speedup panels per training workload, a breakdown per chosen GPU count, and the
    inference speedups; returns {kind: [file names]}."""
    study, train, inf_tab = res.study, res.train, res.inf_tab
    wl = study.wl
    others = [h.name for h in study.hws if h.name != study.baseline]
    files: dict[str, list[str]] = {"speedup": [], "breakdown": [], "inference": []}
    wls = list(dict.fromkeys(train["workload"]))
    prec = PRECISION_NAMES[wl.precision]
    for k, wlab in enumerate(wls):
        t = train[(train["workload"] == wlab) & train["variant"].isin(others)]
        base = train[(train["workload"] == wlab) & (train["variant"] == study.baseline)]
        missing = {}
        for g in base[base["layout"] == ""]["gpus"]:
            fits = t[(t["gpus"] == g) & (t["layout"] != "")]["variant"].map(short).tolist()
            missing[int(g)] = "baseline:\nno layout\nfits in HBM" + (f"\n(fits on {', '.join(fits)})" if fits else "")
        fn = "speedup.png" if len(wls) == 1 else f"speedup_{k}.png"
        grouped_bar_panels(
            [(t, "each variant's own fastest layout (re-optimized)"),
             (t.assign(speedup_reoptimized=t["speedup_at_baseline_layout"]),
              "baseline's fastest layout held fixed on every variant")],
            "gpus", "variant", "speedup_reoptimized", "number of GPUs",
            "training speedup over baseline (x)",
            f"{wl.model.name} {wlab}, {prec}: speedup of each GPU variant over\n"
            f"'{study.baseline}' at the same GPU count (dashed: 1.0 = no gain)", out / fn, ref_line=1.0,
            missing=missing)
        files["speedup"].append(fn)
        for gpus in study.breakdown_gpus:
            g = train[(train["workload"] == wlab) & (train["gpus"] == gpus)]
            rows, labels, unfit = [], [], []
            for _, r in g.iterrows():
                if not r["layout"]:
                    unfit.append(short(r["variant"]))
                else:
                    rows.append(r[BREAKDOWN])
                    labels.append(f"{short(r['variant'])} | own best: {r['layout']}")
                if (r["variant"] != study.baseline and r.get("baseline_layout")
                        and r["baseline_layout"] != r["layout"]
                        and np.isfinite(r["step_time_at_baseline_layout_s"])):
                    rows.append(pd.Series({c: r[f"{c}_at_baseline_layout"] for c in BREAKDOWN}))
                    labels.append(f"{short(r['variant'])} | baseline's layout: {r['baseline_layout']}")
            if not rows:
                continue
            fn = f"breakdown_{gpus}gpus.png" if len(wls) == 1 else f"breakdown_{k}_{gpus}gpus.png"
            breakdown_bars(pd.DataFrame(rows).reset_index(drop=True), labels,
                           f"{wl.model.name} {wlab}, {prec}, {gpus} GPUs: time per training step on each "
                           f"variant\n(its own fastest layout, and the baseline's layout where that differs)"
                           + (f"\nno layout fits memory on: {', '.join(unfit)}" if unfit else ""),
                           out / fn)
            files["breakdown"].append(fn)
    if inf_tab is not None and len(inf_tab):
        files["inference"] += infer.plot(inf_tab, study, out)
    return files


# ---------------------------------------------------------------- tables

def hardware_table(study) -> pd.DataFrame:
    rows = []
    for h, t in zip(study.hws, study.tables):
        clk = 1 - float(h.throttle) * float(h.throttle_clock)
        rows.append({"variant": h.name, "base": t.get("base", ""), "changes": describe(t),
                     "HBM GiB": float(h.hbm_bytes) / GIB,
                     "HBM TB/s (nominal)": float(h.hbm_bw_bytes_per_s) / 1e12,
                     "HBM TB/s (effective)": float(h.hbm_bw_bytes_per_s) * (1 - float(h.throttle)) / 1e12,
                     "L2 MiB": float(h.l2_bytes) / MIB,
                     "bf16 TFLOP/s (effective)": float(h.peak_bf16_flops_per_s) * clk / 1e12})
    return pd.DataFrame(rows)


def baseline_table(train: pd.DataFrame, sens: pd.DataFrame, baseline: str) -> pd.DataFrame:
    b = train[(train["variant"] == baseline) & (train["layout"] != "")]
    rows = []
    for _, r in b.iterrows():
        s = sens[(sens["workload"] == r["workload"]) & (sens["gpus"] == r["gpus"])]
        t = r["step_time_s"]
        row = {"workload": r["workload"], "GPUs": r["gpus"], "layout": r["layout"], "step s": t,
               "mem GiB": r["mem_gib"]}
        for c in BREAKDOWN:
            if np.nansum(b[c]) > 0:
                row[BREAKDOWN_LABELS[c] + " %"] = 100 * r[c] / t
        row["HBM-bound %"] = 100 * float(s["hbm_bound_share"].iloc[0]) if len(s) else np.nan
        row["L2-capacity-bound %"] = 100 * float(s["l2_capacity_bound_share"].iloc[0]) if len(s) else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def layout_diff(rb, r) -> str:
    """What changed between the baseline's best layout ``rb`` and the variant's ``r``
    (fields, then the breakdown terms that moved by more than 1 % of the baseline's step)."""
    names = {"tp": "TP", "pp": "PP", "dp": "DP", "cp": "CP", "mbs": "mbs", "vpp": "vpp",
             "recompute": "recompute", "zero": "ZeRO", "sp": "SP"}
    iv = lambda v: str(int(v)) if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) \
        else str(v)
    f = [f"{n} {iv(rb[k])}→{iv(r[k])}" for k, n in names.items() if k in r and k in rb and iv(rb[k]) != iv(r[k])]
    t = [f"{BREAKDOWN_LABELS[c]} {float(rb[c]):.3g} → {float(r[c]):.3g} s" for c in BREAKDOWN
         if abs(float(r[c]) - float(rb[c])) > 0.01 * float(rb["step_time_s"])]
    return ", ".join(f) + (" — " + "; ".join(t) if t else "")


def _seq_of(study, workload: str) -> int:
    """The sequence length of a training workload label (``train seq S, global batch B``)."""
    for s in study.wl.seq_lens:
        if workload.startswith(f"train seq {s},"):
            return s
    return study.wl.seq_lens[0]


def kernel_intensities(study, train: pd.DataFrame, base: Hardware) -> dict:
    """At the baseline's best layouts: the smallest arithmetic intensity of the FC1 GEMM and
    of causal FlashAttention (compulsory traffic) and the baseline's ridge point; a GEMM or
    attention is called compute-bound only when its intensity is above the ridge."""
    b = train[(train["variant"] == base.name) & (train["layout"] != "")]
    ridge = float(base.peak_bf16_flops_per_s) / (float(base.hbm_bw_bytes_per_s) * (1 - float(base.throttle)))
    gemm = [gemm_intensity(study.wl.model, _seq_of(study, r["workload"]), int(r["mbs"]), int(r["tp"]),
                           int(r["cp"]))[0] for _, r in b.iterrows()]
    att = [attention_intensity(_seq_of(study, r["workload"]), int(r["cp"])) for _, r in b.iterrows()]
    return {"ridge": ridge, "gemm_min": min(gemm, default=np.nan), "attention_min": min(att, default=np.nan)}


def _twin(hw: Hardware, hws) -> Hardware | None:
    """The unthrottled variant with the same nominal rates as ``hw`` (its twin), if any."""
    for h in hws:
        if (h.name != hw.name and float(h.throttle) == 0
                and all(float(getattr(h, a)) == float(getattr(hw, a))
                        for a in ("hbm_bw_bytes_per_s", "hbm_bytes", "l2_bytes", "peak_bf16_flops_per_s",
                                  "clock_hz", "nvlink_bw_bytes_per_s", "nic_bw_bytes_per_s"))):
            return h
    return None


# ---------------------------------------------------------------- per-variant text

def variant_paragraph(study, train, sens, hw: Hardware, base: Hardware) -> list[str]:
    """Why this variant helps or not, from the breakdown columns and the diagnostics."""
    name, bname = hw.name, base.name
    rt = ratios(hw, base)
    t = train[train["variant"] == name]
    tb = train[train["variant"] == bname].set_index(["workload", "gpus"])
    L = [f"### {name}", "",
         f"*{hw.description}.* Re-optimized speedup {span(t['speedup_reoptimized'])}, at the baseline's "
         f"layout {span(t['speedup_at_baseline_layout'])} over "
         f"{', '.join(map(str, t.loc[np.isfinite(t['speedup_reoptimized']), 'gpus'].unique()))} GPUs "
         "(the GPU counts where both fit).", ""]
    # what moved, at the breakdown GPU counts, baseline layout held fixed
    for g in study.breakdown_gpus:
        for _, r in t[t["gpus"] == g].iterrows():
            key = (r["workload"], g)
            if key not in tb.index or not tb.loc[key, "layout"]:
                continue
            rb = tb.loc[key]
            if not np.isfinite(r.get("step_time_at_baseline_layout_s", np.nan)):
                continue
            moved = []
            for c in BREAKDOWN:
                a, v = float(rb[c]), float(r[f"{c}_at_baseline_layout"])
                if abs(v - a) > 1e-3 * rb["step_time_s"]:
                    moved.append(f"{BREAKDOWN_LABELS[c]} {a:.3g} → {v:.3g} s")
            L.append(f"- At {g} GPUs, baseline's layout ({rb['layout']}): step {rb['step_time_s']:.3g} → "
                     f"{r['step_time_at_baseline_layout_s']:.3g} s; "
                     + ("; ".join(moved) if moved else "no term of the breakdown moves") + ".")
            if r["layout"] and r["layout"] != rb["layout"]:
                L.append(f"  Re-optimized, the variant prefers {r['layout']} ({r['mem_gib']:.1f} GiB per GPU): "
                         f"{r['step_time_s']:.3g} s.")
    L.append("")
    if not math.isclose(rt["hbm_bw"], 1.0, rel_tol=1e-6):
        L += hbm_paragraph(study, train, sens, hw, base, t, rt)
    if not math.isclose(rt["hbm_capacity"], 1.0, rel_tol=1e-6):
        L += capacity_paragraph(train, hw, base, t, tb, rt)
    if not math.isclose(rt["l2"], 1.0, rel_tol=1e-6):
        L += l2_paragraph(study, train, sens, hw, base, rt)
    for k, what in (("peak", "effective tensor peak"), ("nvlink_bw", "NVLink bandwidth"), ("nic_bw", "NIC bandwidth")):
        if not math.isclose(rt[k], 1.0, rel_tol=1e-6) and not (k == "peak" and rt["throttle_clock"]):
            L.append(f"{what} is {rt[k]:.2f}x the baseline's; see the moved terms above "
                     + ("(compute_s scales with it)." if k == "peak" else "(TP/PP/DP communication terms)."))
            L.append("")
    return L


def hbm_paragraph(study, train, sens, hw, base, t, rt) -> list[str]:
    """A faster (or throttled) HBM: the unlimited-HBM probe brackets the gain (see
    dse.studies.variants); which kernels are memory-bound is stated from their
    intensities, the dilution at large GPU counts from the speedups."""
    r_eff = rt["hbm_bw"]
    lo, hi, got = [], [], []
    for _, r in t.iterrows():
        s = sens[(sens["workload"] == r["workload"]) & (sens["gpus"] == r["gpus"])]
        if len(s) and np.isfinite(r["speedup_at_baseline_layout"]) and rt["peak"] == 1:
            sh = float(s["hbm_bound_share"].iloc[0])
            lo.append(1 / (1 - sh * (1 - 1 / r_eff)))
            hi.append(1 / (1 - sh))
            got.append(r["speedup_at_baseline_layout"])
    sh = sens["hbm_bound_share"]
    thr = (f" (nominal {float(hw.hbm_bw_bytes_per_s) / float(base.hbm_bw_bytes_per_s):.2f}x, "
           f"throttled by {100 * rt['throttle']:.0f} %"
           + (", clocks derated too" if rt["throttle_clock"] else ", clocks untouched") + ")"
           if rt["throttle"] > 0 else "")
    split = []
    for g in study.breakdown_gpus:
        s = sens[sens["gpus"] == g]
        if len(s):
            s = s.iloc[0]
            saved = s["step_time_s"] - s["step_time_unlimited_hbm_bw_s"]
            rest = saved - s["compute_hbm_bound_s"] - s["optimizer_s"]
            tail = (f"the rest, {rest:.2g} s, in recompute and the bubble" if rest >= 0.0 else
                    f"and {-rest:.2g} s of it given back elsewhere in the step (the terms that do not "
                    "shrink with HBM time, exposed communication first, show once the compute "
                    "under them is shorter)")
            split.append(f"at {g} GPUs {saved:.3g} s of {s['step_time_s']:.3g} s, {s['compute_hbm_bound_s']:.3g} s "
                         f"of it inside compute, the optimizer step {s['optimizer_s']:.2g} s, {tail}")
    ki = kernel_intensities(study, train, base)
    if ki["gemm_min"] > ki["ridge"] and ki["attention_min"] > ki["ridge"]:
        kernels = ("That part is the memory-bound kernels: the element-wise ones inside compute (norms, residual "
                   "adds, rotary, SwiGLU, cross-entropy) and the optimizer step; GEMMs and FlashAttention at these "
                   "sizes are compute-bound. ")
    else:
        kernels = ("That part is the memory-bound kernels: the element-wise ones inside compute (norms, residual "
                   "adds, rotary, SwiGLU, cross-entropy), the optimizer step, and kernels whose arithmetic "
                   f"intensity is below the baseline's ridge point {ki['ridge']:.0f} FLOP/byte (at the baseline's "
                   f"layouts the MLP up-projection reaches ~{ki['gemm_min']:.0f}, causal FlashAttention "
                   f"~{ki['attention_min']:.0f} FLOP/byte with compulsory traffic). ")
    # dilution: the speedup at the largest GPU count against the best over the counts
    fx = t[np.isfinite(t["speedup_at_baseline_layout"])].sort_values("gpus", kind="stable")
    if len(fx) > 1 and fx["speedup_at_baseline_layout"].iloc[-1] < fx["speedup_at_baseline_layout"].max() * (
            1 - DILUTION_MIN):
        dilute = (" Communication, bubble and the network terms do not depend on HBM bandwidth, so at large GPU "
                  "counts, where they take a bigger share, the gain is diluted.")
    elif len(fx) > 1:
        dilute = (" Communication, bubble and the network terms do not depend on HBM bandwidth; over these GPU "
                  f"counts the gain does not shrink at the largest count ({x(fx['speedup_at_baseline_layout'].iloc[-1])} "
                  f"at {int(fx['gpus'].iloc[-1])} GPUs, at most {x(fx['speedup_at_baseline_layout'].max())}).")
    else:
        dilute = " Communication, bubble and the network terms do not depend on HBM bandwidth."
    L = [f"Effective HBM bandwidth is **{r_eff:.2f}x** the baseline's{thr}. Only the HBM-bound part of "
         f"the step gets faster: with *unlimited* HBM bandwidth the baseline's step would shrink by "
         f"{pct_span(sh.min(), sh.max())} (`hbm_bound_share` in `sensitivity.csv`; "
         + "; ".join(split) + "). " + kernels
         + (f"With an r = {r_eff:.2f}x faster HBM the gain at a fixed layout lies between "
            f"`1 / (1 - s (1 - 1/r))` = {span(lo)} and `1 / (1 - s)` = {span(hi)}; the model gives "
            f"{span(got)}." if got else "")
         + dilute]
    if rt["throttle_clock"] and rt["throttle"] > 0:
        tw = _twin(hw, study.hws)
        slower = ""
        if tw is not None:
            a = t.set_index(["workload", "gpus"])["speedup_reoptimized"]
            b = train[train["variant"] == tw.name].set_index(["workload", "gpus"])["speedup_reoptimized"]
            both = pd.concat([a, b], axis=1, keys=["v", "twin"]).dropna()
            if len(both) and (both["v"] < both["twin"]).all():
                slower = f": the variant is slower than its unthrottled twin ({tw.name})"
            elif len(both):
                slower = (f"; against its unthrottled twin ({tw.name}) it is {span(both['v'] / both['twin'])} "
                          "as fast")
        L.append(f"The throttle also derates the clocks by {100 * rt['throttle']:.0f} %, so the compute-bound "
                 f"GEMMs slow down by the same factor{slower}.")
    L.append("")
    return L


def capacity_paragraph(train, hw, base, t, tb, rt) -> list[str]:
    rows = t.merge(tb[["layout", "step_time_s", "recompute"]].rename(
        columns={"layout": "b_layout", "step_time_s": "b_t", "recompute": "b_recompute"}),
        left_on=["workload", "gpus"], right_index=True)
    fits_only = rows[(rows["b_layout"] == "") & (rows["layout"] != "")]
    changed = rows[(rows["b_layout"] != "") & (rows["layout"] != rows["b_layout"])
                   & (rows["speedup_reoptimized"] >= 1.005)]
    same = rows[(rows["b_layout"] != "") & ~rows.index.isin(changed.index)]
    fixed = rows[np.isfinite(rows["speedup_at_baseline_layout"])]
    moved = fixed[(fixed["speedup_at_baseline_layout"] - 1).abs() > 1e-6]
    if not len(moved):
        head = ("Capacity changes no kernel time and no communication time (the fixed-layout speedup is exactly "
                "1); it only admits layouts that did not fit.")
    else:
        block = moved["b_recompute"] == "block"
        why = ("block recompute keeps more layers' activations when more HBM is free, so it recomputes less"
               if block.all() else "the memory-dependent terms move")
        head = (f"Capacity changes no kernel time and no communication time, but the fixed-layout speedup is "
                f"{span(moved['speedup_at_baseline_layout'])}, not 1, at "
                f"{', '.join(map(str, sorted(moved['gpus'].unique())))} GPUs: there {why}. Otherwise it only "
                "admits layouts that did not fit.")
    L = [f"HBM capacity is **{rt['hbm_capacity']:.2f}x** ({float(hw.hbm_bytes) / GIB:.0f} GiB). " + head
         + " It therefore helps exactly where memory forced the baseline into a worse layout:"]
    for _, r in fits_only.iterrows():
        L.append(f"- {r['gpus']} GPUs: the baseline has **no** layout that fits; this variant runs "
                 f"{r['layout']} at {r['mem_gib']:.0f} GiB per GPU ({r['step_time_s']:.0f} s per step).")
    for _, r in changed.iterrows():
        rb = tb.loc[(r["workload"], r["gpus"])]
        L.append(f"- {r['gpus']} GPUs: {r['b_layout']} ({r['b_t']:.3g} s) → {r['layout']} "
                 f"({r['mem_gib']:.0f} GiB > {float(base.hbm_bytes) / GIB:.0f} GiB; {r['step_time_s']:.3g} s), "
                 f"**{r['speedup_reoptimized']:.2f}x**: {layout_diff(rb, r)}.")
    if len(same):
        L.append(f"- {', '.join(map(str, sorted(same['gpus'].unique())))} GPUs: speedup "
                 f"{span(same['speedup_reoptimized'])}. The model states per GPU shrink as 1/(TP·PP·DP) with "
                 "the distributed optimizer, so at these counts the baseline's best layout is already (nearly) "
                 "unconstrained by memory; a layout that needs more than its HBM is no faster, or only "
                 "marginally.")
    L.append("")
    return L


def l2_paragraph(study, train, sens, hw, base, rt) -> list[str]:
    b0 = train[(train["variant"] == base.name) & (train["layout"] != "")].iloc[0]
    sh = sens["l2_capacity_bound_share"]
    tp, mbs, cp = int(b0["tp"]), int(b0["mbs"]), int(b0["cp"])
    seq = _seq_of(study, b0["workload"])
    ai, M = gemm_intensity(study.wl.model, seq, mbs, tp, cp)
    ridge = float(base.peak_bf16_flops_per_s) / (float(base.hbm_bw_bytes_per_s) * (1 - float(base.throttle)))
    m = study.wl.model
    gemm = (f"For {m.name} the GEMMs are huge: the MLP up-projection at {M:.0f} tokens x {m.hidden_size} x "
            f"{m.ffn_hidden_size * (1 + m.gated_mlp) // tp} (TP{tp}) has an arithmetic intensity of ~{ai:.0f} "
            f"FLOP/byte even with compulsory traffic only, far above the baseline's ridge point {ridge:.0f} "
            "FLOP/byte, so it is compute-bound with any L2."
            if ai > ridge else
            f"For {m.name} the MLP up-projection at {M:.0f} tokens x {m.hidden_size} x "
            f"{m.ffn_hidden_size * (1 + m.gated_mlp) // tp} (TP{tp}) has an arithmetic intensity of ~{ai:.0f} "
            f"FLOP/byte with compulsory traffic, not above the baseline's ridge point {ridge:.0f} FLOP/byte, so "
            "its HBM traffic, which a bigger L2 can cut, may set its time.")
    tail = (" This variant would matter for small GEMMs (decode at small batch, small hidden sizes), not here."
            if l2_negligible(float(sh.max())) else
            f" Here that is at least {pct(sh.min())} of the step, so the L2 size matters for this workload.")
    return [f"L2 is **{rt['l2']:.2f}x** ({float(hw.l2_bytes) / MIB:.0f} MiB). A bigger L2 only cuts the HBM "
            "traffic of GEMMs that re-read their operands (`dse/cost/gemm.py`: traffic "
            "`MN + max(MK + KN, 2MNK/b)`, b = sqrt(L2/3) elements); it matters only where that traffic, not "
            f"the FLOPs, sets the time. {gemm} Even an unlimited L2 "
            f"would save {pct_span(sh.min(), sh.max())} of the step (`l2_capacity_bound_share`); the "
            "element-wise kernels stream data once and get nothing from a cache." + tail, ""]


# ---------------------------------------------------------------- against the published figure

def _decode_range(inf_tab, variant: str) -> np.ndarray:
    if inf_tab is None or not len(inf_tab):
        return np.array([])
    it = inf_tab[(inf_tab["variant"] == variant) & inf_tab["workload"].str.startswith("inference decode")]
    v = it["speedup_reoptimized"].to_numpy(dtype=float)
    return v[np.isfinite(v)]


def published_section(study, train, sens, inf_tab, inf_sens=None) -> list[str]:
    """Our speedups against the published ones, and what the published numbers imply.
    Each explanation is conditional on the numbers: "compute-bound" only when the
    HBM-bound share is below :data:`~dse.report.regimes.COMPUTE_BOUND_MAX_HBM_SHARE`,
    "decode" only when our decode range holds a published figure, "the throttle slowed
    compute too" only when :func:`~dse.report.regimes.throttle_verdict` says so."""
    if not study.published:
        return []
    hws = {h.name: h for h in study.hws}
    base = hws[study.baseline]
    rows, implied = [], {}
    for p in study.published:
        hw = hws[p["variant"]]
        rt = ratios(hw, base)
        t = train[train["variant"] == p["variant"]]
        P = float(p["speedup"])
        r_eff = rt["hbm_bw"]
        row = {"variant": p["variant"], "published": x(P), "published metric": p.get("metric", "not stated"),
               "ours: training, re-optimized": span(t["speedup_reoptimized"]),
               "ours: training, baseline layout": span(t["speedup_at_baseline_layout"])}
        if inf_tab is not None and len(inf_tab):
            it = inf_tab[inf_tab["variant"] == p["variant"]]
            row["ours: decode"] = span(it[it["workload"].str.startswith("inference decode")]["speedup_reoptimized"])
            row["ours: prefill"] = span(it[it["workload"].str.startswith("inference prefill")]["speedup_reoptimized"])
        if r_eff > 1:
            implied[p["variant"]] = implied_share(P, r_eff)
            row["implied HBM-bound share"] = pct(implied[p["variant"]])
        rows.append(row)
    sh = sens["hbm_bound_share"]
    sh_max = float(sh.max())
    pub = {p["variant"]: float(p["speedup"]) for p in study.published}
    ours_max = {v: float(np.nanmax(train[train["variant"] == v]["speedup_reoptimized"].to_numpy(dtype=float)))
                for v in pub}
    all_far = bool(implied) and all(far_beyond(s, sh_max) for s in implied.values())
    need = "; ".join(f"{r['variant']}'s published {r['published']} needs {r['implied HBM-bound share']} of the time "
                     "to be HBM-bound" for r in rows if "implied HBM-bound share" in r)
    if need:
        need += ", far beyond that." if all_far else f", against at most {pct(sh_max)} here."
    gbs = ", ".join(map(str, study.wl.global_batches))
    m = study.wl.model.name
    b = train[(train["variant"] == study.baseline) & (train["layout"] != "")]
    tokens = (b["mbs"] * b["workload"].map(lambda w: _seq_of(study, w)) / b["cp"]).min() if len(b) else np.nan
    per_gpu = "with thousands of tokens per GPU" if tokens >= 1000 else f"with {tokens:.0f} tokens per micro-batch"
    lower = all(np.isfinite(ours_max[v]) and ours_max[v] < P for v, P in pub.items())
    head = "**Why ours is lower for training.**" if lower else "**Training.**"
    if compute_bound(sh_max):
        regime = (f"{head} Training {m} at global batch {gbs} runs GEMMs {per_gpu}: it is compute-bound. Only "
                  f"{pct_span(sh.min(), sh.max())} of the baseline step is HBM-bound, so even infinite "
                  f"bandwidth could give at most {x(1 / (1 - sh_max))}; ")
    else:
        regime = (f"{head} Training {m} at global batch {gbs} runs GEMMs {per_gpu}; "
                  f"{pct_span(sh.min(), sh.max())} of the baseline step is HBM-bound (not below the "
                  f"{pct(COMPUTE_BOUND_MAX_HBM_SHARE)} this report calls compute-bound), so even infinite "
                  f"bandwidth could give at most {x(1 / (1 - sh_max))}; ")
    # decode as the published workload: only when our decode range holds a published figure
    in_decode = [v for v, P in pub.items() if len(_decode_range(inf_tab, v))
                 and _decode_range(inf_tab, v).min() <= P <= _decode_range(inf_tab, v).max()]
    if all_far and in_decode:
        verdict = (" That is the regime of autoregressive *decoding*, where every generated token re-reads all "
                   "weights and the KV cache at a few FLOPs per byte; the published figure is most plausibly for "
                   "inference (decode) or another bandwidth-bound workload, not for large-batch training.")
    elif all_far and inf_tab is not None and len(inf_tab):
        verdict = (" The published figure is not for a workload like this training step; our decode model does "
                   "not reproduce it either (next paragraphs), so which workload it is remains open.")
    elif all_far:
        verdict = (" The published figure is not for a workload like this training step; this study has no "
                   "`[inference]` results to test whether it is for decoding.")
    else:
        verdict = (" The published figure is within what this training step's HBM-bound share allows, so it "
                   "need not come from another workload.")
    L = ["## Against the published figure", "",
         "The published figure for this study reports the speedups below. The `implied HBM-bound share` is the "
         "fraction s of the published workload's time that must scale with HBM bandwidth for the number to come "
         "out if time splits additively into a bandwidth-bound part and the rest: `speedup = 1 / (1 - s + s / r)`, "
         "r the variant's effective bandwidth ratio.", "",
         md_table(pd.DataFrame(rows)), "", regime + need + verdict]
    L += throttle_paragraphs(study, train, implied, pub)
    if inf_tab is not None and len(inf_tab):
        L += decode_comparison(study, inf_tab, inf_sens, implied, pub)
    L.append("")
    return L


def _throttled_pairs(study, implied: dict, pub: dict) -> list[tuple]:
    """(throttled variant, its published unthrottled twin, theta, s_bandwidth_only, s_clock,
    s_twin) for every published throttled variant whose twin is published too."""
    hws = {h.name: h for h in study.hws}
    base = hws[study.baseline]
    out = []
    for v, P in pub.items():
        hw = hws[v]
        theta = float(hw.throttle)
        if theta <= 0 or v not in implied:
            continue
        tw = _twin(hw, [hws[u] for u in pub if u != v])
        if tw is None or tw.name not in implied:
            continue
        s_clk = implied_share_clock(P, ratios(hw, base)["hbm_bw"], theta)
        out.append((v, tw.name, theta, implied[v], s_clk, implied[tw.name]))
    return out


def throttle_paragraphs(study, train, implied: dict, pub: dict) -> list[str]:
    """What the published throttled figure says about how its throttle worked: stated
    only as far as the implied shares agree (within SHARE_AGREE_TOL) with the twin's."""
    pairs = _throttled_pairs(study, implied, pub)
    if not pairs:
        return []
    hws = {h.name: h for h in study.hws}
    tol = pct(SHARE_AGREE_TOL).replace(" %", " points")
    L = []
    for v, twin, theta, s_bw, s_clk, s_twin in pairs:
        verdict = throttle_verdict(s_twin, s_bw, s_clk)
        differ = "different shares" if verdict in ("clock", "neither") else "shares within " + tol
        s = (f"Under a bandwidth-only throttle the published numbers imply {differ} ({twin} implies "
             f"{pct(s_twin)}; {v} implies {pct(s_bw)})"
             + (", i.e. they cannot both come from one workload with that throttle. " if verdict in ("clock", "neither")
                else ", consistent with one workload under that throttle. ")
             + "If the throttle derated the clocks as well (`throttle_clock = true`: compute slows by the "
             f"same factor), the implied shares become {v}: {pct(s_clk)}")
        if verdict == "clock":
            s += (" — consistent with the unthrottled figure. So the published throttle most likely slowed "
                  "compute too.")
        elif verdict == "bandwidth":
            s += (f", {abs(s_clk - s_twin) * 100:.1f} points from the unthrottled figure; so the published "
                  "throttle most likely derated HBM bandwidth only.")
        elif verdict == "both":
            s += ", also within " + tol + " of the unthrottled figure: the numbers cannot tell how it was applied."
        else:
            s += (f", also more than {tol} from the unthrottled figure's {pct(s_twin)}: neither reading fits, "
                  "so the numbers do not tell how the published throttle was applied.")
        hw = hws[v]
        if not float(hw.throttle_clock):
            a = train[train["variant"] == v].set_index(["workload", "gpus"])["speedup_reoptimized"]
            b = train[train["variant"] == twin].set_index(["workload", "gpus"])["speedup_reoptimized"]
            keep = (a / b).dropna()
            s += " Our variant follows the study brief (throttle on HBM bandwidth only)"
            if len(keep) and (keep >= LOSES_LITTLE).all():
                s += ", which is why our throttled variant loses little against its unthrottled twin."
            else:
                s += f"; it keeps {span(keep)} of its unthrottled twin's speed."
        L += ["", s]
    return L


def decode_comparison(study, inf_tab, inf_sens, implied: dict, pub: dict) -> list[str]:
    """The published numbers against our decode speedups; "points to a throttle that also
    slowed the clocks" only when the throttled figure lies below our decode range while its
    unthrottled twin's lies inside, and our throttle derates bandwidth only."""
    cmp, where = [], {}
    for v, P in pub.items():
        d = _decode_range(inf_tab, v)
        if not len(d):
            continue
        where[v] = "inside" if d.min() <= P <= d.max() else "below" if P < d.min() else "above"
        cmp.append(f"{v}: published {P:.2f}x is {where[v]} our decode range {span(d)}")
    if not cmp:
        return []
    cfg = study.inference
    dec = inf_sens[inf_sens["phase"] == "decode"] if inf_sens is not None and len(inf_sens) else pd.DataFrame()
    dec_max = float(dec["hbm_bound_share"].max()) if len(dec) else np.nan
    need_min = min(implied.values()) if implied else np.nan
    if np.isfinite(dec_max) and np.isfinite(need_min) and dec_max >= need_min - SHARE_AGREE_TOL:
        regime = "is the bandwidth-bound regime the published numbers need"
    elif np.isfinite(dec_max):
        regime = (f"is at most {pct(dec_max)} HBM-bound on the baseline, less than the published numbers need "
                  f"(at least {pct(need_min)})")
    else:
        regime = "is compared with the published numbers"
    s = (f"**Against our inference model.** Decoding {cfg['model'].name} on {cfg['gpus_per_replica']} GPUs "
         f"per replica (next section) {regime}: " + "; ".join(cmp) + ".")
    hws = {h.name: h for h in study.hws}
    for v, twin, *_ in _throttled_pairs(study, implied, pub):
        if where.get(v) == "below" and where.get(twin) == "inside" and not float(hws[v].throttle_clock):
            s += (" Where the published throttled figure lies below our range, that again points to a throttle "
                  "that also slowed the clocks (ours derates HBM bandwidth only, as the study brief defines "
                  f"{short(v)}).")
    return ["", s]


# ---------------------------------------------------------------- report.md

COMM_TERMS = ("tp_comm_s", "cp_comm_s", "ep_comm_s", "pp_comm_s", "dp_comm_s", "bubble_s")


def comm_share_sentence(train: pd.DataFrame, baseline: str) -> str:
    """"Their share grows with the GPU count" only where the baseline's communication +
    bubble share does grow (over all counts, or from the count where it is smallest on)."""
    b = train[(train["variant"] == baseline) & (train["layout"] != "")]
    if b["workload"].nunique() != 1 or len(b) < 2:
        return ""
    b = b.sort_values("gpus", kind="stable")
    share = (b[[c for c in COMM_TERMS if c in b]].sum(axis=1) / b["step_time_s"]).to_numpy(dtype=float)
    gpus = b["gpus"].to_numpy()
    why = ("fewer tokens per GPU per step, same gradient volume per GPU), so a gain that acts on compute alone "
           "is diluted at large GPU counts.")
    if np.all(np.diff(share) >= 0) and share[-1] > share[0]:
        return "Their share grows with the GPU count (" + why
    k = int(np.argmin(share))
    if k < len(share) - 1 and np.all(np.diff(share[k:]) >= 0) and share[-1] > share[k]:
        before = ", ".join(f"{pct(v)} at {g} GPUs ({lay})" for v, g, lay in
                           zip(share[:k], gpus[:k], b["layout"].to_numpy()[:k]))
        return (f"Their share (with the bubble) grows with the GPU count from {gpus[k]} GPUs on ({pct(share[k])} → "
                f"{pct(share[-1])} at {gpus[-1]} GPUs: " + why
                + f" Below that count it is larger: {before}.")
    return ("Their share (with the bubble) does not grow steadily with the GPU count here: "
            + ", ".join(f"{pct(v)} at {g}" for v, g in zip(share, gpus)) + " GPUs.")


def report(res: VariantsResults, plots: dict) -> str:
    study, train, sens = res.study, res.train, res.sens
    inf_tab, inf_sens, inf_note = res.inf_tab, res.inf_sens, res.inf_note
    wl = study.wl
    base = {h.name: h for h in study.hws}[study.baseline]
    others = [h for h in study.hws if h.name != study.baseline]

    def piv(col):
        t = train[train["variant"] != study.baseline]
        idx = ["workload", "variant"] if t["workload"].nunique() > 1 else ["variant"]
        p = t.pivot_table(index=idx, columns="gpus", values=col, sort=False, dropna=False)
        if len(idx) == 1:
            p = p.reindex([h.name for h in others])
        return p.apply(lambda c: c.map(lambda v: f"{v:.2f}" if np.isfinite(v) else "–")).reset_index()
    L = [f"# {res.head.name}: {res.head.description}", "",
         f"Workload: **{wl.model.name}** training ({wl.model.num_params() / 1e9:.1f} B parameters), sequence length "
         f"{', '.join(map(str, wl.seq_lens))}, global batch {', '.join(map(str, wl.global_batches))} sequences, "
         f"on {', '.join(map(str, wl.gpus))} GPUs. Baseline: **{study.baseline}**. For every variant and GPU count "
         f"the sweep evaluated every valid parallel layout ({len(res.full):,} points in all; every point with its "
         "status in `sweep.parquet`, run times in `manifest.json`).", "",
         "Two speedups per variant and GPU count, both against the baseline's fastest layout at that GPU count:",
         "", "- **re-optimized**: the variant's own fastest feasible layout;",
         "- **at the baseline's layout**: the baseline's fastest layout kept fixed and evaluated on the variant "
         "(isolates the hardware change from the layout change).", "",
         "## Variants", "", md_table(hardware_table(study)), "",
         "Throttle semantics (`dse/spec/hardware.py`): `effective = nominal x (1 - throttle)` on HBM bandwidth, "
         "and on the clock-derived rates (tensor peak, L2 bandwidth) only when `throttle_clock = true`.", "",
         "## Training speedup", "", "Re-optimized (each variant's own fastest layout):", "",
         md_table(piv("speedup_reoptimized")), "", "At the baseline's fastest layout (held fixed):", "",
         md_table(piv("speedup_at_baseline_layout")), "",
         "`–`: the baseline has no layout that fits in HBM at that GPU count, so there is no speedup to quote. "
         "Full rows (layouts, step times, memory, breakdown) are in `summary.csv`.", ""]
    for fn in plots["speedup"]:
        L += [f"![speedup]({fn})", ""]
    L += ["## Where the baseline's time goes", "",
          "Shares of the step time of the baseline's fastest layout (breakdown columns of the sweep). "
          "`HBM-bound %` is the share that disappears with unlimited HBM bandwidth at the same layout; "
          "`L2-capacity-bound %` the share that disappears with an unlimited L2 (`sensitivity.csv`).", "",
          md_table(baseline_table(train, sens, study.baseline)), "",
          "`compute` holds the GEMMs, FlashAttention and the memory-bound element-wise kernels of every layer "
          "plus the LM head; only its element-wise part (and the optimizer step) scales with HBM bandwidth. "
          "The pipeline bubble is `(PP-1)/vpp` micro-batch stage times and shrinks with compute when HBM gets "
          "faster; exposed TP, PP and DP communication run on NVLink and the NIC and do not move with any HBM "
          "or L2 change. " + comm_share_sentence(train, study.baseline), ""]
    for fn in plots["breakdown"]:
        L += [f"![breakdown]({fn})", ""]
    L += elasticity_section(res)
    L += ["## Why each variant helps or not", ""]
    for h in others:
        L += variant_paragraph(study, train, sens, h, base)
    L += published_section(study, train, sens, inf_tab, inf_sens)
    L += ["## Inference", ""]
    if inf_tab is None or not len(inf_tab):
        L += [inf_note, ""]
    else:
        L += infer.report_section(inf_tab, inf_sens, study, plots["inference"],
                                  train_hbm_share_max=float(sens["hbm_bound_share"].max()))
    L += ["## Reproduce", "", f"`make study STUDY={res.head.name}`; provenance (git revision, study-file hash, "
          "package versions) in `manifest.json`. Formulas: `dse/train/step.py` (step assembly), "
          "`dse/cost/gemm.py` (L2-aware GEMM roofline), `dse/cost/elementwise.py` (memory-bound kernels), "
          "`dse/spec/variants.py` (how a variant is derived).", ""]
    return "\n".join(L)
