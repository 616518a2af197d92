"""The lexical side of retrieval: BM25 and token Jaccard over an inverted index.

:class:`TextIndex` mirrors the columnar view row for row: per term its postings (the rows
holding it and the term's frequency in each), per row its length in terms, its count of distinct
terms and whether it is flagged important. :meth:`TextIndex.sync` brings it up to date with a
:class:`~engine.store.view.ViewSnapshot` cheaply: appended rows are indexed incrementally, rows
rewritten in place are re-indexed one by one, and a view rebuild (rows renumbered) triggers a
full rebuild. Query-time scoring touches only the postings of the query's terms, read as numpy
slices, so BM25 over 100K rows is a few vectorized adds, not a loop over records.

The index is compact (issue 24: at 1M records a dict of ``row → frequency`` per term took
~1.4 GB): terms are numbered by a vocabulary, and every posting lives in one of two places.
The *base* holds all of them as of its last build, term after term, rows ascending (int32 rows,
uint16 frequencies, one offset per term: 6 bytes a posting). Rows indexed since (appends,
rewritten rows) go to a small per-term *tail* of growable arrays, also ascending; a rewritten row
leaves a frequency-0 hole in the base, or fills its own hole again. When the tail outgrows an
eighth of the base, both are merged into a new base (one sort of the postings' keys), so an
append costs amortised O(log n) per posting. Each row's distinct terms are kept as ids in one
flat int32 buffer (what un-indexing a rewritten row needs).

Terms are :func:`engine.text.tokenize` tokens minus English stop words, reduced by a small
suffix-stripping stemmer (``painted``/``painting``/``paints`` → ``paint``), which is what makes
keyword matching forgiving enough to help semantic search (seed 003 §7 hybrid search).
"""

from __future__ import annotations

import math
import threading
from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.store.view import ViewSnapshot
from engine.text import SPEAKER_PREFIX, tokenize

__all__ = ["FLAG_TAGS", "STOP_WORDS", "TextIndex", "bm25_weights", "stem", "terms"]

F64 = npt.NDArray[np.float64]

# Records tagged with one of these are "flagged" (seed 002 importance boost).
FLAG_TAGS = frozenset({"important", "pinned", "flagged"})
# The tail (postings added since the base was built) is merged into the base when it holds more
# than this many postings and more than 1/_TAIL_SHARE of the base's.
_TAIL_MIN = 4096
_TAIL_SHARE = 8
# Rewritten rows leave their old term ids in the per-row buffer: it is compacted when those
# exceed this many ids and half the buffer.
_GARBAGE_MIN = 4096
_INT32_MAX = int(np.iinfo(np.int32).max)

_STOP_TEXT = """
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had
has have having he her here hers herself him himself his how i if in into is it its itself just
me more most my myself no nor not now of off on once only or other our ours ourselves out over
own same she should so some such than that the their theirs them themselves then there these
they this those through to too under until up very was we were what when where which while who
whom why will with would you your yours yourself yourselves i'm it's that's what's don't
didn't you're i've i'll i'd we're they're he's she's can't isn't wasn't also really yeah yes
oh hey hi wow gonna got get lot lots thing things much many
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())

# A conversational turn attributed to a speaker: "Caroline: ...", "Dr. Ada Lovelace: ..."
_SPEAKER = SPEAKER_PREFIX

_SUFFIXES = ("ational", "ization", "fulness", "ousness", "iveness", "ingly", "ments", "ement",
             "ation", "ness", "ment", "ings", "edly", "ing", "ies", "ied", "ers", "est",
             "ed", "er", "es", "ly", "s")


def stem(word: str) -> str:
    """A light suffix stripper (not Porter): enough to conflate common inflections.

    Words of 3 characters or fewer are kept; a suffix is removed only if at least 3 characters
    remain; a doubled final consonant left by ``-ing``/``-ed`` is undoubled (``running`` →
    ``run``); ``-ies``/``-ied`` become ``-y``.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            root = word[: -len(suffix)]
            if suffix in ("ies", "ied"):
                return root + "y"
            if suffix in ("ing", "ed", "er", "est", "ers", "edly", "ings") and len(root) >= 4 \
                    and root[-1] == root[-2] and root[-1] not in "aeiouls":
                return root[:-1]
            if suffix == "s" and root.endswith(("s", "u", "i")):
                return word
            return root
    return word


