"""The optional ``[inference]`` part of a variants study: prefill and decode speedups of
each hardware variant over the baseline, from :func:`dse.infer.sweep.sweep_inference`.

    [inference]
    model = "llama3-70b"
    gpus_per_replica = 8
    batch = [1, 2, 4, 8, 16, 32, 64]
    prompt_len = 2048
    gen_len = 256
    precision = "bf16"

Per variant and batch, with (TP, PP) the replica's layout:

* prefill speedup  = min prefill_s(baseline) / min prefill_s(variant);
* decode speedup   = min decode_s_per_token(baseline) / min decode_s_per_token(variant);
* each also at the baseline's best (TP, PP) held fixed;
* serving throughput = max tokens_per_s over (TP, PP, batch), its ratio to the baseline.

If ``dse.infer.sweep`` is not importable the part is skipped and the report says so.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dse.errors import require
from dse.spec.hardware import Hardware
from dse.spec.layout import precision_code
from dse.spec.model import get_model
from dse.studies.common import check_keys, int_list

KEYS = {"model", "gpus_per_replica", "batch", "prompt_len", "gen_len", "precision"}
PHASES = (("prefill", "prefill_s", "prefill time of the whole batch (s)"),
          ("decode", "decode_s_per_token", "decode step time, one token per sequence (s)"))


def parse(t, where: str) -> dict | None:
    """Validate the ``[inference]`` table (None when absent)."""
    if t is None:
        return None
    require(isinstance(t, dict), where, "inference", "must be a table")
    check_keys(t, KEYS, where, "inference.")
    require(isinstance(t.get("model"), str), where, "inference.model", "must be a string")
    model = get_model(t["model"], where=f"{where}: inference.model")
    one = lambda k: int_list(t, k, where, "inference.")
    for k in ("gpus_per_replica", "prompt_len", "gen_len"):
        require(isinstance(t.get(k), int) and not isinstance(t.get(k), bool), where, f"inference.{k}",
                f"must be one positive integer, but got {t.get(k)!r}")
        one(k)
    return {"model": model, "gpus_per_replica": t["gpus_per_replica"], "batch": one("batch"),
            "prompt_len": t["prompt_len"], "gen_len": t["gen_len"],
            "precision": precision_code(str(t.get("precision", "bf16")), f"{where}: inference.precision")}


def available() -> tuple[bool, str]:
    try:
        from dse.infer.sweep import sweep_inference  # noqa: F401
    except Exception as e:   # the module may be absent or half-written: skip, say why
        return False, f"{type(e).__name__}: {e}"
    return True, ""


def _label(r) -> str:
    return f"TP{int(r['tp'])} PP{int(r['pp'])} batch {int(r['batch'])}"


PROBES = ("~hbm_unlimited", "~l2_unlimited")


def run(cfg: dict | None, hws: list[Hardware], baseline: str):
    """(summary rows or None, sensitivity table or None, note for the report).

    Two probes ride along in the same sweep (one compile): the baseline with unlimited
    HBM bandwidth and with unlimited L2; at the baseline's best decode layout per batch,
    ``hbm_bound_share = (t - t_unlimited_hbm) / t`` (likewise for L2)."""
    if cfg is None:
        return None, None, "The study file has no `[inference]` table; the inference part was not run."
    ok, why = available()
    if not ok:
        return None, None, ("Inference was skipped: `dse.infer.sweep` could not be imported "
                            f"({why}). Re-run the study once the inference model lands.")
    from dse.infer.sweep import sweep_inference
    base = {h.name: h for h in hws}[baseline]
    probes = [base.replace(name=PROBES[0], hbm_bw_bytes_per_s=base.hbm_bw_bytes_per_s * 1e6),
              base.replace(name=PROBES[1], l2_bytes=base.l2_bytes * 1e6)]
    # one call covers the powers of two up to max(batch) (one compile); other sizes alone
    call = lambda b: sweep_inference(cfg["model"], hws + probes, cfg["gpus_per_replica"], b,
                                     cfg["prompt_len"], cfg["gen_len"], precision=cfg["precision"])
    df = call(max(cfg["batch"]))
    for b in sorted(set(cfg["batch"]) - set(df["batch"])):
        extra = call(b)
        df = pd.concat([df, extra[extra["batch"] == b]], ignore_index=True)
    df = df[df["batch"].isin(cfg["batch"])]
    names = [h.name for h in hws]
    hbm = {h.name: float(h.hbm_bytes) / 2**30 for h in hws}
    rows, sens = [], []
    wl_txt = f"prompt {cfg['prompt_len']}, gen {cfg['gen_len']}"
    for phase, col, metric in PHASES:
        for b in cfg["batch"]:
            g = df[(df["batch"] == b)]
            rows += _phase_rows(g, names, baseline, col, f"inference {phase}, {wl_txt}, batch {b}",
                                metric, cfg["gpus_per_replica"], hbm)
            sens.append(_sensitivity(g, baseline, col, phase, b))
    # serving throughput: best (tp, pp, batch) per variant
    rows += _phase_rows(df.assign(s_per_token=1.0 / df["tokens_per_s"]), names, baseline, "s_per_token",
                        f"inference serving, {wl_txt}, best batch", "1 / tokens_per_s of the replica (s)",
                        cfg["gpus_per_replica"], hbm)
    return pd.DataFrame(rows), pd.DataFrame([x for x in sens if x]), ""


def _sensitivity(g: pd.DataFrame, baseline: str, col: str, phase: str, batch: int) -> dict:
    ok = g[g["feasible"].astype(bool) & (g["hardware"] == baseline)].sort_values(col, kind="stable")
    if not len(ok):
        return {}
    b = ok.iloc[0]
    at = lambda h: g[(g["hardware"] == h) & (g["tp"] == b["tp"]) & (g["pp"] == b["pp"])][col].iloc[0]
    t = float(b[col])
    r = {"phase": phase, "batch": int(batch), "baseline_layout": _label(b), "time_s": t,
         "hbm_bound_share": (t - float(at(PROBES[0]))) / t, "l2_capacity_bound_share": (t - float(at(PROBES[1]))) / t}
    if phase == "decode":
        r.update({c: float(b[c]) / t for c in g.columns if c.startswith("decode_") and c.endswith("_s")
                  and c != "decode_s_per_token"})
    return r


def _phase_rows(g: pd.DataFrame, names, baseline, col, workload, metric, gpus, hbm) -> list[dict]:
    ok = g[g["feasible"].astype(bool)].sort_values(col, kind="stable")
    best = ok.groupby("hardware", sort=False).head(1).set_index("hardware")
    b = best.loc[baseline] if baseline in best.index else None
    t_base = float(b[col]) if b is not None else np.nan
    rows = []
    for v in names:
        r = {"variant": v, "workload": workload, "gpus": int(gpus), "metric": metric, "hbm_gib": hbm[v]}
        if v in best.index:
            br = best.loc[v]
            r.update(layout=_label(br), step_time_s=float(br[col]), mem_gib=float(br["mem_gib"]),
                     tokens_per_s=float(br["tokens_per_s"]), tp=int(br["tp"]), pp=int(br["pp"]),
                     **({c: float(br[c]) for c in g.columns if c.startswith("decode_") and c.endswith("_s")
                         and c != "decode_s_per_token"} if col != "prefill_s" else {}))
        else:
            r.update(layout="", step_time_s=np.nan, mem_gib=np.nan)
        r["speedup_reoptimized"] = t_base / r["step_time_s"]
        if b is not None:
            fx = g[(g["hardware"] == v) & (g["tp"] == b["tp"]) & (g["pp"] == b["pp"]) & (g["batch"] == b["batch"])]
            t_fx = float(fx[col].iloc[0]) if len(fx) and bool(fx["feasible"].iloc[0]) else np.nan
            r.update(baseline_layout=_label(b), step_time_at_baseline_layout_s=t_fx,
                     mem_gib_at_baseline_layout=float(fx["mem_gib"].iloc[0]) if len(fx) else np.nan,
                     speedup_at_baseline_layout=t_base / t_fx)
        r["status"] = ("baseline: nothing fits" if b is None and v != baseline else
                       "nothing fits" if not r["layout"] else "ok")
        rows.append(r)
    return rows


def plot(tab: pd.DataFrame, study, out: Path) -> list[str]:
    """Prefill and decode speedups (re-optimized TP/PP) per batch size, one bar per variant."""
    from dse.report.plots import grouped_bar_panels
    others = [h.name for h in study.hws if h.name != study.baseline]
    t = tab[tab["variant"].isin(others)].copy()
    t["batch"] = t["workload"].str.extract(r"batch (\d+)$")[0]
    panels = []
    for phase, _, _ in PHASES:
        p = t[t["workload"].str.startswith(f"inference {phase},")].dropna(subset=["batch"]).copy()
        p["batch"] = p["batch"].astype(int)
        panels.append((p, f"{phase} (best TP x PP per batch)"))
    cfg = study.inference
    grouped_bar_panels(panels, "batch", "variant", "speedup_reoptimized", "batch (sequences per replica)",
                       f"speedup over {study.baseline} (x)",
                       f"{cfg['model'].name} inference on {cfg['gpus_per_replica']} GPUs per replica, prompt "
                       f"{cfg['prompt_len']} + {cfg['gen_len']} generated tokens: speedup per variant",
                       out / "inference.png", ref_line=1.0)
    return ["inference.png"]


def _fmt_pivot(t: pd.DataFrame, index, columns, values) -> pd.DataFrame:
    p = t.pivot_table(index=index, columns=columns, values=values, sort=False, dropna=False)
    return p.apply(lambda c: c.map(lambda v: f"{v:.2f}" if np.isfinite(v) else "–")).reset_index()


def report_section(tab: pd.DataFrame, sens: pd.DataFrame, study, infer_s: float, files: list[str]) -> list[str]:
    """The report's inference section; every number comes from ``tab`` and ``sens``."""
    from dse.studies.variants_report import md_table, pct, ratios, span
    cfg = study.inference
    hws = {h.name: h for h in study.hws}
    base = hws[study.baseline]
    t = tab[tab["variant"] != study.baseline].copy()
    t["phase"] = t["workload"].str.extract(r"^inference (\w+),")[0]
    t["batch"] = t["workload"].str.extract(r"batch (\d+)$")[0].fillna("best")
    L = [f"{cfg['model'].name}, {cfg['gpus_per_replica']} GPUs per replica, prompt {cfg['prompt_len']} tokens, "
         f"{cfg['gen_len']} generated tokens, batch {', '.join(map(str, cfg['batch']))} "
         f"(`dse.infer.sweep.sweep_inference`, {infer_s:.1f} s). Speedup over the baseline at the same batch, "
         "each variant with its own best (TP, PP); `serving` compares the best tokens/s over (TP, PP, batch). "
         "Rows per batch, with the baseline's (TP, PP) held fixed too, are in `summary.csv`.", "",
         md_table(_fmt_pivot(t, ["phase", "variant"], "batch", "speedup_reoptimized")), ""]
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
            r = rt["hbm_bw"]
            lo = [1 / (1 - x * (1 - 1 / r)) for x in dec["hbm_bound_share"]]
            hi = [1 / (1 - x) for x in dec["hbm_bound_share"]]
            fixed = d_sp["speedup_at_baseline_layout"]
            line += (f" Effective HBM bandwidth {r:.2f}x. Decode is {pct(dec['hbm_bound_share'].min())}–"
                     f"{pct(dec['hbm_bound_share'].max())} HBM-bound on the baseline (the share unlimited bandwidth "
                     "removes; decode streams all weights and the KV cache once per token), which brackets the gain "
                     f"at the baseline's (TP, PP) between {span(lo)} and {span(hi)}; the model gives {span(fixed)} "
                     "there (towards the upper end where the weight-streaming GEMMs' memory time is far above their "
                     f"FLOP time). Prefill is only {pct(pre['hbm_bound_share'].min())}–"
                     f"{pct(pre['hbm_bound_share'].max())} HBM-bound (compute-bound GEMMs over the whole prompt), "
                     "like training.")
            if not np.allclose(fixed, d_sp["speedup_reoptimized"], rtol=0.01, equal_nan=True):
                k = int(np.nanargmax((d_sp["speedup_reoptimized"] / fixed).to_numpy(dtype=float)))
                rr = d_sp.iloc[k]
                line += (f" Re-optimized it gains more where the faster HBM makes another (TP, PP) best (batch "
                         f"{rr['batch']}: {rr['baseline_layout'].rsplit(' batch', 1)[0]} → "
                         f"{rr['layout'].rsplit(' batch', 1)[0]}, {rr['speedup_at_baseline_layout']:.2f}x → "
                         f"{rr['speedup_reoptimized']:.2f}x: less TP communication per token once the weight "
                         "reads are cheap)")
            line += "."
            first, last = d_sp["speedup_reoptimized"].iloc[0], d_sp["speedup_reoptimized"].iloc[-1]
            if np.isfinite(first) and np.isfinite(last):
                line += (f" From batch {cfg['batch'][0]} to {cfg['batch'][-1]} the decode gain goes "
                         f"{first:.2f}x → {last:.2f}x: a larger batch reuses each weight read for more tokens, "
                         "while the per-sequence KV-cache reads and the TP all-reduces grow, so the mix of "
                         "bandwidth-bound and latency/communication-bound time shifts.")
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
            line += (f" L2 {rt['l2']:.2f}x: a decode GEMM reads each weight exactly once per step (nothing to "
                     "reuse within the step), and between steps the GPU's whole weight shard (GiBs) streams "
                     "through the L2, so nothing stays resident; even an unlimited L2 (in this model, which "
                     "credits L2 reuse within a GEMM only) saves "
                     f"{pct(dec['l2_capacity_bound_share'].min())}–{pct(dec['l2_capacity_bound_share'].max())} "
                     "of the decode step in this model.")
        L.append(line)
    L.append("")
    for fn in files:
        L += [f"![inference]({fn})", ""]
    return L
