"""Issue 10 attach: the app follows an agent through a real ``mnemoscope serve`` process.

The store is written by *other* processes (the ``ingest`` CLI) while ``serve`` follows it
read-only and the window is attached to ``serve``: new events must reach the timeline, with no
gap across a restart of ``serve``. Wrong tokens and unreachable servers are said in the dialog.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import shiboken6
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from engine.records import NewMemory
from engine.store import StoreSpec
from tests.support.chroma_server import free_port
from tests.support.serve_process import cli_env, serve_process
from tests.ui.conftest import open_fresh, run
from ui.main_window import MainWindow
from ui.shared.dialogs import AttachDialog

pytestmark = [pytest.mark.slow,
              pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")]

TOKEN = "attach-test-token-0123456789"


def _seed(store: Path) -> None:
    """A memory, an interaction with Mia and the summary the agent's layer service wrote."""
    engine = open_fresh(StoreSpec(str(store)))
    try:
        engine.add(NewMemory("Jordan likes the coffee machine started at 6:45",
                             agent_id="home-robot"))
        engine.layers.record_interaction("home-robot", "Mia", "Mia hid behind the sofa",
                                         sentiment=-0.6)
        engine.layers.flush()
    finally:
        engine.close()


def _ingest(store: Path, tmp_path: Path, name: str, lines: Sequence[dict[str, object]]
            ) -> subprocess.Popen[str]:
    """The agent, in another process, ingesting into its store (it takes the store's lock and
    runs the layer service; :mod:`tests.support.agent_process`)."""
    source = tmp_path / f"{name}.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.agent_process", str(store), str(source)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=cli_env(tmp_path / name))


def _finished(process: subprocess.Popen[str]) -> None:
    out, err = process.communicate(timeout=180)
    assert process.returncode == 0, f"ingest failed: {out}\n{err}"


def _attach(qtbot: QtBot, window: MainWindow, url: str, token: str) -> AttachDialog:
    """File → Attach through the dialog, as a person would."""
    dialog = window.open_attach_dialog()
    assert dialog is not None
    dialog.url.setEditText(url)
    dialog.token.setText(token)
    qtbot.mouseClick(dialog.attach_button, Qt.MouseButton.LeftButton)  # type: ignore[no-untyped-call]
    return dialog


def _contents(window: MainWindow) -> set[str]:
    model = window.records.model
    return {record.content for row in range(model.total)
            if (record := model.record_at(row)) is not None}


def _timeline_records(window: MainWindow, kind: str = "memory:record:created") -> set[str]:
    return {e.record_id for e in window.observe.timeline.data.events
            if e.kind == kind and e.record_id}


