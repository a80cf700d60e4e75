"""``kind = "serving"``: the serving layout search per SLA (studies/serving.toml).

    [serving]
    models = ["meta-llama/Llama-3.3-70B-Instruct"]   # catalog names or Hugging Face ids
    gpus = 8                                        # GPUs of the deployment
    input_len = 1024                                # prompt tokens per request
    output_len = 1024                               # generated tokens per request
    max_batch = 1024                                # batch / concurrency: powers of two up to it
    batching = "continuous"                         # continuous (default) | static
    ep = "auto"                                     # expert-parallel degrees (MoE): "auto" | 1 | [1, 8]
    attn_dp = "auto"                                # attention-DP ranks per replica (MoE): as ep

    [[hardware]]
    name = "b200"
    precisions = ["fp8", "fp4"]                     # bf16 | fp16 | fp8 | fp4
    engine = "trtllm"                               # default: trtllm (NVIDIA), vllm (AMD)

    [[sla]]
    name = "interactive"
    ttft_ms = 1000
    tpot_ms = 20

Every serving layout of the ``gpus`` GPUs is evaluated with the vectorized serving screen
:func:`dse.infer.sweep.sweep_inference` (``dse infer``): ``replicas`` replicas of ``g``
GPUs for every ``g`` dividing ``gpus``, every (TP, PP, EP, attention DP) with ``TP x DP x
PP = g`` that the serving layout rules allow
(:func:`dse.infer.expert_parallel.serving_layouts`: TP splits the heads; for an MoE model
EP divides the experts and, with attention DP, ``EP = TP x DP``), every batch (powers of
two up to ``max_batch``), every precision the hardware entry lists.  ``ep`` / ``attn_dp``
restrict the MoE axes: ``"auto"`` (every allowed degree; the default under continuous
batching), an integer or a list (``1``: experts split over TP only, no attention DP, the
default under static batching); a listed degree is used at every replica size that
allows it, and one that no replica size allows is an error.  Dense models always run
``EP = DP = 1``.

``batching = "continuous"`` (the default, as serving engines run): ``batch`` is the number
of requests in flight per replica (closed loop) under the hardware entry's engine profile
(:mod:`dse.infer.engines`; TensorRT-LLM profiles are NVIDIA-only,
:data:`dse.infer.continuous.NVIDIA_ONLY`); the engine's KV pool bounds the admitted
requests, the rest wait for a slot (:mod:`dse.infer.continuous`).  A point is infeasible
when the pool holds no request.  ``batching = "static"``: ``batch`` requests prefilled and
decoded together, memory (weights + the batch's KV at ``input_len + output_len`` + workspace)
must fit in 97 % of HBM, no engine host time (:func:`dse.infer.serving.fixed_batch`).

Per point (sweep columns ``ttft_s``, ``tpot_s``, ``e2e_s``, ``output_tok_s``):

    TTFT          = ttft_s       (continuous: slot wait + scheduling + the prompt's prefill;
                                  static: the batch's prefill)
    TPOT          = tpot_s       (continuous: the mixed steady-state iteration incl. host time;
                                  static: the decode step at the mean context)
    tok/s/user    = 1 / TPOT
    tok/s/GPU     = output_tok_s / g   (replica's output tokens/s, prefill included)

The Pareto front is taken per (model, hardware) over every feasible point, both axes
maximized (:func:`dse.search.pareto.pareto_front`); the best point per SLA is the highest
tok/s/GPU among the feasible points meeting both SLA bounds (ties: higher tok/s/user,
then the smaller replica, then the smaller EP and attention DP), once over every listed precision (``scope`` ``any``) and once
per precision that every hardware entry lists (``scope`` = that precision), so a
comparison at equal numerics is available too.  For an MoE model whose EP / attention-DP
layouts were searched, the front and the best point per SLA are also taken over the
layouts without them (``EP = DP = 1``; front ``pareto_tp_pp``, ``scope`` ``tp_pp``), so
the report can say what EP and attention DP gain.

:func:`run` returns a :class:`dse.report.serving_results.ServingResults`;
:mod:`dse.report.serving` writes ``results/<name>/``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from dse.errors import InputError, require
from dse.infer.breakdown import KINDS, row_breakdown
from dse.infer.continuous import checked_engine, default_engine
from dse.infer.expert_parallel import AUTO, serving_layouts
from dse.infer.sweep import BATCHING, replica_layouts, sweep_inference
from dse.sweep.runner import run_concurrently
from dse.report.results import StudyHeader
from dse.report.serving_results import SLA, TP_PP, ServingResults, ServingStudy
from dse.search.pareto import pareto_front
from dse.spec.hardware import check_precision, get_hardware
from dse.spec.layout import SERVING_PRECISION, SERVING_PRECISION_NAMES
from dse.spec.model import get_model
from dse.spec.study import (SERVING_AXES, SERVING_AXIS_RULE, SERVING_MAX_BATCH, SERVING_MAX_LEN,
                            SERVING_PRECISIONS, study_keys)
from dse.studies.common import check_keys, integer, number, results_dir

# declared once, in the study schema (dse.spec.study)
TOP_KEYS = study_keys("serving")
SERVING_KEYS = study_keys("serving", "serving")
PRECISIONS = SERVING_PRECISIONS
MAX_BATCH = SERVING_MAX_BATCH
MAX_LEN = SERVING_MAX_LEN
AXES = ("tok_s_per_gpu", "tok_s_per_user")


def _list(v, where: str, key: str) -> list:
    v = [v] if isinstance(v, str) else v
    require(isinstance(v, list) and len(v) > 0 and all(isinstance(x, str) for x in v), where, key,
            f"must be a string or a non-empty list of strings, but got {v!r}")
    require(len(set(v)) == len(v), where, key, f"must not repeat an entry, but got {v!r}")
    return v


def precision_of(name: str, hw) -> int:
    """The serving precision code: ``fp4`` is the hardware's native block-scaled format
    (NVFP4 on NVIDIA Blackwell, MXFP4 on AMD CDNA, as :mod:`dse.infer.predict_rows`)."""
    if name == "fp4":
        return SERVING_PRECISION["mxfp4" if str(hw.generation).startswith("cdna") else "nvfp4"]
    return SERVING_PRECISION[name]


def parse(d: dict, path: Path) -> ServingStudy:
    where = str(path)
    check_keys(d, TOP_KEYS, where, "")
    s = d.get("serving")
    require(isinstance(s, dict), where, "serving", "table is required")
    check_keys(s, SERVING_KEYS, where, "serving.")
    ids = _list(s.get("models"), where, "serving.models")
    models = tuple(get_model(m, where=f"{where}: serving.models") for m in ids)
    gpus = integer(s, "gpus", where, "serving.")
    require(gpus <= 1 << 20, where, "serving.gpus", f"must be <= {1 << 20}, but got {gpus}")
    lens = {}
    for k in ("input_len", "output_len"):
        lens[k] = integer(s, k, where, "serving.")
        require(lens[k] <= MAX_LEN, where, f"serving.{k}", f"must be <= {MAX_LEN}, but got {lens[k]}")
    batching = s.get("batching", "continuous")
    require(batching in BATCHING, where, "serving.batching",
            f"must be one of {list(BATCHING)}, but got {batching!r}")
    max_batch = integer(s, "max_batch", where, "serving.")
    require(max_batch <= MAX_BATCH, where, "serving.max_batch",
            f"must be <= {MAX_BATCH}, but got {max_batch}")
    for m, mid in zip(models, ids):
        require(any(replica_layouts(m, g) for g in range(1, gpus + 1) if gpus % g == 0), where,
                "serving.gpus", f"must admit a replica of {mid} (TP x PP = a divisor of gpus, TP "
                f"dividing {m.num_attention_heads} heads, PP <= {m.num_layers} layers), but got {gpus}")
    axes = {k: moe_axis(s, k, where, batching) for k in SERVING_AXES}
    for m, mid in zip(models, ids):
        check_moe_axes(m, mid, gpus, axes["ep"], axes["attn_dp"], where)

    hw_t = d.get("hardware")
    require(isinstance(hw_t, list) and hw_t and all(isinstance(h, dict) for h in hw_t), where,
            "hardware", "must be a non-empty array of tables ([[hardware]] name = ..., precisions = [...])")
    hws, precs, engines, texts = [], [], [], []
    for i, h in enumerate(hw_t):
        key = f"hardware[{i}]."
        check_keys(h, study_keys("serving", "hardware"), where, key)
        require(isinstance(h.get("name"), str), where, f"{key}name", "must be a catalog name")
        hw = get_hardware(h["name"], where=f"{where}: {key}name")
        eng = h.get("engine", default_engine(hw))
        require(isinstance(eng, str), where, f"{key}engine", f"must be a string, but got {eng!r}")
        engines.append(checked_engine(eng, hw, where, f"{key}engine"))
        texts.append(eng)
        ps = _list(h.get("precisions", ["bf16"]), where, f"{key}precisions")
        for p in ps:
            require(p in PRECISIONS, where, f"{key}precisions", f"must each be one of {list(PRECISIONS)}, "
                    f"but got {p!r}")
            check_precision(hw, precision_of(p, hw), f"{where}: {key}precisions")
        hws.append(hw)
        precs.append(tuple(ps))
    names = [h.name for h in hws]
    require(len(set(names)) == len(names), where, "hardware", f"must name distinct GPUs, but got {names}")

    sla_t = d.get("sla")
    require(isinstance(sla_t, list) and sla_t and all(isinstance(x, dict) for x in sla_t), where,
            "sla", "must be a non-empty array of tables ([[sla]] name = ..., ttft_ms = ..., tpot_ms = ...)")
    slas = []
    for i, t in enumerate(sla_t):
        key = f"sla[{i}]."
        check_keys(t, study_keys("serving", "sla"), where, key)
        require(isinstance(t.get("name"), str) and t["name"].strip() != "", where, f"{key}name",
                f"must be a non-empty string, but got {t.get('name')!r}")
        slas.append(SLA(t["name"], number(t, "ttft_ms", where, key, low=0, low_open=True),
                        number(t, "tpot_ms", where, key, low=0, low_open=True)))
    sn = [x.name for x in slas]
    require(len(set(sn)) == len(sn), where, "sla", f"must have distinct names, but got {sn}")
    return ServingStudy(models, tuple(ids), tuple(hws), tuple(precs), gpus, lens["input_len"],
                        lens["output_len"], max_batch, tuple(slas), batching, tuple(engines),
                        axes["ep"], axes["attn_dp"], tuple(texts))


def moe_axis(s: dict, key: str, where: str, batching: str):
    """``serving.ep`` / ``serving.attn_dp``: ``"auto"``, a sorted tuple of degrees, or
    None (= 1); absent: ``"auto"`` under continuous batching, None under static (module
    docstring)."""
    v = s.get(key)
    if v is None:
        return AUTO if batching == "continuous" else None
    pos = lambda x: isinstance(x, int) and not isinstance(x, bool) and 1 <= x <= 1 << 20
    ok = v == AUTO or pos(v) or (isinstance(v, list) and len(v) > 0 and all(pos(x) for x in v))
    require(ok, where, f"serving.{key}", SERVING_AXIS_RULE.format(v=v))
    vals = AUTO if v == AUTO else tuple(sorted({v} if pos(v) else set(v)))
    return vals


def moe_layouts(model, g: int, ep, attn_dp) -> dict | None:
    """The serving layouts of one ``g``-GPU replica whose EP and attention-DP degrees are
    among the study's (``"auto"``: any allowed; None: 1), or None when there is none."""
    lays = serving_layouts(model, g, AUTO, AUTO)
    keep = np.ones(len(lays["tp"]), bool)
    for f, v in (("ep", ep), ("attn_dp", attn_dp)):
        if v != AUTO:
            keep &= np.isin(lays[f], (1,) if v is None else v)
    return {f: a[keep] for f, a in lays.items()} if keep.any() else None


