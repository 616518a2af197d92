"""Hybrid card search: keyword score + cosine on cached embeddings (seed 003 §7).

Keyword score (§7.2), with ``filename`` the card's path and ``content`` its title and body,
both compared in lower case::

    score = 0
    if filename contains query:            score += 100
    for each query token in filename:      score += 10
    if content contains full query:        score += 50
    for each query token in content:       score += 5
    normalized_keyword = min(score / 200, 1.0)

Semantic score: cosine of the query embedding and the embedding of ``content[:5000]``.
Hybrid: ``0.7 × semantic + 0.3 × keyword``; results scoring above the threshold (default 0,
the seed leaves it open) are sorted by score (then path) and the top 10 returned.

Embeddings come from an :class:`engine.embedding.Embedder`. When none is given or it is not
ready, search runs keyword-only and says so in :attr:`SearchResult.note` (the engine never
waits for the model). Document vectors are cached by the SHA-256 of the embedded text (a
changed card is re-embedded, §7.3), in an LRU persisted to
``<workspace>/.mnemoscope/cache/embeddings.npz`` together with the model name, so a cache
written by another model is ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.embedding import Embedder, Vectors
from engine.errors import EmbeddingFailed, EmbeddingUnavailable
from engine.tasks.workspace import Workspace

__all__ = [
    "KEYWORD_WEIGHT",
    "SEMANTIC_WEIGHT",
    "CardSearch",
    "PersistentEmbeddingCache",
    "SearchHit",
    "SearchResult",
    "keyword_score",
]

SEMANTIC_WEIGHT = 0.7  # seed 003 §7.2
KEYWORD_WEIGHT = 0.3
EMBED_CHARS = 5000  # seed 003 §7.2: content[:5000]


def keyword_score(query: str, filename: str, content: str) -> float:
    """The seed 003 §7.2 keyword score, normalized to [0, 1]."""
    query = query.strip().lower()
    if not query:
        return 0.0
    filename = filename.lower()
    content = content.lower()
    tokens = query.split()
    score = 0
    if query in filename:
        score += 100
    score += 10 * sum(1 for token in tokens if token in filename)
    if query in content:
        score += 50
    score += 5 * sum(1 for token in tokens if token in content)
    return min(score / 200.0, 1.0)


class PersistentEmbeddingCache:
    """LRU of document vectors keyed by SHA-256 of the embedded text, saved to one ``.npz``.

    Args:
        path: The file (created on :meth:`save`).
        model_name: Vectors of another model in the file are ignored on load.
        capacity: Entries kept; least recently used go first.
    """

    def __init__(self, path: str | os.PathLike[str], model_name: str,
                 capacity: int = 20_000) -> None:
        self.path = Path(path)
        self.model_name = model_name
        self.capacity = capacity
        self._items: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = threading.Lock()
        self._dirty = False
        self.hits = 0
        self.misses = 0
        self._load()

    def _load(self) -> None:
        if not self.path.is_file():
            return
        try:
            with np.load(self.path, allow_pickle=False) as data:
                meta = json.loads(str(data["meta"]))
                if meta.get("model") != self.model_name:
                    return
                keys = [str(key) for key in data["keys"]]
                vectors = np.asarray(data["vectors"], dtype=np.float32)
        except (OSError, ValueError, KeyError):
            return  # an unreadable cache is rebuilt, never fatal
        for key, vector in zip(keys[-self.capacity:], vectors[-self.capacity:], strict=True):
            self._items[key] = vector

    def get(self, key: str) -> Vectors | None:
        """The vector for ``key`` (marked recently used), or None."""
        with self._lock:
            vector = self._items.get(key)
            if vector is None:
                self.misses += 1
                return None
            self.hits += 1
            self._items.move_to_end(key)
            return vector

    def put(self, key: str, vector: Vectors) -> None:
        """Store a vector, evicting the least recently used beyond capacity."""
        with self._lock:
            self._items[key] = np.asarray(vector, dtype=np.float32)
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
            self._dirty = True

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def save(self) -> None:
        """Write the cache atomically (a no-op when nothing changed since the last save)."""
        with self._lock:
            if not self._dirty:
                return
            keys = list(self._items)
            vectors = (np.stack([self._items[key] for key in keys]) if keys
                       else np.zeros((0, 0), dtype=np.float32))
            self._dirty = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp.npz")
        np.savez(tmp, keys=np.array(keys, dtype=str), vectors=vectors,
                 meta=np.array(json.dumps({"model": self.model_name})))
        os.replace(tmp, self.path)


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One result with its score parts."""

    id: str
    path: str
    title: str
    score: float
    keyword: float
    semantic: float | None


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Search results and how they were computed.

    Attributes:
        mode: ``"hybrid"`` or ``"keyword"``.
        note: Why the mode is keyword-only, empty for hybrid.
    """

    query: str
    hits: tuple[SearchHit, ...]
    mode: str
    note: str = ""


def _document(card_title: str, body: str) -> str:
    return f"{card_title}\n{body}"


class CardSearch:
    """Search the cards of a workspace.

    Args:
        workspace: A loaded workspace (search reads its current cards).
        embedder: Embedding model; None or not ready → keyword-only.
        cache: Document-vector cache; default: persisted under the workspace's cache folder.
    """

    def __init__(self, workspace: Workspace, embedder: Embedder | None = None,
                 cache: PersistentEmbeddingCache | None = None) -> None:
        self.workspace = workspace
        self.embedder = embedder
        self._cache = cache
        if self._cache is None and embedder is not None:
            self._cache = PersistentEmbeddingCache(
                workspace.cache_dir / "cache" / "embeddings.npz", embedder.model_name)

    @property
    def cache(self) -> PersistentEmbeddingCache | None:
        """The document-vector cache, when an embedder was given."""
        return self._cache

    def _vectors(self, embedder: Embedder, texts: list[str]) -> Vectors:
        cache = self._cache
        if cache is None:  # only when the caller built the search without an embedder
            raise EmbeddingUnavailable("card search has no embedding cache")
        keys = [hashlib.sha256(text.encode("utf-8")).hexdigest() for text in texts]
        out = np.zeros((len(texts), embedder.dimension), dtype=np.float32)
        missing: list[int] = []
        for row, key in enumerate(keys):
            vector = cache.get(key)
            if vector is None:
                missing.append(row)
            else:
                out[row] = vector
        if missing:
            fresh = embedder.embed([texts[row] for row in missing])
            for row, vector in zip(missing, fresh, strict=True):
                out[row] = vector
                cache.put(keys[row], vector)
            cache.save()
        return out

    def search(self, query: str, limit: int = 10, threshold: float = 0.0,
               mode: str = "hybrid") -> SearchResult:
        """Return the best ``limit`` cards scoring above ``threshold``.

        Args:
            query: Free text.
            limit: Results kept (seed 003 §7: top 10).
            threshold: Minimum score, exclusive.
            mode: ``"hybrid"`` (default) or ``"keyword"``.
        """
        cards = list(self.workspace.cards.values())
        documents = [_document(card.title, card.body) for card in cards]
        keyword = [keyword_score(query, card.path, doc) for card, doc in zip(cards, documents,
                                                                             strict=True)]
        semantic: list[float] | None = None
        note = ""
        embedder = self.embedder
        if mode == "keyword":
            note = "keyword mode requested"
        elif embedder is None:
            note = "no embedding model configured: keyword-only results"
        elif not embedder.is_ready():
            state = embedder.status().state.value
            note = f"embedding model is {state}: keyword-only results"
        elif cards:
            try:
                query_vector = embedder.embed([query])[0]
                doc_vectors = self._vectors(embedder, [doc[:EMBED_CHARS] for doc in documents])
                semantic = [float(value) for value in doc_vectors @ query_vector]
            except (EmbeddingUnavailable, EmbeddingFailed) as exc:
                note = f"embedding failed ({exc}): keyword-only results"
        hits: list[SearchHit] = []
        for index, card in enumerate(cards):
            sem = semantic[index] if semantic is not None else None
            score = keyword[index] if sem is None else (
                SEMANTIC_WEIGHT * sem + KEYWORD_WEIGHT * keyword[index])
            if score > threshold:
                hits.append(SearchHit(card.id, card.path, card.title, round(score, 6),
                                      keyword[index], sem))
        hits.sort(key=lambda hit: (-hit.score, hit.path))
        used = "hybrid" if semantic is not None or (not note and not cards) else "keyword"
        return SearchResult(query, tuple(hits[:limit]), used, note)
