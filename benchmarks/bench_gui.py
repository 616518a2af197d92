"""GUI benchmarks: start-up, a 100K-record store's first page, event-loop stalls of an import.

Run from the repository root::

    python benchmarks/bench_gui.py [--runs 5] [--store PATH] [--build N] [--stall N] [--json]

* startup — ``mnemoscope`` launched as a process (offscreen, model loading on) with
  ``MNEMOSCOPE_BENCHMARK_STARTUP=exit``: wall time from ``Popen`` to the ``window-shown`` line
  (the window's first paint), and which heavy modules were imported by then (must be none).
  Baseline in the same run: a bare ``python -c pass`` start.
* first page (:func:`bench_first_page`) — the real window (offscreen, qasync, the app's task
  runner) opens a store of N records read-only: from ``MainWindow.open_store`` until the
  records table holds its first page, (a) with the persisted view cache and (b) without it
  (the cache files moved aside: the first page comes from Chroma while the store is indexed
  in the background; the time until indexed is reported too). chromadb is imported before
  timing (a store was opened before in the process). Baseline: ``engine.list_records`` first
  page. :func:`bench_process_first_page` adds the cold case: process start → first page of the
  store, with the model loading. Goals: window <= 1.5 s, first page <= 1 s (DESIGN).
* stall (:func:`bench_ingest_stall`) — event-loop gaps (5 ms QTimer, :mod:`ui.shared.loop_probe`,
the
  same code as tests/ui/test_event_loop_stalls.py) while the window imports N JSONL records
  into an embedded store (child process, then reopen), offscreen, without the model. Goal:
  max gap <= 50 ms. ``--stall N --json`` prints ``{"gaps": [...], "phases": {...}}`` (what
  ``mnemoscope bench`` runs in a child process: the engine side stays Qt-free).

* situation stalls (:func:`situation_stall_probe`, issue 19) — the same probe, each run in a
  fresh process (``--gui-stall SITUATION --json``; what ``mnemoscope bench`` runs):
  ``first-launch`` (the window shown, the model converted for OpenVINO as on the app's first
  launch: in a helper process, then loaded from its conversion; a fresh, empty model cache each
  run), ``model-load`` (the model loading from its cached OpenVINO conversion, as on every
  later launch; ``--model-cache DIR``, converted on the first run), ``resize`` (five window
  resizes in each of Records, Timeline, Layers and Map with the demo data), ``review`` (open
  Review, approve three items one by one), ``undo`` (undo a 200-row delete in Records) and
  ``consolidate`` (Store → Consolidate Duplicates on 1,000 records and 100 planted
  near-duplicate pairs: Apply All of the 100 merges, then Edit → Undo of it; word-overlap path,
  no model). Baseline: the idle loop just before, same run. Goal: no gap over 100 ms (DESIGN).

Prints a table of medians, p95 and ratios; figures go to docs/gui.md.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import dataclasses
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

Row = tuple[str, list[float], str]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _env(home: str, mode: str) -> dict[str, str]:
    return dict(os.environ, QT_QPA_PLATFORM="offscreen", HF_HUB_OFFLINE="1",
                MNEMOSCOPE_BENCHMARK_STARTUP=mode,
                MNEMOSCOPE_CONFIG_DIR=str(Path(home) / "config"),
                MNEMOSCOPE_DATA_DIR=str(Path(home) / "data"))


@functools.cache
def _byte_compiled() -> None:
    """Byte-compile the app's own packages, as an installed app ships them (PyInstaller
    bundles bytecode). Without it a process started with ``PYTHONDONTWRITEBYTECODE`` set (this
    machine's environment sets it), or the first one after a change, compiles every module from
    source: ~0.4 s of a 1-2 s start-up. Once per run."""
    for package in ("app", "ui", "engine"):
        compileall.compile_dir(str(ROOT / package), quiet=1)


def _timed_launch(args: list[str], env: dict[str, str], marker: str) -> tuple[float, str]:
    """Start ``python -m app.main *args``; seconds until a stdout line starts with ``marker``."""
    _byte_compiled()
    with tempfile.TemporaryFile("w+") as errors:  # a file: a pipe left unread could fill up
        started = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "app.main", *args], cwd=ROOT, env=env,
                                 stdout=subprocess.PIPE, stderr=errors, text=True)
        assert child.stdout is not None
        found, line = None, ""
        for line in child.stdout:
            if line.startswith(marker):
                found = time.perf_counter() - started
                break
        child.wait(timeout=600)
        child.stdout.close()
        if found is None:
            errors.seek(0)
            tail = "\n".join(errors.read().strip().splitlines()[-15:])
            raise RuntimeError(f"the app never printed {marker!r} (exit {child.returncode}); "
                               f"its last words:\n{tail or '(nothing on stderr)'}")
    return found, line.strip()


def bench_startup(runs: int) -> list[Row]:
    """Wall times of process start → window shown, and of a bare interpreter start."""
    rows: list[Row] = []
    bare = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.perf_counter() - started)
    rows.append(("python -c pass (baseline)", bare, ""))
    shown, inside, heavy = [], [], ""
    with tempfile.TemporaryDirectory() as home:
        for _ in range(runs):
            seconds, line = _timed_launch([], _env(home, "exit"), "window-shown")
            shown.append(seconds)
            parts = line.split()
            inside.append(float(parts[1]))
            heavy = " ".join(parts[2:])
    rows.append(("process start → window shown", shown, heavy or "heavy=none"))
    rows.append(("  of which launch() → first paint", inside, ""))
    return rows


def bench_process_first_page(store: Path, runs: int) -> list[Row]:
    """Cold: process start → the records table's first page of ``store`` (read-only, model on).

    Uses the view cache when the store has a current one (see :func:`bench_first_page`).
    """
    pages: list[float] = []
    with tempfile.TemporaryDirectory() as home:
        for _ in range(runs):
            seconds, _line = _timed_launch(["--store", str(store), "--read-only"],
                                           _env(home, "first-page"), "first-page")
            pages.append(seconds)
    return [("process start → first page (view cache, model loading)", pages,
             "interpreter + Qt + window + chromadb import + open")]


# -- in-process: the real window on a qasync loop ------------------------------------------------

_QT: dict[str, Any] = {}


def _qt() -> tuple[Any, Any]:
    """The QApplication and its qasync loop (made once per process, offscreen)."""
    if not _QT:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        import qasync
        from PySide6.QtWidgets import QApplication

        app = QApplication.instance() or QApplication([])
        loop = qasync.QEventLoop(app)
        asyncio.set_event_loop(loop)
        _QT.update(app=app, loop=loop)
    return _QT["app"], _QT["loop"]


def _window(runner: Any, **changes: Any) -> Any:
    """A main window on the test suite's services (real stores, no model, no settings file)."""
    from app.controller import AppController
    from tests.ui.conftest import services
    from ui.main_window import MainWindow

    made = services(runner, **changes)
    window = MainWindow(made, AppController(made))
    window.resize(1280, 800)
    window.show()
    return window


def ensure_view_cache(store: Path) -> bool:
    """Write the store's view cache if it is not current (a writable open and a clean close).

    Returns True when it had to be written.
    """
    from engine.store import DEFAULT_COLLECTION, MemoryStore, StoreSpec, view_cache

    if view_cache.is_current(store, DEFAULT_COLLECTION, 384):
        return False
    MemoryStore.open(StoreSpec(str(store))).close()
    return True


async def _open_until_first_page(window: Any, runner: Any,
                                 store: Path) -> tuple[float, float, bool]:
    """Open ``store`` read-only in ``window``: (s to the first page, s to indexed, preview).

    Then closes it and waits until ``runner`` is idle (the views' loads after the open).
    """
    from engine.store import StoreSpec
    from ui.shared.tasks import spawn

    model = window.records.model
    began = time.perf_counter()
    opening = spawn(window.open_store(StoreSpec(str(store), read_only=True)))
    while not (window.session is not None and model.settled and model.is_loaded(0)):
        if opening.done() and opening.result() is None:
            raise RuntimeError(f"could not open {store}: {window.banner_label.text()}")
        await asyncio.sleep(0.002)
    first = time.perf_counter() - began
    preview = model.preview
    await opening
    session = window.session
    assert session is not None
    if not await session.wait_indexed():
        raise RuntimeError(f"indexing {store} failed: {session.indexing_error}")
    indexed = time.perf_counter() - began
    await window.close_store()
    while runner.pending():  # the views' loads after the open: the next run starts idle
        await asyncio.sleep(0.01)
    return first, indexed, preview


def bench_first_page(store: Path, runs: int) -> list[Row]:
    """Open ``store`` in the real window until the table's first page: cached and uncached.

    Returns rows: with the view cache; without it; without it until fully indexed; the engine's
    ``list_records`` first page (baseline). Seconds.
    """
    from engine.memory_engine import MemoryEngine
    from engine.query import RecordQuery
    from engine.store import StoreSpec
    from tests.ui.bigstore import view_cache_aside
    from ui.shared.tasks import TaskRunner

    wrote = ensure_view_cache(store)
    _app, loop = _qt()
    runner = TaskRunner()
    window = _window(runner)
    cached: list[float] = []
    uncached: list[float] = []
    indexed: list[float] = []
    engine_pages: list[float] = []
    count = 0

    async def measure() -> None:
        await _open_until_first_page(window, runner, store)  # warm-up: imports, page cache
        for _ in range(runs):
            first, _indexed, preview = await _open_until_first_page(window, runner, store)
            assert not preview, "the view cache was not used"
            cached.append(first)
        with view_cache_aside(store):
            for _ in range(runs):
                first, done, preview = await _open_until_first_page(window, runner, store)
                assert preview, "the first page did not come before the index"
                uncached.append(first)
                indexed.append(done)

    try:
        loop.run_until_complete(measure())
        engine = MemoryEngine.open(StoreSpec(str(store), read_only=True))
        try:
            count = engine.count()
            for _ in range(runs + 1):
                started = time.perf_counter()
                engine.list_records(RecordQuery(limit=200))
                engine_pages.append(time.perf_counter() - started)
            engine_pages = engine_pages[1:]  # the first warms Chroma up
        finally:
            engine.close()
    finally:
        window.close()
        runner.shutdown()
    note = " (cache written first)" if wrote else ""
    return [(f"open store → first page, view cache ({count:,} records){note}", cached,
             "window, read-only; goal <= 1 s"),
            ("open store → first page, no view cache", uncached,
             "Chroma's newest records while indexing; goal <= 1 s"),
            ("  no view cache: open → fully indexed (background)", indexed,
             "filters and sorts wait for this"),
            ("engine.list_records first page (200), indexed", engine_pages, "baseline")]


# -- event-loop stalls during an import --------------------------------------------------------


def ingest_stall_probe(records: int, *, watch: bool = False) -> Any:
    """Import ``records`` JSONL lines in the real window while a LoopProbe ticks; the probe.

    ``watch``: sample the threads' stacks in gaps over 30 ms (``probe.slow``; diagnosis).
    """
    from engine.store import StoreSpec
    from tests.ui.conftest import child_import, write_import_file
    from ui.shared.loop_probe import LoopProbe, probe_import
    from ui.shared.tasks import TaskRunner

    _app, loop = _qt()
    runner = TaskRunner()
    window = _window(runner, bulk_import=child_import)
    probe = LoopProbe(watch=watch)

    async def measure(folder: Path) -> None:
        if await window.open_store(StoreSpec(str(folder / "store"))) is None:
            raise RuntimeError(f"could not open a store: {window.banner_label.text()}")
        source = write_import_file(folder / "import.jsonl", records)
        summary = await probe_import(window, source, records, probe)
        if summary is None or summary.counts["inserted"] != records:
            raise RuntimeError(f"the import did not insert {records:,} records: {summary}")
        await window.close_store()
        while runner.pending():
            await asyncio.sleep(0.01)

    try:
        with tempfile.TemporaryDirectory(prefix="bench-stall-") as tmp:
            loop.run_until_complete(measure(Path(tmp)))
    finally:
        window.close()
        runner.shutdown()
    return probe


def bench_ingest_stall(records: int) -> list[float]:
    """Event-loop gaps (ms) while the window imports ``records`` records and reopens the store.

    The import and reopen phases of :func:`ui.shared.loop_probe.probe_import`, in tick order.
    """
    return list(ingest_stall_probe(records).gaps(("import", "reopen")))


def _stall_document(records: int) -> dict[str, Any]:
    probe = ingest_stall_probe(records)
    return {"records": records, "gaps": probe.gaps(("import", "reopen")),
            "idle": probe.gaps(("idle",)),
            "phases": {phase: dataclasses.asdict(stats) for phase, stats in probe.stats().items()},
            "load": os.getloadavg()[0]}


# -- event-loop stalls in the situations of issue 19 ---------------------------------------------

SITUATIONS = ("first-launch", "model-load", "resize", "review", "undo", "consolidate")
"""What ``--gui-stall`` measures (see the module docstring)."""
RESIZE_VIEWS = ("records", "timeline", "layers", "map")
RESIZE_SIZES = ((1600, 1000), (900, 600), (1280, 800), (1500, 700), (1000, 900))


async def _idle() -> None:
    """Until the window's background work is done (the task runner's queue empty)."""
    await asyncio.sleep(0.05)
    runner = _QT["runner"]
    while runner.pending():
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)


