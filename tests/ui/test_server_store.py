"""A Chroma server store in the window before its full view is read (issue 24): the first page
and filtered pages come from the server, a sort Chroma cannot do says it needs the full view,
and the views that need it say they wait, with the load's progress in the status bar.

The full view's load is held back by the test (:class:`HeldView` waits for the test's word
before reading), so "before the view finished" is a fact of the test, not a race.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pytest
from pytestqt.qtbot import QtBot

from engine.errors import Cancelled
from engine.memory_engine import MemoryEngine
from engine.query import RecordQuery, SortKey
from engine.records import Layer, MemoryRecord, NewMemory, RecordState
from engine.store import MemoryStore, StoreSpec
from engine.store.chroma_store import CancelFn, ProgressFn
from tests.ui.conftest import open_store
from ui.main_window import MainWindow
from ui.records.records_model import COLUMNS

pytestmark = [pytest.mark.server, pytest.mark.slow,
              pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")]

NOW = 1_767_225_600_000.0
COUNT = 900
HANG_GUARD = 120.0  # seconds: only so a broken test cannot hang the run (never reached)


class HeldView(MemoryEngine):
    """The real engine, whose deferred view is read only once the test releases it."""

    release = threading.Event()

    def load_view(self, progress: ProgressFn | None = None,
                  cancelled: CancelFn | None = None) -> int:
        if progress is not None:
            progress(0, self.count())
        while not self.release.wait(0.05):
            if cancelled is not None and cancelled():
                raise Cancelled("the test's held view load was cancelled")
        return super().load_view(progress, cancelled)


def records() -> list[MemoryRecord]:
    """Record i: agent a{i%3}, layer by i%3, every 10th archived, "Harbour" in every 4th."""
    layers = (Layer.SEMANTIC, Layer.EPISODIC, Layer.PROCEDURAL)
    return [MemoryRecord.create(NewMemory(
        content=f"server record {i}" + (" near the HARBOUR" if i % 4 == 0 else ""),
        agent_id=f"a{i % 3}", layer=layers[i % 3], importance=(i % 10) / 10,
        state=RecordState.ARCHIVED if i % 10 == 9 else RecordState.ACTIVE), now_ms=NOW + i)
        for i in range(COUNT)]


@pytest.fixture(scope="module")
def server_store(chroma_server_url: str) -> tuple[StoreSpec, list[MemoryRecord]]:
    spec = StoreSpec(chroma_server_url, collection="gui-server-pages")
    batch = records()
    vectors = np.random.default_rng(3).standard_normal((COUNT, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store = MemoryStore.open(spec, now_ms=NOW)
    for start in range(0, COUNT, 300):
        store.write(batch[start:start + 300], vectors[start:start + 300])
    store.close()
    return spec, batch


def test_the_window_browses_a_server_store_before_its_full_view(
        qtbot: QtBot, make_window: Callable[..., MainWindow],
        server_store: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    spec, batch = server_store
    HeldView.release.clear()
    window = make_window(open_engine=lambda s: HeldView.open(s, defer_view=True))
    model = window.records.model
    try:
        open_store(qtbot, window, spec.location, collection=spec.collection, indexed=False,
                   timeout=HANG_GUARD)
        session = window.session
        assert session is not None and session.indexing and not session.engine.view_ready
        # The first page: the server's newest written records, archived ones hidden.
        shown = [r for r in reversed(batch) if r.state is not RecordState.ARCHIVED]
        assert model.preview and model.total == len(shown)
        first = [model.record_at(i) for i in range(3)]
        assert [r.id if r else None for r in first] == [r.id for r in shown[:3]]
        assert "newest written first, from the store" in window.records.count_label.text()
        # The views that need the full view say so, and the status bar names them.
        qtbot.waitUntil(lambda: "0 of" in window.index_label.text())
        assert window.index_label.text().startswith("Loading the full view for Timeline")
        assert window.no_store["map"].title().startswith("Map waits for the full view")
        assert not window.no_store["records"].is_shown()
        # A filter with the text filter: Chroma answers it.
        model.set_query(RecordQuery(agent_id="a1", layer=Layer.EPISODIC, text="harbour"))
        qtbot.waitUntil(lambda: model.settled and model.query.text == "harbour")
        wanted = [r.id for r in shown if r.agent_id == "a1" and "HARBOUR" in r.content]
        assert model.preview and model.total == len(wanted)
        assert model.loaded_ids() == wanted
        assert session.indexing
        # A sort Chroma cannot do waits, and says why.
        importance = next(n for n, c in enumerate(COLUMNS) if c.sort is SortKey.IMPORTANCE)
        model.sort(importance)
        qtbot.waitUntil(lambda: model.waiting)
        assert model.waiting_for == "sorting by importance"
        assert "sorting by importance needs the full view" in \
            window.records.count_label.text()
        assert session.indexing
        HeldView.release.set()
        qtbot.waitUntil(lambda: not session.indexing, timeout=int(HANG_GUARD * 1000))
        qtbot.waitUntil(lambda: model.settled and not model.waiting,
                        timeout=int(HANG_GUARD * 1000))
        assert (model.preview, model.total) == (False, len(wanted))
        rows = [model.record_at(i) for i in range(len(wanted))]
        importances = [r.importance for r in rows if r is not None]
        assert len(importances) == len(wanted) and importances == sorted(importances)
        assert not window.no_store["map"].is_shown()
        assert not window.index_label.isVisibleTo(window)
    finally:
        HeldView.release.set()
