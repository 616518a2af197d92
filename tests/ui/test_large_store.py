"""A 100K-record store: first page at once (cached or not), lazy pages to the last row, and
filters that wait for the index while it is built."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtWidgets import QHeaderView
from pytestqt.qtbot import QtBot

from engine.query import RecordQuery, SortKey
from engine.records import Layer
from engine.store import DEFAULT_COLLECTION, view_cache
from tests.ui.bigstore import build_store, view_cache_aside
from tests.ui.conftest import open_store
from ui.main_window import MainWindow
from ui.records.records_model import PAGE_SIZE

COUNT = 100_000


@pytest.fixture(scope="session")
def store_100k(request: pytest.FixtureRequest,
               tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 100K-record store (random unit vectors, no model) with its view cache, built once.

    Building takes minutes (Chroma inserts a few hundred records/s here), so the store is kept
    in pytest's cache directory between sessions; the tests open it read-only (no lock), which
    leaves the view cache current.
    """
    cache = getattr(request.config, "cache", None)
    base = cache.mkdir("mnemoscope-store-100k-v1") if cache is not None \
        else tmp_path_factory.mktemp("store-100k")
    path, marker = base / "store", base / "complete"
    if not marker.exists():
        shutil.rmtree(path, ignore_errors=True)
        seconds = build_store(path, COUNT)
        marker.write_text(f"built in {seconds:.1f} s\n", encoding="utf-8")
    if not view_cache.is_current(path, DEFAULT_COLLECTION, 384):  # e.g. an older cache format
        from engine.store import MemoryStore, StoreSpec

        MemoryStore.open(StoreSpec(str(path))).close()
    return path


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_page_to_the_end_of_a_100k_store(qtbot: QtBot, make_window: Callable[..., MainWindow],
                                         store_100k: Path) -> None:
    window = make_window()
    started = time.perf_counter()
    open_store(qtbot, window, store_100k, read_only=True, timeout=600)
    opened = time.perf_counter() - started
    view, model = window.records, window.records.model
    assert model.total == model.rowCount() == COUNT and not model.preview  # from the cache
    header = view.table.verticalHeader()
    assert header.sectionResizeMode(0) is QHeaderView.ResizeMode.Fixed
    assert view.table.rowHeight(COUNT - 1) == view.table.rowHeight(0)

    view.table.scrollToBottom()
    started = time.perf_counter()
    qtbot.waitUntil(lambda: model.is_loaded(COUNT - 1), timeout=30_000)
    last_page = time.perf_counter() - started
    # Newest first: the last row is the oldest record. Only the pages shown were fetched.
    last = model.record_at(COUNT - 1)
    assert last is not None and last.id == "r000000"
    assert model.record_at(COUNT - PAGE_SIZE) is not None
    assert len(model.loaded_ids()) <= 3 * PAGE_SIZE
    assert not model.is_loaded(COUNT // 2)
    print(f"\n100K store (view cache): opened + first page in {opened:.1f} s, last page in "
          f"{last_page * 1000:.0f} ms, {len(model.loaded_ids())} rows fetched")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_uncached_100k_store_shows_a_first_page_while_it_is_indexed(
        qtbot: QtBot, make_window: Callable[..., MainWindow], store_100k: Path) -> None:
    window = make_window()
    model = window.records.model
    with view_cache_aside(store_100k):
        started = time.perf_counter()
        open_store(qtbot, window, store_100k, read_only=True, indexed=False, timeout=120)
        first_page = time.perf_counter() - started
        session = window.session
        assert session is not None and session.indexing  # a 100K read takes tens of seconds
        assert model.preview and model.total == COUNT
        newest = model.record_at(0)
        assert newest is not None and newest.id == f"r{COUNT - 1:06d}"
        # A sort Chroma cannot do waits for the index, showing that it does, then runs.
        model.set_query(RecordQuery(layer=Layer.PROCEDURAL, sort_by=SortKey.IMPORTANCE))
        qtbot.waitUntil(lambda: model.waiting)
        assert "Reading every record" in window.records.count_label.text()
        assert window.index_label.isVisibleTo(window)
        qtbot.waitUntil(lambda: not session.indexing, timeout=1_500_000)
        indexed = time.perf_counter() - started
        assert session.engine.view_ready
        qtbot.waitUntil(lambda: model.settled and not model.waiting, timeout=60_000)
    # Layers cycle over the six layers by record number: every sixth record is procedural.
    procedural = list(Layer).index(Layer.PROCEDURAL)
    assert model.total == len(range(procedural, COUNT, 6))
    shown = [model.record_at(r) for r in range(PAGE_SIZE)]
    assert all(r is not None and r.layer is Layer.PROCEDURAL for r in shown)
    assert not window.index_label.isVisibleTo(window)
    print(f"\n100K store without its view cache: first page in {first_page:.2f} s, indexed "
          f"(filter answered) in {indexed:.0f} s")
