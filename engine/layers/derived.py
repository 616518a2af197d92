"""Records the layer handlers derive and write themselves (summaries, mined patterns).

They are marked with ``metadata.derivedBy`` so that no handler reads them back as evidence (a
social summary carries ``social.otherAgentId`` too) and so the browser can tell them apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["DERIVED_KEY", "is_derived"]

DERIVED_KEY = "derivedBy"


def is_derived(metadata: Mapping[str, Any]) -> bool:
    """True for records a layer handler wrote (never read back as evidence)."""
    return isinstance(metadata.get(DERIVED_KEY), str)
