"""Issue 8's views in the main window: timeline, pipeline stepper, review, retrieval, map.

:func:`install_observe_views` builds them and wires them to each other (the stepper highlights
its run on the timeline, the retrieval view's query shows on the map, a map click selects the
record in the records view, the redaction state reaches every view). The window keeps them in
``MainWindow.views``; it passes each open store through ``set_session``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtWidgets import QWidget

from engine import Stage
from engine.records import Category, Layer, NewMemory, TrustTier
from ui.observe.map_view import MapView
from ui.observe.retrieval_view import RetrievalView
from ui.observe.review_view import ReviewView
from ui.observe.stepper_view import StepperView
from ui.observe.timeline_view import TimelineView
from ui.shared.session import DataSession, StoreSession
from ui.shared.tasks import TaskRunner, wait_until

__all__ = ["ObserveViews"]


@dataclass(slots=True)
class ObserveViews:
    """The five views and their wiring."""

    timeline: TimelineView
    pipeline: StepperView
    review: ReviewView
    retrieval: RetrievalView
    map: MapView

    @classmethod
    def build(cls, runner: TaskRunner, parent: QWidget) -> ObserveViews:
        """Create the views and connect them to each other."""
        made = cls(TimelineView(runner, parent), StepperView(runner, parent),
                   ReviewView(runner, parent), RetrievalView(runner, parent),
                   MapView(runner, parent))
        made.pipeline.run_finished.connect(made.timeline.highlight_run)
        made.pipeline.run_started.connect(made.timeline.highlight_run)
        made.retrieval.retrieved.connect(made.map.show_query)
        return made

    def views(self) -> dict[str, QWidget]:
        """Navigation name → view, in navigation order."""
        return {"timeline": self.timeline, "pipeline": self.pipeline, "review": self.review,
                "retrieval": self.retrieval, "map": self.map}

    def set_session(self, session: DataSession | None) -> None:
        """Show ``session`` in every view (None: the store closed).

        An attached agent (not a :class:`StoreSession`) shows on the timeline only: the other
        views run the engine itself (stepping the pipeline, deciding reviews, scoring, mapping
        the embeddings), which the read-only API does not expose.
        """
        self.timeline.set_session(session)
        store = session if isinstance(session, StoreSession) else None
        for view in (self.pipeline, self.review, self.retrieval, self.map):
            view.set_session(store)

    def set_redactor(self, redact: Callable[[str], str] | None) -> None:
        """Mask content in every view with ``redact`` (None: as stored)."""
        for view in (self.timeline, self.pipeline, self.review, self.retrieval, self.map):
            view.set_redactor(redact)

    def connect_messages(self, show: Callable[[str], None]) -> None:
        """Send the views' status messages to ``show``."""
        for view in (self.pipeline, self.review, self.retrieval):
            view.message.connect(show)

    async def prepare_screenshot(self, name: str) -> None:
        """Put view ``name`` in a representative state over the demo data (``--screenshot``)."""
        if name == "timeline":
            await wait_until(lambda: len(self.timeline.data) > 0)
            events = self.timeline.data.events
            # the newest deferral shows the most fields, and its record by its text
            named = [i for i, event in enumerate(events) if event.record_id]
            deferred = [i for i in named if events[i].kind == "merge-deferred"]
            chosen = deferred or named
            self.timeline.select_event(chosen[-1] if chosen else len(events) - 1)
            if chosen:
                await wait_until(lambda: self.timeline.current_record() is not None)
        elif name == "pipeline":
            paraphrase = NewMemory(
                content="The team's standup meeting is at 3pm.", agent_id="code-assistant",
                layer=Layer.EPISODIC, category=Category.CONTEXT, source="screenshot",
                source_tier=TrustTier.AGENT)
            if await self.pipeline.start(paraphrase):
                while self.pipeline.run is not None and \
                        self.pipeline.run.next_stage is not Stage.PERSIST:
                    if await self.pipeline.step() is None:
                        break
                self.pipeline.stage_list.setCurrentRow(
                    list(Stage).index(Stage.CANDIDATES))
            self.pipeline.whatif_value.setValue(0.65)
            await self.pipeline.what_if()
        elif name == "review":
            await self.review.load()
        elif name == "retrieval":
            self.retrieval.query_edit.setText("when is the team standup?")
            self.retrieval.budget_spin.setValue(120)
            if await self.retrieval.retrieve() is not None:
                self.retrieval.pin()
                self.retrieval.sliders["recency"].setValue(60)
                await self.retrieval.rescore()
        elif name == "map":
            await self.map.load()
            await wait_until(lambda: self.map.data is not None, 60.0)
