"""Tuning tables for issue 23 ("quality that generalizes"): dedup rules on STS-B train, the
review load on LoCoMo turns, and retrieval by leave-one-conversation-out.

Every choice is made on the training data only and reported beside the check it did not see:

* ``dedup``: the merge decision (the engine's own :func:`decide`) on ``sts-train.csv`` and
  ``sts-dev.csv`` for a grid of rule settings; a setting is chosen on train, dev is the check.
* ``review``: what ingesting LoCoMo turns defers to review, per reason, for the same settings
  (each conversation's turns in order against the turns kept before them, as the pipeline does).
* ``locomo``: the retrieval ranking's hit@5 per fold of leave-one-conversation-out over the
  five dev conversations (mean and worst fold), for the default weights and for the ranking
  model learned on the other four conversations of each fold.

Vectors come from the engine's own embedding model and are cached under
``/tmp/mnemoscope-quality`` (not in git), keyed by text, so a second run encodes nothing.

Usage::

    python benchmarks/tune_quality.py dedup  [--stsb DIR]
    python benchmarks/tune_quality.py review [--locomo FILE]
    python benchmarks/tune_quality.py locomo [--locomo FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.ingest.decision import Candidate, decide  # noqa: E402
from engine.ingest.evaluation import evaluate_dedup, read_sts  # noqa: E402
from engine.ingest.kinds import Action  # noqa: E402
from engine.ingest.policy import IngestPolicy  # noqa: E402
from engine.ingest.surprise import SurpriseScore  # noqa: E402
from engine.records import Category, TrustTier  # noqa: E402

CACHE = Path(os.environ.get("MNEMOSCOPE_QUALITY_CACHE", "/tmp/mnemoscope-quality"))
DATA = ROOT.parent / "shared" / "data"
_NOVEL = SurpriseScore(1.0, 1.0, 1.0, 1.0, False, 0.8)

Vectors = npt.NDArray[np.float32]


class VectorCache:
    """Text → unit vector from the engine's model, persisted as one ``.npz`` under CACHE."""

    def __init__(self, path: Path = CACHE / "vectors.npz") -> None:
        self._path = path
        self._rows: dict[str, int] = {}
        self._matrix = np.zeros((0, 384), dtype=np.float32)
        if path.exists():
            data = np.load(path, allow_pickle=False)
            self._matrix = data["vectors"]
            self._rows = {t: i for i, t in enumerate(data["texts"].tolist())}
        self._embedder: Any = None

    def __call__(self, texts: Sequence[str]) -> Vectors:
        missing = list(dict.fromkeys(t for t in texts if t not in self._rows))
        if missing:
            vectors = self._model().embed(missing)
            start = len(self._rows)
            self._matrix = np.vstack([self._matrix, vectors.astype(np.float32)])
            for i, text in enumerate(missing):
                self._rows[text] = start + i
            self._path.parent.mkdir(parents=True, exist_ok=True)
            ordered = sorted(self._rows, key=self._rows.__getitem__)
            np.savez(self._path, vectors=self._matrix, texts=np.asarray(ordered))
        return self._matrix[[self._rows[t] for t in texts]]

    def _model(self) -> Any:
        if self._embedder is None:
            from app.settings import load_settings

            self._embedder = load_settings().model_spec().embedder()
            self._embedder.start_loading()
            if not self._embedder.wait_ready(300.0):
                raise SystemExit(f"model unavailable: {self._embedder.status().reason}")
        return self._embedder


# -- LoCoMo turns and their candidates ------------------------------------------------------

def locomo_candidates(cache: VectorCache, path: Path) -> tuple[list[Any], int]:
    """Each LoCoMo turn with its 16 most similar earlier turns of the conversation, most similar
    first (what the pipeline's candidate search finds when every earlier turn was kept), and
    the number of turns."""
    from engine.locomo import locomo_memories

    out: list[Any] = []
    turns = 0
    for sample in json.loads(path.read_text(encoding="utf-8")):
        texts = [m.content for m in locomo_memories(sample, "turns")]
        turns += len(texts)
        vectors = cache(texts)
        sims = vectors @ vectors.T
        for i in range(1, len(texts)):
            nearest = np.argsort(-sims[i, :i], kind="stable")[:16].tolist()
            out.append((texts[i], [Candidate(str(j), float(sims[i, j]), Category.EPISODE,
                                             texts[j]) for j in nearest]))
    return out, turns


# -- review load on LoCoMo turns (the real pipeline) ------------------------------------------

