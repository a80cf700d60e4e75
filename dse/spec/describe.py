"""What ``dse list`` prints, rendered from the input schemas' metadata (one source for
the validator, the listings and the help; :mod:`dse.spec.schema`).

* ``dse list models|hardware|knobs|studies``: the catalogs and study files; column
  headers and units, and each knob's hardware-file key, doc and bounds, come from the
  schemas.
* ``dse list <what> --fields`` (and ``dse list topology`` / ``faults``): every key of
  that file kind -- type, unit, bounds, default, doc -- as the validator checks it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from dse.errors import InputError
from dse.spec.schema import Field, describe

LIST_WHAT = ("models", "hardware", "knobs", "studies", "topology", "faults")
FIELD_HEAD = ("key", "type", "unit", "bounds", "default", "doc")


def schemas(what: str) -> list[tuple[str, tuple[Field, ...]]]:
    """(title, fields) of every file kind ``dse list <what> --fields`` describes."""
    if what == "models":
        from dse.spec.model import HF_FIELDS, MODEL_FIELDS
        return [("model table (catalog/models.toml, file.toml[:table])", MODEL_FIELDS),
                ("Hugging Face config.json (keys read; others ignored)", HF_FIELDS)]
    if what in ("hardware", "knobs"):
        from dse.spec.hardware import HARDWARE_FIELDS
        return [("hardware table (catalog/hardware.toml, file.toml[:table]; base = <catalog name> "
                 "starts from that entry)", HARDWARE_FIELDS)]
    if what == "studies":
        from dse.spec.study import STUDY_SCHEMAS
        return [(f'study file, kind = "{k}"', fs) for k, fs in STUDY_SCHEMAS.items()]
    from dse.spec.network_schema import FAULTS_FIELDS, TOPOLOGY_FIELDS
    if what == "topology":
        return [("topology file (studies/topologies/*.toml)", TOPOLOGY_FIELDS)]
    return [("fault file ([[fault]] tables; a study scenario's fault = [...])", FAULTS_FIELDS)]


def field_table(what: str) -> tuple[tuple[str, ...], list[tuple]]:
    """(head, rows) of ``dse list <what> --fields``: one block per file kind."""
    rows: list[tuple] = []
    for title, fields in schemas(what):
        if rows:
            rows.append(("",) * len(FIELD_HEAD))
        rows.append((f"# {title}",) + ("",) * (len(FIELD_HEAD) - 1))
        rows += describe(fields)
    return FIELD_HEAD, rows


def _hardware_field(attr: str) -> Field | None:
    from dse.spec.hardware import HARDWARE_FIELDS
    return next((f for f in HARDWARE_FIELDS if f.attr == attr), None)


def catalog_table(what: str, study_dir: str = "studies") -> tuple[tuple[str, ...], list[tuple]]:
    """(head, rows) of ``dse list models|hardware|knobs|studies``."""
    if what == "models":
        from dse.spec.model import catalog
        return (("model", "params", "description"),
                [(n, f"{m.num_params() / 1e9:.1f}B", m.description) for n, m in catalog().items()])
    if what == "hardware":
        from dse.spec.hardware import catalog
        hbm = _hardware_field("hbm_bytes")
        return (("hardware", f"{hbm.key} ({hbm.unit})", "generation", "description"),
                [(n, f"{float(h.hbm_bytes) / hbm.scale:.0f}", h.generation, h.description)
                 for n, h in catalog().items()])
    if what == "knobs":
        from dse.spec.variants import KNOBS, _units_text
        rows = []
        for k, (attr, units) in KNOBS.items():
            f = _hardware_field(attr)
            rows.append((k, f.key if f else attr, f"<k>x or {_units_text(units)}", f.doc if f else ""))
        t = _hardware_field("throttle")
        rows.append(("throttle", t.key, f"a number with `{t.bounds_text()}`", t.doc))
        return ("knob", "hardware-file key", "values (--vary KNOB=v1,v2,...)", "what it is"), rows
    from dse.io import load_toml
    d = Path(study_dir)
    if not d.is_dir():
        raise InputError("--dir", "dir", f"must be a directory of study files (<name>.toml), "
                         f"but got {study_dir!r}")
    rows = []
    for f in sorted(d.glob("*.toml")):
        try:
            t = load_toml(f)
            rows.append((f.stem, str(t.get("kind", "?")), str(t.get("description", ""))))
        except InputError as e:
            rows.append((f.stem, "?", f"unreadable: {e}"))
    return ("study", "kind", "description"), rows


def listing(what: str, fields: bool = False, study_dir: str = "studies") -> tuple[tuple, list]:
    """(head, rows) of ``dse list <what> [--fields]``."""
    if fields or what in ("topology", "faults"):
        return field_table(what)
    return catalog_table(what, study_dir)


def help_text() -> str:
    """The ``dse list -h`` description: every file kind and its top-level keys, from the
    schemas."""
    from dse.spec.study import STUDY_SCHEMAS
    parts = []
    for what in ("models", "hardware", "topology", "faults"):
        for title, fields in schemas(what):
            parts.append(f"{title.split(' (')[0]}: {', '.join(f.key for f in fields)}")
    kinds = "; ".join(f"{k}: {', '.join(f.key for f in fs[3:])}" for k, fs in STUDY_SCHEMAS.items())
    parts.append(f"study file: name, kind, description, then per kind -- {kinds}")
    head = ("Lists the catalogs and study files, or with --fields every key of a file kind "
            "(type, unit, bounds, default, doc) as it is validated. Keys by file kind:")
    return "\n".join([textwrap.fill(head, 88)] + [textwrap.fill(p, 88, initial_indent="  ",
                                                                 subsequent_indent="    ") for p in parts])


def format_table(head: tuple, rows: list) -> str:
    """Columns padded to their widest cell; the last column is left ragged; a row whose
    first cell starts with ``# `` is a block title, printed alone."""
    body = [r for r in [head, *rows] if not str(r[0]).startswith("# ")]
    widths = [max(len(str(r[i])) for r in body) for i in range(len(head) - 1)]
    return "\n".join(str(r[0]) if str(r[0]).startswith("# ") else
                     ("  ".join(str(c).ljust(w) for c, w in zip(r, widths)) + "  " + str(r[-1])).rstrip()
                     for r in [head, *rows])
