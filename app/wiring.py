"""Builds the long-lived objects once and wires them: engine factory, task runner, window.

Three ways to run the window, all from here:

* :func:`launch` — the desktop app. The window is shown first; the embedding model starts loading
  on its own thread and the store opens on a worker once the window has painted.
* ``--screenshot DIR`` — render every view with the demo data to ``DIR/<view>.png``, and
  docs/gui.md's workflow as ``DIR/workflow-<n>-<step>.png``, and exit
  (``MNEMOSCOPE_SCREENSHOT_VARIANTS=1`` adds ``<view>-light``, ``-dark`` and ``-small``).
* ``--self-test`` — open the app offscreen on a temporary store, exercise each view, print a
  report, exit 0 (all passed) or 1.

``MNEMOSCOPE_BENCHMARK_STARTUP=1`` prints ``window-shown <seconds since launch()>`` when the
window first paints (``=exit``: and exits; ``=first-page``: then also ``first-page <seconds>``
once the store's records table holds its first page, and exits). benchmarks/bench_gui.py times
the whole process from outside. Nothing heavy (torch, chromadb, sentence-transformers) is
imported before the window shows.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from functools import lru_cache, partial
from pathlib import Path
from typing import TYPE_CHECKING

from app.log_masking import ToggledLogMasking, masked_log_handlers
from app.settings import Settings, SettingsFile, default_config_dir, server_ledger_path
from engine import (
    DEFAULT_COLLECTION,
    CollectionInfo,
    EmbedBackend,
    EmbedderState,
    EmbedderStatus,
    MemoryConfig,
    MemoryEngine,
    ModelSpec,
    SentenceTransformerEmbedder,
    StoreSpec,
    engine_config_from_env,
    memory_config_from_env,
)
from engine.errors import ConfigInvalid, EngineError

if TYPE_CHECKING:
    from PySide6.QtWidgets import QApplication, QMenu

    from app.controller import AppController
    from app.crash import CrashReports
    from engine import FieldMapping, MemoryReader, SalienceCut
    from engine.llm import LLMGateway, LLMSettings, SecretStore
    from ui.imports.importing import ImportSummary
    from ui.main_window import MainWindow, Preferences, WindowServices
    from ui.session_views import AppControl
    from ui.settings.provider_dialog import LLMServices
    from ui.shared.tasks import TaskRunner

__all__ = ["ASSETS", "DEMO_CONVERSATION", "DEMO_MEMORIES", "DEMO_WORKSPACE", "attach_remote",
           "launch", "open_engine", "save_mapping", "window_log_masking"]

ASSETS = Path(__file__).resolve().parent.parent / "assets"
DEMO_MEMORIES = ASSETS / "demo" / "memories.jsonl"
DEMO_CONVERSATION = ASSETS / "demo" / "conversation.json"
DEMO_WORKSPACE = ASSETS / "demo_workspace"
VIEW_NAMES = ("records", "timeline", "pipeline", "review", "retrieval", "map")
SHOTS = (*((name, name) for name in VIEW_NAMES), ("secrets", "redaction-scan"), ("fate", "fate"),
         ("budget", "budget"), ("tasks", "tasks"), ("layers", "layers-social"),
         ("layers", "layers-procedural"), ("layers", "layers-spatial"))
"""Issues 9-10: (view, file name) pairs rendered by ``--screenshot``."""


def _make_gateway(secrets: SecretStore, engine: MemoryEngine, settings: LLMSettings
                  ) -> LLMGateway:
    """Issue 9: the LLM gateway for the Budget view, on the store's ledger and event bus.

    ``settings`` are the file's ``llm`` section under the ``MNEMOSCOPE_LLM_*`` environment, or
    what the provider dialog saved since. The key is read at call time from its environment
    variable or ``secrets`` (the OS keyring), never from settings.json. Prompts are redacted
    before sending (DESIGN decision 8).
    """
    from engine.llm import LLMGateway, key_lookup

    return LLMGateway(settings, ledger=engine.ledger, events=engine.events, clock=engine.clock,
                      redactor=_redact, redact=True, api_key=key_lookup(settings, secrets))


def _llm_services(settings_file: SettingsFile) -> LLMServices:
    """The provider dialog's and the gateway's services: settings, saving, the OS keyring.

    A bad ``llm`` section or variable does not stop the app: defaults are used and the Budget
    view says what is wrong.
    """
    from engine.llm import KeyringStore, LLMSettings, env_overrides, llm_settings_to_json
    from ui.settings.provider_dialog import LLMServices

    problem = ""
    try:
        llm = settings_file.current.llm_settings()
    except ConfigInvalid as exc:
        llm, problem = LLMSettings(), f"LLM settings ignored: {exc}"

    def save(updated: LLMSettings) -> None:
        settings_file.update(llm=llm_settings_to_json(updated))

    secrets = KeyringStore()
    return LLMServices(settings=llm, make_gateway=partial(_make_gateway, secrets), save=save,
                       secrets=secrets, env_overrides=env_overrides(), problem=problem)


def _redact(text: str) -> str:
    """The views' and the LLM gateway's redaction: the engine's patterns for this process."""
    return _memory_config().redactor().redact(text)