def degrees(lays: dict, f: str) -> list[int]:
    """The ``ep`` / ``attn_dp`` argument of :func:`dse.infer.sweep.sweep_inference` that
    yields exactly the layouts ``lays`` of :func:`moe_layouts`: the degrees they use (the
    valid layouts of their product are ``lays`` again)."""
    return sorted(set(int(x) for x in lays[f]))


def check_moe_axes(model, mid: str, gpus: int, ep, attn_dp, where: str) -> None:
    """Every listed EP / attention-DP degree is taken by some layout of some replica size
    of an MoE model; otherwise the layout rule its first candidate breaks, as a one-line
    error naming the field (:func:`dse.infer.expert_parallel.serving_layouts`)."""
    if model.num_experts <= 1:
        return
    sizes = [g for g in range(1, gpus + 1) if gpus % g == 0]
    for key, v in (("ep", ep), ("attn_dp", attn_dp)):
        for x in (() if v in (None, AUTO) else v):
            one = {"ep": ep, "attn_dp": attn_dp, key: (x,)}
            if any(moe_layouts(model, g, one["ep"], one["attn_dp"]) for g in sizes):
                continue
            try:
                serving_layouts(model, gpus, one["ep"], one["attn_dp"])
                rule = "no layout takes it"
            except InputError as e:
                rule = f"{e.field}: {e.rule}"
            require(False, where, f"serving.{key}", f"{x} is allowed for {mid} at no replica size "
                    f"dividing {gpus} GPUs ({rule})")


