"""Counts in words: "1 record", "2 records", "1,204 records".

One helper, so every label, status message and dialog says a count the same way (with a
thousands separator) and never "1 records" (issue 19).
"""

from __future__ import annotations

__all__ = ["count_of"]

_IRREGULAR = {"person": "people", "match": "matches", "memory": "memories",
              "entry": "entries", "query": "queries", "property": "properties"}


def count_of(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, the noun in the plural unless the count is exactly one.

    Args:
        count: How many.
        noun: The singular ("record").
        plural: The plural when it is not ``noun + "s"`` and not a known irregular one.

    Returns:
        For example ``"1 record"``, ``"0 records"``, ``"12,345 records"``, ``"2 people"``.
    """
    if count == 1:
        return f"1 {noun}"
    return f"{count:,} {plural or _IRREGULAR.get(noun) or noun + 's'}"