@lru_cache(maxsize=1)
def _memory_config() -> MemoryConfig:
    """The ``MEMORY_*`` configuration the engine is opened with (read once).

    An invalid variable makes every store fail to open with a ``MEMORY_CONFIG_INVALID`` error
    naming it (:func:`open_engine`); until it is fixed the views mask with the default
    patterns rather than leave a view unable to draw.
    """
    try:
        return memory_config_from_env(os.environ)
    except ConfigInvalid:
        return MemoryConfig()


def forget_embedded_clients() -> None:
    """Drop Chroma's in-process client cache before (re)opening an embedded store.

    Chroma keeps one system per path per process; after a child process wrote to the store
    (:mod:`app.import_process`) that cached system is stale ("Error finding id"). The window holds
    one store at a time and closes it before opening the next, so clearing is safe here.
    """
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient.clear_system_cache()


def open_engine(settings: Settings, embedder: SentenceTransformerEmbedder | None,
                spec: StoreSpec, *, beside: bool = False) -> MemoryEngine:
    """Open the engine for ``spec`` (blocking: run it on a worker).

    The columnar view is deferred when it must be read from Chroma: the window shows the first
    page at once and indexes the store in the background (``StoreSession.start_indexing``).

    Args:
        beside: Open a second store while the window's is open (the target of an adoption):
            Chroma's client cache is kept, since the open store's client lives in it.
    """
    spec = settings.with_store_timeouts(spec)
    if not spec.is_remote and not beside:
        forget_embedded_clients()
    ledger = server_ledger_path(settings, spec.location, spec.collection) \
        if spec.is_remote else None
    # MEMORY_* as the CLI reads them (a bad value is an error naming the variable); the engine
    # masks with its own Redactor, built from MEMORY_REDACT_PATTERNS.
    config = engine_config_from_env(os.environ, redaction=settings.redaction,
                                    sampling_rate=settings.sampling_rate)
    return MemoryEngine.open(spec, ledger_path=ledger, embedder=embedder, config=config,
                             defer_view=True)


def gui_model_spec(settings: Settings) -> ModelSpec:
    """The model the window loads: the settings' model, converted (on a first launch) in a
    helper process, since torch and the conversion in the app's process stall the GUI thread
    (:mod:`engine.embedding_convert`)."""
    return dataclasses.replace(settings.model_spec(), convert_in_child=True)


def _bulk_import(model: ModelSpec | None, spec: StoreSpec, path: Path,
                 conversation_agent: str | None, progress: Callable[[int, int], None],
                 cancelled: Callable[[], bool], /, *,
                 keep: SalienceCut | None = None) -> ImportSummary:
    from app.import_process import run_in_child

    return run_in_child(spec, path, conversation_agent=conversation_agent, keep=keep,
                        model=model, progress=progress, cancelled=cancelled)


def attach_remote(url: str, token: str,
                  on_state: Callable[[str | None], None]) -> MemoryReader:
    """Issue 10: a read-only reader over a running ``mnemoscope serve`` (httpx loads here)."""
    from engine import RemoteReader

    return RemoteReader.connect(url, token, on_follow_state=on_state)


