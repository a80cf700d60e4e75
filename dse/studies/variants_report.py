"""report.md of a variants study: every sentence that states a number is computed from
the study's own tables (summary, sensitivity), so the text stays true when the study
file or the model changes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dse.report.atomic import write_text
from dse.report.plots import BREAKDOWN_LABELS
from dse.spec.hardware import GIB, MIB, Hardware
from dse.spec.variants import describe

BREAKDOWN = list(BREAKDOWN_LABELS)


def md_table(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        cells = []
        for c in cols:
            v = r[c]
            if isinstance(v, (float, np.floating)):
                cells.append("–" if not np.isfinite(v) else f"{v:.3g}")
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def x(v: float, d: int = 2) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{v:.{d}f}x"


def pct(v: float) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{100 * v:.1f} %"


def span(vals) -> str:
    v = np.asarray([a for a in vals if np.isfinite(a)], dtype=float)
    if not len(v):
        return "n/a"
    lo, hi = f"{v.min():.2f}", f"{v.max():.2f}"
    return f"{lo}x" if lo == hi else f"{lo}–{hi}x"


def ratios(hw: Hardware, base: Hardware) -> dict[str, float]:
    """Effective-rate ratios variant / baseline (throttle applied as in
    dse.spec.hardware.effective)."""
    clk = lambda h: float(h.clock_hz) * (1 - float(h.throttle) * float(h.throttle_clock))
    return {
        "hbm_bw": float(hw.hbm_bw_bytes_per_s) * (1 - float(hw.throttle))
        / (float(base.hbm_bw_bytes_per_s) * (1 - float(base.throttle))),
        "hbm_capacity": float(hw.hbm_bytes) / float(base.hbm_bytes),
        "l2": float(hw.l2_bytes) / float(base.l2_bytes),
        "l2_bw": float(hw.l2_bw_bytes_per_s) / float(base.l2_bw_bytes_per_s) * clk(hw) / float(hw.clock_hz)
        / (clk(base) / float(base.clock_hz)),
        "peak": float(hw.peak_bf16_flops_per_s) * clk(hw) / float(hw.clock_hz)
        / (float(base.peak_bf16_flops_per_s) * clk(base) / float(base.clock_hz)),
        "nvlink_bw": float(hw.nvlink_bw_bytes_per_s) / float(base.nvlink_bw_bytes_per_s),
        "nic_bw": float(hw.nic_bw_bytes_per_s) / float(base.nic_bw_bytes_per_s),
        "throttle": float(hw.throttle), "throttle_clock": float(hw.throttle_clock),
    }


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


def gemm_intensity(model, seq: int, mbs: int, tp: int, cp: int = 1) -> tuple[float, float]:
    """Arithmetic intensity (FLOP/byte, bf16, compulsory traffic) of the FC1 GEMM of one
    layer: M = mbs*seq/cp tokens, N = ffn*(1+gated)/tp, K = hidden;
    ``2MNK / (2 (MK + KN + MN))``.  Returns (intensity, M)."""
    m = mbs * seq / cp
    n = model.ffn_hidden_size * (1 + model.gated_mlp) / tp
    k = model.hidden_size
    return 2 * m * n * k / (2.0 * (m * k + k * n + m * n)), m


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


def variant_paragraph(study, train, sens, hw: Hardware, base: Hardware) -> list[str]:
    """Why this variant helps or not, from the breakdown columns and the diagnostics."""
    name, bname = hw.name, base.name
    rt = ratios(hw, base)
    t = train[train["variant"] == name]
    tb = train[train["variant"] == bname].set_index(["workload", "gpus"])
    L = [f"### {name}", "",
         f"*{hw.description}.* Re-optimized speedup {span(t['speedup_reoptimized'])}, at the baseline's "
         f"layout {span(t['speedup_at_baseline_layout'])} over {', '.join(map(str, t['gpus'].unique()))} GPUs.", ""]
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
    # bandwidth: the unlimited-HBM probe brackets the gain (see dse.studies.variants)
    if not math.isclose(rt["hbm_bw"], 1.0, rel_tol=1e-6):
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
                split.append(f"at {g} GPUs {saved:.3g} s of {s['step_time_s']:.3g} s, {s['compute_hbm_bound_s']:.3g} s "
                             f"of it inside compute, the optimizer step {s['optimizer_s']:.2g} s, the rest in "
                             "recompute "
                             "and the bubble")
        L.append(f"Effective HBM bandwidth is **{r_eff:.2f}x** the baseline's{thr}. Only the HBM-bound part of "
                 f"the step gets faster: with *unlimited* HBM bandwidth the baseline's step would shrink by "
                 f"{pct(sh.min())}–{pct(sh.max())} (`hbm_bound_share` in `sensitivity.csv`; "
                 + "; ".join(split) + "). That part is the memory-bound kernels: the element-wise ones inside "
                 "compute (norms, residual adds, rotary, SwiGLU, cross-entropy) and the optimizer step; GEMMs and "
                 "FlashAttention at these sizes are compute-bound. "
                 + (f"With an r = {r_eff:.2f}x faster HBM the gain at a fixed layout lies between "
                    f"`1 / (1 - s (1 - 1/r))` = {span(lo)} and `1 / (1 - s)` = {span(hi)}; the model gives "
                    f"{span(got)}." if got else "")
                 + " Communication, bubble and the network terms do not depend on HBM bandwidth, so at large GPU "
                 "counts, where they take a bigger share, the gain is diluted.")
        if rt["throttle_clock"] and rt["throttle"] > 0:
            L.append(f"The throttle also derates the clocks by {100 * rt['throttle']:.0f} %, so the compute-bound "
                     "GEMMs slow down by the same factor: the variant is slower than its unthrottled twin.")
        L.append("")
    if not math.isclose(rt["hbm_capacity"], 1.0, rel_tol=1e-6):
        rows = t.merge(tb[["layout", "step_time_s"]].rename(columns={"layout": "b_layout", "step_time_s": "b_t"}),
                       left_on=["workload", "gpus"], right_index=True)
        fits_only = rows[(rows["b_layout"] == "") & (rows["layout"] != "")]
        changed = rows[(rows["b_layout"] != "") & (rows["layout"] != rows["b_layout"])
                       & (rows["speedup_reoptimized"] >= 1.005)]
        same = rows[(rows["b_layout"] != "") & ~rows.index.isin(changed.index)]
        L.append(f"HBM capacity is **{rt['hbm_capacity']:.2f}x** ({float(hw.hbm_bytes) / GIB:.0f} GiB). Capacity "
                 "changes no kernel time and no communication time (the fixed-layout speedup is exactly 1); it only "
                 "admits layouts that did not fit. It therefore helps exactly where memory forced the baseline into "
                 "a worse layout:")
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
    if not math.isclose(rt["l2"], 1.0, rel_tol=1e-6):
        b0 = train[(train["variant"] == bname) & (train["layout"] != "")].iloc[0]
        sh = sens["l2_capacity_bound_share"]
        tp, mbs, cp = int(b0["tp"]), int(b0["mbs"]), int(b0["cp"])
        seq = study.wl.seq_lens[0]
        ai, M = gemm_intensity(study.wl.model, seq, mbs, tp, cp)
        ridge = float(base.peak_bf16_flops_per_s) / (float(base.hbm_bw_bytes_per_s) * (1 - float(base.throttle)))
        L.append(f"L2 is **{rt['l2']:.2f}x** ({float(hw.l2_bytes) / MIB:.0f} MiB). A bigger L2 only cuts the HBM "
                 "traffic of GEMMs that re-read their operands (`dse/cost/gemm.py`: traffic "
                 "`MN + max(MK + KN, 2MNK/b)`, b = sqrt(L2/3) elements); it matters only where that traffic, not "
                 f"the FLOPs, sets the time. For {study.wl.model.name} the GEMMs are huge: the MLP up-projection at "
                 f"{M:.0f} tokens x {study.wl.model.hidden_size} x "
                 f"{study.wl.model.ffn_hidden_size * (1 + study.wl.model.gated_mlp) // tp} (TP{tp}) has an arithmetic "
                 f"intensity of ~{ai:.0f} FLOP/byte even with compulsory traffic only, far above the baseline's "
                 f"ridge point {ridge:.0f} FLOP/byte, so it is compute-bound with any L2. Even an unlimited L2 "
                 f"would save {pct(sh.min())}–{pct(sh.max())} of the step (`l2_capacity_bound_share`); the "
                 "element-wise kernels stream data once and get nothing from a cache. This variant would matter "
                 "for small GEMMs (decode at small batch, small hidden sizes), not here.")
        L.append("")
    for k, what in (("peak", "effective tensor peak"), ("nvlink_bw", "NVLink bandwidth"), ("nic_bw", "NIC bandwidth")):
        if not math.isclose(rt[k], 1.0, rel_tol=1e-6) and not (k == "peak" and rt["throttle_clock"]):
            L.append(f"{what} is {rt[k]:.2f}x the baseline's; see the moved terms above "
                     + ("(compute_s scales with it)." if k == "peak" else "(TP/PP/DP communication terms)."))
            L.append("")
    return L


def published_section(study, train, sens, inf_tab) -> list[str]:
    if not study.published:
        return []
    base = {h.name: h for h in study.hws}[study.baseline]
    rows = []
    notes = []
    for p in study.published:
        hw = {h.name: h for h in study.hws}[p["variant"]]
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
            theta = rt["throttle"]
            s_hbm = (1 - 1 / P) / (1 - 1 / r_eff)
            row["implied HBM-bound share"] = pct(s_hbm)
            if theta > 0:
                c = 1 - theta
                s_clk = (1 / P - 1 / c) / (1 / r_eff - 1 / c)
                notes.append((p["variant"], theta, s_hbm, s_clk))
        rows.append(row)
    sh = sens["hbm_bound_share"]
    need = "; ".join(f"{r['variant']}'s published {r['published']} needs {r['implied HBM-bound share']} of the time "
                     "to be HBM-bound" for r in rows if "implied HBM-bound share" in r)
    need = (need + ", far beyond that.") if need else ""
    L = ["## Against the published figure", "",
         "The published figure for this study reports the speedups below. The `implied HBM-bound share` is the "
         "fraction s of the published workload's time that must scale with HBM bandwidth for the number to come "
         "out if time splits additively into a bandwidth-bound part and the rest: `speedup = 1 / (1 - s + s / r)`, "
         "r the variant's effective bandwidth ratio.", "",
         md_table(pd.DataFrame(rows)), "",
         f"**Why ours is lower for training.** Training {study.wl.model.name} at global batch "
         f"{', '.join(map(str, study.wl.global_batches))} runs GEMMs with thousands of tokens per GPU: it is "
         f"compute-bound. Only {pct(sh.min())}–{pct(sh.max())} of the baseline step is HBM-bound, so even infinite "
         f"bandwidth could give at most {x(1 / (1 - sh.max()))}; " + need + " That is the regime of "
         "autoregressive *decoding*, where every generated token re-reads all weights and the KV cache at a few "
         "FLOPs per byte; the published figure is most plausibly for inference (decode) or another "
         "bandwidth-bound workload, not for large-batch training."]
    if notes:
        implied = [f"{r['variant']} implies {r['implied HBM-bound share']}" for r in rows
                   if "implied HBM-bound share" in r]
        L += ["", "Under a bandwidth-only throttle the published numbers imply different shares ("
              + "; ".join(implied) + "), i.e. they cannot both come from one workload with that throttle. "
              "If the throttle derated the clocks as well (`throttle_clock = true`: compute slows by the "
              "same factor), the implied shares become "
              + "; ".join(f"{v}: {pct(s_clk)}" for v, _, _, s_clk in notes)
              + " — consistent with the unthrottled figure. So the published throttle most likely slowed "
              "compute too. Our variant follows the study brief (throttle on HBM bandwidth only), which is why "
              "our throttled variant loses little against its unthrottled twin."]
    if inf_tab is not None and len(inf_tab):
        cmp = []
        for p in study.published:
            it = inf_tab[(inf_tab["variant"] == p["variant"]) & inf_tab["workload"].str.startswith("inference decode")]
            v = it["speedup_reoptimized"].to_numpy(dtype=float)
            v = v[np.isfinite(v)]
            if not len(v):
                continue
            P = float(p["speedup"])
            where = ("inside" if v.min() <= P <= v.max() else "below" if P < v.min() else "above")
            cmp.append(f"{p['variant']}: published {P:.2f}x is {where} our decode range {span(v)}")
        cfg = study.inference
        L += ["", f"**Against our inference model.** Decoding {cfg['model'].name} on {cfg['gpus_per_replica']} GPUs "
              "per replica (next section) is the bandwidth-bound regime the published numbers need: "
              + "; ".join(cmp) + ". Where the published throttled figure lies below our range, that again points "
              "to a throttle that also slowed the clocks (ours derates HBM bandwidth only, as the study brief "
              "defines D)."]
    L.append("")
    return L


def write_report(out, d, study, train, sens, inference, plots, sweep_s, infer_s, n_points):
    inf_tab, inf_sens, inf_note = inference
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
    L = [f"# {d['name']}: {d.get('description', '')}", "",
         f"Workload: **{wl.model.name}** training ({wl.model.num_params() / 1e9:.1f} B parameters), sequence length "
         f"{', '.join(map(str, wl.seq_lens))}, global batch {', '.join(map(str, wl.global_batches))} sequences, "
         f"on {', '.join(map(str, wl.gpus))} GPUs. Baseline: **{study.baseline}**. For every variant and GPU count "
         f"the sweep evaluated every valid parallel layout ({n_points:,} points in all, {sweep_s:.1f} s including "
         "JIT compilation; every point with its status in `sweep.parquet`).", "",
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
          "or L2 change. Their share grows with the GPU count (fewer tokens per GPU per step, same gradient "
          "volume per GPU), so a gain that acts on compute alone is diluted at large GPU counts.", ""]
    for fn in plots["breakdown"]:
        L += [f"![breakdown]({fn})", ""]
    L += ["## Why each variant helps or not", ""]
    for h in others:
        L += variant_paragraph(study, train, sens, h, base)
    L += published_section(study, train, sens, inf_tab)
    L += ["## Inference", ""]
    if inf_tab is None or not len(inf_tab):
        L += [inf_note, ""]
    else:
        from dse.studies.variants_infer import report_section
        L += report_section(inf_tab, inf_sens, study, infer_s, plots["inference"])
    L += ["## Reproduce", "", f"`make study STUDY={d['name']}`; provenance (git revision, study-file hash, "
          "package versions) in `manifest.json`. Formulas: `dse/train/step.py` (step assembly), "
          "`dse/cost/gemm.py` (L2-aware GEMM roofline), `dse/cost/elementwise.py` (memory-bound kernels), "
          "`dse/spec/variants.py` (how a variant is derived).", ""]
    write_text(out / "report.md", "\n".join(L))