def terms(text: str) -> list[str]:
    """Index terms of ``text``: tokens without stop words, stemmed."""
    return [stem(t) for t in tokenize(text) if t not in STOP_WORDS]


def bm25_weights(tfs: F64, lengths: F64, *, live: int, avgdl: float, k1: float, b: float
                 ) -> F64:
    """One term's BM25 contribution to the rows holding it (``tfs``: its frequency in each,
    ``lengths``: their lengths) among ``live`` documents of average length ``avgdl``."""
    df = len(tfs)
    if df == 0:
        return np.zeros(0, dtype=np.float64)
    idf = math.log(1.0 + (live - df + 0.5) / (df + 0.5))
    result: F64 = idf * tfs * (k1 + 1.0) / (tfs + k1 * (1.0 - b + b * lengths / avgdl))
    return result


def speaker_terms(text: str) -> tuple[str, ...]:
    """Index terms of the speaker a ``"Name: text"`` turn is attributed to (empty if none)."""
    match = _SPEAKER.match(text)
    return tuple(dict.fromkeys(terms(match.group(1)))) if match else ()


Rows = npt.NDArray[np.intp]


def _bounds(start: int, stop: int) -> npt.NDArray[np.int32]:
    """``start`` and ``stop`` to search for in int32 rows (a pair of Python ints would be
    int64, and numpy would convert the whole searched array to int64 first)."""
    return np.array((start, min(stop, _INT32_MAX)), dtype=np.int32)


class _Posting:
    """A growable list of ascending rows and a frequency for each (capacity doubles)."""

    __slots__ = ("rows", "size", "tfs")

    def __init__(self) -> None:
        self.rows = np.zeros(2, dtype=np.int32)
        self.tfs = np.zeros(2, dtype=np.int32)
        self.size = 0

    def add(self, row: int, tf: int) -> None:
        """Insert ``row`` with frequency ``tf`` in order (an append for a row after the rest)."""
        size = self.size
        if size and row <= self.rows[size - 1]:
            at = int(np.searchsorted(self.rows[:size], row))
            if self.rows[at] == row:
                self.tfs[at] = tf
                return
        else:
            at = size
        if size == len(self.rows):
            self.rows = np.concatenate([self.rows, np.zeros(size, dtype=np.int32)])
            self.tfs = np.concatenate([self.tfs, np.zeros(size, dtype=np.int32)])
        if at < size:  # copies: the source and target slices overlap
            self.rows[at + 1:size + 1] = self.rows[at:size].copy()
            self.tfs[at + 1:size + 1] = self.tfs[at:size].copy()
        self.rows[at] = row
        self.tfs[at] = tf
        self.size = size + 1

    def remove(self, row: int) -> bool:
        """Take ``row`` out; False if it was not in."""
        size = self.size
        at = int(np.searchsorted(self.rows[:size], row))
        if at == size or self.rows[at] != row:
            return False
        self.rows[at:size - 1] = self.rows[at + 1:size].copy()
        self.tfs[at:size - 1] = self.tfs[at + 1:size].copy()
        self.size = size - 1
        return True

    def between(self, start: int, stop: int) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
        """Views of the rows ``start <= row < stop`` and their frequencies."""
        rows = self.rows[:self.size]
        first, end = np.searchsorted(rows, _bounds(start, stop))
        return rows[first:end], self.tfs[first:end]