async def _stall_store(window: Any, folder: Path, source: Path) -> None:
    from engine.store import StoreSpec
    from ui.shared.dialogs import ImportProgressDialog

    if await window.open_store(StoreSpec(str(folder / "store"))) is None:
        raise RuntimeError(f"could not open a store: {window.banner_label.text()}")
    dialog = ImportProgressDialog("Import", window)
    summary = await window.run_import(source, dialog=dialog)
    dialog.accept()
    if summary is None or summary.written == 0:
        raise RuntimeError(f"the import of {source} wrote nothing")
    model = window.records.model
    while not model.settled:
        await asyncio.sleep(0.01)
    await _idle()


async def _model_load(window: Any, probe: Any, model_cache: Path, phase: str) -> None:
    from engine.embedding import EmbedderState, ModelSpec

    loop = asyncio.get_running_loop()
    # as the app loads it (app.wiring): a first launch converts in a helper process
    embedder = ModelSpec(cache_dir=str(model_cache), convert_in_child=True).embedder(
        on_state=lambda status: loop.call_soon_threadsafe(window.show_model_state, status))
    probe.phase = phase
    embedder.start_loading()
    while embedder.status().state in (EmbedderState.IDLE, EmbedderState.LOADING):
        await asyncio.sleep(0.01)
    if not embedder.is_ready():
        raise RuntimeError(f"the model did not load: {embedder.status().reason}")
    probe.phase = "after"
    await asyncio.sleep(0.3)


