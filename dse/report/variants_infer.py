"""The inference part of a variants report: the speedup plot and the report section,
from the ``[inference]`` rows of :class:`dse.report.results.VariantsResults`."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from dse.spec.layout import SERVING_PRECISION_NAMES
from dse.report.markdown import fmt_pivot, md_table, pct, pct_span, ratios, span
from dse.report.regimes import COMPUTE_BOUND_MAX_HBM_SHARE, compute_bound, l2_negligible

PHASES = ("prefill", "decode")


def plot(tab: pd.DataFrame, study, out: Path) -> list[str]:
    """Prefill and decode speedups (re-optimized TP/PP) per batch size, one bar per variant."""
    from dse.report.plots import grouped_bar_panels
    others = [h.name for h in study.hws if h.name != study.baseline]
    t = tab[tab["variant"].isin(others)].copy()
    t["batch"] = t["workload"].str.extract(r"batch (\d+)$")[0]
    panels = []
    for phase in PHASES:
        p = t[t["workload"].str.startswith(f"inference {phase},")].dropna(subset=["batch"]).copy()
        p["batch"] = p["batch"].astype(int)
        panels.append((p, f"{phase} (best TP x PP per batch)"))
    cfg = study.inference
    grouped_bar_panels(panels, "batch", "variant", "speedup_reoptimized", "batch (sequences per replica)",
                       f"speedup over {study.baseline} (x)",
                       f"{cfg['model'].name} inference, {SERVING_PRECISION_NAMES[int(cfg['precision'])]}, "
                       f"{cfg['gpus_per_replica']} GPUs per replica, prompt "
                       f"{cfg['prompt_len']} + {cfg['gen_len']} generated tokens: speedup per variant",
                       out / "inference.png", ref_line=1.0)
    return ["inference.png"]


def _tp(label: str) -> int | None:
    m = re.search(r"TP(\d+)", str(label))
    return int(m.group(1)) if m else None


def report_section(tab: pd.DataFrame, sens: pd.DataFrame, study, files: list[str],
                   train_hbm_share_max: float = np.nan) -> list[str]:
    """The report's inference section; every number, and every stated reason, comes from
    ``tab`` and ``sens`` (``train_hbm_share_max``: the training step's largest HBM-bound
    share, for the comparison with prefill)."""
    cfg = study.inference
    hws = {h.name: h for h in study.hws}
    base = hws[study.baseline]
    t = tab[tab["variant"] != study.baseline].copy()
    t["phase"] = t["workload"].str.extract(r"^inference (\w+),")[0]
    t["batch"] = t["workload"].str.extract(r"batch (\d+)$")[0].fillna("best")
    L = [f"{cfg['model'].name}, {cfg['gpus_per_replica']} GPUs per replica, prompt {cfg['prompt_len']} tokens, "
         f"{cfg['gen_len']} generated tokens, batch {', '.join(map(str, cfg['batch']))} "
         "(`dse.infer.sweep.sweep_inference`). Speedup over the baseline at the same batch, "
         "each variant with its own best (TP, PP); `serving` compares the best tokens/s over (TP, PP, batch). "
         "Rows per batch, with the baseline's (TP, PP) held fixed too, are in `summary.csv`.", "",
         md_table(fmt_pivot(t, ["phase", "variant"], "batch", "speedup_reoptimized")), ""]
    if sens is not None and len(sens):
        s = sens.copy()
        show = {"phase": s["phase"], "batch": s["batch"], "baseline layout": s["baseline_layout"],
                "time s": s["time_s"], "HBM-bound %": 100 * s["hbm_bound_share"],
                "L2-capacity-bound %": 100 * s["l2_capacity_bound_share"]}
        for c in [c for c in s.columns if c.startswith("decode_") and c.endswith("_s")]:
            show[c.removeprefix("decode_").removesuffix("_s") + " % of decode"] = 100 * s[c]
        L += ["Where the baseline's inference time goes (`inference_sensitivity.csv`; `HBM-bound %` is the share "
              "that disappears with unlimited HBM bandwidth at the same layout, the decode columns split the "
              "decode step):", "", md_table(pd.DataFrame(show)), ""]
    dec = sens[sens["phase"] == "decode"] if sens is not None and len(sens) else pd.DataFrame()
    pre = sens[sens["phase"] == "prefill"] if sens is not None and len(sens) else pd.DataFrame()
    for name, hw in hws.items():
        if name == study.baseline:
            continue
        rt = ratios(hw, base)
        v = t[t["variant"] == name]
        d_sp = v[v["phase"] == "decode"]
        p_sp = v[v["phase"] == "prefill"]
        line = (f"- **{name}**: decode {span(d_sp['speedup_reoptimized'])}, prefill "
                f"{span(p_sp['speedup_reoptimized'])}, serving "
                f"{span(v[v['phase'] == 'serving']['speedup_reoptimized'])}.")
        if abs(rt["hbm_bw"] - 1) > 1e-6 and len(dec):
            line += hbm_sentences(rt["hbm_bw"], dec, pre, d_sp, train_hbm_share_max)
            first, last = d_sp["speedup_reoptimized"].iloc[0], d_sp["speedup_reoptimized"].iloc[-1]
            if np.isfinite(first) and np.isfinite(last):
                line += decode_trend(d_sp, cfg["batch"][0], cfg["batch"][-1])
        if abs(rt["hbm_capacity"] - 1) > 1e-6:
            b_rows = tab[(tab["variant"] == study.baseline) & tab["workload"].str.startswith("inference decode")]
            gained = v[(v["phase"] == "decode") & v["status"].str.startswith("baseline")]
            line += (f" Capacity {rt['hbm_capacity']:.2f}x changes no kernel time; "
                     + (f"it lets batch {', '.join(gained['batch'])} run where the baseline runs out of memory."
                        if len(gained) else
                        f"the baseline already fits every batch listed (at most {b_rows['mem_gib'].max():.0f} GiB "
                        f"of {float(base.hbm_bytes) / 2**30:.0f} GiB per GPU), so it buys nothing here; it would "
                        "matter for larger batches or longer contexts (a bigger KV cache)."))
        if abs(rt["l2"] - 1) > 1e-6 and len(dec):
            l2 = dec["l2_capacity_bound_share"]
            if l2_negligible(float(l2.max())):
                line += (f" L2 {rt['l2']:.2f}x: a decode GEMM reads each weight exactly once per step (nothing to "
                         "reuse within the step), and between steps the GPU's whole weight shard (GiBs) streams "
                         "through the L2, so nothing stays resident; even an unlimited L2 (in this model, which "
                         "credits L2 reuse within a GEMM only) saves "
                         f"{pct_span(l2.min(), l2.max())} of the decode step in this model.")
            else:
                line += (f" L2 {rt['l2']:.2f}x: an unlimited L2 (in this model, which credits L2 reuse within a "
                         f"GEMM only) would save {pct_span(l2.min(), l2.max())} of the decode step, so the "
                         "cache size matters here.")
        L.append(line)
    L.append("")
    for fn in files:
        L += [f"![inference]({fn})", ""]
    return L


def decode_trend(d_sp: pd.DataFrame, b0, b1) -> str:
    """How the decode gain moves from the smallest to the largest batch, from the rows: its
    direction, its lowest point where that is inside the range, and the batches where the
    variant's fastest layout is not the baseline's (a layout switch moves the ratio too)."""
    sp = d_sp["speedup_reoptimized"].to_numpy(dtype=float)
    first, last = sp[0], sp[-1]
    verb = "rises" if last > first * 1.005 else "falls" if last < first * 0.995 else "holds"
    s = f" From batch {b0} to {b1} the decode gain {verb}, {first:.2f}x → {last:.2f}x"
    k = int(np.nanargmin(sp))
    if 0 < k < len(sp) - 1 and sp[k] < min(first, last) * 0.995:
        s += f" (lowest {sp[k]:.2f}x at batch {d_sp['batch'].iloc[k]})"
    moved = d_sp[d_sp["layout"] != d_sp["baseline_layout"]]
    if len(moved):
        r = moved.iloc[0]
        tp_pp = [re.sub(r"\s*batch \d+$", "", str(x)) for x in (r["layout"], r["baseline_layout"])]
        s += (f"; at batch {', '.join(map(str, moved['batch']))} the variant's fastest layout is not the "
              f"baseline's ({tp_pp[0]} against {tp_pp[1]} at batch {r['batch']}), which moves the "
              "ratio as well")
    return s + (". A larger batch reuses each weight read for more tokens, while the per-sequence "
                "KV-cache reads and the TP all-reduces grow: the mix of bandwidth-bound and "
                "latency/communication-bound time shifts.")


def hbm_sentences(r: float, dec: pd.DataFrame, pre: pd.DataFrame, d_sp: pd.DataFrame,
                  train_hbm_share_max: float = np.nan) -> str:
    """What a faster HBM does to decode and prefill, each reason stated only where the
    numbers support it: the bracket from the HBM-bound share, where in it the model's
    gain lies, prefill called compute-bound only below the threshold, and a change of
    (TP, PP) explained by TP communication only when TP went down."""
    sh = dec["hbm_bound_share"].to_numpy(dtype=float)
    lo = 1 / (1 - sh * (1 - 1 / r))
    hi = 1 / (1 - sh)
    fixed = d_sp["speedup_at_baseline_layout"]
    fx = fixed.to_numpy(dtype=float)
    s = (f" Effective HBM bandwidth {r:.2f}x. Decode is {pct_span(sh.min(), sh.max())} HBM-bound on the "
         "baseline (the share unlimited bandwidth removes; decode streams all weights and the KV cache once "
         f"per token), which brackets the gain at the baseline's (TP, PP) between {span(lo)} and {span(hi)}; "
         f"the model gives {span(fixed)} there")
    pos = (fx - lo) / (hi - lo) if len(fx) == len(lo) else np.array([])
    pos = pos[np.isfinite(pos)]
    if len(pos) and np.median(pos) > 0.5:
        s += (" (towards the upper end where the weight-streaming GEMMs' memory time is far above their "
              "FLOP time)")
    s += "."
    if len(pre):
        ps = pre["hbm_bound_share"]
        if compute_bound(float(ps.max())):
            s += (f" Prefill is only {pct_span(ps.min(), ps.max())} HBM-bound (compute-bound GEMMs over the "
                  "whole prompt)" + (", like training." if compute_bound(train_hbm_share_max) else "."))
        else:
            s += (f" Prefill is {pct_span(ps.min(), ps.max())} HBM-bound (not below the "
                  f"{pct(COMPUTE_BOUND_MAX_HBM_SHARE)} this report calls compute-bound).")
    if not np.allclose(fixed, d_sp["speedup_reoptimized"], rtol=0.01, equal_nan=True):
        k = int(np.nanargmax((d_sp["speedup_reoptimized"] / fixed).to_numpy(dtype=float)))
        rr = d_sp.iloc[k]
        tp0, tp1 = _tp(rr["baseline_layout"]), _tp(rr["layout"])
        why = (": less TP communication per token once the weight reads are cheap"
               if tp0 is not None and tp1 is not None and tp1 < tp0 else "")
        s += (f" Re-optimized it gains more where the faster HBM makes another (TP, PP) best (batch "
              f"{rr['batch']}: {rr['baseline_layout'].rsplit(' batch', 1)[0]} → "
              f"{rr['layout'].rsplit(' batch', 1)[0]}, {rr['speedup_at_baseline_layout']:.2f}x → "
              f"{rr['speedup_reoptimized']:.2f}x{why}).")
    return s
