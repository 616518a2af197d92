"""An in-memory LRU of parsed cards and their sections (seed 003 §5 strategy 4).

The seed bounds its card cache at about 50 MB and evicts entries idle for 30 minutes; both
bounds are parameters here. Entries are keyed by (path, SHA-256 of the file), so a file that
changes back to an earlier content, or a workspace opened again in the same process, is not
parsed again, and a changed file can never be served stale.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass

from engine.clock import Clock, SystemClock
from engine.tasks.cards import Card, Section, parse_sections

__all__ = ["DEFAULT_CACHE_BYTES", "DEFAULT_IDLE_MS", "CacheStats", "CardCache"]

DEFAULT_CACHE_BYTES = 50 * 1024 * 1024  # seed 003 §5: "in memory, ~50MB max"
DEFAULT_IDLE_MS = 30 * 60 * 1000.0  # seed 003 §5: "Eviction: LRU after 30 min inactivity"


@dataclass(frozen=True, slots=True)
class CacheStats:
    """Counters for the viewer and benchmarks."""

    entries: int
    bytes: int
    hits: int
    misses: int
    evictions: int


@dataclass(slots=True)
class _Entry:
    card: Card
    size: int
    used_ms: float
    sections: tuple[Section, ...] | None = None


def _size_of(card: Card) -> int:
    # The body dominates; references and fields add a roughly constant overhead.
    return sys.getsizeof(card.body) + 200 * (1 + len(card.references)) + 512


class CardCache:
    """Thread-safe LRU of :class:`Card` values bounded by bytes and idle time.

    Args:
        max_bytes: Approximate memory bound; least recently used entries go first.
        idle_ms: Entries unused for longer are dropped on the next access.
        clock: Time source (seed 000 §10).
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES, idle_ms: float = DEFAULT_IDLE_MS,
                 clock: Clock | None = None) -> None:
        self._max_bytes = max_bytes
        self._idle_ms = idle_ms
        self._clock = clock or SystemClock()
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._evictions = 0

    def get(self, path: str, content_hash: str) -> Card | None:
        """The cached card for this path and content, or None."""
        now = self._clock.now()
        with self._lock:
            self._expire(now)
            entry = self._entries.get((path, content_hash))
            if entry is None:
                self._misses += 1
                return None
            self._hits += 1
            entry.used_ms = now
            self._entries.move_to_end((path, content_hash))
            return entry.card

    def put(self, card: Card) -> None:
        """Cache ``card`` (replacing an entry with the same path and hash)."""
        now = self._clock.now()
        key = (card.path, card.content_hash)
        size = _size_of(card)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old.size
            self._entries[key] = _Entry(card, size, now)
            self._bytes += size
            self._evict_to_bound()

    def sections(self, card: Card) -> tuple[Section, ...]:
        """``parse_sections(card.body)``, parsed once per content and cached with the card."""
        now = self._clock.now()
        key = (card.path, card.content_hash)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.sections is not None:
                entry.used_ms = now
                self._entries.move_to_end(key)
                return entry.sections
        sections = parse_sections(card.body)  # outside the lock: markdown-it is the slow part
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = _Entry(card, _size_of(card), now)
                self._entries[key] = entry
                self._bytes += entry.size
            if entry.sections is None:
                entry.sections = sections
                extra = 120 * len(sections)
                entry.size += extra
                self._bytes += extra
            entry.used_ms = now
            self._evict_to_bound()
        return sections

    def stats(self) -> CacheStats:
        """Current counters."""
        with self._lock:
            return CacheStats(len(self._entries), self._bytes, self._hits, self._misses,
                              self._evictions)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def _expire(self, now: float) -> None:
        while self._entries:
            key, entry = next(iter(self._entries.items()))
            if now - entry.used_ms <= self._idle_ms:
                break
            del self._entries[key]
            self._bytes -= entry.size
            self._evictions += 1

    def _evict_to_bound(self) -> None:
        while self._bytes > self._max_bytes and len(self._entries) > 1:
            _, entry = self._entries.popitem(last=False)
            self._bytes -= entry.size
            self._evictions += 1
