"""Confidence merge for the exact-duplicate rule (DESIGN decision 2).

The one implementation of seed 000 §5 lives in :mod:`engine.llm.confidence`; ingest uses it.
"""

from engine.llm.confidence import DEFAULT_CONFIDENCE, fold_confidence, merge_confidence

__all__ = ["DEFAULT_CONFIDENCE", "fold_confidence", "merge_confidence"]
