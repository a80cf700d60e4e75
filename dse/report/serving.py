"""Files of a serving study (dse/studies/serving.py) from its
:class:`~dse.report.serving_results.ServingResults`: ``sweep.parquet`` (every point,
untracked), ``pareto.csv``, ``best_per_sla.csv``, ``pareto_<model>.png`` per model,
``report.md`` and ``manifest.json`` (timings: untracked).

Every sentence of ``report.md`` is computed from the results: which GPU serves the most
tokens/s/GPU under each SLA and by how much, the layout and precision it uses, and which
SLA bound is the tighter one there."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from dse.report.atomic import save_fig, write_csv, write_parquet, write_text
from dse.report.manifest import write_manifest
from dse.report.markdown import md_table
from dse.report.serving_results import TP_PP, ServingResults
from dse.infer.engines import GRAPH_LAUNCH_S, graph_kernel_s

#: one colour per hardware entry, in study-file order (matplotlib's tab10)
#: one marker per SLA, in study-file order (its best point per GPU)
MARKERS = ("*", "P", "X", "D", "s", "^")
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
PARETO_COLS = ["model_id", "hardware", "layout", "precision", "tp", "pp", "ep", "attn_dp", "replicas",
               "gpus_per_replica",
               "batch", "tok_s_per_gpu", "tok_s_per_user", "tok_s_system", "ttft_ms", "tpot_ms", "e2e_s",
               "mem_gib", "hbm_gib"]


def slug(text: str) -> str:
    """A file-name-safe form of a model id (``meta-llama/Llama-3.3-70B-Instruct`` ->
    ``Llama-3.3-70B-Instruct``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text.rsplit("/", 1)[-1])


def write(res: ServingResults) -> Path:
    out = res.head.out
    write_parquet(res.points, out / "sweep.parquet", index=False)
    write_csv(res.pareto[PARETO_COLS], out / "pareto.csv", index=False)
    if res.pareto_tp_pp is not None and len(res.pareto_tp_pp):
        write_csv(res.pareto_tp_pp[PARETO_COLS], out / "pareto_tp_pp.csv", index=False)
    write_csv(res.best, out / "best_per_sla.csv", index=False)
    if res.decode is not None and len(res.decode):
        write_csv(res.decode, out / "decode_breakdown.csv", index=False)
    files = [plot(res, mid, out / f"pareto_{slug(mid)}.png") for mid in res.study.model_ids]
    write_text(out / "report.md", report(res, files))
    n = len(res.points)
    write_manifest(out, res.head.study_file, {
        "points": n, "points_feasible": int(res.points["feasible"].sum()),
        "sweep_seconds": round(res.run_s, 3),
        "points_per_second": round(n / res.run_s, 1) if res.run_s > 0 else None})
    return out


def _fixed(res: ServingResults, mid: str) -> str:
    st = res.study
    how = (f"continuous batching, 1–{st.max_batch} requests in flight per replica"
           if st.batching == "continuous" else f"static batches of 1–{st.max_batch} per replica")
    return f"{mid} on {st.gpus} GPUs, {st.input_len} prompt + {st.output_len} generated tokens per request, {how}"


