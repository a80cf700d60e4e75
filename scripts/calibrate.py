"""Scan the global per-generation efficiency constants against the calibration set.

Usage::

    .venv/bin/python scripts/calibrate.py GEN FIELD=v1,v2,... [FIELD=...] [--precision P]

e.g. ``scripts/calibrate.py hopper gemm=0.65,0.68,0.71 attn=0.45,0.5,0.55 gemm_fp8=0.6,0.63``.
``--facts FILE COL[,COL...]`` merges documented per-source run facts first (the separated
analysis of scripts/run_facts.py; never used for the constants in dse/spec/efficiency.py).
Prints, for every combination, the MAPE over the calibration rows of that GPU generation
(and precision, if given) of ``dse.spec.efficiency.GENERATIONS[GEN]`` with those fields
set.  This is how the constants in dse/spec/efficiency.py were chosen: one global value
per generation and precision, never per row or source; docs/accuracy.md quotes the scans.
"""

import dataclasses
import itertools
import sys

import dse.spec.efficiency as eff
import dse.spec.hardware as hwmod
from dse.predict import predict_frame, read_csv

GEN_OF = {"a100": "ampere", "h100": "hopper", "h200": "hopper", "b200": "blackwell", "gb200": "blackwell"}


def main(argv: list[str]) -> None:
    prec = None
    if "--precision" in argv:
        i = argv.index("--precision")
        prec = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    facts = None
    if "--facts" in argv:
        i = argv.index("--facts")
        if len(argv) < i + 3:
            sys.exit("usage: calibrate.py GEN FIELD=v1,v2 ... --facts FILE COL[,COL...]")
        facts, cols = argv[i + 1], argv[i + 2].split(",")
        argv = argv[:i] + argv[i + 3:]
    gen, *specs = argv
    grid = {}
    for spec in specs:
        field, _, vals = spec.partition("=")
        grid[field] = [float(v) for v in vals.split(",")]
    df = read_csv("data/validation/calibration.csv")
    df = df[df["gpu"].str.split("-").str[0].map(GEN_OF) == gen]
    if prec:
        df = df[df["precision"] == prec]
    if facts:
        import pandas as pd
        from run_facts import with_facts      # scripts/ is sys.path[0] when run as a script
        df = with_facts(df, pd.read_csv(facts), cols)
    base = eff.GENERATIONS[gen]
    for combo in itertools.product(*grid.values()):
        eff.GENERATIONS[gen] = dataclasses.replace(base, **dict(zip(grid, combo)))
        hwmod._CACHE = None
        p = predict_frame(df, "calibration.csv")
        e = p["predicted_iter_time_s"] / p["measured_iter_time_s"] - 1
        by = e.abs().groupby(p["source"]).mean().round(3).to_dict()
        label = " ".join(f"{k}={v:.3f}" for k, v in zip(grid, combo))
        print(f"{gen} {label}: MAPE {e.abs().mean():.3%} mean err {e.mean():+.3%} by source {by}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