def save_mapping(settings_file: SettingsFile, location: str, collection: str,
                 mapping: FieldMapping | None) -> None:
    """Issue 22: save (None: forget) a collection's field mapping in the settings file, as
    ``mnemoscope map-collection`` does; the next open of the collection reads through it.

    Raises:
        OSError: the settings file could not be written.
    """
    settings_file.update(foreign_mappings=settings_file.current.with_mapping(
        location, collection, mapping).foreign_mappings)


def _list_collections(settings: Settings, spec: StoreSpec) -> Sequence[CollectionInfo]:
    from engine import list_collections

    return list_collections(settings.with_store_timeouts(spec))


def _preferences(settings: Settings) -> Preferences:
    from ui.main_window import Preferences

    gui = settings.extra.get("gui", {}) if isinstance(settings.extra, dict) else {}
    gui = gui if isinstance(gui, dict) else {}
    recent_attach = gui.get("recent_attach", [])
    return Preferences(theme=settings.theme, recent_stores=settings.recent_stores,
                       recent_attach=tuple(str(u) for u in recent_attach)
                       if isinstance(recent_attach, list) else (),
                       geometry=str(gui.get("geometry", "")),
                       window_state=str(gui.get("window_state", "")),
                       demo_offered=bool(gui.get("demo_offered", False)),
                       # on when configured so, or when it was on as the window closed (it
                       # was forgotten: secrets shown again after a restart)
                       redaction=settings.redaction or gui.get("redaction") is True,
                       lifecycle=bool(gui.get("lifecycle", True)))


def _config_dir() -> Path:
    return Path(os.environ["MNEMOSCOPE_CONFIG_DIR"]) \
        if os.environ.get("MNEMOSCOPE_CONFIG_DIR") else default_config_dir()


def _preference_saver(settings_file: SettingsFile) -> Callable[[Preferences], None]:
    def save(prefs: Preferences) -> None:
        extra = dict(settings_file.current.extra)
        extra["gui"] = {"geometry": prefs.geometry, "window_state": prefs.window_state,
                        "demo_offered": prefs.demo_offered,
                        "recent_attach": list(prefs.recent_attach),
                        "lifecycle": prefs.lifecycle,
                        # the window's toggle, remembered apart from settings.redaction (the
                        # CLI's, the API's and the window's floor): turned off here, it must not
                        # unmask the commands someone configured to mask
                        "redaction": prefs.redaction}
        try:
            settings_file.update(theme=prefs.theme, recent_stores=prefs.recent_stores,
                                 extra=extra)
        except OSError as exc:  # preferences are a convenience; never crash the app over them
            print(f"warning: could not save settings in {_config_dir()}: {exc}",
                  file=sys.stderr)

    return save


def window_log_masking(window: MainWindow, redactor: Callable[[str], str]) -> ToggledLogMasking:
    """The app's log filter, masking while the window's redaction mode is on (DESIGN
    decision 8: logs are an exit too). Install it with
    :func:`app.log_masking.masked_log_handlers`."""
    masking = ToggledLogMasking(redactor, enabled=window.redaction.enabled)
    window.redaction.changed.connect(masking.set_enabled)
    return masking


def _app() -> QApplication:
    from PySide6.QtWidgets import QApplication

    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv[:1])
    app.setApplicationName("Mnemoscope")
    app.setOrganizationName("Mnemoscope")
    return app


def _version() -> str:
    from app import __version__

    return str(__version__)


