"""Helpers to build workspaces from dicts of file contents."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from engine.clock import DeterministicClock
from engine.tasks.workspace import Workspace

WriteCards = Callable[[Mapping[str, str]], Workspace]


def write_files(root: Path, files: Mapping[str, str]) -> None:
    """Write ``files`` (relative path → text) under ``root``."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def card(card_id: str, body: str = "", **fields: str) -> str:
    """A card with front matter ``id`` plus ``fields`` and ``body``."""
    lines = ["---", f"id: {card_id}", *(f"{key}: {value}" for key, value in fields.items()),
             "---"]
    return "\n".join(lines) + "\n" + body


@pytest.fixture
def make_workspace(tmp_path: Path) -> WriteCards:
    """Build and load a workspace from a mapping of files."""

    def build(files: Mapping[str, str]) -> Workspace:
        root = tmp_path / "ws"
        root.mkdir(exist_ok=True)
        write_files(root, files)
        return Workspace.open(root, clock=DeterministicClock(1_700_000_000_000.0))

    return build
