"""Fewer cyclic-GC passes while a batch allocates many short-lived objects.

Batch ingest creates records, stage data and events by the hundred thousand; at CPython's
default first-generation threshold (700 allocations) the collector runs every few memories and
now and then walks every object of the process (Chroma, the model, the view). Measured on 2,000
LoCoMo turns with precomputed vectors: 4.3–5.0 CPU-s at (700, 10, 10), 3.8–4.1 CPU-s at
(10000, 10, 10) — the same garbage is collected, in fewer and larger passes
(docs/ingest.md, "Ingest throughput").

The threshold is process-wide, so :func:`fewer_collections` counts its users: the first raises
the first-generation threshold, the last puts back what it found. Nothing else changes: cycles
are still collected, generations 1 and 2 keep their ratios.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["BATCH_THRESHOLD", "fewer_collections"]

BATCH_THRESHOLD = 10_000

_lock = threading.Lock()
_users = 0
_saved: tuple[int, int, int] | None = None


@contextmanager
def fewer_collections(threshold: int = BATCH_THRESHOLD) -> Iterator[None]:
    """Raise the first-generation GC threshold to ``threshold`` (if lower) while in the block.

    Re-entrant and safe from several threads: the threshold found by the first user is restored
    when the last one leaves.
    """
    global _users, _saved
    with _lock:
        if _users == 0:
            _saved = gc.get_threshold()
            if _saved[0] < threshold:
                gc.set_threshold(threshold, _saved[1], _saved[2])
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None
