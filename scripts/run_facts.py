"""The calibration set predicted with the run facts the schema has no column for.

Usage::

    .venv/bin/python scripts/run_facts.py [tests/data/calibration_run_facts.csv]

The headline (``dse validate``) predicts from the schema alone: FlashAttention, Megatron
memory accounting and no TP overlap wherever a row is silent.  This script merges, per
source, the documented facts of tests/data/calibration_run_facts.csv (attention kernel,
framework, TP comm overlap -- each with its evidence) into the optional columns
``dse predict`` reads, one fact at a time and all together, and prints the iteration-time
and memory MAPE per source.  It is analysis, clearly separated: no constant is chosen
with it (docs/accuracy.md).
"""

import sys

import pandas as pd

from dse.predict import mape_table, predict_frame, read_csv
from dse.validate import memory_error

CALIBRATION = "data/validation/calibration.csv"
FACTS = ("attention", "framework", "tp_comm_overlap")


def with_facts(df: pd.DataFrame, facts: pd.DataFrame, cols) -> pd.DataFrame:
    f = facts.set_index("source")
    out = df.copy()
    for c in cols:
        out[c] = out["source"].map(f[c])
    return out


def summary(pred: pd.DataFrame) -> pd.Series:
    t = mape_table(pred)["mape"] * 100
    mem = memory_error(pred)
    t["memory"] = mem["mem_err"].mean() * 100 if len(mem) else float("nan")
    return t.round(1)


def main(argv: list[str]) -> None:
    facts = pd.read_csv(argv[0] if argv else "tests/data/calibration_run_facts.csv")
    df = read_csv(CALIBRATION)
    rows = {"schema only (headline)": summary(predict_frame(df, CALIBRATION))}
    for c in FACTS:
        rows[f"+ {c}"] = summary(predict_frame(with_facts(df, facts, [c]), CALIBRATION))
    rows["+ all facts"] = summary(predict_frame(with_facts(df, facts, FACTS), CALIBRATION))
    print(pd.DataFrame(rows).T.to_string())


if __name__ == "__main__":
    main(sys.argv[1:])