def launch(args: argparse.Namespace, settings: Settings, *,
           crashes: CrashReports | None = None) -> int:
    """Create the Qt application and the window, open the store off the GUI thread, run.

    Args:
        crashes: The crash hook the app runs under (:func:`app.crash.crash_reports`): once the
            window exists, its reports are masked like the log while redaction is on.
    """
    started = time.perf_counter()
    import qasync

    from app.controller import AppController
    from ui.main_window import MainWindow, WindowServices
    from ui.shared.tasks import TaskRunner
    from ui.shared.theme import apply_theme

    app = _app()
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    runner = TaskRunner()
    special = bool(args.screenshot or args.self_test)
    if special:
        settings = dataclasses.replace(settings, theme="light", recent_stores=(),
                                       extra={"gui": {"demo_offered": True}})
    apply_theme(app, settings.theme)
    load_model = settings.load_model and not getattr(args, "no_model", False) \
        and not args.self_test
    windows: list[MainWindow] = []

    def on_model_state(status: EmbedderStatus) -> None:  # called on the loading thread
        if windows and not loop.is_closed():
            loop.call_soon_threadsafe(windows[0].show_model_state, status)

    embedder = gui_model_spec(settings).embedder(on_state=on_model_state) \
        if load_model else None
    settings_file = SettingsFile(settings, _config_dir(), persist=not special)
    services = WindowServices(
        runner=runner,
        # the current settings: a mapping saved from the window applies to the next open
        open_engine=lambda spec: open_engine(settings_file.current, embedder, spec),
        list_collections=lambda spec: _list_collections(settings, spec),
        save_preferences=_preference_saver(settings_file),
        redactor=_redact,
        preferences=_preferences(settings),
        default_store=settings.store,
        demo_memories=DEMO_MEMORIES if DEMO_MEMORIES.is_file() else None,
        demo_conversation=DEMO_CONVERSATION if DEMO_CONVERSATION.is_file() else None,
        demo_workspace=DEMO_WORKSPACE if DEMO_WORKSPACE.is_dir() else None,
        version=_version(),
        bulk_import=partial(_bulk_import, settings.model_spec() if load_model else None),
        llm=_llm_services(settings_file),
        attach=attach_remote,
        save_mapping=partial(save_mapping, settings_file),
        open_target=lambda spec: open_engine(settings_file.current, embedder, spec,
                                             beside=True),
    )
    controller = AppController(services)
    window = MainWindow(services, controller)
    windows.append(window)
    hints = app.styleHints()
    hints.colorSchemeChanged.connect(lambda _scheme: window.on_system_scheme_changed())
    result = [0]

    async def main() -> None:
        if args.screenshot:
            result[0] = await _screenshots(app, window, controller, services,
                                           Path(args.screenshot), embedder)
            return
        if args.self_test:
            result[0] = await _self_test(window, controller, runner, settings.model_spec())
            return
        shown = asyncio.Event()
        window.first_shown.connect(shown.set)
        window.show()
        await shown.wait()
        if os.environ.get("MNEMOSCOPE_BENCHMARK_STARTUP"):
            heavy = [m for m in ("torch", "chromadb", "sentence_transformers")
                     if m in sys.modules]
            print(f"window-shown {time.perf_counter() - started:.3f} "
                  f"heavy={','.join(heavy) or 'none'}", flush=True)
            if os.environ["MNEMOSCOPE_BENCHMARK_STARTUP"] == "exit":
                return
        if embedder is not None:
            embedder.start_loading()
        else:
            window.show_model_state(EmbedderStatus(
                EmbedderState.FAILED, "none", 384, "model loading is off (--no-model)"))
        collection = getattr(args, "collection", None) or DEFAULT_COLLECTION
        await controller.open_store(StoreSpec(settings.store, token=settings.store_token,
                                          read_only=bool(getattr(args, "read_only", False)),
                                          collection=collection))
        if os.environ.get("MNEMOSCOPE_BENCHMARK_STARTUP") == "first-page":
            model = window.records.model
            await _wait_for(lambda: model.settled and model.is_loaded(0), 600, "a first page")
            print(f"first-page {time.perf_counter() - started:.3f} "
                  f"preview={model.preview}", flush=True)
            return
        closed = asyncio.Event()
        app.lastWindowClosed.connect(closed.set)
        await closed.wait()

    try:
        masking = window_log_masking(window, _redact)
        if crashes is not None:
            crashes.mask = masking.text
        with masked_log_handlers(masking, sys.stderr), loop:
            loop.run_until_complete(main())
            loop.run_until_complete(controller.close_store())
    finally:
        runner.shutdown()
    return result[0]


async def _wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.02)


