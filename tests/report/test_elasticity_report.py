"""Which-knob-matters sentence and table (dse/report/elasticity.py), and the study-side
elasticities against finite differences at a real layout (dse/studies/elasticity.py)."""

import pandas as pd

from dse.report.elasticity import sentence, top_table


def _df():
    return pd.DataFrame({"knob": ["peak", "hbm_bw_bytes_per_s", "l2_bytes", "eff_gemm"],
                         "kind": ["rate", "rate", "capacity", "efficiency"], "value": [1.0, 2.0, 3.0, 0.7],
                         "unit": ["", "", "", ""], "elasticity_ad": [-0.8, -0.04, 0.0, -0.9],
                         "elasticity_fd": [-0.8, -0.3, 0.0, -0.9], "kink": [False, True, False, False],
                         "elasticity": [-0.8, -0.3, 0.0, -0.9], "design": [True, True, True, False]})


def test_sentence_ranks_design_knobs_and_quotes_fd_at_a_kink():
    s = sentence(_df(), "Here", {"l2_bytes": "L2 capacity", "hbm_bw_bytes_per_s": "HBM bandwidth"})
    assert s.startswith("Here: the step time is most sensitive to peak (-0.80)")
    assert "hbm_bw_bytes_per_s (-0.30, finite difference: kink)" in s
    assert "eff_gemm" not in s and "L2 capacity below" in s
    assert f"{100 * (1.1 ** -0.8 - 1):+.1f} %" in s
    assert list(top_table(_df())["knob"]) == ["peak", "hbm_bw_bytes_per_s", "l2_bytes"]


def test_forward_mode_elasticities_match_finite_differences():
    from dse.spec.hardware import get_hardware
    from dse.spec.layout import Workload
    from dse.spec.model import get_model
    from dse.studies.elasticity import at_layout
    row = pd.Series(dict(tp=2, pp=1, dp=4, cp=1, ep=1, mbs=1, vpp=1, recompute="full", zero=1, sp=True))
    df = at_layout(get_model("llama3-8b"), Workload(64, 2048, 1), get_hardware("h100-sxm-80gb"), row, gpus=8)
    ok = df[~df["kink"]]
    assert len(ok) >= len(df) - 2
    assert ((ok["elasticity_ad"] - ok["elasticity_fd"]).abs() <= 2e-3 + 0.05 * ok["elasticity_fd"].abs()).all()
    peak = df.set_index("knob").loc["peak_bf16_flops_per_s", "elasticity"]
    assert -1.0 <= peak < -0.3
