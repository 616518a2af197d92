"""Paging a 100K-record store: lazy pages, fixed row heights, the last row reachable."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtWidgets import QHeaderView
from pytestqt.qtbot import QtBot

from tests.ui.bigstore import build_store
from tests.ui.conftest import open_store
from ui.main_window import MainWindow
from ui.records_model import PAGE_SIZE

COUNT = 100_000


@pytest.fixture(scope="session")
def store_100k(request: pytest.FixtureRequest,
               tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 100K-record store (random unit vectors, no model), built once and kept.

    Building takes minutes (Chroma inserts ~250 records/s here), so the store is kept in
    pytest's cache directory between sessions; the test only reads it (read-only, no lock).
    """
    cache = getattr(request.config, "cache", None)
    base = cache.mkdir("mnemoscope-store-100k-v1") if cache is not None \
        else tmp_path_factory.mktemp("store-100k")
    path, marker = base / "store", base / "complete"
    if not marker.exists():
        shutil.rmtree(path, ignore_errors=True)
        seconds = build_store(path, COUNT)
        marker.write_text(f"built in {seconds:.1f} s\n", encoding="utf-8")
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
    assert model.total == model.rowCount() == COUNT
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
    print(f"\n100K store: opened + first page in {opened:.1f} s, last page in "
          f"{last_page * 1000:.0f} ms, {len(model.loaded_ids())} rows fetched")
