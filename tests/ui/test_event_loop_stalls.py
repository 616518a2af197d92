"""The GUI thread never blocks: event-loop gaps while a 10K-record import runs.

chromadb's Rust bindings keep the GIL for the whole of an insert, so the app imports into an
embedded store in a child process (:mod:`app.import_process`) and reopens the store after. The
test times a 5 ms QTimer across the whole import with :class:`ui.shared.loop_probe.LoopProbe` (the
same
code ``mnemoscope bench`` uses through ``benchmarks/bench_gui.py``) and splits the gaps by phase:
idle (baseline), import (the child writes while the GUI shows progress) and reopen (the store
reopened from its view cache and the table showing the new records).

The figures are printed; the 50 ms goal is judged by the benchmark (``mnemoscope bench``'s GUI
suite, ``benchmarks/bench_gui.py --stall N``), not here: on a shared two-core build machine a
wall-clock bound fails under other people's load. What the test asserts cannot drift with load:
the timer ticked through the whole import (the GUI thread was never held for it), and in no gap
did the GUI thread itself run for more than :data:`MAX_GUI_CPU_MS` of CPU (its own thread time,
which other processes do not inflate): importing or reopening on the GUI thread costs seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from tests.ui.conftest import child_import, open_store, run, write_import_file
from ui.main_window import MainWindow
from ui.shared.loop_probe import LoopProbe, probe_import

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
RECORDS = 10_000
MAX_GUI_CPU_MS = 250.0  # 10K records imported on the GUI thread: several seconds


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_import_of_10k_records_never_stalls_the_event_loop(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    """Real path for an embedded store, without the embedding model (records pend embedding)."""
    window = make_window(bulk_import=child_import)
    open_store(qtbot, window, tmp_path / "store")
    source = write_import_file(tmp_path / "10k.jsonl", RECORDS)
    probe = LoopProbe()
    summary = run(qtbot, probe_import(window, source, RECORDS, probe), timeout=300)
    assert summary is not None and summary.counts["inserted"] == RECORDS
    assert window.records.model.total == RECORDS
    stats = probe.stats()
    assert stats["import"].ticks > 100  # the timer really ran during the import
    print(f"\nevent-loop gaps (ms):\n{probe.summary()}")
    assert stats["reopen"].ticks > 0
    assert stats["import"].max_cpu <= MAX_GUI_CPU_MS
    assert stats["reopen"].max_cpu <= MAX_GUI_CPU_MS
