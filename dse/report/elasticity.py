"""Report pieces for step-time elasticities at a study's chosen layout
(:func:`dse.studies.elasticity.at_layout`): the top-knob table, a sentence computed from
it, and the tornado chart (:mod:`dse.report.tornado`) of the design knobs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dse.report.tornado import tornado

#: knobs named in the "which knob matters" sentence, and rows of the table
TOP = 3
TABLE_ROWS = 8
#: |elasticity| below this "does not matter" at this layout
NEGLIGIBLE = 0.01


def ranked(df: pd.DataFrame) -> pd.DataFrame:
    """Design knobs by |elasticity|, largest first."""
    d = df[df["design"]]
    return d.reindex(d["elasticity"].abs().sort_values(ascending=False, kind="stable").index)


def top_table(df: pd.DataFrame, n: int = TABLE_ROWS) -> pd.DataFrame:
    r = ranked(df).head(n)
    return pd.DataFrame({"knob": r["knob"], "kind": r["kind"], "value": r["value"], "unit": r["unit"],
                         "d ln T / d ln knob": r["elasticity"].map(lambda v: f"{v:+.3f}"),
                         "AD (jax.jacfwd)": r["elasticity_ad"].map(lambda v: f"{v:+.3f}"),
                         "finite diff. (±1 %)": r["elasticity_fd"].map(lambda v: f"{v:+.3f}"),
                         "+10 % knob → step": r["elasticity"].map(lambda e: f"{100 * (1.1 ** e - 1):+.1f} %"),
                         "kink": r["kink"].map(lambda k: "yes" if k else "")})


def sentence(df: pd.DataFrame, where: str, named: dict[str, str] | None = None) -> str:
    """Which knob matters at this point, from the elasticities; ``named`` maps a knob to a
    reader's name for knobs the study varies (each quoted even if small)."""
    r = ranked(df)
    big = r[r["elasticity"].abs() >= NEGLIGIBLE].head(TOP)
    if not len(big):
        return f"{where}: no design knob moves the step time by 0.1 % per 10 % (|elasticity| < {NEGLIGIBLE})."
    parts = [f"{k} ({e:+.2f}{', finite difference: kink' if kink else ''})"
             for k, e, kink in zip(big["knob"], big["elasticity"], big["kink"])]
    s = f"{where}: the step time is most sensitive to " + (parts[0] if len(parts) == 1 else
                                                          ", then ".join([parts[0], ", ".join(parts[1:])]))
    e0 = float(big["elasticity"].iloc[0])
    s += f" — 10 % more {big['knob'].iloc[0]} changes the step by {100 * (1.1 ** e0 - 1):+.1f} %"
    if named:
        by = df.set_index("knob")
        q = [f"{label} {float(by.loc[k, 'elasticity']):+.3f}" for k, label in named.items() if k in by.index]
        small = [label for k, label in named.items() if k in by.index and abs(by.loc[k, "elasticity"]) < NEGLIGIBLE]
        s += "; the knobs this study varies: " + ", ".join(q)
        if small:
            s += f" ({', '.join(small)} below {NEGLIGIBLE}: {'it does' if len(small) == 1 else 'they do'} not matter here)"
    return s + "."


def tornado_png(df: pd.DataFrame, title: str, path: Path) -> Path:
    """Tornado of the design knobs (every knob is in the CSV)."""
    d = df[df["design"]].reset_index(drop=True)
    return tornado(d, title, path, 1e-3, "elasticity d ln(step time) / d ln(knob)",
                   ad_label="forward-mode AD, jax.jacfwd")
