"""Task workspaces (seed 003 "CueDeck"): cards, the reference DAG, task dependencies, scenes.

* :mod:`engine.tasks.cards` — the card format and its parser, anchors, semantic compression.
* :mod:`engine.tasks.graph` — cycle detection with paths, the priority order, the task graph.
* :mod:`engine.tasks.workspace` — a folder of cards, incremental updates, validation,
  importance, the graph view.
* :mod:`engine.tasks.scene` — token-pruned, masked ``SCENE.md`` and delta scenes.
* :mod:`engine.tasks.search` — hybrid keyword + embedding search with a persisted cache.
* :mod:`engine.tasks.cache` — the LRU of parsed cards.
* :mod:`engine.tasks.watcher` — a polling watcher with plain callbacks.
"""

from engine.tasks.cache import CardCache
from engine.tasks.cards import Card, Reference, Section, parse_card
from engine.tasks.errors import (
    CardFormatError,
    CardNotFound,
    DuplicateCardId,
    MissingAnchor,
    MissingDependency,
    MissingReference,
    WorkspaceNotFound,
)
from engine.tasks.graph import OrderedCard, TaskGraph, find_cycle, priority_order
from engine.tasks.scene import (
    DEFAULT_BUDGET,
    TRUNCATION_WARNING,
    PrunedEntry,
    Scene,
    SceneDelta,
    SceneEntry,
    SceneStore,
    build_scene,
    delta_scene,
)
from engine.tasks.search import CardSearch, PersistentEmbeddingCache, SearchHit, SearchResult
from engine.tasks.watcher import FileChanges, WorkspaceWatcher
from engine.tasks.workspace import (
    CardImportance,
    GraphEdge,
    GraphNode,
    GraphView,
    ValidationReport,
    Workspace,
    WorkspaceChange,
)

__all__ = [
    "DEFAULT_BUDGET",
    "TRUNCATION_WARNING",
    "Card",
    "CardCache",
    "CardFormatError",
    "CardImportance",
    "CardNotFound",
    "CardSearch",
    "DuplicateCardId",
    "FileChanges",
    "GraphEdge",
    "GraphNode",
    "GraphView",
    "MissingAnchor",
    "MissingDependency",
    "MissingReference",
    "OrderedCard",
    "PersistentEmbeddingCache",
    "PrunedEntry",
    "Reference",
    "Scene",
    "SceneDelta",
    "SceneEntry",
    "SceneStore",
    "SearchHit",
    "SearchResult",
    "Section",
    "TaskGraph",
    "ValidationReport",
    "Workspace",
    "WorkspaceChange",
    "WorkspaceNotFound",
    "WorkspaceWatcher",
    "build_scene",
    "delta_scene",
    "find_cycle",
    "parse_card",
    "priority_order",
]
