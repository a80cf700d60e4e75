"""``kind = "serving"``: the serving layout search per SLA (studies/serving.toml).

    [serving]
    models = ["meta-llama/Llama-3.3-70B-Instruct"]   # catalog names or Hugging Face ids
    gpus = 8                                        # GPUs of the deployment
    input_len = 1024                                # prompt tokens per request
    output_len = 1024                               # generated tokens per request
    max_batch = 1024                                # batch / concurrency: powers of two up to it
    batching = "continuous"                         # continuous (default) | static

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
GPUs for every ``g`` dividing ``gpus``, every (TP, PP) with ``TP x PP = g`` that splits the
heads, every batch (powers of two up to ``max_batch``), every precision the hardware
entry lists.

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
then the smaller replica), once over every listed precision (``scope`` ``any``) and once
per precision that every hardware entry lists (``scope`` = that precision), so a
comparison at equal numerics is available too.

:func:`run` returns a :class:`dse.report.serving_results.ServingResults`;
:mod:`dse.report.serving` writes ``results/<name>/``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from dse.errors import require
from dse.infer.continuous import default_engine, engine_rule
from dse.infer.sweep import BATCHING, replica_layouts, sweep_inference
from dse.report.results import StudyHeader
from dse.report.serving_results import SLA, ServingResults, ServingStudy
from dse.search.pareto import pareto_front
from dse.spec.hardware import check_precision, get_hardware
from dse.spec.layout import SERVING_PRECISION, SERVING_PRECISION_NAMES
from dse.spec.model import get_model
from dse.spec.study import SERVING_MAX_BATCH, SERVING_MAX_LEN, SERVING_PRECISIONS, study_keys
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

    hw_t = d.get("hardware")
    require(isinstance(hw_t, list) and hw_t and all(isinstance(h, dict) for h in hw_t), where,
            "hardware", "must be a non-empty array of tables ([[hardware]] name = ..., precisions = [...])")
    hws, precs, engines = [], [], []
    for i, h in enumerate(hw_t):
        key = f"hardware[{i}]."
        check_keys(h, study_keys("serving", "hardware"), where, key)
        require(isinstance(h.get("name"), str), where, f"{key}name", "must be a catalog name")
        hw = get_hardware(h["name"], where=f"{where}: {key}name")
        eng = h.get("engine", default_engine(hw))
        require(isinstance(eng, str), where, f"{key}engine", f"must be a string, but got {eng!r}")
        why = engine_rule(eng, hw)
        require(not why, where, f"{key}engine", why)
        engines.append(eng)
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
                        lens["output_len"], max_batch, tuple(slas), batching, tuple(engines))


def layout_text(r) -> str:
    """``TP4 PP2 x1 c64 fp8``: (TP, PP) of a replica, replicas, requests per replica (``c``
    in flight under continuous batching, ``b`` static batch), precision."""
    n = "c" if r["batching"] == "continuous" else "b"
    return (f"TP{int(r['tp'])} PP{int(r['pp'])} x{int(r['replicas'])} {n}{int(r['batch'])} "
            f"{r['precision']}")


def sweep_points(st: ServingStudy) -> pd.DataFrame:
    """Every point of the study (module docstring), with the derived serving columns."""
    frames = []
    for model, mid in zip(st.models, st.model_ids):
        sizes = [g for g in range(1, st.gpus + 1) if st.gpus % g == 0 and replica_layouts(model, g)]
        for g in sizes:
            by_code: dict[int, list] = {}
            for hw, ps, eng in zip(st.hardware, st.precisions, st.engines):
                for p in ps:
                    by_code.setdefault(precision_of(p, hw), []).append((hw, eng))
            for code, he in sorted(by_code.items()):
                hws = [h for h, _ in he]
                df = sweep_inference(model, hws, g, st.max_batch, st.input_len, st.output_len, code,
                                     batching=st.batching, engine=[e for _, e in he])
                df.insert(0, "model_id", mid)
                df["gpus_per_replica"] = g
                df["replicas"] = st.gpus // g
                frames.append(df)
    pts = pd.concat(frames, ignore_index=True)
    pts["ttft_ms"] = pts["ttft_s"] * 1e3
    pts["tpot_ms"] = pts["tpot_s"] * 1e3
    pts["tok_s_per_user"] = 1.0 / pts["tpot_s"]
    pts["tok_s_per_gpu"] = pts["output_tok_s"] / pts["gpus_per_replica"]
    pts["tok_s_system"] = pts["tok_s_per_gpu"] * st.gpus
    pts["layout"] = [layout_text(r) for _, r in pts.iterrows()]
    order = {h.name: i for i, h in enumerate(st.hardware)}
    pts["_m"] = pts["model_id"].map({m: i for i, m in enumerate(st.model_ids)})
    pts["_h"] = pts["hardware"].map(order)
    pts = pts.sort_values(["_m", "_h", "feasible", "tok_s_per_gpu", "tok_s_per_user", "gpus_per_replica"],
                          ascending=[True, True, False, False, False, True], kind="stable")
    return pts.drop(columns=["_m", "_h"]).reset_index(drop=True)


def pareto(pts: pd.DataFrame) -> pd.DataFrame:
    """The feasible points no other feasible point of the same (model, hardware) beats on
    both tok/s/GPU and tok/s/user, ordered by tok/s/user.  Of points equal on both axes
    (continuous batching: a concurrency above the KV slots runs the same admitted batch and
    only queues longer) the front keeps the one with the lowest TTFT."""
    ok = pts[pts["feasible"]]
    parts = []
    for _, g in ok.groupby(["model_id", "hardware"], sort=False):
        front = g[pareto_front(g, list(AXES), ["maximize", "maximize"])]
        front = front.sort_values(["ttft_ms", "batch"], kind="stable").drop_duplicates(
            ["precision", "tp", "pp", "replicas", *AXES])
        parts.append(front.sort_values(["tok_s_per_user", "tok_s_per_gpu"], kind="stable"))
    return pd.concat(parts, ignore_index=True) if parts else ok.iloc[:0]


def best_per_sla(pts: pd.DataFrame, st: ServingStudy) -> pd.DataFrame:
    """One row per (model, hardware, SLA, scope): the best point that meets the SLA, or
    the reason none does (module docstring)."""
    common = [p for p in PRECISIONS if all(p in ps for ps in st.precisions)]
    rows = []
    for mid in st.model_ids:
        for hw, ps in zip(st.hardware, st.precisions):
            g = pts[(pts["model_id"] == mid) & (pts["hardware"] == hw.name) & pts["feasible"]]
            for sla in st.slas:
                for scope in ["any"] + common:
                    c = g if scope == "any" else g[g["precision"] == SERVING_PRECISION_NAMES[
                        precision_of(scope, hw)]]
                    meet = c[(c["ttft_ms"] <= sla.ttft_ms) & (c["tpot_ms"] <= sla.tpot_ms)]
                    base = {"model_id": mid, "hardware": hw.name, "sla": sla.name,
                            "sla_ttft_ms": sla.ttft_ms, "sla_tpot_ms": sla.tpot_ms, "scope": scope,
                            "points_feasible": len(c), "points_meeting": len(meet)}
                    if len(meet):
                        b = meet.sort_values(["tok_s_per_gpu", "tok_s_per_user", "gpus_per_replica"],
                                             ascending=[False, False, True], kind="stable").iloc[0]
                        rows.append({**base, **{k: b[k] for k in best_cols(st)},
                                     "next_batch": next_batch(pts, b, sla), "status": "ok"})
                    else:
                        why = ("no feasible point" if not len(c) else
                               f"none of {len(c)} feasible points meets it (lowest TTFT "
                               f"{c['ttft_ms'].min():.0f} ms, lowest TPOT {c['tpot_ms'].min():.1f} ms)")
                        rows.append({**base, **{k: np.nan for k in best_cols(st)}, "layout": "",
                                     "precision": "", "next_batch": "", "status": why})
    return pd.DataFrame(rows)


def next_batch(pts: pd.DataFrame, b, sla: SLA) -> str:
    """What stops the next larger batch at the best point's layout and precision: not
    searched, does not fit in memory, breaks a bound (which, by how much), or meets the
    SLA with fewer tok/s/GPU."""
    same = pts[(pts["model_id"] == b["model_id"]) & (pts["hardware"] == b["hardware"])
               & (pts["precision"] == b["precision"]) & (pts["tp"] == b["tp"]) & (pts["pp"] == b["pp"])
               & (pts["batch"] > b["batch"])].sort_values("batch", kind="stable")
    if not len(same):
        return "largest batch searched"
    n = same.iloc[0]
    cont = n["batching"] == "continuous"
    nb = f"{'c' if cont else 'b'}{int(n['batch'])}"
    if not n["feasible"]:
        return f"{nb} does not fit in memory ({n['status']})"
    over = [f"{k} {n[c]:,.{d}f} ms" for k, c, lim, d in (("TTFT", "ttft_ms", sla.ttft_ms, 0),
                                                         ("TPOT", "tpot_ms", sla.tpot_ms, 1)) if n[c] > lim]
    queued = (f" ({int(n['batch'])} requests over {int(n['slots'])} KV slots: "
              f"{n['queue_s'] * 1e3:,.0f} ms waiting for a slot)") if cont and n["batch"] > n["slots"] else ""
    if over:
        return f"{nb} breaks the bound: {' and '.join(over)}{queued}"
    return f"{nb} meets the SLA with fewer tok/s/GPU ({n['tok_s_per_gpu']:,.0f}){queued}"


COMMON_COLS = ("layout", "precision", "tp", "pp", "replicas", "gpus_per_replica", "batch",
               "tok_s_per_gpu", "tok_s_per_user", "tok_s_system", "ttft_ms", "tpot_ms", "e2e_s",
               "mem_gib", "hbm_gib")
MODE_COLS = {"static": ("decode_gemm_s", "decode_attention_s", "decode_comm_s",
                        "decode_elementwise_s", "decode_s_per_token"),
             "continuous": ("engine", "admitted", "slots", "kv_slots", "queue_s", "kv_pool_gib")}


def best_cols(st: ServingStudy) -> tuple[str, ...]:
    """The point columns of ``best_per_sla.csv`` for the study's batching mode."""
    return COMMON_COLS + MODE_COLS[st.batching]


def run(d: dict, path: Path) -> ServingResults:
    st = parse(d, path)
    out = results_dir(d["name"])
    t0 = time.perf_counter()
    pts = sweep_points(st)
    run_s = time.perf_counter() - t0
    return ServingResults(StudyHeader(d["name"], d.get("description", ""), path, out), st, pts,
                          pareto(pts), best_per_sla(pts, st), run_s)