def layout_text(pts: pd.DataFrame) -> list[str]:
    """Per point: ``TP4 PP2 x1 c64 fp8`` / ``TP1·DP8·EP8 PP1 x1 c512 fp8``: the replica's
    TP, attention-DP ranks (``DP``, shown when > 1) and EP degree (``EP``, when > 1) inside
    a stage, its PP, replicas, requests per replica (``c`` in flight under continuous
    batching, ``b`` static batch), precision."""
    cols = [pts[c].to_numpy() for c in ("tp", "attn_dp", "ep", "pp", "replicas", "batch",
                                        "batching", "precision")]
    out = []
    for tp, dp, ep, pp, rep, b, mode, prec in zip(*cols):
        par = f"TP{int(tp)}" + (f"·DP{int(dp)}" if dp > 1 else "") + (f"·EP{int(ep)}" if ep > 1 else "")
        out.append(f"{par} PP{int(pp)} x{int(rep)} {'c' if mode == 'continuous' else 'b'}{int(b)} {prec}")
    return out


def sweep_points(st: ServingStudy) -> pd.DataFrame:
    """Every point of the study (module docstring), with the derived serving columns."""
    jobs = []          # one sweep per (model, replica size, precision code), run side by side
    for model, mid in zip(st.models, st.model_ids):
        sizes = [g for g in range(1, st.gpus + 1) if st.gpus % g == 0 and replica_layouts(model, g)]
        for g in sizes:
            lays = moe_layouts(model, g, st.ep, st.attn_dp)
            if lays is None:
                continue
            by_code: dict[int, list] = {}
            for hw, ps, eng in zip(st.hardware, st.precisions, st.engine_texts or st.engines):
                for p in ps:
                    by_code.setdefault(precision_of(p, hw), []).append((hw, eng))
            for code, he in sorted(by_code.items()):
                jobs.append(lambda model=model, mid=mid, g=g, code=code, he=he, lays=lays:
                            _sweep(st, model, mid, g, code, he, lays))
    frames = run_concurrently(jobs)
    pts = pd.concat(frames, ignore_index=True)
    pts["ttft_ms"] = pts["ttft_s"] * 1e3
    pts["tpot_ms"] = pts["tpot_s"] * 1e3
    pts["tok_s_per_user"] = 1.0 / pts["tpot_s"]
    pts["tok_s_per_gpu"] = pts["output_tok_s"] / pts["gpus_per_replica"]
    pts["tok_s_system"] = pts["tok_s_per_gpu"] * st.gpus
    pts["layout"] = layout_text(pts)
    order = {h.name: i for i, h in enumerate(st.hardware)}
    pts["_m"] = pts["model_id"].map({m: i for i, m in enumerate(st.model_ids)})
    pts["_h"] = pts["hardware"].map(order)
    pts = pts.sort_values(["_m", "_h", "feasible", "tok_s_per_gpu", "tok_s_per_user", "gpus_per_replica"],
                          ascending=[True, True, False, False, False, True], kind="stable")
    return pts.drop(columns=["_m", "_h"]).reset_index(drop=True)


