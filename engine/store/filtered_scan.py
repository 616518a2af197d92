"""Filtered pages of a Chroma server store read from its newest records, filtered in the engine.

Why (issue 24; measured on a 1M-record store served by ``chroma run``, chromadb 1.5.9): Chroma's
SQLite reader turns every ``where`` clause into ``id IN (SELECT id FROM embedding_metadata WHERE
key = … AND value …)`` and materializes each such list in full before it scans the collection,
sorts the matches and applies ``limit`` / ``offset``. A ``get`` with a ``where`` therefore costs
time in proportion to the records each clause matches, whatever its ``limit``: agent (250K
records) 2.1 s with ``limit=200`` and 2.1 s for every id, layer (167K) 1.4 s, agent + layer
1.8-1.9 s, while a clause matching nothing takes 0.08 s. The records table shows the newest
written records first, and a common filter (one record in 12) finds its first page among the
newest 2,500 records, which one unfiltered ``get`` reads in 0.8 s. So a filtered page is read
window by window from the newest end (:class:`NewestScan`), each window's metadata tested here
with Chroma's own rules (:func:`matches`), and a rare filter, which would need many windows,
goes to Chroma's ``where`` instead, which is cheap exactly when its clauses match few records.

:func:`matches` evaluates the subset of Chroma's ``where`` language that
:func:`engine.query.server_filter` writes, with Chroma's semantics (a missing key matches
``$ne`` and ``$nin`` only, a string never equals a number), so a page read here holds the same
records as the one Chroma's ``where`` selects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.errors import ValidationError
from engine.records import MemoryRecord

__all__ = ["NewestScan", "matches"]


def _kind(value: Any) -> str:
    """Chroma keeps strings, booleans and numbers in separate columns: values of different
    kinds never compare (an int and a float do: Chroma compares both columns)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "str" if isinstance(value, str) else "other"


def _compare(op: str, stored: Any, wanted: Any) -> bool:
    if _kind(stored) != _kind(wanted):
        return False
    if op == "$eq":
        return bool(stored == wanted)
    if _kind(stored) == "bool":  # Chroma orders no booleans
        return False
    if op == "$gt":
        return bool(stored > wanted)
    if op == "$gte":
        return bool(stored >= wanted)
    if op == "$lt":
        return bool(stored < wanted)
    if op == "$lte":
        return bool(stored <= wanted)
    raise ValidationError("where", op, "is not an operator the engine evaluates")


def _clause(key: str, condition: Any, metadata: Mapping[str, Any]) -> bool:
    if not isinstance(condition, Mapping):
        condition = {"$eq": condition}  # Chroma's shorthand {key: value}
    present = key in metadata and metadata[key] is not None
    stored = metadata.get(key)
    for op, wanted in condition.items():
        if op == "$ne":
            ok = not (present and _compare("$eq", stored, wanted))
        elif op == "$in":
            ok = present and any(_compare("$eq", stored, w) for w in wanted)
        elif op == "$nin":
            ok = not (present and any(_compare("$eq", stored, w) for w in wanted))
        else:
            ok = present and _compare(op, stored, wanted)
        if not ok:
            return False
    return True


def matches(where: Mapping[str, Any], metadata: Mapping[str, Any] | None) -> bool:
    """True when a record's Chroma ``metadata`` satisfies the Chroma ``where`` filter.

    Supports ``$and``, ``$or``, ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``, ``$in``
    and ``$nin`` (what :func:`engine.query.server_filter` writes).

    Raises:
        ValidationError: an operator outside that set (a bug in the caller, named).
    """
    found = metadata or {}
    for key, condition in where.items():
        if key == "$and":
            if not all(matches(part, found) for part in condition):
                return False
        elif key == "$or":
            if not any(matches(part, found) for part in condition):
                return False
        elif key.startswith("$"):
            raise ValidationError("where", key, "is not an operator the engine evaluates")
        elif not _clause(key, condition, found):
            return False
    return True


@dataclass(slots=True)
class NewestScan:
    """How far one filter's scan from the newest record has got (the cursor of its pages).

    Attributes:
        key: The filter scanned (``repr`` of its ``where``).
        size: Records in the collection when the scan began; positions are Chroma's order
            (insertion order), so the scan reads positions ``size - examined - window`` up to
            ``size - examined`` next.
        examined: Newest records examined so far.
        matched: The records that matched, newest written first.
        seen: Their ids (a record deleted meanwhile shifts Chroma's offsets by one: a record
            read twice is kept once).
    """

    key: str
    size: int
    examined: int = 0
    matched: list[MemoryRecord] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)

    @property
    def done(self) -> bool:
        """True once every record has been examined: ``matched`` is the whole result."""
        return self.examined >= self.size

    def windows_to_fill(self, wanted: int, window: int) -> float:
        """How many more windows of ``window`` records the first ``wanted`` matches would take
        at the rate found so far (infinite when nothing matched yet)."""
        missing = wanted - len(self.matched)
        if missing <= 0:
            return 0.0
        if not self.matched or not self.examined:
            return float("inf")
        return missing / (len(self.matched) / self.examined * window)
