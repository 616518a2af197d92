"""What the inspecting views read: the embedding map's points and a retrieval's candidates.

Both are read on a worker from the engine's view and returned as frozen values, so a view
never reads the columnar view's snapshot columns itself (issue 22): :func:`map_points` (the
embedding map: projected points with the layer, agent, importance and text of each) and
:func:`inspect_retrieval` (a retrieval with diagnostics, the text of its leading candidates
and the query's vector to place on the map).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from engine.projection import Projection, project_snapshot
from engine.store.view import LAYERS

if TYPE_CHECKING:
    from engine.memory_engine import MemoryEngine
    from engine.retrieval import RetrievalRequest, RetrievedBundle

__all__ = ["MapPoints", "RetrievalInspection", "inspect_retrieval", "map_points"]


@dataclass(frozen=True, slots=True, eq=False)
class MapPoints:
    """A projection of the store's embeddings with what the map colours and labels by.

    Attributes:
        projection: The projected points (``projection.rows`` are view rows, ``ids`` theirs).
        layer: Per point, an index into ``layer_names``.
        layer_names: The layer names (``working``, ``episodic``, ...).
        agent: Per point, an index into ``agents``.
        agents: The agent ids.
        importance: Per point, the stored importance.
        texts: Per point, the record's text.
    """

    projection: Projection
    layer: npt.NDArray[np.int64]
    layer_names: tuple[str, ...]
    agent: npt.NDArray[np.int64]
    agents: tuple[str, ...]
    importance: npt.NDArray[np.float64]
    texts: tuple[str, ...]


@dataclass(frozen=True, slots=True, eq=False)
class RetrievalInspection:
    """A retrieval run for inspection (nothing touched) and what a view shows with it.

    Attributes:
        bundle: The retrieval, with its diagnostics.
        texts: Record id → text for the leading candidates; packed records carry the text
            as it was sent (compressed under pressure).
        query_vector: The query's embedding, or None (no query, or the model not ready).
    """

    bundle: RetrievedBundle
    texts: Mapping[str, str]
    query_vector: npt.NDArray[np.float32] | None


def map_points(memory: MemoryEngine, method: str = "pca", *,
               max_points: int = 20_000) -> MapPoints:
    """Project the live records with a vector to 2D (see :func:`project_snapshot`).

    Blocking (PCA or UMAP over up to ``max_points`` vectors): run it on a worker.

    Raises:
        ValidationError: an unknown method.
    """
    snapshot = memory.store.view.snapshot()
    projection = project_snapshot(snapshot, method=method, max_points=max_points)
    rows = projection.rows
    return MapPoints(projection, snapshot.layer[rows].astype(np.int64),
                     tuple(layer.value for layer in LAYERS),
                     snapshot.agent[rows].astype(np.int64), tuple(snapshot.agents),
                     snapshot.importance[rows].astype(np.float64),
                     tuple(snapshot.contents[int(r)] for r in rows))


def inspect_retrieval(memory: MemoryEngine, request: RetrievalRequest, *,
                      texts_for: int = 300) -> RetrievalInspection:
    """Retrieve with ``inspect=True`` (no access counted) and name the leading candidates.

    Blocking (retrieval, query embedding): run it on a worker.

    Args:
        memory: The engine.
        request: What to retrieve.
        texts_for: How many candidates, in rank order, get their text.

    Raises:
        EngineError: as :meth:`MemoryEngine.retrieve`.
    """
    bundle = memory.retrieve(request, inspect=True)
    diag = bundle.diagnostics
    contents = memory.store.view.snapshot().contents
    rows = diag.order[:texts_for].tolist()
    texts = {diag.ids[r]: contents[r] for r in rows if r < len(contents)}
    for record in bundle.records:  # packed text as sent (compressed under pressure)
        texts[record.id] = record.content
    vector = None
    if request.query and request.query.strip():
        vectors = memory.embed_texts([request.query])
        vector = vectors[0] if vectors is not None else None
    return RetrievalInspection(bundle, MappingProxyType(texts), vector)
