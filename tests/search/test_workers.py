"""Worker processes on one storage: two at once share the target; a killed run resumes."""

from __future__ import annotations

import os
import re
import signal
import time

import optuna
import pytest
from optuna.trial import TrialState

from dse.search.pareto import trials_dataframe
from dse.search.storage import open_storage

from . import toy_objective as toy

FINISHED = (TrialState.COMPLETE, TrialState.FAIL)


def _trials(url: str, study: str) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=study, storage=open_storage(url, None)).get_trials()


def _two_workers_share_the_study(url: str, barrier_dir, n_trials: int = 32, batch: int = 4
                                 ) -> None:
    barrier = f"{barrier_dir}:2"  # both workers evaluate a first batch before going on
    procs = [toy.start_worker(url, "shared", n_trials, batch, seed=s, sleep_s=0.1,
                              heartbeat_s=2, barrier=barrier) for s in (1, 2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    told = [int(re.search(r"told (\d+) trials", out).group(1)) for out, _ in outs]
    assert sum(told) == n_trials and min(told) > 0, told
    trials = _trials(url, "shared")
    assert sorted(t.number for t in trials) == list(range(n_trials))
    assert all(t.state == TrialState.COMPLETE for t in trials)
    assert len({tuple(sorted(t.params.items())) for t in trials}) == n_trials  # no re-runs


def test_two_workers_on_sqlite(tmp_path):
    (tmp_path / "barrier").mkdir()
    _two_workers_share_the_study(f"sqlite:///{tmp_path}/s.db", tmp_path / "barrier")


@pytest.mark.postgres
def test_two_workers_on_postgres(postgres_url, tmp_path):
    (tmp_path / "barrier").mkdir()
    _two_workers_share_the_study(postgres_url, tmp_path / "barrier")


def _wait_for_running(url: str, study: str, proc, min_done: int, timeout_s: float = 60
                      ) -> None:
    """Return once ``study`` has ``min_done`` finished trials and one RUNNING."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
        try:
            trials = _trials(url, study)
        except KeyError:  # study not created yet
            continue
        done = [t for t in trials if t.state in FINISHED]
        if len(done) >= min_done and any(t.state == TrialState.RUNNING for t in trials):
            return
    raise AssertionError(f"no RUNNING trial after {min_done} finished within {timeout_s} s")


def _resume_reaches_the_target(url: str, study: str, n_trials: int, failed: set[int]) -> None:
    """A fresh worker ends the study with ``n_trials`` COMPLETE, nothing RUNNING or
    WAITING, and each trial in ``failed`` FAIL with a ``fail_reason`` and re-run."""
    second = toy.start_worker(url, study, n_trials, 4, seed=2, heartbeat_s=1)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    trials = _trials(url, study)
    states = [t.state for t in trials]
    assert states.count(TrialState.COMPLETE) == n_trials, (states, err)
    assert len(trials) == n_trials + len(failed)
    assert {t.number for t in trials if t.state == TrialState.FAIL} == failed
    assert all(trials[n].user_attrs["fail_reason"] for n in failed)
    retried = {t.system_attrs["failed_trial"]: t for t in trials if "failed_trial" in t.system_attrs}
    for n in failed:  # a trial killed before all its knobs were suggested gets a fresh point
        if set(trials[n].params) == set(toy.SPACE):
            assert retried[n].params == trials[n].params and retried[n].state == TrialState.COMPLETE
        else:
            assert n not in retried, (n, trials[n].params)
    df = trials_dataframe(optuna.load_study(study_name=study, storage=open_storage(url, None)))
    assert (df.loc[sorted(failed), "reason"].str.len() > 0).all()
    assert "fail_reason" not in {k for t in trials if t.state == TrialState.COMPLETE
                                 for k in t.user_attrs}
    complete = [tuple(sorted(t.params.items())) for t in trials if t.state == TrialState.COMPLETE]
    assert len(set(complete)) == len(complete) == n_trials    # zero duplicated, zero lost


def test_killed_run_resumes(tmp_path):
    url, n_trials = f"sqlite:///{tmp_path}/s.db", 24
    first = toy.start_worker(url, "resume", n_trials, 4, seed=1, sleep_s=1.5, heartbeat_s=1)  # a long batch: still RUNNING when killed, under load too
    _wait_for_running(url, "resume", first, 4)
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=10)
    before = {t.number: (t.state, t.values, t.params) for t in _trials(url, "resume")
              if t.state in FINISHED}
    stuck = {t.number for t in _trials(url, "resume") if t.state == TrialState.RUNNING}
    assert len(before) >= 4 and stuck

    _resume_reaches_the_target(url, "resume", n_trials, stuck)
    trials = _trials(url, "resume")
    assert {n: (t.state, t.values, t.params) for n, t in enumerate(trials) if n in before} == before
    assert all(trials[n].user_attrs["fail_reason"].startswith("abandoned:") for n in stuck)


@pytest.mark.parametrize("sig, rc", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stopped_worker_leaves_nothing_running(tmp_path, sig, rc):
    url, n_trials = f"sqlite:///{tmp_path}/s.db", 12
    first = toy.start_worker(url, "stop", n_trials, 4, seed=1, sleep_s=1.0, heartbeat_s=1)
    _wait_for_running(url, "stop", first, 0)
    time.sleep(0.3)  # inside evaluate_batch
    first.send_signal(sig)
    _, err = first.communicate(timeout=20)
    assert first.returncode == rc, err
    trials = _trials(url, "stop")
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    failed = {t.number for t in trials if t.state == TrialState.FAIL}
    assert failed and all(trials[n].user_attrs["fail_reason"].startswith("interrupted:")
                          for n in failed)
    assert "Traceback" not in err
    _resume_reaches_the_target(url, "stop", n_trials, failed)


def test_a_trial_killed_between_its_knobs_is_not_re_enqueued_half_made(tmp_path):
    """_retry: a failed trial that holds every knob is enqueued again with its point; one
    killed between two suggests (only x) is not -- a fresh point is asked instead."""
    from dse.search.runner import _retry
    study = optuna.create_study(storage=f"sqlite:///{tmp_path}/s.db", study_name="r",
                                directions=toy.DIRECTIONS)
    study.set_user_attr("dse_space", {"x": {}, "y": {}})
    dist = {n: k.distribution() for n, k in toy.SPACE.items()}
    whole = optuna.trial.create_trial(state=TrialState.FAIL, params={"x": 1.0, "y": 2.0},
                                      distributions=dist)
    half = optuna.trial.create_trial(state=TrialState.FAIL, params={"x": 1.5},
                                     distributions={"x": dist["x"]})
    study.add_trials([whole, half])
    whole, half = study.get_trials()
    _retry(study, half)
    assert not study.get_trials(states=(TrialState.WAITING,))
    _retry(study, whole)
    waiting = study.get_trials(states=(TrialState.WAITING,))
    assert [t.params for t in waiting] == [{"x": 1.0, "y": 2.0}]
    assert waiting[0].system_attrs["failed_trial"] == whole.number
