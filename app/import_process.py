"""Bulk imports into an embedded store run in a child process, so the GUI never stalls.

Why a process and not a thread: chromadb's Rust bindings keep the GIL for the whole of an insert
(chroma PR #3873 released it for reads only), so an in-process bulk write freezes the GUI thread
for as long as each batch takes — measured 0.4–4 s per 500-record batch at 10K records. The
application controller (:mod:`app.controller`) closes its engine (releasing the store lock), this
module runs the import in ``python -m app.import_process`` against the same store, and the
controller reopens the store after. It lives in ``app`` because the child builds the engine it
imports into: ``ui`` never builds an engine (issue 20).
Progress comes back as JSON lines on the child's stdout; Cancel is a line on its stdin. The child
runs at a lower CPU priority (nice 5 where the OS has it): on a busy machine the GUI thread then
wins the CPU over the import. Measured with two CPU burners beside a 5K-record import (load 5-7):
nice 0 — import 80 s, event-loop gaps p99 24 ms, max 168 ms; nice 5 — 137 s, p99 9.8 ms, max
79 ms; nice 10 — 211 s, p99 11.3 ms, max 119 ms. On an idle machine niceness costs nothing.

Protocol (one JSON object per line on stdout): ``{"progress": [done, total]}`` while it runs,
then ``{"outcomes": [[line, action, record_id, reason, text, target_text], ...]}`` lines
(200 per line) and ``{"summary": {"source", "cancelled", "import_id", "format", "keep"}}``, or
``{"error": "message"}``. A conversation import keeps the turns ``--keep`` selects (``default``,
``all`` or ``N%``, as the CLI's ``import-conversation --keep``), the cut the user previewed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine import EmbedBackend, ModelSpec, SalienceCut, StoreSpec
from engine.errors import EngineError, StoreUnavailable
from ui.imports.importing import (
    ImportSummary,
    LineOutcome,
    import_conversation,
    import_jsonl,
    keep_argument,
)

__all__ = ["main", "run_in_child"]

ProgressFn = Callable[[int, int], None]
CancelFn = Callable[[], bool]
_ROOT = Path(__file__).resolve().parent.parent


_OUTCOMES_PER_LINE = 200
"""Outcomes travel in small lines: ``json.loads`` holds the GIL for a whole line."""

BACKGROUND_NICE = 5
"""How much the child lowers its CPU priority (POSIX ``nice``; see the module docstring)."""


def _lower_priority() -> None:
    """Make the import background work for the OS scheduler (no-op where there is no nice)."""
    if hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(BACKGROUND_NICE)


def _outcome_from_json(item: list[Any]) -> LineOutcome:
    line, action, record_id, reason, text, target_text = item
    return LineOutcome(int(line), str(action), record_id, str(reason), str(text),
                       str(target_text))


def run_in_child(spec: StoreSpec, path: Path, *, conversation_agent: str | None = None,
                 keep: SalienceCut | None = None, model: ModelSpec | None = None,
                 progress: ProgressFn | None = None,
                 cancelled: CancelFn | None = None) -> ImportSummary:
    """Import ``path`` into the embedded store ``spec`` in a child process (blocking).

    The caller must have closed its own engine on ``spec`` (the child takes the store lock).
    ``keep`` is the salience cut of a conversation import (default: the salient turns).

    Raises:
        EngineError: what the child reported (e.g. the store is locked or the file unreadable).
        StoreUnavailable: the child died without a result.
    """
    command = [sys.executable, "-m", "app.import_process", "--store", spec.location,
               "--collection", spec.collection, "--path", str(path)]
    if conversation_agent is not None:
        command += ["--conversation-agent", conversation_agent]
        if keep is not None:
            command += ["--keep", keep_argument(keep)]
    if model is not None:
        command += ["--model", model.path or "", "--embed-backend", model.backend.value,
                    "--model-cache", model.cache_dir or ""]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errors:
        child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=errors, text=True, env=env, cwd=_ROOT)
        assert child.stdin is not None and child.stdout is not None
        result: dict[str, Any] | None = None
        outcomes: list[LineOutcome] = []
        asked = False
        try:
            for line in child.stdout:
                message = json.loads(line) if line.startswith("{") else {}
                if "progress" in message and progress is not None:
                    progress(int(message["progress"][0]), int(message["progress"][1]))
                elif "outcomes" in message:
                    outcomes.extend(_outcome_from_json(item) for item in message["outcomes"])
                elif "summary" in message or "error" in message:
                    result = message
                if not asked and cancelled is not None and cancelled():
                    asked = True
                    child.stdin.write("cancel\n")
                    child.stdin.flush()
        finally:
            child.stdin.close()
            child.wait()
            child.stdout.close()
        errors.seek(0)
        stderr = errors.read().strip()
    if result is None:
        raise StoreUnavailable(f"the import process stopped without a result "
                               f"(exit {child.returncode}): {stderr[-500:]}")
    if "error" in result:
        raise EngineError(str(result["error"]))
    told = result["summary"]
    return ImportSummary(str(told["source"]), outcomes, bool(told["cancelled"]),
                         told.get("import_id"), told.get("format"), told.get("keep"))


def main(argv: list[str] | None = None) -> int:
    """The child: import one file into one embedded store, reporting on stdout."""
    from engine import MemoryEngine, redact_text

    parser = argparse.ArgumentParser(prog="python -m app.import_process")
    parser.add_argument("--store", required=True)
    parser.add_argument("--collection", required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--conversation-agent")
    parser.add_argument("--keep", default="default")
    parser.add_argument("--model", nargs="?", const="", default=None)
    parser.add_argument("--embed-backend", choices=list(EmbedBackend),
                        default=EmbedBackend.OPENVINO.value)
    parser.add_argument("--model-cache", default="")
    args = parser.parse_args(argv)
    _lower_priority()
    stop = threading.Event()

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "cancel":
                stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()

    def emit(message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if done >= total or now - last[0] >= 0.1:  # ten updates a second are plenty
            last[0] = now
            emit({"progress": [done, total]})

    embedder = None
    if args.model is not None:
        embedder = ModelSpec(args.model or None, EmbedBackend(args.embed_backend),
                             args.model_cache or None).embedder()
        embedder.wait_ready()
    try:
        engine = MemoryEngine.open(StoreSpec(args.store, collection=args.collection),
                                   embedder=embedder, redactor=redact_text)
        try:
            if args.conversation_agent:
                summary = import_conversation(engine, args.path, agent_id=args.conversation_agent,
                                              keep=SalienceCut.parse(args.keep),
                                              progress=progress, cancelled=stop.is_set)
            else:
                summary = import_jsonl(engine, args.path, progress=progress,
                                       cancelled=stop.is_set)
        finally:
            engine.close()
    except EngineError as exc:
        emit({"error": str(exc)})
        return 1
    rows = [[o.line, o.action, o.record_id, o.reason, o.text, o.target_text]
            for o in summary.outcomes]
    for start in range(0, len(rows), _OUTCOMES_PER_LINE):
        emit({"outcomes": rows[start:start + _OUTCOMES_PER_LINE]})
    emit({"summary": {"source": summary.source, "cancelled": summary.cancelled,
                      "import_id": summary.import_id, "format": summary.format,
                      "keep": summary.keep}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
