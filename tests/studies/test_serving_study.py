"""The serving study (studies/serving.toml) on a reduced grid: Pareto fronts, best layout
per SLA, computed report sentences, determinism, bad input."""

import dataclasses
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dse.cli import main
from dse.report.serving import DECODE_KINDS, ep_sentences, report, sla_sentences
from dse.report.serving_results import SLA, ServingResults
from dse.report.results import StudyHeader
from dse.study import run_study
from dse.studies import serving as S
from dse.studies.common import load_study

STUDY = Path(__file__).resolve().parents[2] / "studies" / "serving.toml"

SMALL = """
name = "serving-small"
kind = "serving"
description = "reduced serving study"

[serving]
models = ["llama3-8b"]
gpus = 2
input_len = 512
output_len = 128
max_batch = 64

[[hardware]]
name = "h100-sxm-80gb"
precisions = ["bf16", "fp8"]

[[hardware]]
name = "h200-sxm-141gb"
precisions = ["bf16", "fp8"]

[[sla]]
name = "tight"
ttft_ms = 150
tpot_ms = 6

[[sla]]
name = "loose"
ttft_ms = 2000
tpot_ms = 40
"""


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("serving")
    p = d / "small.toml"
    p.write_text(SMALL)
    mp = pytest.MonkeyPatch()
    mp.chdir(d)
    try:
        out = Path(run_study(str(p))).resolve()
        first = {f: (out / f).read_bytes() for f in ("report.md", "pareto.csv", "best_per_sla.csv",
                                                        "pareto_llama3-8b.png")}
        out2 = Path(run_study(str(p))).resolve()      # a rerun rewrites the same bytes (git status stays clean)
        second = {f: (out2 / f).read_bytes() for f in first}
    finally:
        mp.undo()
    return out, p, first, second


def test_outputs_and_determinism(small):
    out, _, first, second = small
    for f in ("report.md", "report.html", "manifest.json", "sweep.parquet", "pareto.csv",
              "best_per_sla.csv", "pareto_llama3-8b.png"):
        assert (out / f).exists(), f
    assert first == second
    assert "seconds" not in (out / "report.md").read_text()       # timings only in the manifest


def test_pareto_front_is_non_dominated_and_complete(small):
    out = small[0]
    pts = pd.read_parquet(out / "sweep.parquet")
    front = pd.read_csv(out / "pareto.csv")
    for hw, f in front.groupby("hardware"):
        ok = pts[pts["feasible"] & (pts["hardware"] == hw)]
        P = ok[["tok_s_per_gpu", "tok_s_per_user"]].to_numpy()
        F = f[["tok_s_per_gpu", "tok_s_per_user"]].to_numpy()
        for x in F:                       # no feasible point beats a front point on both axes
            dom = (P >= x).all(axis=1) & (P > x).any(axis=1)
            assert not dom.any(), (hw, x)
        for x in P:                       # every feasible point is on or under the front
            assert ((F >= x * (1 - 1e-9)).all(axis=1)).any(), (hw, x)
        assert len(f) >= 3
        assert np.all(np.diff(f["tok_s_per_user"]) >= 0)
        assert np.all(np.diff(f["tok_s_per_gpu"]) <= 1e-9)         # a front: trade-off along it


def test_best_per_sla_meets_its_sla_and_is_best(small):
    out = small[0]
    pts = pd.read_parquet(out / "sweep.parquet")
    best = pd.read_csv(out / "best_per_sla.csv")
    assert set(best["sla"]) == {"tight", "loose"} and set(best["scope"]) == {"any", "bf16", "fp8"}
    ok = best[best["status"] == "ok"]
    assert len(ok) >= 8
    for _, b in ok.iterrows():
        assert b["ttft_ms"] <= b["sla_ttft_ms"] and b["tpot_ms"] <= b["sla_tpot_ms"]
        c = pts[pts["feasible"] & (pts["hardware"] == b["hardware"])]
        if b["scope"] != "any":
            c = c[c["precision"] == b["scope"]]
        meet = c[(c["ttft_ms"] <= b["sla_ttft_ms"]) & (c["tpot_ms"] <= b["sla_tpot_ms"])]
        assert len(meet) == b["points_meeting"]
        assert b["tok_s_per_gpu"] == pytest.approx(meet["tok_s_per_gpu"].max())
    loose = ok[(ok["sla"] == "loose") & (ok["scope"] == "any")].set_index("hardware")
    tight = ok[(ok["sla"] == "tight") & (ok["scope"] == "any")].set_index("hardware")
    # a looser SLA admits a superset of points: never less throughput per GPU
    assert (loose["tok_s_per_gpu"] >= tight.reindex(loose.index)["tok_s_per_gpu"].fillna(0)).all()
    # tok/s/GPU is continuous batching's served rate: admitted x output / (TTFT without the
    # slot wait + (output - 1) TPOT) / GPUs, under each GPU's default engine
    for _, r in ok.iterrows():
        assert r["engine"] == "trtllm" and r["admitted"] <= r["slots"]
        run = r["ttft_ms"] / 1e3 - r["queue_s"] + 127 * r["tpot_ms"] / 1e3
        assert r["tok_s_per_gpu"] == pytest.approx(r["admitted"] * 128 / run / r["gpus_per_replica"], rel=1e-5)
    assert (pts["batching"] == "continuous").all()
    assert pts["layout"].str.contains(r" c\d+ ").all()


