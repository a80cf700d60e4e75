"""What the held-out scoring scripts (``training_oos.py``, ``serving_oos.py``) share: each
``tests/data/published_<name>.csv`` predicted through ``dse predict``'s code path, and the
rows written under ``results/`` through a temporary file."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def predict_files(names, tag: str):
    """``predict_frame`` of ``tests/data/published_<name>.csv`` for each of ``names``, its
    name in column ``tag``; None (after a one-line error) when a file is missing."""
    from dse.predict import predict_frame, read_csv
    frames = []
    for name in names:
        path = ROOT / "tests" / "data" / f"published_{name}.csv"
        if not path.is_file():
            print(f"error: {path}: missing (run from a checkout with tests/data)", file=sys.stderr)
            return None
        p = predict_frame(read_csv(str(path)), str(path))
        p[tag] = name
        frames.append(p)
    return frames


def write_results(df, name: str, what: str) -> None:
    """``df`` to ``results/<name>`` via a temporary file and a rename; prints where."""
    out = ROOT / "results" / name
    out.parent.mkdir(exist_ok=True)
    tmp = out.with_suffix(".csv.tmp")
    df.to_csv(tmp, index=False)
    os.replace(tmp, out)
    print(f"{what}: {out.relative_to(ROOT)}")
