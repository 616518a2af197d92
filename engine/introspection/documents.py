"""Turning engine values into the API's JSON documents: finite numbers, redaction.

Redaction (seed 002 §14: "flagged memory never leaves system unredacted if redactionMode=ON")
runs over *every* string of a response — values and object keys, record content, metadata,
event payloads, error messages — with the engine's one redaction function (DESIGN decision 8).

One exception keeps the API usable: values under identifier keys (:data:`ID_KEYS`) that have
exactly the shape of an identifier this engine makes (a UUID record id, a 32-hex event id, a
64-hex content hash, or a derived id such as ``social-summary-<hex>``) are left as they are.
Without it every record id — a UUID, which the UUID pattern masks — would become a placeholder
and a client could not fetch, diff or follow a record. Anything else under those keys, and
every identifier-shaped string elsewhere, is redacted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["ID_KEYS", "prepare"]

ID_KEYS = frozenset({"id", "record_id", "event_id", "target_id", "incoming_id", "review_id",
                     "merged_from", "related", "memory_hash", "content_hash", "episode_ids",
                     "pattern_id", "patternId", "record_ids", "deleted"})
_ID_SHAPE = re.compile(
    r"^(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"  # uuid4 record ids
    r"|[0-9a-f]{32}|[0-9a-f]{64}"  # event ids, content hashes
    r"|[a-z]+(?:-[a-z]+)*-[0-9a-f]{16,40})$"  # derived ids: social-summary-…, pat-…
)

Redactor = Callable[[str], str]


def prepare(document: Any, redactor: Redactor | None) -> Any:
    """A JSON-safe copy of ``document``: non-finite floats → None, strings redacted if asked."""
    return _walk(document, redactor, identifier=False)


def _walk(value: Any, redactor: Redactor | None, *, identifier: bool) -> Any:
    if isinstance(value, str):
        if redactor is None or (identifier and _ID_SHAPE.match(value)):
            return value
        return redactor(value)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = str(key)
            shown = name if redactor is None or name in ID_KEYS else redactor(name)
            out[shown] = _walk(item, redactor, identifier=identifier or name in ID_KEYS)
        return out
    if isinstance(value, list | tuple | set | frozenset):
        return [_walk(item, redactor, identifier=identifier) for item in value]
    return _walk(str(value), redactor, identifier=False)
