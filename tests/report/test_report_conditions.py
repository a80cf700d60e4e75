"""A report names a physical reason only when the results support it: synthetic results
where the condition is false, and the sentence is absent (or replaced)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dse.report import regimes
from dse.report import variants as vrep
from dse.report import variants_infer as irep
from dse.report import upgrade as urep
from dse.report.plots import BREAKDOWN_LABELS
from dse.spec.hardware import get_hardware, load_toml
from dse.studies.variants import parse

STUDY = Path(__file__).resolve().parents[2] / "studies" / "hbm3d.toml"
BREAKDOWN = list(BREAKDOWN_LABELS)
WL = "train seq 2048, global batch 1024"


@pytest.fixture(scope="module")
def study():
    return parse(load_toml(STUDY), STUDY)


def train_table(study, speedup=None, fixed=None, gpus=(16, 64), recompute="none") -> pd.DataFrame:
    """A training table of the summary's shape: every variant at every GPU count, the
    baseline at TP2 mbs1, ``speedup(variant, gpus)`` for both speedups."""
    speedup = speedup or (lambda v, g: 1.0)
    fixed = fixed or speedup
    rows = []
    for h in study.hws:
        for g in gpus:
            sp, fx = speedup(h.name, g), fixed(h.name, g)
            br = {c: 0.0 for c in BREAKDOWN}
            br.update(compute_s=9.0, optimizer_s=0.1, bubble_s=0.9)
            rows.append({"variant": h.name, "workload": WL, "gpus": g, "layout": "TP2 PP8 DP1 mbs1 none Z1 SP",
                         "tp": 2, "pp": 8, "dp": 1, "cp": 1, "mbs": 1, "vpp": 1, "recompute": recompute, "zero": 1,
                         "sp": True, "step_time_s": 10.0 / sp, "mem_gib": 50.0, "hbm_gib": 80.0,
                         "speedup_reoptimized": sp, "baseline_layout": "TP2 PP8 DP1 mbs1 none Z1 SP",
                         "step_time_at_baseline_layout_s": 10.0 / fx, "speedup_at_baseline_layout": fx,
                         "mem_gib_at_baseline_layout": 50.0, **br,
                         **{f"{c}_at_baseline_layout": v for c, v in br.items()}})
    return pd.DataFrame(rows)


def sens_table(hbm=0.03, l2=0.0, gpus=(16, 64)) -> pd.DataFrame:
    return pd.DataFrame([{"workload": WL, "gpus": g, "baseline_layout": "TP2 PP8 DP1 mbs1 none Z1 SP",
                          "step_time_s": 10.0, "step_time_unlimited_hbm_bw_s": 10.0 * (1 - hbm),
                          "step_time_unlimited_l2_s": 10.0 * (1 - l2), "hbm_bound_share": hbm,
                          "l2_capacity_bound_share": l2, "compute_s": 9.0, "compute_hbm_bound_s": 0.2,
                          "optimizer_s": 0.1} for g in gpus])


def text(lines) -> str:
    return "\n".join(lines)


# ---------------------------------------------------------------- the thresholds

def test_throttle_verdict():
    assert regimes.throttle_verdict(0.593, 0.435, 0.638) == "clock"        # the hbm3d numbers
    assert regimes.throttle_verdict(0.593, 0.57, 0.725) == "bandwidth"
    assert regimes.throttle_verdict(0.593, 0.30, 0.90) == "neither"
    assert regimes.compute_bound(0.039) and not regimes.compute_bound(0.3)
    # the implied shares reproduce the published speedups
    s = regimes.implied_share(1.8, 4.0)
    assert 1 / (1 - s + s / 4.0) == pytest.approx(1.8)
    s = regimes.implied_share_clock(1.4, 2.92, 0.27)
    assert 1 / ((1 - s) / 0.73 + s / 2.92) == pytest.approx(1.4)


# ---------------------------------------------------------------- the published-figure section

def test_published_section_states_its_conclusions_when_the_numbers_support_them(study):
    """The hbm3d case: compute-bound training, the throttle slowed compute too."""
    t = text(vrep.published_section(study, train_table(study), sens_table(0.039), None))
    assert "it is compute-bound" in t
    assert "So the published throttle most likely slowed compute too." in t
    assert "loses little against its unthrottled twin" in t
    # no inference results: no claim that the figure is for decode
    assert "most plausibly for inference (decode)" not in t
    assert "no `[inference]` results" in t


def test_not_compute_bound_when_the_hbm_share_is_large(study):
    t = text(vrep.published_section(study, train_table(study), sens_table(0.30), None))
    assert "it is compute-bound" not in t
    assert "30.0 %" in t and "not below the 10.0 % this report calls compute-bound" in t
    assert "far beyond that" not in t                 # 59 % / 43 % is not twice 30 %


def test_throttle_conclusion_follows_the_implied_shares(study):
    pub = tuple({**p, "speedup": 1.6} if p["variant"].startswith("D") else p for p in study.published)
    s = study.__class__(**{**study.__dict__, "published": pub})
    t = text(vrep.published_section(s, train_table(s), sens_table(0.039), None))
    assert "slowed compute too" not in t
    assert "derated HBM bandwidth only" in t
    assert "cannot both come from one workload" not in t


def test_loses_little_only_when_the_throttled_twin_keeps_its_speed(study):
    sp = lambda v, g: 1.5 if v.startswith("C") else 1.2 if v.startswith("D") else 1.0
    t = text(vrep.published_section(study, train_table(study, sp), sens_table(0.039), None))
    assert "loses little" not in t
    assert "it keeps 0.80x of its unthrottled twin's speed" in t


def _inf_tab(study, decode) -> pd.DataFrame:
    rows = []
    for h in study.hws:
        for b in (1, 8):
            rows.append({"variant": h.name, "workload": f"inference decode, prompt 2048, gen 256, batch {b}",
                         "speedup_reoptimized": decode(h.name)})
            rows.append({"variant": h.name, "workload": f"inference prefill, prompt 2048, gen 256, batch {b}",
                         "speedup_reoptimized": 1.02})
    return pd.DataFrame(rows)


def _inf_sens(share) -> pd.DataFrame:
    return pd.DataFrame([{"phase": "decode", "batch": b, "hbm_bound_share": share,
                          "l2_capacity_bound_share": 0.0} for b in (1, 8)])


def test_decode_named_only_when_our_decode_range_holds_a_published_figure(study):
    inside = lambda v: 1.8 if v.startswith("C") else 1.6 if v.startswith("D") else 1.0
    t = text(vrep.published_section(study, train_table(study), sens_table(0.039), _inf_tab(study, inside),
                                    _inf_sens(0.55)))
    assert "most plausibly for inference (decode)" in t
    assert "points to a throttle that also slowed the clocks" in t        # D's 1.4 below, C's 1.8 inside
    far = lambda v: 1.1 if v != study.baseline else 1.0
    t = text(vrep.published_section(study, train_table(study), sens_table(0.039), _inf_tab(study, far),
                                    _inf_sens(0.05)))
    assert "most plausibly for inference (decode)" not in t
    assert "our decode model does not reproduce it either" in t
    assert "is the bandwidth-bound regime the published numbers need" not in t
    assert "is at most 5.0 % HBM-bound on the baseline" in t
    assert "points to a throttle that also slowed the clocks" not in t


# ---------------------------------------------------------------- per-variant paragraphs

def _paragraph(study, name, train, sens):
    hws = {h.name: h for h in study.hws}
    return text(vrep.variant_paragraph(study, train, sens, hws[name], hws[study.baseline]))


def test_dilution_only_when_the_gain_shrinks_at_large_gpu_counts(study):
    c = "C: 3D HBM 4x BW"
    falls = lambda v, g: (1.03 if g == 16 else 1.01) if v == c else 1.0
    rises = lambda v, g: (1.01 if g == 16 else 1.03) if v == c else 1.0
    assert "the gain is diluted" in _paragraph(study, c, train_table(study, falls), sens_table())
    t = _paragraph(study, c, train_table(study, rises), sens_table())
    assert "the gain is diluted" not in t and "does not shrink at the largest count" in t


def test_capacity_exactly_one_only_when_the_fixed_layout_speedup_is_one(study):
    b = "B: 160 GB HBM (2.5D)"
    assert "exactly 1" in _paragraph(study, b, train_table(study), sens_table())
    moved = lambda v, g: 1.3 if v == b and g == 16 else 1.0
    t = _paragraph(study, b, train_table(study, moved, moved, recompute="block"), sens_table())
    assert "exactly 1" not in t
    assert "the fixed-layout speedup is 1.30x, not 1, at 16 GPUs" in t and "block recompute" in t


def test_l2_not_here_only_when_an_unlimited_l2_saves_little(study):
    a = "A: 2.5x L2"
    assert "not here." in _paragraph(study, a, train_table(study), sens_table(l2=0.0))
    t = _paragraph(study, a, train_table(study), sens_table(l2=0.05))
    assert "not here." not in t and "the L2 size matters for this workload" in t


# ---------------------------------------------------------------- inference sentences

def _decode_rows(fixed, reopt, layouts):
    return pd.DataFrame([{"batch": str(b), "speedup_at_baseline_layout": f, "speedup_reoptimized": r,
                          "baseline_layout": f"TP4 PP2 batch {b}", "layout": f"{lay} batch {b}"}
                         for b, f, r, lay in zip((1, 8), fixed, reopt, layouts)])


def test_inference_reasons_are_conditional():
    dec = pd.DataFrame({"hbm_bound_share": [0.5, 0.5]})
    lo, hi = 1 / (1 - 0.5 * 0.75), 2.0
    pre_cb = pd.DataFrame({"hbm_bound_share": [0.02, 0.03]})
    pre_bw = pd.DataFrame({"hbm_bound_share": [0.20, 0.25]})
    upper = _decode_rows([hi - 0.05] * 2, [hi - 0.05, 2.2], ["TP4 PP2", "TP2 PP4"])
    s = irep.hbm_sentences(4.0, dec, pre_cb, upper, train_hbm_share_max=0.03)
    assert "towards the upper end" in s and "compute-bound GEMMs over the whole prompt), like training." in s
    assert "less TP communication per token" in s
    lower = _decode_rows([lo + 0.01] * 2, [lo + 0.01, 2.2], ["TP4 PP2", "TP8 PP1"])
    s = irep.hbm_sentences(4.0, dec, pre_bw, lower, train_hbm_share_max=0.3)
    assert "towards the upper end" not in s
    assert "compute-bound" not in s.replace("calls compute-bound", "")
    assert "Prefill is 20.0 %–25.0 % HBM-bound" in s
    assert "less TP communication per token" not in s and "Re-optimized it gains more" in s
    assert np.isfinite(lo)


# ---------------------------------------------------------------- upgrade sentences

def _upgrade_rows(from_dp, to_dp, same, reopt):
    r = {f"from_{c}": 1.0 for c in BREAKDOWN} | {f"to_same_layout_{c}": 0.5 for c in BREAKDOWN}
    r.update(from_dp_comm_s=from_dp, to_same_layout_dp_comm_s=to_dp)
    s0 = pd.DataFrame({"speedup_same_layout": same, "speedup_reoptimized": reopt})
    return s0, pd.Series(r)


def test_upgrade_exposure_and_reoptimization_are_conditional():
    s0, r = _upgrade_rows(0.28, 0.30, [2.8, 2.7], [2.9, 2.8])
    assert "becomes exposed" in urep.exposure_sentence(s0, r, 3.08)
    assert "win a little more" in urep.reopt_sentence(s0)
    s0, r = _upgrade_rows(0.30, 0.15, [2.8, 2.7], [2.8, 2.7])
    t = urep.exposure_sentence(s0, r, 3.08)
    assert "becomes exposed" not in t and "No exposed communication term grows" in t
    assert "win a little more" not in urep.reopt_sentence(s0)
    assert "reaches the compute ratio" in urep.exposure_sentence(s0, r, 2.5)


def test_upgrade_capacity_and_context_claims_are_conditional():
    a100, h100, h200 = (get_hardware(n) for n in ("a100-sxm-80gb", "h100-sxm-80gb", "h200-sxm-141gb"))
    s0 = pd.DataFrame({"speedup_same_layout": [2.8]})
    assert "no extra capacity" in urep.headroom_sentence(h100, a100, pd.Series([1.0]), s0)
    assert "no extra capacity" not in urep.headroom_sentence(h200, a100, pd.Series([1.7]), s0)
    assert "same compute" in urep.context_note(h100, [h200])
    assert "same compute" not in urep.context_note(h100, [a100])


def test_comm_share_grows_only_when_it_does(study):
    t = train_table(study, gpus=(16, 64, 256))
    base = t["variant"] == study.baseline
    t.loc[base, "dp_comm_s"] = t.loc[base, "gpus"].map({16: 0.1, 64: 0.5, 256: 2.0})
    assert vrep.comm_share_sentence(t, study.baseline).startswith("Their share grows with the GPU count")
    t.loc[base, "dp_comm_s"] = t.loc[base, "gpus"].map({16: 5.0, 64: 0.5, 256: 2.0})
    s = vrep.comm_share_sentence(t, study.baseline)
    assert "grows with the GPU count from 64 GPUs on" in s and "Below that count it is larger" in s
    t.loc[base, "dp_comm_s"] = t.loc[base, "gpus"].map({16: 0.1, 64: 2.0, 256: 0.5})
    assert "does not grow steadily" in vrep.comm_share_sentence(t, study.baseline)


def test_layout_compute_dominates_only_when_it_does():
    from dse.report import layout as lrep
    from types import SimpleNamespace
    row = {c: 0.0 for c in BREAKDOWN}
    rows = pd.DataFrame([{**row, "compute_s": 9.0, "tp_comm_s": 1.0}, {**row, "compute_s": 9.0, "tp_comm_s": 3.0}])
    res = SimpleNamespace(breakdown=rows, breakdown_labels=("a", "b"))
    s = lrep.breakdown_sentence(res)
    assert s.startswith("compute dominates") and "exposed TP communication" in s and "recompute" not in s
    rows = pd.DataFrame([{**row, "compute_s": 4.0, "dp_comm_s": 6.0}, {**row, "compute_s": 4.0, "dp_comm_s": 6.0}])
    s = lrep.breakdown_sentence(SimpleNamespace(breakdown=rows, breakdown_labels=("a", "b")))
    assert "compute dominates" not in s and s.startswith("compute is 40–40 % of the step")
    assert "differ by less than 1 %" in s
