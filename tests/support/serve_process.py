"""``mnemoscope serve`` (and other CLI commands) as real child processes, for attach tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

__all__ = ["ROOT", "cli_env", "read_json_document", "reap", "serve_process"]

ROOT = Path(__file__).resolve().parents[2]


def cli_env(tmp_path: Path, token: str | None = None) -> dict[str, str]:
    """An environment for a child CLI: this checkout first, private config and data folders."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMOSCOPE_")}
    env.update({"MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "config"),
                "MNEMOSCOPE_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(ROOT)})
    if token is not None:
        env["MNEMOSCOPE_API_TOKEN"] = token
    return env


def reap(process: subprocess.Popen[str]) -> None:
    """Kill ``process`` if it still runs (a test failed before stopping it), wait for it, and
    close its pipes."""
    if process.poll() is None:
        process.kill()
        process.wait(timeout=30)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


def read_json_document(stream: IO[str], deadline: float) -> dict[str, object]:
    """The first pretty-printed JSON document a child writes (``--json`` output)."""
    text = ""
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        text += line
        if line.rstrip() == "}":
            document: dict[str, object] = json.loads(text)
            return document
    raise AssertionError(f"no JSON document from the child: {text!r}")


@contextmanager
def serve_process(store: Path, tmp_path: Path, token: str, *,
                  extra: Sequence[str] = ("--port", "0", "--refresh", "0"),
                  startup_seconds: float = 120.0
                  ) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Run ``mnemoscope --store STORE serve`` read-only; yield (its URL, the process).

    Stopped with SIGTERM afterwards (killed if it does not exit).
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "--store", str(store), "--no-model", "--json", "serve",
         *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=cli_env(tmp_path, token))
    try:
        assert process.stdout is not None
        started = read_json_document(process.stdout, time.monotonic() + startup_seconds)
        yield str(started["url"]), process
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
    finally:
        reap(process)