def _engine_line(e, hws: list, st) -> str:
    """One bullet on an engine profile as launched on ``hws`` (:meth:`ServingStudy.launched`),
    every figure from :mod:`dse.infer.engines`."""
    name = e.name
    launch = sorted({f"{float(h.kernel_launch_s) * 1e6:g}" for h in hws})
    replay = sorted({f"{float(graph_kernel_s(h)) * 1e6:.2f}" for h in hws})
    graphs = (f"decode-only iterations up to {e.graph_max_batch} sequences replay as CUDA graphs "
              f"({'/'.join(replay)} µs per kernel: the {GRAPH_LAUNCH_S * 1e6:g} µs graph gap and "
              f"one HBM latency), other iterations launch at "
              f"{'/'.join(launch)} µs per kernel" if e.cuda_graphs
              else f"no CUDA graphs ({'/'.join(launch)} µs per kernel launch)")
    mix = ("prompts run inside the decode iteration (in-flight batching: one pass over decode and "
           "prompt tokens)" if e.mixed_batches else
           "prompts run as prefill passes of their own while decode waits")
    S = st.input_len
    if e.mixed_batches and e.chunked_prefill:
        chunk = (f"prompts split into {e.max_num_tokens}-token chunks, one per iteration "
                 f"({-(-S // e.max_num_tokens)} for a {S}-token prompt)")
    elif S <= e.max_num_tokens:
        chunk = f"a {S}-token prompt fits one iteration's {e.max_num_tokens}-token budget"
    else:
        chunk = (f"a {S}-token prompt is longer than the {e.max_num_tokens} tokens of an iteration "
                 "and is modelled as one pass")
    pool = (f"{e.mem_fraction:.0%} of the memory left after weights" if e.kv_after_weights
            else f"{e.mem_fraction:.0%} of GPU memory, weights included")
    held = (f"input + output = {st.input_len + st.output_len}" if e.reserve_final_kv
            else f"input + output/2 = {st.input_len + st.output_len / 2:g} (admission on current blocks)")
    kv8 = "fp8 KV cache with fp8/fp4 weights (the engine's default), else 16-bit" if e.fp8_kv_with_fp8 \
        else "KV cache in 16 bit at every precision"
    host = (f"host time {e.overhead_per_iter_s * 1e3:g} ms per iteration"
            + (f" + {e.seq_overhead_s * 1e6:g} µs per running request" if e.seq_overhead_s else "")
            + (" (overlapped with the GPU pass: an iteration lasts the longer of the two)"
               if e.host_overlap else " (not overlapped with the GPU)")
            + (f"; an HTTP front end of {e.frontend_s * 1e3:g} ms per request on TTFT and e2e"
               if e.frontend_s else ""))
    return (f"- `{name}` on {', '.join(h.name for h in hws)}: {host}; {graphs}; {mix}; {chunk}; at most {e.max_batch} running "
            f"requests and {e.max_num_tokens} tokens per iteration; KV pool {pool}, {e.block_tokens}-token "
            f"blocks, a request holds {held} tokens; {kv8}.")


def _batching_lines(res: ServingResults) -> list[str]:
    """The bullets of "How the numbers are made" on the batching modelled (from the study
    file's settings and the engine profiles)."""
    st = res.study
    if st.batching == "static":
        return ["- Serving screen: `dse infer --batching static` (`dse.infer.sweep.sweep_inference`), "
                "vectorized over every (TP, PP, batch) of one replica; a layout is `replicas` replicas of "
                "`TP x PP` GPUs. Static batching: a replica prefills its batch, then decodes it, so **TTFT is "
                "the prefill of the whole batch** and TPOT the decode step at the mean context; tok/s/user = "
                "1 / TPOT; tok/s/GPU = batch x output tokens / (TTFT + (output - 1) x TPOT) / GPUs per "
                "replica. No engine host time per iteration is included (the GPU time of the operator graph).",
                "- Memory: weights + the KV cache of the batch at prompt + output tokens + workspace must fit "
                "in 97 % of HBM; points that do not are kept with the reason."]
    pts = res.points
    ok = pts[pts["feasible"]]
    queued = int((ok["batch"] > ok["slots"]).sum())
    by_eng: dict = {}          # launched profile (the study's first model's) -> its hardware
    for i, h in enumerate(st.hardware):
        by_eng.setdefault(st.launched(i, st.models[0]), []).append(h)
    O, S = st.output_len, st.input_len
    return [
        "- Serving screen: `dse infer --batching continuous` (`dse.infer.sweep.sweep_inference`, the "
        "closed-loop `concurrency` scenario of `dse/infer/serving.py` vectorized in "
        "`dse/infer/continuous.py`), over every (TP, attention DP, EP, PP, concurrency) of one replica; a "
        f"layout is `replicas` replicas of `TP x DP x PP` GPUs with 1–{st.max_batch} requests in flight on each "
        "(a finished request is replaced at once). **Continuous (in-flight) batching**: the engine admits "
        "B = min(in flight, its tuned KV-slot limit) requests; every iteration decodes them at the mean "
        f"context {S} + {O}/2 tokens and, as each request finishes after {O} iterations, takes in B/{O} new "
        "prompts.",
        "- TPOT = that steady-state iteration: the operator graph's GPU time for B decode tokens + the new "
        "prompt tokens, plus the engine's host time and kernel-launch costs. TTFT = the wait for a KV slot "
        "(when more requests are in flight than admitted: Little's law, (in flight / B − 1) × the served "
        "request's latency) + half the running scheduling pass + the prompt's prefill (its iteration, or its "
        "own prefill pass) + the HTTP front end where an engine below has one. tok/s/user = 1 / TPOT; "
        f"tok/s/GPU = B x {O} / (TTFT without the wait + "
        f"{O - 1} x TPOT) / GPUs per replica.",
        *[_engine_line(e, hws, st) for e, hws in by_eng.items()],
        "- Memory: the engine's KV pool (above) over a request's paged footprint gives the KV slots; the "
        "tuned running-batch limit is the best steady-state throughput among min(slots, max running "
        "requests, token budget) and the powers of two within 8x below it. A layout whose weights leave no "
        f"KV slot is infeasible (kept with the reason); {queued:,} of the {len(ok):,} feasible points have "
        "more requests in flight than they admit (the excess waits for a slot, inside their TTFT)."]