class TextIndex:
    """An inverted index over a view's rows, kept in sync by :meth:`sync`.

    Thread-safety: :meth:`sync` and the scoring methods hold the index's lock; the arrays they
    return are fresh and safe to use afterwards.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._hashes: list[str] = []
        self._tags: list[tuple[str, ...]] = []
        self._reset()
        self._length = np.zeros(0, dtype=np.float64)
        self._unique = np.zeros(0, dtype=np.int32)
        self._flagged = np.zeros(0, dtype=bool)
        self._row_start = np.zeros(0, dtype=np.int64)
        self._state: tuple[int, int] = (0, 0)
        self._lineage = 0  # the view lineage (ViewSnapshot.lineage) last synced with
        self.rebuilds = 0
        self.incremental_rows = 0

    def _reset(self) -> None:
        """Forget every term (the per-row arrays are overwritten by the rows indexed next)."""
        self._vocab: dict[str, int] = {}
        # the base: term t's postings are _rows/_tfs[_offsets[t]:_offsets[t + 1]], rows
        # ascending; frequency 0 marks a row un-indexed since (_dead of them)
        self._offsets = np.zeros(1, dtype=np.int64)
        self._rows = np.zeros(0, dtype=np.int32)
        self._tfs: npt.NDArray[np.unsignedinteger[Any]] = np.zeros(0, dtype=np.uint16)
        self._tf_max = int(np.iinfo(np.uint16).max)  # the largest frequency _tfs holds
        self._base_rows = 0  # every row in the base is below this
        self._dead = 0
        # term id -> postings indexed since the base was built
        self._tail: dict[int, _Posting] = {}
        self._tail_size = 0
        # row r's distinct term ids: _row_ids[_row_start[r]:_row_start[r] + _unique[r]]
        self._row_ids = np.zeros(0, dtype=np.int32)
        self._row_ids_used = 0
        self._garbage = 0  # ids in _row_ids of rows re-indexed since
        self._speakers: dict[str, _Posting] = {}
        self._row_speaker: list[tuple[str, ...]] = []
        self._speaker_tuples: dict[tuple[str, ...], tuple[str, ...]] = {}

    # -- keeping in sync -------------------------------------------------------------------

    def sync(self, snapshot: ViewSnapshot) -> None:
        """Update the index to match ``snapshot`` (incrementally when the view only grew).

        A snapshot of the view version the index was last synced with costs nothing; one of
        the same lineage (only rows appended since) costs the new rows.
        """
        state = (getattr(snapshot, "layout", 0), getattr(snapshot, "version", 0))
        lineage = getattr(snapshot, "lineage", 0)
        with self._lock:
            if state[0] and state == self._state:
                return
            old = len(self._hashes)
            if lineage and lineage == self._lineage and snapshot.n >= old:
                self._append(snapshot, old)
            else:
                self._sync(snapshot)
            self._tidy()
            self._state = state
            self._lineage = lineage

    def _append(self, snapshot: ViewSnapshot, start: int) -> None:
        """Index rows ``start..n``: the rows before are those last synced (same lineage)."""
        self._grow(snapshot.n)
        self._add(snapshot.content_array, snapshot.tag_array, snapshot.hash_array,
                  range(start, snapshot.n))
        self.incremental_rows += snapshot.n - start

    def _sync(self, snapshot: ViewSnapshot) -> None:
        hashes = snapshot.hashes if isinstance(snapshot.hashes, list) else list(snapshot.hashes)
        tags = snapshot.tags if isinstance(snapshot.tags, list) else list(snapshot.tags)
        with self._lock:
            old = len(self._hashes)
            new = len(hashes)
            # the snapshot's lists hold the view's own string objects: equal lists compare by
            # identity, element by element, without hashing text (~0.2 ms at 100K rows)
            if new == old and self._hashes == hashes and self._tags == tags:
                return
            if new >= old and self._hashes == hashes[:old]:
                changed = [] if self._tags == tags[:old] else [
                    r for r in range(old) if self._tags[r] != tags[r]]
            elif new == old:
                changed = [r for r in range(old)
                           if self._hashes[r] != hashes[r] or self._tags[r] != tags[r]]
                if len(changed) > max(64, old // 4):
                    self._rebuild(snapshot)
                    return
            else:
                self._rebuild(snapshot)
                return
            self._grow(new)
            for row in changed:
                self._unindex(row)
            self._add(snapshot.content_array, tags, hashes, changed)
            self._add(snapshot.content_array, tags, hashes, range(old, new))
            self.incremental_rows += len(changed) + (new - old)

    def _rebuild(self, snapshot: ViewSnapshot) -> None:
        self.rebuilds += 1
        self._hashes, self._tags = [], []
        self._reset()
        n = snapshot.n
        self._length = np.zeros(n, dtype=np.float64)
        self._unique = np.zeros(n, dtype=np.int32)
        self._flagged = np.zeros(n, dtype=bool)
        self._row_start = np.zeros(n, dtype=np.int64)
        self._add(snapshot.content_array, snapshot.tag_array, snapshot.hash_array, range(n))

    def _grow(self, n: int) -> None:
        """Room for ``n`` rows in the per-row arrays (capacity doubles: appending one row at a
        time does not copy them each time)."""
        if n <= len(self._length):
            return
        extra = max(n, 2 * len(self._length)) - len(self._length)
        self._length = np.concatenate([self._length, np.zeros(extra)])
        self._unique = np.concatenate([self._unique, np.zeros(extra, dtype=np.int32)])
        self._flagged = np.concatenate([self._flagged, np.zeros(extra, dtype=bool)])
        self._row_start = np.concatenate([self._row_start, np.zeros(extra, dtype=np.int64)])

    def _add(self, contents: Sequence[str] | npt.NDArray[np.object_],
             tags: Sequence[tuple[str, ...]] | npt.NDArray[np.object_],
             hashes: Sequence[str] | npt.NDArray[np.object_],
             rows: Sequence[int] | range) -> None:
        """Index ``rows`` (each new, the next after the last, or un-indexed just before)."""
        if not len(rows):
            return
        vocab = self._vocab
        ids, tfs, counts = array("i"), array("i"), array("i")
        for row in rows:
            content, row_tags = contents[row], tags[row]
            words = terms(content)
            for tag in row_tags:
                words.extend(terms(tag))
            frequency: dict[str, int] = {}
            for word in words:
                frequency[word] = frequency.get(word, 0) + 1
            ids.extend([vocab.setdefault(word, len(vocab)) for word in frequency])
            tfs.extend(frequency.values())
            counts.append(len(frequency))
            speaker = speaker_terms(content)
            if speaker:
                speaker = self._speaker_tuples.setdefault(speaker, speaker)
                for word in speaker:
                    posting = self._speakers.get(word)
                    if posting is None:
                        posting = self._speakers[word] = _Posting()
                    posting.add(row, 1)
            if row == len(self._hashes):
                self._hashes.append(hashes[row])
                self._tags.append(row_tags)
                self._row_speaker.append(speaker)
            else:
                self._hashes[row] = hashes[row]
                self._tags[row] = row_tags
                self._row_speaker[row] = speaker
            self._length[row] = len(words)
            self._flagged[row] = any(t.lower() in FLAG_TAGS for t in row_tags)
        at = np.asarray(rows, dtype=np.int64)
        term_ids = np.array(ids, dtype=np.int32)
        frequencies = np.array(tfs, dtype=np.int32)
        del ids, tfs  # the build's peak: a few arrays of every posting at once
        sizes = np.array(counts, dtype=np.int64)
        self._unique[at] = sizes
        used = self._row_ids_used
        if used + len(term_ids) > len(self._row_ids):  # grown by a quarter: amortised O(1),
            # and an append to a 1M-row index does not double its largest array
            self._row_ids = np.concatenate([self._row_ids[:used], np.zeros(
                max(len(term_ids), used // 4), dtype=np.int32)])
        self._row_ids[used:used + len(term_ids)] = term_ids
        self._row_start[at] = used + np.cumsum(sizes) - sizes
        self._row_ids_used = used + len(term_ids)
        self._place(term_ids, np.repeat(at.astype(np.int32), sizes), frequencies)

    def _place(self, ids: npt.NDArray[np.int32], rows: npt.NDArray[np.int32],
               tfs: npt.NDArray[np.int32]) -> None:
        """Add postings (term ``ids[i]`` in ``rows[i]``, frequency ``tfs[i]``): to the tail, or
        merged with it into a new base when the tail would grow too large."""
        if not len(self._rows) or \
                self._tail_size + len(ids) > max(_TAIL_MIN, len(self._rows) // _TAIL_SHARE):
            self._merge(ids, rows, tfs)
            return
        for term, row, tf in zip(ids.tolist(), rows.tolist(), tfs.tolist(), strict=True):
            if not self._refill(term, row, tf):
                posting = self._tail.get(term)
                if posting is None:
                    posting = self._tail[term] = _Posting()
                posting.add(row, tf)
                self._tail_size += 1

    def _base_at(self, term: int, row: int) -> int:
        """Position of ``row`` in ``term``'s base postings, or -1."""
        if term >= len(self._offsets) - 1 or row >= self._base_rows:
            return -1
        first, end = int(self._offsets[term]), int(self._offsets[term + 1])
        at = first + int(np.searchsorted(self._rows[first:end], row))
        return at if at < end and self._rows[at] == row else -1

    def _refill(self, term: int, row: int, tf: int) -> bool:
        """Put ``tf`` back into the hole ``row`` left in ``term``'s base postings, if any."""
        at = self._base_at(term, row)
        if at < 0 or tf > self._tf_max:
            return False
        self._tfs[at] = tf
        self._dead -= 1
        return True

    def _merge(self, ids: npt.NDArray[np.int32], rows: npt.NDArray[np.int32],
               tfs: npt.NDArray[np.int32]) -> None:
        """A new base of the live base postings, the tail's and these."""
        terms_in, rows_in, tfs_in = [ids], [rows], [tfs]
        if len(self._rows):
            terms_in.append(np.repeat(np.arange(len(self._offsets) - 1, dtype=np.int32),
                                      np.diff(self._offsets)))
            rows_in.append(self._rows)
            tfs_in.append(self._tfs.astype(np.int32))
        for term, posting in self._tail.items():
            terms_in.append(np.full(posting.size, term, dtype=np.int32))
            rows_in.append(posting.rows[:posting.size])
            tfs_in.append(posting.tfs[:posting.size])
        # the first build (no base, no tail) sorts the new postings without a copy
        all_terms, all_rows, all_tfs = (parts[0] if len(parts) == 1 else np.concatenate(parts)
                                        for parts in (terms_in, rows_in, tfs_in))
        del terms_in, rows_in, tfs_in
        if self._dead:
            live = all_tfs > 0
            all_terms, all_rows, all_tfs = all_terms[live], all_rows[live], all_tfs[live]
        # (term, row) as one int64 key
        key = all_terms.astype(np.int64)
        key <<= 32
        key |= all_rows
        order = np.argsort(key, kind="stable")
        del key
        self._rows = all_rows[order]
        big = len(all_tfs) and int(all_tfs.max()) > np.iinfo(np.uint16).max
        self._tfs = all_tfs[order].astype(np.uint32 if big else np.uint16)
        self._tf_max = int(np.iinfo(self._tfs.dtype).max)
        del order
        self._offsets = np.zeros(len(self._vocab) + 1, dtype=np.int64)
        np.cumsum(np.bincount(all_terms, minlength=len(self._vocab)), out=self._offsets[1:])
        self._base_rows = int(all_rows.max()) + 1 if len(all_rows) else 0
        self._dead = 0
        self._tail, self._tail_size = {}, 0

    def _unindex(self, row: int) -> None:
        for word in self._row_speaker[row]:
            posting = self._speakers.get(word)
            if posting is not None:
                posting.remove(row)
        start = int(self._row_start[row])
        count = int(self._unique[row])
        for term in self._row_ids[start:start + count].tolist():
            at = self._base_at(term, row)
            if at >= 0 and self._tfs[at]:
                self._tfs[at] = 0
                self._dead += 1
            tail = self._tail.get(term)
            if tail is not None and tail.remove(row):
                self._tail_size -= 1
        self._garbage += count

    def _tidy(self) -> None:
        """Compact the per-row term ids when rewritten rows left too many behind."""
        if self._garbage <= max(_GARBAGE_MIN, self._row_ids_used // 2):
            return
        n = len(self._hashes)
        sizes = self._unique[:n].astype(np.int64)
        starts = np.cumsum(sizes) - sizes
        total = int(sizes.sum())
        gather = np.repeat(self._row_start[:n] - starts, sizes) + np.arange(total)
        self._row_ids = self._row_ids[gather]
        self._row_start[:n] = starts
        self._row_ids_used = total
        self._garbage = 0

    # -- reading ---------------------------------------------------------------------------

    def __len__(self) -> int:
        with self._lock:
            return len(self._hashes)

    def flagged(self, n: int) -> npt.NDArray[np.bool_]:
        """Flagged-important mask of the first ``n`` rows."""
        with self._lock:
            return self._flagged[:n].copy()

    def _posting(self, word: str, start: int, stop: int) -> tuple[Rows, F64]:
        """The rows ``start <= row < stop`` holding ``word``, ascending, and its frequency in
        each (fresh arrays). Call with the lock held."""
        term = self._vocab.get(word)
        rows_in: list[npt.NDArray[np.int32]] = []
        tfs_in: list[npt.NDArray[np.integer[Any]]] = []
        if term is not None and term < len(self._offsets) - 1 and start < self._base_rows:
            first, end = int(self._offsets[term]), int(self._offsets[term + 1])
            if start or stop < self._base_rows:
                low, high = np.searchsorted(self._rows[first:end], _bounds(start, stop))
                first, end = first + int(low), first + int(high)
            rows, tfs = self._rows[first:end], self._tfs[first:end]
            if self._dead:
                live = tfs > 0
                rows, tfs = rows[live], tfs[live]
            rows_in.append(rows)
            tfs_in.append(tfs)
        tail = self._tail.get(term) if term is not None else None
        if tail is not None:
            tail_rows, tail_tfs = tail.between(start, stop)
            if len(tail_rows):
                rows_in.append(tail_rows)
                tfs_in.append(tail_tfs)
        if not rows_in:
            return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.float64)
        if len(rows_in) == 1:
            return rows_in[0].astype(np.intp), tfs_in[0].astype(np.float64)
        out_rows = np.concatenate(rows_in).astype(np.intp)
        out_tfs = np.concatenate(tfs_in).astype(np.float64)
        base = rows_in[0]
        if len(base) and rows_in[1][0] < base[-1]:  # a rewritten row gained the word
            order = np.argsort(out_rows, kind="stable")
            out_rows, out_tfs = out_rows[order], out_tfs[order]
        return out_rows, out_tfs

    def lengths(self, n: int, start: int = 0) -> F64:
        """Length in terms of each of the rows ``start..n`` (a copy)."""
        with self._lock:
            return self._length[start:n].copy()

    def term_postings(self, word: str, mask: npt.NDArray[np.bool_], start: int = 0
                      ) -> tuple[Rows, F64]:
        """Rows containing ``word`` among the ``mask`` rows (from row ``start`` on), ascending,
        and the term's frequency in each.

        Reading from ``start`` (the rows appended since a caller's last read) costs those rows
        (a binary search in the term's postings), not the whole posting.
        """
        with self._lock:
            rows, tfs = self._posting(word, start, len(mask))
        keep = mask[rows]
        return rows[keep], tfs[keep]

    def bm25(self, query_terms: Sequence[str], mask: npt.NDArray[np.bool_], *,
             k1: float = 1.2, b: float = 0.75) -> F64:
        """BM25 of every row for ``query_terms`` with statistics over the ``mask`` rows.

        Document frequency and average length are computed over the masked rows (the agent's
        live candidates), so another agent's vocabulary does not shift this agent's scores.
        Rows outside the mask score 0. Repeated query terms count once.
        """
        n = len(mask)
        scores = np.zeros(n, dtype=np.float64)
        if n == 0 or n > len(self) or not mask.any():
            return scores
        lengths = self.lengths(n)
        avgdl = float(lengths[mask].mean()) or 1.0
        live = int(mask.sum())
        for word in dict.fromkeys(query_terms):
            rows, tfs = self.term_postings(word, mask)
            scores[rows] += bm25_weights(tfs, lengths[rows], live=live, avgdl=avgdl, k1=k1, b=b)
        return scores

    def speaker_rows(self, query_terms: Sequence[str], n: int) -> Rows:
        """Rows (of the first ``n``) whose ``"Name:"`` speaker the query names, ascending."""
        found: list[Rows] = []
        with self._lock:
            for word in dict.fromkeys(query_terms):
                posting = self._speakers.get(word)
                if posting is not None and posting.size:
                    found.append(posting.between(0, n)[0].astype(np.intp))
        if not found:
            return np.zeros(0, dtype=np.intp)
        return np.unique(np.concatenate(found)) if len(found) > 1 else found[0]

    def speaker_match(self, query_terms: Sequence[str], n: int) -> F64:
        """1.0 for rows whose ``"Name:"`` speaker the query names, else 0.0 (first ``n`` rows)."""
        out = np.zeros(n, dtype=np.float64)
        out[self.speaker_rows(query_terms, n)] = 1.0
        return out

    def jaccard(self, query_terms: Sequence[str], n: int) -> F64:
        """Token Jaccard (on index terms) of the query with each of the first ``n`` rows."""
        unique_query = list(dict.fromkeys(query_terms))
        inter = np.zeros(n, dtype=np.float64)
        with self._lock:
            if n > len(self._hashes):
                return inter
            for word in unique_query:
                rows, _ = self._posting(word, 0, n)
                inter[rows] += 1.0
            union = len(unique_query) + self._unique[:n] - inter
        out: F64 = np.divide(inter, union, out=np.zeros(n), where=union > 0)
        return out
