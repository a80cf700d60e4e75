"""Batched multi-objective Optuna search over continuous knobs, for one or many workers.

:func:`run_search` asks ``batch_size`` trials at a time, suggests every knob for each,
evaluates them with *one* call of ``evaluate_batch`` (the vectorized screen evaluates a
whole batch at once) and tells each result.  A result holding ``inf`` or ``nan``, or a
string (the reason), is infeasible: its trial is told ``FAIL`` with the user attribute
``reason``, never dropped.

Many workers may share one study (same ``study_name`` and storage; processes or
machines): ``n_trials`` is the *study-wide* target of **evaluated** trials: COMPLETE,
PRUNED, and FAIL told by the objective as infeasible (user attr ``reason``).  Under
:func:`~dse.search.storage.claim_lock` each worker counts those plus the trials running
now and asks only the remainder, so no point is evaluated twice and the target is never
overshot.  Workers given the same ``seed`` do not share it: each one's sampler seed is
derived from ``seed`` and its order of joining the study (:func:`worker_seed`; the
first keeps ``seed``).

A trial that was not evaluated is FAIL with user attr ``fail_reason`` and does **not**
count toward the target, so it is re-run: its parameters are enqueued again (at most
:data:`MAX_RETRY` times, then a fresh point is asked, as for a trial killed before all
its knobs were suggested; ``system_attrs["failed_trial"]``
names the first attempt, as :class:`optuna.storages.RetryFailedTrialCallback` does).
Such trials are

* those of a dead worker: every asked trial records a heartbeat (first one under the
  lock, then every ``heartbeat_interval_s`` from a thread); RUNNING trials whose
  heartbeat went stale (grace period :func:`~dse.search.storage.grace_period_s`), and
  those with none at all (only a worker that died holding the lock leaves one), are
  failed under the lock before each batch and while waiting at the end;
* this worker's own, when it is stopped (KeyboardInterrupt, or SIGTERM, turned into
  :class:`WorkerStopped`) or ``evaluate_batch`` raises (not re-enqueued then).

A worker that has nothing left to ask waits until no trial is RUNNING (another
worker's trials finish, or go stale and are re-run by it), so the last worker leaves
the study at its target with no trial RUNNING.  A killed run is resumed by running it
again.  All workers of a study must use this module.

Module CLI (a worker process; the ``dse`` CLI calls :func:`run_search` directly)::

    python -m dse.search.runner --storage URL --study NAME --objective module:function \\
        --space JSON --directions minimize,minimize --trials N --batch B
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import json
import logging
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState
from tqdm import tqdm

from dse.errors import InputError, require
from dse.search.storage import (DEFAULT_HEARTBEAT_INTERVAL_S, claim_lock, masked_url, open_storage,
                                quiet, running_without_heartbeat)
from dse.spec.study import SAMPLERS      # declared once, with the study schema

Params = dict[str, float]
#: One result of ``evaluate_batch``: the objective values, or the reason it is infeasible.
Outcome = tuple[float, ...] | str
EvaluateBatch = Callable[[list[Params]], Sequence[Outcome]]
_RUNNING = (TrialState.RUNNING,)
#: User attribute of a trial that failed without being evaluated (it is re-run).
FAIL_REASON = "fail_reason"
#: How many times the parameters of an abandoned trial are enqueued again.
MAX_RETRY = 2
STALE_REASON = "abandoned: its worker stopped reporting (heartbeat went stale); re-run"
NO_BEAT_REASON = "abandoned: its worker died while claiming it (no heartbeat); re-run"
_log = logging.getLogger(__name__)


class WorkerStopped(KeyboardInterrupt):
    """Raised in the main thread by SIGTERM while :func:`run_search` runs."""


@dataclass(frozen=True)
class Knob:
    """One continuous search dimension: ``low <= value <= high`` in SI ``unit``."""

    low: float
    high: float
    log: bool = False
    unit: str = ""

    def distribution(self) -> FloatDistribution:
        """The Optuna distribution this knob is sampled from."""
        return FloatDistribution(float(self.low), float(self.high), log=self.log)


def validate_space(space: dict[str, Knob], where: str = "space") -> None:
    """Raise :class:`InputError` unless every knob has finite ``low <= high`` (> 0 if log)."""
    require(len(space) > 0, where, "knobs", "at least one knob must be given")
    for name, k in space.items():
        lo, hi = k.low, k.high
        require(isinstance(lo, (int, float)) and isinstance(hi, (int, float))
                and math.isfinite(lo) and math.isfinite(hi), where, name,
                f"`low` and `high` must be finite numbers, but got (low={lo!r}, high={hi!r})")
        require(lo <= hi, where, name, f"`low <= high` must hold, but got (low={lo}, high={hi})")
        require(not k.log or lo > 0, where, name,
                f"`low > 0` must hold for a log knob, but got (low={lo})")


def space_from_json(text: str, where: str = "--space") -> dict[str, Knob]:
    """Parse ``{"name": {"low": .., "high": .., "log": false, "unit": ""}, ...}``."""
    try:
        raw = json.loads(text)
        space = {str(n): Knob(**spec) for n, spec in raw.items()}
    except (json.JSONDecodeError, AttributeError, TypeError, RecursionError) as e:
        raise InputError(where, "space", "must be a JSON object of "
                         f'{{"name": {{"low": .., "high": .., "log": .., "unit": ..}}}} ({e})'
                         ) from None
    validate_space(space, where)
    return space


def run_search(study_name: str, storage_url: str, space: dict[str, Knob],
               evaluate_batch: EvaluateBatch, directions: list[str], n_trials: int,
               batch_size: int = 32, sampler: str = "nsga2", seed: int | None = None,
               progress: bool = True, *,
               heartbeat_interval_s: int = DEFAULT_HEARTBEAT_INTERVAL_S,
               objective_names: list[str] | None = None) -> optuna.Study:
    """Run (or join, or resume) the study until it holds ``n_trials`` finished trials.

    ``evaluate_batch`` gets a list of ``{knob: value}`` dicts and returns, in order,
    one tuple of ``len(directions)`` floats per dict (or a reason string when the
    point is infeasible).  Each worker's sampler seed is derived from ``seed`` and its
    order of joining the study (:func:`worker_seed`), so workers sharing one ``seed``
    do not duplicate each other's points.
    ``objective_names`` become the study's metric names (shown by the dashboard).
    Raises :class:`InputError` on bad arguments or a study whose directions or space
    differ; re-raises what ``evaluate_batch`` raises after failing that batch.
    """
    return _search(study_name, storage_url, space, evaluate_batch, directions, n_trials,
                   batch_size, sampler, seed, progress, heartbeat_interval_s,
                   objective_names)[0]


def _search(study_name, storage_url, space, evaluate_batch, directions, n_trials,
            batch_size, sampler, seed, progress, heartbeat_interval_s, objective_names
            ) -> tuple[optuna.Study, int]:
    """:func:`run_search`, also returning how many trials this worker told."""
    _validate_args(space, directions, n_trials, batch_size, sampler, heartbeat_interval_s)
    storage = open_storage(storage_url, heartbeat_interval_s)
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    mine: list[optuna.Trial] = []  # this worker's trials of the current batch
    try:
        with _stop_on_sigterm():
            with quiet():
                study = _open_study(storage, study_name, space, directions, batch_size,
                                    sampler, seed, objective_names, storage_url)
                if seed is not None:
                    worker = _register_worker(study, storage, study_name)
                    study.sampler = _make_sampler(sampler, worker_seed(seed, worker),
                                                  batch_size)
            beat_s = storage.heartbeat_interval  # None for in-memory SQLite: one process
            n_told = 0
            with tqdm(total=n_trials, initial=min(n_evaluated(study), n_trials), unit="trial",
                      desc=study_name, disable=not progress, file=sys.stderr) as bar:
                try:
                    while True:
                        mine.clear()
                        _claim(study, storage, study_name, n_trials, batch_size, mine)
                        if mine:
                            with _Heartbeat(storage, [t._trial_id for t in mine], beat_s):
                                n_told += _evaluate_and_tell(study, mine, space,
                                                             evaluate_batch, len(directions))
                            bar.n = min(n_evaluated(study), n_trials)
                            bar.refresh()
                        elif beat_s and study.get_trials(deepcopy=False, states=_RUNNING):
                            time.sleep(beat_s / 2)  # others' trials: finish, or go stale
                        else:
                            break
                except BaseException as e:
                    _fail_own(study, storage, study_name, mine, e)
                    raise
    finally:
        optuna.logging.set_verbosity(verbosity)
    return study, n_told


@contextlib.contextmanager
def _stop_on_sigterm():
    """In the main thread, turn SIGTERM into :class:`WorkerStopped` (then restore)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, _frame):
        raise WorkerStopped(f"stopped by signal {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _fail_own(study: optuna.Study, storage, study_name: str, trials: list[optuna.Trial],
              error: BaseException) -> None:
    """Fail this worker's still-RUNNING ``trials`` with a ``fail_reason``; re-enqueue
    them when the worker was stopped (not when ``evaluate_batch`` raised)."""
    if not trials:
        return
    stopped = not isinstance(error, Exception)
    what = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    reason = (f"interrupted: its worker was stopped ({what}); re-run" if stopped
              else f"evaluate_batch raised {what}")
    # Under the lock, as every other abandonment; ignore a second interrupt meanwhile.
    with _ignoring_signals(), claim_lock(storage, study_name), quiet():
        for t in trials:
            _abandon(study, storage, t._trial_id, reason, retry=stopped)