async def _resize(window: Any, probe: Any) -> None:
    for view in RESIZE_VIEWS:
        window.nav.setCurrentRow(list(window.views).index(view))
        await _idle()
        probe.phase = "resize"
        for width, height in RESIZE_SIZES:
            window.resize(width, height)
            await asyncio.sleep(0.15)
        probe.phase = "between"
        await asyncio.sleep(0.2)


async def _review(window: Any, probe: Any) -> None:
    review = window.views["review"]
    probe.phase = "review"
    window.nav.setCurrentRow(list(window.views).index("review"))
    await _idle()
    for _ in range(3):
        if not review.items:
            raise RuntimeError("the demo data left nothing to review")
        review.list.setCurrentRow(0)
        await review.decide(review.selected_ids(), "approve")
        await _idle()


async def _undo(window: Any, probe: Any, rows: int) -> None:
    session, model = window.session, window.records.model
    total = model.total
    snapshot = await session.runner.run(session.engine.store.view.snapshot)
    await window.records.delete_records(list(snapshot.ids[:rows]))
    while not (model.settled and model.total == total - rows):
        await asyncio.sleep(0.01)
    await _idle()
    probe.phase = "undo"
    window.undo_action.trigger()
    while not (session.pending() == 0 and model.settled and model.total == total):
        await asyncio.sleep(0.005)
    probe.phase = "after"
    await asyncio.sleep(0.3)


