"""A small TOML writer for the tests (the package only reads TOML): every value inline,
``key = value`` at the top level, so nested tables and arrays of tables need no section
headers.  Floats keep ``nan`` / ``inf``, which TOML has."""

from __future__ import annotations

import json
import math
import re

_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _key(k: str) -> str:
    return k if _BARE.fullmatch(k) else json.dumps(k)


def value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"no TOML for {v!r}")


def dumps(d: dict) -> str:
    return "".join(f"{_key(k)} = {value(v)}\n" for k, v in d.items())
