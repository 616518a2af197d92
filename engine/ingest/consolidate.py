"""Consolidation: merge stored near-duplicates by the same rules as ingest (issue 23).

Ingest compares each *incoming* memory with what is stored; nothing compares stored records
with each other. Near duplicates still end up side by side: records stored on the Jaccard path
while the model was loading (token Jaccard misses most paraphrases), records stored before a
threshold was lowered, or a pair a person inserted by hand. seed 004's "Merge Algorithm" is a
pass over *all* memories ("for each pair of memories … keep higher importance version … delete
lower importance version"); this module is that pass, deciding each pair with
:func:`~engine.ingest.decision.decide` and merging with
:func:`~engine.ingest.merge.merge_records`, so a stored pair ends the way ingest would have
ended it.

Per merge partition (agent, privacy, layer — DESIGN 3), most similar pair first:

* **similarity**: cosine of the stored embeddings when both records have one (records still
  waiting for an embedding are embedded for the comparison when the model is ready), else token
  Jaccard — with each path's own thresholds, gray zone and confirmation band;
* **roles**: the record with the higher importance (then the earlier ``created_at``, then the
  smaller id) is the *kept* one, the other plays the incoming memory: its trust tier picks the
  threshold and it is merged into the kept one, which keeps its id and, having the higher
  importance, its text (seed 004);
* **merged**: the kept record becomes ``merge_records(kept, other)`` (confidence lerp, tags and
  metadata union, access counts summed, the other id in ``merged_from``, provenance appended)
  and the other record is deleted; its hash becomes an alias of the kept record, so ingesting
  its text again is an exact duplicate;
* **deferred** (``possible_contradiction``, ``gray_zone``, ``low_overlap``,
  ``category_mismatch``): a review item whose target is the kept record and whose incoming
  memory is the other, stored, record. Approving it merges and deletes the other record;
  rejecting it keeps both and remembers the pair;
* surprise does not apply (both memories are stored already): a pair the rules call distinct
  stays as it is.

Each record takes part in at most one merge per pass as the merged-away side, and a record
that absorbed another is not merged away in the same pass (its text was compared as it was);
a second pass merges such chains. Pairs a person rejected, and pairs already waiting in the
review queue, are left alone. A record is deferred at most once per pass (one review item per
memory, as in ingest).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.ingest.contradiction import Conflict
from engine.ingest.decision import Candidate, decide
from engine.ingest.kinds import Action, Reason
from engine.ingest.merge import merge_records
from engine.ingest.policy import IngestPolicy
from engine.ingest.review import ReviewKey, review_key
from engine.ingest.surprise import SurpriseScore
from engine.records import MemoryRecord, NewMemory, RelatedLink
from engine.text import jaccard_pairs, tokenize

__all__ = [
    "ConsolidationReport",
    "ConsolidationStep",
    "as_new_memory",
    "merge_step",
    "plan_consolidation",
    "redirect_links",
    "relink",
]

F32 = npt.NDArray[np.float32]

# Surprise gates only the insertion of a new record (DESIGN 5); both records of a pair are
# stored already, so a pair that is not a duplicate falls through to "distinct" whatever it is.
_STORED = SurpriseScore(surprise=1.0, semantic_novelty=None, keyword_novelty=1.0,
                        category_rarity=1.0, exact_duplicate=False, importance=0.0)
_BLOCK = 1024  # rows per block of the cosine matrix (bounded memory on large partitions)


@dataclass(frozen=True, slots=True)
class ConsolidationStep:
    """One merge or deferral of a consolidation pass.

    Attributes:
        action: ``merged`` or ``deferred``.
        reason: The decision's reason (``near_duplicate``, ``possible_contradiction``, ...).
        kept: The record that is kept (the merge target), as it was before the pass.
        other: The record merged into it (deleted) or deferred against it.
        similarity: Cosine (embedding path) or token Jaccard.
        semantic: True on the embedding path.
        result: The kept record after the merge (None for a deferral).
        thresholds: Every threshold applied.
        conflicts: What the contradiction guard found.
        review_id: The review item of a deferral (None in a dry run).
    """

    action: Action
    reason: Reason
    kept: MemoryRecord
    other: MemoryRecord
    similarity: float
    semantic: bool
    result: MemoryRecord | None = None
    thresholds: Mapping[str, float] = field(default_factory=dict)
    conflicts: tuple[Conflict, ...] = ()
    review_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Wire form: both texts, both ids, the outcome and why."""
        return {"action": self.action.value, "reason": self.reason.value,
                "kept_id": self.kept.id, "kept_content": self.kept.content,
                "other_id": self.other.id, "other_content": self.other.content,
                "similarity": round(self.similarity, 6),
                "path": "embedding" if self.semantic else "jaccard",
                "thresholds": dict(self.thresholds),
                "conflicts": [c.to_json() for c in self.conflicts],
                "review_id": self.review_id}