CONSOLIDATE_PAIRS = 100


def _planted_pairs(pairs: int) -> list[tuple[str, str]]:
    """Near-duplicate pairs for the word-overlap path: 16 words, and the same with one more
    (Jaccard 16/17 = 0.94, over every trust tier's threshold); no two pairs share a word."""
    import random

    rng = random.Random(19)
    letters = "abcdefghijklmnopqrstuvwxyz"
    made: list[tuple[str, str]] = []
    for _ in range(pairs):
        words = ["".join(rng.choice(letters) for _ in range(7)) for _ in range(17)]
        made.append((" ".join(words[:16]), " ".join(words)))
    return made


async def _consolidate(window: Any, probe: Any) -> None:
    from engine import Action, NewMemory
    from ui.records.consolidate_view import PENDING, ConsolidateDialog

    session = window.session
    for short, long in _planted_pairs(CONSOLIDATE_PAIRS):  # stored side by side, as given
        await session.runner.run(session.engine.add, NewMemory(short, importance=0.4))
        await session.runner.run(session.engine.add, NewMemory(long, importance=0.7))
    dialog = ConsolidateDialog(session, _QT["runner"], window)
    dialog.show()
    await dialog.start()
    merges = [i for i, row in enumerate(dialog.rows)
              if row.state == PENDING and row.step.action is Action.MERGED]
    if len(merges) < CONSOLIDATE_PAIRS:
        raise RuntimeError(f"the dry run found {len(merges)} merges of the "
                           f"{CONSOLIDATE_PAIRS} planted")
    await _idle()
    probe.phase = "consolidate"
    if not await dialog.apply(merges):
        raise RuntimeError(f"Apply All failed: {dialog.status.text()}")
    await _idle()
    total = window.records.model.total
    session.undo_stack.undo()
    while session.pending() or not window.records.model.settled \
            or window.records.model.total == total:
        await asyncio.sleep(0.005)
    await _idle()
    probe.phase = "after"
    dialog.close()
    await asyncio.sleep(0.3)


