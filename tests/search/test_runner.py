"""run_search in one process: batching, infeasible trials, resume, bad input."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from dse.errors import InputError
from dse.search.pareto import trials_dataframe
from dse.search.runner import Knob, main, n_evaluated, run_search, space_from_json
from dse.search.storage import open_storage, quiet

from . import toy_objective as toy


def _run(url, evaluate, n_trials, batch_size=8, **kw):
    return run_search("toy", url, toy.SPACE, evaluate, toy.DIRECTIONS, n_trials,
                      batch_size=batch_size, seed=0, progress=False, heartbeat_interval_s=1, **kw)


def _recording(calls):
    def evaluate(points):
        calls.append(points)
        return toy.evaluate_batch(points)
    return evaluate


def test_trials_are_evaluated_in_batches(tmp_path):
    calls = []
    study = _run(f"sqlite:///{tmp_path}/s.db", _recording(calls), 20, batch_size=8)
    assert [len(c) for c in calls] == [8, 8, 4]
    assert all(set(p) == {"x", "y"} for c in calls for p in c)
    trials = study.get_trials()
    assert [t.number for t in trials] == list(range(20))
    assert all(t.state == TrialState.COMPLETE for t in trials)
    for t in trials:  # told values belong to the trial's own params
        x, y = t.params["x"], t.params["y"]
        assert t.values == pytest.approx([x * x + y, (x - 2) ** 2 + 1 / y])
        assert 0.0 <= x <= 4.0 and 0.1 <= y <= 10.0


def test_infeasible_trials_fail_with_a_reason(tmp_path):
    study = _run(f"sqlite:///{tmp_path}/s.db", toy.evaluate_batch_infeasible, 24, batch_size=8,
                 sampler="tpe")
    df = trials_dataframe(study)
    assert len(df) == 24 and set(df.state) <= {"COMPLETE", "FAIL"}
    failed = df[df.state == "FAIL"]
    assert len(failed) > 0 and (failed.reason != "").all()
    assert (df[df.state == "COMPLETE"].reason == "").all()
    assert (failed[failed.x > 3].reason.str.startswith("infeasible: non-finite")).all()
    assert failed.value_0.isna().all()


def test_rerun_only_runs_the_remainder(tmp_path):
    url, calls = f"sqlite:///{tmp_path}/s.db", []
    first = {t.number: t.values for t in _run(url, _recording(calls), 10).get_trials()}
    calls.clear()
    study = _run(url, _recording(calls), 25)
    assert sum(len(c) for c in calls) == 15
    assert len(study.get_trials()) == 25
    assert {n: study.trials[n].values for n in first} == first
    calls.clear()
    _run(url, _recording(calls), 25)
    assert calls == []


def test_abandoned_trials_are_failed_with_a_reason_and_rerun(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    _run(url, toy.evaluate_batch, 4)
    storage = open_storage(url, 1)
    study = optuna.load_study(study_name="toy", storage=storage)
    with quiet():
        no_beat, stale = study.ask(), study.ask()  # as left by two killed workers
    point = {n: stale.suggest_float(n, k.low, k.high, log=k.log) for n, k in toy.SPACE.items()}
    storage.record_heartbeat(stale._trial_id)  # ... one of which had started its heartbeat
    calls = []
    study = _run(url, _recording(calls), 10)
    assert sum(len(c) for c in calls) == 10 - 4  # the abandoned two do not count
    assert point in [p for c in calls for p in c]  # the stale one's point is re-run
    trials = study.get_trials()
    assert trials[no_beat.number].state == trials[stale.number].state == TrialState.FAIL
    assert "no heartbeat" in trials[no_beat.number].user_attrs["fail_reason"]
    assert "heartbeat went stale" in trials[stale.number].user_attrs["fail_reason"]
    retried = [t for t in trials if t.system_attrs.get("failed_trial") == stale.number]
    assert len(retried) == 1 and retried[0].params == point
    assert retried[0].state == TrialState.COMPLETE and "fail_reason" not in retried[0].user_attrs
    states = [t.state for t in trials]
    assert states.count(TrialState.COMPLETE) == 10 and len(states) == 12
    assert n_evaluated(study) == 10


def test_a_raising_objective_fails_its_batch(tmp_path):
    def boom(points):
        raise RuntimeError("model blew up")
    url = f"sqlite:///{tmp_path}/s.db"
    with pytest.raises(RuntimeError, match="blew up"):
        _run(url, boom, 10, batch_size=4)
    study = _run(url, toy.evaluate_batch, 0)
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL] * 4
    assert all("model blew up" in t.user_attrs["fail_reason"] for t in trials)
    assert n_evaluated(study) == 0  # not evaluated: a re-run asks them again
    assert (trials_dataframe(study).reason.str.contains("model blew up")).all()


@pytest.mark.parametrize("kw, field", [
    (dict(space={"x": Knob(2.0, 1.0)}), "x"),
    (dict(space={"y": Knob(0.0, 1.0, log=True)}), "y"),
    (dict(space={}), "knobs"),
    (dict(directions=["down", "minimize"]), "directions"),
    (dict(n_trials=-1), "n_trials"),
    (dict(batch_size=0), "batch_size"),
    (dict(sampler="cmaes"), "sampler"),
])
def test_bad_arguments_raise_input_error(tmp_path, kw, field):
    args = dict(study_name="toy", storage_url=f"sqlite:///{tmp_path}/s.db", space=toy.SPACE,
                evaluate_batch=toy.evaluate_batch, directions=toy.DIRECTIONS, n_trials=4)
    with pytest.raises(InputError) as e:
        run_search(**{**args, **kw}, progress=False)
    assert e.value.field == field and "\n" not in str(e.value)


def test_a_study_with_other_directions_or_knobs_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    _run(url, toy.evaluate_batch, 2)
    with pytest.raises(InputError, match="directions"):
        run_search("toy", url, toy.SPACE, toy.evaluate_batch, ["minimize", "maximize"], 4,
                   progress=False)
    with pytest.raises(InputError, match="searches"):
        run_search("toy", url, {"x": Knob(0.0, 5.0), "y": toy.SPACE["y"]}, toy.evaluate_batch,
                   toy.DIRECTIONS, 4, progress=False)


def test_space_json_and_module_cli_errors(tmp_path, capsys):
    assert space_from_json(toy.SPACE_JSON) == toy.SPACE
    with pytest.raises(InputError, match="--space"):
        space_from_json('{"x": {"lo": 1}}')
    argv = ["--storage", f"sqlite:///{tmp_path}/s.db", "--study", "toy", "--space",
            toy.SPACE_JSON, "--directions", "minimize,minimize", "--trials", "2"]
    assert main([*argv, "--objective", "no.such.module:f"]) == 2
    assert capsys.readouterr().err.startswith("--objective: no.such.module:f: must name")
    assert main([*argv, "--objective", "tests.search.toy_objective:evaluate_batch",
                 "--storage", "nonsense"]) == 2


def test_in_memory_storage_runs_without_heartbeat():
    study = run_search("mem", "sqlite:///:memory:", toy.SPACE, toy.evaluate_batch,
                       toy.DIRECTIONS, 9, batch_size=4, progress=False)
    assert [t.state for t in study.get_trials()] == [TrialState.COMPLETE] * 9


def test_stored_study_with_other_objectives_is_refused_before_any_trial(tmp_path):
    """The objectives check runs on the storage the search opens (once), before any
    trial: a codesign study re-run with other objectives is one line, exit 2."""
    url, calls = f"sqlite:///{tmp_path}/s.db", []
    _run(url, _recording(calls), 4, objective_names=["a", "b"])
    calls.clear()
    with pytest.raises(InputError, match=r"optimizes \['a', 'b'\], but this search asks for \['a', 'c'\]"):
        _run(url, _recording(calls), 8, objective_names=["a", "c"])
    assert calls == []
    assert len(_run(url, _recording(calls), 6, objective_names=["a", "b"]).get_trials()) == 6


def test_codesign_opens_its_storage_once(tmp_path, monkeypatch):
    """``kind = "codesign"`` opens the Optuna storage once per run (dse.search.runner),
    not once to check the stored objectives and again to search."""
    import dse.search.runner as runner
    from dse.studies import codesign
    opened = []
    real = runner.open_storage
    monkeypatch.setattr(runner, "open_storage", lambda *a, **k: opened.append(a[0]) or real(*a, **k))
    import dse.search.storage as storage
    monkeypatch.setattr(storage, "open_storage", lambda *a, **k: opened.append(a[0]) or real(*a, **k))
    import pandas as pd
    monkeypatch.setattr(codesign.elasticity, "at_layout", lambda *a, **k: pd.DataFrame())  # not under test
    monkeypatch.chdir(tmp_path)
    d = {"name": "cd", "kind": "codesign", "base": "a100-sxm-80gb",
         "workload": {"model": "llama3-8b", "seq_len": 1024, "global_batch": 8, "gpus": 8, "precision": "bf16"},
         "knobs": {"hbm_bw": {"low": 1.5, "high": 3.0}}, "search": {"trials": 2, "batch": 2, "seed": 1}}
    url = f"sqlite:///{tmp_path}/cd.db"
    for _ in range(2):                      # a new storage, then the stored study resumed
        opened.clear()
        res = codesign.run(d, tmp_path / "cd.toml", storage=url)
        assert opened == [url] and len(res.done) == 2