def _sweep(st: ServingStudy, model, mid, g, code, he, lays) -> pd.DataFrame:
    """One :func:`dse.infer.sweep.sweep_inference` of the study: ``model`` on ``g``-GPU
    replicas of the hardware (and engines) ``he`` at precision ``code``."""
    df = sweep_inference(model, [h for h, _ in he], g, st.max_batch, st.input_len, st.output_len,
                         code, batching=st.batching, engine=[e for _, e in he],
                         ep=degrees(lays, "ep"), attn_dp=degrees(lays, "attn_dp"))
    df.insert(0, "model_id", mid)
    df["gpus_per_replica"] = g
    df["replicas"] = st.gpus // g
    return df


LAYOUT_KEY = ["precision", "tp", "pp", "ep", "attn_dp", "replicas"]


def pareto(pts: pd.DataFrame) -> pd.DataFrame:
    """The feasible points no other feasible point of the same (model, hardware) beats on
    both tok/s/GPU and tok/s/user, ordered by tok/s/user.  Of points of one layout
    (:data:`LAYOUT_KEY`) equal on both axes (continuous batching: a concurrency above the
    KV slots runs the same admitted batch and only queues longer) the front keeps the one
    with the lowest TTFT."""
    ok = pts[pts["feasible"]]
    parts = []
    for _, g in ok.groupby(["model_id", "hardware"], sort=False):
        front = g[pareto_front(g, list(AXES), ["maximize", "maximize"])]
        front = front.sort_values(["ttft_ms", "batch"], kind="stable").drop_duplicates(
            [*LAYOUT_KEY, *AXES])
        parts.append(front.sort_values(["tok_s_per_user", "tok_s_per_gpu"], kind="stable"))
    return pd.concat(parts, ignore_index=True) if parts else ok.iloc[:0]


