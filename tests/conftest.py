"""Shared fixtures: a throwaway local PostgreSQL server for ``@pytest.mark.postgres``.

The server runs as an unprivileged user when the tests run as root (postgres refuses
root), listens on a free port on 127.0.0.1 with trust auth, keeps its data and socket
in a fresh /tmp dir, and is stopped and deleted at the end of the session.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from dse.jaxconfig import configure, xla_flags_with   # imports no JAX

# The suite compiles hundreds of small XLA programs and runs each a few times, so LLVM's
# optimisation of the generated CPU code costs more than it saves: compile it at -O0
# without the expensive passes (XLA debug options; same HLO, same IEEE arithmetic, as
# XLA's CPU backend does not enable fast-math by default).  Set before JAX starts its
# backend; inherited by the CLI subprocesses the tests start.  A user's own XLA_FLAGS win.
# The CPU backend's older loop emitters (``--xla_cpu_use_fusion_emitters=false``) compile
# the cost programs in about 0.6x the time of the default fusion emitters, with
# bit-identical results on the streamed sweep (measured: the sharded-sweep test's two
# programs 6.5 + 5.3 s -> 3.6 + 3.5 s, same top / front / step times to the last bit).
# The CLI keeps the default emitters: their code runs the large sweeps faster (`dse bench
# --points 4194304`, same machine: streamed sweep 2.28 M vs 1.99 M points/s, serving
# search 1.10 M vs 0.79 M points/s with the loop emitters).
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = xla_flags_with("--xla_backend_optimization_level=0",
                                             "--xla_llvm_disable_expensive_passes=true",
                                             "--xla_cpu_use_fusion_emitters=false")

configure()      # the CLI's JAX settings (compile cache) for in-process tests

# outputs may go only inside results/ (dse.report.atomic); the tests write theirs in
# pytest's temporary folders too (inherited by the CLI subprocesses the tests start)
os.environ.setdefault("DSE_OUTPUT_ROOTS", tempfile.gettempdir())


def _pg_bin() -> Path | None:
    """The newest ``/usr/lib/postgresql/<ver>/bin`` holding initdb and pg_ctl."""
    dirs = [Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")
            if (Path(p).parent / "pg_ctl").exists()]
    return max(dirs, key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0,
               default=None)


@pytest.fixture(scope="session")
def postgres_url():
    """``postgresql+psycopg2://dse@127.0.0.1:<port>/dse_test`` of a fresh local server."""
    pytest.importorskip("psycopg2", reason="psycopg2 not installed (pip install '.[test]')")
    bin_dir = _pg_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries not found; run .ci/install-postgres.sh")
    run_as: list[str] = []
    base = Path(tempfile.mkdtemp(prefix="dse-pg-"))
    if os.geteuid() == 0:
        user = pwd.getpwnam("nobody")
        os.chown(base, user.pw_uid, user.pw_gid)
        run_as = ["runuser", "-u", "nobody", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = base / "data"

    def pg(*args: str) -> None:
        r = subprocess.run([*run_as, *args], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            log = base / "log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            pytest.fail(f"{' '.join(args)} failed:\n{r.stdout}{r.stderr}{tail}")

    try:
        pg(str(bin_dir / "initdb"), "-D", str(data), "-U", "dse", "-A", "trust", "-E", "UTF8",
           "--no-sync")
        pg(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w", "-t", "30",
           "-o", f"-h 127.0.0.1 -p {port} -k {base} -c fsync=off", "start")
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=port, user="dse", dbname="postgres")
        conn.autocommit = True
        conn.cursor().execute("CREATE DATABASE dse_test")
        conn.close()
        yield f"postgresql+psycopg2://dse@127.0.0.1:{port}/dse_test"
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run([*run_as, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate",
                            "-w", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)
