"""Retrieval diagnostics: component bars, the budget cut line against the engine's diagnostics,
live re-ranking by weight sliders, side-by-side pin, redacted context, no access counting."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import qasync
from pytestqt.qtbot import QtBot

from engine import (
    EngineConfig,
    MemoryConfig,
    PressureState,
    Purpose,
    RetrievalConfig,
    ScoringWeights,
    Strategy,
)
from engine.config import DEFAULT_PURPOSE_WEIGHTS
from engine.memory_engine import MemoryEngine
from engine.records import Layer, NewMemory
from engine.redaction import redact_text
from engine.retrieval import DropReason
from engine.retrieval.types import COMPONENTS
from engine.store import StoreSpec
from tests.support.fakes import HashingEmbedder
from tests.ui.conftest import run
from tests.ui.observe_fixtures import session
from ui.observe.retrieval_view import RetrievalView, cut_index
from ui.shared.session import StoreSession
from ui.shared.tasks import TaskRunner

__all__ = ["session"]

DAY = 86_400_000.0
TEXTS = ("Tokyo flights leave from gate 12 every morning",
         "The hotel in Tokyo has a rooftop pool and a gym",
         "Sam's API key is sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c for the Tokyo booking tool",
         "Lunch with Priya on Friday at the ramen place near the office",
         "The Kyoto train pass costs 300 dollars and covers the shinkansen",
         "Seat maps for long flights show the window seats in blue")


@pytest.fixture
def view(qtbot: QtBot, runner: TaskRunner, session: StoreSession) -> RetrievalView:
    now = session.engine.clock.now()
    for i, text in enumerate(TEXTS):
        session.engine.ingest(NewMemory(content=text, created_at=now - (i + 1) * 7 * DAY))
    made = RetrievalView(runner)
    qtbot.addWidget(made)
    made.set_session(session)
    made.query_edit.setText("flights to Tokyo")
    made.budget_spin.setValue(40)
    return made


def test_bars_and_budget_cut_match_the_engine(qtbot: QtBot, view: RetrievalView,
                                              session: StoreSession) -> None:
    before = session.engine.store.view.snapshot().access_count.copy()
    bundle = run(qtbot, view.retrieve())
    assert bundle is not None
    diag = bundle.diagnostics
    engine_lines = diag.candidates
    rows = view.live.rows
    assert [r.id for r in rows] == [c.id for c in engine_lines]
    assert [r.packed for r in rows] == [c.packed for c in engine_lines]
    expected_cut = next(i for i, c in enumerate(engine_lines)
                        if c.drop_reason is DropReason.BUDGET)
    assert view.live.cut == expected_cut == cut_index(rows)
    assert [r.id for r in rows if r.packed] == [r.id for r in bundle.records]
    assert view.live.used == bundle.total_tokens <= 40
    for row, line in zip(rows, engine_lines, strict=True):  # segments add up to the score
        assert sum(row.parts) == pytest.approx(line.score, abs=1e-6)
    assert all(view.sliders[n].value() == round(diag.weights[n] * 100) for n in COMPONENTS)
    # inspection never counts accesses
    after = session.engine.store.view.snapshot().access_count
    assert np.array_equal(before, after)
    assert "budget" in view.summary.text()


def test_weight_slider_reranks_without_requery(qtbot: QtBot, view: RetrievalView,
                                               session: StoreSession,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = run(qtbot, view.retrieve())
    assert bundle is not None
    first = [r.id for r in view.live.rows]

    def no_store(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("re-ranking must not query the store")

    monkeypatch.setattr(session.engine, "retrieve", no_store)
    for name, slider in view.sliders.items():
        slider.setValue(100 if name == "recency" else 0)
    qtbot.waitUntil(lambda: view.rescores >= 1, timeout=5000)
    ranked = [r.id for r in view.live.rows]
    assert ranked != first
    diag = bundle.diagnostics
    recency = {diag.ids[r]: diag.components[r, COMPONENTS.index("recency")]
               for r in diag.rows.tolist()}
    assert [recency[i] for i in ranked] == sorted((recency[i] for i in ranked), reverse=True)
    view.pin()
    assert view.pinned_area.isVisibleTo(view)
    assert [r.id for r in view.pinned.rows] == ranked
    # the weights it was ranked with, in words ("rec 1.00" before)
    assert view.pinned.title == "A (pinned: recency 1.00)"
    view.reset_weights()
    assert [r.id for r in view.live.rows] == first  # B back to the engine's weights, A kept
    assert [r.id for r in view.pinned.rows] == ranked


def test_context_preview_is_redacted_when_on(qtbot: QtBot, view: RetrievalView) -> None:
    view.budget_spin.setValue(500)
    assert run(qtbot, view.retrieve()) is not None
    assert "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c" in view.context.toPlainText()
    view.set_redactor(redact_text)
    shown = view.context.toPlainText()
    assert "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c" not in shown
    assert shown.startswith("Relevant memories:") and "Tokyo" in shown


def test_paused_and_archived_never_show_and_come_back_when_resumed(
        qtbot: QtBot, view: RetrievalView, session: StoreSession) -> None:
    """Issue 20: the Retrieval view lists what the agent would get; withheld records are not."""
    engine = session.engine
    bundle = run(qtbot, view.retrieve())
    assert bundle is not None
    shown = [r.id for r in view.live.rows]
    paused, archived = shown[0], shown[1]  # the two best matches
    engine.pause([paused])
    engine.archive([archived])
    bundle = run(qtbot, view.retrieve())
    assert bundle is not None
    rows = [r.id for r in view.live.rows]
    assert paused not in rows and archived not in rows
    assert {paused, archived}.isdisjoint(r.id for r in bundle.records)
    assert set(rows) == set(shown) - {paused, archived}
    assert "dropped: " in view.summary.text() and "paused 1" in view.summary.text()
    view.sliders["recency"].setValue(90)  # re-ranked by the sliders: still left out
    run(qtbot, view.rescore())
    assert {paused, archived}.isdisjoint(r.id for r in view.live.rows) and view.live.rows
    engine.resume([paused, archived])
    view.reset_weights()
    bundle = run(qtbot, view.retrieve())
    assert bundle is not None
    assert [r.id for r in view.live.rows] == shown


def test_the_summary_says_when_turns_were_blended_with_the_turn_before(
        qtbot: QtBot, qloop: qasync.QEventLoop, runner: TaskRunner, tmp_path: Path) -> None:
    from app.wiring import forget_embedded_clients

    spec = StoreSpec(str(tmp_path / "turns"))
    forget_embedded_clients()
    engine = MemoryEngine.open(spec, embedder=HashingEmbedder())  # cosine, not Jaccard
    session = StoreSession(engine, runner, spec)
    try:
        now = engine.clock.now()
        for i, text in enumerate(("Ana: we booked the flights to Tokyo",
                                  "Ben: great, finally!")):
            engine.ingest(NewMemory(content=text, layer=Layer.EPISODIC,
                                    created_at=now - DAY + i * 1000.0))
        made = RetrievalView(runner)
        qtbot.addWidget(made)
        made.set_session(session)
        made.query_edit.setText("flights to Tokyo")
        bundle = run(qtbot, made.retrieve())
        assert bundle is not None and bundle.diagnostics.semantic_blend == 0.3
        assert "semantic cosine, 1 blended 0.3 with the previous record" in \
            made.summary.text()
    finally:
        run(qtbot, session.drain())
        engine.close()


def test_row_texts_take_the_spare_width(qtbot: QtBot, view: RetrievalView) -> None:
    """Polish: the texts that name the candidates had a fixed 30 % of the rows' width (a
    dozen characters beside a long empty bar area); now what the bar and figures leave."""
    view.budget_spin.setValue(30)  # some packed, some over budget
    assert run(qtbot, view.retrieve()) is not None
    bars = view.live
    cut = bars.cut
    assert cut is not None and 0 < cut < len(bars.rows)
    # the cut line says which rows were packed and which were over budget; the rows do not
    # repeat it, so their texts get the room ("packed", "✗ over budget" on hover)
    assert bars.figures(0).endswith(" tok") and bars.fate(0) == "packed"
    assert bars.figures(cut).endswith(" tok") and bars.fate(cut) == "✗ over budget"
    metrics = bars.fontMetrics()
    widest = max(metrics.horizontalAdvance(bars.figures(i)) for i in range(len(bars.rows)))
    for width in (360, 735, 1100):
        bars.resize(width, bars.height())
        label_w, bar_x, bar_w = bars.columns()
        assert bar_x > label_w
        assert label_w >= width * 0.30 and bar_w >= 60
        if width >= 735:  # room to spare: the text takes it, not the bar
            assert label_w >= width - 12 - 60 - widest - 10 - 1 and label_w > width * 0.45


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_the_rankings_get_most_of_a_small_window(qtbot: QtBot, view: RetrievalView) -> None:
    """Polish: at 900×600 the weights box took its widest (360 px) and the pinned and live
    rankings shared what was left, four characters of text each."""
    view.resize(750, 560)  # the view in a 900×600 window
    view.show()
    qtbot.waitUntil(lambda: view.body.width() > 0)
    results, weights = view.body.sizes()
    assert weights <= 0.34 * (results + weights) and results >= 480


def _slider_values(view: RetrievalView) -> dict[str, int]:
    return {name: slider.value() for name, slider in view.sliders.items()}


def _percent(weights: ScoringWeights) -> dict[str, int]:
    return {name: round(w * 100) for name, w in zip(COMPONENTS, weights.as_tuple(), strict=True)}


def test_sliders_show_the_weights_the_first_question_will_use(qtbot: QtBot, view: RetrievalView,
                                                              session: StoreSession) -> None:
    config = session.engine.config.memory.retrieval
    # before: every slider read 0 (and no figure) until a question was asked
    first = _percent(config.weights_for(Purpose(view.purpose_box.currentText()),
                                        Strategy.BALANCED, PressureState.NORMAL))
    assert _slider_values(view) == first and any(first.values())
    assert view.slider_labels["semantic"].text() == f"{first['semantic'] / 100:.2f}"
    view.purpose_box.setCurrentText(Purpose.NAVIGATION.value)  # they follow the form
    navigation = _percent(config.weights_for(Purpose.NAVIGATION, Strategy.BALANCED,
                                             PressureState.NORMAL))
    assert _slider_values(view) == navigation != first
    view.pressure_box.setCurrentText(PressureState.SOFT.value)
    soft = _percent(config.weights_for(Purpose.NAVIGATION, Strategy.BALANCED,
                                       PressureState.SOFT))
    assert _slider_values(view) == soft != navigation
    bundle = run(qtbot, view.retrieve())
    assert bundle is not None  # what they showed is what the engine used
    assert _percent(ScoringWeights.from_mapping(bundle.diagnostics.weights)) == soft
    # a shown ranking keeps the weights it was ranked with (the sliders re-rank it)
    view.purpose_box.setCurrentText(Purpose.REASONING.value)
    assert _slider_values(view) == soft


def test_sliders_show_the_store_engines_configured_weights(qtbot: QtBot, tmp_path: Path,
                                                           runner: TaskRunner,
                                                           qloop: qasync.QEventLoop) -> None:
    from app.wiring import forget_embedded_clients

    # MEMORY_RETRIEVAL_* can change them: the view asks its store's engine, not the defaults
    weights = dict(DEFAULT_PURPOSE_WEIGHTS)
    weights[Purpose.DIALOG] = ScoringWeights.from_mapping({"importance": 3.0, "recency": 1.0})
    config = EngineConfig(memory=MemoryConfig(retrieval=RetrievalConfig(
        purpose_weights=weights)))
    spec = StoreSpec(str(tmp_path / "store"))
    forget_embedded_clients()
    engine = MemoryEngine.open(spec, config=config)
    session = StoreSession(engine, runner, spec)
    made = RetrievalView(runner)
    qtbot.addWidget(made)
    try:
        made.purpose_box.setCurrentText(Purpose.DIALOG.value)
        assert made.sliders["importance"].value() != 75  # no store: the default dialog weights
        made.set_session(session)
        assert _slider_values(made) == {name: {"importance": 75, "recency": 25}.get(name, 0)
                                        for name in COMPONENTS}
    finally:
        made.set_session(None)
        run(qtbot, session.drain())
        engine.close()


def test_a_deleted_record_leaves_the_ranking_the_pinned_one_and_the_context(
        qtbot: QtBot, view: RetrievalView, session: StoreSession) -> None:
    """A ranking asked before a delete is asked again: the deleted record was still ranked
    first, packed into the context sent to the LLM and marked on the Map (it used to stay
    until the next question)."""
    view.budget_spin.setValue(500)
    asked = run(qtbot, view.retrieve())
    assert asked is not None
    for name, slider in view.sliders.items():  # the user's weights: kept through the change
        slider.setValue(100 if name == "semantic" else 10)
    qtbot.waitUntil(lambda: view.rescores >= 1, timeout=5000)
    moved = _slider_values(view)
    view.pin()
    view.query_edit.setText("something else, not asked yet")  # the ranking's question is asked
    top = view.live.rows[0]
    marked: list[list[str]] = []
    view.retrieved.connect(lambda _vector, ids: marked.append(ids))

    run(qtbot, session.delete([top.id]))
    qtbot.waitUntil(lambda: top.id not in {r.id for r in (*view.live.rows, *view.pinned.rows)},
                    timeout=10_000)
    assert view.requeries == 1
    assert top.text not in view.context.toPlainText()
    assert marked and top.id not in marked[-1]
    assert view.bundle is not None and (view.bundle.diagnostics.candidate_count
                                       == asked.diagnostics.candidate_count - 1)
    assert view.bundle.request.query == "flights to Tokyo"
    assert _slider_values(view) == moved
    assert view.pinned_area.isVisibleTo(view)


def test_an_edited_record_shows_its_new_words_in_the_ranking(
        qtbot: QtBot, view: RetrievalView, session: StoreSession) -> None:
    view.budget_spin.setValue(500)
    assert run(qtbot, view.retrieve()) is not None
    gate = next(r for r in view.live.rows if "gate 12" in r.text)
    run(qtbot, session.update(gate.id, {"content": "Tokyo flights now leave from gate 40"}))
    qtbot.waitUntil(lambda: "gate 40" in {r.id: r.text for r in view.live.rows}[gate.id],
                    timeout=10_000)
    assert view.requeries == 1
    assert "gate 40" in view.context.toPlainText() and "gate 12" not in view.context.toPlainText()