@dataclass(frozen=True, slots=True)
class ConsolidationReport:
    """What a consolidation pass did (or, in a dry run, would do).

    Attributes:
        id: The pass's id: the edit-history batch id of its writes and its entry in the import
            log, so ``undo_import(id)`` takes it back (None in a dry run).
        dry_run: True when nothing was written.
        agent_id: The agent consolidated (None: every agent).
        scanned: Records compared.
        steps: Merges and deferrals, most similar pair first.
        relinked: ``(before, after)`` of other records whose ``related`` links to a
            merged-away record now point at its survivor (:func:`relink`).
    """

    id: str | None
    dry_run: bool
    agent_id: str | None
    scanned: int
    steps: tuple[ConsolidationStep, ...]
    relinked: tuple[tuple[MemoryRecord, MemoryRecord], ...] = ()

    @property
    def counts(self) -> dict[str, int]:
        """Merges and deferrals."""
        return {"merged": sum(s.action is Action.MERGED for s in self.steps),
                "deferred": sum(s.action is Action.DEFERRED for s in self.steps)}

    def with_steps(self, steps: Sequence[ConsolidationStep], *,
                   report_id: str | None) -> ConsolidationReport:
        """A copy with ``steps`` (the applied ones, review ids filled in) and ``report_id``."""
        return ConsolidationReport(report_id, self.dry_run, self.agent_id, self.scanned,
                                   tuple(steps), self.relinked)

    def to_json(self) -> dict[str, Any]:
        """Wire form (the CLI's ``consolidate --json``)."""
        return {"id": self.id, "dry_run": self.dry_run, "agent_id": self.agent_id,
                "scanned": self.scanned, "counts": self.counts,
                "steps": [s.to_json() for s in self.steps],
                "relinked": [after.id for _, after in self.relinked]}


def as_new_memory(record: MemoryRecord) -> NewMemory:
    """A stored record as the incoming memory of a review item (a consolidation deferral)."""
    return NewMemory(record.content, agent_id=record.agent_id, layer=record.layer,
                     importance=record.importance, confidence=record.confidence,
                     category=record.category, tags=record.tags, privacy=record.privacy,
                     source=record.source, source_tier=record.source_tier,
                     created_at=record.created_at, expires_at=record.expires_at,
                     metadata=record.metadata)


def merge_step(kept: MemoryRecord, other: MemoryRecord, *, now_ms: float,
               policy: IngestPolicy) -> MemoryRecord:
    """``kept`` after absorbing ``other`` (``merge_records``), without a link to ``other``.

    One place for the merge of a stored pair: the pass plans with it and
    ``MemoryEngine.apply_consolidation`` merges with it again against the records as they are
    when a person applies a step of a dry run.
    """
    merged = merge_records(kept, other, now_ms=now_ms, policy=policy)
    # the merged-away record is deleted: the kept one must not link to it
    return merged.replace(related=tuple(link for link in merged.related
                                        if link.id != other.id))


def _keeps(a: MemoryRecord, b: MemoryRecord) -> bool:
    """True when ``a`` is kept over ``b``: seed 004 keeps the higher importance version; ties
    keep the older record (other records more likely link to it), then the smaller id."""
    return (-a.importance, a.created_at, a.id) < (-b.importance, b.created_at, b.id)


def _pairs(records: Sequence[MemoryRecord], vectors: Sequence[F32 | None], floor: float,
           jaccard_floor: float) -> list[tuple[float, bool, int, int]]:
    """``(similarity, semantic, i, j)`` of every pair ``i < j`` at or above its path's floor."""
    found: list[tuple[float, bool, int, int]] = []
    with_vec = [i for i, v in enumerate(vectors) if v is not None]
    present = [v for v in vectors if v is not None]
    if len(present) > 1:
        matrix = np.stack(present).astype(np.float32)
        for start in range(0, len(with_vec), _BLOCK):
            block = matrix[start:start + _BLOCK] @ matrix.T
            rows, cols = np.nonzero(block >= floor)
            for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
                i, j = with_vec[start + r], with_vec[c]
                if i < j:
                    found.append((float(block[r, c]), True, i, j))
    # a pair with a record that has no embedding (the model is not ready) is compared the way
    # ingest would compare it then: token Jaccard. Only pairs sharing a rare token are looked
    # at (prefix filtering, exact): comparing every pair in Python took minutes past ~10K
    # records waiting for the model.
    without = [i for i, v in enumerate(vectors) if v is None]
    if without:
        tokens = [tokenize(r.content) for r in records]
        # a floor of 0 (a gray zone wider than a threshold) still needs a shared word: two
        # texts with none in common are not duplicates of each other by any rule
        for i, j, similarity in jaccard_pairs(tokens, max(jaccard_floor, 1e-6),
                                              probes=without):
            found.append((similarity, False, i, j))
    return found