def test_attach_follows_another_process_across_a_serve_restart(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    store = tmp_path / "store"
    _seed(store)
    port = free_port()
    window = make_window()
    with serve_process(store, tmp_path, TOKEN,
                       extra=("--port", str(port), "--refresh", "0")) as (url, _serve):
        dialog = _attach(qtbot, window, url, TOKEN)
        qtbot.waitUntil(lambda: window.attached_session is not None, timeout=30_000)
        assert not shiboken6.isValid(dialog)  # closed and deleted once attached
        assert window.banner.isVisible()
        assert window.banner_label.text().startswith(f"Attached to {url} (read-only)")
        assert window.store_label.text() == f"attached: {url} · read-only"
        # Read-only: no editing action, the engine views greyed out, the records shown.
        assert not window.records.add_action.isEnabled()
        assert not window.import_action.isEnabled() and not window.export_action.isEnabled()
        for number, name in enumerate(window.views):
            enabled = bool(window.nav.item(number).flags() & Qt.ItemFlag.ItemIsEnabled)
            assert enabled == (name not in window.controller.views.store_only), name
        qtbot.waitUntil(lambda: window.records.model.settled and window.records.model.total == 3)
        assert "Jordan likes the coffee machine started at 6:45" in _contents(window)
        timeline = window.observe.timeline
        qtbot.waitUntil(lambda: len(_timeline_records(window)) == 2, timeout=15_000)
        assert any(e.kind == "memory:social:summary" for e in timeline.data.events)

        # Another process ingests while we watch: its events reach the timeline live.
        writer = _ingest(store, tmp_path, "first", [
            {"content": "Mia asked the robot to find her hair clip under the bed",
             "agent_id": "home-robot",
             "metadata": {"social": {"otherAgentId": "Mia", "sentiment": 0.4}}},
            {"content": "The fern stands on the living-room windowsill",
             "agent_id": "home-robot"}])
        _finished(writer)
        qtbot.waitUntil(lambda: {"Mia asked the robot to find her hair clip under the bed",
                                 "The fern stands on the living-room windowsill"}
                        <= _contents(window), timeout=30_000)
        created = _timeline_records(window)
        assert len(created) == 4  # 2 before, 2 ingested
        qtbot.waitUntil(lambda: window.count_label.text() == "5 records", timeout=15_000)

        # The layers of the agent, through the API: Mia now has two interactions.
        window.nav.setCurrentRow(list(window.views).index("layers"))
        social = window.layers.social
        qtbot.waitUntil(lambda: any(s.counterpart == "Mia" and s.interactions == 2
                                    for s in social.summaries), timeout=30_000)

    # serve is down: the follower says so and keeps trying; the agent keeps writing.
    qtbot.waitUntil(lambda: "connection lost" in window.banner_label.text(), timeout=30_000)
    assert window.banner_label.text().startswith(f"Attached to {url} (read-only)")
    _finished(_ingest(store, tmp_path, "offline", [
        {"content": "Chris parks his bike in the hallway on rainy days",
         "agent_id": "home-robot"}]))
    with serve_process(store, tmp_path, TOKEN, extra=("--port", str(port), "--refresh", "0")):
        # The same URL again: the events written meanwhile arrive, none missing, none twice.
        qtbot.waitUntil(lambda: "Chris parks his bike in the hallway on rainy days"
                        in _contents(window), timeout=60_000)
        qtbot.waitUntil(lambda: "connection lost" not in window.banner_label.text())
        seqs = [e.seq for e in timeline.data.events]
        assert seqs == sorted(seqs) and len(seqs) == len(set(seqs))
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # gap-free
        assert len(_timeline_records(window)) == len(created) + 1
        run(qtbot, window.detach())
    assert window.attached_session is None and not window.banner.isVisible()
    assert all(bool(window.nav.item(i).flags() & Qt.ItemFlag.ItemIsEnabled)
               for i in range(window.nav.count()))
    assert not any(t.name == "mnemoscope-follow" and t.is_alive()
                   for t in threading.enumerate())
    assert window.preferences.recent_attach == (url,)  # remembered, without the token


def test_wrong_token_and_unreachable_server_are_said_in_the_dialog(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    store = tmp_path / "store"
    _seed(store)
    window = make_window()
    with serve_process(store, tmp_path, TOKEN) as (url, _serve):
        dialog = _attach(qtbot, window, url, "not-the-token-0123456789")
        qtbot.waitUntil(lambda: "HTTP 401" in dialog.error.text(), timeout=30_000)
        assert "refused the token" in dialog.error.text()
        assert dialog.isVisible() and dialog.attach_button.isEnabled()
        assert window.attached_session is None
        closed = free_port()
        dialog.url.setEditText(f"http://127.0.0.1:{closed}")
        dialog.token.setText(TOKEN)
        qtbot.mouseClick(dialog.attach_button, Qt.MouseButton.LeftButton)  # type: ignore[no-untyped-call]
        qtbot.waitUntil(lambda: "Could not connect" in dialog.error.text(), timeout=30_000)
        assert f"127.0.0.1:{closed} — connection refused" in dialog.error.text()
        assert "Errno" not in dialog.error.text()
        assert window.attached_session is None
        dialog.url.setEditText("127.0.0.1:8765")
        qtbot.mouseClick(dialog.attach_button, Qt.MouseButton.LeftButton)  # type: ignore[no-untyped-call]
        assert "must start with http://" in dialog.error.text()
        dialog.reject()
