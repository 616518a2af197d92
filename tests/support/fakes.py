"""Fakes that enter through the engine's Protocols (never by patching internals)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from engine.embedding import EmbedderState, EmbedderStatus, Vectors
from engine.errors import EmbeddingUnavailable
from engine.text import tokenize

__all__ = ["DictSecrets", "HashingEmbedder"]


class HashingEmbedder:
    """A fast deterministic :class:`~engine.embedding.Embedder`: hashed bag of words.

    Cosine between two texts grows with their shared words, which is enough for unit tests of
    the plumbing; tests of semantic behaviour use the real model.
    """

    def __init__(self, dimension: int = 384, *, ready: bool = True) -> None:
        self._dimension = dimension
        self._ready = ready
        self.calls = 0

    @property
    def model_name(self) -> str:
        return "hashing-test"

    @property
    def dimension(self) -> int:
        return self._dimension

    def set_ready(self, ready: bool) -> None:
        self._ready = ready

    def status(self) -> EmbedderStatus:
        state = EmbedderState.READY if self._ready else EmbedderState.LOADING
        return EmbedderStatus(state, self.model_name, self._dimension)

    def is_ready(self) -> bool:
        return self._ready

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not self._ready:
            raise EmbeddingUnavailable("hashing-test embedder is not ready")
        self.calls += 1
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in tokenize(text) or ["<empty>"]:
                digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
                out[row, int.from_bytes(digest[:4], "little") % self._dimension] += 1.0
            out[row] /= np.linalg.norm(out[row])
        return out


class DictSecrets:
    """A SecretStore in memory (the OS keyring's stand-in)."""

    def __init__(self) -> None:
        self.kept: dict[str, str] = {}

    def available(self) -> bool:
        return True

    def get(self, account: str) -> str | None:
        return self.kept.get(account)

    def set(self, account: str, secret: str) -> None:
        self.kept[account] = secret

    def delete(self, account: str) -> None:
        self.kept.pop(account, None)
