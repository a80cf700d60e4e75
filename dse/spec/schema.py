"""Declarative input schemas: field metadata (key, type, unit, scale to SI, bounds,
default, doc) and the one validator that checks a user table against them, with the
project's message format ("`x <= y` must hold, but got (x=...)", docs/architecture.md
"Bad input").  Every spec file kind declares its schema here or beside its loader:
hardware (:mod:`dse.spec.hardware`), models and Hugging Face ``config.json``
(:mod:`dse.spec.model`), topologies and faults (:mod:`dse.spec.network_schema`) and
study files (:mod:`dse.spec.study`); :mod:`dse.spec.describe` renders them for
``dse list`` and ``--help``.

A :class:`Field` describes one key (``words``: strings accepted in place of its value,
as ``"auto"`` for a serving study's ``ep``).  :func:`check_table` checks every key of a table
(recursing into sub-tables, arrays of tables and tables of named tables) and returns
*every* problem found -- unknown keys (with a "did you mean" for near misses), missing
required keys, wrong types (a boolean where a number belongs, a string where a boolean
belongs, a fraction where an integer belongs), non-finite numbers, values outside their
bounds or choices.  :func:`validate_table` raises them as one one-line
:class:`~dse.errors.InputError`: the first problem as field and rule, the others appended
(``...; also: <field>: <rule>; ...``).

Wording: the default rules are the house style above; a field whose file kind has its
own established wording (the study runners' ``must be an integer >= 1``, a topology's
``kind must be one of``) carries it as ``rule``, a template over ``{key}``, ``{v}``,
``{bounds}`` (``key >= lo``), ``{chain}`` (``lo <= key``), ``{lo}``, ``{hi}`` and
``{choices}``, used for every type, bound and choice failure of that field.

Bounds keep every value inside float32's finite range after scaling to SI (the cost code
runs in float32, :mod:`dse.spec.numerics`): ``FLOAT32_SAFE`` caps any scaled value.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

from dse.errors import InputError

FLOAT32_SAFE = 1e30      # scaled values stay well inside float32 (3.4e38) through products
MAX_REPORTED = 8         # problems listed in one message (the first is field and rule)

#: kind -> what a value of that kind is, in words (docs, and the type rule)
KINDS = {"number": "a finite number", "integer": "an integer", "bool": "true or false",
         "string": "a string", "table": "a table", "tables": "an array of tables",
         "named": "a table of named tables", "integers": "an integer or a list of them",
         "strings": "a string or a list of them", "list": "a list", "any": "any value",
         "quantity": "a number or a string"}


def _fmt(x: float) -> str:
    """A bound as written: integers in full (2147483647), other numbers as ``%g``."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


@dataclass(frozen=True)
class Field:
    key: str                       # the key in the spec file (human units)
    attr: str = ""                 # the spec attribute it fills ("" = label / not stored)
    scale: float = 1.0             # human unit -> SI
    unit: str = ""                 # human unit, for docs
    kind: str = "number"           # one of KINDS
    lo: float | None = None
    lo_open: bool = False          # lo is exclusive
    hi: float | None = None
    hi_open: bool = False          # hi is exclusive
    default: object = None         # the value used when absent (None: none)
    required: bool = False
    doc: str = ""
    choices: tuple = ()            # allowed values (strings, or items of a list)
    fields: tuple | None = None    # table / tables / named: the schema of the sub-table(s)
    tag: str = ""                  # tables: the key whose value picks the schema in ``cases``
    cases: tuple = ()              # ((tag value or, for named, table name, fields), ...)
    item: str = ""                 # list: the kind of each item ("" = any)
    min_items: int = 0             # list / integers / strings / tables: fewest items
    rule: str = ""                 # this field's own wording (module docstring)
    label: str = ""                # tables: the key whose string value names an item in
                                   # messages (``variants['hot'].l2``), else its index
    words: tuple = ()              # strings accepted as the whole value ("auto")

    def bounds_text(self) -> str:
        """``key >= lo``, ``key <= hi`` or ``lo <= key < hi`` ("" when unbounded)."""
        lo = None if self.lo is None else f"{_fmt(self.lo)} {'<' if self.lo_open else '<='} {self.key}"
        if self.hi is None:
            return "" if lo is None else f"{self.key} {'>' if self.lo_open else '>='} {_fmt(self.lo)}"
        hi = f"{'<' if self.hi_open else '<='} {_fmt(self.hi)}"
        return f"{lo} {hi}" if lo else f"{self.key} {hi}"

    def chain_text(self) -> str:
        """The bounds lower bound first: ``lo <= key`` / ``lo < key <= hi``."""
        lo = "" if self.lo is None else f"{_fmt(self.lo)} {'<' if self.lo_open else '<='} "
        hi = "" if self.hi is None else f" {'<' if self.hi_open else '<='} {_fmt(self.hi)}"
        return f"{lo}{self.key}{hi}"

    def type_text(self) -> str:
        if self.words:
            return " or ".join(repr(w) for w in self.words) + ", " + KINDS[self.kind]
        if self.kind == "string" and self.choices:
            return "one of " + ", ".join(map(str, self.choices))
        if self.kind == "list" and self.item:
            return f"a list of {KINDS[self.item][2:] if KINDS[self.item].startswith('a ') else self.item}s"
        return KINDS[self.kind]