def situation_stall_probe(situation: str, *, model_cache: Path | None = None,
                          watch: bool = False) -> Any:
    """Event-loop gaps of the real window in one ``situation`` (:data:`SITUATIONS`); the probe.

    Phases: ``idle`` (1 s baseline just before) and the situation's own (``first-launch``,
    ``model-load``, ``resize``, ``review``, ``undo``, ``consolidate``). Meant to run once per
    process: the model's first load in a process is what start-up pays.
    """
    from app.wiring import DEMO_MEMORIES
    from tests.ui.conftest import write_import_file
    from ui.shared.loop_probe import LoopProbe
    from ui.shared.tasks import TaskRunner

    if situation not in SITUATIONS:
        raise ValueError(f"--gui-stall: unknown situation {situation!r} "
                         f"(one of {', '.join(SITUATIONS)})")
    _app, loop = _qt()
    runner = _QT["runner"] = TaskRunner()
    window = _window(runner)
    probe = LoopProbe(watch=watch)

    async def measure(folder: Path) -> None:
        shown = asyncio.Event()  # _window showed it; the first paint comes with the loop
        window.first_shown.connect(shown.set)
        await asyncio.wait_for(shown.wait(), 30)
        if situation in ("resize", "review"):
            await _stall_store(window, folder, DEMO_MEMORIES)
        elif situation in ("undo", "consolidate"):
            await _stall_store(window, folder, write_import_file(folder / "1k.jsonl", 1000))
        probe.phase = "idle"
        probe.start()
        try:
            await asyncio.sleep(1.0)
            if situation == "first-launch":  # nothing converted yet: a fresh cache
                await _model_load(window, probe, folder / "models", situation)
            elif situation == "model-load":
                await _model_load(window, probe, model_cache or folder / "models", situation)
            elif situation == "resize":
                await _resize(window, probe)
            elif situation == "review":
                await _review(window, probe)
            elif situation == "consolidate":
                await _consolidate(window, probe)
            else:
                await _undo(window, probe, 200)
        finally:
            probe.stop()
        await window.close_store()
        while runner.pending():
            await asyncio.sleep(0.01)

    try:
        with tempfile.TemporaryDirectory(prefix="bench-situation-") as tmp:
            loop.run_until_complete(measure(Path(tmp)))
    finally:
        window.close()
        runner.shutdown()
    return probe