@contextlib.contextmanager
def _ignoring_signals():
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _abandon(study: optuna.Study, storage, trial_id: int, reason: str, retry: bool = True
             ) -> bool:
    """Fail a RUNNING trial with user attr ``fail_reason`` and (``retry``) enqueue its
    parameters again; False if it was already finished (e.g. by its own worker)."""
    try:
        storage.set_trial_user_attr(trial_id, FAIL_REASON, reason)
        if not storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
            return False
    except optuna.exceptions.UpdateFinishedTrialError:
        return False
    if retry:
        _retry(study, storage.get_trial(trial_id))
    return True


def _retry(study: optuna.Study, failed: optuna.trial.FrozenTrial) -> None:
    """Enqueue ``failed``'s parameters as a WAITING trial (as Optuna's
    :class:`~optuna.storages.RetryFailedTrialCallback`, without its user attrs).  A
    trial killed before every knob of the study's space (``dse_space``) was suggested
    holds part of a point; re-enqueued, the rest would be sampled afresh -- neither its
    point nor a fresh one -- so a fresh point is asked instead."""
    history = [*failed.system_attrs.get("retry_history", []), failed.number]
    knobs = set(study.user_attrs.get("dse_space", failed.params))
    if len(history) > MAX_RETRY or not failed.params or set(failed.params) != knobs:
        return  # a fresh point is asked instead
    study.add_trial(optuna.trial.create_trial(
        state=TrialState.WAITING, params=failed.params, distributions=failed.distributions,
        system_attrs={"failed_trial": failed.system_attrs.get("failed_trial", failed.number),
                      "retry_history": history}))


