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

import numpy as np
import pandas as pd

from dse.errors import require
from dse.spec.hardware import Hardware
from dse.spec.layout import precision_code
from dse.spec.model import get_model
from dse.spec.study import study_keys
from dse.studies.common import check_keys, int_list

KEYS = study_keys("variants", "inference")     # the study schema (dse.spec.study)
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
