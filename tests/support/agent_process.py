"""An agent in its own process: ``python -m tests.support.agent_process STORE FILE.jsonl``.

Opens the embedded store for writing (taking its lock), runs the layer service as an agent
would, imports the JSONL file through the ingest pipeline, lets the layer service write the
summaries and patterns, and exits. Prints one JSON line: ``{"written": n, "layers": m}``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from engine.memory_engine import MemoryEngine
from engine.store import StoreSpec


def main(argv: list[str]) -> int:
    """Import ``argv[1]`` into the store at ``argv[0]``; 0 when every line was accepted."""
    store, source = Path(argv[0]), Path(argv[1])
    engine = MemoryEngine.open(StoreSpec(str(store)))
    try:
        service = engine.layers  # hooked to the events before anything is written
        report = engine.import_jsonl(source)
        handled = service.flush()
        written = sum(1 for line in report.lines if line.id)
        print(json.dumps({"written": written, "layers": handled}), flush=True)
        return 0 if not report.errors else 1
    finally:
        engine.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