def _fail_abandoned(study: optuna.Study, storage, study_name: str) -> int:
    """Fail (and re-enqueue) the trials of dead workers; call under the claim lock."""
    if storage.heartbeat_interval is None:
        return 0
    study_id = storage.get_study_id_from_name(study_name)
    n = 0
    for trial_id in storage._get_stale_trial_ids(study_id):  # what fail_stale_trials uses
        n += _abandon(study, storage, trial_id, STALE_REASON)
    for trial_id in running_without_heartbeat(storage, study_id):
        n += _abandon(study, storage, trial_id, NO_BEAT_REASON)
    return n


def _claim(study: optuna.Study, storage, study_name: str, n_trials: int, batch_size: int,
           mine: list[optuna.Trial]) -> None:
    """Under the claim lock: fail abandoned trials, then ask at most the remainder
    (re-enqueued trials first) into ``mine``.

    Each asked trial records its first heartbeat before the lock is released, so a
    RUNNING trial without one, seen under the lock, was left by a worker that died
    while holding it; it is failed at once.
    """
    beat = storage.heartbeat_interval is not None
    with claim_lock(storage, study_name), quiet():
        _fail_abandoned(study, storage, study_name)
        trials = study.get_trials(deepcopy=False)
        busy = sum(t.state == TrialState.RUNNING for t in trials)
        k = min(batch_size, n_trials - _count_evaluated(trials) - busy)
        for _ in range(max(k, 0)):
            mine.append(study.ask())
            if beat:
                storage.record_heartbeat(mine[-1]._trial_id)  # Trial has no public id


