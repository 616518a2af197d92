"""Opening stores: a foreign Chroma collection and a store locked by another process."""

from __future__ import annotations

import subprocess
import sys
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from pytestqt.qtbot import QtBot

from engine.records import NewMemory
from engine.store import CollectionInfo, StoreSpec, list_collections
from tests.ui.bigstore import build_store
from tests.ui.conftest import open_store, run
from ui.main_window import MainWindow
from ui.shared.dialogs import CollectionDialog

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")


@pytest.fixture
def foreign_dir(tmp_path: Path) -> Path:
    """A Chroma directory with a collection written by "another tool" (no schema_version)."""
    import chromadb
    from chromadb.config import Settings

    path = tmp_path / "other-tool"
    client = chromadb.PersistentClient(path=str(path),
                                       settings=Settings(anonymized_telemetry=False))
    collection = client.create_collection("notes", embedding_function=None)
    vectors = np.random.default_rng(1).standard_normal((3, 384)).astype(np.float32)
    collection.add(ids=["n1", "n2", "n3"],
                   documents=["buy milk", "call the plumber on Monday", "the wifi is slow"],
                   metadatas=[{"author": "kim", "priority": 2}, {"author": "lee"}, {"x": True}],
                   embeddings=vectors)
    return path


def test_foreign_collection_opens_read_only_with_its_documents(
        qtbot: QtBot, make_window: Callable[..., MainWindow], foreign_dir: Path) -> None:
    found = list_collections_spec(foreign_dir)
    dialog = CollectionDialog(str(foreign_dir), found)
    assert dialog.chosen() == "notes" and "other tool" in dialog.list.item(0).text()
    window = make_window()
    open_store(qtbot, window, foreign_dir, read_only=True, collection="notes")
    model = window.records.model
    assert model.total == 3
    contents = {model.record_at(r).content for r in range(3)}  # type: ignore[union-attr]
    assert contents == {"buy milk", "call the plumber on Monday", "the wifi is slow"}
    assert window.banner.isVisible()
    assert "Plain Chroma collection 'notes' — read-only" in window.banner_label.text()
    assert "read-only" in window.store_label.text()
    assert not window.records.add_action.isEnabled()
    assert not window.import_action.isEnabled()
    window.records.table.selectRow(0)
    qtbot.waitUntil(lambda: window.records.detail.record is not None, timeout=30_000)
    assert not window.records.detail.save_button.isEnabled()
    assert "author" in window.records.detail.fields_view.toPlainText()


def list_collections_spec(path: Path) -> list[CollectionInfo]:
    return list_collections(StoreSpec(str(path), read_only=True))


@pytest.fixture
def locked_store(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A store held by a second process (its lock), yielding (path, pid)."""
    path = tmp_path / "locked"
    build_store(path, 50)
    code = ("import sys\nfrom engine.store import MemoryStore, StoreSpec\n"
            "store = MemoryStore.open(StoreSpec(sys.argv[1]))\n"
            "print('locked', flush=True)\nsys.stdin.read()\nstore.close()\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(path)], cwd=ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield path, holder.pid
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.wait(timeout=30)
        holder.stdout.close()


def test_locked_store_opens_read_only_with_a_banner_naming_the_holder(
        qtbot: QtBot, make_window: Callable[..., MainWindow],
        locked_store: tuple[Path, int]) -> None:
    path, pid = locked_store
    window = make_window()
    open_store(qtbot, window, path)
    session = window.session
    assert session is not None and session.read_only
    assert window.records.model.total == 50
    assert window.banner.isVisible()
    assert window.banner_label.text().startswith(f"Opened read-only: PID {pid} (on ")
    # it is read-only already: the engine's advice to "open this store read-only" would confuse
    assert "open this store read-only" not in window.banner_label.text()
    assert not window.records.add_action.isEnabled()
    assert not window.demo_action.isEnabled()
    assert run(qtbot, window.run_import(path / "nothing.jsonl")) is None


def test_a_closed_store_is_freed(qtbot: QtBot, make_window: Callable[..., MainWindow],
                                 tmp_path: Path) -> None:
    """The window freezes long-lived objects out of the cyclic GC (gc.freeze), so a closed
    store must not sit in a reference cycle: it would never be freed (~200 MB per reopen of a
    100K store, measured before the fix)."""
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    session = window.session
    assert session is not None
    run(qtbot, session.runner.run(session.engine.ingest, NewMemory("a memory to free")))
    engine_ref, session_ref = weakref.ref(session.engine), weakref.ref(session)
    del session
    run(qtbot, window.close_store())
    qtbot.waitUntil(lambda: engine_ref() is None and session_ref() is None, timeout=5000)
