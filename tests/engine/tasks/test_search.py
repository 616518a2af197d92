"""Hybrid card search (seed 003 §7) with a fake embedder, and once with the real model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from engine.embedding import EmbedderState, EmbedderStatus, SentenceTransformerEmbedder, Vectors
from engine.tasks.search import CardSearch, PersistentEmbeddingCache, keyword_score
from tests.engine.tasks.conftest import WriteCards, card

AXES = ("login", "database", "deploy")


class AxisEmbedder:
    """A fake model: one axis per topic word, so cosines are known exactly."""

    model_name = "axis-fake"
    dimension = 3

    def __init__(self, ready: bool = True) -> None:
        self.ready = ready
        self.calls: list[int] = []

    def status(self) -> EmbedderStatus:
        state = EmbedderState.READY if self.ready else EmbedderState.LOADING
        return EmbedderStatus(state, self.model_name, self.dimension)

    def is_ready(self) -> bool:
        return self.ready

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(len(texts))
        out = np.zeros((len(texts), 3), dtype=np.float32)
        for row, text in enumerate(texts):
            for col, word in enumerate(AXES):
                out[row, col] = text.lower().count(word)
            norm = float(np.linalg.norm(out[row]))
            out[row] = out[row] / norm if norm else out[row]
        return out


FILES = {
    "tasks/login.md": card("LOGIN", "Build the login form. Login errors too.\n", title="Login"),
    "docs/database.md": "# Database\nSchema for the database.\n",
    "docs/deploy.md": "# Deploy\nHow we deploy; login to the server first.\n",
}


def test_keyword_score_formula() -> None:
    # filename contains query (100) + token in filename (10) + content has query (50) + token (5)
    assert keyword_score("login", "tasks/login.md", "login form") == pytest.approx(165 / 200)
    assert keyword_score("login form", "tasks/login.md", "the login form") == pytest.approx(
        (10 + 50 + 5 + 5) / 200)
    assert keyword_score("LOGIN", "x.md", "nothing") == 0.0
    assert keyword_score("a b c d e f g h i j k l m n o p", "abcdefghijklmnop.md",
                         "a b c d e f g h i j k l m n o p") == 1.0
    assert keyword_score("   ", "x.md", "x") == 0.0


def test_hybrid_is_point7_semantic_point3_keyword(make_workspace: WriteCards) -> None:
    ws = make_workspace(FILES)
    result = CardSearch(ws, AxisEmbedder()).search("login")
    assert result.mode == "hybrid"
    assert result.note == ""
    by_id = {hit.id: hit for hit in result.hits}
    login = by_id["LOGIN"]
    assert login.semantic == pytest.approx(1.0)
    assert login.score == pytest.approx(0.7 * 1.0 + 0.3 * login.keyword)
    deploy = by_id["docs/deploy"]
    # title + body: "deploy" 3 times, "login" once
    assert deploy.semantic == pytest.approx(1 / np.sqrt(10), rel=1e-5)
    assert "docs/database" not in by_id  # score 0 is not above the threshold
    assert [hit.id for hit in result.hits] == ["LOGIN", "docs/deploy"]


def test_keyword_only_when_model_not_ready(make_workspace: WriteCards) -> None:
    ws = make_workspace(FILES)
    result = CardSearch(ws, AxisEmbedder(ready=False)).search("database")
    assert result.mode == "keyword"
    assert "loading" in result.note
    assert "keyword-only" in result.note
    assert [hit.id for hit in result.hits] == ["docs/database"]
    assert result.hits[0].semantic is None
    assert CardSearch(ws).search("database").mode == "keyword"


def test_embedding_cache_is_keyed_by_content_and_persisted(make_workspace: WriteCards,
                                                           tmp_path: Path) -> None:
    ws = make_workspace(FILES)
    fake = AxisEmbedder()
    CardSearch(ws, fake).search("login")
    assert fake.calls == [1, 3]  # the query, then the three documents
    cache_file = ws.cache_dir / "cache" / "embeddings.npz"
    assert cache_file.is_file()
    # A new search object (new process) reads the persisted vectors: only the query is embedded.
    fake2 = AxisEmbedder()
    search = CardSearch(ws, fake2)
    search.search("deploy")
    assert fake2.calls == [1]
    # Editing a card changes its hash: only that card is embedded again.
    (ws.root / "docs/deploy.md").write_text("# Deploy\nDeploy database backups.\n",
                                            encoding="utf-8")
    ws.refresh()
    search.search("deploy")
    assert fake2.calls == [1, 1, 1]
    # Another model's file is ignored.
    other = PersistentEmbeddingCache(cache_file, "other-model")
    assert len(other) == 0


def test_persistent_cache_lru(tmp_path: Path) -> None:
    cache = PersistentEmbeddingCache(tmp_path / "e.npz", "m", capacity=2)
    for key in ("a", "b"):
        cache.put(key, np.ones(3, dtype=np.float32))
    assert cache.get("a") is not None  # a is now more recent than b
    cache.put("c", np.zeros(3, dtype=np.float32))
    assert cache.get("b") is None
    assert cache.get("a") is not None
    cache.save()
    reloaded = PersistentEmbeddingCache(tmp_path / "e.npz", "m", capacity=2)
    assert len(reloaded) == 2
    assert reloaded.get("c") is not None


@pytest.mark.slow
@pytest.mark.model
def test_hybrid_search_with_the_real_model(make_workspace: WriteCards) -> None:
    embedder = SentenceTransformerEmbedder()
    assert embedder.wait_ready(120)
    ws = make_workspace({
        "a.md": card("AUTH", "Users sign in with a password and receive a session cookie.\n"),
        "b.md": card("DB", "Create the Postgres tables and run the schema migrations.\n"),
        "c.md": card("UI", "Pick colours and fonts for the settings page.\n"),
    })
    result = CardSearch(ws, embedder).search("how do people log in to their account")
    assert result.mode == "hybrid"
    assert result.hits[0].id == "AUTH"
    assert result.hits[0].semantic is not None
    assert result.hits[0].semantic > 0.3
