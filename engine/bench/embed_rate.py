"""The default embedder's rate on a file of texts, as the running build has it.

    python -m engine.bench.embed_rate TEXTS.txt [--runs 3]     # from source
    mnemoscope -m engine.bench.embed_rate TEXTS.txt             # inside the installed app

Loads the model the way the app does (``MNEMOSCOPE_EMBED_BACKEND``, the bundled model in an
installed app), then encodes the file's lines (one text per line) ``--runs`` times without the
cache and prints one JSON line: the backend, the model-ready time and texts per second per run
and their median. ``packaging/measure_startup.py`` runs it in the frozen app and in the source
tree on the same texts to compare the two.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from engine.embedding import EmbedBackend, ModelSpec

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Print the rate as one JSON line; exit 1 when the model does not load."""
    parser = argparse.ArgumentParser(prog="embed_rate", description=__doc__.splitlines()[0])
    parser.add_argument("texts", type=Path, help="a UTF-8 file, one text per line")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    texts = [line for line in args.texts.read_text(encoding="utf-8").splitlines() if line]
    backend = EmbedBackend(os.environ.get("MNEMOSCOPE_EMBED_BACKEND", EmbedBackend.OPENVINO))
    started = time.perf_counter()
    embedder = ModelSpec(backend=backend).embedder()
    if not embedder.wait_ready(600):
        print(json.dumps({"error": embedder.status().reason}), file=sys.stderr)
        return 1
    ready = time.perf_counter() - started
    rates: list[float] = []
    for _ in range(args.runs):
        began = time.perf_counter()
        embedder.encode_raw(texts)
        rates.append(len(texts) / (time.perf_counter() - began))
    print(json.dumps({"backend": embedder.status().backend, "texts": len(texts),
                      "model_ready_s": round(ready, 3), "rates": [round(r, 1) for r in rates],
                      "median": round(statistics.median(rates), 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