async def _demo_store(window: MainWindow, controller: AppController, folder: Path) -> None:
    """Open a fresh store in ``folder`` and import the demo data set into it."""
    session = await controller.open_store(StoreSpec(str(folder / "store")))
    if session is None:
        raise RuntimeError("could not open a temporary store")
    summary = await controller.run_import(DEMO_MEMORIES, conversation_agent=None,
                                          progress=lambda _done, _total: None,
                                          cancelled=lambda: False)
    if summary.written == 0:
        raise RuntimeError("the demo import wrote nothing")
    await _wait_for(lambda: window.records.model.settled and window.records.model.total > 0,
                    30, "the first page")


async def _select_row(window: MainWindow, row: int) -> None:
    window.records.table.selectRow(row)
    record = window.records.model.record_at(row)
    await _wait_for(lambda: record is not None and window.records.detail.record is not None
                    and window.records.detail.record.id == record.id, 30, "the record detail")


async def _prepare_steer_views(window: MainWindow, controller: AppControl,
                               runner: TaskRunner, folder: Path) -> None:
    """Fill the issue 9 views for screenshots: a scan, a merged record's fate, the demo
    workspace with a task selected."""
    from engine import EventFilter

    session = controller.session
    if session is None:
        return
    hits = await window.scan.scan()
    if hits:
        item = window.scan.table.topLevelItem(0)
        if item is not None:
            item.setSelected(True)
    merges = await runner.run(session.engine.events.query,
                              EventFilter(kinds=["merge-applied"], limit=200))
    # a paraphrase (the least similar merge), so the two texts of the story differ
    merge = min(merges, key=lambda e: 2.0 if e.similarity is None else e.similarity,
                default=None)
    incoming = merge.payload.get("incoming_id") if merge is not None else None
    if isinstance(incoming, str):
        await window.fate.load(incoming)  # as the context menu's Show fate does
    workspace = folder / "workspace"
    shutil.copytree(DEMO_WORKSPACE, workspace,
                    ignore=shutil.ignore_patterns(".mnemoscope"))
    graph = await window.tasks_view.open_workspace(workspace)
    if graph is not None:
        busiest = max((n for n in graph.nodes if n.is_task), default=None,
                      key=lambda n: sum(1 for e in graph.edges if n.id in (e.source, e.target)))
        if busiest is not None:
            window.tasks_view.select(busiest.id)
            await window.tasks_view.preview_scene()
    await window.budget.refresh()


async def _provider_dialog_shots(app: QApplication, window: MainWindow, out: Path,
                                 variants: bool) -> None:
    """Settings → LLM Provider… after a test against a local server that is not running
    (a port just closed on 127.0.0.1, so the shot is the same on every machine)."""
    import socket

    from ui.shared.theme import apply_theme

    dialog = window.open_provider_settings()
    if dialog is None:
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dialog.provider.setCurrentIndex(dialog.provider.findData("ollama"))
    dialog.base_url.setText(f"http://127.0.0.1:{port}/v1")
    dialog.model.setText("llama3.2")
    dialog.budget.setValue(1.0)
    await dialog.test_connection()
    await asyncio.sleep(0.2)
    dialog.grab().save(str(out / "provider-settings.png"))
    if variants:
        size = dialog.size()
        for theme, suffix in (("dark", "-dark"), ("light", "-light")):
            apply_theme(app, theme)
            await asyncio.sleep(0.2)
            dialog.resize(size)
            dialog.grab().save(str(out / f"provider-settings{suffix}.png"))
            dialog.resize(dialog.minimumSizeHint())
            await asyncio.sleep(0.2)
            small = "-small-dark" if theme == "dark" else "-small"
            dialog.grab().save(str(out / f"provider-settings{small}.png"))
    dialog.reject()


