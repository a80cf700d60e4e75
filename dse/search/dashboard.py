"""optuna-dashboard for a study storage: serve in this process, or start in a subprocess.

``python -m dse.search.dashboard --storage URL [--host H] [--port P]`` serves until
interrupted; :func:`start` launches exactly that and returns once it answers HTTP.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from dse.errors import InputError, require
from dse.search.storage import open_storage


def check_address(host: str, port: int) -> None:
    """Raise :class:`InputError` unless ``port`` is a TCP port and ``host`` resolves."""
    require(isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535,
            "--port", "port", f"`1 <= port <= 65535` must hold, but got {port!r}")
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, ValueError) as e:
        raise InputError("--host", "host", f"must be a host name or address that resolves, "
                         f"but got {host!r} ({e})") from None


def serve(storage_url: str, host: str = "127.0.0.1", port: int = 8080) -> None:
    """Serve the dashboard for every study in ``storage_url``; blocks until stopped.

    Raises :class:`InputError` for a bad port or host, or an address it cannot listen on.
    """
    import optuna_dashboard

    check_address(host, port)
    storage = open_storage(storage_url, create=False)
    try:
        optuna_dashboard.run_server(storage, host=host, port=port)
    except OSError as e:
        raise InputError("--host/--port", f"{host}:{port}",
                         f"must be an address this machine can listen on ({e.strerror or e})") from None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def start(storage_url: str, host: str = "127.0.0.1", port: int | None = None,
          timeout_s: float = 20.0) -> tuple[subprocess.Popen, str]:
    """Start :func:`serve` in a subprocess; return it and its URL once it answers 200.

    Stop it with :func:`stop`.  Raises :class:`RuntimeError` (with the server's
    output) if it exits or does not answer within ``timeout_s``.
    """
    port = free_port(host) if port is None else port
    url = f"http://{host}:{port}/dashboard"
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-m", "dse.search.dashboard", "--storage",
                             storage_url, "--host", host, "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=1.0) as r:
                if r.status == 200:
                    log.close()  # the server keeps its own descriptor
                    return proc, url
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.2)
    stop(proc)
    log.seek(0)
    tail = log.read().decode(errors="replace")[-2000:]
    log.close()
    raise RuntimeError(f"dashboard at {url} did not answer within {timeout_s} s:\n{tail}")


def stop(proc: subprocess.Popen, timeout_s: float = 5.0) -> None:
    """Terminate a dashboard started by :func:`start` (kill if it lingers)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    """Entry point: serve until interrupted; bad input prints one line, returns 2."""
    p = argparse.ArgumentParser(prog="python -m dse.search.dashboard")
    p.add_argument("--storage", required=True, help="SQLAlchemy URL of the study storage")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    a = p.parse_args(argv)
    try:
        serve(a.storage, a.host, a.port)
    except InputError as e:
        print(e, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
