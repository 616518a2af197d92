"""A real ``chroma run`` server on 127.0.0.1 and a free port, for store contract tests."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["chroma_process", "chroma_server", "free_port"]


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _chroma_executable() -> str:
    candidate = Path(sys.executable).with_name("chroma")
    if candidate.exists():
        return str(candidate)
    found = shutil.which("chroma")
    if found is None:
        raise RuntimeError("the `chroma` executable (from the chromadb package) is not installed")
    return found


@contextmanager
def chroma_server(path: Path, *, port: int | None = None,
                  startup_seconds: float = 60.0) -> Iterator[str]:
    """Run ``chroma run --path PATH --host 127.0.0.1 --port N``; yield its URL; stop it after."""
    with chroma_process(path, port=port, startup_seconds=startup_seconds) as (url, _process):
        yield url


@contextmanager
def chroma_process(path: Path, *, port: int | None = None, startup_seconds: float = 60.0
                   ) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """:func:`chroma_server` that also yields the process (to stop it with a signal).

    A process left stopped (SIGSTOP) is continued before it is terminated: a stopped
    process does not act on SIGTERM.
    """
    port = port or free_port()
    log = (path.parent / f"chroma-{port}.log").open("wb")
    process = subprocess.Popen(
        [_chroma_executable(), "run", "--path", str(path), "--host", "127.0.0.1",
         "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_seconds
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"chroma run exited with {process.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1.0) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"chroma run did not answer on {url} within {startup_seconds}s")
            time.sleep(0.1)
        yield url, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