async def _screenshots(app: QApplication, window: MainWindow, controller: AppController,
                       services: WindowServices, out: Path,
                       embedder: SentenceTransformerEmbedder | None) -> int:
    out.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="mnemoscope-shots-"))
    try:
        if embedder is not None:
            embedder.start_loading()
            await _wait_for(lambda: embedder.status().state.value in ("ready", "failed"), 180,
                            "the embedding model")
            window.show_model_state(embedder.status())
        window.resize(1280, 800)
        window.show()
        await _demo_store(window, controller, folder)
        window.banner.hide()
        await _select_row(window, 2)
        variants = bool(os.environ.get("MNEMOSCOPE_SCREENSHOT_VARIANTS"))
        await _prepare_steer_views(window, controller, services.runner, folder)
        # first: its test request is recorded, so the Budget view lists a call
        await _provider_dialog_shots(app, window, out, variants)
        await window.budget.refresh()
        for view, name in SHOTS:
            window.nav.setCurrentRow(list(window.views).index(view))
            if view in VIEW_NAMES and view != "records":
                await window.observe.prepare_screenshot(view)
            if view == "layers":
                await window.layers.prepare_screenshot(name.removeprefix("layers-"))
            await _save_shot(app, window, out / name, variants)
        window.resize(1280, 800)
        workflow = await _workflow_shots(window, out)
        await _attached_shot(app, window, controller, services, folder, out, variants)
        print(f"wrote {', '.join(f'{n}.png' for _v, n in SHOTS)}, provider-settings.png, "
              f"{', '.join(workflow)}, attached.png to {out}")
        return 0
    except (EngineError, RuntimeError, TimeoutError) as exc:
        print(f"screenshot failed: {exc}", file=sys.stderr)
        return 1
    finally:
        await controller.close_store()
        shutil.rmtree(folder, ignore_errors=True)


WORKFLOW_TEXT = "coffee machine"
"""docs/gui.md, "A workflow: find a duplicate, follow it to its survivor": what step 1 types."""


async def _workflow_shots(window: MainWindow, out: Path) -> list[str]:
    """docs/gui.md's workflow as ``workflow-1-search.png`` … ``workflow-5-survivor.png``.

    The same steps as ``tests/ui/test_record_texts.py::test_the_documented_workflow``, on the
    demo data: search Records, the row's context menu, Show fate, the absorbed duplicate's own
    story, Open survivor. Shots are 1100×640 and saved with an 8-bit palette (they are read
    in docs, not zoomed: the five weigh a few hundred KB).
    """
    from PySide6.QtCore import QPoint, Qt
    from PySide6.QtGui import QPainter

    records, fate = window.records, window.fate
    names: list[str] = []
    window.resize(1100, 640)

    async def shot(name: str, menu: QMenu | None = None) -> None:
        await asyncio.sleep(0.3)
        image = window.grab().toImage()
        if menu is not None:  # a popup is a window of its own: paint it where it opened
            painter = QPainter(image)
            painter.drawPixmap(window.mapFromGlobal(menu.pos()), menu.grab())
            painter.end()
        # a palette without dithering: flat UI colours stay flat and compress well
        image = image.convertToFormat(image.Format.Format_Indexed8,
                                      Qt.ImageConversionFlag.ThresholdDither
                                      | Qt.ImageConversionFlag.AvoidDither)
        image.save(str(out / f"{name}.png"))
        names.append(f"{name}.png")

    window.nav.setCurrentRow(list(window.views).index("records"))
    records.filters.text.setText(WORKFLOW_TEXT)
    model = records.model
    await _wait_for(lambda: model.settled and model.query.text == WORKFLOW_TEXT, 15,
                    "the search")
    rows = [model.record_at(row) for row in range(model.total)]
    survivor = next((r for r in rows if r is not None
                     and r.content.startswith("Jordan likes the coffee machine")), None)
    if survivor is None:
        raise RuntimeError("the demo data has no merged 'coffee machine' record")
    await _select_row(window, model.row_of(survivor.id) or 0)
    await shot("workflow-1-search")

    menu = window.links.menu(records.table)
    if menu is None:
        raise RuntimeError("the Records row has no context menu")
    row_rect = records.table.visualRect(model.index(model.row_of(survivor.id) or 0, 1))
    menu.popup(records.table.viewport().mapToGlobal(row_rect.center() + QPoint(40, 0)))
    await shot("workflow-2-menu", menu)
    show_fate = next(a for a in menu.actions() if a.text() == "Show fate")
    menu.close()
    show_fate.trigger()
    await _wait_for(lambda: fate.fate is not None and fate.fate.record_id == survivor.id, 15,
                    "the survivor's fate")
    steps = [fate.steps.topLevelItem(i) for i in range(fate.steps.topLevelItemCount())]
    absorbed = next((item for item in steps if item is not None
                     and item.text(2).startswith("absorbed the incoming memory")), None)
    if absorbed is None:
        raise RuntimeError("the survivor's fate lists no absorbed memory")
    fate.steps.setCurrentItem(absorbed)
    await shot("workflow-3-fate")
    records.filters.text.setText("")  # so that step 5 shows the survivor found in all records

    fate.steps.itemDoubleClicked.emit(absorbed, 2)
    await _wait_for(lambda: fate.fate is not None and fate.fate.status == "merged", 15,
                    "the duplicate's fate")
    await shot("workflow-4-duplicate")

    fate.open_button.click()
    await _wait_for(lambda: window.stack.currentWidget() is records
                    and records.detail.record is not None
                    and records.detail.record.id == survivor.id, 15, "the survivor in Records")
    await shot("workflow-5-survivor")
    window.resize(1280, 800)
    return names