_OFFSETS = ((4, 3), (4, -8), (-4, 3), (-4, -8))   # points: right above / below, left above / below


def _place_labels(fig, ax, labels, avoid) -> int:
    """Draw each front point's layout label where it overlaps no label drawn before it (nor
    the legend, the SLA lines' captions): the best point per SLA first, then each front's two ends, then the rest
    in front order; a label that fits at none of :data:`_OFFSETS` is left out.  Returns
    how many were drawn."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    taken = [a.get_window_extent(r) for a in avoid]
    shown = 0
    for _, _, x, y, text, c in sorted(labels, key=lambda t: (t[0], t[1])):
        for dx, dy in _OFFSETS:
            t = ax.annotate(text, (x, y), fontsize=5.5, color=c, xytext=(dx, dy),
                            textcoords="offset points", ha="left" if dx > 0 else "right")
            box = t.get_window_extent(r).expanded(1.05, 1.15)
            if any(box.overlaps(b) for b in taken):
                t.remove()
                continue
            taken.append(box)
            shown += 1
            break
    return shown


def plot(res: ServingResults, mid: str, path: Path) -> str:
    """tok/s/GPU over tok/s/user for one model: every feasible point (faint), the Pareto
    front per hardware with each point's layout, the best point per SLA (one marker per SLA) and the
    TPOT bound of each SLA (dashed)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    st = res.study
    pts = res.points[(res.points["model_id"] == mid) & res.points["feasible"]]
    front = res.pareto[res.pareto["model_id"] == mid]
    tp_pp = (res.pareto_tp_pp[res.pareto_tp_pp["model_id"] == mid] if res.pareto_tp_pp is not None
             else front.iloc[:0])
    best = res.best[(res.best["model_id"] == mid) & (res.best["scope"] == "any") & (res.best["status"] == "ok")]
    fig, ax = plt.subplots(figsize=(13, 8.5))
    labels: list = []
    for i, (hw, ps) in enumerate(zip(st.hardware, st.precisions)):
        c = COLOURS[i % len(COLOURS)]
        p = pts[pts["hardware"] == hw.name]
        ax.scatter(p["tok_s_per_user"], p["tok_s_per_gpu"], s=7, color=c, alpha=0.18, linewidths=0)
        f = front[front["hardware"] == hw.name]
        what = f"Pareto front, {len(f)} layouts" if len(f) else "no feasible layout"
        ax.plot(f["tok_s_per_user"], f["tok_s_per_gpu"], "-o", color=c, ms=3.5, lw=1.4,
                label=f"{hw.name} ({'/'.join(ps)}): {what}")
        chosen = set(best.loc[best["hardware"] == hw.name, "layout"]) if "layout" in best else set()
        for k, (_, r) in enumerate(f.iterrows()):
            rank = 0 if r["layout"] in chosen else 1 if k in (0, len(f) - 1) else 2
            labels.append((rank, k, r["tok_s_per_user"], r["tok_s_per_gpu"], r["layout"], c))
        t = tp_pp[tp_pp["hardware"] == hw.name]
        if len(t):
            ax.plot(t["tok_s_per_user"], t["tok_s_per_gpu"], "--", color=c, lw=1.0, alpha=0.8)
        for j, sla in enumerate(st.slas):
            b = best[(best["hardware"] == hw.name) & (best["sla"] == sla.name)]
            ax.scatter(b["tok_s_per_user"], b["tok_s_per_gpu"], marker=MARKERS[j % len(MARKERS)], s=150,
                       color=c, edgecolors="black", linewidths=0.7, zorder=5)
    for j, sla in enumerate(st.slas):
        ax.scatter([], [], marker=MARKERS[j % len(MARKERS)], s=150, color="white", edgecolors="black",
                   label=f"best layout for {sla.name} ({sla.text()})")
    if len(tp_pp):
        ax.plot([], [], "--", color="black", lw=1.0, label="dashed: the front of TP/PP-only layouts (EP = DP = 1)")
    sla_text = []
    for sla in st.slas:
        x = 1000.0 / sla.tpot_ms
        ax.axvline(x, color="grey", ls="--", lw=0.8)
        sla_text.append(ax.text(x, 0.99, f" {sla.name}: TPOT ≤ {sla.tpot_ms:g} ms", rotation=90, va="top",
                                ha="right", fontsize=7, color="dimgrey", transform=ax.get_xaxis_transform()))
    ax.set_xscale("log")
    ax.set_yscale("log")
    # label 2x and 5x between the decades too: a log axis spanning one or two decades
    # otherwise reads only "10^1, 10^2"
    from matplotlib.ticker import LogLocator, FuncFormatter
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    ax.set_xlabel("tokens/s per user (1 / time per output token)")
    ax.set_ylabel("output tokens/s per GPU (replica's output tokens / request latency, per GPU)")
    n = "c requests in flight" if st.batching == "continuous" else "b batch"
    eng = (", engines: " + ", ".join(f"{h.name} {e}" for h, e in zip(st.hardware, st.engines))
           if st.batching == "continuous" else "")
    axes = "TP × attention DP × EP × PP" if len(tp_pp) else "TP × PP"
    ax.set_title(f"{_fixed(res, mid)}{eng}\nPareto front per GPU type over {axes} × replicas × batch × precision "
                 f"(labels: TP{'·DP·EP' if len(tp_pp) else ''}, PP, x replicas, {n} per replica, precision; "
                 "faint: every point that fits)\n"
                 "large markers: best layout per SLA, which may lie inside the front (the front ignores TTFT)",
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.25)
    leg = ax.legend(fontsize=8, loc="lower left")
    shown = _place_labels(fig, ax, labels, [leg, *sla_text])
    ax.text(0.995, 0.005, f"{shown} of {len(labels)} front points labelled (the others would overlap; "
            "every one is in pareto.csv)", transform=ax.transAxes, ha="right", va="bottom",
            fontsize=7, color="dimgrey")
    save_fig(fig, path, dpi=130, bbox_inches="tight")
    plt.close(fig)
    return path.name