def tp_pp_only(pts: pd.DataFrame, st: ServingStudy) -> pd.DataFrame:
    """The points without EP or attention DP (``ep = attn_dp = 1``) of the models whose
    EP / attention-DP layouts were searched (:meth:`ServingStudy.searches_ep`)."""
    moe = [mid for m, mid in zip(st.models, st.model_ids) if st.searches_ep(m)]
    return pts[pts["model_id"].isin(moe) & (pts["ep"] == 1) & (pts["attn_dp"] == 1)]


def best_per_sla(pts: pd.DataFrame, st: ServingStudy) -> pd.DataFrame:
    """One row per (model, hardware, SLA, scope): the best point that meets the SLA, or
    the reason none does (module docstring; scope ``any``, a precision every GPU lists, or
    :data:`TP_PP` for an MoE model searched with EP / attention DP)."""
    common = [p for p in PRECISIONS if all(p in ps for ps in st.precisions)]
    rows = []
    for model, mid in zip(st.models, st.model_ids):
        scopes = ["any"] + common + ([TP_PP] if st.searches_ep(model) else [])
        for hw, ps in zip(st.hardware, st.precisions):
            mine = pts[(pts["model_id"] == mid) & (pts["hardware"] == hw.name)]
            g = mine[mine["feasible"]]
            for sla in st.slas:
                for scope in scopes:
                    if scope == TP_PP:
                        c = g[(g["ep"] == 1) & (g["attn_dp"] == 1)]
                    else:
                        c = g if scope == "any" else g[g["precision"] == SERVING_PRECISION_NAMES[
                            precision_of(scope, hw)]]
                    meet = c[(c["ttft_ms"] <= sla.ttft_ms) & (c["tpot_ms"] <= sla.tpot_ms)]
                    base = {"model_id": mid, "hardware": hw.name, "sla": sla.name,
                            "sla_ttft_ms": sla.ttft_ms, "sla_tpot_ms": sla.tpot_ms, "scope": scope,
                            "points_feasible": len(c), "points_meeting": len(meet)}
                    if len(meet):
                        b = meet.sort_values(["tok_s_per_gpu", "tok_s_per_user", "gpus_per_replica", "ep",
                                              "attn_dp"], ascending=[False, False, True, True, True],
                                             kind="stable").iloc[0]
                        rows.append({**base, **{k: b[k] for k in best_cols(st)},
                                     "next_batch": next_batch(mine, b, sla), "status": "ok"})
                    else:
                        why = ("no feasible point" if not len(c) else
                               f"none of {len(c)} feasible points meets it (lowest TTFT "
                               f"{c['ttft_ms'].min():.0f} ms, lowest TPOT {c['tpot_ms'].min():.1f} ms)")
                        rows.append({**base, **{k: np.nan for k in best_cols(st)}, "layout": "",
                                     "precision": "", "next_batch": "", "status": why})
    return pd.DataFrame(rows)


