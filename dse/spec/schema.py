"""Declarative input schemas: field metadata (key, unit, scale to SI, bounds, default,
doc) and the one validator that turns a user table into SI values with the project's
message format ("`x <= y` must hold, but got (x=...)", docs/architecture.md "Bad input").

A :class:`Field` describes one key of a spec file.  :func:`validate_table` checks every
key of a table against its schema at once -- unknown keys, missing required keys, wrong
types (a boolean where a number belongs, a string where a boolean belongs, a fraction
where an integer belongs), non-finite numbers and bounds -- and raises one
:class:`~dse.errors.InputError` naming the first problem.  :func:`describe` renders a
schema for ``dse list`` and ``--help``.

Bounds keep every value inside float32's finite range after scaling to SI (the cost code
runs in float32, :mod:`dse.spec.numerics`): ``FLOAT32_SAFE`` caps any scaled value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dse.errors import InputError

FLOAT32_SAFE = 1e30      # scaled values stay well inside float32 (3.4e38) through products


@dataclass(frozen=True)
class Field:
    key: str                       # the key in the spec file (human units)
    attr: str = ""                 # the spec attribute it fills ("" = label / not stored)
    scale: float = 1.0             # human unit -> SI
    unit: str = ""                 # human unit, for docs
    kind: str = "number"           # number | integer | bool | string | table
    lo: float | None = None
    lo_open: bool = False          # lo is exclusive
    hi: float | None = None
    hi_open: bool = False          # hi is exclusive
    default: object = None         # None = required (numbers), or the value used when absent
    required: bool = False
    doc: str = ""

    def bounds_text(self) -> str:
        lo = None if self.lo is None else f"{self.lo:g} {'<' if self.lo_open else '<='} {self.key}"
        if self.hi is None:
            return "" if lo is None else f"{self.key} {'>' if self.lo_open else '>='} {self.lo:g}"
        hi = f"{'<' if self.hi_open else '<='} {self.hi:g}"
        return f"{lo} {hi}" if lo else f"{self.key} {hi}"


def _check_value(f: Field, v, where: str, name: str):
    key = f"{name}.{f.key}" if name else f.key
    if f.kind == "bool":
        if not isinstance(v, bool):
            raise InputError(where, key, f"must be true or false, but got {v!r}")
        return v
    if f.kind == "table":
        if not isinstance(v, dict):
            raise InputError(where, key, f"must be a table, but got {v!r}")
        return v
    if f.kind == "string":
        if not isinstance(v, str):
            raise InputError(where, key, f"must be a string, but got {v!r}")
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(where, key, f"must be a number, but got {v!r}")
    if not math.isfinite(v):
        raise InputError(where, key, f"must be a finite number, but got {v!r}")
    if f.kind == "integer" and v != int(v):
        raise InputError(where, key, f"must be an integer, but got {v!r}")
    bad_lo = f.lo is not None and (v <= f.lo if f.lo_open else v < f.lo)
    bad_hi = f.hi is not None and (v >= f.hi if f.hi_open else v > f.hi)
    if bad_lo or bad_hi:
        raise InputError(where, key, f"`{f.bounds_text()}` must hold, but got ({f.key}={v!r})")
    if abs(v) * f.scale > FLOAT32_SAFE:
        raise InputError(where, key, f"`{f.key} * {f.scale:g} <= {FLOAT32_SAFE:g}` (float32-safe SI value) "
                         f"must hold, but got ({f.key}={v!r})")
    return float(v)


def validate_table(d: dict, fields: tuple[Field, ...], where: str, name: str = "") -> dict:
    """``{key: validated value}`` for every field of ``fields`` (defaults filled in,
    numbers as floats in the file's units); unknown keys and every rule of the module
    docstring raise :class:`InputError`."""
    if not isinstance(d, dict):
        raise InputError(where, name or "table", f"must be a table, but got {type(d).__name__}")
    known = {f.key: f for f in fields}
    unknown = sorted(set(d) - set(known))
    if unknown:
        key = f"{name}.{unknown[0]}" if name else unknown[0]
        raise InputError(where, key, f"unknown key; allowed keys are {sorted(known)}")
    out = {}
    for f in fields:
        if f.key in d:
            out[f.key] = _check_value(f, d[f.key], where, name)
        elif f.required:
            raise InputError(where, f"{name}.{f.key}" if name else f.key, "is required")
        else:
            out[f.key] = f.default
    return out


def describe(fields: tuple[Field, ...]) -> list[tuple[str, str, str, str, str]]:
    """(key, unit, bounds, default, doc) rows of a schema, for listings and help."""
    rows = []
    for f in fields:
        default = "required" if f.required else ("" if f.default is None else repr(f.default))
        rows.append((f.key, f.unit, f.bounds_text(), default, f.doc))
    return rows
