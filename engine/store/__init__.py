"""Record storage: Chroma (embedded or server), the store lock, and the columnar view."""

from engine.store.chroma_store import (
    DEFAULT_COLLECTION,
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_READ_TIMEOUT_S,
    CollectionInfo,
    MemoryStore,
    StoreSpec,
    close_client,
    list_collections,
)
from engine.store.codec import SCHEMA_VERSION
from engine.store.lock import StoreLock
from engine.store.view import (
    CATEGORIES,
    LAYERS,
    PRIVACIES,
    STATES,
    TIERS,
    ColumnarView,
    ViewSnapshot,
)

__all__ = [
    "CATEGORIES",
    "DEFAULT_COLLECTION",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_READ_TIMEOUT_S",
    "LAYERS",
    "PRIVACIES",
    "SCHEMA_VERSION",
    "STATES",
    "TIERS",
    "CollectionInfo",
    "ColumnarView",
    "MemoryStore",
    "StoreLock",
    "StoreSpec",
    "ViewSnapshot",
    "close_client",
    "list_collections",
]