def _precision_line(res: ServingResults) -> str:
    st = res.study
    parts = []
    for hw, ps in zip(st.hardware, st.precisions):
        peaks = []
        for p in ps:
            f = {"bf16": hw.peak_bf16_flops_per_s, "fp16": hw.peak_bf16_flops_per_s,
                 "fp8": hw.peak_fp8_flops_per_s, "fp4": hw.peak_fp4_flops_per_s}[p]
            peaks.append(f"{p} {float(f) / 1e12:,.0f}")
        parts.append(f"{hw.name}: {', '.join(peaks)} TFLOPS dense")
    return "; ".join(parts)


def _ratios(rows: pd.DataFrame) -> str:
    """``B200 ... ; 1.23x h200 (456), ...`` for the rows of one (model, SLA, scope)."""
    ok = rows[rows["status"] == "ok"].sort_values("tok_s_per_gpu", ascending=False, kind="stable")
    if not len(ok):
        return "no GPU has a layout that meets it."
    w = ok.iloc[0]
    s = (f"**{w['hardware']}** serves the most, {w['tok_s_per_gpu']:,.0f} tok/s/GPU "
         f"({w['layout']}, {w['tok_s_per_user']:.0f} tok/s/user)")
    others = [f"{w['tok_s_per_gpu'] / r['tok_s_per_gpu']:.2f}x {r['hardware']} ({r['tok_s_per_gpu']:,.0f})"
              for _, r in ok.iloc[1:].iterrows()]
    if others:
        s += ": " + ", ".join(others)
    none = rows[rows["status"] != "ok"]
    if len(none):
        s += "; " + "; ".join(f"nothing on {r['hardware']} meets it ({r['status']})" for _, r in none.iterrows())
    return s + "."


