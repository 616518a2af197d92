"""Measuring the GUI event loop: gaps between ticks of a 5 ms timer, split by phase.

One implementation serves the stall test (``tests/ui/test_event_loop_stalls.py``) and the
benchmark (``benchmarks/bench_gui.py``: ``bench_ingest_stall``, reported by ``mnemoscope bench``).

Every gap is recorded three ways, so that a slow tick can be told apart:

* **raw** — wall time between two ticks;
* **net** — minus the time the GUI thread was runnable but waiting for a CPU (Linux
  ``/proc/thread-self/schedstat``, field 2): what is left is our process's doing;
* **cpu** — the GUI thread's own CPU time in the gap (``time.thread_time``): our code running
  long on the GUI thread. A gap with little CPU and little run-queue wait was spent blocked
  (the GIL held by another thread, a lock, I/O).

With ``watch=True`` a watchdog thread samples every thread's Python stack
(``sys._current_frames``) once the GUI thread has not ticked for ``watch_ms``, so a long gap
comes with what the GUI thread and the others were doing (:attr:`LoopProbe.slow`).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QObject, QTimer

from ui.imports.importing import ImportSummary
from ui.main_window import MainWindow
from ui.shared.dialogs import ImportProgressDialog

__all__ = ["GapStats", "LoopProbe", "SlowGap", "probe_import"]

_SCHEDSTAT = Path("/proc/thread-self/schedstat")


def _run_delay_ms() -> float:
    """Time this thread spent runnable but waiting for a CPU (Linux schedstat), in ms.

    A thread waiting for the GIL sleeps on a futex, which is not counted here; a thread the OS
    did not schedule (other processes on a loaded machine) is. 0 where schedstat is missing.
    """
    try:
        return int(_SCHEDSTAT.read_text().split()[1]) / 1e6
    except (OSError, IndexError, ValueError):
        return 0.0


def _percentile(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(len(values) * q))] if values else 0.0


@dataclass(frozen=True, slots=True)
class GapStats:
    """Gaps of one phase (ms): count, max and p99 raw, net of run-queue wait, and GUI CPU."""

    ticks: int
    max_raw: float
    p99_raw: float
    max_net: float
    p99_net: float
    max_cpu: float

    @classmethod
    def of(cls, raw: list[float], net: list[float], cpu: list[float]) -> GapStats:
        """Statistics of one phase's samples."""
        return cls(len(raw), max(raw, default=0.0), _percentile(raw, 0.99),
                   max(net, default=0.0), _percentile(net, 0.99), max(cpu, default=0.0))


@dataclass(slots=True)
class SlowGap:
    """A gap longer than the watch threshold, with what the threads were doing in it."""

    phase: str
    gap_ms: float = 0.0
    cpu_ms: float = 0.0
    run_queue_ms: float = 0.0
    stacks: dict[str, str] = field(default_factory=dict)

    @property
    def cause(self) -> str:
        """``gui-cpu`` (our code on the GUI thread), ``run-queue`` (no CPU for us) or
        ``blocked`` (the GIL, a lock or I/O), by the larger share of the gap."""
        blocked = self.gap_ms - self.cpu_ms - self.run_queue_ms
        share = max((self.cpu_ms, "gui-cpu"), (self.run_queue_ms, "run-queue"),
                    (blocked, "blocked"))
        return share[1]