class Problems:
    """The problems found in one file: (field, rule) pairs, in the order found."""

    def __init__(self, where: str):
        self.where, self.items = where, []

    def add(self, field: str, rule: str) -> None:
        self.items.append((field, rule))

    def __bool__(self) -> bool:
        return bool(self.items)

    def error(self) -> InputError:
        (field, rule), rest = self.items[0], self.items[1:]
        if rest:               # the allowed keys are listed once, with the first problem
            more = "; ".join(f"{f}: {r.split('; allowed keys are')[0]}" for f, r in rest[:MAX_REPORTED - 1])
            extra = len(rest) - (MAX_REPORTED - 1)
            rule = f"{rule}; also: {more}" + (f"; and {extra} more" if extra > 0 else "")
        return InputError(self.where, field, rule)

    def raise_if_any(self) -> None:
        if self.items:
            raise self.error()


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _say(f: Field, default: str, v) -> str:
    if not f.rule:
        return default
    return f.rule.format(key=f.key, v=v, bounds=f.bounds_text(), chain=f.chain_text(),
                         lo=f.lo, hi=f.hi, choices=list(f.choices))


def _scalar(f: Field, kind: str, v, key: str, out: Problems) -> object:
    """``v`` checked as one value of ``kind`` (number / integer / bool / string / any) and
    ``f``'s bounds and choices; returns the value (None after a problem)."""
    if kind == "any":
        return v
    if kind == "quantity":             # a bare number, or a string its loader parses
        if isinstance(v, str):
            return v
        kind = "number"
    if kind == "bool":
        if not isinstance(v, bool):
            return out.add(key, _say(f, f"must be true or false, but got {v!r}", v))
        return v
    if kind == "string":
        if not isinstance(v, str):
            return out.add(key, _say(f, f"must be a string, but got {v!r}", v))
        if f.choices and v not in f.choices:
            return out.add(key, _say(f, f"must be one of {list(f.choices)}, but got {v!r}", v))
        return v
    if kind == "integer" and not _is_int(v):
        return out.add(key, _say(f, f"must be an integer, but got {v!r}", v))
    if not _is_number(v):
        return out.add(key, _say(f, f"must be a number, but got {v!r}", v))
    if not math.isfinite(v):
        return out.add(key, _say(f, f"must be a finite number, but got {v!r}", v))
    bad_lo = f.lo is not None and (v <= f.lo if f.lo_open else v < f.lo)
    bad_hi = f.hi is not None and (v >= f.hi if f.hi_open else v > f.hi)
    if bad_lo or bad_hi:
        return out.add(key, _say(f, f"`{f.bounds_text()}` must hold, but got ({f.key}={v!r})", v))
    if f.choices and v not in f.choices:
        return out.add(key, _say(f, f"must be one of {list(f.choices)}, but got {v!r}", v))
    if abs(v) * f.scale > FLOAT32_SAFE:
        return out.add(key, f"`{f.key} * {f.scale:g} <= {FLOAT32_SAFE:g}` (float32-safe SI value) "
                            f"must hold, but got ({f.key}={v!r})")
    return int(v) if kind == "integer" else float(v)


def _value(f: Field, v, key: str, out: Problems) -> object:
    """One field's value, checked (recursing into sub-tables); None after a problem."""
    if f.words and isinstance(v, str) and v in f.words:
        return v
    if f.kind in ("number", "integer", "bool", "string", "any", "quantity"):
        return _scalar(f, f.kind, v, key, out)
    if f.kind in ("integers", "strings"):
        one = "integer" if f.kind == "integers" else "string"
        items = [v] if (_is_int(v) if one == "integer" else isinstance(v, str)) else v
        if not isinstance(items, list) or len(items) < max(f.min_items, 1):
            return out.add(key, _say(f, f"must be {KINDS[f.kind]} (non-empty), but got {v!r}", v))
        n = len(out.items)
        vals = [_scalar(f, one, x, key, out) for x in items]
        if len(out.items) > n:
            del out.items[n + 1:]          # one problem per list is enough
            return None
        return vals
    if f.kind == "list":
        if not isinstance(v, list) or len(v) < f.min_items:
            what = "a non-empty list" if f.min_items else "a list"
            return out.add(key, _say(f, f"must be {what}, but got {v!r}", v))
        if not f.item:
            return v
        n = len(out.items)
        vals = [_scalar(f, f.item, x, f"{key}[{i}]", out) for i, x in enumerate(v)]
        del out.items[n + 1:]
        return vals
    if f.kind == "table":
        if not isinstance(v, dict):
            return out.add(key, _say(f, f"must be a table, but got {v!r}", v))
        return v if f.fields is None else check_table(v, f.fields, out, key)
    if f.kind == "tables":
        if not isinstance(v, list) or len(v) < f.min_items or not all(isinstance(t, dict) for t in v):
            what = "a non-empty array of tables" if f.min_items else "an array of tables"
            return out.add(key, _say(f, f"must be {what} [[{key}]], but got {v!r}", v))
        return [_one_of(f, t, _item(f, t, key, i), out) for i, t in enumerate(v)]
    if f.kind == "named":
        if not isinstance(v, dict) or len(v) < f.min_items:
            what = "a non-empty table" if f.min_items else "a table"
            return out.add(key, _say(f, f"must be {what} of named tables, but got {v!r}", v))
        res, cases = {}, dict(f.cases)
        names = tuple(cases) or f.choices
        for name, t in v.items():
            if names and name not in names:
                out.add(f"{key}.{name}", f"must be one of {sorted(names)}" + _did_you_mean(name, names))
            elif not isinstance(t, dict):
                out.add(f"{key}.{name}", f"must be a table, but got {t!r}")
            elif cases.get(name, f.fields) is not None:
                res[name] = check_table(t, cases.get(name, f.fields), out, f"{key}.{name}")
        return res
    raise ValueError(f"schema: unknown field kind {f.kind!r} for {key}")   # a schema bug


