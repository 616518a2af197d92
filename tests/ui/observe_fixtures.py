"""Shared pieces of the observe-view tests (issue 8): a store session without a window."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import qasync
from pytestqt.qtbot import QtBot

from engine.records import NewMemory
from engine.store import StoreSpec
from tests.ui.conftest import open_fresh, run
from ui.shared.session import StoreSession
from ui.shared.tasks import TaskRunner

BASE = "Sam prefers window seats on long flights to Tokyo"
PARAPHRASE = "Sam prefers window seats on long flights to Tokyo always"  # Jaccard 0.90: merge
GRAY = "Sam prefers window seats on long flights with extra legroom"  # 0.58: gray zone
CONTRADICTION = "Sam prefers window seats on short flights to Tokyo"  # long/short: guard


@pytest.fixture
def session(tmp_path: Path, qtbot: QtBot, qloop: qasync.QEventLoop,
            runner: TaskRunner) -> Iterator[StoreSession]:
    """A session on a fresh embedded store holding :data:`BASE` (no model: Jaccard path)."""
    spec = StoreSpec(str(tmp_path / "store"))
    engine = open_fresh(spec)
    engine.ingest(NewMemory(content=BASE))
    made = StoreSession(engine, runner, spec)
    yield made
    run(qtbot, made.drain())
    engine.close()
