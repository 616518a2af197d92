"""The review queue and the dedup memory kept in the ledger.

Deferred merges (gray zone, category mismatch, possible contradiction) wait here for a person:
:meth:`ReviewQueue.approve` applies the merge, :meth:`ReviewQueue.reject` keeps both and
remembers the pair so it is not asked again. Both are idempotent (approving an approved item
returns the same outcome). The incoming memory and its embedding are stored with the item, so
approving later needs neither the source file nor the model.

The same component keeps two small indexes the pipeline's hash cache reads:

* ``hash_aliases``: content hashes merged into a record, so re-ingesting a merged paraphrase
  is an exact duplicate of the record it was merged into (ingesting a file twice changes
  nothing);
* ``review_rejections``: (content hash, record id) pairs a person said are different.

A pending item is identified by its incoming memory: the content hash in its merge partition
(agent, privacy, layer; :func:`review_key`). While one waits, the same memory arriving again is
``skipped`` (``pending_review``) whatever record it now resembles most, so re-ingesting a file
never queues a second item for a line (issue 18: the second run of a file used to defer lines
again against records its own later lines had inserted).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.clock import Clock
from engine.errors import EngineError, RecordNotFound
from engine.ingest.contradiction import Conflict
from engine.ingest.jsonl import new_memory_from_json, new_memory_to_json
from engine.ledger import Ledger
from engine.records import NewMemory, format_timestamp

__all__ = ["ReviewItem", "ReviewKey", "ReviewLookup", "ReviewQueue", "ReviewStatus",
           "review_key"]

_IN_CHUNK = 500  # SQLite host parameters per IN (...) query

_MIGRATIONS = (
    """
    CREATE TABLE review_items (
        id            TEXT PRIMARY KEY,
        created_at    REAL NOT NULL,
        status        TEXT NOT NULL,
        reason        TEXT NOT NULL,
        target_id     TEXT NOT NULL,
        similarity    REAL,
        content_hash  TEXT NOT NULL,
        agent_id      TEXT NOT NULL,
        incoming_id   TEXT NOT NULL,
        incoming      TEXT NOT NULL,
        vector        BLOB,
        conflicts     TEXT NOT NULL,
        thresholds    TEXT NOT NULL,
        resolved_at   REAL,
        result_id     TEXT
    );
    CREATE INDEX review_status ON review_items(status, created_at);
    CREATE INDEX review_pair ON review_items(content_hash, target_id);
    CREATE TABLE review_rejections (
        content_hash TEXT NOT NULL,
        target_id    TEXT NOT NULL,
        created_at   REAL NOT NULL,
        PRIMARY KEY (content_hash, target_id)
    );
    CREATE TABLE hash_aliases (
        content_hash TEXT NOT NULL,
        record_id    TEXT NOT NULL,
        created_at   REAL NOT NULL,
        PRIMARY KEY (content_hash, record_id)
    );
    """,
)


ReviewKey = tuple[str, str, str, str]
"""(content hash, agent id, privacy, layer): what makes two pending items the same memory."""


def review_key(content_hash: str, new: NewMemory) -> ReviewKey:
    """The identity of an incoming memory in the review queue (see the module docstring)."""
    return (content_hash, new.agent_id, new.privacy.value, new.layer.value)


_PARTITION = ("agent_id, json_extract(incoming, '$.privacy') AS privacy,"
              " json_extract(incoming, '$.layer') AS layer")


def _row_key(row: Any) -> ReviewKey:
    return (row["content_hash"], row["agent_id"], row["privacy"], row["layer"])


class ReviewStatus(StrEnum):
    """Where a review item stands."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