def _validate_args(space, directions, n_trials, batch_size, sampler, heartbeat_interval_s):
    validate_space(space)
    require(len(directions) > 0 and all(d in ("minimize", "maximize") for d in directions),
            "--directions", "directions",
            f"each must be minimize or maximize, but got {list(directions)}")
    require(isinstance(n_trials, int) and n_trials >= 0, "--trials", "n_trials",
            f"`n_trials >= 0` must hold, but got (n_trials={n_trials!r})")
    require(isinstance(batch_size, int) and batch_size >= 1, "--batch", "batch_size",
            f"`batch_size >= 1` must hold, but got (batch_size={batch_size!r})")
    require(sampler in SAMPLERS, "--sampler", "sampler",
            f"must be one of {', '.join(SAMPLERS)}, but got {sampler!r}")
    require(isinstance(heartbeat_interval_s, int) and heartbeat_interval_s >= 1,
            "--heartbeat-s", "heartbeat_interval_s",
            f"`heartbeat_interval_s >= 1` must hold, but got ({heartbeat_interval_s!r})")


def worker_seed(seed: int, worker: int) -> int:
    """The sampler seed of the ``worker``-th process to join a study (0, 1, 2, ... in
    order of joining, counted in the storage): ``seed`` itself for the first, then a hash
    of ``(seed, worker)`` in [0, 2**32), so workers sharing one storage, and re-runs
    resuming a study, never draw the same points as another worker."""
    if worker == 0:
        return seed
    h = hashlib.blake2b(f"dse.search:{seed}:{worker}".encode(), digest_size=4).digest()
    return int.from_bytes(h, "big")


def _register_worker(study: optuna.Study, storage, study_name: str) -> int:
    """This process's index among the workers that joined the study (under the lock)."""
    with claim_lock(storage, study_name):
        n = int(study.user_attrs.get("dse_workers", 0))
        study.set_user_attr("dse_workers", n + 1)
    return n


def _make_sampler(name: str, seed: int | None, batch_size: int) -> optuna.samplers.BaseSampler:
    """NSGA-II (population at least one batch) or multivariate TPE with a constant liar."""
    with quiet():
        if name == "nsga2":
            return optuna.samplers.NSGAIISampler(population_size=max(50, batch_size), seed=seed)
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True)


def _open_study(storage, study_name, space, directions, batch_size, sampler, seed,
                objective_names, storage_url="") -> optuna.Study:
    """Create or load the study; refuse one whose objectives (metric names), directions or
    knobs differ -- on the storage the search runs on, opened once."""
    study = optuna.create_study(storage=storage, study_name=study_name, directions=directions,
                                sampler=_make_sampler(sampler, seed, batch_size),
                                load_if_exists=True)
    stored = study.metric_names
    if objective_names and stored is not None and list(stored) != list(objective_names):
        raise InputError(masked_url(storage_url), "search.objectives",
                         f"the stored study {study_name!r} optimizes {list(stored)}, but this search "
                         f"asks for {list(objective_names)}; delete the study database or pass "
                         "another --storage")
    have = [d.name.lower() for d in study.directions]
    require(have == list(directions), "--study", study_name,
            f"the stored study has directions {have}, but got {list(directions)}; "
            "use another study name")
    wanted = {name: asdict(knob) for name, knob in space.items()}
    stored = study.user_attrs.get("dse_space")
    if stored is None:
        study.set_user_attr("dse_space", wanted)
    else:
        require(stored == wanted, "--study", study_name,
                f"the stored study searches {stored}, but got {wanted}; use another study name")
    if objective_names and study.metric_names is None:
        study.set_metric_names(list(objective_names))
    return study


def _evaluate_and_tell(study: optuna.Study, trials: list[optuna.Trial],
                       space: dict[str, Knob], evaluate_batch: EvaluateBatch,
                       n_objectives: int) -> int:
    """Suggest every knob, evaluate the whole batch in one call, tell each; count told."""
    points = [{name: t.suggest_float(name, float(k.low), float(k.high), log=k.log)
               for name, k in space.items()} for t in trials]
    outcomes = list(evaluate_batch(points))
    if len(outcomes) != len(trials):
        raise ValueError(f"evaluate_batch returned {len(outcomes)} results "
                         f"for {len(trials)} points")
    results = [_classify(o, n_objectives) for o in outcomes]
    return sum(_tell(study, t, values, reason) for t, (values, reason) in zip(trials, results))


