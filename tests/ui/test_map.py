"""The embedding map: PCA projection, colouring, hover text, the query overlay, selection."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import qasync
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from engine.memory_engine import MemoryEngine
from engine.projection import pca_fit, project_snapshot
from engine.records import Layer, NewMemory
from engine.store import StoreSpec
from tests.support.fakes import HashingEmbedder
from tests.ui.conftest import open_store, run
from ui.main_window import MainWindow
from ui.observe.map_view import MapView
from ui.observe.retrieval_view import RetrievalView
from ui.shared.session import StoreSession
from ui.shared.tasks import TaskRunner

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")

TEXTS = ("Tokyo flights leave from gate 12", "The Tokyo hotel has a pool",
         "Kyoto trains run every hour", "Priya reviews database migrations",
         "Marco owns the payments service", "Run make profile to see the flame graph",
         "Water the fern on Sundays", "Mugs are in the upper cabinet")


@pytest.fixture
def embedded(tmp_path: Path, qtbot: QtBot, qloop: qasync.QEventLoop,
             runner: TaskRunner) -> Iterator[StoreSession]:
    from app.wiring import forget_embedded_clients

    forget_embedded_clients()
    spec = StoreSpec(str(tmp_path / "store"))
    engine = MemoryEngine.open(spec, embedder=HashingEmbedder())
    layers = (Layer.SEMANTIC, Layer.EPISODIC, Layer.PROCEDURAL)
    for i, text in enumerate(TEXTS):
        engine.ingest(NewMemory(content=text, layer=layers[i % 3], importance=i / 8,
                                agent_id="a" if i % 2 else "b"))
    made = StoreSession(engine, runner, spec)
    yield made
    run(qtbot, made.drain())
    engine.close()


def test_pca_is_exact_and_deterministic() -> None:
    rng = np.random.default_rng(0)
    data = rng.normal(size=(50, 6)) * np.array([5, 3, 0.1, 0.1, 0.1, 0.1])
    points, mean, components, explained = pca_fit(data)
    assert points.shape == (50, 2)
    assert abs(components[0] @ components[1]) < 1e-9
    assert explained[0] > explained[1] > 0.0 and explained.sum() <= 1.0
    assert np.allclose(points, (data - mean) @ components.T)
    assert np.allclose(pca_fit(data)[0], points)  # same input, same map (sign fixed)
    assert np.abs(components[0, 0]) > 0.99  # the dominant axis is found
    assert pca_fit(np.zeros((1, 4)))[0].shape == (1, 2)


def test_map_colours_hover_query_and_selection(qtbot: QtBot, runner: TaskRunner,
                                               embedded: StoreSession) -> None:
    view = MapView(runner)
    qtbot.addWidget(view)
    view.resize(800, 500)
    view.set_session(embedded)
    data = run(qtbot, view.load())
    assert data is not None and len(data.projection.ids) == len(TEXTS)
    snapshot = embedded.engine.store.view.snapshot()
    direct = project_snapshot(snapshot)
    assert np.allclose(direct.points, data.projection.points)
    assert "8 points" in view.legend.text() and "semantic" in view.legend.text()
    layer_colours = view.colors()
    view.color_box.setCurrentText("agent")
    assert len({c.name() for c in view.colors()}) == 2
    assert [c.name() for c in view.colors()] != [c.name() for c in layer_colours]
    view.color_box.setCurrentText("importance")
    assert len({c.name() for c in view.colors()}) == len(TEXTS)
    tip = view._tip(0.0, 0.0, 0)
    assert data.texts[0][:20] in tip
    assert "query and" in view.marks.text()  # before a query: how to get the marks

    # the retrieval view's query and its neighbours
    retrieval = RetrievalView(runner)
    qtbot.addWidget(retrieval)
    retrieval.set_session(embedded)
    retrieval.retrieved.connect(view.show_query)
    retrieval.query_edit.setText("Tokyo flights")
    retrieval.budget_spin.setValue(30)
    bundle = run(qtbot, retrieval.retrieve())
    assert bundle is not None and bundle.records
    assert view.neighbours == [r.id for r in bundle.records]
    assert view.query_point is not None
    query_vector = embedded.engine.embed_texts(["Tokyo flights"])
    assert query_vector is not None
    assert np.allclose(view.query_point, data.projection.place(query_vector)[0])
    assert len(view.ring.data) == len(bundle.records)
    count = len(bundle.records)  # the legend names the star and the rings
    marks_text = re.sub(r"<[^>]+>", "", view.marks.text())
    assert f"★ the Retrieval view's query · ◯ its {count} packed result" in marks_text
    marks = {view.ring.opts["pen"].color().name(), view.query_item.opts["brush"].color().name()}
    assert marks.isdisjoint({c.name() for c in layer_colours})  # unlike every point

    # the sliders re-rank: the rings follow what they pack (they stayed on the engine's)
    engine_packed = [r.id for r in bundle.records]
    for name, slider in retrieval.sliders.items():
        slider.setValue(100 if name == "recency" else 0)
    qtbot.waitUntil(lambda: retrieval.rescores >= 1, timeout=5000)
    packed = [r.id for r in retrieval.live.rows if r.packed]
    assert packed != engine_packed
    assert view.neighbours == packed and len(view.ring.data) == len(packed)
    retrieval.reset_weights()
    assert view.neighbours == engine_packed

    with qtbot.waitSignal(view.record_selected, timeout=2000) as blocker:
        view._on_clicked(view.scatter, view.scatter.points()[:1], None)
    assert blocker.args == [data.projection.ids[0]]


def test_window_wiring(make_window: Callable[..., MainWindow], tmp_path: Path,
                       qtbot: QtBot) -> None:
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    session = window.session
    assert session is not None
    assert window.observe.review._session is session and window.observe.map._session is session
    window.show_redaction(True)  # the redaction state reaches the observe views
    assert window.observe.retrieval._redact is not None
    window.show_redaction(False)
    assert window.observe.timeline._redact is None
    window.nav.setCurrentRow(list(window.views).index("map"))
    record = run(qtbot, session.run_write(session.engine.add, NewMemory(content="a map point")))
    window.observe.map.record_selected.emit(record.id)  # a click on the map
    assert window.stack.currentWidget() is window.records
    qtbot.waitUntil(lambda: window.records.detail.record is not None
                    and window.records.detail.record.id == record.id, timeout=10000)


def test_hovering_a_point_shows_its_record_text(qtbot: QtBot, runner: TaskRunner,
                                                embedded: StoreSession,
                                                every_move: None) -> None:
    view = MapView(runner)
    qtbot.addWidget(view)
    view.resize(800, 500)
    view.show()
    qtbot.waitExposed(view)
    view.set_session(embedded)
    data = run(qtbot, view.load())
    assert data is not None
    box = view.plot.getViewBox()
    viewport = view.plot.viewport()
    for index, (x, y) in enumerate(data.projection.points.tolist()):
        local = QPointF(view.plot.mapFromScene(box.mapViewToScene(QPointF(x, y))))
        QApplication.sendEvent(viewport, QMouseEvent(
            QEvent.Type.MouseMove, local, viewport.mapToGlobal(local), Qt.MouseButton.NoButton,
            Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier))
        tip = box.toolTip()  # the text first (the 8 points lie apart), then layer, agent, id
        assert tip.startswith(data.texts[index][:40]), (index, tip)
        assert f"id {data.projection.ids[index]}" in tip and "importance" in tip
    assert view.plot.getAxis("bottom").labelText.startswith("principal component 1")
