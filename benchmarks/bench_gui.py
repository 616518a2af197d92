"""GUI benchmarks: process start → window shown, and a 100K-record store's first page.

Run from the repository root::

    python benchmarks/bench_gui.py [--runs 5] [--store PATH] [--build N]

* startup — ``mnemoscope`` launched as a process (offscreen, model loading on) with
  ``MNEMOSCOPE_BENCHMARK_STARTUP=exit``: wall time from ``Popen`` to the ``window-shown`` line
  (the window's first paint), and which heavy modules were imported by then (must be none).
  Baseline in the same run: a bare ``python -c pass`` start.
* first page — a store of N records (default: the 100K test store, built once and cached): the
  engine opening the store, then the records table's first page (``RecordTableModel`` on the
  task runner, offscreen, qasync), reported separately. Goals: window <= 1.5 s, first page
  <= 1 s (DESIGN: performance budgets).

Prints a table of medians, p95 and ratios; figures go to docs/gui.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def bench_startup(runs: int) -> list[tuple[str, list[float], str]]:
    """Wall times of process start → window shown, and of a bare interpreter start."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", HF_HUB_OFFLINE="1",
               MNEMOSCOPE_BENCHMARK_STARTUP="exit")
    rows: list[tuple[str, list[float], str]] = []
    bare = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.perf_counter() - started)
    rows.append(("python -c pass (baseline)", bare, ""))
    shown, inside, heavy = [], [], ""
    with tempfile.TemporaryDirectory() as home:
        env.update(MNEMOSCOPE_CONFIG_DIR=str(Path(home) / "config"),
                   MNEMOSCOPE_DATA_DIR=str(Path(home) / "data"))
        for _ in range(runs):
            started = time.perf_counter()
            child = subprocess.Popen([sys.executable, "-m", "app.main"], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
            assert child.stdout is not None
            for line in child.stdout:
                if line.startswith("window-shown"):
                    shown.append(time.perf_counter() - started)
                    parts = line.split()
                    inside.append(float(parts[1]))
                    heavy = " ".join(parts[2:])
                    break
            child.wait(timeout=60)
            child.stdout.close()
    rows.append(("process start → window shown", shown, heavy or "heavy=none"))
    rows.append(("  of which launch() → first paint", inside, ""))
    return rows


def bench_first_page(store: Path, runs: int) -> list[tuple[str, list[float], str]]:
    """Engine open, then the first page in the GUI's table model (offscreen, qasync)."""
    import asyncio

    import qasync
    from PySide6.QtWidgets import QApplication

    from app.wiring import forget_embedded_clients
    from engine.memory_engine import MemoryEngine
    from engine.query import RecordQuery
    from engine.reader import LocalReader
    from engine.store import StoreSpec
    from ui.records_model import RecordTableModel
    from ui.tasks import TaskRunner

    app = QApplication.instance() or QApplication([])
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    runner = TaskRunner()
    opens, pages, engine_pages = [], [], []
    count = 0
    for _ in range(runs):
        forget_embedded_clients()
        started = time.perf_counter()
        engine = MemoryEngine.open(StoreSpec(str(store), read_only=True))
        opens.append(time.perf_counter() - started)
        count = engine.count()
        started = time.perf_counter()
        engine.list_records(RecordQuery(limit=200))
        engine_pages.append(time.perf_counter() - started)
        model = RecordTableModel(runner)

        async def first_page(model: RecordTableModel = model,
                             engine: MemoryEngine = engine) -> float:
            began = time.perf_counter()
            model.set_reader(LocalReader(engine))
            while not (model.settled and model.is_loaded(0)):
                await asyncio.sleep(0.001)
            return time.perf_counter() - began

        pages.append(loop.run_until_complete(first_page()))
        engine.close()
    runner.shutdown()
    return [(f"engine open ({count:,} records, read-only)", opens, "engine-bound"),
            ("engine.list_records first page (200)", engine_pages, ""),
            ("table model first page (worker + apply)", pages, "goal <= 1 s")]


def main() -> int:
    """Run both benchmarks and print the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--store", type=Path,
                        default=ROOT / ".pytest_cache" / "d" / "mnemoscope-store-100k-v1"
                        / "store")
    parser.add_argument("--build", type=int, default=0,
                        help="build a store of N records in a temp dir instead of --store")
    parser.add_argument("--skip-store", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    rows = bench_startup(args.runs)
    if not args.skip_store:
        store = args.store
        if args.build:
            from tests.ui.bigstore import build_store

            store = Path(tempfile.mkdtemp()) / "store"
            print(f"built {args.build:,} records in {build_store(store, args.build):.1f} s")
        if not (store / "chroma.sqlite3").exists():
            print(f"no store at {store}: run the 100K test once or pass --build N")
            return 2
        rows += bench_first_page(store, max(1, min(args.runs, 3)))
    baseline = statistics.median(rows[0][1])
    print(f"\n{'what':44} {'n':>3} {'median':>9} {'p95':>9} {'× base':>7}  note")
    for name, values, note in rows:
        median, p95 = statistics.median(values), _pct(values, 0.95)
        print(f"{name:44} {len(values):3d} {median * 1000:7.0f}ms {p95 * 1000:7.0f}ms"
              f" {median / baseline:7.1f}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
