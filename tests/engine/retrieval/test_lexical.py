"""The compact lexical index (issue 24): every read equals a plain recount of the texts.

:class:`TextIndex` keeps its postings in a base (term after term) and a tail (rows indexed since)
that is merged into the base when it grows; rewritten rows leave holes in the base or fill them
again. These tests drive it through appends, edits, tag changes and rebuilds, with the merge
thresholds lowered so that every path is taken, and compare each read with a reference
computed from the texts alone: the same rows (ascending), frequencies, BM25 bits, Jaccard,
speakers, lengths and flags.
"""

from __future__ import annotations

import tracemalloc
import types
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from engine.retrieval import lexical
from engine.retrieval.lexical import TextIndex, bm25_weights, speaker_terms, terms

WORDS = ["cat", "cats", "dog", "tea", "lake", "jazz", "sings", "garden", "paint", "painted",
         "birthday", "zebra"]
SPEAKERS = ["Caroline", "Melanie", "Dr. Ada Lovelace"]


@dataclass
class Texts:
    """A view's texts, and the snapshot of them the index reads."""

    contents: list[str] = field(default_factory=list)
    tags: list[tuple[str, ...]] = field(default_factory=list)
    lineage: int = 1
    version: int = 0

    def snapshot(self) -> Any:
        self.version += 1
        n = len(self.contents)
        hashes = [f"{hash(c)}-{i}" for i, c in enumerate(self.contents)]
        return types.SimpleNamespace(
            n=n, hashes=hashes, tags=list(self.tags), layout=1, version=self.version,
            lineage=self.lineage, content_array=np.array([*self.contents, ""], dtype=object)[:n],
            hash_array=np.array([*hashes, ""], dtype=object)[:n],
            tag_array=np.fromiter(self.tags, dtype=object, count=n))


def _text(rng: np.random.Generator) -> str:
    body = " ".join(rng.choice(WORDS, size=int(rng.integers(0, 9))))
    if rng.random() < 0.3:
        return f"{rng.choice(SPEAKERS)}: {body}"
    return body


def _tags(rng: np.random.Generator) -> tuple[str, ...]:
    return tuple(str(t) for t in rng.choice(["ops", "Important", "garden", "cat"],
                                            size=int(rng.integers(0, 3)), replace=False))


def check(index: TextIndex, texts: Texts, rng: np.random.Generator) -> None:
    """Every read of ``index`` equals a recount of ``texts``."""
    n = len(texts.contents)
    postings: dict[str, dict[int, int]] = {}
    speakers: dict[str, set[int]] = {}
    lengths = np.zeros(n)
    unique = np.zeros(n)
    for row, (content, tags) in enumerate(zip(texts.contents, texts.tags, strict=True)):
        words = terms(content) + [w for tag in tags for w in terms(tag)]
        lengths[row], unique[row] = len(words), len(set(words))
        for word, tf in Counter(words).items():
            postings.setdefault(word, {})[row] = tf
        for word in speaker_terms(content):
            speakers.setdefault(word, set()).add(row)
    assert len(index) == n
    np.testing.assert_array_equal(index.lengths(n), lengths)
    assert index.flagged(n).tolist() == [any(t.lower() == "important" for t in tags)
                                         for tags in texts.tags]
    mask = rng.random(n) < 0.7
    start = int(rng.integers(0, n + 1))
    for word in [*postings, "absent"]:
        for first in (0, start):
            rows, tfs = index.term_postings(word, mask, first)
            expected = sorted((r, tf) for r, tf in postings.get(word, {}).items()
                              if r >= first and mask[r])
            assert rows.dtype == np.intp and tfs.dtype == np.float64
            assert rows.tolist() == [r for r, _ in expected], (word, first)  # ascending
            assert tfs.tolist() == [float(tf) for _, tf in expected], (word, first)
    query = [*terms(" ".join(rng.choice(WORDS, size=4))), "absent", "caroline"]
    bm25 = np.zeros(n)
    if mask.any():
        avgdl = float(lengths[mask].mean()) or 1.0
        for word in dict.fromkeys(query):
            found = [(r, tf) for r, tf in postings.get(word, {}).items() if mask[r]]
            rows = np.array([r for r, _ in found], dtype=np.intp)
            tfs = np.array([tf for _, tf in found], dtype=np.float64)
            bm25[rows] += bm25_weights(tfs, lengths[rows], live=int(mask.sum()), avgdl=avgdl,
                                       k1=1.2, b=0.75)
    np.testing.assert_array_equal(index.bm25(query, mask), bm25)  # the same bits
    inter = np.array([len(set(query) & {w for w in postings if r in postings[w]})
                      for r in range(n)], dtype=np.float64)
    union = len(set(query)) + unique - inter
    np.testing.assert_array_equal(index.jaccard(query, n),
                                  np.divide(inter, union, out=np.zeros(n), where=union > 0))
    named = sorted(set().union(*(speakers.get(w, set()) for w in query)))
    limit = int(rng.integers(0, n + 1))
    assert index.speaker_rows(query, limit).tolist() == [r for r in named if r < limit]