def plan_consolidation(
    records: Sequence[MemoryRecord],
    vectors: Sequence[F32 | None],
    *,
    policy: IngestPolicy,
    now_ms: float,
    rejected: Callable[[str], Collection[str]],
    pending: Callable[[ReviewKey], Collection[str]],
) -> list[ConsolidationStep]:
    """Decide every stored near-duplicate pair of ``records`` (see the module docstring).

    Args:
        records: The records to consolidate (any partitions; pairs never cross one).
        vectors: ``vectors[i]`` is the unit embedding of ``records[i]``, or None.
        policy: The ingest policy (thresholds, gray zone, guard, merge weights).
        now_ms: The time of the pass (``last_accessed`` of merged records).
        rejected: Content hash → ids of records a person said it is not a duplicate of.
        pending: Review key → targets it already waits for in the review queue.

    Returns:
        The merges and deferrals, most similar pair first (review ids not yet assigned).
    """
    partitions: dict[tuple[str, str, str], list[int]] = {}
    for index, record in enumerate(records):
        key = (record.agent_id, record.privacy.value, record.layer.value)
        partitions.setdefault(key, []).append(index)
    floor = min(policy.review_floor(t, semantic=True) for t in policy.tier_weights)
    jaccard_floor = min(policy.review_floor(t, semantic=False) for t in policy.tier_weights)
    pairs: list[tuple[float, bool, int, int]] = []
    for members in partitions.values():
        if len(members) > 1:
            local = _pairs([records[i] for i in members], [vectors[i] for i in members],
                           floor, jaccard_floor)
            pairs.extend((s, sem, members[i], members[j]) for s, sem, i, j in local)
    pairs.sort(key=lambda p: (-p[0], records[p[2]].id, records[p[3]].id))

    current: dict[str, MemoryRecord] = {}  # kept records as merged so far
    absorbed: set[str] = set()
    deferred: set[str] = set()
    steps: list[ConsolidationStep] = []
    for similarity, semantic, i, j in pairs:
        kept, other = (records[i], records[j]) if _keeps(records[i], records[j]) \
            else (records[j], records[i])
        if kept.id in absorbed or other.id in absorbed or other.id in current \
                or other.id in deferred:
            continue
        if kept.id in rejected(other.content_hash) or other.id in rejected(kept.content_hash):
            continue
        if kept.id in pending(review_key(other.content_hash, as_new_memory(other))):
            continue
        decision = decide(
            content=other.content, confidence=other.confidence, tier=other.source_tier,
            category=other.category, exact=None,
            candidates=[Candidate(kept.id, similarity, kept.category, kept.content,
                                  found_by="consolidate")],
            semantic=semantic, surprise=_STORED, policy=policy)
        if decision.action is Action.MERGED:
            merged = merge_step(current.get(kept.id, kept), other, now_ms=now_ms,
                                policy=policy)
            current[kept.id] = merged
            absorbed.add(other.id)
            steps.append(ConsolidationStep(Action.MERGED, decision.reason, kept, other,
                                           similarity, semantic, merged,
                                           dict(decision.thresholds)))
        elif decision.action is Action.DEFERRED:
            deferred.add(other.id)
            steps.append(ConsolidationStep(Action.DEFERRED, decision.reason, kept, other,
                                           similarity, semantic, None,
                                           dict(decision.thresholds), decision.conflicts))
    # a kept record's links to records merged away elsewhere in the pass follow them
    survivors = _survivors(steps)
    current = {i: redirect_links(r, survivors) for i, r in current.items()}
    # a kept record that absorbed several carries them all: report its final version
    return [s if s.result is None else ConsolidationStep(
        s.action, s.reason, s.kept, s.other, s.similarity, s.semantic, current[s.kept.id],
        s.thresholds, s.conflicts) for s in steps]


def _survivors(steps: Sequence[ConsolidationStep]) -> dict[str, str]:
    """Merged-away id → the id of the record that absorbed it."""
    return {s.other.id: s.kept.id for s in steps if s.action is Action.MERGED}


def redirect_links(record: MemoryRecord, survivors: Mapping[str, str]) -> MemoryRecord:
    """``record`` with its ``related`` links to merged-away records pointing at their survivors.

    A link that would point at ``record`` itself is dropped; two links that end at one survivor
    become one with the higher similarity (seed 001 keeps one link per record). Returns
    ``record`` itself when no link changes.
    """
    if not any(link.id in survivors for link in record.related):
        return record
    best: dict[str, float] = {}
    for link in record.related:
        target = survivors.get(link.id, link.id)
        if target != record.id and link.similarity > best.get(target, -1.0):
            best[target] = link.similarity
    ranked = sorted(best.items(), key=lambda item: (-item[1], item[0]))
    return record.replace(related=tuple(RelatedLink(i, sim) for i, sim in ranked))


def relink(records: Sequence[MemoryRecord],
           steps: Sequence[ConsolidationStep]) -> list[tuple[MemoryRecord, MemoryRecord]]:
    """``(before, after)`` of the records outside ``steps`` whose links a pass must redirect.

    A record merged away is deleted; a third record that linked to it would keep a dangling
    ``related`` link. It is rewritten to link to the survivor instead (the kept records of the
    pass are redirected by :func:`plan_consolidation` itself).
    """
    survivors = _survivors(steps)
    if not survivors:
        return []
    involved = set(survivors) | {s.kept.id for s in steps if s.action is Action.MERGED}
    out: list[tuple[MemoryRecord, MemoryRecord]] = []
    for record in records:
        if record.id in involved:
            continue
        after = redirect_links(record, survivors)
        if after is not record:
            out.append((record, after.replace(version=record.version + 1)))
    return out