def _classify(outcome: Outcome, n_objectives: int) -> tuple[list[float] | None, str]:
    """``(values, "")`` for a feasible outcome, ``(None, reason)`` otherwise."""
    if isinstance(outcome, str):
        return None, outcome
    values = [float(v) for v in outcome]
    if len(values) != n_objectives:
        raise ValueError(f"evaluate_batch returned {len(values)} values, "
                         f"expected {n_objectives}")
    if not all(math.isfinite(v) for v in values):
        return None, f"infeasible: non-finite objective value(s) {values}"
    return values, ""


def _tell(study: optuna.Study, trial: optuna.Trial, values: list[float] | None,
          reason: str) -> bool:
    """Tell COMPLETE, or FAIL with user attr ``reason``; False if already finished
    (another worker failed it as stale while this one was evaluating)."""
    try:
        if values is None:
            trial.set_user_attr("reason", reason)
            study.tell(trial, state=TrialState.FAIL)
        else:
            study.tell(trial, values)
    except (optuna.exceptions.UpdateFinishedTrialError, ValueError):
        if study.get_trials(deepcopy=False)[trial.number].state.is_finished():
            return False
        raise
    return True


def _count_evaluated(trials: Sequence[optuna.trial.FrozenTrial]) -> int:
    return sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED)
               or (t.state == TrialState.FAIL and "reason" in t.user_attrs
                   and FAIL_REASON not in t.user_attrs) for t in trials)


def n_evaluated(study: optuna.Study) -> int:
    """Trials that count toward the target: COMPLETE, PRUNED, or FAIL as infeasible."""
    return _count_evaluated(study.get_trials(deepcopy=False))


class _Heartbeat:
    """Record the heartbeat of ``trial_ids`` every ``interval_s`` in a daemon thread
    (nothing when ``interval_s`` is None)."""

    def __init__(self, storage, trial_ids: list[int], interval_s: int | None):
        self._storage, self._ids, self._interval_s = storage, trial_ids, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self._interval_s):
            for trial_id in self._ids:
                try:
                    self._storage.record_heartbeat(trial_id)
                except Exception as e:  # a lost beat is retried next interval
                    _log.warning("heartbeat of trial id %s failed: %s", trial_id, e)

    def __enter__(self) -> "_Heartbeat":
        if self._interval_s:
            self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def _load_objective(spec: str) -> EvaluateBatch:
    """Import ``module:function``."""
    module, _, name = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        fn = None
    require(callable(fn), "--objective", spec,
            "must name an importable function as module:function")
    return fn


def main(argv: list[str] | None = None) -> int:
    """Worker entry point; bad input prints one line and returns 2."""
    p = argparse.ArgumentParser(prog="python -m dse.search.runner",
                                description="Run one search worker on a shared study.")
    p.add_argument("--storage", required=True, help="SQLAlchemy URL of the study storage")
    p.add_argument("--study", required=True, help="study name")
    p.add_argument("--objective", required=True, help="evaluate_batch as module:function")
    p.add_argument("--space", required=True, help='JSON: {"x": {"low": 0, "high": 1}, ...}')
    p.add_argument("--directions", required=True, help="comma list: minimize,maximize,...")
    p.add_argument("--trials", type=int, required=True, help="study-wide trial target")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--sampler", default="nsga2", choices=SAMPLERS)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--heartbeat-s", type=int, default=DEFAULT_HEARTBEAT_INTERVAL_S)
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    try:
        study, n_told = _search(a.study, a.storage, space_from_json(a.space),
                                _load_objective(a.objective), a.directions.split(","),
                                a.trials, a.batch, a.sampler, a.seed, not a.no_progress,
                                a.heartbeat_s, None)
    except InputError as e:
        print(e, file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # its RUNNING trials are failed with a reason
        print(f"{a.study}: worker stopped ({e or type(e).__name__}); its unfinished trials "
              "are marked FAIL and will be re-run", file=sys.stderr)
        return 143 if isinstance(e, WorkerStopped) else 130
    print(f"{a.study}: this worker told {n_told} trials; "
          f"{n_evaluated(study)} of {a.trials} finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