def review_load(path: Path, tier: TrustTier) -> list[dict[str, Any]]:
    """Ingest each conversation's turns into a fresh store through ``ingest_batch``; per
    conversation: turns, actions and the reasons of the deferrals."""
    import tempfile

    from engine.clock import DeterministicClock
    from engine.locomo import locomo_memories
    from engine.memory_engine import MemoryEngine
    from engine.store import StoreSpec

    embedder = VectorCache()._model()
    out = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        memories = [replace(m, source_tier=tier) for m in locomo_memories(sample, "turns")]
        latest = max(m.created_at or 0.0 for m in memories)
        with tempfile.TemporaryDirectory(prefix="mnemoscope-review-") as tmp:
            engine = MemoryEngine.open(StoreSpec(tmp), ledger_path=None, embedder=embedder,
                                       clock=DeterministicClock(latest + 86_400_000.0))
            try:
                result = engine.ingest_batch(memories)
            finally:
                engine.close()
        actions = Counter(r.action.value for r in result.results)
        reasons = Counter(r.reason.value for r in result.results
                          if r.action is Action.DEFERRED)
        out.append({"conversation": str(sample.get("sample_id")), "turns": len(memories),
                    "actions": dict(actions), "deferred": dict(reasons)})
    return out


def print_review_load(path: Path) -> None:
    """The review-load table: deferred turns per conversation and tier, with reasons."""
    for tier in (TrustTier.AGENT, TrustTier.AUTO):
        rows = review_load(path, tier)
        total = sum(r["turns"] for r in rows)
        deferred = sum(r["actions"].get("deferred", 0) for r in rows)
        reasons: Counter[str] = Counter()
        for row in rows:
            reasons.update(row["deferred"])
        worst = max(rows, key=lambda r: r["actions"].get("deferred", 0) / r["turns"])
        print(f"{tier.value}: {deferred} of {total} turns deferred "
              f"({deferred / total:.3f}); worst conversation {worst['conversation']} "
              f"{worst['actions'].get('deferred', 0) / worst['turns']:.3f}; "
              f"reasons {dict(reasons.most_common())}")
        for row in rows:
            print(f"  {row['conversation']}: {row['turns']} turns, {row['actions']}")


# -- the dedup table: one knob at a time around the chosen rules ------------------------------

def _variants() -> list[tuple[str, IngestPolicy]]:
    from engine.config import DedupConfig

    base = IngestPolicy()
    out = [("chosen (defaults)", base)]
    for margin in (0.0, 0.05, 0.15):
        out.append((f"merge_margin {margin}", replace(base, merge_margin=margin)))
    for width in (0.10, 0.20, 0.40):
        floor = round(0.80 - width, 2)
        out.append((f"review floor {floor}", replace(base, dedup=DedupConfig(gray_zone=width))))
    for value in (0.0, 0.2, 0.25, 0.3):
        out.append((f"min_jaccard {value}", replace(base, min_jaccard=value)))
    for value in (0.0, 0.3, 0.5):
        out.append((f"contradiction_min_jaccard {value}",
                    replace(base, contradiction_min_jaccard=value)))
    out.append(("distinct_speakers off", replace(base, distinct_speakers=False)))
    out.append(("confirm_band 0.05", replace(base, confirm_band=0.05)))
    return out


def locomo_deferrals(candidates: list[Any], turns: int, policy: IngestPolicy,
                     tier: TrustTier) -> float:
    """Share of LoCoMo turns :func:`decide` defers against their earlier turns (every earlier
    turn kept: an approximation of the pipeline, which keeps deferred turns out)."""
    deferred = 0
    for incoming, found in candidates:
        decision = decide(content=incoming, confidence=0.8, tier=tier, category=Category.EPISODE,
                          exact=None, candidates=found, semantic=True, surprise=_NOVEL,
                          policy=policy)
        deferred += decision.action is Action.DEFERRED
    return deferred / turns


def print_dedup_table(stsb: Path, locomo: Path) -> None:
    """Merge precision and merge-or-review recall per tier on train and dev, and the LoCoMo
    turns deferred, for the chosen rules and one knob changed at a time."""
    cache = VectorCache()
    files = {name: read_sts(stsb / f"sts-{name}.csv") for name in ("train", "dev")}
    candidates, turns = locomo_candidates(cache, locomo)
    print("variant | train precision h/a/u | train merge|review recall | dev precision h/a/u | "
          "dev merge|review recall | LoCoMo turns deferred (agent, approx.)")
    for name, policy in _variants():
        cells = []
        for split in ("train", "dev"):
            result = evaluate_dedup(files[split], policy, embed=cache)
            cells.append("/".join(f"{m.merge_precision or 0.0:.3f}"
                                  for m in result.tiers.values()))
            cells.append("/".join(f"{m.merge_or_review_recall:.3f}"
                                  for m in result.tiers.values()))
        share = locomo_deferrals(candidates, turns, policy, TrustTier.AGENT)
        print(f"{name} | " + " | ".join(cells) + f" | {share:.3f}")


# -- LoCoMo: a ranking model over the score components, by leave-one-conversation-out ---------

