"""What waits for a store's full view, in words (issue 24, Chroma server stores at scale).

A store opened without a usable view cache — a Chroma server store, typically, which has none —
shows its records at once: the records browser pages, filters and searches through Chroma
(``MemoryEngine.server_rows``), and Find similar asks the server's HNSW index. The full local
view (every record's columns and vector, read into this process) is read only when a feature
that scores, maps or compares every record is opened: that feature says so over its page with
the read's progress and a Cancel ("Timeline needs every record in this process: reading 12,400
of 100,000"), and so does the status bar ("Timeline: reading 12,400 of 100,000"). A cancelled
read leaves the store open; the waiting features offer to read again. No Qt here: the window
puts these words on its labels and empty states.
"""

from __future__ import annotations

__all__ = ["FULL_VIEW_FEATURES", "MENU_FEATURES", "loading_sentence", "loading_status",
           "unread_message", "waiting_message"]

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
"""Navigation name → title of the views that need the full view (opening one reads it; the
window gives them the session once it is read). Records and Budget do not wait."""

MENU_FEATURES: tuple[str, ...] = ("Consolidate Duplicates", "Export", "Import", "Demo data",
                                  "Adopt", "editing records", "the agent filter's choices",
                                  "sorting by another column", "the tag filter")
"""What else needs the full view: off (or waiting) until it is read, named in the docs and in
Store → Read Every Record's tooltip."""


def _title(name: str) -> str:
    return FULL_VIEW_FEATURES.get(name, name[:1].upper() + name[1:])


def _progress(done: int, total: int) -> str:
    return f"{done:,} of {total:,}" if total else "starting"


def loading_status(feature: str, done: int, total: int) -> str:
    """The status bar's short words while the full view is read for ``feature`` (a title; ""
    when it is read at open or from the Store menu), e.g. ``Timeline: reading 12,400 of
    100,000`` (the bar is shared with the store, count, model and redaction labels)."""
    if not feature:
        return f"Reading every record: {_progress(done, total)}"
    return f"{feature}: reading {done:,} of {total:,}" if total else \
        f"{feature}: starting to read every record"


def loading_sentence(feature: str, done: int, total: int) -> str:
    """The whole sentence (the status bar's tooltip, the waiting views' title), e.g.
    ``Timeline needs every record in this process: reading 12,400 of 100,000``."""
    if not feature:
        return f"Reading every record into this process: {_progress(done, total)}"
    return f"{feature} needs every record in this process: reading {_progress(done, total)}"


def waiting_message(name: str, done: int, total: int) -> tuple[str, str]:
    """The title and sentence over view ``name`` (a navigation name) while the read runs."""
    title = _title(name)
    return (loading_sentence(title, done, total),
            f"{title} works on every record, so it starts once they are all read from the "
            "store. Records already browses, filters and searches the store; Cancel stops "
            "the read and keeps the store open.")


def unread_message(name: str, *, cancelled: bool, error: str = "") -> tuple[str, str]:
    """The title and sentence over view ``name`` while the full view is not read (not yet,
    or its read was cancelled or failed: ``error`` says why)."""
    title = _title(name)
    if error and not cancelled:
        why = f"Reading them failed: {error}."
    elif cancelled:
        why = "Reading them was cancelled."
    else:
        why = "They have not been read yet."
    return (f"{title} needs every record in this process",
            f"{why} Records browses, filters and searches the store without them; "
            f"read them to open {title}.")
