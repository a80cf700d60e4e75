"""Analytic two-objective toy for the search tests, plus a worker-process launcher.

f1 = x^2 + y and f2 = (x - 2)^2 + 1/y, with x in [0, 4] and y in [0.1, 10] (log).
``DSE_TOY_SLEEP_S`` makes each batch take that long (to interleave or kill workers);
``DSE_TOY_BARRIER=<dir>:<n>`` holds each worker's first batch until n workers got there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from dse.search.runner import Knob

SPACE = {"x": Knob(0.0, 4.0), "y": Knob(0.1, 10.0, log=True)}
SPACE_JSON = json.dumps({"x": {"low": 0.0, "high": 4.0}, "y": {"low": 0.1, "high": 10.0,
                                                             "log": True}})
DIRECTIONS = ["minimize", "minimize"]
REPO = Path(__file__).resolve().parents[2]


def evaluate_batch(points: list[dict[str, float]]) -> list[tuple[float, float]]:
    """The toy objectives for each point (one call per batch)."""
    _barrier()
    time.sleep(float(os.environ.get("DSE_TOY_SLEEP_S", "0")))
    return [(p["x"] ** 2 + p["y"], (p["x"] - 2.0) ** 2 + 1.0 / p["y"]) for p in points]


def _barrier(timeout_s: float = 60.0) -> None:
    spec = os.environ.pop("DSE_TOY_BARRIER", "")  # popped: only the first batch waits
    if spec:
        folder, n = spec.rsplit(":", 1)
        Path(folder, str(os.getpid())).touch()
        deadline = time.monotonic() + timeout_s
        while len(os.listdir(folder)) < int(n) and time.monotonic() < deadline:
            time.sleep(0.05)


def evaluate_batch_infeasible(points: list[dict[str, float]]) -> list:
    """As :func:`evaluate_batch`, but x > 3 is inf, y < 0.3 is nan, x < 0.5 a reason."""
    out = []
    for p, v in zip(points, evaluate_batch(points)):
        if p["x"] > 3.0:
            v = (float("inf"), v[1])
        elif p["y"] < 0.3:
            v = (v[0], float("nan"))
        elif p["x"] < 0.5:
            v = "x < 0.5 is out of bounds for the toy"
        out.append(v)
    return out


def start_worker(storage_url: str, study: str, n_trials: int, batch: int, seed: int,
                 sleep_s: float = 0.0, heartbeat_s: int = 1, barrier: str = ""
                 ) -> subprocess.Popen:
    """Start ``python -m dse.search.runner`` on the toy objective (stdout/stderr piped)."""
    env = {**os.environ, "DSE_TOY_SLEEP_S": str(sleep_s), "DSE_TOY_BARRIER": barrier,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "dse.search.runner", "--storage", storage_url,
           "--study", study, "--objective", "tests.search.toy_objective:evaluate_batch",
           "--space", SPACE_JSON, "--directions", ",".join(DIRECTIONS),
           "--trials", str(n_trials), "--batch", str(batch), "--seed", str(seed),
           "--heartbeat-s", str(heartbeat_s), "--no-progress"]
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