def _bound(r) -> str:
    """The point's TTFT and TPOT as shares of the SLA's bounds."""
    a, b = r["ttft_ms"] / r["sla_ttft_ms"], r["tpot_ms"] / r["sla_tpot_ms"]
    s = f"TTFT {100 * a:.0f} % / TPOT {100 * b:.0f} % of the bounds"
    q = float(r.get("queue_s", 0.0) or 0.0)
    if q > 0.0 and np.isfinite(q):
        s += (f" (its TTFT holds {q * 1e3:,.0f} ms of waiting for a KV slot: "
              f"{int(r['batch'])} requests in flight over {int(r['slots'])} slots)")
    return s


def sla_sentences(res: ServingResults, mid: str) -> list[str]:
    """One bullet per SLA for model ``mid``, every figure from ``res.best``."""
    st = res.study
    b = res.best[res.best["model_id"] == mid]
    L = []
    for sla in st.slas:
        g = b[b["sla"] == sla.name]
        any_ = g[g["scope"] == "any"]
        s = f"- **{sla.name}** ({sla.text()}): " + _ratios(any_)
        ok = any_[any_["status"] == "ok"].sort_values("tok_s_per_gpu", ascending=False, kind="stable")
        if len(ok):
            w = ok.iloc[0]
            s += f" The winner sits at {_bound(w)}; at its layout {w['next_batch']}."
        for scope in [x for x in g["scope"].unique() if x not in ("any", TP_PP)]:
            c = g[g["scope"] == scope]
            same = c.set_index("hardware")["layout"].equals(any_.set_index("hardware")["layout"])
            if not same:
                s += f" At {scope} on every GPU: " + _ratios(c)
        L.append(s)
    return L


def _degrees(v) -> str:
    return ", ".join(str(int(x)) for x in sorted(set(v)))