def _situation_document(situation: str, model_cache: Path | None) -> dict[str, Any]:
    probe = situation_stall_probe(situation, model_cache=model_cache)
    return {"situation": situation, "gaps": probe.gaps((situation,)),
            "idle": probe.gaps(("idle",)),
            "phases": {phase: dataclasses.asdict(stats) for phase, stats in probe.stats().items()},
            "load": os.getloadavg()[0]}


def bench_situation_stalls(runs: int) -> list[Row]:
    """Each situation ``runs`` times, each in a fresh process: rows of the per-run max gaps.

    ``first-launch`` converts into a fresh cache every run; the shared cache of ``model-load``
    is converted by a first run that is not counted (``first-launch`` measures that).
    """
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-model-cache-") as cache:
        for situation in SITUATIONS:
            maxima, p99s, nets, idles = [], [], [], []
            for run in range(runs + (situation == "model-load")):
                done = subprocess.run(
                    [sys.executable, str(Path(__file__).resolve()), "--gui-stall", situation,
                     "--model-cache", cache, "--json"], cwd=ROOT, env=_env(cache, ""),
                    capture_output=True, text=True, timeout=900, check=True)
                document = json.loads(done.stdout.strip().splitlines()[-1])
                phase = document["phases"][situation]
                if situation == "model-load" and run == 0:  # converts the shared cache
                    continue
                maxima.append(phase["max_raw"] / 1000.0)
                p99s.append(phase["p99_raw"])
                nets.append(phase["max_net"])
                idles.append(document["phases"]["idle"]["max_raw"])
            rows.append((f"GUI stall max: {situation}", maxima,
                         f"p99 {statistics.median(p99s):.0f} ms, net max "
                         f"{statistics.median(nets):.0f} ms; idle max "
                         f"{statistics.median(idles):.0f} ms; goal <= 100 ms"))
    return rows


SERVER_COLLECTION = "bench-server-store"


def _server_store(records: int, folder: Path) -> Any:
    """A ``chroma run`` over ``folder`` holding ``records`` generated records (built once).

    The server's data stays in ``folder`` (under /tmp by default, never in git): a later run
    with the same size reuses it. Returns the entered server (exit it when done) and its URL.
    """
    from engine.store import MemoryStore, StoreSpec
    from tests.support.chroma_server import chroma_server
    from tests.ui.bigstore import build_store

    folder.mkdir(parents=True, exist_ok=True)
    server = chroma_server(folder / "data")
    url = server.__enter__()
    try:
        spec = StoreSpec(url, collection=SERVER_COLLECTION)
        existing = 0
        try:
            store = MemoryStore.open(dataclasses.replace(spec, read_only=True))
            existing = store.count()
            store.close()
        except Exception:  # a missing collection reads as empty
            existing = 0
        if existing != records:
            if existing:
                import chromadb

                from engine.store import close_client

                client = chromadb.HttpClient(host=url.split("//")[1].split(":")[0],
                                             port=int(url.rsplit(":", 1)[1]))
                try:
                    client.delete_collection(SERVER_COLLECTION)
                finally:
                    close_client(client)
            # stderr: `mnemoscope --json bench` reads this process's stdout as JSON
            print(f"building {records:,} records on the server (cached in {folder}) …",
                  file=sys.stderr, flush=True)
            print(f"built in {build_store(url, records, collection=SERVER_COLLECTION):.0f} s",
                  file=sys.stderr, flush=True)
    except BaseException:
        server.__exit__(None, None, None)
        raise
    return server, url


