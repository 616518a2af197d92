"""The lexical side of retrieval: BM25 and token Jaccard over an inverted index.

:class:`TextIndex` mirrors the columnar view row for row: per term a posting map
``row → term frequency``, per row its length in terms, its count of distinct terms and whether it
is flagged important. :meth:`TextIndex.sync` brings it up to date with a
:class:`~engine.store.view.ViewSnapshot` cheaply: appended rows are indexed incrementally, rows
rewritten in place are re-indexed one by one, and a view rebuild (rows renumbered) triggers a
full rebuild. Query-time scoring touches only the postings of the query's terms, each held as a
pair of numpy arrays (cached until the term's postings change), so BM25 over 100K rows is a few
vectorized adds, not a loop over records.

Terms are :func:`engine.text.tokenize` tokens minus English stop words, reduced by a small
suffix-stripping stemmer (``painted``/``painting``/``paints`` → ``paint``), which is what makes
keyword matching forgiving enough to help semantic search (seed 003 §7 hybrid search).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from engine.store.view import ViewSnapshot
from engine.text import SPEAKER_PREFIX, tokenize

__all__ = ["FLAG_TAGS", "STOP_WORDS", "TextIndex", "bm25_weights", "stem", "terms"]

F64 = npt.NDArray[np.float64]

# Records tagged with one of these are "flagged" (seed 002 importance boost).
FLAG_TAGS = frozenset({"important", "pinned", "flagged"})
# Up to this many rows a posting read from a start row looks them up one by one (term_postings).
_FEW_ROWS = 64

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


class TextIndex:
    """An inverted index over a view's rows, kept in sync by :meth:`sync`.

    Thread-safety: :meth:`sync` and the scoring methods hold the index's lock; the arrays they
    return are fresh and safe to use afterwards.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._hashes: list[str] = []
        self._tags: list[tuple[str, ...]] = []
        self._postings: dict[str, dict[int, int]] = {}
        self._cache: dict[str, tuple[npt.NDArray[np.intp], F64]] = {}
        # (row, tf) indexed since a word's cached arrays were built, for rows that were not in
        # its posting (appends): merged on the next read instead of rebuilding the arrays
        self._pending: dict[str, list[tuple[int, int]]] = {}
        self._row_terms: list[tuple[str, ...]] = []
        self._speakers: dict[str, dict[int, None]] = {}
        self._speaker_cache: dict[str, npt.NDArray[np.intp]] = {}
        self._row_speaker: list[tuple[str, ...]] = []
        self._length = np.zeros(0, dtype=np.float64)
        self._unique = np.zeros(0, dtype=np.float64)
        self._flagged = np.zeros(0, dtype=bool)
        self._state: tuple[int, int] = (0, 0)
        self._lineage = 0  # the view lineage (ViewSnapshot.lineage) last synced with
        self.rebuilds = 0
        self.incremental_rows = 0

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
            self._state = state
            self._lineage = lineage

    def _append(self, snapshot: ViewSnapshot, start: int) -> None:
        """Index rows ``start..n``: the rows before are those last synced (same lineage)."""
        self._grow(snapshot.n)
        for row in range(start, snapshot.n):
            self._index(row, snapshot.content_array[row], snapshot.tag_array[row],
                        snapshot.hash_array[row])
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
                self._index(row, snapshot.content_array[row], tags[row], hashes[row])
            for row in range(old, new):
                self._index(row, snapshot.content_array[row], tags[row], hashes[row])
            self.incremental_rows += len(changed) + (new - old)

    def _rebuild(self, snapshot: ViewSnapshot) -> None:
        self.rebuilds += 1
        self._hashes, self._tags, self._row_terms = [], [], []
        self._postings, self._cache, self._pending = {}, {}, {}
        self._speakers, self._row_speaker, self._speaker_cache = {}, [], {}
        n = snapshot.n
        self._length = np.zeros(n, dtype=np.float64)
        self._unique = np.zeros(n, dtype=np.float64)
        self._flagged = np.zeros(n, dtype=bool)
        self._grow(n)
        for row in range(n):
            self._index(row, snapshot.content_array[row], snapshot.tag_array[row],
                        snapshot.hash_array[row])

    def _grow(self, n: int) -> None:
        """Room for ``n`` rows in the per-row arrays (capacity doubles: appending one row at a
        time does not copy them each time)."""
        if n <= len(self._length):
            return
        extra = max(n, 2 * len(self._length)) - len(self._length)
        self._length = np.concatenate([self._length, np.zeros(extra)])
        self._unique = np.concatenate([self._unique, np.zeros(extra)])
        self._flagged = np.concatenate([self._flagged, np.zeros(extra, dtype=bool)])

    def _index(self, row: int, content: str, tags: tuple[str, ...], digest: str) -> None:
        words = terms(content)
        for tag in tags:
            words.extend(terms(tag))
        counts: dict[str, int] = {}
        for word in words:
            counts[word] = counts.get(word, 0) + 1
        for word, tf in counts.items():
            posting = self._postings.setdefault(word, {})
            known = row in posting
            posting[row] = tf
            if known:
                self._forget(word)
            elif word in self._cache:
                self._pending.setdefault(word, []).append((row, tf))
        speaker = speaker_terms(content)
        for word in speaker:
            self._speakers.setdefault(word, {})[row] = None
            self._speaker_cache.pop(word, None)
        if row == len(self._hashes):
            self._hashes.append(digest)
            self._tags.append(tags)
            self._row_terms.append(tuple(counts))
            self._row_speaker.append(speaker)
        else:
            self._hashes[row] = digest
            self._tags[row] = tags
            self._row_terms[row] = tuple(counts)
            self._row_speaker[row] = speaker
        self._length[row] = len(words)
        self._unique[row] = len(counts)
        self._flagged[row] = any(t.lower() in FLAG_TAGS for t in tags)

    def _unindex(self, row: int) -> None:
        for word in self._row_speaker[row]:
            self._speakers.get(word, {}).pop(row, None)
            self._speaker_cache.pop(word, None)
        for word in self._row_terms[row]:
            posting = self._postings.get(word)
            if posting is not None:
                posting.pop(row, None)
                self._forget(word)

    def _forget(self, word: str) -> None:
        """Drop ``word``'s cached arrays (its posting changed other than by new rows)."""
        self._cache.pop(word, None)
        self._pending.pop(word, None)

    # -- reading ---------------------------------------------------------------------------

    def __len__(self) -> int:
        with self._lock:
            return len(self._hashes)

    def flagged(self, n: int) -> npt.NDArray[np.bool_]:
        """Flagged-important mask of the first ``n`` rows."""
        with self._lock:
            return self._flagged[:n].copy()

    def _posting(self, word: str) -> tuple[npt.NDArray[np.intp], F64]:
        cached = self._cache.get(word)
        pending = self._pending.pop(word, None)
        if cached is not None and pending:
            added = np.asarray(pending, dtype=np.int64).reshape(-1, 2)
            cached = (np.concatenate([cached[0], added[:, 0].astype(np.intp)]),
                      np.concatenate([cached[1], added[:, 1].astype(np.float64)]))
            self._cache[word] = cached
        if cached is None:
            posting = self._postings.get(word, {})
            rows = np.fromiter(posting.keys(), dtype=np.intp, count=len(posting))
            tfs = np.fromiter(posting.values(), dtype=np.float64, count=len(posting))
            cached = (rows, tfs)
            self._cache[word] = cached
        return cached

    def lengths(self, n: int, start: int = 0) -> F64:
        """Length in terms of each of the rows ``start..n`` (a copy)."""
        with self._lock:
            return self._length[start:n].copy()

    def term_postings(self, word: str, mask: npt.NDArray[np.bool_], start: int = 0
                      ) -> tuple[npt.NDArray[np.intp], F64]:
        """Rows containing ``word`` among the ``mask`` rows (from row ``start`` on), and the
        term's frequency in each (in no particular order).

        A few rows from ``start`` (the rows appended since a caller's last read) are looked up
        one by one instead of filtering the term's whole posting array.
        """
        n = len(mask)
        if start and 0 < n - start <= _FEW_ROWS:
            with self._lock:
                posting = self._postings.get(word, {})
                found = [(row, posting[row]) for row in range(start, n) if row in posting]
            rows = np.fromiter((row for row, _ in found), dtype=np.intp, count=len(found))
            tfs = np.fromiter((tf for _, tf in found), dtype=np.float64, count=len(found))
            keep = mask[rows]
            return rows[keep], tfs[keep]
        with self._lock:
            rows, tfs = self._posting(word)
        inside = rows < n
        if start:
            inside &= rows >= start
        if not inside.all():
            rows, tfs = rows[inside], tfs[inside]
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

    def speaker_rows(self, query_terms: Sequence[str], n: int) -> npt.NDArray[np.intp]:
        """Rows (of the first ``n``) whose ``"Name:"`` speaker the query names, ascending."""
        found: list[npt.NDArray[np.intp]] = []
        with self._lock:
            for word in dict.fromkeys(query_terms):
                index = self._speaker_cache.get(word)
                if index is None:
                    rows = self._speakers.get(word, {})
                    index = np.fromiter(rows.keys(), dtype=np.intp, count=len(rows))
                    self._speaker_cache[word] = index
                if len(index):
                    found.append(index[index < n])
        if not found:
            return np.zeros(0, dtype=np.intp)
        return np.unique(np.concatenate(found)) if len(found) > 1 else np.sort(found[0])

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
                rows, _ = self._posting(word)
                rows = rows[rows < n]
                inter[rows] += 1.0
            union = len(unique_query) + self._unique[:n] - inter
        out: F64 = np.divide(inter, union, out=np.zeros(n), where=union > 0)
        return out
