"""Optuna study storage: default URL, opening with heartbeat, cross-process locks.

Any SQLAlchemy URL works (SQLite by default, PostgreSQL for many workers on many
machines).  Two details make several worker processes safe on one storage:

* **SQLite** runs in WAL mode with a busy timeout, and every SQLAlchemy transaction
  starts with ``BEGIN IMMEDIATE`` (the write lock is taken up front), so two processes
  queue for the lock instead of failing with "database is locked" when a read
  transaction tries to become a write (SQLAlchemy's documented pysqlite recipe,
  "Serializable isolation / Savepoints / Transactional DDL").
* :func:`claim_lock` serialises the short "count trials, then ask" step of
  :mod:`dse.search.runner` so concurrent workers never overshoot the trial target:
  an ``fcntl`` lock on ``<db>.lock`` beside a SQLite file, ``pg_advisory_xact_lock``
  on PostgreSQL.  Other backends run unlocked (each worker may then overshoot the
  target by at most one batch).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import re
import sqlite3
import warnings
from collections.abc import Iterator
from pathlib import Path

import optuna
import sqlalchemy
import sqlalchemy.orm
from optuna.trial import TrialState
from sqlalchemy import event, exc
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from dse.errors import InputError

URL_RULE = "must be a SQLAlchemy URL such as sqlite:///path.db or postgresql://user@host/db"
SQLITE_BUSY_TIMEOUT_S = 60.0
DEFAULT_HEARTBEAT_INTERVAL_S = 10
_STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def default_storage_url(results_dir: Path, study_name: str) -> str:
    """``sqlite:///<results_dir>/<study_name>.db`` (relative dirs stay relative)."""
    if not _STUDY_NAME.fullmatch(study_name):
        raise InputError("--study", "study_name",
                         f"must match [A-Za-z0-9][A-Za-z0-9._-]*, but got {study_name!r}")
    return f"sqlite:///{(Path(results_dir) / f'{study_name}.db').as_posix()}"


def grace_period_s(heartbeat_interval_s: int) -> int:
    """Seconds without a heartbeat after which a RUNNING trial counts as abandoned.

    Optuna's default is twice the interval; one more second absorbs SQLite's
    one-second ``CURRENT_TIMESTAMP`` resolution.
    """
    return 2 * heartbeat_interval_s + 1