async def _save_shot(app: QApplication, window: MainWindow, stem: Path, variants: bool) -> None:
    """``stem.png``; with ``variants`` also -light, -dark, -small-dark and -small."""
    from ui.shared.theme import apply_theme

    await asyncio.sleep(0.2)
    window.grab().save(f"{stem}.png")
    if not variants:
        return
    window.grab().save(f"{stem}-light.png")
    apply_theme(app, "dark")
    await asyncio.sleep(0.2)
    window.grab().save(f"{stem}-dark.png")
    window.resize(900, 600)
    await asyncio.sleep(0.2)
    window.grab().save(f"{stem}-small-dark.png")
    apply_theme(app, "light")
    await asyncio.sleep(0.2)
    window.grab().save(f"{stem}-small.png")
    window.resize(1280, 800)


async def _attached_shot(app: QApplication, window: MainWindow, controller: AppController,
                         services: WindowServices, folder: Path, out: Path,
                         variants: bool) -> None:
    """Issue 10: the window attached (read-only) to an API served over the demo store."""
    from engine.introspection import serve_in_thread

    await controller.close_store()
    runner = services.runner
    engine = await runner.run(services.open_engine,
                              StoreSpec(str(folder / "store"), read_only=True))
    server = await runner.run(partial(serve_in_thread, engine, port=0))
    try:
        if await controller.attach(server.url, server.token) is None:
            raise RuntimeError(f"could not attach to {server.url}")
        window.nav.setCurrentRow(0)
        await _wait_for(lambda: window.records.model.settled and window.records.model.total > 0,
                        30, "the attached records")
        await _select_row(window, 0)
        await _save_shot(app, window, out / "attached", variants)
    finally:
        await controller.detach()
        await runner.run(server.stop)
        await runner.run(engine.close)


