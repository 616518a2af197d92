"""GUI test fixtures: a qasync loop that pytest-qt drives, the task runner, windows on temp stores.

The loop is created ``already_running``: pytest-qt's ``qtbot.waitUntil`` / ``waitSignal`` spin
Qt's event loop, which runs the asyncio callbacks, so tests never call ``run_until_complete``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest
import qasync
from PySide6.QtWidgets import QApplication, QMessageBox
from pytestqt.qtbot import QtBot

from app.import_process import run_in_child
from engine import RecordRow, SalienceCut
from engine.memory_engine import MemoryEngine
from engine.records import NewMemory
from engine.redaction import redact_text
from engine.store import StoreSpec, list_collections
from ui.imports.importing import ImportSummary
from ui.main_window import MainWindow, Preferences, WindowServices
from ui.shared.tasks import TaskRunner, pending_tasks, spawn

T = TypeVar("T")
DEMO = Path(__file__).resolve().parents[2] / "assets" / "demo" / "memories.jsonl"


@pytest.fixture
def qloop(qapp: QApplication) -> Iterator[qasync.QEventLoop]:
    """An asyncio loop on Qt's event loop, set as the running loop for the test."""
    loop = qasync.QEventLoop(qapp, already_running=True)
    asyncio.set_event_loop(loop)
    yield loop
    asyncio.events._set_running_loop(None)
    asyncio.set_event_loop(None)


@pytest.fixture
def runner() -> Iterator[TaskRunner]:
    """The task runner, shut down after the test."""
    made = TaskRunner()
    yield made
    made.shutdown()


@pytest.fixture
def every_move() -> Iterator[None]:
    """Let every synthetic mouse move through to pyqtgraph items.

    pyqtgraph drops moves closer than 1/100 s apart (``mouseRateLimit``); a test's moves come
    faster than any hand's, so a drag or hover would depend on the machine's speed.
    """
    import pyqtgraph

    limit = pyqtgraph.getConfigOption("mouseRateLimit")
    pyqtgraph.setConfigOptions(mouseRateLimit=-1)
    yield
    pyqtgraph.setConfigOptions(mouseRateLimit=limit)


_SYLLABLES = ("ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "zu", "da", "fe", "gu",
              "ho", "ji", "ku", "ly", "mo", "ny", "pe")


def distinct_text(number: int, words: int = 9) -> str:
    """A sentence of made-up words sharing almost no tokens with the others (no dedup merges)."""
    import random

    rng = random.Random(number)
    return " ".join(rng.choice(_SYLLABLES) + rng.choice(_SYLLABLES) + rng.choice(_SYLLABLES)
                    for _ in range(words)) + f" {number}"


def write_import_file(path: Path, records: int) -> Path:
    """``records`` JSONL lines of distinct memories (no dedup merges) to import."""
    import json

    path.write_text("".join(
        json.dumps({"content": distinct_text(i), "agent_id": f"agent-{i % 5}",
                    "layer": "episodic", "importance": 0.4}) + "\n"
        for i in range(records)), encoding="utf-8")
    return path