def open_storage(url: str, heartbeat_interval_s: int | None = DEFAULT_HEARTBEAT_INTERVAL_S,
                 create: bool = True) -> optuna.storages.RDBStorage:
    """Open (creating tables if needed) the Optuna RDB storage at ``url``.

    ``create=False`` (readers such as the dashboard): a SQLite file that does not exist is
    bad input instead of a new, empty storage.  A bad existing file (empty, a directory,
    foreign, damaged) is refused before anything is written beside it.

    ``heartbeat_interval_s`` enables Optuna's heartbeat so trials of a killed worker
    can be failed later (``None`` disables it; in-memory SQLite never has one).
    Raises :class:`InputError` on ``--storage`` for a malformed URL, an unknown
    dialect, a missing driver or a database that cannot be opened.
    """
    shown = masked_url(url)
    try:
        parsed = make_url(url)
        parsed.get_dialect()
    except (exc.ArgumentError, exc.NoSuchModuleError, ValueError, TypeError):
        raise InputError("--storage", shown, URL_RULE) from None
    except ImportError as e:
        raise InputError("--storage", shown, f"needs its database driver ({e})") from None
    db_path = sqlite_path(url)
    if parsed.get_backend_name() == "sqlite" and db_path is None:
        heartbeat_interval_s = None  # one process, one connection: nothing to detect
    kwargs: dict = dict(heartbeat_interval=heartbeat_interval_s,
                        grace_period=grace_period_s(heartbeat_interval_s)
                        if heartbeat_interval_s else None)
    if db_path is not None:
        if db_path.is_dir():
            raise InputError("--storage", shown, "must be a SQLite file, but it is a directory")
        if not create and not db_path.exists():
            raise InputError("--storage", shown, f"{db_path} must exist (an existing study "
                             "storage: run the study first)")
        if create:                       # a new or growing SQLite file is an output
            from dse.report.atomic import require_inside_results
            require_inside_results(db_path, "--storage")
    lock = Path(f"{db_path}.lock") if db_path is not None else None
    lock_existed = lock is not None and lock.exists()
    try:
        if db_path is not None:
            db_path.parent.mkdir(parents=True, exist_ok=True)
            with _file_lock(db_path), quiet():
                _check_sqlite_file(db_path, shown)
                with contextlib.closing(sqlite3.connect(db_path, timeout=SQLITE_BUSY_TIMEOUT_S)) as c:
                    c.execute("PRAGMA journal_mode=WAL")
                    check = c.execute("PRAGMA quick_check").fetchone()
                    if not check or check[0] != "ok":
                        raise InputError("--storage", shown, "must be an intact SQLite database, "
                                         f"but its integrity check says {check[0] if check else None!r}")
                storage = optuna.storages.RDBStorage(
                    url, engine_kwargs={"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}},
                    **kwargs)
            _begin_immediate(storage.engine)
        else:
            with _init_lock(url), quiet():
                storage = optuna.storages.RDBStorage(url, **kwargs)
    except BaseException as e:
        if lock is not None and not lock_existed:   # a refused file leaves nothing beside it
            lock.unlink(missing_ok=True)
        if isinstance(e, ImportError):
            raise InputError("--storage", shown, f"needs its database driver ({e})") from None
        if isinstance(e, (exc.SQLAlchemyError, optuna.exceptions.StorageInternalError,
                          sqlite3.Error, OSError)):
            reason = str(e.__cause__ or e).strip().splitlines()[0]
            raise InputError("--storage", shown, f"could not be opened: {reason}") from None
        raise
    return storage


def _check_sqlite_file(db_path: Path, shown: str) -> None:
    """An existing storage file must be a SQLite database: an empty file is an error
    (never silently turned into a new study); a foreign or damaged one fails SQLite's
    own open / ``quick_check`` in :func:`open_storage`.  The file is only ``stat``-ed,
    never opened here: closing any descriptor of a SQLite file drops this process's
    POSIX locks on it, which corrupts a database other connections are using."""
    if not db_path.exists():
        return                                   # a new study: created here
    if db_path.is_dir():
        raise InputError("--storage", shown, "must be a SQLite file, but it is a directory")
    size = db_path.stat().st_size
    if size == 0:
        raise InputError("--storage", shown, f"{db_path} is an empty file, not a study storage: "
                         "delete it to start a new study")
    if size % 512:       # SQLite files are whole pages (512 B to 64 KiB); SQLite itself
        # would take a short file for a new database and overwrite it
        raise InputError("--storage", shown, f"{db_path}: file is not a database (a SQLite file "
                         f"is whole pages of >= 512 B, sqlite.org/fileformat.html, but its size is "
                         f"{size} B)")


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL; ``None`` for in-memory or non-SQLite URLs."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


@contextlib.contextmanager
def claim_lock(storage: optuna.storages.RDBStorage, study_name: str) -> Iterator[None]:
    """Hold a lock shared by every process using ``storage`` (see module docstring)."""
    db_path = sqlite_path(storage.url)
    if db_path is not None:
        with _file_lock(db_path):
            yield
    elif storage.engine.name == "postgresql":
        with storage.engine.begin() as conn:
            conn.execute(sqlalchemy.text("SELECT pg_advisory_xact_lock(:k)"),
                         {"k": _lock_key(f"dse.search.claim:{study_name}")})
            yield
    else:
        yield


def running_without_heartbeat(storage: optuna.storages.RDBStorage, study_id: int) -> list[int]:
    """IDs of the study's RUNNING trials that never recorded a heartbeat.

    Reads Optuna's ``trial_heartbeats`` table through its (private, but stable since
    Optuna 2.x) ORM models; Optuna's own stale check skips such trials.
    """
    from optuna.storages._rdb import models

    trial, beat = models.TrialModel, models.TrialHeartbeatModel
    with sqlalchemy.orm.Session(storage.engine) as session:
        rows = (session.query(trial.trial_id)
                .outerjoin(beat, beat.trial_id == trial.trial_id)
                .filter(trial.study_id == study_id, trial.state == TrialState.RUNNING,
                        beat.trial_id.is_(None))
                .all())
    return [trial_id for (trial_id,) in rows]


@contextlib.contextmanager
def _file_lock(db_path: Path) -> Iterator[None]:
    """Exclusive ``flock`` on ``<db>.lock``; the kernel drops it if the holder dies."""
    with open(f"{db_path}.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def _init_lock(url: str) -> Iterator[None]:
    """Serialise table creation on PostgreSQL (concurrent CREATE TABLE races)."""
    if make_url(url).get_backend_name() != "postgresql":
        yield
        return
    engine = sqlalchemy.create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(sqlalchemy.text("SELECT pg_advisory_xact_lock(:k)"),
                         {"k": _lock_key("dse.search.init")})
            yield
    finally:
        engine.dispose()


def _begin_immediate(engine: sqlalchemy.engine.Engine) -> None:
    """Make every transaction on a SQLite ``engine`` take the write lock at BEGIN."""

    def on_connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # SQLAlchemy emits BEGIN, not pysqlite
        dbapi_conn.execute("PRAGMA synchronous=NORMAL")

    def on_begin(conn) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    event.listen(engine, "connect", on_connect)
    event.listen(engine, "begin", on_begin)
    engine.dispose()  # pooled connections predate the listeners


def _lock_key(name: str) -> int:
    """A stable signed 64-bit key for PostgreSQL advisory locks."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big",
                          signed=True)


def masked_url(url: str) -> str:
    """``url`` with any password hidden, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return str(url)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence Optuna's experimental-feature and ask/tell heartbeat warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")
        yield
