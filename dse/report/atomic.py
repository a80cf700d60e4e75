"""Atomic output files: nothing already written is lost (docs/architecture.md, "Bad input").

Every CSV / Parquet / PNG / JSON / Markdown output goes through :func:`atomic_write`:
the writer fills a temporary file in the *same directory* (same file system), which is
flushed to disk and then renamed over the target with :func:`os.replace`.  A run killed
or failing mid-write leaves the previous file intact (plus, at worst, a stray
``.<name>.tmp-*`` file); readers never see a half-written one.

:func:`check_output_file` and :func:`check_output_dir` check that an output path can be
written *before* the computation starts, so a bad ``-o`` / ``--out`` is a one-line
error (exit status 2) instead of a traceback after all the work.

**No output escapes ``results/``.**  Both checks also require the path, resolved (``..``
and symbolic links followed), to lie inside ``results/`` of the working directory
(:func:`output_roots`), and an existing output file to be a regular file (``-o
/dev/null`` would otherwise be replaced by a file).  ``DSE_OUTPUT_ROOTS`` (paths joined
by ``os.pathsep``) adds folders where outputs may go too -- the test suite's temporary
folders; a user sets it only deliberately.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from dse.errors import InputError, require


def atomic_write(path: str | os.PathLike, writer: Callable[[Path], object]) -> Path:
    """Call ``writer(tmp)`` on a temporary path beside ``path``, then rename it to ``path``.

    The temporary name keeps ``path``'s suffix (so writers that infer the format from it,
    such as matplotlib's ``savefig`` or pandas' compression, behave the same).  On any
    exception (``KeyboardInterrupt`` included) the temporary file is removed and the
    exception re-raised; ``path`` is untouched.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", suffix=path.suffix,
                               dir=path.parent if str(path.parent) else ".")
    os.close(fd)
    tmp = Path(tmp)
    try:
        writer(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        if path.exists():                         # keep the old file's permissions
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_text(path, text: str) -> Path:
    return atomic_write(path, lambda t: Path(t).write_text(text))


def write_json(path, obj) -> Path:
    return write_text(path, json.dumps(obj, indent=2) + "\n")


def write_csv(df, path, **kw) -> Path:
    return atomic_write(path, lambda t: df.to_csv(t, **kw))


def write_parquet(df, path, **kw) -> Path:
    return atomic_write(path, lambda t: df.to_parquet(t, **kw))


def save_fig(fig, path, **kw) -> Path:
    """``fig.savefig(path, **kw)``, atomically (the format from ``path``'s suffix)."""
    fmt = kw.pop("format", Path(path).suffix.lstrip(".") or None)
    return atomic_write(path, lambda t: fig.savefig(t, format=fmt, **kw))


def _probe_writable(d: Path, path: str, field: str) -> None:
    """Create and remove a temporary file in the directory ``d``: ``os.access`` says yes
    to root on read-only or virtual file systems (``/proc``), where the rename-into-place
    of :func:`atomic_write` would fail only after all the work."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".dse-probe-", dir=d)
    except OSError as e:
        raise InputError(path, field, f"its directory {str(d)!r} must be writable "
                         f"({e.strerror or e})") from None
    os.close(fd)
    os.unlink(tmp)


OUTPUT_ROOTS_ENV = "DSE_OUTPUT_ROOTS"


def output_roots() -> list[Path]:
    """Folders outputs may be written in: ``results/`` of the working directory, plus
    those ``DSE_OUTPUT_ROOTS`` names (module docstring)."""
    extra = os.environ.get(OUTPUT_ROOTS_ENV, "")
    return [Path("results").resolve()] + [Path(x).resolve() for x in extra.split(os.pathsep) if x.strip()]


def require_inside_results(path: str | os.PathLike, field: str) -> None:
    """Raise :class:`InputError` unless ``path`` resolves inside one of :func:`output_roots`."""
    r = Path(path).resolve()
    ok = any(r == root or root in r.parents for root in output_roots())
    require(ok, str(path), field, f"must lie inside results/ (every output of dse goes there), "
            f"but it resolves to {str(r)!r}")


def check_output_file(path: str | os.PathLike, field: str) -> Path:
    """Raise :class:`InputError` unless ``path`` can be written as a file: not a
    directory, its parent an existing writable directory (a file can be created there),
    the file itself (if present) writable."""
    p = Path(path)
    require(str(path).strip() != "", str(path), field, "must be a file path, but got an empty string")
    require(not p.is_dir(), str(p), field, "must be a file path, but it is a directory")
    require(not str(path).endswith(("/", os.sep)), str(path), field,
            "must be a file path, but it ends with a path separator")
    require(not p.exists() or p.is_file(), str(p), field,
            "must be a regular file path, but it is a device, FIFO or socket")
    require_inside_results(p, field)
    parent = p.parent if str(p.parent) else Path(".")
    blocker = next((a for a in [parent, *parent.parents] if a.exists() and not a.is_dir()), None)
    require(blocker is None, str(p), field, f"its directory {str(parent)!r} must be a directory, "
            f"but {str(blocker)!r} is a file")
    require(parent.is_dir(), str(p), field, f"its directory {str(parent)!r} must exist")
    require(os.access(parent, os.W_OK | os.X_OK), str(p), field,
            f"its directory {str(parent)!r} must be writable")
    require(not p.exists() or os.access(p, os.W_OK), str(p), field, "must be writable")
    _probe_writable(parent, str(p), field)
    return p


def check_output_dir(path: str | os.PathLike, field: str, create: bool = True) -> Path:
    """Raise :class:`InputError` unless ``path`` is (or can be made) a writable directory.

    ``create=True`` makes it now; ``create=False`` only checks -- an existing directory
    must be writable, a missing one must have a writable nearest existing ancestor -- so a
    command can check its ``--out`` before any other input and create it
    (:func:`make_output_dir`) only once it has something to write: bad input then
    leaves no empty folder behind."""
    p = Path(path)
    require(str(path).strip() != "", str(path), field, "must be a directory path, but got an empty string")
    require(not p.exists() or p.is_dir(), str(p), field, "must be a directory, but it is a file")
    require_inside_results(p, field)
    if not create:
        anc = p
        while not anc.exists():
            if anc.parent == anc:
                break
            anc = anc.parent
        where = "" if anc == p else f" (its nearest existing folder {str(anc)!r})"
        require(anc.is_dir(), str(p), field, f"must be a directory that can be created, but "
                f"{str(anc)!r} is a file")
        require(os.access(anc, os.W_OK | os.X_OK), str(p), field,
                f"must be a writable directory{where}")
        _probe_writable(anc, str(p), field)
        return p
    return make_output_dir(p, field)


def make_output_dir(path: str | os.PathLike, field: str) -> Path:
    """Create the output directory ``path`` (parents too); an :class:`InputError` if it
    cannot be made or written."""
    p = Path(path)
    require(not p.exists() or p.is_dir(), str(p), field, "must be a directory, but it is a file")
    if not p.exists():
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(str(p), field, f"must be a directory that can be created ({e.strerror})") from None
    require(p.is_dir(), str(p), field, "must be an existing directory")
    require(os.access(p, os.W_OK | os.X_OK), str(p), field, "must be a writable directory")
    _probe_writable(p, str(p), field)
    return p