def bench_server_store(records: int, runs: int, folder: Path) -> list[Row]:
    """Issue 24: a Chroma server store's first page and filtered pages before its full view.

    The store: ``records`` records of ``tests/ui/bigstore.py`` on a ``chroma run`` over
    ``folder`` (built once); the rows: :func:`server_pages`, the full view read twice at most.
    """
    from engine.query import RecordQuery
    from tests.ui.bigstore import AGENTS, LAYERS

    server, url = _server_store(records, folder)
    try:
        # Record i: agent AGENTS[i % 4], layer LAYERS[i % 6] (tests/ui/bigstore.py): 1 in 12.
        return server_pages(url, SERVER_COLLECTION, records, runs,
                            filtered=RecordQuery(agent_id=AGENTS[0], layer=LAYERS[2], limit=200),
                            text="About TOPIC 42",  # 1 in 97, another case
                            full_view_runs=max(1, min(runs, 2)))
    finally:
        server.__exit__(None, None, None)


def server_pages(url: str, collection: str, records: int, runs: int, *, filtered: Any,
                 text: str, full_view_runs: int) -> list[Row]:
    """Time the records table of the server store ``collection`` at ``url`` from the server.

    Each run connects anew (``MemoryEngine.open(defer_view=True)``, what the window does) and
    times, from the server: connecting (Chroma's count), the first page of the records table
    (the default query: archived records hidden, newest written first), the second page (its
    ids already selected by the first), the page of ``filtered`` (a ``RecordQuery``) and a page
    of the text filter ``text`` (``where_document``). Same run: a plain Chroma ``get`` of 200
    records, and (``full_view_runs`` times; 0: not measured, the row is left out) the full-view
    open these replace (every record read into the process before the first page;
    ``MemoryEngine.open`` without ``defer_view``).

    Returns:
        Rows in this order: connect, first page, second page, filtered page, text page, the
        Chroma ``get``, then the full-view open if it was measured.
    """
    import chromadb

    from engine.memory_engine import MemoryEngine
    from engine.query import RecordQuery
    from engine.store import StoreSpec, close_client

    spec = StoreSpec(url, collection=collection, read_only=True)
    timings: dict[str, list[float]] = {name: [] for name in (
        "connect", "first page", "next page", "filtered page", "text page",
        "chroma get", "full view")}
    shown: dict[str, int] = {}
    counting: dict[str, list[float]] = {}  # a scanned page's exact count, taken after it
    for _ in range(runs):
        started = time.perf_counter()
        engine = MemoryEngine.open(spec, defer_view=True)
        timings["connect"].append(time.perf_counter() - started)
        try:
            for name, query in (("first page", RecordQuery(limit=200)),
                                ("next page", RecordQuery(offset=200, limit=200)),
                                ("filtered page", filtered),
                                ("text page", RecordQuery(text=text, limit=200))):
                started = time.perf_counter()
                page = engine.server_rows(query)
                timings[name].append(time.perf_counter() - started)
                shown[name] = page.total
                if not page.counted:  # the table shows "at least" and counts on a worker
                    started = time.perf_counter()
                    shown[name] = engine.server_count(query)
                    counting.setdefault(name, []).append(time.perf_counter() - started)
                assert not engine.view_ready
        finally:
            engine.close()
        host, port = url.split("//")[1].split(":")
        client = chromadb.HttpClient(host=host, port=int(port))
        try:
            chroma = client.get_collection(collection, embedding_function=None)
            started = time.perf_counter()
            chroma.get(limit=200, include=["documents", "metadatas"])
            timings["chroma get"].append(time.perf_counter() - started)
        finally:  # its HTTP connections (left to the GC, a test process warns later)
            close_client(client)
    for _ in range(full_view_runs):
        started = time.perf_counter()
        engine = MemoryEngine.open(spec)
        engine.list_rows(RecordQuery(limit=200))
        timings["full view"].append(time.perf_counter() - started)
        engine.close()
    size = f"{records:,}-record server store"

    def counted(name: str) -> str:
        if name not in counting:
            return ""
        return (f"; read from the newest records, exact count taken after the page in "
                f"{statistics.median(counting[name]) * 1000:,.0f} ms")

    rows: list[Row] = []
    rows.append((f"connect ({size})", timings["connect"], "count only"))
    rows.append((f"first page, server ({size})", timings["first page"],
                 f"{shown['first page']:,} shown"))
    rows.append((f"second page, server ({size})", timings["next page"],
                 "offset 200 (a filter's ids are selected by its first page)"))
    rows.append((f"agent + layer page, server ({size})", timings["filtered page"],
                 f"{shown['filtered page']:,} match{counted('filtered page')}"))
    rows.append((f"text filter page, server ({size})", timings["text page"],
                 f"{shown['text page']:,} match"))
    rows.append(("plain Chroma get of 200 records", timings["chroma get"], "peer"))
    if timings["full view"]:
        rows.append((f"full-view open + first page ({size})", timings["full view"],
                     "what the server path replaces"))
    return rows