def run(qtbot: QtBot, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
    """Run ``coro`` on the GUI loop and wait (spinning Qt) until it is done."""
    task = spawn(coro)
    qtbot.waitUntil(task.done, timeout=int(timeout * 1000))
    return task.result()


def open_fresh(spec: StoreSpec, *, defer_view: bool = False) -> MemoryEngine:
    """Open like the app does: Chroma's per-process client cache dropped first.

    The window's services pass ``defer_view=True`` (as ``app.wiring.open_engine`` does); a test
    that uses the engine directly gets its view read before this returns.
    """
    from app.wiring import forget_embedded_clients

    if not spec.is_remote:
        forget_embedded_clients()
    return MemoryEngine.open(spec, defer_view=defer_view)


def child_import(spec: StoreSpec, path: Path, agent: str | None,
                 progress: Callable[[int, int], None],
                 cancelled: Callable[[], bool], /, *,
                 keep: SalienceCut | None = None) -> ImportSummary:
    """The app's out-of-process import, without the model."""
    return run_in_child(spec, path, conversation_agent=agent, keep=keep, progress=progress,
                        cancelled=cancelled)


def services(runner: TaskRunner, **changes: Any) -> WindowServices:
    """Window services over real embedded stores, without the model and without saving."""
    saved: list[Preferences] = []
    from app.wiring import attach_remote

    defaults: dict[str, Any] = {
        "runner": runner,
        "attach": attach_remote,
        "open_engine": partial(open_fresh, defer_view=True),
        "list_collections": list_collections,
        "save_preferences": saved.append,
        "redactor": redact_text,
        "demo_memories": DEMO,
        "version": "test",
    }
    defaults.update(changes)
    return WindowServices(**defaults)


@pytest.fixture
def make_window(qtbot: QtBot, qloop: qasync.QEventLoop,
                runner: TaskRunner) -> Iterator[Callable[..., MainWindow]]:
    """Build main windows (closed, with their stores, after the test)."""
    made: list[MainWindow] = []

    def build(**changes: Any) -> MainWindow:
        from app.controller import AppController

        made_services = services(runner, **changes)
        window = MainWindow(made_services, AppController(made_services))
        if "preferences" not in changes:  # else the window restores its saved geometry
            window.resize(1100, 700)
        window.show()
        made.append(window)
        return window

    yield build
    for window in made:  # close the store (releasing its lock) before the window goes
        run(qtbot, window.close_store())
        window.close()
        window.deleteLater()
    # Work a test started and did not wait for finishes here, on this test's loop: left
    # running, it would resume in the next test (on a closed store, without a loop).
    qtbot.waitUntil(lambda: not pending_tasks(), timeout=15_000)


def open_store(qtbot: QtBot, window: MainWindow, path: Path | str, *, timeout: float = 30.0,
               indexed: bool = True, **spec: Any) -> None:
    """Open a store in ``window`` and wait for its first page (and its indexing, by default)."""
    session = run(qtbot, window.open_store(StoreSpec(str(path), **spec)), timeout=timeout)
    assert session is not None, window.banner_label.text()
    if indexed:
        qtbot.waitUntil(lambda: not session.indexing, timeout=int(timeout * 1000))
    qtbot.waitUntil(lambda: window.records.model.settled, timeout=int(timeout * 1000))


def answer_questions(monkeypatch: pytest.MonkeyPatch, answer: str) -> list[str]:
    """Every ``QMessageBox.question`` answered ``answer`` (cancel, discard or save, as the
    unsaved-edit question offers); the list the questions asked are appended to."""
    buttons = {"cancel": QMessageBox.StandardButton.Cancel,
               "discard": QMessageBox.StandardButton.Discard,
               "save": QMessageBox.StandardButton.Save}
    asked: list[str] = []

    def question(_parent: object, _title: str, text: str, *_args: Any) -> Any:
        asked.append(text)
        return buttons[answer]

    monkeypatch.setattr(QMessageBox, "question", question)
    return asked


def store_of(path: Path, *memories: NewMemory) -> Path:
    """A fresh embedded store at ``path`` holding ``memories`` (ingested, then closed)."""
    engine = open_fresh(StoreSpec(str(path)))
    try:
        for memory in memories:
            engine.ingest(memory)
    finally:
        engine.close()
    return path


def type_into_first_record(qtbot: QtBot, window: MainWindow, text: str) -> RecordRow:
    """Select the records table's first row and type ``text`` into its form (unsaved);
    the record selected."""
    view = window.records
    record = view.model.record_at(0)
    assert record is not None
    view.table.selectRow(0)
    qtbot.waitUntil(lambda: view.detail.record is not None)
    view.detail.content.setPlainText(text)
    return record
