"""Builds the long-lived objects once and wires them: engine, task runner, window."""

from __future__ import annotations

import argparse
import asyncio
import sys

from app.settings import Settings, server_ledger_path
from engine.embedding import SentenceTransformerEmbedder
from engine.errors import EngineError
from engine.memory_engine import EngineConfig, MemoryEngine
from engine.store import StoreSpec

__all__ = ["launch"]


def launch(args: argparse.Namespace, settings: Settings) -> int:
    """Create the Qt application and the window, open the store off the GUI thread, run."""
    import qasync
    from PySide6.QtWidgets import QApplication

    from ui.main_window import MainWindow
    from ui.tasks import TaskRunner

    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv[:1])
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    runner = TaskRunner()
    window = MainWindow()
    window.show()
    embedder = SentenceTransformerEmbedder(settings.model_path) if settings.load_model else None
    spec = StoreSpec(settings.store, token=settings.store_token,
                     read_only=bool(getattr(args, "read_only", False)))
    ledger = server_ledger_path(settings, spec.location, spec.collection) \
        if spec.is_remote else None
    engines: list[MemoryEngine] = []

    async def open_store() -> None:
        if embedder is not None:
            embedder.start_loading()
        try:
            engine = await runner.run(MemoryEngine.open, spec, ledger_path=ledger,
                                      embedder=embedder,
                                      config=EngineConfig(redaction=settings.redaction))
        except EngineError as exc:
            window.show_error(str(exc))
            return
        engines.append(engine)
        window.show_store(spec.location, engine.count(), engine.read_only)

    with loop:
        loop.create_task(open_store())
        closed = asyncio.Event()
        app.lastWindowClosed.connect(closed.set)
        loop.run_until_complete(closed.wait())
    for engine in engines:
        engine.close()
    runner.shutdown()
    return 0