def test_report_sentences_are_computed(small, tmp_path):
    out, p, _, _ = small
    d, path = load_study(str(p))
    st = S.parse(d, path)
    pts = pd.read_parquet(out / "sweep.parquet")
    head = StudyHeader("serving-small", "", path, tmp_path)

    def sentences(study):
        return sla_sentences(ServingResults(head, study, pts, S.pareto(pts), S.best_per_sla(pts, study), 0.0),
                             "llama3-8b")
    base = sentences(st)
    best = pd.read_csv(out / "best_per_sla.csv")
    lo = best[(best["sla"] == "loose") & (best["scope"] == "any")].sort_values("tok_s_per_gpu", ascending=False)
    w, r2 = lo.iloc[0], lo.iloc[1]
    line = next(s for s in base if s.startswith("- **loose**"))
    assert f"**{w['hardware']}** serves the most, {w['tok_s_per_gpu']:,.0f} tok/s/GPU" in line
    assert f"{w['tok_s_per_gpu'] / r2['tok_s_per_gpu']:.2f}x {r2['hardware']}" in line
    assert line in (out / "report.md").read_text()
    # a tighter TPOT bound changes the chosen layouts and so the sentence
    tighter = dataclasses.replace(st, slas=(st.slas[0], SLA("loose", 2000.0, 5.0)))
    changed = next(s for s in sentences(tighter) if s.startswith("- **loose**"))
    assert changed != line and "TPOT ≤ 5 ms" in changed
    nums = lambda s: re.findall(r"[\d,]+ tok/s/GPU", s)
    assert nums(changed) != nums(line)
    # an SLA nothing meets says so, per GPU, with what the closest point reaches
    none = dataclasses.replace(st, slas=(SLA("impossible", 1.0, 0.1),))
    s = sentences(none)[0]
    assert "no GPU has a layout that meets it" in s
    rep = report(ServingResults(head, none, pts, S.pareto(pts), S.best_per_sla(pts, none), 0.0), ["x.png"])
    assert "none of" in rep and "lowest TPOT" in rep