def moe_lines(res: ServingResults) -> list[str]:
    """The "How the numbers are made" bullet on the MoE models: which EP / attention-DP
    degrees the search took (from the points) and what they change per GPU
    (:mod:`dse.infer.expert_parallel`)."""
    st = res.study
    moe = [(mid, m) for mid, m in zip(st.model_ids, st.models) if m.num_experts > 1]
    if not moe:
        return []
    wide = [(mid, m) for mid, m in moe if st.searches_ep(m)]
    narrow = [mid for mid, m in moe if not st.searches_ep(m)]
    L = []
    if wide:
        pts = res.points
        per = []
        for mid, m in wide:
            p = pts[pts["model_id"] == mid]
            per.append(f"{mid}: {m.num_experts} experts, EP {_degrees(p['ep'])}, attention DP "
                       f"{_degrees(p['attn_dp'])}, {p.drop_duplicates(['tp', 'pp', 'ep', 'attn_dp', 'replicas']).shape[0]} "
                       "layouts")
        L.append("- MoE layouts (`dse/infer/expert_parallel.py`; " + "; ".join(per) + "): a replica is TP x DP x PP "
                 "GPUs. **EP**: the experts of a stage are split over EP of its TP x DP GPUs (E / EP experts per "
                 "GPU), each expert's FFN over the other TP x DP / EP. **Attention DP** (`DP` in the labels): each "
                 "of the DP ranks runs attention, TP-split, on its own share of the requests in flight and holds "
                 "their KV cache (MLA's latent KV is not copied onto every TP rank); the MoE layers then run on all "
                 "TP x DP GPUs (EP = TP x DP: whole experts per GPU; a smaller EP TP-splits each expert over "
                 "TP x DP / EP, vLLM's and SGLang's default without expert parallelism), each MoE layer all-gathering the DP ranks' tokens and "
                 "reduce-scattering the results (TensorRT-LLM `enable_attention_dp`'s default exchange, vLLM's "
                 "`allgather_reducescatter` backend, SGLang DP attention's gather / scatter; "
                 "`dse/infer/moe_serving.py`), so an iteration runs at the pace of the rank with the most "
                 "prompt tokens (`dse/infer/attention_dp.py`). "
                 "Without DP, EP divides TP (hybrid EP x TP: the TP all-reduce combines the experts' partials).")
    if narrow:
        L.append(f"- MoE ({', '.join(narrow)}): searched without EP or attention DP (`serving.ep` / "
                 "`serving.attn_dp` = 1): the experts are split over the replica's TP GPUs.")
    return L


#: a gain below this share is reported as a tie (the hybrid EP x TP layouts differ from TP
#: alone only in their expert GEMM shapes)
TIE = 0.005


def _has_ep(r) -> bool:
    return int(r["ep"]) > 1 or int(r["attn_dp"]) > 1


def ep_sentences(res: ServingResults, mid: str) -> list[str]:
    """One bullet per SLA for an MoE model searched with EP / attention DP: per GPU, the
    best layout (scope ``any``) against the best TP/PP-only one (scope ``tp_pp``), every
    figure from ``res.best``; [] for other models."""
    b = res.best[res.best["model_id"] == mid]
    if TP_PP not in set(b["scope"]):
        return []
    L = []
    for sla in res.study.slas:
        g = b[b["sla"] == sla.name]
        any_ = g[g["scope"] == "any"].set_index("hardware")
        tp = g[g["scope"] == TP_PP].set_index("hardware")
        wins, ties, only, keeps, none = [], [], [], [], []
        for hw in any_.index:
            a, t = any_.loc[hw], tp.loc[hw]
            if a["status"] != "ok":
                none.append(hw)
            elif not _has_ep(a):
                keeps.append(f"{hw} ({a['layout']})")
            elif t["status"] != "ok":
                only.append(f"{hw} ({a['layout']}, {a['tok_s_per_gpu']:,.0f} tok/s/GPU)")
            else:
                x = a["tok_s_per_gpu"] / t["tok_s_per_gpu"]
                if x >= 1.0 + TIE:
                    wins.append(f"{hw} {x:.2f}x ({a['layout']}, {a['tok_s_per_gpu']:,.0f} against "
                                f"{t['tok_s_per_gpu']:,.0f} tok/s/GPU at {t['layout']})")
                else:
                    ties.append(f"{hw} ({a['layout']} against {t['layout']}, "
                                f"{a['tok_s_per_gpu']:,.0f} tok/s/GPU)")
        parts = []
        if wins:
            parts.append("EP / attention DP serves more on " + "; ".join(wins))
        if ties:
            parts.append(f"the best layout with EP is within {TIE:.1%} of the best TP/PP-only one on "
                         + "; ".join(ties))
        if only:
            parts.append("only a layout with EP / attention DP meets it on " + "; ".join(only))
        if keeps:
            parts.append("a TP/PP-only layout stays best on " + "; ".join(keeps))
        if none:
            parts.append("nothing meets it on " + ", ".join(none))
        L.append(f"- **{sla.name}** ({sla.text()}): " + "; ".join(parts) + ".")
    return L


def _num(v, fmt: str) -> str:
    return "–" if not np.isfinite(v) else format(v, fmt)


