"""``eval dedup``: how the merge decision does on labelled sentence pairs (STS-B format).

Each pair is treated as a stored record (sentence 1) and an incoming memory (sentence 2) of the
same agent, layer and category; the decision is the pipeline's own :func:`decide` at each trust
tier. Pairs scored ≥ 4.0 (of 5) are duplicates that should merge, pairs scored < 3.0 are
distinct and must not; pairs in between are not counted. Reported per tier:

* ``merge_precision``: merged pairs that are duplicates / merged pairs;
* ``merge_recall``: duplicates merged / duplicates;
* ``merge_or_review_recall``: duplicates merged or sent to review / duplicates (the review
  queue loses nothing);
* ``review_rate``: labelled pairs sent to review / labelled pairs.

A plain-cosine baseline (merge iff cosine ≥ the tier threshold) is computed in the same run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.errors import InputFormatError
from engine.ingest.decision import Candidate, ExactMatch, decide
from engine.ingest.jsonl import read_input_text
from engine.ingest.kinds import Action
from engine.ingest.policy import IngestPolicy
from engine.ingest.surprise import SurpriseScore
from engine.records import Category, TrustTier
from engine.text import content_hash, jaccard, tokenize

__all__ = ["DISTINCT_MAX", "DUPLICATE_MIN", "DedupEvaluation", "LabelledPair", "TierMetrics",
           "evaluate_dedup", "read_sts"]

DUPLICATE_MIN = 4.0
DISTINCT_MAX = 3.0
_NOVEL = SurpriseScore(1.0, 1.0, 1.0, 1.0, False, 0.8)


@dataclass(frozen=True, slots=True)
class LabelledPair:
    """One STS-B row: a 0..5 similarity score and two sentences."""

    line: int
    score: float
    first: str
    second: str


@dataclass(frozen=True, slots=True)
class TierMetrics:
    """Decision quality at one trust tier (see the module docstring)."""

    threshold: float
    merge_precision: float | None
    merge_recall: float
    merge_or_review_recall: float
    review_rate: float
    merged: int
    reviewed: int

    def to_json(self) -> dict[str, Any]:
        """Wire form (rounded to 4 dp)."""
        return {"threshold": self.threshold,
                "merge_precision": None if self.merge_precision is None
                else round(self.merge_precision, 4),
                "merge_recall": round(self.merge_recall, 4),
                "merge_or_review_recall": round(self.merge_or_review_recall, 4),
                "review_rate": round(self.review_rate, 4),
                "merged": self.merged, "reviewed": self.reviewed}


@dataclass(frozen=True, slots=True)
class DedupEvaluation:
    """Per-tier results of the pipeline's decision and of plain cosine."""

    pairs: int
    duplicates: int
    distinct: int
    semantic: bool
    tiers: Mapping[str, TierMetrics]
    baseline: Mapping[str, TierMetrics]

    def to_json(self) -> dict[str, Any]:
        """``{"pairs", "tiers": {tier: {...}}, "baseline": {...}, ...}``."""
        return {"pairs": self.pairs, "duplicates": self.duplicates, "distinct": self.distinct,
                "path": "embedding" if self.semantic else "jaccard",
                "tiers": {k: v.to_json() for k, v in self.tiers.items()},
                "baseline": {k: v.to_json() for k, v in self.baseline.items()}}


def read_sts(path: str | Path) -> list[LabelledPair]:
    """Read an STS-B file: tab-separated, score in column 5, sentences in columns 6 and 7.

    Raises:
        InputFormatError: the file cannot be read, or a row has no numeric score or too few
            columns (naming the line).
    """
    file = Path(path)
    text = read_input_text(file)
    pairs: list[LabelledPair] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        columns = line.split("\t")
        if len(columns) < 7:
            raise InputFormatError(str(file), number, "row",
                                   f"expected at least 7 tab-separated columns, got "
                                   f"{len(columns)}")
        try:
            score = float(columns[4])
        except ValueError:
            if number == 1:
                continue  # a header row
            raise InputFormatError(str(file), number, "score",
                                   f"column 5 is not a number: {columns[4]!r}") from None
        pairs.append(LabelledPair(number, score, columns[5], columns[6]))
    return pairs


def evaluate_dedup(pairs: Sequence[LabelledPair], policy: IngestPolicy, *,
                   embed: Callable[[Sequence[str]], npt.NDArray[np.float32] | None]
                   ) -> DedupEvaluation:
    """Run the merge decision on every pair at every tier (see the module docstring).

    Args:
        pairs: Labelled pairs.
        policy: Thresholds, gray zone, guard switch.
        embed: Texts → unit vectors; None selects the Jaccard path.
    """
    firsts = embed([p.first for p in pairs]) if pairs else None
    seconds = embed([p.second for p in pairs]) if firsts is not None else None
    semantic = firsts is not None and seconds is not None
    if firsts is not None and seconds is not None:
        similarity = np.einsum("ij,ij->i", firsts, seconds).astype(np.float64)
    else:
        similarity = np.asarray([jaccard(tokenize(p.first), tokenize(p.second))
                                 for p in pairs], dtype=np.float64)
    labels = np.asarray([p.score for p in pairs], dtype=np.float64)
    duplicate = labels >= DUPLICATE_MIN
    distinct = labels < DISTINCT_MAX
    tiers: dict[str, TierMetrics] = {}
    baseline: dict[str, TierMetrics] = {}
    for tier in TrustTier:
        threshold = policy.threshold(tier, semantic=semantic)
        actions = []
        for pair, sim in zip(pairs, similarity.tolist(), strict=True):
            exact = None
            if content_hash(pair.first) == content_hash(pair.second):
                exact = ExactMatch("stored", 0.8)
            decision = decide(
                content=pair.second, confidence=0.8, tier=tier, category=Category.FACT,
                exact=exact,
                candidates=[Candidate("stored", sim, Category.FACT, pair.first)],
                semantic=semantic, surprise=_NOVEL, policy=policy)
            actions.append(decision.action)
        # An exact duplicate (skipped/updated against the stored copy) is a merge too.
        merged = np.asarray([a in (Action.MERGED, Action.UPDATED, Action.SKIPPED)
                             for a in actions], dtype=bool)
        reviewed = np.asarray([a is Action.DEFERRED for a in actions])
        tiers[tier.value] = _metrics(threshold, merged, reviewed, duplicate, distinct)
        plain = similarity >= threshold
        baseline[tier.value] = _metrics(threshold, plain, np.zeros_like(plain), duplicate,
                                        distinct)
    return DedupEvaluation(len(pairs), int(duplicate.sum()), int(distinct.sum()), semantic,
                           tiers, baseline)


def _metrics(threshold: float, merged: npt.NDArray[np.bool_], reviewed: npt.NDArray[np.bool_],
             duplicate: npt.NDArray[np.bool_], distinct: npt.NDArray[np.bool_]) -> TierMetrics:
    labelled = duplicate | distinct
    merged_labelled = merged & labelled
    true_merges = int((merged & duplicate).sum())
    merge_count = int(merged_labelled.sum())
    duplicates = max(1, int(duplicate.sum()))
    return TierMetrics(
        threshold=threshold,
        merge_precision=None if merge_count == 0 else true_merges / merge_count,
        merge_recall=true_merges / duplicates,
        merge_or_review_recall=int(((merged | reviewed) & duplicate).sum()) / duplicates,
        review_rate=int((reviewed & labelled).sum()) / max(1, int(labelled.sum())),
        merged=merge_count, reviewed=int((reviewed & labelled).sum()),
    )