def _item(f: Field, t: dict, key: str, i: int) -> str:
    """How messages name item ``i`` of an array of tables: by its ``label`` key's value
    when that is a non-empty string, else by its index."""
    name = t.get(f.label) if f.label else None
    return f"{key}[{name!r}]" if isinstance(name, str) and name.strip() else f"{key}[{i}]"


def keys_at(fields: tuple[Field, ...], *path: str) -> set[str]:
    """The keys a schema declares for the (sub-)table at ``path`` (``()``: the top level;
    ``("report", "heatmap")``: a table inside a table; a ``tables`` field: its items) --
    so code that reads a table checks against the one declaration."""
    for p in path:
        f = next(g for g in fields if g.key == p)
        fields = f.fields
    return {f.key for f in fields}


def _one_of(f: Field, t: dict, key: str, out: Problems) -> dict | None:
    if not f.tag:
        return t if f.fields is None else check_table(t, f.fields, out, key)
    cases = dict(f.cases)
    tag = t.get(f.tag)
    if not isinstance(tag, str) or tag not in cases:
        tf = next((g for g in cases[next(iter(cases))] if g.key == f.tag), None)
        out.add(f"{key}.{f.tag}", _say(tf, f"must be one of {sorted(cases)}, but got {tag!r}", tag)
                if tf else f"must be one of {sorted(cases)}, but got {tag!r}")
        return None
    return check_table(t, cases[tag], out, key)


def _did_you_mean(key: str, known) -> str:
    close = difflib.get_close_matches(str(key), [str(k) for k in known], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_table(d: dict, fields: tuple[Field, ...], out: Problems, name: str = "") -> dict:
    """``{key: checked value}`` for every field (defaults filled in; numbers as floats and
    integers as ints in the file's units); every problem is added to ``out``."""
    def at(k):
        return f"{name}.{k}" if name else str(k)
    if not isinstance(d, dict):
        out.add(name or "table", f"must be a table, but got {type(d).__name__}")
        return {}
    known = {f.key: f for f in fields}
    for k in d:
        if k not in known:
            out.add(at(k), f"unknown key{_did_you_mean(k, known)}; allowed keys are {sorted(known)}")
    res = {}
    for f in fields:
        if f.key in d:
            res[f.key] = _value(f, d[f.key], at(f.key), out)
        elif f.required:
            out.add(at(f.key), "is required")
        else:
            res[f.key] = f.default
    return res


def validate_table(d: dict, fields: tuple[Field, ...], where: str, name: str = "") -> dict:
    """:func:`check_table`, raising every problem as one :class:`InputError`."""
    out = Problems(where)
    if not isinstance(d, dict):
        raise InputError(where, name or "table", f"must be a table, but got {type(d).__name__}")
    res = check_table(d, fields, out, name)
    out.raise_if_any()
    return res


def describe(fields: tuple[Field, ...], prefix: str = "") -> list[tuple[str, str, str, str, str, str]]:
    """(key, type, unit, bounds, default, doc) rows of a schema, sub-tables flattened
    (``report.heatmap.gpus``, ``fault[].factor``), for listings and help."""
    rows = []
    for f in fields:
        key = prefix + f.key
        default = "required" if f.required else ("" if f.default is None else repr(f.default))
        rows.append((key, f.type_text(), f.unit, f.bounds_text(), default, f.doc))
        sub = "[]." if f.kind == "tables" else (".<name>." if f.kind == "named" else ".")
        if f.fields is not None:
            rows += describe(f.fields, key + sub)
        for tag, fs in f.cases:
            sub = f"{key}[{f.tag}={tag}]." if f.tag else f"{key}.{tag}."
            rows += describe(tuple(g for g in fs if g.key != f.tag), sub)
    return rows