class LoopProbe(QObject):
    """Ticks a timer on the GUI thread and records the gaps per :attr:`phase`.

    Args:
        interval_ms: The timer interval (a gap of about this much is no stall).
        watch: Sample thread stacks during gaps longer than ``watch_ms`` (diagnosis).
    """

    def __init__(self, interval_ms: int = 5, *, watch: bool = False, watch_ms: float = 30.0,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.phase = "idle"
        self.raw: dict[str, list[float]] = {}
        self.net: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}
        self.slow: list[SlowGap] = []
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._tick)
        self._last = (0.0, 0.0, 0.0)
        self._watch = watch
        self._watch_ms = watch_ms
        self._stop = threading.Event()
        self._gui_thread = threading.get_ident()
        self._sampled: SlowGap | None = None
        self._lock = threading.Lock()
        self._watchdog: threading.Thread | None = None

    def start(self) -> None:
        """Start ticking (and the watchdog)."""
        self._gui_thread = threading.get_ident()
        self._last = (time.perf_counter(), _run_delay_ms(), time.thread_time())
        self._timer.start()
        if self._watch:
            self._stop.clear()
            self._watchdog = threading.Thread(target=self._watch_loop, daemon=True,
                                              name="mnemoscope-loop-watchdog")
            self._watchdog.start()

    def stop(self) -> None:
        """Stop ticking."""
        self._timer.stop()
        self._stop.set()
        if self._watchdog is not None:
            self._watchdog.join()
            self._watchdog = None

    def _tick(self) -> None:
        now, delay, cpu = time.perf_counter(), _run_delay_ms(), time.thread_time()
        last_now, last_delay, last_cpu = self._last
        gap = (now - last_now) * 1000.0
        waited = max(0.0, delay - last_delay)
        spent = (cpu - last_cpu) * 1000.0
        self.raw.setdefault(self.phase, []).append(gap)
        self.net.setdefault(self.phase, []).append(max(0.0, gap - waited))
        self.cpu.setdefault(self.phase, []).append(spent)
        self._last = (now, delay, cpu)
        with self._lock:
            sampled, self._sampled = self._sampled, None
        if sampled is not None:
            sampled.gap_ms, sampled.cpu_ms, sampled.run_queue_ms = gap, spent, waited
            self.slow.append(sampled)

    def _watch_loop(self) -> None:
        """Sample every thread's stack once per gap longer than the threshold."""
        sampled_at = -1.0
        while not self._stop.wait(0.005):
            started = self._last[0]
            if (time.perf_counter() - started) * 1000.0 < self._watch_ms or \
                    started == sampled_at:
                continue
            sampled_at = started
            frames = sys._current_frames()
            names = {t.ident: t.name for t in threading.enumerate()}
            stacks = {("GUI" if ident == self._gui_thread else names.get(ident, str(ident))):
                      "".join(traceback.format_stack(frame, limit=12))
                      for ident, frame in frames.items() if ident != threading.get_ident()}
            with self._lock:
                self._sampled = SlowGap(self.phase, stacks=stacks)

    def stats(self) -> dict[str, GapStats]:
        """Per-phase statistics."""
        return {phase: GapStats.of(self.raw[phase], self.net[phase], self.cpu[phase])
                for phase in self.raw}

    def gaps(self, phases: Iterable[str]) -> list[float]:
        """Raw gaps (ms) of ``phases``, in tick order within each phase."""
        return [gap for phase in phases for gap in self.raw.get(phase, [])]

    def summary(self) -> str:
        """One line per phase: ticks, max / p99 raw, max / p99 net, max GUI CPU (ms)."""
        return "\n".join(
            f"{phase:>7}: {s.ticks:6d} ticks  raw max {s.max_raw:7.1f} p99 {s.p99_raw:6.1f}  "
            f"net max {s.max_net:7.1f} p99 {s.p99_net:6.1f}  GUI CPU max {s.max_cpu:6.1f}"
            for phase, s in self.stats().items())


async def probe_import(window: MainWindow, source: Path, records: int, probe: LoopProbe, *,
                       idle_s: float = 1.0, timeout_s: float = 300.0) -> ImportSummary | None:
    """Import ``source`` (``records`` lines) through ``window`` while ``probe`` ticks.

    Phases: ``idle`` (a baseline before), ``import`` (the import runs; for an embedded store in
    a child process), ``reopen`` (from the last progress report until the records table shows
    the new total: the store reopened and its first page loaded). None when the import failed
    (the dialog says why).
    """
    probe.phase = "idle"
    probe.start()
    try:
        await asyncio.sleep(idle_s)
        dialog = ImportProgressDialog("Import", window)

        def on_progress(value: int) -> None:
            if value >= records and probe.phase == "import":
                probe.phase = "reopen"

        dialog.bar.valueChanged.connect(on_progress)
        probe.phase = "import"
        summary = await window.run_import(source, dialog=dialog)
        probe.phase = "reopen"
        model = window.records.model
        deadline = time.monotonic() + timeout_s
        while summary is not None and not (
                model.settled and model.total >= records and window.session is not None
                and not window.session.indexing):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the records table did not show {records:,} records "
                                   f"within {timeout_s:.0f} s of the import")
            await asyncio.sleep(0.01)
        dialog.accept()
        return summary
    finally:
        probe.stop()
