"""The lifecycle scheduler: expiry, retention caps, pruning and compaction on a timer.

Seed 002 §16 answers "unbounded growth" with "strict retention + compaction triggers"; until
now those ran only when someone typed ``mnemoscope expire`` or ``compact``. A
:class:`LifecycleScheduler` runs them by itself wherever the engine is long-lived: the desktop
app, ``mnemoscope serve --writable`` and the MCP server. For an agent's own process::

    scheduler = LifecycleScheduler.for_engine(engine)   # settings from engine.config.memory
    scheduler.start()                                    # False when switched off / read-only
    ...
    scheduler.stop()                                     # before engine.close()

One run, in order (each step's selection and writes under the engine's write lock, so no other
writer slips between what a step chose and what it deletes):

1. **expiry**: records whose TTL passed (``memory:record:expired`` each);
2. **compaction when due**: :meth:`Lifecycle.compact_if_due` — agents over ``episodic_max``,
   at most once per ``summarization_min_interval_ms``. It writes like any other writer (the
   summary is made without the lock; see :meth:`Lifecycle._replace`). It comes before the
   caps because its summaries are semantic records: the caps then hold after every run;
3. **retention**: records over the per-layer caps, least important first;
4. **pruning**: seed 004's mode ``lifecycle_prune`` (``off`` by default: pruning by importance
   deletes old memories nobody asked to expire, so a user turns it on).

A failing step does not stop the others; its error is kept in the run. Every run ends with one
``memory:lifecycle:run`` event whose payload is :meth:`LifecycleRun.to_json` (the steps emit
their own seed 002 events as well).

Timing: a background thread wakes when the next run is due by the scheduler's clock (the
engine's, or one injected by a test, which then calls :meth:`wake` after advancing it). Runs
never overlap: a run asked for while one is going (the tick, or :meth:`run_now`) waits for it,
then runs. :meth:`stop` returns promptly: the thread waits on a condition, not a sleep, and a
run in progress ends after its current step (a compaction before its next summarization
task).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.clock import Clock
from engine.errors import ConfigInvalid
from engine.lifecycle.compaction import Summarizer
from engine.lifecycle.pruning import PruneMode

if TYPE_CHECKING:
    from engine.memory_engine import MemoryEngine

__all__ = ["EVENT_LIFECYCLE_RUN", "LifecycleRun", "LifecycleScheduler"]

EVENT_LIFECYCLE_RUN = "memory:lifecycle:run"

# Longest single wait of the thread (seconds): a clock that jumps (suspend/resume, a test's
# fake clock advanced without wake()) is noticed within this long.
_MAX_WAIT_S = 60.0


@dataclass(frozen=True, slots=True)
class LifecycleRun:
    """What one scheduled (or manual) run did.

    Attributes:
        started_at: Clock time the run began (epoch ms).
        finished_at: Clock time it ended.
        trigger: ``schedule`` (the thread) or ``manual`` (:meth:`LifecycleScheduler.run_now`).
        expired: Records deleted because their TTL passed.
        retained: Records retired over a retention cap.
        pruned: Records pruned by the seed 004 mode.
        compacted: Episodic records condensed into summaries.
        summaries: Summary records written.
        remaining: Records in the store after the run.
        errors: ``step: error`` of each step that failed.
    """

    started_at: float
    finished_at: float
    trigger: str
    expired: int = 0
    retained: int = 0
    pruned: int = 0
    compacted: int = 0
    summaries: int = 0
    remaining: int = 0
    errors: tuple[str, ...] = field(default_factory=tuple)

    @property
    def changed(self) -> int:
        """Records removed by the run, all steps together."""
        return self.expired + self.retained + self.pruned + self.compacted

    def summary(self) -> str:
        """``3 expired, 1 compacted`` (non-zero counts only); ``nothing to do`` when none."""
        parts = [f"{count} {label}" for count, label in (
            (self.expired, "expired"), (self.retained, "over cap"), (self.pruned, "pruned"),
            (self.compacted, "compacted")) if count]
        if self.errors:
            parts.append(f"{len(self.errors)} failed")
        return ", ".join(parts) or "nothing to do"

    def to_json(self) -> dict[str, Any]:
        """Wire form (the ``memory:lifecycle:run`` payload)."""
        return {"started_at": self.started_at, "finished_at": self.finished_at,
                "trigger": self.trigger, "expired": self.expired, "retained": self.retained,
                "pruned": self.pruned, "compacted": self.compacted,
                "summaries": self.summaries, "remaining": self.remaining,
                "errors": list(self.errors), "summary": self.summary()}


class LifecycleScheduler:
    """Runs the lifecycle of one engine on an interval, in a background thread.

    Args:
        engine: The engine whose store is kept within bounds.
        interval_ms: Time between runs (default: ``lifecycle_interval_ms``).
        prune: Seed 004 pruning mode of a run, or ``off`` (default: ``lifecycle_prune``).
        enabled: The off switch (default: ``lifecycle_enabled``); a switched-off scheduler
            never starts its thread and :meth:`run_now` still works.
        clock: Decides when a run is due (default: the engine's clock).
        summarizer: Writes compaction summaries (default: the local heuristic).
    """

    def __init__(self, engine: MemoryEngine, *, interval_ms: float | None = None,
                 prune: PruneMode | str | None = None, enabled: bool | None = None,
                 clock: Clock | None = None, summarizer: Summarizer | None = None) -> None:
        memory = engine.config.memory
        self._engine = engine
        self._interval_ms = float(memory.lifecycle_interval_ms if interval_ms is None
                                  else interval_ms)
        if self._interval_ms <= 0:
            raise ConfigInvalid("lifecycle_interval_ms", interval_ms, "must be > 0")
        mode = memory.lifecycle_prune if prune is None else str(prune)
        self._prune = None if mode == "off" else PruneMode(mode)
        self._enabled = memory.lifecycle_enabled if enabled is None else enabled
        self._clock = clock or engine.clock
        self._summarizer = summarizer
        self._wake = threading.Condition()
        self._running = threading.Lock()  # held for the length of one run: no overlap
        # _halt ends the run in progress (set by stop(), cleared as a run begins); each thread
        # has its own stop event, so a manual run after stop() runs, and a thread that is
        # still finishing its last run when a new one starts never resumes its loop
        self._halt = threading.Event()
        self._thread_stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._next_due = 0.0
        self._last: LifecycleRun | None = None
        self._runs = 0
        self._listeners: list[Callable[[LifecycleRun], None]] = []
        self._errors: list[BaseException] = []

    @classmethod
    def for_engine(cls, engine: MemoryEngine, *,
                   summarizer: Summarizer | None = None) -> LifecycleScheduler:
        """A scheduler configured by ``engine.config.memory`` (``MEMORY_LIFECYCLE_*``).

        The one call a long-lived host needs: ``LifecycleScheduler.for_engine(engine).start()``
        and, before closing the engine, ``stop()``.
        """
        return cls(engine, summarizer=summarizer)

    # -- state ---------------------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """The off switch's position (False: :meth:`start` does nothing)."""
        return self._enabled

    @property
    def running(self) -> bool:
        """True while the background thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def clock(self) -> Clock:
        """The clock runs are timed by (the engine's unless one was injected)."""
        return self._clock

    @property
    def interval_ms(self) -> float:
        """Time between runs."""
        return self._interval_ms

    @property
    def last_run(self) -> LifecycleRun | None:
        """The latest finished run (None before the first)."""
        return self._last

    @property
    def errors(self) -> list[BaseException]:
        """Errors of listeners and of the thread itself (it keeps going; the newest 20).

        A failing step is not one of these: it is reported in its run's ``errors``.
        """
        return list(self._errors)

    @property
    def runs(self) -> int:
        """How many runs have finished."""
        return self._runs

    @property
    def next_due(self) -> float:
        """Clock time of the next scheduled run (epoch ms)."""
        return self._next_due

    def subscribe(self, listener: Callable[[LifecycleRun], None]) -> Callable[[], None]:
        """Call ``listener(run)`` after every run, on the thread that ran it.

        Returns:
            A function that unsubscribes.
        """
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    # -- start / stop --------------------------------------------------------------------------

    def start(self) -> bool:
        """Start the background thread; the first run is due one interval from now.

        Returns:
            True when the thread runs; False when switched off or the store is read-only
            (a read-only process follows another writer, whose lifecycle runs there).
        """
        if not self._enabled or self._engine.read_only:
            return False
        with self._wake:
            if self.running:
                return True
            stop = threading.Event()
            self._thread_stop = stop
            self._next_due = self._clock.now() + self._interval_ms
            self._thread = threading.Thread(target=self._loop, args=(stop,),
                                            name="mnemoscope-lifecycle", daemon=True)
            self._thread.start()
        return True

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the thread (a run in progress ends after its current step or summary task)."""
        self._halt.set()
        with self._wake:
            if self._thread_stop is not None:
                self._thread_stop.set()
            self._thread_stop = None
            self._wake.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout_s)

    def set_enabled(self, enabled: bool) -> bool:
        """Flip the off switch: start or stop the thread. Returns whether it runs now."""
        self._enabled = enabled
        if enabled:
            return self.start()
        self.stop()
        return False

    def wake(self) -> None:
        """Make the thread look at the clock now (after a test advanced a fake clock)."""
        with self._wake:
            self._wake.notify_all()

    def wait_runs(self, count: int, timeout_s: float) -> bool:
        """Block until at least ``count`` runs have finished and been reported to the
        listeners; False on timeout (tests, CLI)."""
        with self._wake:
            return self._wake.wait_for(lambda: self._runs >= count, timeout=timeout_s)

    # -- running -------------------------------------------------------------------------------

    def _loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            with self._wake:
                remaining_ms = self._next_due - self._clock.now()
                if remaining_ms > 0:
                    self._wake.wait(timeout=min(remaining_ms / 1000.0, _MAX_WAIT_S))
                    continue
            if stop.is_set():
                return
            # the next run is due one interval after this one began: a slow run does not
            # shift the schedule, and a clock far ahead yields one run, not a burst
            self._next_due = self._clock.now() + self._interval_ms
            try:
                self.run_now(trigger="schedule")
            except Exception as exc:  # keep the schedule; .errors reports it
                self._errors = [*self._errors[-19:], exc]

    def run_now(self, *, trigger: str = "manual") -> LifecycleRun:
        """Run every step once, on this thread (waits for a run in progress to finish)."""
        with self._running:
            self._halt.clear()
            run = self._run(trigger)
        self._last = run
        for listener in list(self._listeners):
            try:
                listener(run)
            except Exception as exc:  # one listener must not cost the others their report
                self._errors = [*self._errors[-19:], exc]
        with self._wake:  # counted once its listeners have it: wait_runs() then sees it all
            self._runs += 1
            self._wake.notify_all()
        return run

    def _run(self, trigger: str) -> LifecycleRun:
        engine = self._engine
        started = self._clock.now()
        counts: dict[str, int] = {"expired": 0, "retained": 0, "pruned": 0, "compacted": 0,
                                  "summaries": 0}
        errors: list[str] = []

        def step(name: str, action: Callable[[], Mapping[str, int]]) -> None:
            if self._halt.is_set():
                return
            try:
                for key, value in action().items():
                    counts[key] += value
            except Exception as exc:  # one failing step does not stop the others
                errors.append(f"{name}: {type(exc).__name__}: {exc}")

        def expire() -> Mapping[str, int]:
            with engine.write_lock:
                return {"expired": len(engine.expire().selection)}

        def retain() -> Mapping[str, int]:
            with engine.write_lock:
                return {"retained": len(engine.enforce_retention().selection)}

        def prune(mode: PruneMode) -> Mapping[str, int]:
            with engine.write_lock:
                return {"pruned": len(engine.prune(mode).selection)}

        def compact() -> Mapping[str, int]:
            reports = engine.compact_if_due(summarizer=self._summarizer,
                                            stop=self._halt.is_set)
            return {"compacted": sum(r.removed for r in reports),
                    "summaries": sum(len(r.summaries) for r in reports)}

        step("expiry", expire)
        step("compaction", compact)
        step("retention", retain)
        mode = self._prune
        if mode is not None:
            step("pruning", lambda: prune(mode))
        remaining = 0
        try:
            remaining = engine.count()
        except Exception as exc:
            errors.append(f"count: {type(exc).__name__}: {exc}")
        run = LifecycleRun(started, self._clock.now(), trigger, remaining=remaining,
                           errors=tuple(errors), **counts)
        try:
            engine.events.emit(EVENT_LIFECYCLE_RUN, source="lifecycle", force=True,
                               decision_reason=run.summary(), payload=run.to_json())
        except Exception as exc:  # the run happened: say so, and why it is not in the log
            run = dataclasses.replace(run, errors=(*run.errors,
                                                   f"event: {type(exc).__name__}: {exc}"))
        return run
