"""The edit history: every change to a record, before and after, in the ledger's ``edits`` table.

Undo and redo replay it (the GUI writes the "before" records back), the record fate and the
import log read it, and ``doctor --repair`` completes it (:meth:`EditHistory.created_ids`).
Rows of one operation share a batch id (an import, a consolidation, a multi-record delete).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from engine.clock import Clock
from engine.errors import EngineError, ValidationError
from engine.ledger import Ledger
from engine.records import MemoryRecord

__all__ = ["COMPONENT", "EditEntry", "EditHistory", "EditPair"]

COMPONENT = "records"
"""The ledger component the ``edits`` table migrates under (its name since the first release)."""

_MIGRATIONS = (
    """
    CREATE TABLE edits (
        seq       INTEGER PRIMARY KEY AUTOINCREMENT,
        ts        REAL NOT NULL,
        batch_id  TEXT NOT NULL,
        op        TEXT NOT NULL,
        record_id TEXT NOT NULL,
        actor     TEXT NOT NULL,
        before    TEXT,
        after     TEXT
    );
    CREATE INDEX edits_record ON edits(record_id);
    CREATE INDEX edits_batch ON edits(batch_id);
    """,
)

EditPair = tuple[MemoryRecord | None, MemoryRecord | None]
"""A record before and after one change (None before a create, None after a delete)."""


@dataclass(frozen=True, slots=True)
class EditEntry:
    """One row of the edit history (undo/redo, record fate)."""

    seq: int
    ts: float
    batch_id: str
    op: str
    record_id: str
    actor: str
    before: MemoryRecord | None
    after: MemoryRecord | None


class EditHistory:
    """Writes and reads the ``edits`` table of one ledger.

    Args:
        ledger: The store's ledger; a writable one gets the table on construction.
        clock: Timestamps of the rows.
    """

    def __init__(self, ledger: Ledger, clock: Clock) -> None:
        self._ledger = ledger
        self._clock = clock
        if not ledger.read_only:
            ledger.migrate(COMPONENT, _MIGRATIONS)

    def record(self, op: str, pairs: Sequence[EditPair], *, actor: str,
               batch_id: str | None = None) -> str:
        """Append one row per (before, after) pair in one transaction.

        Returns:
            The batch id of the rows (``batch_id``, or a new one).

        Raises:
            ValidationError: a pair with neither a before nor an after record (nothing written).
        """
        batch = batch_id or uuid.uuid4().hex
        now = self._clock.now()
        rows = [(now, batch, op, _edit_id(before, after), actor,
                 json.dumps(before.to_json()) if before else None,
                 json.dumps(after.to_json()) if after else None)
                for before, after in pairs]
        with self._ledger.transaction() as conn:
            conn.executemany(
                "INSERT INTO edits(ts, batch_id, op, record_id, actor, before, after)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        return batch

    def entries(self, record_id: str | None = None, *, limit: int = 200,
                batch_id: str | None = None) -> list[EditEntry]:
        """Rows newest first, optionally of one record or one batch; ``limit`` <= 0: all."""
        if not self.kept:
            return []
        clauses = [(column, value) for column, value in (("record_id", record_id),
                                                         ("batch_id", batch_id)) if value]
        where = "WHERE " + " AND ".join(f"{column} = ?" for column, _ in clauses) \
            if clauses else ""
        params: list[object] = [value for _, value in clauses]
        rows = self._ledger.query(
            f"SELECT * FROM edits {where} ORDER BY seq DESC LIMIT ?", [*params, limit or -1])
        out = []
        for row in rows:
            try:
                before, after = (MemoryRecord.from_json(json.loads(row[side])) if row[side]
                                 else None for side in ("before", "after"))
            except (ValueError, TypeError, KeyError, RecursionError, EngineError) as exc:
                # not JSON, nested past reading, a record that does not validate: a damaged
                # row (or a ledger from someone else), not a bug
                raise self._ledger.damaged("edits", row["seq"], exc) from exc
            out.append(EditEntry(row["seq"], row["ts"], row["batch_id"], row["op"],
                                 row["record_id"], row["actor"], before, after))
        return out

    @property
    def kept(self) -> bool:
        """The ledger has the table (a read-only ledger of another tool's store may not)."""
        return self._ledger.version(COMPONENT) > 0

    def created_ids(self) -> set[str]:
        """Ids of every record with a ``create`` row (a ledger without the table: none)."""
        if not self.kept:
            return set()
        return {row["record_id"] for row in
                self._ledger.query("SELECT DISTINCT record_id FROM edits WHERE op = 'create'")}


def _edit_id(before: MemoryRecord | None, after: MemoryRecord | None) -> str:
    record = after if after is not None else before
    if record is None:
        raise ValidationError("edit", None, "an edit needs a record before or after")
    return record.id
