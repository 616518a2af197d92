"""Text primitives: canonical normalization, content hash, tokens, Jaccard, token estimates.

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
from collections.abc import Iterable

__all__ = [
    "SPEAKER_PREFIX",
    "content_hash",
    "estimate_tokens",
    "jaccard",
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


def split_speaker(text: str) -> tuple[str | None, str]:
    """``(speaker, body)`` of a ``"Name: text"`` turn; ``(None, text)`` when no speaker is named.

    A prefix that is a common label ("Note:", "Reminder:", "Q:") is not a speaker.
    """
    match = SPEAKER_PREFIX.match(text)
    if match is None or match.group(1).lower() in _LABELS:
        return None, text
    return match.group(1), text[match.end():]


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """Jaccard similarity of two token collections, as sets. Two empty sets score 0."""
    set_a, set_b = set(a), set(b)
    union = len(set_a | set_b)
    if union == 0:
        return 0.0
    return len(set_a & set_b) / union


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
