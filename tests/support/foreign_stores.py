"""Chroma collections written the way other memory tools write them (issue 22).

Each writer calls chromadb directly with the keys the tool's own source uses:

- mem0 (``mem0/vector_stores/chroma.py`` ``insert``: ``collection.add(ids=..., embeddings=...,
  metadatas=payloads)``, no documents; ``mem0/memory/main.py`` builds the payload: ``data``,
  ``hash`` (MD5 of the text), ``created_at`` / ``updated_at`` ISO strings in US/Pacific time,
  and the session keys ``user_id`` / ``agent_id`` / ``run_id``).
- LangChain (``langchain_chroma.Chroma.add_texts``: ``upsert(metadatas=..., embeddings=...,
  documents=texts, ids=uuid4s)``, metadata as the caller gave it; default collection name
  ``langchain``; OpenAI embeddings are 1536-d).
- LlamaIndex (``ChromaVectorStore.add``: ``documents`` = node text, metadata =
  ``node_to_metadata_dict(node, remove_text=True, flat_metadata=True)``: the node's metadata
  plus ``_node_content`` (node JSON, text emptied), ``_node_type``, ``document_id``, ``doc_id``,
  ``ref_doc_id``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from tests.support.fakes import HashingEmbedder

MEM0_MEMORIES = [
    ("Likes green tea in the morning", {"user_id": "alice", "agent_id": "travel-bot",
                                        "run_id": "trip-42",
                                        "created_at": "2024-05-01T08:15:00.000000-07:00",
                                        "updated_at": "2024-05-03T10:00:00.000000-07:00"}),
    ("Is allergic to peanuts", {"user_id": "bob",
                                "created_at": "2024-06-10T12:00:00.000000-07:00"}),
    # mem0 keeps one memory per fact, but two runs can each write the same fact
    ("Likes green tea in the morning", {"user_id": "alice", "agent_id": "travel-bot",
                                        "run_id": "trip-43",
                                        "created_at": "2024-07-01T09:00:00.000000-07:00"}),
]

LANGCHAIN_DOCUMENTS = [
    ("The deploy key rotates every Friday", {"source": "runbook.md", "page": 3,
                                             "user_id": "carol",
                                             "created_at": "2024-03-02T09:30:00Z"}),
    ("Staging database lives in eu-west-1", {"source": "infra.md", "page": 1,
                                             "timestamp": 1714557600}),
]

LLAMAINDEX_NODES = [
    ("Quarterly revenue grew eight percent", {"file_name": "report.pdf", "user_id": "erin",
                                              "creation_date": "2024-04-05"}),
    ("The board approved the new office lease", {"file_name": "minutes.txt",
                                                 "creation_date": "2024-04-06",
                                                 "last_modified_date": "2024-04-09"}),
]


def _vectors(texts: list[str], dimension: int, seed: int) -> list[list[float]]:
    """384-d: the fake embedder's vectors of the texts (a tool that used the same model as
    ours); any other length: random unit vectors (another model's, not comparable)."""
    if dimension == 384:
        return [list(map(float, row)) for row in HashingEmbedder().embed(texts)]
    rng = np.random.default_rng(seed)
    matrix = rng.normal(size=(len(texts), dimension)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return [row.tolist() for row in matrix]


@contextlib.contextmanager
def _client(path: Path | str) -> Iterator[Any]:
    """An embedded client on a directory, or an HTTP client on a ``chroma run`` URL; closed
    after (an HTTP client's sockets otherwise warn inside a later test)."""
    import chromadb
    from chromadb.config import Settings

    from engine.store import close_client

    if isinstance(path, str) and path.startswith("http"):
        host, port = urlsplit(path).hostname, urlsplit(path).port
        client = chromadb.HttpClient(host=host or "127.0.0.1", port=port or 8000,
                                     settings=Settings(anonymized_telemetry=False))
    else:  # the settings mem0 itself passes (and the store's: one system per path per process)
        client = chromadb.PersistentClient(path=str(path),
                                           settings=Settings(anonymized_telemetry=False))
    try:
        yield client
    finally:
        close_client(client)


def write_mem0(path: Path | str, name: str = "mem0", dimension: int = 384) -> list[str]:
    """A mem0 collection at ``path`` (a directory or a server URL); returns the ids in write
    order."""
    with _client(path) as client:
        collection = client.get_or_create_collection(name=name, embedding_function=None)
        ids = [str(uuid.uuid4()) for _ in MEM0_MEMORIES]
        payloads = [{"data": text, "hash": hashlib.md5(text.encode()).hexdigest(), **meta}
                    for text, meta in MEM0_MEMORIES]
        collection.add(ids=ids, embeddings=_vectors([t for t, _ in MEM0_MEMORIES], dimension, 1),
                       metadatas=payloads)
    return ids


def write_langchain(path: Path, name: str = "langchain", dimension: int = 1536) -> list[str]:
    """A LangChain collection (1536-d vectors, as OpenAI embeddings make)."""
    with _client(path) as client:
        collection = client.get_or_create_collection(name=name, embedding_function=None)
        ids = [str(uuid.uuid4()) for _ in LANGCHAIN_DOCUMENTS]
        collection.upsert(ids=ids,
                          embeddings=_vectors([t for t, _ in LANGCHAIN_DOCUMENTS], dimension, 2),
                          documents=[text for text, _ in LANGCHAIN_DOCUMENTS],
                          metadatas=[meta for _, meta in LANGCHAIN_DOCUMENTS])
    return ids


def write_llamaindex(path: Path, name: str = "llamaindex", dimension: int = 384) -> list[str]:
    """A LlamaIndex collection (one node per text, each from its own source document)."""
    with _client(path) as client:
        collection = client.get_or_create_collection(name=name, embedding_function=None)
        ids, metadatas = [], []
        for text, meta in LLAMAINDEX_NODES:
            node_id, ref_doc = str(uuid.uuid4()), str(uuid.uuid4())
            node: dict[str, Any] = {"id_": node_id, "embedding": None, "metadata": meta,
                    "excluded_embed_metadata_keys": [], "excluded_llm_metadata_keys": [],
                    "relationships": {"1": {"node_id": ref_doc, "node_type": "4",
                                            "metadata": meta, "hash": None, "class_name":
                                            "RelatedNodeInfo"}},
                    "text": "", "mimetype": "text/plain", "start_char_idx": 0,
                    "end_char_idx": len(text), "text_template": "{metadata_str}\n\n{content}",
                    "metadata_template": "{key}: {value}", "metadata_seperator": "\n",
                    "class_name": "TextNode"}
            ids.append(node_id)
            metadatas.append({**meta, "_node_content": json.dumps(node), "_node_type": "TextNode",
                              "document_id": ref_doc, "doc_id": ref_doc, "ref_doc_id": ref_doc})
        collection.add(ids=ids,
                       embeddings=_vectors([t for t, _ in LLAMAINDEX_NODES], dimension, 3),
                       documents=[text for text, _ in LLAMAINDEX_NODES], metadatas=metadatas)
    return ids


def write_custom(path: Path | str, name: str = "notes") -> list[str]:
    """A collection of no known tool: text under ``memory``, agent ``who``, time ``when``,
    last change ``changed`` (epoch seconds), importance ``weight``, session ``thread``; no
    documents."""
    with _client(path) as client:
        collection = client.get_or_create_collection(name=name, embedding_function=None)
        rows = [("Prefers aisle seats", "frank", "2024-02-01T10:00:00Z", 1706868000, 0.9, "t-1"),
                ("Works from Lisbon in winter", "grace", "2024-02-02T11:00:00Z", 1706958000, 0.3,
                 "t-2")]
        ids = [f"note-{i}" for i in range(len(rows))]
        collection.add(ids=ids, embeddings=_vectors([r[0] for r in rows], 384, 4),
                       metadatas=[{"memory": text, "who": who, "when": when, "changed": changed,
                                   "weight": weight, "thread": thread}
                                  for text, who, when, changed, weight, thread in rows])
    return ids
