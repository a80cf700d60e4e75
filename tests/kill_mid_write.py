"""The kill -9 test harness shared by the atomic-write tests (tests/test_hostile_inputs.py,
tests/test_hostile_fuzz.py): run a Python child that prints a marker line once it is
half-way through writing, SIGKILL it there, and leave the check of what survived to the
caller."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EARLIER = "the complete earlier result\n"     # what the target holds before the child runs
MARKER = "writing"                            # the child's line: "half-way through now"


def kill_at_marker(child_code: str, cwd: Path | None = None, timeout_s: float = 30.0) -> None:
    """Run ``python -c child_code`` (``PYTHONPATH`` = this repository) in ``cwd``, wait
    until it prints :data:`MARKER` on a line of its own, then kill -9 it and reap it.
    Raises ``AssertionError`` with the tail of the child's stderr if it exits first."""
    p = subprocess.Popen([sys.executable, "-c", child_code], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=cwd,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        for line in p.stdout:
            if line.strip() == MARKER:
                break
        else:
            raise AssertionError(f"never reached the write: {p.stderr.read()[-2000:]}")
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout_s)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout_s)
        p.stdout.close()
        p.stderr.close()