def _table(res: ServingResults, mid: str) -> pd.DataFrame:
    b = res.best[(res.best["model_id"] == mid) & (res.best["scope"] == "any")]
    f = lambda c, fmt: b[c].astype(float).map(lambda v: _num(v, fmt))
    return pd.DataFrame({
        "SLA": b["sla"], "GPU": b["hardware"], "layout": b["layout"].where(b["status"] == "ok", "–"),
        "tok/s/GPU": f("tok_s_per_gpu", ",.0f"), "tok/s/user": f("tok_s_per_user", ".1f"),
        "TTFT ms": f("ttft_ms", ",.0f"), "TPOT ms": f("tpot_ms", ".2f"), "GiB/GPU": f("mem_gib", ".1f"),
        "next batch at this layout": b["next_batch"].where(b["status"] == "ok", b["status"]),
        "points meeting SLA": b["points_meeting"].astype(int).astype(str) + " / "
        + b["points_feasible"].astype(int).astype(str)})


#: the decode table's kinds (dse.infer.breakdown.LABELS, shortened for a table header)
DECODE_KINDS = {"gemm_ms": "GEMM", "attention_ms": "KV read", "comm_ms": "comm",
                "elementwise_ms": "element-wise", "host_ms": "host"}


def decode_lines(res: ServingResults, mid: str) -> list[str]:
    """The winners' decode-only iteration by operator kind (``res.decode``) as a table of
    shares, and per SLA one sentence naming the largest kind -- computed from the rows."""
    d = None if res.decode is None or res.decode.empty else res.decode[res.decode["model_id"] == mid]
    if d is None or d.empty:
        return []
    order = {s.name: i for i, s in enumerate(res.study.slas)}
    hw_order = {h.name: i for i, h in enumerate(res.study.hardware)}
    d = d.assign(_s=d["sla"].map(order), _h=d["hardware"].map(hw_order)).sort_values(
        ["_s", "_h"], kind="stable")
    share = lambda r, k: f"{r[k] / r['decode_ms']:.0%}"
    t = pd.DataFrame({"SLA": d["sla"], "GPU": d["hardware"], "layout": d["layout"],
                      "decode-only ms": d["decode_ms"].map(lambda v: f"{v:.2f}"),
                      "TPOT ms": d["tpot_ms"].astype(float).map(lambda v: f"{v:.2f}"),
                      **{lab: d.apply(lambda r, k=k: share(r, k), axis=1) for k, lab in DECODE_KINDS.items()}})
    L = ["Where each winner's decode iteration goes (`dse infer --ops`, `dse/infer/breakdown.py`: the "
         "steady decode-only iteration at the admitted batch and mean context, by operator kind, as a share "
         "of it; TPOT also carries the prompt passes of new requests):", "", md_table(t), ""]
    for sla, g in d.groupby("sla", sort=False):
        big = g[list(DECODE_KINDS)].idxmax(axis=1).map(DECODE_KINDS)
        frac = [g.loc[i, k] / g.loc[i, "decode_ms"] for i, k in zip(g.index, g[list(DECODE_KINDS)].idxmax(axis=1))]
        if len(g) == 1:
            L.append(f"- **{sla}**: the largest part is {big.iloc[0]} on {g['hardware'].iloc[0]}, the one "
                     f"GPU with a winner ({frac[0]:.0%} of the iteration).")
        elif big.nunique() == 1:
            L.append(f"- **{sla}**: the largest part is {big.iloc[0]} on every winning GPU "
                     f"({min(frac):.0%}–{max(frac):.0%} of the iteration).")
        else:
            L.append(f"- **{sla}**: the largest part is " + "; ".join(
                f"{b} on {h} ({f:.0%})" for b, h, f in zip(big, g["hardware"], frac)) + ".")
    return L + [""]


