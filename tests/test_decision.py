"""Decision-quality metrics (dse.decision) on small synthetic frames."""

import math

import pandas as pd
import pytest

from dse.decision import decision_report, job_columns, print_decision, summarize


def _frame(groups):
    rows = []
    for model, pairs in groups.items():
        for i, (pred, meas) in enumerate(pairs):
            rows.append({"id": f"{model}-{i}", "source": "S", "model": model, "gpu": "a100",
                         "num_gpus": 8, "global_batch_size": 64, "zero_stage": float("nan"),
                         "tp": 2 ** i, "pp": 1, "dp": 8 // 2 ** i, "micro_batch_size": 1,
                         "measured_iter_time_s": meas, "predicted_iter_time_s": pred,
                         "status": "ok", "error": pred / meas - 1.0, "chosen_tp": 2 ** i})
    return pd.DataFrame(rows)


def test_job_columns_exclude_layout_targets_and_outputs():
    cols = job_columns(_frame({"a": [(1, 1)]}))
    assert cols == ["model", "gpu", "num_gpus", "global_batch_size"]


def test_perfect_ranking_has_unit_correlation_and_no_regret():
    rep = decision_report(_frame({"a": [(1.0, 2.0), (2.0, 3.0), (3.0, 5.0), (4.0, 9.0)]}))
    assert len(rep) == 1
    assert rep["spearman"][0] == pytest.approx(1.0)
    assert rep["regret"][0] == 0.0
    assert rep["predicted_best"][0] == rep["measured_best"][0] == "a-0"


def test_reversed_ranking_and_regret_of_the_predicted_best():
    rep = decision_report(_frame({"a": [(3.0, 1.0), (2.0, 1.5), (1.0, 2.0)]}))
    assert rep["spearman"][0] == pytest.approx(-1.0)
    # the model picks a-2 (measured 2.0) where a-0 (1.0) is fastest
    assert rep["regret"][0] == pytest.approx(1.0)
    assert rep["predicted_best"][0] == "a-2" and rep["measured_best"][0] == "a-0"


def test_groups_split_by_job_and_small_groups_are_skipped():
    df = _frame({"a": [(1.0, 1.0), (2.0, 1.2), (3.0, 1.1)],
                 "b": [(1.0, 1.0), (2.0, 1.1)],                       # 2 rows: skipped
                 "c": [(2.0, 1.0), (1.0, 1.1), (3.0, 1.2), (4.0, 1.3)]})
    df.loc[df["id"] == "a-1", "status"] = "infeasible: out of memory"   # not counted
    rep = decision_report(pd.concat([df, _frame({"a": [(5.0, 1.4)]}).assign(id="a-9")]))
    assert list(rep["rows"]) == [3, 4]
    s = summarize(rep)
    assert s["groups"] == 2
    # group a: predictions (1, 3, 5) vs measured (1.0, 1.1, 1.4): rho 1, regret 0
    # group c: rho of ranks (2,1,3,4) vs (1,2,3,4) = 0.8, regret 1.1/1.0 - 1
    assert s["spearman_mean"] == pytest.approx(0.9)
    assert s["spearman_min"] == pytest.approx(0.8)
    assert s["regret_max"] == pytest.approx(0.1)
    assert s["regret_mean"] == pytest.approx(0.05)
    assert s["regret_median"] == pytest.approx(0.05)


def test_ties_are_averaged_and_constant_groups_give_nan():
    rep = decision_report(_frame({"a": [(1.0, 1.0), (1.0, 2.0), (2.0, 3.0)],
                                  "b": [(1.0, 1.0), (1.0, 2.0), (1.0, 3.0)]}))
    assert rep["spearman"][0] == pytest.approx(0.8660254, rel=1e-6)
    assert math.isnan(rep["spearman"][1])
    assert rep["regret"][1] == 0.0            # a tie picks the first row
    assert summarize(rep)["spearman_mean"] == pytest.approx(0.8660254, rel=1e-6)


def test_print_decision(capsys):
    assert print_decision(_frame({"a": [(1.0, 1.0)]})) is None
    assert capsys.readouterr().out == ""
    s = print_decision(_frame({"a": [(1.0, 1.0), (2.0, 1.2), (3.0, 1.1)]}))
    out = capsys.readouterr().out
    assert "1 groups" in out and "regret" in out and s["regret_max"] == 0.0