@pytest.fixture(params=["default", "small"])
def thresholds(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The default merge thresholds, or small ones (the tail merged every few postings)."""
    if request.param == "small":
        monkeypatch.setattr(lexical, "_TAIL_MIN", 8)
        monkeypatch.setattr(lexical, "_GARBAGE_MIN", 4)
    return str(request.param)


def test_reads_equal_a_recount_through_appends_edits_and_rebuilds(thresholds: str) -> None:
    rng = np.random.default_rng(11)
    texts = Texts()
    index = TextIndex()
    for step in range(60):
        action = rng.choice(["append", "append", "edit", "tags", "many", "remove"]) \
            if texts.contents else "append"
        if action == "append":  # the same lineage: only rows appended
            for _ in range(int(rng.integers(1, 12))):
                texts.contents.append(_text(rng))
                texts.tags.append(_tags(rng))
        elif action in ("edit", "tags", "many"):  # rows rewritten in place: a new lineage
            count = len(texts.contents) if action == "many" else int(rng.integers(1, 4))
            for row in rng.integers(0, len(texts.contents), size=count).tolist():
                if action == "tags":
                    texts.tags[row] = _tags(rng)
                else:
                    texts.contents[row] = _text(rng)
            texts.lineage += 1
        else:  # a row deleted: the rows after it renumbered
            row = int(rng.integers(0, len(texts.contents)))
            del texts.contents[row], texts.tags[row]
            texts.lineage += 1
        index.sync(texts.snapshot())
        check(index, texts, rng)
        if step % 7 == 0:  # a snapshot without a lineage takes the comparing path
            texts.lineage, lineage = 0, texts.lineage
            index.sync(texts.snapshot())
            texts.lineage = lineage + 1
            check(index, texts, rng)
    assert index.rebuilds > 0 and index.incremental_rows > 0


def test_a_rewritten_row_gains_a_word_later_rows_hold_and_loses_one() -> None:
    texts = Texts([f"cat dog {i}" for i in range(8)] + ["zebra tea", "zebra lake"],
                  [()] * 10)
    index = TextIndex()
    index.sync(texts.snapshot())
    texts.contents[2] = "zebra zebra tea"  # gains zebra (rows 8, 9 hold it), loses cat and dog
    texts.contents[8] = "lake"  # loses zebra and tea
    texts.lineage += 1
    index.sync(texts.snapshot())
    everything = np.ones(10, dtype=bool)
    rows, tfs = index.term_postings("zebra", everything)
    assert rows.tolist() == [2, 9] and tfs.tolist() == [2.0, 1.0]
    assert index.term_postings("cat", everything)[0].tolist() == [0, 1, 3, 4, 5, 6, 7]
    assert index.term_postings("tea", everything)[0].tolist() == [2]
    assert index.term_postings("zebra", everything, 3)[0].tolist() == [9]
    texts.contents[2] = "cat dog 2"  # back: fills the holes it left
    texts.lineage += 1
    index.sync(texts.snapshot())
    assert index.term_postings("cat", everything)[0].tolist() == [0, 1, 2, 3, 4, 5, 6, 7]
    assert index.term_postings("zebra", everything)[0].tolist() == [9]
    check(index, texts, np.random.default_rng(1))


def test_a_word_whose_postings_outgrow_the_tail_is_merged(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.setattr(lexical, "_TAIL_MIN", 5)
    monkeypatch.setattr(lexical, "_TAIL_SHARE", 1000)
    texts = Texts(["cat tea", "dog"], [(), ()])
    index = TextIndex()
    index.sync(texts.snapshot())
    for i in range(40):  # appended one at a time, read after each
        texts.contents.append(f"cat cat jazz {i}")
        texts.tags.append(("Important",) if i % 5 == 0 else ())
        index.sync(texts.snapshot())
        rows, tfs = index.term_postings("cat", np.ones(len(texts.contents), dtype=bool))
        assert rows.tolist() == [0, *range(2, len(texts.contents))]
        assert tfs.tolist() == [1.0] + [2.0] * (len(texts.contents) - 2)
        assert index._tail_size <= 5  # merged into the base as it grew
    check(index, texts, np.random.default_rng(2))
    assert index.rebuilds == 0


def test_frequencies_past_16_bits_are_exact() -> None:
    texts = Texts(["cat dog", "tea " * 70_000, "lake"], [(), (), ()])
    index = TextIndex()
    index.sync(texts.snapshot())
    everything = np.ones(3, dtype=bool)
    assert index.term_postings("tea", everything)[1].tolist() == [70_000.0]
    small = Texts(["cat dog", "cat", "lake"], [(), (), ()])
    index = TextIndex()
    index.sync(small.snapshot())
    small.contents[1] = "cat " * 70_000  # its hole in a 16-bit base cannot hold this
    small.lineage += 1
    index.sync(small.snapshot())
    assert index.term_postings("cat", everything)[1].tolist() == [1.0, 70_000.0]
    check(index, small, np.random.default_rng(3))


def test_returned_arrays_are_the_callers() -> None:
    texts = Texts(["cat dog", "cat", "Caroline: cat"], [(), (), ()])
    index = TextIndex()
    index.sync(texts.snapshot())
    everything = np.ones(3, dtype=bool)
    rows, tfs = index.term_postings("cat", everything)
    speakers = index.speaker_rows(["caroline"], 3)
    rows[:] = 0
    tfs[:] = 9.0
    speakers[:] = 0
    assert index.term_postings("cat", everything)[0].tolist() == [0, 1, 2]
    assert index.term_postings("cat", everything)[1].tolist() == [1.0, 1.0, 1.0]
    assert index.speaker_rows(["caroline"], 3).tolist() == [2]
    kept = index.term_postings("cat", everything)
    texts.contents[1] = "cat cat"  # an edit after the read does not reach the caller's arrays
    texts.lineage += 1
    index.sync(texts.snapshot())
    assert kept[1].tolist() == [1.0, 1.0, 1.0]
    assert index.term_postings("cat", everything)[1].tolist() == [1.0, 2.0, 1.0]


def test_the_index_holds_a_few_hundred_bytes_per_record() -> None:
    """Postings as dicts of row → frequency took ~1.5 KB per record of 12 words."""
    rng = np.random.default_rng(5)
    vocabulary = [f"w{i}" for i in range(2000)]
    n = 5000
    texts = Texts([" ".join(rng.choice(vocabulary, size=12)) + f" {i}" for i in range(n)],
                  [()] * n)
    snapshot = texts.snapshot()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        index = TextIndex()
        index.sync(snapshot)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(index) == n
    assert held / n < 500, f"{held / n:.0f} bytes per record"