def _read_lines(st) -> list[str]:
    if st.batching == "continuous":
        ep = ([" `TP1·DP8·EP8 PP1 x1 c512 fp8` = 8 attention data-parallel ranks of TP 1 (64 of the 512 "
               "requests each) whose MoE layers split the experts 8 ways (EP 8); `TP8·EP4` = TP 8 with the "
               "experts split 4 ways inside it (each expert's FFN over 2 GPUs)."]
              if any(st.searches_ep(m) for m in st.models) else [])
        return ["- Layout labels: `TP4 PP2 x1 c64 fp8` = tensor parallel 4 x pipeline parallel 2 per replica, 1 "
                "replica, 64 requests in flight per replica, fp8 weights and activations." + "".join(ep)
                + " Concurrencies are powers of two, so `next batch at this layout` is the doubled concurrency: "
                "one between the two may still meet the SLA."]
    return ["- Layout labels: `TP4 PP2 x1 b64 fp8` = tensor parallel 4 x pipeline parallel 2 per replica, 1 "
            "replica, 64 requests per replica batch, fp8 weights and activations. Batches are powers of two, so "
            "`next batch at this layout` is the doubled batch: a batch between the two may still meet the SLA."]


def report(res: ServingResults, files: list[str]) -> str:
    st = res.study
    pts = res.points
    n_ok = int(pts["feasible"].sum())
    models = ", ".join(f"{mid} ({m.num_params() / 1e9:.1f} B parameters"
                       + (f", {m.num_experts} experts, top-{m.top_k}" if m.num_experts > 1 else "") + ")"
                       for mid, m in zip(st.model_ids, st.models))
    L = [f"# {res.head.name}: {res.head.description}", "",
         f"Models: {models}. {st.gpus} GPUs per deployment, {st.input_len} prompt tokens and "
         f"{st.output_len} generated tokens per request.",
         f"The search evaluated **{len(pts):,}** points (model x GPU x precision x replica size x TP x PP x "
         + ("attention DP x EP x " if any(st.searches_ep(m) for m in st.models) else "") +
         f"{'concurrency' if st.batching == 'continuous' else 'batch'}), {n_ok:,} of which "
         f"{'leave a KV slot for at least one request' if st.batching == 'continuous' else 'fit in memory'} (run time in `manifest.json`; every point with its status "
         "in `sweep.parquet`, the Pareto fronts in `pareto.csv`, the best point per SLA in `best_per_sla.csv`"
         + (", its decode iteration by operator kind in `decode_breakdown.csv`" if res.decode is not None
            and len(res.decode) else "") + ").",
         "",
         "## How the numbers are made", "",
         *_batching_lines(res),
         f"- Precisions (weights and GEMM inputs; peaks from the catalog): {_precision_line(res)}. fp4 is the "
         "GPU's block-scaled 4-bit format (NVFP4 on Blackwell); attention runs in 16 bit (`dse/cost/rates.py`)"
         + ("; the KV cache precision is the engine's (below)." if st.batching == "continuous"
            else " and the KV cache stays 16-bit at every precision."),
         *moe_lines(res),
         "- Best per SLA: the highest tok/s/GPU among the points meeting both bounds (per GPU over every "
         "precision it lists; a sentence also compares at a precision every GPU has when that changes the "
         "choice).", ""]
    for mid, fn in zip(st.model_ids, files):
        L += [f"## {mid}", "", f"![pareto {mid}]({fn})", "",
              "Each GPU's front holds the layouts no other layout of that GPU beats on both axes; the best "
              "layout per SLA also has to meet the TTFT bound, which the axes do not show, so it can lie inside "
              "the front.", "",
              f"Best layout per SLA ({_fixed(res, mid)}):", "", md_table(_table(res, mid)), ""]
        L += sla_sentences(res, mid) + [""]
        L += decode_lines(res, mid)
        ep = ep_sentences(res, mid)
        if ep:
            L += ["What expert parallelism and attention DP gain (best layout with them against the best "
                  "TP/PP-only layout, `EP = DP = 1`, of the same GPU and SLA):", "", *ep, ""]
    L += ["## How to read this", "",
          *_read_lines(st),
          "- Reproduce: `make study STUDY=" + res.head.name + "`; provenance in `manifest.json`.", ""]
    return "\n".join(L)
