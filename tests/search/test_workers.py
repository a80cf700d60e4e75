"""Worker processes on one storage: two at once share the target; a killed run resumes."""

from __future__ import annotations

import os
import re
import signal
import time

import optuna
import pytest
from optuna.trial import TrialState

from dse.search.pareto import ABANDONED, trials_dataframe
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


def test_killed_run_resumes(tmp_path):
    url, n_trials = f"sqlite:///{tmp_path}/s.db", 24
    first = toy.start_worker(url, "resume", n_trials, 4, seed=1, sleep_s=0.3, heartbeat_s=1)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.05)
        try:
            trials = _trials(url, "resume")
        except KeyError:  # study not created yet
            continue
        done = [t for t in trials if t.state in FINISHED]
        if len(done) >= 4 and any(t.state == TrialState.RUNNING for t in trials):
            break
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=10)
    before = {t.number: (t.state, t.values, t.params) for t in _trials(url, "resume")
              if t.state in FINISHED}
    stuck = {t.number for t in _trials(url, "resume") if t.state == TrialState.RUNNING}
    assert len(before) >= 4 and stuck

    second = toy.start_worker(url, "resume", n_trials, 4, seed=2, heartbeat_s=1)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    trials = _trials(url, "resume")
    assert sorted(t.number for t in trials) == list(range(n_trials))
    assert all(t.state in FINISHED for t in trials), (err, stuck)
    kept = {n: (t.state, t.values, t.params) for n, t in enumerate(trials) if n in before}
    assert kept == before
    df = trials_dataframe(optuna.load_study(study_name="resume", storage=open_storage(url, None)))
    assert (df.loc[sorted(stuck), "reason"] == ABANDONED).all()
    assert (df.loc[sorted(stuck), "state"] == "FAIL").all()
    told = int(re.search(r"told (\d+) trials", out).group(1))
    assert told == n_trials - len(before) - len(stuck)
