"""What waits for a store's full view, in words (issue 24, Chroma server stores at scale).

A store opened without a usable view cache — a Chroma server store, typically, which has none —
shows its records at once: the records browser pages, filters and searches through Chroma
(``MemoryEngine.server_rows``). The full local view (every record's columns and vector) is read
behind it, and the features that score, map or compare every record wait for it: each says so
over its page instead of blocking, and the status bar names them with how far the load has got.
No Qt here: the window puts these words on its labels and empty states.
"""

from __future__ import annotations

__all__ = ["FULL_VIEW_FEATURES", "loading_status", "waiting_message"]

FULL_VIEW_FEATURES: dict[str, str] = {
    "timeline": "Timeline",
    "pipeline": "Pipeline",
    "review": "Review",
    "retrieval": "Retrieval",
    "map": "Map",
    "layers": "Layers",
    "secrets": "Secrets",
    "fate": "Fate",
}
"""Navigation name → title of the views that need the full view (the window gives them the
session once it is read; Records and Budget do not wait)."""


def _progress(done: int, total: int) -> str:
    return f"{done:,} of {total:,}" if total else "starting"


def loading_status(done: int, total: int) -> str:
    """The status bar while the full view loads, e.g. ``Loading the full view for Map, …
    34,000 of 120,000``."""
    names = ", ".join(FULL_VIEW_FEATURES.values())
    return f"Loading the full view for {names}… {_progress(done, total)}"


def waiting_message(name: str, done: int, total: int) -> tuple[str, str]:
    """The title and sentence over view ``name`` (a navigation name) while it waits."""
    title = FULL_VIEW_FEATURES.get(name, name.capitalize())
    return (f"{title} waits for the full view ({_progress(done, total)} records read)",
            f"{title} works on every record, so it starts once they are all in this window. "
            "Records already browses, filters and searches the store.")
