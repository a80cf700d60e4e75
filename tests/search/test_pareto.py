"""Pareto mask against the definition of dominance; the trials table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from optuna.trial import TrialState

from dse.search.pareto import ABANDONED, pareto_front, trials_dataframe
from dse.search.runner import run_search
from dse.search.storage import quiet

from . import toy_objective as toy


def _dominates(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.all(a <= b) and np.any(a < b))


@st.composite
def _points(draw):
    m = draw(st.integers(1, 4))
    n = draw(st.integers(1, 40))
    small = st.integers(-3, 3).map(float)  # few values: many ties and duplicates
    rows = draw(st.lists(st.lists(small, min_size=m, max_size=m), min_size=n, max_size=n))
    directions = draw(st.lists(st.sampled_from(["minimize", "maximize"]), min_size=m,
                               max_size=m))
    return np.array(rows), directions


@settings(max_examples=120, deadline=None)
@given(_points())
def test_mask_matches_the_definition_of_dominance(case):
    values, directions = case
    cols = [f"f{i}" for i in range(values.shape[1])]
    mask = pareto_front(pd.DataFrame(values, columns=cols), cols, directions)
    loss = values * np.array([1 if d == "minimize" else -1 for d in directions])
    for i in range(len(loss)):
        dominated = any(_dominates(loss[j], loss[i]) for j in range(len(loss)) if j != i)
        assert mask[i] == (not dominated)


def test_nan_rows_are_off_the_front_and_dominate_nothing():
    df = pd.DataFrame({"a": [1.0, np.nan, 2.0, 0.0], "b": [1.0, 0.0, 0.5, np.nan]})
    assert pareto_front(df, ["a", "b"], ["minimize", "minimize"]).tolist() == [
        True, False, True, False]


def test_large_front_is_fast():
    rng = np.random.default_rng(0)
    x = rng.random(100_000)
    df = pd.DataFrame({"a": x, "b": 1 - x, "c": rng.random(100_000), "d": rng.random(100_000)})
    assert pareto_front(df, ["a", "b"], ["minimize"] * 2).all()  # an all-front line
    mask = pareto_front(df, ["a", "c", "d"], ["minimize", "maximize", "minimize"])
    front = df[mask][["a", "c", "d"]].to_numpy() * [1, -1, 1]
    probe = df.sample(2000, random_state=0)[["a", "c", "d"]].to_numpy() * [1, -1, 1]
    assert 0 < mask.sum() < 1000
    for p, on in zip(probe, mask[df.sample(2000, random_state=0).index]):
        assert on == (not any(_dominates(f, p) for f in front))


def test_trials_dataframe_columns_and_abandoned_reason(tmp_path):
    study = run_search("toy", f"sqlite:///{tmp_path}/s.db", toy.SPACE,
                       toy.evaluate_batch_infeasible, toy.DIRECTIONS, 12, batch_size=6,
                       seed=1, progress=False, heartbeat_interval_s=1,
                       objective_names=["time_s", "energy_j"])
    df = trials_dataframe(study)
    assert list(df.columns) == ["number", "state", "x", "y", "time_s", "energy_j", "reason"]
    ok = df.state == "COMPLETE"
    assert df.loc[ok, ["time_s", "energy_j"]].notna().all().all()
    mask = pareto_front(df, ["time_s", "energy_j"], toy.DIRECTIONS)
    assert mask.sum() >= 1 and ok[mask].all()
    # a FAIL trial without a reason (its worker died) is reported as abandoned
    with quiet():
        trial = study.ask()
    study._storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)
    assert trials_dataframe(study).reason.iloc[-1] == ABANDONED


@pytest.mark.parametrize("objectives, directions", [(["a"], ["minimize", "maximize"]),
                                                    (["a"], ["up"])])
def test_bad_directions(objectives, directions):
    from dse.errors import InputError
    with pytest.raises(InputError):
        pareto_front(pd.DataFrame({"a": [1.0]}), objectives, directions)
