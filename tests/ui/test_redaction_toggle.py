"""Redaction mode (issue 9): no planted secret in any widget, clipboard copy or export."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from engine.memory_engine import MemoryEngine
from engine.records import NewMemory
from engine.store import StoreSpec
from tests.support.fakes import HashingEmbedder
from tests.ui.conftest import open_store, run
from tests.ui.redaction_scan import leaks
from ui.main_window import MainWindow

SECRETS = ["sk-proj-AbCdEf1234567890GhIjKlMn", "AKIAIOSFODNN7EXAMPLE",
           "ghp_1234567890abcdefghijABCDEFGHIJ123456", "dana.secret@example.com"]


def plant(path: Path) -> list[str]:
    """A store whose every record holds one secret; returns the record ids."""
    engine = MemoryEngine.open(StoreSpec(str(path)), embedder=HashingEmbedder())
    try:
        texts = [f"The deploy bot uses the key {SECRETS[0]} for staging",
                 f"AWS access key for backups is {SECRETS[1]}",
                 f"CI token {SECRETS[2]} expires in March",
                 f"Send the weekly report to {SECRETS[3]} on Fridays"]
        return [engine.add(NewMemory(t, agent_id="ops")).id for t in texts]
    finally:
        engine.close()


def test_no_secret_in_any_widget_clipboard_or_export(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    ids = plant(tmp_path / "store")
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    window.records.go_to_record(ids[0])
    qtbot.waitUntil(lambda: window.records.detail.record is not None)
    window.fate.show_fate(ids[1])
    qtbot.waitUntil(lambda: window.fate.fate is not None)
    # Off: the scan does see the secrets (the check below could fail).
    assert {s for s, _ in leaks(window, SECRETS)} >= {SECRETS[0], SECRETS[1]}

    window.redaction_action.trigger()  # the toolbar / Ctrl+Shift+R action
    assert window.redaction.enabled and window.redaction_label.text() == "redaction: on"
    qtbot.waitUntil(lambda: not leaks(window, SECRETS), timeout=5000)
    for name in ("fate", "records"):  # every registered view, shown in turn
        window.nav.setCurrentRow(list(window.views).index(name))
        assert not leaks(window, SECRETS)

    table = window.records.table
    table.setFocus()
    table.setCurrentIndex(window.records.model.index(window.records.model.row_of(ids[0]) or 0,
                                                     0))
    qtbot.keySequence(table, QKeySequence.StandardKey.Copy)
    copied = QApplication.clipboard().text()
    assert "<REDACT:" in copied and not any(s in copied for s in SECRETS)
    assert window.redaction.copy(f"x {SECRETS[2]}") == QApplication.clipboard().text()
    assert SECRETS[2] not in QApplication.clipboard().text()

    target = tmp_path / "out.jsonl"
    assert run(qtbot, window.run_export(target, redact=False)) == 4  # mode wins over the box
    exported = target.read_text(encoding="utf-8")
    assert not any(s in exported for s in SECRETS)

    window.redaction_action.trigger()
    assert not window.redaction.is_enabled()
    qtbot.waitUntil(lambda: bool(leaks(window, SECRETS)), timeout=5000)


def test_scan_view_lists_jumps_and_redacts_in_place_undoably(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    ids = plant(tmp_path / "store")
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    view = window.scan
    qtbot.wait(200)
    assert view.hits == []  # hidden: no scan of the whole store on open
    window.nav.setCurrentRow(list(window.views).index("secrets"))  # shown: scanned
    qtbot.waitUntil(lambda: len(view.hits) == 4)
    assert {h.id for h in view.hits} == set(ids)
    previews = [h.preview for h in view.hits]  # redacted by the engine, even with mode off
    assert not any(s in p for s in SECRETS for p in previews)
    row = next(i for i in range(view.table.topLevelItemCount())
               if (item := view.table.topLevelItem(i)) is not None
               and item.data(0, Qt.ItemDataRole.UserRole) == ids[2])
    target = view.table.topLevelItem(row)
    assert target is not None
    # polish: the memory by its redacted text, its id only on hover; what it holds in words
    hit = next(h for h in view.hits if h.id == ids[2])
    assert target.text(0) == hit.preview and ids[2] not in target.text(0)
    assert ids[2] in target.toolTip(0)
    assert not any(code in target.text(2) for code in hit.kinds)
    assert all(ids[0] not in view.table.topLevelItem(i).text(c)  # type: ignore[union-attr]
               for i in range(view.table.topLevelItemCount()) for c in range(4))
    target.setSelected(True)
    view.open_button.click()
    assert window.stack.currentWidget() is window.records
    qtbot.waitUntil(lambda: window.records.detail.record is not None
                    and window.records.detail.record.id == ids[2])
    assert run(qtbot, view.redact_selected()) == 1
    session = window.session
    assert session is not None
    redacted = session.engine.get(ids[2])
    assert redacted.redacted and SECRETS[2] not in redacted.content
    qtbot.wait(200)
    assert len(view.hits) == 4  # hidden (the records view is shown): not rescanned yet
    window.nav.setCurrentRow(list(window.views).index("secrets"))
    qtbot.waitUntil(lambda: len(view.hits) == 3)  # rescanned when shown after the write
    window.undo_action.trigger()
    qtbot.waitUntil(lambda: session.pending() == 0 and len(view.hits) == 4)
    assert SECRETS[2] in session.engine.get(ids[2]).content
    # the record context menu is offered here too, on the text as the scan shows it (masked)
    first = view.table.topLevelItem(0)
    assert first is not None
    view.table.setCurrentItem(first)
    ref = view.current_record()
    assert ref is not None and ref.text == next(h.preview for h in view.hits if h.id == ref.id)
    menu = window.links.menu(view.table)
    assert menu is not None and "Show fate" in [a.text() for a in menu.actions()]


def test_task_graph_is_masked_too(qtbot: QtBot, tmp_path: Path,
                                  make_window: Callable[..., MainWindow]) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "SEC-1.md").write_text(
        f"---\nid: SEC-1\ntitle: {SECRETS[2]} rotation\nstatus: todo\npriority: high\n---\n"
        f"# Rotate the CI token\n\nThe old key was {SECRETS[0]}.\n", encoding="utf-8")
    (root / "SEC-2.md").write_text(
        f"---\nid: SEC-2\ntitle: Mail {SECRETS[3]}\nstatus: todo\npriority: low\n"
        f"depends_on: [SEC-1]\n---\n# Tell ops\n", encoding="utf-8")
    window = make_window()
    view = window.tasks_view
    window.nav.setCurrentRow(list(window.views).index("tasks"))
    assert run(qtbot, view.open_workspace(root)) is not None
    with qtbot.waitSignal(view.scene_shown, timeout=10_000):
        view.select("SEC-1")
    # node labels are elided: even the start of a token is a leak
    fragments = [*SECRETS, SECRETS[2][:12]]
    found = {s for s, _ in leaks(window, fragments)}
    assert {SECRETS[2], SECRETS[3], SECRETS[2][:12]} <= found  # off: shown (can fail)
    window.redaction_action.trigger()
    assert leaks(window, fragments) == []  # labels, tooltips, card, lists: all masked
    assert "<REDACT:" in view.card_label.text()
    window.redaction_action.trigger()
    assert {s for s, _ in leaks(window, fragments)} == found


def test_records_filter_matches_only_the_masked_text_while_redaction_is_on(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    """The exit policy's rule in the desktop app: typing part of a secret into the Records
    filter finds nothing while redaction is on (the table would otherwise confirm the secret
    by showing a masked row), and finds the record again once it is off."""
    plant(tmp_path / "store")
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    model = window.records.model
    probe = "AKIAIOSFODNN"  # a prefix of SECRETS[1]: what someone probing would type

    def filtered(text: str) -> None:
        with qtbot.waitSignal(model.reloaded, timeout=10_000):
            window.records.filters.text.setText(text)

    filtered(probe)
    assert model.total == 1  # off: the stored text matches (the check below could fail)
    with qtbot.waitSignal(model.reloaded, timeout=10_000):
        window.redaction_action.trigger()  # a filtered table is queried again
    assert model.total == 0
    filtered("AWS access key")  # the unmasked words of that record still find it
    assert model.total == 1
    filtered("<REDACT:")  # and what the table shows matches: the placeholders of all four
    assert model.total == 4
    filtered(probe)
    assert model.total == 0
    with qtbot.waitSignal(model.reloaded, timeout=10_000):
        window.redaction_action.trigger()
    assert model.total == 1


def test_picking_a_record_by_its_words_matches_only_the_masked_text_while_redaction_is_on(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    """Fate's (and the pipeline stepper's) "type words of a stored memory" search follows the
    same rule as the Records filter."""
    plant(tmp_path / "store")
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    finder = window.fate.finder
    stepper_finder = window.observe.pipeline.record_finder
    probe = "AKIAIOSFODNN"
    assert len(run(qtbot, finder.search(probe))) == 1  # off: found (the check below can fail)
    assert len(run(qtbot, stepper_finder.search(probe))) == 1
    window.redaction_action.trigger()
    assert run(qtbot, finder.search(probe)) == []
    assert run(qtbot, stepper_finder.search(probe)) == []
    assert len(run(qtbot, finder.search("AWS access key"))) == 1
    assert len(run(qtbot, stepper_finder.search("backups AWS"))) == 1