def main() -> int:
    """Run the benchmarks and print the table (or, with --stall N --json, the stall JSON)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--store", type=Path,
                        default=ROOT / ".pytest_cache" / "d" / "mnemoscope-store-100k-v1"
                        / "store")
    parser.add_argument("--build", type=int, default=0,
                        help="build a store of N records in a temp dir instead of --store")
    parser.add_argument("--skip-store", action="store_true")
    parser.add_argument("--stall", type=int, default=0,
                        help="measure event-loop gaps during an import of N records")
    parser.add_argument("--gui-stall", choices=SITUATIONS, default=None,
                        help="event-loop gaps in one situation (one run; with --json)")
    parser.add_argument("--situations", action="store_true",
                        help="add the situation stall rows (each situation --runs times)")
    parser.add_argument("--model-cache", type=Path, default=None,
                        help="with --gui-stall model-load: the OpenVINO conversion cache")
    parser.add_argument("--json", action="store_true",
                        help="with --stall or --gui-stall: print JSON only")
    parser.add_argument("--server", type=int, default=0,
                        help="issue 24: first and filtered pages of an N-record Chroma server "
                        "store before its full view (only this; the store is cached)")
    parser.add_argument("--server-cache", type=Path,
                        default=Path(tempfile.gettempdir()) / "mnemoscope-bench-server")
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    if args.server:
        rows = bench_server_store(args.server, max(1, args.runs),
                                  args.server_cache / f"{args.server}")
        _print_rows(rows, baseline=statistics.median(rows[-1][1]), base="× full view")
        return 0
    if args.stall and args.json:
        print(json.dumps(_stall_document(args.stall)))
        return 0
    if args.gui_stall and args.json:
        print(json.dumps(_situation_document(args.gui_stall, args.model_cache)))
        return 0
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
        runs = max(1, min(args.runs, 3))
        rows += bench_first_page(store, runs)
        rows += bench_process_first_page(store, runs)
    if args.stall:
        probe = ingest_stall_probe(args.stall)
        rows += [(f"event-loop gap, {phase} ({args.stall:,} records)",
                  [g / 1000.0 for g in probe.raw[phase]], f"max {max(probe.raw[phase]):.1f} ms")
                 for phase in probe.raw]
        print(probe.summary())
    if args.situations:
        rows += bench_situation_stalls(args.runs)
    _print_rows(rows, baseline=statistics.median(rows[0][1]))
    return 0


def _print_rows(rows: list[Row], *, baseline: float, base: str = "× base") -> None:
    print(f"\nload average {os.getloadavg()[0]:.1f}")
    print(f"{'what':58} {'n':>5} {'median':>9} {'p95':>9} {base:>7}  note")
    for name, values, note in rows:
        median, p95 = statistics.median(values), _pct(values, 0.95)
        print(f"{name:58} {len(values):5d} {median * 1000:7.0f}ms {p95 * 1000:7.0f}ms"
              f" {median / baseline:7.3f}  {note}")


if __name__ == "__main__":
    sys.exit(main())
