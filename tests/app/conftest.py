"""Shared fixtures for the CLI tests: the real argument parser, in-process, on a fresh store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from app.cli import run_cli

Runner = Callable[..., tuple[int, str, str]]
"""``run(*argv) -> (exit code, stdout, stderr)`` against the test's own store."""


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Runner:
    """Run ``mnemoscope --store <tmp store> --no-model ARGV…`` with a private config dir."""
    env = {"MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "config"),
           "MNEMOSCOPE_DATA_DIR": str(tmp_path / "data")}
    store = str(tmp_path / "store")

    def run(*argv: str) -> tuple[int, str, str]:
        code = run_cli(["--store", store, "--no-model", *argv], env)
        out, err = capsys.readouterr()
        return code, out, err

    return run
