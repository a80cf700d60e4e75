"""Hypothesis strategies that break one thing in an otherwise valid input file, driven by
the file's schema (dse.spec.schema): an unknown key in any table, a required key dropped,
or a value of the wrong type, non-finite, outside its bounds or not among its choices.
Each strategy returns (broken dict, the field path the error must name)."""

from __future__ import annotations

import copy
import math

from hypothesis import strategies as st

from dse.spec.schema import Field

NOT_A_CHOICE = "zzz-not-a-choice"


class Named(str):
    """An array-of-tables item named in messages by its label (``variants['hot']``,
    :attr:`dse.spec.schema.Field.label`) instead of its index."""


def path_text(path: tuple) -> str:
    out = ""
    for p in path:
        if isinstance(p, Named):
            out += f"[{str(p)!r}]"
        else:
            out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def shown(d: dict, fields: tuple[Field, ...], path: tuple) -> tuple:
    """``path`` as the validator names it in ``d``: an item of a labelled array of
    tables by its label's value when that is a non-empty string, else by its index."""
    out, cur, fs, i = [], d, fields, 0
    while i < len(path):
        p = path[i]
        out.append(p)
        i += 1
        f = next((g for g in fs or () if g.key == p), None) if isinstance(cur, dict) else None
        if f is None or p not in cur:
            return tuple(out) + tuple(path[i:])
        cur, fs = cur[p], f.fields
        nxt = path[i] if i < len(path) else None
        if f.kind == "tables" and isinstance(nxt, int) and isinstance(cur, list) and nxt < len(cur):
            item = cur[nxt]
            name = item.get(f.label) if f.label and isinstance(item, dict) else None
            out.append(Named(name) if isinstance(name, str) and name.strip() else nxt)
            cur, fs, i = item, (_schema_of(f, item) if isinstance(item, dict) else None), i + 1
        elif f.kind == "named" and nxt is not None and isinstance(cur, dict):
            out.append(nxt)
            cur, fs, i = cur.get(nxt), dict(f.cases).get(nxt, f.fields), i + 1
    return tuple(out)


def _schema_of(f: Field, item: dict) -> tuple[Field, ...] | None:
    if f.tag:
        tag = item.get(f.tag)
        return dict(f.cases).get(tag) if isinstance(tag, str) else None
    return f.fields


def targets(d: dict, fields: tuple[Field, ...], path: tuple = ()) -> list[tuple]:
    """("table", path, fields) for every table with a schema, ("value", path, field) for
    every field of it (present or not), ("drop", path, field) for present required ones."""
    out = [("table", path, fields)]
    for f in fields:
        p = path + (f.key,)
        out.append(("value", p, f))
        if f.key not in d:
            continue
        v = d[f.key]
        if f.required:
            out.append(("drop", p, f))
        if f.kind == "table" and f.fields is not None and isinstance(v, dict):
            out += targets(v, f.fields, p)
        elif f.kind == "tables" and isinstance(v, list):
            for i, t in enumerate(v):
                sub = _schema_of(f, t)
                if sub is not None:
                    out += targets(t, sub, p + (i,))
        elif f.kind == "named" and isinstance(v, dict):
            cases = dict(f.cases)
            for name, t in v.items():
                sub = cases.get(name, f.fields)
                if sub is not None:
                    out += targets(t, sub, p + (name,))
    return out


def _out_of_bounds(f: Field) -> list:
    vals = []
    step = 1 if f.kind in ("integer", "integers") else 0.5
    if f.lo is not None:
        vals.append(f.lo if f.lo_open else f.lo - step)
    if f.hi is not None:
        vals.append(f.hi if f.hi_open else f.hi + step)
    if f.kind in ("integer", "integers"):
        vals = [int(v) if float(v).is_integer() else v for v in vals]
    return vals


def bad_values(f: Field) -> list:
    """Values ``f`` must reject."""
    k = f.kind
    if k == "number":
        return ["1", True, [1.0], math.nan, math.inf, -math.inf, *_out_of_bounds(f)]
    if k == "integer":
        return [2.5, 8.0, "3", True, math.inf, *_out_of_bounds(f)]
    if k == "bool":
        return [1, 0, "true", "no"]
    if k == "string":
        return [3, True, ["a"]] + ([NOT_A_CHOICE] if f.choices else [])
    if k == "quantity":
        return [True, [1.0], {"a": 1}, math.nan, math.inf, *_out_of_bounds(f)]
    if k == "integers":
        return ["8", 2.5, True, [], [1, "x"], *_out_of_bounds(f)]
    if k == "strings":
        return [3, True, [], [1]]
    if k == "list":
        bad = [3, "x", {"a": 1}]
        if f.item == "string":
            bad.append([3])
        if f.item == "integer":
            bad += [["x"], [1.5]] + [[v] for v in _out_of_bounds(f)]
        if f.choices:
            bad.append([NOT_A_CHOICE])
        return bad
    if k in ("table", "named"):
        return [3, "x", [1]]
    if k == "tables":
        return [3, "x", [1]] + ([[]] if f.min_items else [])
    raise AssertionError(f"no bad values for kind {k}")


def _set(d: dict, path: tuple, v) -> dict:
    d = copy.deepcopy(d)
    cur = d
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = v
    return d


def _drop(d: dict, path: tuple) -> dict:
    d = copy.deepcopy(d)
    cur = d
    for p in path[:-1]:
        cur = cur[p]
    del cur[path[-1]]
    return d


UNKNOWN = st.from_regex(r"[a-z][a-z_]{2,14}", fullmatch=True)


@st.composite
def broken(draw, d: dict, fields: tuple[Field, ...], skip: tuple[str, ...] = (), drops: bool = True):
    """(d with one thing broken, path of the field the error must name); ``skip``: paths
    left alone ("" = the top table: no unknown keys there); ``drops``: also drop required
    keys (not for a file whose ``base`` supplies them)."""
    ts = [t for t in targets(d, fields) if path_text(t[1]) not in skip and (drops or t[0] != "drop")]
    what, path, f = draw(st.sampled_from(ts))
    if what == "table":
        known = {g.key for g in f}
        key = draw(UNKNOWN.filter(lambda k: k not in known))
        b = _set(d, path + (key,), draw(st.sampled_from([1, "x", True, 2.5])))
        return b, shown(b, fields, path + (key,))
    if what == "drop":
        b = _drop(d, path)
        return b, shown(b, fields, path)
    b = _set(d, path, draw(st.sampled_from(bad_values(f))))
    return b, shown(b, fields, path)