async def _self_test(window: MainWindow, controller: AppController, runner: TaskRunner,
                     model_spec: ModelSpec) -> int:
    """Exercise each view on a temporary store and load the embedding model the way the app
    does; print one line per check."""
    from PySide6.QtCore import Qt

    from engine import RecordRow, SortKey
    from engine.records import Layer
    from ui.records.records_model import COLUMNS

    folder = Path(tempfile.mkdtemp(prefix="mnemoscope-selftest-"))
    results: list[tuple[str, bool, str]] = []
    view = window.records
    model = view.model

    def loaded(row: int) -> RecordRow:
        record = model.record_at(row)
        if record is None:
            raise AssertionError(f"row {row} is not loaded")
        return record

    async def check(name: str, step: Callable[[], Awaitable[str]]) -> None:
        started = time.perf_counter()
        try:
            detail = await step()
            results.append((name, True, f"{detail} ({time.perf_counter() - started:.2f} s)"))
        except Exception as exc:  # a self-test reports every failure, whatever it is
            results.append((name, False, f"{type(exc).__name__}: {exc}"))
            traceback.print_exc()

    async def open_and_import() -> str:
        window.show()
        await _demo_store(window, controller, folder)
        return f"{model.total} records after the demo import"

    async def filter_layer() -> str:
        view.filters.layer.setCurrentText(Layer.PROCEDURAL.value)
        await _wait_for(lambda: model.query.layer is Layer.PROCEDURAL and model.settled,
                        15, "the filtered page")
        layers = {loaded(r).layer for r in range(model.total) if model.is_loaded(r)}
        if layers != {Layer.PROCEDURAL}:
            raise AssertionError(f"layer filter shows {layers}")
        shown = model.total
        view.filters.clear()
        await _wait_for(lambda: model.query.layer is None and model.settled, 15, "reset")
        return f"procedural: {shown} of {model.total}"

    async def sort_importance() -> str:
        column = next(i for i, c in enumerate(COLUMNS) if c.sort is SortKey.IMPORTANCE)
        view.table.sortByColumn(column, Qt.SortOrder.AscendingOrder)
        await _wait_for(lambda: model.query.sort_by is SortKey.IMPORTANCE and model.settled,
                        15, "the sorted page")
        values = [loaded(r).importance for r in range(min(model.total, 50))]
        if values != sorted(values):
            raise AssertionError("rows are not in ascending importance")
        return f"first importance {values[0]:.2f}, 50th {values[-1]:.2f}"

    async def edit_undo() -> str:
        session = controller.session
        assert session is not None
        await _select_row(window, 0)
        record = view.detail.record
        assert record is not None
        # the demo import may already be on the undo stack (an import is one undo step)
        steps = session.undo_stack.count()
        view.detail.importance.setValue(0.987 if record.importance != 0.987 else 0.5)
        view.detail.save_button.click()
        await _wait_for(lambda: session.undo_stack.count() == steps + 1, 15, "the save")
        saved = await session.runner.run(session.engine.get, record.id)
        window.undo_action.trigger()
        await _wait_for(lambda: session.pending() == 0, 15, "the undo")
        restored = await session.runner.run(session.engine.get, record.id)
        if restored.importance != record.importance or saved.importance == record.importance:
            raise AssertionError(f"edit {saved.importance} / undo {restored.importance}")
        return f"importance {record.importance} → {saved.importance} → {restored.importance}"

    async def delete_undo() -> str:
        session = controller.session
        assert session is not None
        before = model.total
        record = model.record_at(0)
        assert record is not None
        await view.delete_records([record.id])
        await _wait_for(lambda: model.total == before - 1, 15, "the deletion")
        window.undo_action.trigger()
        await _wait_for(lambda: model.total == before, 15, "the undo of the deletion")
        return f"{before} → {before - 1} → {model.total}"

    async def export_redacted() -> str:
        target = folder / "export.jsonl"
        count = await window.run_export(target, redact=True)
        text = target.read_text(encoding="utf-8")
        if count != model.total or "AKIA" in text or "ghp_" in text:
            raise AssertionError(f"export wrote {count} records; secrets present: "
                                 f"{'AKIA' in text or 'ghp_' in text}")
        return f"{count} records, secrets masked"

    async def embedding_model() -> str:
        # The installed app must run the model on the backend it was built for: a silent
        # fallback (e.g. OpenVINO's CPU plug-in missing from the bundle) halves the rate.
        embedder = model_spec.embedder()
        ready = await runner.run(embedder.wait_ready, 300.0)
        status = embedder.status()
        if not ready:
            raise AssertionError(f"the model did not load: {status.reason or status.state}")
        if model_spec.backend is not EmbedBackend.TORCH \
                and not status.backend.startswith("OpenVINO"):
            raise AssertionError(f"the model runs on {status.backend}, not on OpenVINO as "
                                 f"asked ({model_spec.backend.value})")
        vectors = await runner.run(embedder.embed, ["self-test: is the model awake?"])
        if vectors.shape != (1, status.dimension):
            raise AssertionError(f"embedding shape {vectors.shape}")
        return f"{status.model_name} on {status.backend}, ready in {status.load_seconds:.1f} s"

    try:
        await check("embedding model on its intended backend", embedding_model)
        await check("open a store and import the demo data", open_and_import)
        if results[-1][1]:
            await check("records: filter by layer (engine query)", filter_layer)
            await check("records: sort by importance (engine sort)", sort_importance)
            await check("records: edit, save, undo", edit_undo)
            await check("records: delete, undo", delete_undo)
            await check("export with redaction", export_redacted)
    finally:
        await controller.close_store()
        shutil.rmtree(folder, ignore_errors=True)
    for name, ok, detail in results:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    failed = sum(1 for _, ok, _ in results if not ok)
    print(f"self-test: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0
