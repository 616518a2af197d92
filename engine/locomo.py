"""LoCoMo retrieval evaluation: hit@k of our ranking against plain cosine top-k.

For each conversation a fresh temporary store is opened and filled through the engine's normal
ingest pipeline (:func:`ingest`: ``MemoryEngine.ingest_batch``, with dedup, merges and the
surprise gate), either with turns (``"Speaker: text"``, episodic, created at the
session date plus one second per turn so their order survives) or with observations (semantic).
Every question that has evidence (category 5, the adversarial questions LoCoMo marks
unanswerable, is left out unless asked for) is retrieved with :meth:`MemoryEngine.retrieve` in
inspection mode; a hit at k is any evidence ``dia_id`` among the top k records (a record that
absorbed others counts for all of their ``dia_id``s). The baseline ranks the same records by
cosine alone, with the same embeddings, in the same run.

Splits: of every five conversations in file order the first three are ``dev`` (ranking changes
are tuned on them) and the last two ``held-out`` (they decide); :func:`split_of` says which.
Results are reported per split as well as overall.

Folds: every conversation is also reported on its own (``by_conversation``: questions, hit@5 of
both rankings, and how many of its memories ingest deferred to review). The ranking has no
parameters fitted to conversations, so leave-one-conversation-out over the file is exactly these
per-conversation figures; ``folds`` gives their mean and the worst fold (choose by the mean
and check the worst, never the best split).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.clock import DeterministicClock
from engine.errors import InputFormatError
from engine.ingest.conversations import locomo_session_time
from engine.records import Category, Layer, NewMemory, Privacy, TrustTier
from engine.retrieval.types import RetrievalRequest

if TYPE_CHECKING:
    from engine.embedding import Embedder
    from engine.memory_engine import MemoryEngine

__all__ = ["KS", "SPLITS", "LocomoResult", "evaluate_locomo", "ingest", "locomo_memories",
           "split_of"]

KS = (1, 5, 10)
SPLITS = ("all", "dev", "held-out")
ADVERSARIAL = 5
_SESSION = re.compile(r"^session_(\d+)$")
_OBS_SESSION = re.compile(r"(\d+)")


@dataclass(slots=True)
class LocomoResult:
    """Hit counts of one evaluation run."""

    unit: str
    questions: int = 0
    ours: dict[int, int] = field(default_factory=lambda: dict.fromkeys(KS, 0))
    baseline: dict[int, int] = field(default_factory=lambda: dict.fromkeys(KS, 0))
    by_category: dict[int, list[int]] = field(default_factory=dict)  # [n, ours@5, base@5]
    by_split: dict[str, list[int]] = field(default_factory=dict)  # [n, ours@5, base@5]
    # [n, ours@5, base@5, memories, deferred] per conversation (one fold each)
    by_conversation: dict[str, list[int]] = field(default_factory=dict)
    ingest: dict[str, int] = field(default_factory=dict)
    records: int = 0
    split: str = "all"
    conversations: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """``{"questions": n, "ours": {"hit@1": x, ...}, "baseline": {...}}`` (+ details)."""
        def rates(hits: Mapping[int, int]) -> dict[str, float]:
            return {f"hit@{k}": round(hits[k] / self.questions, 4) if self.questions else 0.0
                    for k in KS}

        def at5(groups: Mapping[Any, list[int]]) -> dict[str, dict[str, float]]:
            return {str(key): {"questions": v[0], "ours_hit@5": round(v[1] / v[0], 4),
                               "baseline_hit@5": round(v[2] / v[0], 4)}
                    for key, v in sorted(groups.items())}

        return {"questions": self.questions, "unit": self.unit, "ours": rates(self.ours),
                "baseline": rates(self.baseline), "records": self.records,
                "split": self.split, "conversations": list(self.conversations),
                "ingest": dict(sorted(self.ingest.items())),
                "by_split": at5(self.by_split), "by_category": at5(self.by_category),
                "by_conversation": {
                    key: {**at5({key: v[:3]})[key], "memories": v[3], "deferred": v[4],
                          "deferred_rate": round(v[4] / v[3], 4) if v[3] else 0.0}
                    for key, v in self.by_conversation.items()},
                "folds": self.folds()}

    def folds(self) -> dict[str, Any]:
        """Leave-one-conversation-out summary: mean and worst fold of hit@5 (both rankings)
        and of the share of memories deferred to review (worst = highest)."""
        rows = [v for v in self.by_conversation.values() if v[0]]
        if not rows:
            return {"count": 0}
        ours = [v[1] / v[0] for v in rows]
        base = [v[2] / v[0] for v in rows]
        deferred = [v[4] / v[3] if v[3] else 0.0 for v in rows]
        return {"count": len(rows),
                "ours_hit@5": {"mean": round(sum(ours) / len(ours), 4),
                               "worst": round(min(ours), 4)},
                "baseline_hit@5": {"mean": round(sum(base) / len(base), 4),
                                   "worst": round(min(base), 4)},
                "deferred_rate": {"mean": round(sum(deferred) / len(deferred), 4),
                                  "worst": round(max(deferred), 4)}}


def split_of(index: int) -> str:
    """``dev`` or ``held-out`` for the conversation at ``index`` in file order (3 of 5 dev)."""
    return "dev" if index % 5 < 3 else "held-out"


def locomo_memories(sample: Mapping[str, Any], unit: str, source: str = "locomo"
                    ) -> list[NewMemory]:
    """The memories one LoCoMo conversation contributes (``unit``: turns or observations)."""
    conversation = sample["conversation"]
    agent = str(sample.get("sample_id", "locomo"))
    out: list[NewMemory] = []
    common: dict[str, Any] = {"agent_id": agent, "importance": 0.5, "confidence": 0.8,
                              "privacy": Privacy.PRIVATE, "source": source,
                              "source_tier": TrustTier.AUTO}
    if unit == "turns":
        for key, turns in conversation.items():
            match = _SESSION.match(key)
            if not match or not isinstance(turns, list):
                continue
            start = locomo_session_time(conversation[f"{key}_date_time"], source)
            for i, turn in enumerate(turns):
                out.append(NewMemory(
                    content=f"{turn['speaker']}: {turn['text']}", layer=Layer.EPISODIC,
                    category=Category.EPISODE, created_at=start + i * 1000.0,
                    metadata={"dia_ids": [turn["dia_id"]], "session": int(match.group(1))},
                    **common))
    elif unit == "observations":
        for key, speakers in sample.get("observation", {}).items():
            number = _OBS_SESSION.search(key)
            if number is None:
                continue
            stamp = conversation[f"session_{number.group(1)}_date_time"]
            start = locomo_session_time(stamp, source)
            i = 0
            for facts in speakers.values():
                for text, dia in facts:
                    ids = dia if isinstance(dia, list) else [dia]
                    out.append(NewMemory(
                        content=text, layer=Layer.SEMANTIC, category=Category.FACT,
                        created_at=start + i * 1000.0,
                        metadata={"dia_ids": [str(d) for d in ids],
                                  "session": int(number.group(1))}, **common))
                    i += 1
    else:
        raise InputFormatError(source, 0, "unit", f"{unit!r} is not turns or observations")
    return out


REVIEW_CHOICES = ("keep", "merge", "leave")


def ingest(engine: MemoryEngine, memories: Sequence[NewMemory], *, review: str = "keep",
           counts: dict[str, int] | None = None) -> dict[str, set[str]]:
    """Ingest through the normal pipeline (dedup, merge, surprise); return record → dia_ids.

    A memory that was inserted, merged into a record, updated a record or skipped as a
    duplicate of a record counts for that record. Memories the pipeline deferred to the review
    queue are resolved as no human is there to: ``keep`` (reject the merge: store both, the
    default), ``merge`` (approve it: the target absorbs them) or ``leave`` (pending: not in the
    store, so they count for nothing).

    Args:
        counts: Receives ``{action: n}`` of the pipeline (and ``review_<choice>``).
    """
    result = engine.ingest_batch(list(memories))
    covered: dict[str, set[str]] = {}
    for memory, outcome in zip(memories, result.results, strict=False):
        action = outcome.action.value
        if counts is not None:
            counts[action] = counts.get(action, 0) + 1
        if action == "deferred" and outcome.review_id and review != "leave":
            outcome = (engine.reject_review(outcome.review_id) if review == "keep"
                       else engine.approve_review(outcome.review_id))
            if counts is not None:
                counts[f"review_{review}"] = counts.get(f"review_{review}", 0) + 1
        elif action in ("deferred", "error"):
            continue
        if outcome.record is None:
            continue
        covered.setdefault(outcome.record.id, set()).update(
            str(d) for d in memory.metadata.get("dia_ids", []))
    return covered


def _evidence(question: Mapping[str, Any]) -> set[str]:
    found: set[str] = set()
    for item in question.get("evidence") or []:
        found.update(part.strip() for part in str(item).split(";") if part.strip())
    return found


def _record_dia_ids(engine: MemoryEngine, covered: Mapping[str, set[str]]
                    ) -> dict[str, set[str]]:
    snapshot = engine.store.view.snapshot()
    ids = [snapshot.ids[r] for r in snapshot.live_rows.tolist()]
    records = engine.get_many(ids)
    direct = {r.id: {str(d) for d in r.metadata.get("dia_ids", [])} for r in records}
    out: dict[str, set[str]] = {}
    for record in records:
        dia = set(direct[record.id]) | covered.get(record.id, set())
        for absorbed in record.merged_from:  # a merged record answers for what it absorbed
            dia |= direct.get(absorbed, set())
        out[record.id] = dia
    return out


def evaluate_locomo(path: str | Path, *, unit: str, embedder: Embedder | None,
                    include_adversarial: bool = False, review: str = "keep",
                    split: str = "all", limit_conversations: int | None = None,
                    limit_questions: int | None = None,
                    open_engine: Callable[[str, DeterministicClock], MemoryEngine] | None = None,
                    progress: Callable[[str], None] | None = None) -> LocomoResult:
    """Run the evaluation over the LoCoMo file at ``path``.

    Args:
        unit: ``turns`` or ``observations``.
        embedder: The embedding model (None: Jaccard path; the baseline then scores 0).
        include_adversarial: Also ask category-5 questions.
        review: How deferred memories are resolved (:func:`ingest`).
        split: ``all``, or only the ``dev`` or ``held-out`` conversations (:func:`split_of`).
        limit_conversations: Only the first N conversations of the split (tests use a slice).
        limit_questions: Only the first N qualifying questions per conversation.
        open_engine: Opens an engine on a directory (default: embedded store, in-memory ledger).
    """
    from engine.memory_engine import MemoryEngine
    from engine.store import StoreSpec

    source = str(path)
    try:
        samples = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputFormatError(source, 0, "file", f"cannot read LoCoMo JSON: {exc}") from exc
    if not isinstance(samples, list):
        raise InputFormatError(source, 0, "file", "expected a list of conversations")
    if split not in SPLITS:
        raise InputFormatError(source, 0, "split", f"{split!r} is not one of {', '.join(SPLITS)}")
    chosen = [(split_of(i), sample) for i, sample in enumerate(samples)
              if split == "all" or split_of(i) == split]
    result = LocomoResult(unit=unit, split=split)
    for part, sample in chosen[:limit_conversations]:
        memories = locomo_memories(sample, unit, source)
        questions = [q for q in sample.get("qa", []) if _evidence(q)
                     and (include_adversarial or q.get("category") != ADVERSARIAL)]
        questions = questions[:limit_questions]
        if not memories or not questions:
            continue
        latest = max(m.created_at or 0.0 for m in memories)
        clock = DeterministicClock(latest + 86_400_000.0)
        if embedder is not None:  # one batch each, so the per-record calls hit the cache
            embedder.embed([m.content for m in memories])
            embedder.embed([str(q["question"]) for q in questions])
        with tempfile.TemporaryDirectory(prefix="mnemoscope-locomo-") as tmp:
            engine = open_engine(tmp, clock) if open_engine else MemoryEngine.open(
                StoreSpec(tmp), ledger_path=None, embedder=embedder, clock=clock)
            try:
                counts: dict[str, int] = {}
                covered = ingest(engine, memories, review=review, counts=counts)
                for action, n in counts.items():
                    result.ingest[action] = result.ingest.get(action, 0) + n
                result.by_conversation[str(sample.get("sample_id", "locomo"))] = [
                    0, 0, 0, len(memories), counts.get("deferred", 0)]
                result.records += engine.count()
                _ask(engine, sample, questions, result, covered, part)
                result.conversations.append(str(sample.get("sample_id", "")))
            finally:
                engine.close()
        if progress is not None:
            progress(f"{sample.get('sample_id')}: {len(memories)} {unit}, "
                     f"{len(questions)} questions")
    return result


def _ask(engine: MemoryEngine, sample: Mapping[str, Any], questions: Sequence[Mapping[str, Any]],
         result: LocomoResult, covered: Mapping[str, set[str]], part: str) -> None:
    dia = _record_dia_ids(engine, covered)
    agent = str(sample.get("sample_id", "locomo"))
    snapshot = engine.store.view.snapshot()
    live = snapshot.live_rows
    for question in questions:
        evidence = _evidence(question)
        text = str(question["question"])
        bundle = engine.retrieve(RetrievalRequest(max_tokens=1, query=text, agent_id=agent),
                                 inspect=True)
        diagnostics = bundle.diagnostics
        ranked = [diagnostics.ids[r] for r in _top(diagnostics.scores, diagnostics.eligible,
                                                   diagnostics.ids, max(KS))]
        vectors = engine.embed_texts([text])
        if vectors is not None:
            cosine = snapshot.vectors[live] @ vectors[0]
            order = live[np.argsort(-cosine, kind="stable")[: max(KS)]]
            base = [snapshot.ids[r] for r in order.tolist()]
        else:
            base = []
        result.questions += 1
        groups = (result.by_category.setdefault(int(question.get("category", 0)), [0, 0, 0]),
                  result.by_split.setdefault(part, [0, 0, 0]),
                  result.by_conversation[agent])
        for stats in groups:
            stats[0] += 1
        for k in KS:
            ours_hit = any(dia.get(i, set()) & evidence for i in ranked[:k])
            base_hit = any(dia.get(i, set()) & evidence for i in base[:k])
            result.ours[k] += ours_hit
            result.baseline[k] += base_hit
            if k == 5:
                for stats in groups:
                    stats[1] += ours_hit
                    stats[2] += base_hit


def _top(scores: np.ndarray[Any, Any], eligible: np.ndarray[Any, Any], ids: Sequence[str],
         k: int) -> Iterator[int]:
    from engine.retrieval.scoring import lexsort_rank

    rows = np.flatnonzero(eligible)
    yield from lexsort_rank(scores, ids, rows)[:k].tolist()