def locomo_components(path: Path, unit: str) -> list[tuple[str, list[Any]]]:
    """Per conversation, per question: the component matrix of every eligible candidate (weights
    not applied), whether it holds evidence, the engine's final score and the ids."""
    import tempfile

    from engine.clock import DeterministicClock
    from engine.locomo import ADVERSARIAL, _evidence, _record_dia_ids, ingest, locomo_memories
    from engine.memory_engine import MemoryEngine
    from engine.retrieval.types import RetrievalRequest
    from engine.store import StoreSpec

    embedder = VectorCache()._model()
    folds = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        memories = locomo_memories(sample, unit)
        questions = [q for q in sample["qa"]
                     if _evidence(q) and q.get("category") != ADVERSARIAL]
        latest = max(m.created_at or 0.0 for m in memories)
        agent = str(sample["sample_id"])
        rows: list[Any] = []
        with tempfile.TemporaryDirectory(prefix="mnemoscope-rank-") as tmp:
            engine = MemoryEngine.open(StoreSpec(tmp), ledger_path=None, embedder=embedder,
                                       clock=DeterministicClock(latest + 86_400_000.0))
            try:
                dia = _record_dia_ids(engine, ingest(engine, memories))
                for question in questions:
                    evidence = _evidence(question)
                    d = engine.retrieve(RetrievalRequest(max_tokens=1, agent_id=agent,
                                                         query=str(question["question"])),
                                        inspect=True).diagnostics
                    eligible = np.flatnonzero(d.eligible)
                    ids = [d.ids[r] for r in eligible.tolist()]
                    rows.append((np.asarray(d.components)[eligible],
                                 np.asarray([bool(dia.get(i, set()) & evidence) for i in ids]),
                                 np.asarray(d.scores)[eligible], ids))
            finally:
                engine.close()
        folds.append((agent, rows))
    return folds


def _hit5(scores: Any, relevant: Any, ids: Sequence[str]) -> bool:
    order = sorted(range(len(ids)), key=lambda i: (-scores[i], ids[i]))[:5]
    return bool(relevant[order].any())


def fit_listwise(folds: list[tuple[str, list[Any]]], start: Any, *, l2: float,
                 temperature: float = 20.0, iterations: int = 300, rate: float = 0.05) -> Any:
    """Non-negative component weights maximizing the softmax probability of the evidence among
    each question's 100 best candidates (and its evidence), L2-pulled towards ``start``."""
    questions = []
    for _, rows in folds:
        for x, relevant, score, _ids in rows:
            if relevant.any():
                keep = np.union1d(np.argsort(-score)[:100], np.flatnonzero(relevant))
                questions.append((x[keep], relevant[keep]))
    weights = start.copy()
    for _ in range(iterations):
        gradient = np.zeros_like(weights)
        for x, relevant in questions:
            logits = temperature * (x @ weights)
            p = np.exp(logits - logits.max())
            p /= p.sum()
            gradient += temperature * (p @ x - (p[relevant] @ x[relevant]) / p[relevant].sum())
        weights = np.maximum(0.0, weights - rate * (gradient / len(questions)
                                                    + l2 * (weights - start)))
    return weights


def print_locomo_table(path: Path) -> None:
    """hit@5 per fold (leave one conversation out) of the default weights and of weights learned
    on the other four conversations."""
    from engine.config import COMPONENTS, DEFAULT_PURPOSE_WEIGHTS, Purpose

    defaults = DEFAULT_PURPOSE_WEIGHTS[Purpose.REASONING]
    start = np.asarray([getattr(defaults, c) for c in COMPONENTS], dtype=np.float64)
    start /= start.sum()
    for unit in ("turns", "observations"):
        folds = locomo_components(path, unit)
        for l2 in (1.0, 0.1):
            base, learned = [], []
            for i, (_name, rows) in enumerate(folds):
                weights = fit_listwise([f for j, f in enumerate(folds) if j != i], start, l2=l2)
                base.append(float(np.mean([_hit5(s, r, ids) for _x, r, s, ids in rows])))
                learned.append(float(np.mean([_hit5(x @ weights, r, ids)
                                              for x, r, _s, ids in rows])))
            print(f"{unit}, l2 {l2}: default mean {np.mean(base):.3f} worst {min(base):.3f} "
                  f"({' '.join(f'{b:.3f}' for b in base)}); learned mean {np.mean(learned):.3f} "
                  f"worst {min(learned):.3f} ({' '.join(f'{v:.3f}' for v in learned)})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("table", choices=["dedup", "review", "locomo"])
    parser.add_argument("--locomo", type=Path, default=DATA / "locomo" / "locomo_dev.json")
    parser.add_argument("--stsb", type=Path, default=DATA / "stsb")
    args = parser.parse_args(argv)
    if args.table == "review":
        print_review_load(args.locomo)
    elif args.table == "dedup":
        print_dedup_table(args.stsb, args.locomo)
    else:
        print_locomo_table(args.locomo)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
