"""Text primitives: canonical normalization, content hash, tokens, Jaccard, token estimates.

:func:`jaccard_pairs` finds every pair of token sets at or above a Jaccard threshold without
comparing all pairs (prefix filtering), for passes over stored records on the Jaccard path.

The content hash follows seed 000 §9 step by step (DESIGN decision 1): NFKC, lower-case, trim,
collapse whitespace, strip zero-width and control characters, strip a trailing ``.!?,;:`` run,
SHA-256 hex. Internal punctuation is preserved, so ``'hello world'`` and ``'hello, world'``
differ (the seed's own example claiming otherwise contradicts its steps).
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import unicodedata
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where it is used: `import engine` stays light
    import numpy as np
    import numpy.typing as npt


__all__ = [
    "SPEAKER_PREFIX",
    "content_hash",
    "estimate_tokens",
    "jaccard",
    "jaccard_pairs",
    "normalize",
    "split_speaker",
    "tokenize",
]

_WHITESPACE = re.compile(r"\s+")
# seed 000 §9 step 5: C0/C1 controls, zero-width and bidi marks, word joiners, BOM.
_INVISIBLE = re.compile(
    "[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]"
)
_TRAILING_PUNCT = re.compile(r"[.!?,;:]+$")
_TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)

SPEAKER_PREFIX = re.compile(r"^\s*([A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,2}):\s")
"""A conversational turn attributed to a speaker: ``"Caroline: ..."``, ``"Dr. Ada Lovelace: ..."``
(up to three capitalised words before the colon; group 1 is the name)."""

# Prefixes of that shape that label a note rather than name who said it ("Note: ...").
_LABELS = frozenset({
    "note", "notes", "nb", "ps", "todo", "to do", "reminder", "important", "update", "fact",
    "summary", "tip", "warning", "fyi", "question", "answer", "q", "a", "edit", "task", "idea",
    "goal", "status", "result", "source", "context", "re", "subject", "example",
})


def normalize(text: str) -> str:
    """Return the canonical form of ``text`` used for hashing (seed 000 §9, steps 1-6)."""
    normalized = unicodedata.normalize("NFKC", text).lower().strip()
    normalized = _WHITESPACE.sub(" ", normalized)
    normalized = _INVISIBLE.sub("", normalized)
    return _TRAILING_PUNCT.sub("", normalized).strip()


def content_hash(text: str) -> str:
    """Return the SHA-256 hex digest of :func:`normalize` applied to ``text``."""
    return hashlib.sha256(normalize(text).encode("utf-8")).hexdigest()


def tokenize(text: str) -> list[str]:
    """Split ``text`` into lower-case word tokens (letters and digits; apostrophes kept inside).

    Used by the Jaccard fallback, keyword novelty (seed 004) and the lexical retrieval score.
    """
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).lower())


@functools.lru_cache(maxsize=65_536)
def split_speaker(text: str) -> tuple[str | None, str]:
    """``(speaker, body)`` of a ``"Name: text"`` turn; ``(None, text)`` when no speaker is named.

    A prefix that is a common label ("Note:", "Reminder:", "Q:") is not a speaker. Cached
    (bounded): the ingest decision asks it of the same stored candidates for every memory that
    neighbours them (~16 calls per memory).
    """
    match = SPEAKER_PREFIX.match(text)
    if match is None or match.group(1).lower() in _LABELS:
        return None, text
    return match.group(1), text[match.end():]


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """Jaccard similarity of two token collections, as sets. Two empty sets score 0."""
    # Sets given as sets are used as they are: ingest calls this ~25 times per memory on
    # cached frozensets, and copying both and building their union cost more than the count.
    set_a = a if isinstance(a, frozenset | set) else set(a)
    set_b = b if isinstance(b, frozenset | set) else set(b)
    common = len(set_a & set_b)
    union = len(set_a) + len(set_b) - common
    if union == 0:
        return 0.0
    return common / union


def _prefix_lengths(sizes: npt.NDArray[np.int64], threshold: float) -> npt.NDArray[np.int64]:
    """Tokens of each set that must include one shared with any set it reaches ``threshold``
    with: ``size - ceil(threshold * size) + 1`` (the epsilon keeps a product like
    0.6 * 5 = 3.0000000000000004 from rounding up)."""
    import numpy as np
    return np.asarray(sizes - np.ceil(threshold * sizes - 1e-9).astype(np.int64) + 1,
                      dtype=np.int64)


_PAIR_CHUNK = 1 << 19  # candidate pairs verified per numpy pass (bounded memory)
_TRIU_MAX = 2048  # posting lists up to this long make their pairs in one numpy call


def jaccard_pairs(token_sets: Sequence[Collection[str]], threshold: float, *,
                  probes: Iterable[int] | None = None) -> list[tuple[int, int, float]]:
    """Every pair ``(i, j, similarity)``, ``i < j``, whose token Jaccard is ``>= threshold``.

    Exact, without comparing every pair: prefix filtering (Chaudhuri et al. 2006, the
    "all-pairs" join of Bayardo et al. 2007). Tokens are ranked rarest first; two sets with
    Jaccard >= t share at least ``ceil(t·|x|)`` tokens, so they share one among the first
    ``|x| - ceil(t·|x|) + 1`` tokens of each. Only pairs that do are candidates, and only if
    their sizes allow ``t`` at all (``|y| >= t·|x|``); candidates are verified in numpy
    batches. Rare tokens make the prefixes' posting lists short, so the work follows the
    number of pairs sharing a rare word, not n²/2 (measured in docs/ingest.md).

    Args:
        token_sets: One token collection per item (duplicates within one are ignored).
        threshold: The least Jaccard reported; must be > 0 (two empty sets score 0).
        probes: Only pairs with at least one of these indices (default: every index).

    Returns:
        The pairs in ascending ``(i, j)`` order, with the similarity :func:`jaccard` gives.
    """
    import numpy as np
    if threshold <= 0:
        raise ValueError(f"jaccard_pairs needs a threshold > 0 (got {threshold})")
    n = len(token_sets)
    vocabulary: dict[str, int] = {}
    rows = [np.unique(np.fromiter((vocabulary.setdefault(t, len(vocabulary)) for t in tokens),
                                  dtype=np.int64)) for tokens in token_sets]
    if n < 2 or not vocabulary:
        return []
    sizes = np.fromiter((len(r) for r in rows), dtype=np.int64, count=n)
    flat = np.concatenate(rows)
    owner = np.repeat(np.arange(n, dtype=np.int64), sizes)
    indptr = np.concatenate(([0], np.cumsum(sizes)))
    # rank tokens rarest first (ties by id): the global order every prefix follows
    frequency = np.bincount(flat, minlength=len(vocabulary))
    rank = np.empty(len(vocabulary), dtype=np.int64)
    rank[np.lexsort((np.arange(len(vocabulary)), frequency))] = np.arange(len(vocabulary))
    order = np.lexsort((rank[flat], owner))  # within each set, rarest token first
    position = np.arange(len(flat)) - indptr[owner[order]]
    in_prefix = position < _prefix_lengths(sizes, threshold)[owner[order]]
    prefix_sets, prefix_tokens = owner[order][in_prefix], flat[order][in_prefix]
    by_token = np.lexsort((prefix_sets, prefix_tokens))  # postings: sets ascending per token
    posting_sets, posting_tokens = prefix_sets[by_token], prefix_tokens[by_token]
    starts = np.flatnonzero(np.r_[True, posting_tokens[1:] != posting_tokens[:-1]])
    ends = np.r_[starts[1:], len(posting_tokens)]
    probe = np.ones(n, dtype=bool)
    if probes is not None:
        probe[:] = False
        probe[np.fromiter(probes, dtype=np.int64)] = True
    keys: list[npt.NDArray[np.int64]] = []
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        if end - start < 2:
            continue
        members = posting_sets[start:end]
        if end - start <= _TRIU_MAX:
            a, b = np.triu_indices(end - start, 1)
            left, right = members[a], members[b]
            wanted = probe[left] | probe[right]
            keys.append(left[wanted] * n + right[wanted])
        else:  # a long posting list: one member against the later ones at a time
            for k in range(end - start - 1):
                right = members[k + 1:]
                wanted = probe[members[k]] | probe[right]
                keys.append(members[k] * n + right[wanted])
    if not keys:
        return []
    candidates = np.unique(np.concatenate(keys))
    left, right = candidates // n, candidates % n
    small, large = np.minimum(sizes[left], sizes[right]), np.maximum(sizes[left], sizes[right])
    fits = small >= threshold * large - 1e-9
    left, right = left[fits], right[fits]
    membership = np.sort(owner * len(vocabulary) + flat)  # (set, token) keys
    found: list[tuple[int, int, float]] = []
    for begin in range(0, len(left), _PAIR_CHUNK):
        i, j = left[begin:begin + _PAIR_CHUNK], right[begin:begin + _PAIR_CHUNK]
        # look each token of the smaller set up in the other set
        swap = sizes[i] > sizes[j]
        query, other = np.where(swap, j, i), np.where(swap, i, j)
        counts = sizes[query]
        pair = np.repeat(np.arange(len(query)), counts)
        offsets = np.cumsum(counts) - counts
        tokens = flat[indptr[query][pair] + np.arange(len(pair)) - offsets[pair]]
        lookup = other[pair] * len(vocabulary) + tokens
        at = np.minimum(np.searchsorted(membership, lookup), len(membership) - 1)
        overlap = np.bincount(pair, weights=membership[at] == lookup, minlength=len(query))
        similarity = overlap / (sizes[i] + sizes[j] - overlap)
        keep = np.flatnonzero(similarity >= threshold)
        found.extend(zip(i[keep].tolist(), j[keep].tolist(), similarity[keep].tolist(),
                         strict=True))
    return found


def estimate_tokens(text: str) -> int:
    """Estimate the LLM token count of ``text``.

    The common 4-characters-per-token rule, bounded below by the word count so that short,
    word-dense text is not under-counted. Always at least 1 for non-empty text.
    """
    if not text:
        return 0
    by_chars = math.ceil(len(text) / 4)
    by_words = len(text.split())
    return max(1, by_chars, by_words)
