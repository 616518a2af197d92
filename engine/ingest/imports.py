"""Imports as one undoable step: the import log and the plan that takes an import back.

Every record an import creates or changes is written with the import's id as the edit-history
``batch_id`` (all chunks share it), so the ledger knows, per record, its state before the import
(``before`` of its first edit) and the state the import left (``after`` of its last edit).
The import log (ledger component ``imports``) keeps one row per import: the file, the counts,
the review items and hash aliases it added, and whether it was undone.

Undoing an import (:func:`plan_undo`, applied by ``MemoryEngine.undo_import``) deletes what it
inserted, writes back what it merged into or updated, restores what it deleted (a
consolidation pass, logged here with kind ``consolidation``, deletes the records it merged
away), withdraws its pending review items and drops its hash aliases. A record changed after
the import (edited, merged again, deleted) is left alone and named as a conflict: undo never
overwrites work done since.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.clock import Clock
from engine.errors import RecordNotFound, ValidationError
from engine.ledger import Ledger
from engine.records import MemoryRecord

__all__ = ["ImportEntry", "ImportLog", "UndoPlan", "plan_undo"]

_MIGRATIONS = (
    """
    CREATE TABLE imports (
        id           TEXT PRIMARY KEY,
        started_at   REAL NOT NULL,
        finished_at  REAL,
        path         TEXT NOT NULL,
        kind         TEXT NOT NULL,
        agent_id     TEXT,
        counts       TEXT NOT NULL,
        review_ids   TEXT NOT NULL,
        aliases      TEXT NOT NULL,
        undone_at    REAL,
        undo_counts  TEXT
    );
    CREATE INDEX imports_started ON imports(started_at);
    """,
)


@dataclass(frozen=True, slots=True)
class ImportEntry:
    """One import, as the log keeps it.

    Attributes:
        id: The import id (also the edit-history batch id of its writes).
        started_at: Epoch ms.
        finished_at: Epoch ms, or None when the import stopped part way (a failure or a kill);
            what it committed is still in the edit history and can be undone (after a failure
            the counts, review items and aliases are those of the committed chunks; after a
            kill they are empty).
        path: The file imported.
        kind: ``jsonl`` or ``conversation``.
        agent_id: The agent of a conversation import.
        counts: Lines per action.
        review_ids: Review items the import queued.
        aliases: ``(content_hash, record_id)`` pairs its merges added.
        undone_at: Epoch ms, when undone.
        undo_counts: What the undo did.
    """

    id: str
    started_at: float
    finished_at: float | None
    path: str
    kind: str
    agent_id: str | None
    counts: Mapping[str, int]
    review_ids: tuple[str, ...]
    aliases: tuple[tuple[str, str], ...]
    undone_at: float | None = None
    undo_counts: Mapping[str, int] | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON form (times as epoch ms)."""
        return {"id": self.id, "started_at": self.started_at, "finished_at": self.finished_at,
                "path": self.path, "kind": self.kind, "agent_id": self.agent_id,
                "counts": dict(self.counts), "review_ids": list(self.review_ids),
                "undone_at": self.undone_at,
                "undo_counts": None if self.undo_counts is None else dict(self.undo_counts)}


class ImportLog:
    """The ``imports`` table of the ledger."""

    def __init__(self, ledger: Ledger, clock: Clock) -> None:
        self._ledger = ledger
        self._clock = clock
        if not ledger.read_only or ledger.version("imports") > 0:
            ledger.migrate("imports", _MIGRATIONS)

    def start(self, import_id: str, path: str, kind: str, agent_id: str | None) -> None:
        """Record that an import began (before its first chunk is written)."""
        with self._ledger.transaction() as conn:
            conn.execute(
                "INSERT INTO imports(id, started_at, path, kind, agent_id, counts, review_ids,"
                " aliases) VALUES (?, ?, ?, ?, ?, '{}', '[]', '[]')",
                (import_id, self._clock.now(), path, kind, agent_id))

    def finish(self, import_id: str, counts: Mapping[str, int], review_ids: Sequence[str],
               aliases: Sequence[tuple[str, str]], *, complete: bool = True) -> None:
        """Record what an import did (``complete=False``: it stopped part way, and this is
        what it committed; ``finished_at`` stays empty)."""
        with self._ledger.transaction() as conn:
            conn.execute(
                "UPDATE imports SET finished_at = ?, counts = ?, review_ids = ?, aliases = ?"
                " WHERE id = ?",
                (self._clock.now() if complete else None, json.dumps(dict(counts)),
                 json.dumps(list(review_ids)), json.dumps([list(pair) for pair in aliases]),
                 import_id))

    def discard(self, import_id: str) -> None:
        """Forget an import that was refused before its first write (its file could not be
        read): listing it as "stopped part way" would suggest it wrote something."""
        with self._ledger.transaction() as conn:
            conn.execute("DELETE FROM imports WHERE id = ?", (import_id,))

    def mark_undone(self, import_id: str, counts: Mapping[str, int]) -> None:
        """Record that the import was undone, and what the undo did."""
        with self._ledger.transaction() as conn:
            conn.execute("UPDATE imports SET undone_at = ?, undo_counts = ? WHERE id = ?",
                         (self._clock.now(), json.dumps(dict(counts)), import_id))

    def get(self, import_id: str) -> ImportEntry:
        """The import with ``import_id``.

        Raises:
            RecordNotFound: no import has that id.
        """
        rows = self._ledger.query("SELECT * FROM imports WHERE id = ?", (import_id,)) \
            if self._ledger.version("imports") else []
        if not rows:
            raise RecordNotFound(import_id, kind="import", hint=" (see `mnemoscope imports`)")
        return _entry(rows[0], self._ledger)

    def entries(self, limit: int = 50) -> list[ImportEntry]:
        """The most recent imports, newest first."""
        if not self._ledger.version("imports"):
            return []
        rows = self._ledger.query("SELECT * FROM imports ORDER BY started_at DESC, id LIMIT ?",
                                  (limit,))
        return [_entry(row, self._ledger) for row in rows]


