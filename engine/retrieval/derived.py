"""Data derived from one state of the columnar view, computed once and reused.

Most of what a retrieval needs besides the query does not depend on the query: the candidate
masks of an agent, the seed 004 importance base, the layer and access columns, the BM25
statistics of a term, the time-neighbour matrix. :class:`ViewMemo` keeps such values under the
view state they were computed from (:attr:`~engine.store.view.ViewSnapshot.version`, and
``access_version`` for what depends on access counts), so a retrieval over an unchanged store
pays only for the query. Cached arrays are made read-only: they are shared by every bundle's
diagnostics.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import numpy as np

from engine.store.view import ViewSnapshot

__all__ = ["ViewMemo", "frozen"]

T = TypeVar("T")


def frozen(value: T) -> T:
    """Mark ``value``'s numpy arrays (itself or the members of a tuple) read-only."""
    for item in value if isinstance(value, tuple) else (value,):
        if isinstance(item, np.ndarray):
            item.flags.writeable = False
    return value


class ViewMemo:
    """Values computed from a view state, dropped when the view changes.

    Args:
        limit: Most values kept per state (oldest dropped first): per-term BM25 postings are
            the many small ones.

    A snapshot without a version (0: not taken from a :class:`~engine.store.view.ColumnarView`)
    is never cached. Thread-safe; two threads asking for the same missing value may both
    compute it (the value is the same).
    """

    def __init__(self, limit: int = 4096) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._version = 0
        self._access_version = 0
        self._values: dict[Hashable, Any] = {}
        self._access_values: dict[Hashable, Any] = {}
        self.computed = 0

    def get(self, snapshot: ViewSnapshot, key: Hashable, compute: Callable[[], T], *,
            access: bool = False) -> T:
        """The value for ``key`` in ``snapshot``'s view state, computing it the first time.

        Args:
            access: The value depends on access counts too (kept until they change).
        """
        version = snapshot.version
        if not version:
            self.computed += 1
            return compute()
        with self._lock:
            table = self._table(version, snapshot.access_version, access)
            if key in table:
                value: T = table[key]
                return value
        value = frozen(compute())
        with self._lock:
            self.computed += 1
            table = self._table(version, snapshot.access_version, access)
            if len(table) >= self._limit:
                del table[next(iter(table))]
            table[key] = value
        return value

    def _table(self, version: int, access_version: int, access: bool) -> dict[Hashable, Any]:
        if version != self._version:
            self._version, self._access_version = version, access_version
            self._values, self._access_values = {}, {}
        elif access and access_version != self._access_version:
            self._access_version = access_version
            self._access_values = {}
        return self._access_values if access else self._values