@dataclass(frozen=True, slots=True)
class ReviewItem:
    """A deferred merge waiting for (or resolved by) a person.

    Attributes:
        id: Review item id.
        created_at: Epoch ms.
        status: pending / approved / rejected.
        reason: ``gray_zone``, ``category_mismatch`` or ``possible_contradiction``.
        target_id: The stored record the incoming memory would merge into.
        similarity: Their similarity.
        content_hash: Hash of the incoming content.
        incoming_id: Id the incoming memory gets (its record id after a reject, its
            ``merged_from`` entry after an approve).
        incoming: The incoming memory as supplied.
        conflicts: What the contradiction guard found.
        thresholds: Thresholds applied.
        resolved_at: When approved/rejected.
        result_id: The record that holds the result (the target after approve, the new record
            after reject).
    """

    id: str
    created_at: float
    status: ReviewStatus
    reason: str
    target_id: str
    similarity: float | None
    content_hash: str
    incoming_id: str
    incoming: NewMemory
    conflicts: tuple[Conflict, ...] = ()
    thresholds: Mapping[str, float] = field(default_factory=dict)
    resolved_at: float | None = None
    result_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Wire form (CLI ``review list --json``)."""
        return {
            "id": self.id, "created_at": format_timestamp(self.created_at),
            "status": self.status.value, "reason": self.reason, "target_id": self.target_id,
            "similarity": None if self.similarity is None else round(self.similarity, 6),
            "content_hash": self.content_hash, "incoming_id": self.incoming_id,
            "incoming": new_memory_to_json(self.incoming),
            "conflicts": [c.to_json() for c in self.conflicts],
            "thresholds": dict(self.thresholds),
            "resolved_at": format_timestamp(self.resolved_at), "result_id": self.result_id,
        }


class ReviewQueue:
    """Ledger-backed review queue, rejected pairs and merged-hash aliases.

    Args:
        ledger: The engine's ledger (migrated here under the component name ``ingest``).
        clock: Time source.
    """

    def __init__(self, ledger: Ledger, clock: Clock) -> None:
        self._ledger = ledger
        self._clock = clock
        if not ledger.read_only:
            ledger.migrate("ingest", _MIGRATIONS)

    @property
    def available(self) -> bool:
        """False for a read-only ledger without our tables (nothing was ever deferred)."""
        return self._ledger.version("ingest") > 0

    # -- items -------------------------------------------------------------------------------

    def add(self, *, reason: str, target_id: str, similarity: float | None, content_hash: str,
            incoming_id: str, incoming: NewMemory, vector: npt.NDArray[np.float32] | None,
            conflicts: Sequence[Conflict], thresholds: Mapping[str, float]) -> ReviewItem:
        """Queue a deferred merge and return the item."""
        return self.add_many([{
            "reason": reason, "target_id": target_id, "similarity": similarity,
            "content_hash": content_hash, "incoming_id": incoming_id, "incoming": incoming,
            "vector": vector, "conflicts": conflicts, "thresholds": thresholds}])[0]

    def add_many(self, specs: Sequence[Mapping[str, Any]]) -> list[ReviewItem]:
        """Queue deferred merges in one ledger transaction (all or none); keys as :meth:`add`.

        Raises:
            StoreUnavailable, StoreReadOnly: the ledger refused the write; nothing was queued.
        """
        now = self._clock.now()
        items = [ReviewItem(uuid.uuid4().hex, now, ReviewStatus.PENDING, spec["reason"],
                            spec["target_id"], spec["similarity"], spec["content_hash"],
                            spec["incoming_id"], spec["incoming"], tuple(spec["conflicts"]),
                            dict(spec["thresholds"])) for spec in specs]
        if not items:
            return items
        with self._ledger.transaction() as conn:
            conn.executemany(
                "INSERT INTO review_items(id, created_at, status, reason, target_id, similarity,"
                " content_hash, agent_id, incoming_id, incoming, vector, conflicts, thresholds)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(item.id, item.created_at, item.status.value, item.reason, item.target_id,
                  item.similarity, item.content_hash, item.incoming.agent_id, item.incoming_id,
                  json.dumps(new_memory_to_json(item.incoming)),
                  None if spec["vector"] is None
                  else np.asarray(spec["vector"], dtype=np.float32).tobytes(),
                  json.dumps([c.to_json() for c in item.conflicts]),
                  json.dumps(dict(item.thresholds)))
                 for item, spec in zip(items, specs, strict=True)])
        return items

    def get(self, item_id: str) -> ReviewItem:
        """The item with ``item_id``.

        Raises:
            RecordNotFound: no such review item.
        """
        if not self.available:
            raise RecordNotFound(item_id, kind="review item")
        rows = self._ledger.query("SELECT * FROM review_items WHERE id = ?", (item_id,))
        if not rows:
            raise RecordNotFound(item_id, kind="review item")
        return _row_to_item(rows[0], self._ledger)

    def vector(self, item_id: str) -> npt.NDArray[np.float32] | None:
        """The stored embedding of the item's incoming memory, if it had one."""
        rows = self._ledger.query("SELECT vector FROM review_items WHERE id = ?", (item_id,))
        if not rows or rows[0]["vector"] is None:
            return None
        return np.frombuffer(rows[0]["vector"], dtype=np.float32).copy()

    def items(self, status: ReviewStatus | None = ReviewStatus.PENDING, *,
             limit: int = 1000) -> list[ReviewItem]:
        """Items, oldest first; by default the pending ones."""
        if not self.available:
            return []
        if status is None:
            rows = self._ledger.query(
                "SELECT * FROM review_items ORDER BY created_at, id LIMIT ?", (limit,))
        else:
            rows = self._ledger.query(
                "SELECT * FROM review_items WHERE status = ? ORDER BY created_at, id LIMIT ?",
                (status.value, limit))
        return [_row_to_item(row, self._ledger) for row in rows]

    def pending_count(self) -> int:
        """How many items wait for a decision (all of them, not a page)."""
        if not self.available:
            return 0
        rows = self._ledger.query(
            "SELECT COUNT(*) AS n FROM review_items WHERE status = ?",
            (ReviewStatus.PENDING.value,))
        return int(rows[0]["n"])

    def pending_targets(self, key: ReviewKey) -> set[str]:
        """Targets for which the memory of ``key`` (:func:`review_key`) already waits."""
        if not self.available:
            return set()
        rows = self._ledger.query(
            f"SELECT content_hash, target_id, {_PARTITION} FROM review_items"
            " WHERE content_hash = ? AND status = ?", (key[0], ReviewStatus.PENDING.value))
        return {row["target_id"] for row in rows if _row_key(row) == key}

    def resolve(self, item_id: str, status: ReviewStatus, result_id: str) -> ReviewItem:
        """Mark an item approved or rejected (and remember a rejected pair)."""
        now = self._clock.now()
        item = self.get(item_id)
        with self._ledger.transaction() as conn:
            conn.execute("UPDATE review_items SET status = ?, resolved_at = ?, result_id = ?"
                         " WHERE id = ?", (status.value, now, result_id, item_id))
            if status is ReviewStatus.REJECTED:
                conn.execute("INSERT OR IGNORE INTO review_rejections(content_hash, target_id,"
                             " created_at) VALUES (?, ?, ?)",
                             (item.content_hash, item.target_id, now))
        return self.get(item_id)

    def reopen(self, item_id: str) -> ReviewItem:
        """Put a resolved item back in the queue (the GUI's undo of approve / reject).

        Forgets what the decision remembered: the rejected pair and the merged-hash alias of
        this item's content and target. The caller restores the records themselves
        (``MemoryEngine.restore`` / ``delete``, which keep their own edit history).
        """
        item = self.get(item_id)
        with self._ledger.transaction() as conn:
            conn.execute("UPDATE review_items SET status = ?, resolved_at = NULL,"
                         " result_id = NULL WHERE id = ?",
                         (ReviewStatus.PENDING.value, item_id))
            conn.execute("DELETE FROM review_rejections WHERE content_hash = ? AND"
                         " target_id = ?", (item.content_hash, item.target_id))
            conn.execute("DELETE FROM hash_aliases WHERE content_hash = ? AND record_id = ?",
                         (item.content_hash, item.target_id))
        return self.get(item_id)

    def pending_among(self, item_ids: Sequence[str]) -> list[str]:
        """Which of ``item_ids`` are still pending."""
        if not self.available or not item_ids:
            return []
        found: set[str] = set()
        for start in range(0, len(item_ids), _IN_CHUNK):
            chunk = list(item_ids[start:start + _IN_CHUNK])
            marks = ", ".join("?" * len(chunk))
            found |= {row["id"] for row in self._ledger.query(
                f"SELECT id FROM review_items WHERE status = ? AND id IN ({marks})",
                (ReviewStatus.PENDING.value, *chunk))}
        return [item_id for item_id in item_ids if item_id in found]

    def withdraw(self, item_ids: Sequence[str], aliases: Sequence[tuple[str, str]]) -> None:
        """Take back what an undone import queued: its pending items and its merge aliases.

        Resolved items stay (a person decided them; the records say what followed).
        """
        with self._ledger.transaction() as conn:
            conn.executemany("DELETE FROM review_items WHERE id = ? AND status = ?",
                             [(item_id, ReviewStatus.PENDING.value) for item_id in item_ids])
            conn.executemany("DELETE FROM hash_aliases WHERE content_hash = ? AND record_id = ?",
                             list(aliases))

    # -- pair memory -------------------------------------------------------------------------

    def rejected_targets(self, content_hash: str) -> set[str]:
        """Records a person said ``content_hash`` is not a duplicate of."""
        if not self.available:
            return set()
        rows = self._ledger.query(
            "SELECT target_id FROM review_rejections WHERE content_hash = ?", (content_hash,))
        return {row["target_id"] for row in rows}

    def add_aliases(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Remember that content hash ``pairs[i][0]`` was merged into record ``pairs[i][1]``."""
        if not pairs:
            return
        now = self._clock.now()
        with self._ledger.transaction() as conn:
            conn.executemany("INSERT OR IGNORE INTO hash_aliases(content_hash, record_id,"
                             " created_at) VALUES (?, ?, ?)",
                             [(h, r, now) for h, r in pairs])

    def lookup(self, content_hashes: Sequence[str]) -> ReviewLookup:
        """Aliases, rejected pairs and pending targets of many content hashes, read with one
        query per table (batch ingest reads a chunk's at once instead of three per memory)."""
        lookup = ReviewLookup()
        if not self.available:
            return lookup
        unique = sorted(set(content_hashes))
        for start in range(0, len(unique), _IN_CHUNK):
            chunk = unique[start:start + _IN_CHUNK]
            marks = ", ".join("?" * len(chunk))
            for row in self._ledger.query(
                    f"SELECT content_hash, record_id FROM hash_aliases WHERE content_hash IN"
                    f" ({marks}) ORDER BY created_at", chunk):
                lookup.aliases.setdefault(row["content_hash"], []).append(row["record_id"])
            for row in self._ledger.query(
                    f"SELECT content_hash, target_id FROM review_rejections WHERE content_hash"
                    f" IN ({marks})", chunk):
                lookup.rejected.setdefault(row["content_hash"], set()).add(row["target_id"])
            for row in self._ledger.query(
                    f"SELECT content_hash, target_id, {_PARTITION} FROM review_items WHERE"
                    f" status = ? AND content_hash IN ({marks})",
                    (ReviewStatus.PENDING.value, *chunk)):
                lookup.pending.setdefault(_row_key(row), set()).add(row["target_id"])
        return lookup

    def aliases(self, content_hash: str) -> list[str]:
        """Records ``content_hash`` was merged into, oldest first."""
        if not self.available:
            return []
        rows = self._ledger.query(
            "SELECT record_id FROM hash_aliases WHERE content_hash = ? ORDER BY created_at",
            (content_hash,))
        return [row["record_id"] for row in rows]


@dataclass
class ReviewLookup:
    """What the ledger knows about a set of content hashes (:meth:`ReviewQueue.lookup`):
    records each was merged into (oldest first), records a person said each is not, and
    targets each already waits for in the queue (by :func:`review_key`). A batch adds its own
    deferrals with :meth:`add_pending` as it goes."""

    aliases: dict[str, list[str]] = field(default_factory=dict)
    rejected: dict[str, set[str]] = field(default_factory=dict)
    pending: dict[ReviewKey, set[str]] = field(default_factory=dict)

    def add_pending(self, key: ReviewKey, target_id: str) -> None:
        """Note a deferral made earlier in the same batch (not yet in the ledger)."""
        self.pending.setdefault(key, set()).add(target_id)


def _row_to_item(row: Any, ledger: Ledger) -> ReviewItem:
    try:
        return _item(row)
    except (ValueError, TypeError, KeyError, RecursionError, EngineError) as exc:
        # not JSON, nested past reading, an unknown status, an incoming memory that does
        # not validate: a damaged row (or a ledger from someone else), not a bug
        raise ledger.damaged("review_items", row["id"], exc) from exc


def _item(row: Any) -> ReviewItem:
    conflicts = tuple(Conflict(c["kind"], tuple(c["existing"]), tuple(c["incoming"]))
                      for c in json.loads(row["conflicts"]))
    return ReviewItem(
        id=row["id"], created_at=row["created_at"], status=ReviewStatus(row["status"]),
        reason=row["reason"], target_id=row["target_id"], similarity=row["similarity"],
        content_hash=row["content_hash"], incoming_id=row["incoming_id"],
        incoming=new_memory_from_json(json.loads(row["incoming"])),
        conflicts=conflicts, thresholds=json.loads(row["thresholds"]),
        resolved_at=row["resolved_at"], result_id=row["result_id"],
    )