@pytest.mark.parametrize("edit, field", [
    (lambda t: t.replace("max_batch = 64", "max_batch = 64\nbatch = 3"), "serving.batch"),
    (lambda t: t.replace('precisions = ["bf16", "fp8"]', 'precisions = ["fp4"]', 1), "hardware[0].precisions"),
    (lambda t: t.replace("ttft_ms = 150", "ttft_ms = -1"), "sla[0].ttft_ms"),
    (lambda t: t.replace('"h200-sxm-141gb"', '"h100-sxm-80gb"'), "hardware"),
    (lambda t: t.replace("gpus = 2", "gpus = 0"), "serving.gpus"),
    (lambda t: t.replace('name = "loose"', 'name = "tight"'), "sla"),
    (lambda t: t.replace("max_batch = 64", 'max_batch = 64\nbatching = "dynamic"'), "serving.batching"),
    (lambda t: t.replace('name = "h200-sxm-141gb"', 'name = "mi300x"\nengine = "trtllm"'), "hardware[1].engine"),
    (lambda t: t.replace('name = "h200-sxm-141gb"', 'name = "h200-sxm-141gb"\nengine = "llama.cpp"'), "hardware[1].engine"),
    (lambda t: t.replace('name = "h200-sxm-141gb"', 'name = "h200-sxm-141gb"\nengine = "vllm 0.9 --async-scheduling"'),
     "hardware[1].engine"),
])
def test_bad_study_exits_2(tmp_path, capsys, edit, field):
    p = tmp_path / "bad.toml"
    p.write_text(edit(SMALL))
    assert main(["study", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err, err


def test_static_mode_is_the_fixed_batch_cycle(tmp_path):
    """``batching = "static"``: tok/s/GPU = batch x output / (TTFT + (output - 1) TPOT) / GPUs,
    the report says static batches."""
    text = SMALL.replace("max_batch = 64", 'max_batch = 16\nbatching = "static"').replace(
        'name = "serving-small"', 'name = "serving-static"')
    p = tmp_path / "static.toml"
    p.write_text(text)
    d, path = load_study(str(p))
    st = S.parse(d, path)
    assert st.batching == "static"
    pts = S.sweep_points(dataclasses.replace(st, hardware=st.hardware[:1], precisions=(("bf16",),),
                                             engines=st.engines[:1]))
    ok = pts[pts["feasible"]]
    assert len(ok) and (ok["batching"] == "static").all() and ok["layout"].str.contains(r" b\d+ ").all()
    cyc = ok["batch"] * 128 / (ok["ttft_ms"] / 1e3 + 127 * ok["tpot_ms"] / 1e3) / ok["gpus_per_replica"]
    assert ok["tok_s_per_gpu"].to_numpy() == pytest.approx(cyc.to_numpy(), rel=1e-5)
    assert ok["ttft_s"].to_numpy() == pytest.approx(ok["prefill_s"].to_numpy())


def test_study_file_parses_with_its_precisions():
    d, p = load_study(str(STUDY))
    st = S.parse(d, p)
    assert st.batching == "continuous"
    eng = dict(zip((h.name for h in st.hardware), st.engines))
    assert eng == {"h100-sxm-80gb": "trtllm", "h200-sxm-141gb": "trtllm", "b200": "trtllm", "mi300x": "vllm"}
    prec = dict(zip((h.name for h in st.hardware), st.precisions))
    assert prec["b200"] == ("fp8", "fp4") and prec["h100-sxm-80gb"] == ("bf16", "fp8")
    assert S.precision_of("fp4", st.hardware[[h.name for h in st.hardware].index("b200")]) == 3   # NVFP4


def test_how_the_numbers_are_made_follows_the_engines(small, tmp_path):
    """The batching bullets are computed from the study's engines and lengths."""
    out, p, _, _ = small
    d, path = load_study(str(p))
    st = S.parse(d, path)
    pts = pd.read_parquet(out / "sweep.parquet")
    head = StudyHeader("serving-small", "", path, tmp_path)
    text = lambda study: report(ServingResults(head, study, pts, S.pareto(pts), S.best_per_sla(pts, study),
                                               0.0), ["x.png"])
    base = text(st)
    assert "**Continuous (in-flight) batching**" in base and "TTFT is the prefill of the whole batch" not in base
    assert "`trtllm` on h100-sxm-80gb, h200-sxm-141gb: host time 0.5 ms per iteration" in base
    assert "no CUDA graphs" in base and "input + output = 640 tokens" in base
    queued = int((pts[pts["feasible"]]["batch"] > pts[pts["feasible"]]["slots"]).sum())
    assert f"{queued:,} of the {int(pts['feasible'].sum()):,} feasible points" in base
    other = text(dataclasses.replace(st, engines=("trtllm", "sglang"), engine_texts=("trtllm", "sglang")))
    assert "`sglang` on h200-sxm-141gb: host time 1.5 ms per iteration" in other
    assert ("up to 160 sequences replay as CUDA graphs (1.88 µs per kernel: the 1.5 µs graph gap and "
            "one HBM latency)") in other
    assert "prefill passes of their own" in other and "a 512-token prompt fits one iteration's 8192" in other


MOE = """
name = "serving-moe"
kind = "serving"

[serving]
models = ["mixtral-8x7b", "llama3-8b"]
gpus = 4
input_len = 512
output_len = 128
max_batch = 64
ep = "auto"
attn_dp = "auto"

[[hardware]]
name = "h100-sxm-80gb"
precisions = ["fp8"]

[[sla]]
name = "tight"
ttft_ms = 500
tpot_ms = 8

[[sla]]
name = "loose"
ttft_ms = 5000
tpot_ms = 60
"""


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    p = tmp_path_factory.mktemp("serving-moe") / "moe.toml"
    p.write_text(MOE)
    d, path = load_study(str(p))
    st = S.parse(d, path)
    pts = S.sweep_points(st)
    return st, pts, S.best_per_sla(pts, st), S.pareto(pts), S.pareto(S.tp_pp_only(pts, st))


def test_moe_layouts_are_searched_and_labelled(moe):
    """EP / attention DP reach the MoE model only, every layout the rules allow, each
    labelled with its degrees; the dense model keeps EP = DP = 1."""
    st, pts, _, _, _ = moe
    mx = pts[pts["model_id"] == "mixtral-8x7b"]
    dense = pts[pts["model_id"] == "llama3-8b"]
    assert (dense["ep"] == 1).all() and (dense["attn_dp"] == 1).all()
    assert set(mx["ep"]) == {1, 2, 4} and set(mx["attn_dp"]) == {1, 2, 4}
    assert (mx["tp"] * mx["attn_dp"] * mx["pp"] == mx["gpus_per_replica"]).all()
    dp = mx[mx["attn_dp"] > 1]
    assert ((dp["tp"] * dp["attn_dp"]) % dp["ep"] == 0).all()      # EP divides TP x DP with DP attention
    assert set(dp["ep"]) == {1, 2, 4}                               # full EP and TP-split experts
    r = mx[(mx["tp"] == 1) & (mx["attn_dp"] == 4) & (mx["ep"] == 4) & (mx["batch"] == 64)].iloc[0]
    assert r["layout"] == "TP1·DP4·EP4 PP1 x1 c64 fp8"
    r = mx[(mx["tp"] == 4) & (mx["ep"] == 2) & (mx["batch"] == 8)].iloc[0]
    assert r["layout"] == "TP4·EP2 PP1 x1 c8 fp8"
    assert not dense["layout"].str.contains("EP|DP").any()
    assert st.searches_ep(st.models[0]) and not st.searches_ep(st.models[1])


def test_moe_front_and_best_keep_the_full_layout(moe):
    """The front de-duplicates per (precision, TP, PP, EP, DP, replicas); the best point
    per SLA is the best over every layout and ``tp_pp`` the best without EP / DP."""
    st, pts, best, front, tp_front = moe
    f = front[front["model_id"] == "mixtral-8x7b"]
    assert not f.duplicated(S.LAYOUT_KEY + list(S.AXES)).any()
    assert len(tp_front) and ((tp_front["ep"] == 1) & (tp_front["attn_dp"] == 1)).all()
    assert set(best[best["model_id"] == "llama3-8b"]["scope"]) == {"any", "fp8"}
    b = best[best["model_id"] == "mixtral-8x7b"]
    assert set(b["scope"]) == {"any", "fp8", "tp_pp"}
    ok = pts[(pts["model_id"] == "mixtral-8x7b") & pts["feasible"]]
    for sla in st.slas:
        meet = ok[(ok["ttft_ms"] <= sla.ttft_ms) & (ok["tpot_ms"] <= sla.tpot_ms)]
        plain = meet[(meet["ep"] == 1) & (meet["attn_dp"] == 1)]
        a = b[(b["sla"] == sla.name) & (b["scope"] == "any")].iloc[0]
        t = b[(b["sla"] == sla.name) & (b["scope"] == "tp_pp")].iloc[0]
        assert a["tok_s_per_gpu"] == pytest.approx(meet["tok_s_per_gpu"].max())
        assert t["tok_s_per_gpu"] == pytest.approx(plain["tok_s_per_gpu"].max())
        assert t["ep"] == 1 and t["attn_dp"] == 1 and a["tok_s_per_gpu"] >= t["tok_s_per_gpu"]


def test_ep_sentences_are_computed(moe, tmp_path):
    """The EP bullets state the ratio of the two best rows, per SLA, and appear only for
    the MoE model; a study restricted to ep = attn_dp = 1 has none."""
    st, pts, best, front, tp_front = moe
    head = StudyHeader("serving-moe", "", tmp_path / "moe.toml", tmp_path)
    res = ServingResults(head, st, pts, front, best, 0.0, tp_front)
    lines = ep_sentences(res, "mixtral-8x7b")
    assert len(lines) == 2 and ep_sentences(res, "llama3-8b") == []
    text = report(res, ["a.png", "b.png"])
    for sla in ("tight", "loose"):     # here EP / DP wins the tight SLA, TP/PP alone the loose one
        b = best[(best["model_id"] == "mixtral-8x7b") & (best["sla"] == sla)].set_index("scope")
        a, t = b.loc["any"], b.loc["tp_pp"]
        line = next(s for s in lines if s.startswith(f"- **{sla}**"))
        x = a["tok_s_per_gpu"] / t["tok_s_per_gpu"]
        if (a["ep"] > 1 or a["attn_dp"] > 1) and x >= 1.005:
            assert f"EP / attention DP serves more on h100-sxm-80gb {x:.2f}x ({a['layout']}" in line
            assert t["layout"] in line
        elif a["ep"] > 1 or a["attn_dp"] > 1:
            assert f"within 0.5% of the best TP/PP-only one on h100-sxm-80gb ({a['layout']} against " \
                   f"{t['layout']}" in line
        else:
            assert f"a TP/PP-only layout stays best on h100-sxm-80gb ({a['layout']})" in line
        assert line in text
    assert "attention DP x EP" in text and "EP 1, 2, 4, attention DP 1, 2, 4" in text
    plain = dataclasses.replace(st, ep=(1,), attn_dp=(1,))
    only = pts[(pts["ep"] == 1) & (pts["attn_dp"] == 1)]
    res1 = ServingResults(head, plain, only, S.pareto(only), S.best_per_sla(only, plain), 0.0)
    assert ep_sentences(res1, "mixtral-8x7b") == [] and "searched without EP" in report(res1, ["a.png", "b.png"])


def test_listed_degrees_restrict_the_search(tmp_path):
    """``ep = [1, 4]``, ``attn_dp = 1``: only those layouts, at every replica size that allows them."""
    p = tmp_path / "moe.toml"
    p.write_text(MOE.replace('ep = "auto"', "ep = [1, 4]").replace('attn_dp = "auto"', "attn_dp = 1"))
    d, path = load_study(str(p))
    st = S.parse(d, path)
    assert st.ep == (1, 4) and st.attn_dp == (1,)
    lays = {g: S.moe_layouts(st.models[0], g, st.ep, st.attn_dp) for g in (1, 2, 4)}
    assert set(lays[2]["ep"]) == {1} and set(lays[4]["ep"]) == {1, 4}
    assert (lays[4]["attn_dp"] == 1).all()


@pytest.mark.parametrize("edit, field, says", [
    (lambda t: t.replace('ep = "auto"', 'ep = "all"'), "serving.ep", "must be 'auto'"),
    (lambda t: t.replace('ep = "auto"', "ep = [0, 2]"), "serving.ep", "must be 'auto'"),
    (lambda t: t.replace('attn_dp = "auto"', "attn_dp = true"), "serving.attn_dp", "must be 'auto'"),
    (lambda t: t.replace('ep = "auto"', "ep = 3"), "serving.ep", "3 is allowed for mixtral-8x7b at no replica"),
    (lambda t: t.replace('ep = "auto"', "ep = 8"), "serving.ep", "8 is allowed for mixtral-8x7b at no replica"),
    (lambda t: t.replace('ep = "auto"', 'epp = 2'), "serving.epp", "unknown key"),
])
def test_bad_moe_axes_exit_2(tmp_path, capsys, edit, field, says):
    p = tmp_path / "bad.toml"
    p.write_text(edit(MOE))
    assert main(["study", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err and says in err, err


def test_decode_breakdown_of_each_winner_sums_and_matches_the_point_model(small):
    """decode_breakdown.csv: one row per winning (GPU, SLA), its five kinds summing to the
    decode-only iteration, which is at most the winner's TPOT (TPOT adds the prompt passes);
    the report's sentence per SLA names the largest kind of those rows."""
    out = small[0]
    best = pd.read_csv(out / "best_per_sla.csv")
    dec = pd.read_csv(out / "decode_breakdown.csv")
    wins = best[(best["status"] == "ok") & (best["scope"] == "any")]
    assert len(dec) == len(wins) > 0
    kinds = ["gemm_ms", "attention_ms", "comm_ms", "elementwise_ms", "host_ms"]
    assert (dec[kinds] >= 0).all().all()
    assert np.allclose(dec[kinds].sum(axis=1), dec["decode_ms"], rtol=1e-5)
    assert (dec["decode_ms"] <= dec["tpot_ms"] * (1 + 1e-4)).all()
    text = (out / "report.md").read_text()
    assert "Where each winner's decode iteration goes" in text
    for sla, g in dec.groupby("sla"):
        biggest = g[kinds].sum().idxmax()
        label = DECODE_KINDS[biggest]
        line = next(l for l in text.splitlines() if l.startswith(f"- **{sla}**: the largest part is"))
        assert label in line, line


def test_a_study_engine_may_name_its_release():
    """``engine = "vllm 0.14.1"`` in a study file is the profile that release runs."""
    from dse.io import tomllib
    d = tomllib.loads(SMALL.replace('name = "h200-sxm-141gb"', 'name = "h200-sxm-141gb"\nengine = "vllm 0.14.1"'))
    st = S.parse(d, Path("x.toml"))
    assert dict(zip((h.name for h in st.hardware), st.engines))["h200-sxm-141gb"] == "vllm_v1_async"
