import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.embedding import (
    EmbedderState,
    EmbedderStatus,
    EmbeddingCache,
    SentenceTransformerEmbedder,
)
from engine.errors import EmbeddingUnavailable


@pytest.mark.slow
@pytest.mark.model
def test_real_model_gives_unit_384_vectors_and_ranks_paraphrases(
        real_embedder: SentenceTransformerEmbedder) -> None:
    vectors = real_embedder.embed([
        "The standup meeting moved to Tuesday morning.",
        "Our daily standup is now on Tuesday mornings.",
        "Photosynthesis converts light into chemical energy.",
    ])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    paraphrase, unrelated = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert paraphrase > 0.6 and paraphrase > unrelated + 0.4
    status = real_embedder.status()
    assert status.state is EmbedderState.READY and status.dimension == 384


@pytest.mark.slow
@pytest.mark.model
def test_cache_serves_repeats(real_embedder: SentenceTransformerEmbedder) -> None:
    text = "A sentence embedded twice is encoded once."
    first = real_embedder.embed([text])
    hits = real_embedder.cache.hits
    again = real_embedder.embed([text, text])
    assert real_embedder.cache.hits >= hits + 1
    assert np.array_equal(first[0], again[1])


def test_not_ready_raises_and_bad_path_fails_with_reason(tmp_path: object) -> None:
    embedder = SentenceTransformerEmbedder(model_path="/nonexistent/model")
    with pytest.raises(EmbeddingUnavailable, match="idle"):
        embedder.embed(["x"])
    assert not embedder.wait_ready(120)
    status = embedder.status()
    assert status.state is EmbedderState.FAILED and status.reason
    with pytest.raises(EmbeddingUnavailable, match="failed"):
        embedder.embed(["x"])


def test_lru_cache_evicts_oldest() -> None:
    cache = EmbeddingCache(capacity=2)
    for key in "abc":
        cache.put(key, np.zeros(3, dtype=np.float32))
    assert cache.get("a") is None and cache.get("c") is not None and len(cache) == 2


def test_cache_clear_forgets_vectors_and_counts() -> None:
    cache = EmbeddingCache(capacity=4)
    cache.put("a", np.ones(3, dtype=np.float32))
    assert cache.get("a") is not None and cache.get("b") is None
    cache.clear()
    assert len(cache) == 0 and (cache.hits, cache.misses) == (0, 0)
    assert cache.get("a") is None and cache.misses == 1


def test_importing_engine_does_not_import_heavy_modules() -> None:
    code = ("import sys, engine, engine.memory_engine, engine.store, engine.embedding, "
            "engine.events, engine.query, app.cli.context\n"
            "heavy = [m for m in ('torch', 'sentence_transformers', 'chromadb', 'transformers', "
            "'PySide6') if m in sys.modules]\n"
            "print(heavy)\nsys.exit(1 if heavy else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_qt_is_unimportable_in_the_engine_only_run() -> None:
    # scripts/test runs tests/engine with Qt blocked; prove the blocker really blocks there.
    import os

    if os.environ.get("MNEMOSCOPE_BLOCK_QT") != "1":
        import importlib.util

        assert importlib.util.find_spec("PySide6") is not None
        return
    with pytest.raises(ModuleNotFoundError, match="blocked"):
        import PySide6  # noqa: F401


def test_a_first_run_conversion_says_so_while_it_loads(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing converted yet (an empty cache): the model is loaded and converted here, ~10 s
    # in which a command or the status bar should say what it waits for.
    from engine import embedding_convert

    embedder = SentenceTransformerEmbedder(cache_dir=tmp_path / "cache")
    seen: list[EmbedderStatus] = []

    def load(path: Path, dimension: int) -> object:
        seen.append(embedder.status())
        raise RuntimeError("stop here")  # the test needs only the status at this point

    monkeypatch.setattr(embedding_convert, "load_torch_model", load)
    embedder.start_loading()
    assert not embedder.wait_ready(120)
    assert [s.state for s in seen] == [EmbedderState.LOADING]
    assert "first run: preparing the model for this machine" in seen[0].reason
    assert embedder.status().state is EmbedderState.FAILED  # and then the failure, as before


def test_a_failed_helper_conversion_keeps_its_own_reason_while_the_app_converts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine import embedding_convert

    embedder = SentenceTransformerEmbedder(cache_dir=tmp_path / "cache")
    helper_failed = "the conversion helper failed (exit 1); converting the model in the app"

    def in_child(path: Path) -> None:
        embedder._set_state(EmbedderState.LOADING, helper_failed)
        return None

    seen: list[str] = []

    def load(path: Path, dimension: int) -> object:
        seen.append(embedder.status().reason)
        raise RuntimeError("stop here")

    monkeypatch.setattr(embedder, "_converts_in_child", lambda path: True)
    monkeypatch.setattr(embedder, "_convert_in_child_and_load", in_child)
    monkeypatch.setattr(embedding_convert, "load_torch_model", load)
    embedder.start_loading()
    assert not embedder.wait_ready(120)
    assert seen == [helper_failed]  # not replaced by the generic first-run words
