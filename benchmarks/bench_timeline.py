"""Timeline benchmark: pan/zoom frame time with 100K events (goal: median <= 16 ms).

Run from the repository root::

    python benchmarks/bench_timeline.py [--events 100000] [--steps 120]

Builds N synthetic events over 15 lanes (a day of bursty ingest: most events in a few busy
hours), loads them into ``ui.observe.timeline_view.TimelineView`` offscreen at 1280×720, and
replays a
sequence of pan and zoom steps (zoom in ×0.8 toward the busiest hour, pan left and right, zoom
out). One *frame* = set the X range + recount the bins (``TimelineView.rebin``, what the
debounced range-change handler runs) + render the plot to an image (``QWidget.grab``, a full
paint of every plot item). Baseline in the same run: the same frame with an empty timeline
(what pyqtgraph costs with no data). Prints median, p95, p99 and max per phase and the ratio to
the baseline; the figure goes to docs/observe.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from PySide6.QtWidgets import QApplication

from engine.events import Event
from ui.observe.timeline_data import LANES
from ui.observe.timeline_view import TimelineView
from ui.shared.tasks import TaskRunner
from ui.shared.theme import apply_theme


def synthetic(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray, list[Event]]:
    """Sorted times (s), lanes and the events (a bursty day)."""
    rng = np.random.default_rng(seed)
    start = 1.79e9
    centres = start + rng.uniform(0, 86_400, 6)
    bursts = rng.choice(len(centres), n)
    t = np.sort(np.clip(centres[bursts] + rng.normal(0, 900, n), start, start + 86_400))
    weights = np.array([8, 8, 8, 4, 2, 1, 4, 4, 1, 1, 3, 1, 1, 0.2, 0.5])
    lanes = rng.choice(len(LANES), n, p=weights / weights.sum()).astype(np.int32)
    events = [Event(event_id=str(i), kind=LANES[int(lanes[i])], ts=float(t[i]) * 1000.0)
              for i in range(n)]
    return t, lanes, events


def frames(view: TimelineView, steps: int,
           cpu: dict[str, list[float]] | None = None,
           rebin: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    """Replay zoom-in, pan, zoom-out; wall milliseconds per frame by phase.

    ``cpu`` receives the process CPU milliseconds per frame (the uncontended estimate on a
    shared machine), ``rebin`` the wall milliseconds of the bin recount alone.
    """
    x0, x1 = view.data.span()
    if x1 - x0 < 10:
        x0, x1 = 1.79e9, 1.79e9 + 86_400
    centre = x0 + (x1 - x0) * 0.4
    width = x1 - x0
    out: dict[str, list[float]] = {"zoom in": [], "pan": [], "zoom out": []}
    third = max(1, steps // 3)
    plan: list[tuple[str, float, float]] = []
    w = width
    for _ in range(third):
        w *= 0.8
        plan.append(("zoom in", centre - w / 2, centre + w / 2))
    for i in range(third):
        shift = w * 0.1 * (1 if (i // 10) % 2 == 0 else -1)
        centre += shift
        plan.append(("pan", centre - w / 2, centre + w / 2))
    for _ in range(third):
        w = min(width, w / 0.8)
        plan.append(("zoom out", centre - w / 2, centre + w / 2))
    for phase, a, b in plan:
        started = time.perf_counter()
        started_cpu = time.process_time()
        view.plot.setXRange(a, b, padding=0)
        binned = time.perf_counter()
        view.rebin()
        binned_ms = (time.perf_counter() - binned) * 1000.0
        view.plot.grab()
        out[phase].append((time.perf_counter() - started) * 1000.0)
        if cpu is not None:
            cpu.setdefault(phase, []).append((time.process_time() - started_cpu) * 1000.0)
        if rebin is not None:
            rebin.setdefault(phase, []).append(binned_ms)
    return out


def pct(values: list[float], q: float) -> float:
    """The q-th percentile."""
    return float(np.percentile(values, q))


def main() -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=120)
    args = parser.parse_args()
    app = QApplication.instance() or QApplication([])
    apply_theme(app, "light")  # type: ignore[arg-type]
    runner = TaskRunner()
    started = time.perf_counter()
    t, lanes, events = synthetic(args.events)
    build_s = time.perf_counter() - started

    empty = TimelineView(runner)
    empty.resize(1280, 720)
    empty.show()
    frames(empty, 12)  # warm-up
    base_cpu: dict[str, list[float]] = {}
    baseline = frames(empty, args.steps, base_cpu)

    view = TimelineView(runner)
    view.resize(1280, 720)
    view.show()
    started = time.perf_counter()
    view.data.set_arrays(t, lanes, events)
    load_ms = (time.perf_counter() - started) * 1000.0
    started = time.perf_counter()
    view.add_events([], fit=True)
    first_ms = (time.perf_counter() - started) * 1000.0
    frames(view, 12)  # warm-up
    cpu: dict[str, list[float]] = {}
    rebin: dict[str, list[float]] = {}
    result = frames(view, args.steps, cpu, rebin)
    items = len(view.plot.getPlotItem().items)

    base_all = [v for vs in baseline.values() for v in vs]
    print(f"timeline benchmark: {args.events:,} events, {len(LANES)} lanes, 1280x720 offscreen, "
          f"{items} plot items (created once); synthetic build {build_s:.2f} s, "
          f"load {load_ms:.0f} ms, first fit {first_ms:.0f} ms")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'phase':<10} {'frames':>6} {'median ms':>10} {'p95 ms':>8} {'p99 ms':>8} "
          f"{'max ms':>8} {'x baseline':>10} {'cpu med':>8} {'cpu p95':>8} {'rebin med':>9}")
    everything: list[float] = []
    all_cpu: list[float] = []
    all_rebin: list[float] = []
    base_median = statistics.median(base_all)
    base_cpu_all = [v for vs in base_cpu.values() for v in vs]
    for phase, values in result.items():
        everything += values
        all_cpu += cpu[phase]
        all_rebin += rebin[phase]
        print(f"{phase:<10} {len(values):>6} {statistics.median(values):>10.2f} "
              f"{pct(values, 95):>8.2f} {pct(values, 99):>8.2f} {max(values):>8.2f} "
              f"{statistics.median(values) / base_median:>10.2f} "
              f"{statistics.median(cpu[phase]):>8.2f} {pct(cpu[phase], 95):>8.2f} "
              f"{statistics.median(rebin[phase]):>9.2f}")
    print(f"{'all':<10} {len(everything):>6} {statistics.median(everything):>10.2f} "
          f"{pct(everything, 95):>8.2f} {pct(everything, 99):>8.2f} {max(everything):>8.2f} "
          f"{statistics.median(everything) / base_median:>10.2f} "
          f"{statistics.median(all_cpu):>8.2f} {pct(all_cpu, 95):>8.2f} "
          f"{statistics.median(all_rebin):>9.2f}")
    print(f"{'baseline':<10} {len(base_all):>6} {base_median:>10.2f} {pct(base_all, 95):>8.2f} "
          f"{pct(base_all, 99):>8.2f} {max(base_all):>8.2f} {1.0:>10.2f} "
          f"{statistics.median(base_cpu_all):>8.2f} {pct(base_cpu_all, 95):>8.2f} "
          f"{'':>9}  (empty timeline)")
    wall = statistics.median(everything) <= 16.0
    cpu_goal = statistics.median(all_cpu) <= 16.0
    print(f"goal median <= 16 ms: wall {'met' if wall else 'NOT met'}, "
          f"CPU {'met' if cpu_goal else 'NOT met'}")
    runner.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