def _above(v: float, lim: float, digits: int) -> str:
    """``v`` (> ``lim``) with the fewest decimals from ``digits`` up to 3 that print it
    above the bound (25.017 against 25 ms is "25.02", not "25.0")."""
    for d in range(digits, 4):
        if round(v, d) > lim:
            return f"{v:,.{d}f}"
    return f"{v:,.3f}"


def next_batch(pts: pd.DataFrame, b, sla: SLA) -> str:
    """What stops the next larger batch at the best point's layout and precision: not
    searched, does not fit in memory, breaks a bound (which, by how much), or meets the
    SLA with fewer tok/s/GPU."""
    key = np.ones(len(pts), bool)
    for c in ("model_id", "hardware", *LAYOUT_KEY):
        key &= pts[c].to_numpy() == b[c]
    same = pts[key & (pts["batch"].to_numpy() > b["batch"])].sort_values("batch", kind="stable")
    if not len(same):
        return "largest batch searched"
    n = same.iloc[0]
    cont = n["batching"] == "continuous"
    nb = f"{'c' if cont else 'b'}{int(n['batch'])}"
    if not n["feasible"]:
        return f"{nb} does not fit in memory ({n['status']})"
    over = [f"{k} {_above(n[c], lim, d)} ms" for k, c, lim, d in (("TTFT", "ttft_ms", sla.ttft_ms, 0),
                                                                  ("TPOT", "tpot_ms", sla.tpot_ms, 1))
            if n[c] > lim]
    queued = (f" ({int(n['batch'])} requests over {int(n['slots'])} KV slots: "
              f"{n['queue_s'] * 1e3:,.0f} ms waiting for a slot)") if cont and n["batch"] > n["slots"] else ""
    if over:
        return f"{nb} breaks the bound: {' and '.join(over)}{queued}"
    return f"{nb} meets the SLA with fewer tok/s/GPU ({n['tok_s_per_gpu']:,.0f}){queued}"


COMMON_COLS = ("layout", "precision", "tp", "pp", "ep", "attn_dp", "replicas", "gpus_per_replica", "batch",
               "tok_s_per_gpu", "tok_s_per_user", "tok_s_system", "ttft_ms", "tpot_ms", "e2e_s",
               "mem_gib", "hbm_gib")
MODE_COLS = {"static": ("decode_gemm_s", "decode_attention_s", "decode_comm_s",
                        "decode_elementwise_s", "decode_s_per_token"),
             "continuous": ("engine", "admitted", "slots", "kv_slots", "queue_s", "kv_pool_gib",
                            "experts_per_gpu")}


def decode_breakdowns(best: pd.DataFrame, st: ServingStudy) -> pd.DataFrame | None:
    """Each best-per-SLA winner's (scope ``any``) steady decode-only iteration by operator
    kind, :func:`dse.infer.breakdown.decode_breakdown` at its admitted batch per attention
    rank and the mean context ``S + O/2``; continuous batching only (None otherwise)."""
    if st.batching != "continuous":
        return None
    rows = []
    for r in best[(best["status"] == "ok") & (best["scope"] == "any")].itertuples():
        model = st.models[st.model_ids.index(r.model_id)]
        hw = next(h for h in st.hardware if h.name == r.hardware)
        br = row_breakdown(model, hw, r, SERVING_PRECISION[r.precision], st.input_len + st.output_len / 2.0,
                           st.launched(st.hardware.index(hw), model))
        rows.append({"model_id": r.model_id, "hardware": r.hardware, "sla": r.sla, "layout": r.layout,
                     "tpot_ms": r.tpot_ms, "decode_ms": br.iteration_s * 1e3,
                     **{k.replace("_s", "_ms"): getattr(br, k) * 1e3 for k in KINDS}})
    return pd.DataFrame(rows)


def best_cols(st: ServingStudy) -> tuple[str, ...]:
    """The point columns of ``best_per_sla.csv`` for the study's batching mode."""
    return COMMON_COLS + MODE_COLS[st.batching]


def run(d: dict, path: Path) -> ServingResults:
    st = parse(d, path)
    out = results_dir(d["name"])
    t0 = time.perf_counter()
    pts = sweep_points(st)
    run_s = time.perf_counter() - t0
    best = best_per_sla(pts, st)
    return ServingResults(StudyHeader(d["name"], d.get("description", ""), path, out), st, pts,
                          pareto(pts), best, run_s, pareto(tp_pp_only(pts, st)),
                          decode_breakdowns(best, st))