def _entry(row: Any, ledger: Ledger) -> ImportEntry:
    try:
        return _read_entry(row)
    except (ValueError, TypeError, RecursionError) as exc:  # not JSON, or nested past reading
        raise ledger.damaged("imports", row["id"], exc) from exc


def _read_entry(row: Any) -> ImportEntry:
    return ImportEntry(
        id=row["id"], started_at=row["started_at"], finished_at=row["finished_at"],
        path=row["path"], kind=row["kind"], agent_id=row["agent_id"],
        counts=json.loads(row["counts"]), review_ids=tuple(json.loads(row["review_ids"])),
        aliases=tuple((str(a), str(b)) for a, b in json.loads(row["aliases"])),
        undone_at=row["undone_at"],
        undo_counts=None if row["undo_counts"] is None else json.loads(row["undo_counts"]))


@dataclass(frozen=True, slots=True)
class UndoPlan:
    """What undoing an import does (shown for confirmation, then applied).

    Attributes:
        import_id: The import.
        delete: Records the import inserted, as they are now (unchanged since).
        restore: Records the import merged into or updated, as they were before it.
        withdraw: Its review items still pending.
        conflicts: ``(record_id, why)`` of records changed since the import: left alone.
    """

    import_id: str
    delete: tuple[MemoryRecord, ...]
    restore: tuple[MemoryRecord, ...]
    withdraw: tuple[str, ...]
    conflicts: tuple[tuple[str, str], ...] = field(default=())

    @property
    def counts(self) -> dict[str, int]:
        """How many records and review items each step concerns."""
        return {"deleted": len(self.delete), "restored": len(self.restore),
                "withdrawn": len(self.withdraw), "conflicts": len(self.conflicts)}

    def to_json(self) -> dict[str, Any]:
        """JSON form: counts, the records' ids and the conflicts."""
        return {"import_id": self.import_id, "counts": self.counts,
                "delete": [r.id for r in self.delete], "restore": [r.id for r in self.restore],
                "withdraw": list(self.withdraw),
                "conflicts": [{"id": i, "why": why} for i, why in self.conflicts]}


def plan_undo(entry: ImportEntry, edits: Sequence[tuple[str, MemoryRecord | None,
                                                        MemoryRecord | None]],
              current: Mapping[str, MemoryRecord], pending_reviews: Sequence[str]) -> UndoPlan:
    """Plan the undo of ``entry``.

    Args:
        entry: The import.
        edits: ``(record_id, before, after)`` of its edit-history rows, oldest first.
        current: The records those rows concern that are stored now, by id.
        pending_reviews: Which of its review items are still pending.

    Raises:
        ValidationError: the import was undone already.
    """
    if entry.undone_at is not None:
        raise ValidationError("import", entry.id, "this import was undone already")
    first: dict[str, MemoryRecord | None] = {}
    last: dict[str, MemoryRecord | None] = {}
    for record_id, before, after in edits:
        first.setdefault(record_id, before)
        last[record_id] = after
    delete: list[MemoryRecord] = []
    restore: list[MemoryRecord] = []
    conflicts: list[tuple[str, str]] = []
    for record_id, before in first.items():
        left = last[record_id]
        now = current.get(record_id)
        if left is None:  # deleted by the batch (a consolidation's merged-away records)
            if before is None:
                continue
            if now is not None:
                conflicts.append((record_id, "stored again since"))
            else:
                restore.append(before)
            continue
        if now is None:
            conflicts.append((record_id, "deleted since the import"))
            continue
        if now.version != left.version or now.content_hash != left.content_hash:
            conflicts.append((record_id, f"changed since the import (version {now.version}, "
                                         f"the import left version {left.version})"))
            continue
        if before is None:
            delete.append(now)
        else:
            restore.append(before)
    return UndoPlan(entry.id, tuple(delete), tuple(restore),
                    tuple(r for r in entry.review_ids if r in set(pending_reviews)),
                    tuple(conflicts))
