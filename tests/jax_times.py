"""Opt-in pytest plugin: JAX tracing, lowering and XLA compile seconds per test file.

The suite's time on 2 CPU cores is mostly JAX building programs, not running them (one
program per static combination -- model, engine profile -- and per argument dtype: a
``np.float32`` where another test passed a Python float is a second trace).  To see
where it goes::

    .venv/bin/python -m pytest -q -n 2 --dist loadfile -p tests.jax_times tests
    .venv/bin/python -m tests.jax_times          # the table, from results/_jax_times/

Each worker records the durations JAX reports through ``jax.monitoring``
(``/jax/core/compile/jaxpr_trace_duration``, ``.../jaxpr_to_mlir_module_duration``,
``.../backend_compile_duration``) against the test file running, and writes
``results/_jax_times/<worker>.json`` at the end.  Nested jit traces are reported by JAX
once per level, so the trace column can exceed a file's wall time.  Not loaded by
``make test``.
"""

from __future__ import annotations

import collections
import json
import os
import sys
from pathlib import Path

import pytest

OUT = Path("results") / "_jax_times"
EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
          "/jax/core/compile/backend_compile_duration")
_current = {"file": "<outside a test>"}
_seconds: dict = collections.defaultdict(lambda: collections.defaultdict(float))


def _record(event: str, duration: float, **_):
    if event in EVENTS:
        _seconds[_current["file"]][event] += duration


def pytest_configure(config):
    import jax.monitoring
    jax.monitoring.register_event_duration_secs_listener(_record)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _current["file"] = item.location[0]
    yield


def pytest_sessionfinish(session):
    OUT.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    tmp = OUT / f".{worker}.json.tmp"
    tmp.write_text(json.dumps({f: dict(v) for f, v in _seconds.items()}))
    tmp.replace(OUT / f"{worker}.json")


def table(folder: Path = OUT, top: int = 25) -> str:
    """Files by trace + lowering + compile seconds, summed over the workers' files."""
    total: dict = collections.defaultdict(lambda: collections.defaultdict(float))
    for path in sorted(folder.glob("*.json")):
        for f, events in json.loads(path.read_text()).items():
            for e, s in events.items():
                total[f][e] += s
    rows = sorted(total.items(), key=lambda kv: -sum(kv[1].values()))
    lines = [f"{'test file':60s} {'trace_s':>8s} {'lower_s':>8s} {'compile_s':>9s}"]
    for f, ev in rows[:top]:
        lines.append(f"{f:60s} {ev.get(EVENTS[0], 0):8.1f} {ev.get(EVENTS[1], 0):8.1f} {ev.get(EVENTS[2], 0):9.1f}")
    sums = [sum(ev.get(e, 0) for ev in total.values()) for e in EVENTS]
    lines.append(f"{'all files':60s} {sums[0]:8.1f} {sums[1]:8.1f} {sums[2]:9.1f}")
    return "\n".join(lines)


if __name__ == "__main__":
    if not any(OUT.glob("*.json")):
        print(f"error: {OUT}: no recorded times; run pytest with -p tests.jax_times first", file=sys.stderr)
        sys.exit(2)
    print(table())
