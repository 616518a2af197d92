"""Text primitives: canonical normalization, content hash, tokens, Jaccard, token estimates.

:func:`jaccard_pairs` finds every pair of token sets at or above a Jaccard threshold without
comparing all pairs (prefix filtering), for passes over stored records on the Jaccard path.

The content hash follows seed 000 §9 step by step (DESIGN decision 1): NFKC, lower-case, trim,
collapse whitespace, strip zero-width and control characters, strip a trailing ``.!?,;:`` run,
SHA-256 hex. Internal punctuation is preserved, so ``'hello world'`` and ``'hello, world'``
differ (the seed's own example claiming otherwise contradicts its steps).
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Collection, Iterable, Sequence

__all__ = [
    "content_hash",
    "estimate_tokens",
    "jaccard",
    "jaccard_pairs",
    "normalize",
    "tokenize",
]

_WHITESPACE = re.compile(r"\s+")
# seed 000 §9 step 5: C0/C1 controls, zero-width and bidi marks, word joiners, BOM.
_INVISIBLE = re.compile(
    "[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]"
)
_TRAILING_PUNCT = re.compile(r"[.!?,;:]+$")
_TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)


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


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """Jaccard similarity of two token collections, as sets. Two empty sets score 0."""
    set_a, set_b = set(a), set(b)
    union = len(set_a | set_b)
    if union == 0:
        return 0.0
    return len(set_a & set_b) / union


def _prefix_length(size: int, threshold: float) -> int:
    """Tokens of a set of ``size`` that must include one shared with any set it reaches
    ``threshold`` with: ``size - ceil(threshold * size) + 1`` (the epsilon keeps a product
    like 0.6 * 5 = 3.0000000000000004 from rounding up)."""
    return size - math.ceil(threshold * size - 1e-9) + 1


def jaccard_pairs(token_sets: Sequence[Collection[str]], threshold: float, *,
                  probes: Iterable[int] | None = None) -> list[tuple[int, int, float]]:
    """Every pair ``(i, j, similarity)``, ``i < j``, whose token Jaccard is ``>= threshold``.

    Exact, without comparing every pair: prefix filtering (Chaudhuri et al. 2006, the
    "all-pairs" join of Bayardo et al. 2007). Tokens are ranked rarest first; two sets with
    Jaccard >= t share at least ``ceil(t·|x|)`` tokens, so they share one among the first
    :func:`_prefix_length` tokens of each. Only pairs that do are compared, and only if their
    sizes allow ``t`` at all (``|y| >= t·|x|``). Rare tokens make those prefixes short and
    their posting lists small: n records cost about n × (prefix length) × (a few candidates)
    instead of n²/2 comparisons. Sets sharing only very common words are never compared.

    Args:
        token_sets: One token collection per item (duplicates within one are ignored).
        threshold: The least Jaccard reported; must be > 0 (two empty sets score 0).
        probes: Only pairs with at least one of these indices (default: every index).

    Returns:
        The pairs in ascending ``(i, j)`` order.
    """
    if threshold <= 0:
        raise ValueError(f"jaccard_pairs needs a threshold > 0 (got {threshold})")
    sets = [frozenset(tokens) for tokens in token_sets]
    frequency: Counter[str] = Counter(token for tokens in sets for token in tokens)
    prefixes = [sorted(tokens, key=lambda t: (frequency[t], t))[
        :_prefix_length(len(tokens), threshold)] for tokens in sets]
    postings: dict[str, list[int]] = {}
    for index, prefix in enumerate(prefixes):
        for token in prefix:
            postings.setdefault(token, []).append(index)
    wanted = range(len(sets)) if probes is None else sorted(set(probes))
    found: dict[tuple[int, int], float] = {}
    for i in wanted:
        size = len(sets[i])
        seen: set[int] = set()
        for token in prefixes[i]:
            for j in postings[token]:
                if j == i or j in seen:
                    continue
                seen.add(j)
                pair = (i, j) if i < j else (j, i)
                other = len(sets[j])
                if pair in found or min(size, other) < threshold * max(size, other) - 1e-9:
                    continue
                similarity = len(sets[i] & sets[j]) / len(sets[i] | sets[j])
                if similarity >= threshold:
                    found[pair] = similarity
    return [(i, j, found[(i, j)]) for i, j in sorted(found)]


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
