"""Reading the package's input files: one TOML and one JSON loader for every spec, study,
topology and fault file, and for Hugging Face ``config.json`` files.

Every bad file becomes a one-line :class:`dse.errors.InputError` (``<file>: <field>: <rule>``)
instead of a traceback: a missing file, a directory, an unreadable file, bytes that are not
UTF-8 text, a syntax error, nesting deep enough to exhaust the parser's recursion, or a top
level that is not a table/object.

Python 3.10 has no :mod:`tomllib`; there the ``tomli`` backport (same API) is used, so the
package runs on 3.10 to 3.13.  Import ``tomllib`` from here rather than from the standard
library.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dse.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:                                     # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = ["load_toml", "load_json", "read_text", "tomllib"]


def _one_line(msg: object) -> str:
    return " ".join(str(msg).split())


def read_text(path: str | Path, where: str | None = None) -> str:
    """The UTF-8 text of ``path`` (a leading byte-order mark is dropped); any reason it
    cannot be read is an :class:`InputError` naming ``where`` (default: the path)."""
    where = str(path) if where is None else where
    p = Path(path)
    if p.is_dir():
        raise InputError(where, "file", "must be a file, but got a directory")
    if p.exists() and not p.is_file():    # /dev/zero, a FIFO: would read without end
        raise InputError(where, "file", "must be a regular file, but got a device, FIFO or socket")
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(where, "file", "must exist") from None
    except IsADirectoryError:             # raced with the check above
        raise InputError(where, "file", "must be a file, but got a directory") from None
    except OSError as e:                  # permission denied, a FIFO gone wrong, ...
        raise InputError(where, "file", f"must be readable ({_one_line(e.strerror or e)})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(where, "file", f"must be UTF-8 text, but byte {e.start} is "
                         f"0x{data[e.start]:02x} (a binary file?)") from None


def load_toml(path: str | Path, where: str | None = None) -> dict:
    """The top-level table of the TOML file ``path``.  ``where`` names the file in error
    messages (default: the path)."""
    where = str(path) if where is None else where
    text = read_text(path, where)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(where, "toml", f"must be valid TOML ({_one_line(e)})") from None
    except RecursionError:
        raise InputError(where, "toml", "must be valid TOML, but arrays or inline tables "
                         "nest too deeply to parse") from None
    except ValueError as e:               # e.g. a number the float parser rejects
        raise InputError(where, "toml", f"must be valid TOML ({_one_line(e)})") from None
    if not isinstance(data, dict):        # tomllib always returns a dict; be explicit anyway
        raise InputError(where, "toml", f"top level must be a table, but got "
                         f"{type(data).__name__}")
    return data


def load_json(path: str | Path, where: str | None = None) -> dict:
    """The top-level object of the JSON file ``path``.  ``where`` names the file in error
    messages (default: the path)."""
    where = str(path) if where is None else where
    text = read_text(path, where)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(where, "json", f"must be valid JSON ({e.msg} at line {e.lineno}, "
                         f"column {e.colno})") from None
    except RecursionError:
        raise InputError(where, "json", "must be valid JSON, but arrays or objects nest too "
                         "deeply to parse") from None
    except ValueError as e:               # e.g. an integer with too many digits
        raise InputError(where, "json", f"must be valid JSON ({_one_line(e)})") from None
    if not isinstance(data, dict):
        raise InputError(where, "json", f"top level must be a JSON object, but got "
                         f"{type(data).__name__}")
    return data


def catalog_key(name: str, names) -> str | None:
    """The catalog entry ``name`` denotes among ``names`` (the catalog's keys, all lower
    case): itself, or its lower-cased, stripped form (``H100-SXM-80GB``); None if neither."""
    if name in names:
        return name
    low = name.strip().lower()
    return low if low in names else None
