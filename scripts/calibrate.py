"""Scan the global per-generation efficiency constants against the calibration set.

Usage: .venv/bin/python scripts/calibrate.py GEN FIELD v1 v2 ... [--precision P]
Prints MAPE over the calibration rows of that GPU generation for each value of
``dse.spec.efficiency.GENERATIONS[GEN].FIELD``.  This is how the constants in
dse/spec/efficiency.py were chosen (one global value per generation and precision,
never per row or source); the scan output is quoted in docs/accuracy.md.
"""

import dataclasses
import sys

import pandas as pd

import dse.spec.efficiency as eff
import dse.spec.hardware as hwmod
from dse.predict import predict_frame, read_csv

GEN_OF = {"a100": "ampere", "h100": "hopper", "h200": "hopper", "b200": "blackwell", "gb200": "blackwell"}


def main():
    gen, field, *vals = sys.argv[1:]
    prec = None
    if "--precision" in vals:
        i = vals.index("--precision")
        prec = vals[i + 1]
        vals = vals[:i]
    df = read_csv("../shared/validation/calibration.csv")
    df = df[df["gpu"].str.split("-").str[0].map(GEN_OF) == gen]
    if prec:
        df = df[df["precision"] == prec]
    base = eff.GENERATIONS[gen]
    for v in map(float, vals):
        eff.GENERATIONS[gen] = dataclasses.replace(base, **{field: type(getattr(base, field))(v)})
        hwmod._CACHE = None
        p = predict_frame(df, "calibration.csv")
        e = (p["predicted_iter_time_s"] / p["measured_iter_time_s"] - 1)
        by = e.abs().groupby(p["source"]).mean().round(3).to_dict()
        print(f"{gen}.{field}={v:.3f}: MAPE {e.abs().mean():.3%} mean err {e.mean():+.3%} by source {by}", flush=True)


if __name__ == "__main__":
    main()
