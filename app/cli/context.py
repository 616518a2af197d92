"""What every CLI command handler gets: output helpers and the engine for the chosen store."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from app.settings import Settings, server_ledger_path
from engine.memory_engine import MemoryEngine, engine_config_from_env
from engine.store import StoreSpec

__all__ = ["CliContext"]

MODEL_WAIT_SECONDS = 180.0


@dataclass
class CliContext:
    """Per-invocation state shared by command handlers.

    Attributes:
        settings: The resolved settings (file ← env ← options).
        json: ``--json`` was given: print exactly one JSON document on stdout.
        load_model: Load the embedding model for commands that embed (``--no-model`` clears it).
        collection: Chroma collection to open.
    """

    settings: Settings
    json: bool = False
    load_model: bool = True
    collection: str | None = None
    stdout: IO[str] = field(default_factory=lambda: sys.stdout)
    stderr: IO[str] = field(default_factory=lambda: sys.stderr)
    _engine: MemoryEngine | None = None
    _closers: list[Callable[[], None]] = field(default_factory=list)

    def print(self, text: str = "") -> None:
        """Human output on stdout."""
        print(text, file=self.stdout)

    def warn(self, text: str) -> None:
        """A notice on stderr (never mixes with JSON on stdout)."""
        print(text, file=self.stderr)

    def emit_json(self, document: Any) -> None:
        """The one JSON document of a ``--json`` run."""
        json.dump(document, self.stdout, indent=2, ensure_ascii=False, allow_nan=False,
                  default=str)
        self.stdout.write("\n")

    def emit_json_line(self, document: Any) -> None:
        """One compact JSON document on its own line, flushed at once (``--stream``: a reader
        sees each line as soon as it is true, and a killed run leaves whole lines)."""
        self.stdout.write(json.dumps(document, ensure_ascii=False, allow_nan=False,
                                     default=str) + "\n")
        self.stdout.flush()

    def store_spec(self, *, read_only: bool = False) -> StoreSpec:
        """The store selected by ``--store`` / ``MNEMOSCOPE_STORE`` / the default."""
        kwargs: dict[str, Any] = {}
        if self.collection:
            kwargs["collection"] = self.collection
        return StoreSpec(self.settings.store, token=self.settings.store_token,
                         read_only=read_only, **kwargs)

    def open_engine(self, *, read_only: bool = False, embed: bool = False) -> MemoryEngine:
        """Open (once) the engine on the selected store.

        Args:
            embed: The command embeds text: load the model and wait for it (unless
                ``--no-model``), so records get real embeddings rather than the fallback.
        """
        if self._engine is not None:
            return self._engine
        embedder = None
        if self.load_model and self.settings.load_model:
            embedder = self.settings.model_spec().embedder()
            if embed and not embedder.wait_ready(MODEL_WAIT_SECONDS):
                self.warn(f"note: embedding model unavailable "
                          f"({embedder.status().reason or 'still loading'}); "
                          "using token Jaccard similarity")
        spec = self.store_spec(read_only=read_only)
        ledger = server_ledger_path(self.settings, spec.location, spec.collection) \
            if spec.is_remote else None
        config = engine_config_from_env(os.environ, sampling_rate=self.settings.sampling_rate,
                                        redaction=self.settings.redaction)
        self._engine = MemoryEngine.open(spec, ledger_path=ledger, embedder=embedder,
                                         config=config)
        return self._engine

    def close(self) -> None:
        """Close what was opened."""
        for closer in reversed(self._closers):
            closer()
        self._closers.clear()
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def on_close(self, closer: Callable[[], None]) -> None:
        """Run ``closer`` when the command finishes."""
        self._closers.append(closer)
