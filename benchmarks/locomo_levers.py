"""Two retrieval levers of issue 23, measured by leave-one-conversation-out on LoCoMo.

* ``context``: embed each memory with its context as well as alone — the record's vector is
  ``norm((1 - alpha) * v(text) + alpha * v(context text))``, where the context text adds the
  session date (``On 8 May 2023, Caroline: …``), the previous turn of the session (turns: with
  this one on two lines, or alone — ``previous vector``, its own vector mixed in) or
  the previous fact about the same speaker in the session (observations), or the speaker an
  observation is about (``About Caroline: …``). The query side is unchanged, and
  the stored content (so BM25, speaker and every other component) stays the plain text. The
  vectors enter through the :class:`~engine.embedding.Embedder` protocol, so ingest (dedup,
  merges, review) and retrieval run unchanged through :func:`engine.locomo.evaluate_locomo`.
* ``blend``: the cheaper form of the previous-turn context — after ingest, each turn's stored
  vector blended with the previous turn's (what the retriever could do at query time; dedup
  compared the plain vectors), over a grid of ``alpha``, with the nested leave-one-out choice
  of ``alpha`` (for each fold, chosen on the other four).
* ``engine-blend``: the same through the engine's own ``RetrievalConfig.semantic_blend`` (what
  shipped), both units, with the nested choice.
* ``third``: the third round's levers for observations (``--unit``, ``--lever``): BM25 k1 / b,
  no stemmer, no stop list or a longer one, IDF emphasis, Rocchio feedback on the embedding,
  the ``date`` weight, an observation's subject as its speaker and names kept out of BM25;
  each setting's folds and each lever's nested choice (docs/retrieval.md "Third round").
* ``sessions``: session-level retrieval before turn-level. Records are grouped into sessions
  (created within an hour of each other: LoCoMo's sessions are days apart, turns one second);
  each session is scored for the query (the cosine of its mean vector, its best record's
  cosine, its best record's score, or the mean of its three best scores) and every record's
  engine score gets ``weight`` × its session's score (min-max scaled per query), or
  ``weight`` when its session is among the query's top 3 or 5. The engine's scores come from
  each question's inspection retrieval, so the unboosted re-ranking is the engine's hit@5.

Each prints hit@5 per fold (conv-26, -30, -41, -42, -43), the mean and the worst fold.
Vectors are cached by text under ``/tmp/mnemoscope-quality`` (``tune_quality.VectorCache``).

Usage::

    python benchmarks/locomo_levers.py context  [--locomo FILE]
    python benchmarks/locomo_levers.py blend    [--locomo FILE]
    python benchmarks/locomo_levers.py engine-blend [--locomo FILE]
    python benchmarks/locomo_levers.py third    [--unit observations|turns] [--lever NAME]
    python benchmarks/locomo_levers.py sessions [--locomo FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tune_quality import DATA, VectorCache  # noqa: E402

from engine.embedding import EmbedderState, EmbedderStatus  # noqa: E402
from engine.locomo import (  # noqa: E402
    _OBS_SESSION,
    _SESSION,
    ADVERSARIAL,
    _evidence,
    _record_dia_ids,
    evaluate_locomo,
    ingest,
    locomo_memories,
)

Vectors = npt.NDArray[np.float32]
SESSION_GAP_MS = 3_600_000.0
BLEND_GRID = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)  # the previous-vector mix, nested LOCO's grid
# (form, alpha) runs per unit: the grid measured for docs/retrieval.md
CONTEXT_RUNS = {
    "turns": (("date", 0.5), ("date", 1.0), ("previous", 0.3), ("previous", 0.5),
              ("previous", 0.7), ("previous", 1.0), ("previous+date", 0.5),
              ("previous+date", 0.7), ("previous vector", 0.3), ("previous vector", 0.5)),
    "observations": (("date", 0.5), ("date", 1.0), ("about", 0.5), ("about+date", 0.5),
                     ("previous", 0.5)),
}


class MixedEmbedder:
    """The engine's model through the cache; a memory's text is embedded mixed with its context
    text (``contexts``: text → context text), anything else (the questions) alone."""

    model_name = "all-MiniLM-L6-v2"
    dimension = 384

    def __init__(self, cache: VectorCache, contexts: dict[str, str], alpha: float) -> None:
        self._cache, self._contexts, self._alpha = cache, contexts, alpha

    def status(self) -> EmbedderStatus:
        return EmbedderStatus(EmbedderState.READY, self.model_name, self.dimension, "cached")

    def is_ready(self) -> bool:
        return True

    def embed(self, texts: Sequence[str]) -> Vectors:
        plain = self._cache(list(texts))
        if not self._alpha:
            return plain
        context = self._cache([self._contexts.get(t, t) for t in texts])
        mixed = (1.0 - self._alpha) * plain + self._alpha * context
        return (mixed / np.linalg.norm(mixed, axis=1, keepdims=True)).astype(np.float32)


def _day(stamp: str) -> str:
    """``1:56 pm on 8 May, 2023`` → ``8 May 2023``."""
    return stamp.split(" on ", 1)[-1].replace(",", "")


def context_texts(samples: Sequence[Any], unit: str, form: str) -> dict[str, str]:
    """Each memory's text (as :func:`locomo_memories` writes it) → its context text (the first
    occurrence wins for a text said twice)."""
    out: dict[str, str] = {}
    for sample in samples:
        conversation = sample["conversation"]
        if unit == "turns":
            for key, turns in conversation.items():
                if not _SESSION.match(key) or not isinstance(turns, list):
                    continue
                day = _day(conversation[f"{key}_date_time"])
                previous = ""
                for turn in turns:
                    text = f"{turn['speaker']}: {turn['text']}"
                    context = f"{previous}\n{text}" if previous and "previous" in form else text
                    if form == "previous vector":  # the previous turn's own vector mixed in
                        context = previous or text
                    if "date" in form:
                        context = f"On {day}, {context}"
                    out.setdefault(text, context)
                    previous = text
        else:
            for key, speakers in sample.get("observation", {}).items():
                number = _OBS_SESSION.search(key)
                if number is None:
                    continue
                day = _day(conversation[f"session_{number.group(1)}_date_time"])
                for speaker, facts in speakers.items():
                    previous = ""
                    for text, _dia in facts:
                        if form == "previous":  # the fact noted before it about the speaker
                            out.setdefault(text, f"{previous} {text}" if previous else text)
                            previous = text
                            continue
                        prefix = f"About {speaker}" if "about" in form else ""
                        if "date" in form:
                            prefix = f"{prefix}, on {day}" if prefix else f"On {day}"
                        out.setdefault(text, f"{prefix}: {text}")
    return out


def _summary(per: dict[str, float]) -> str:
    values = list(per.values())
    return (" ".join(f"{v:.3f}" for v in values)
            + f" — mean {np.mean(values):.3f} / worst {min(values):.3f}")


def print_context_table(path: Path) -> None:
    """hit@5 per fold for each context form and mix (alpha 0: the engine as it is)."""
    samples = json.loads(path.read_text(encoding="utf-8"))
    cache = VectorCache()
    for unit, runs in CONTEXT_RUNS.items():
        for form, alpha in (("alone", 0.0), *runs):
            contexts = context_texts(samples, unit, form) if alpha else {}
            result = evaluate_locomo(path, unit=unit,
                                     embedder=MixedEmbedder(cache, contexts, alpha))
            per = {k: v["ours_hit@5"] for k, v in result.to_json()["by_conversation"].items()}
            print(f"{unit}, {form}, alpha {alpha}: {_summary(per)}", flush=True)


def print_blend_table(path: Path) -> None:
    """hit@5 per fold with each turn's vector blended with the previous turn's stored vector
    after ingest (so dedup compared the plain vectors): what the retriever would do at query
    time, ``norm((1 - alpha) * v + alpha * v_previous)`` for a record created within an hour
    of the one before it."""
    import engine.locomo as locomo

    ask = locomo._ask

    def blended_ask(engine: Any, *args: Any, **kwargs: Any) -> None:
        # evaluate_locomo has no hook between ingest and the questions: blend the view's
        # vectors in place here, before the first retrieval derives anything from them
        view = engine.store.view
        snapshot = view.snapshot()
        n = snapshot.n
        created = np.asarray(snapshot.created_at[:n])
        rows = np.flatnonzero(np.asarray(snapshot.alive[:n] & snapshot.has_vector[:n]))
        order = rows[np.argsort(created[rows], kind="stable")]
        plain = np.asarray(snapshot.vectors[:n]).copy()
        for before, row in zip(order[:-1].tolist(), order[1:].tolist(), strict=True):
            if created[row] - created[before] <= SESSION_GAP_MS:
                mixed = (1.0 - alpha) * plain[row] + alpha * plain[before]
                view._vectors[row] = mixed / np.linalg.norm(mixed)
        ask(engine, *args, **kwargs)

    locomo._ask = blended_ask  # type: ignore[assignment]
    grid: dict[float, dict[str, float]] = {}
    try:
        for alpha in BLEND_GRID:
            result = evaluate_locomo(path, unit="turns",
                                     embedder=MixedEmbedder(VectorCache(), {}, 0.0))
            per = {k: v["ours_hit@5"] for k, v in result.to_json()["by_conversation"].items()}
            grid[alpha] = per
            print(f"turns, previous vector at query time, alpha {alpha}: {_summary(per)}",
                  flush=True)
    finally:
        locomo._ask = ask
    print_nested(grid, "alpha")


def engine_folds(path: Path, unit: str, patches: Sequence[tuple[Any, str, Any]] = (),
                 **config: Any) -> dict[str, float]:
    """hit@5 per conversation of the engine with ``config`` replacing fields of its
    :class:`~engine.config.RetrievalConfig` (e.g. ``semantic_blend=0.3``) and ``patches``
    (``(object, attribute, value)``) set for the run: the levers measured before they are
    built into the engine."""
    import dataclasses
    import unittest.mock
    from contextlib import ExitStack

    from engine.clock import DeterministicClock
    from engine.memory_engine import MemoryEngine
    from engine.store import StoreSpec

    embedder = MixedEmbedder(VectorCache(), {}, 0.0)

    def open_engine(directory: str, clock: DeterministicClock) -> MemoryEngine:
        engine = MemoryEngine.open(StoreSpec(directory), ledger_path=None, embedder=embedder,
                                   clock=clock)
        engine.set_retrieval_config(dataclasses.replace(engine.retrieval_config, **config))
        return engine

    with ExitStack() as stack:
        for target, name, value in patches:
            stack.enter_context(unittest.mock.patch.object(target, name, value))
        result = evaluate_locomo(path, unit=unit, embedder=embedder, open_engine=open_engine)
    return {k: v["ours_hit@5"] for k, v in result.to_json()["by_conversation"].items()}


def print_engine_blend_table(path: Path) -> None:
    """hit@5 per fold of the engine's ``semantic_blend`` over :data:`BLEND_GRID`, both units,
    and the nested leave-one-out choice of it (turns)."""
    for unit in ("turns", "observations"):
        grid = {}
        for alpha in BLEND_GRID:
            grid[alpha] = engine_folds(path, unit, semantic_blend=alpha)
            print(f"{unit}, engine semantic_blend {alpha}: {_summary(grid[alpha])}", flush=True)
        print_nested(grid, "alpha")


# -- third round: levers for observations (docs/retrieval.md "Third round") -----------------

_QUESTION_WORDS = frozenset({  # words of questions that say nothing about the answer
    "kind", "type", "likely", "might", "something", "anything", "ever", "usually", "often",
    "recently", "think", "thinks", "describe", "favorite", "favourite"})


def _idf_emphasis(power: float) -> Any:
    """``bm25_weights`` with each term's weight multiplied by ``idf ** (power - 1)``: rare
    query terms count for more, common ones (a name in half the records) for less."""
    import math

    from engine.retrieval import lexical

    def weights(tfs: Any, lengths: Any, *, live: int, avgdl: float, k1: float, b: float
                ) -> Any:
        base = lexical.bm25_weights(tfs, lengths, live=live, avgdl=avgdl, k1=k1, b=b)
        df = len(tfs)
        return base * math.log(1.0 + (live - df + 0.5) / (df + 0.5)) ** (power - 1.0) \
            if df else base

    return weights


_SUBJECT = __import__("re").compile(r"^\s*([A-Z][a-z]+)(?:'s)?\b")


def _subject_terms(speaker_terms: Any) -> Any:
    """``speaker_terms`` that also reads an observation's subject: its first word when
    capitalised (``Melanie ran a charity race`` → melanie; a stop word gives nothing)."""
    from engine.retrieval import lexical

    def subject_terms(text: str) -> tuple[str, ...]:
        found: tuple[str, ...] = speaker_terms(text)
        if found:
            return found
        match = _SUBJECT.match(text)
        return tuple(dict.fromkeys(lexical.terms(match.group(1)))) if match else ()

    return subject_terms


def _names_apart(original: Any) -> Any:
    """``Retriever._lexical`` with the query terms that are a speaker or subject of some
    record (the ``speaker`` field) left out of BM25: names count in one field only."""
    def lexical(self: Any, snapshot: Any, query_terms: Any, candidates: Any) -> Any:
        speakers = self.index._speakers
        kept = [t for t in query_terms if t not in speakers] or list(query_terms)
        return original(self, snapshot, kept, candidates)

    return lexical


def _rocchio(original: Any, top: int, beta: float) -> Any:
    """``Retriever.retrieve`` run twice: the second time with ``norm(q + beta·mean(v))`` over
    the first pass's ``top`` records by score (pseudo-relevance feedback on the embedding)."""
    from engine.retrieval.scoring import lexsort_rank

    def retrieve(self: Any, snapshot: Any, request: Any, *, query_vector: Any,
                 **kwargs: Any) -> Any:
        first = original(self, snapshot, request, query_vector=query_vector, **kwargs)
        d = first.diagnostics
        if query_vector is None or not d.eligible.any():
            return first
        rows = lexsort_rank(d.scores, d.ids, np.flatnonzero(d.eligible))[:top]
        mixed = query_vector + beta * np.asarray(snapshot.vectors)[rows].mean(axis=0)
        mixed = (mixed / np.linalg.norm(mixed)).astype(np.float32)
        return original(self, snapshot, request, query_vector=mixed, **kwargs)

    return retrieve


def _date_weight(scale: float) -> Any:
    """The ``reasoning`` purpose weights with ``date`` multiplied by ``scale``."""
    import dataclasses

    from engine.config import DEFAULT_PURPOSE_WEIGHTS, Purpose

    weights = dict(DEFAULT_PURPOSE_WEIGHTS)
    base = weights[Purpose.REASONING]
    weights[Purpose.REASONING] = dataclasses.replace(base, date=base.date * scale)
    return weights


def third_round_levers() -> list[tuple[str, str, list[tuple[Any, dict[str, Any]]]]]:
    """(lever, grid name, [(patches, config) per grid value]) — the first value of every grid
    is the engine as it is, so nested LOCO may keep it."""
    from engine.retrieval import lexical
    from engine.retrieval import retriever as retriever_module
    from engine.retrieval.retriever import Retriever

    plain: tuple[Any, dict[str, Any]] = ([], {})
    subject = [(lexical, "speaker_terms", _subject_terms(lexical.speaker_terms))]
    apart = [(Retriever, "_lexical", _names_apart(Retriever._lexical))]
    return [
        ("BM25 k1 / b", "k1/b", [plain] + [([], {"bm25_k1": k1, "bm25_b": b})
                                           for k1 in (0.8, 1.6, 2.0) for b in (0.5, 0.75, 0.9)
                                           ] + [([], {"bm25_k1": 1.2, "bm25_b": b})
                                                for b in (0.5, 0.9)]),
        ("stemmer / stop list", "variant", [
            plain, ([(lexical, "stem", lambda word: word)], {}),
            ([(lexical, "STOP_WORDS", frozenset())], {}),
            ([(lexical, "STOP_WORDS", lexical.STOP_WORDS | _QUESTION_WORDS)], {})]),
        ("IDF emphasis", "power", [plain] + [
            ([(retriever_module, "bm25_weights", _idf_emphasis(p))], {}) for p in (1.5, 2.0)]),
        ("Rocchio PRF", "top/beta", [plain] + [
            ([(Retriever, "retrieve", _rocchio(Retriever.retrieve, k, beta))], {})
            for k in (3, 5) for beta in (0.1, 0.2)]),
        ("date weight", "scale", [plain] + [([], {"purpose_weights": _date_weight(x)})
                                            for x in (0.5, 1.5)]),
        ("subject as speaker / names as their own field", "variant", [
            plain, (subject, {}), (subject + apart, {})]),
    ]


THIRD_LABELS = {
    "BM25 k1 / b": ["1.2/0.75"] + [f"{k1}/{b}" for k1 in (0.8, 1.6, 2.0)
                                   for b in (0.5, 0.75, 0.9)] + ["1.2/0.5", "1.2/0.9"],
    "stemmer / stop list": ["engine", "no stemmer", "no stop list", "+ question words"],
    "IDF emphasis": ["1", "1.5", "2"],
    "Rocchio PRF": ["none", "3/0.1", "3/0.2", "5/0.1", "5/0.2"],
    "date weight": ["1", "0.5", "1.5"],
    "subject as speaker / names as their own field": ["engine", "subject", "subject + apart"],
}


def print_third_round(path: Path, unit: str, only: str | None = None) -> None:
    """hit@5 per fold of every third-round lever setting on ``unit``, and each lever's
    nested leave-one-out choice."""
    for lever, name, settings in third_round_levers():
        if only and only not in lever:
            continue
        grid: dict[Any, dict[str, float]] = {}
        for label, (patches, config) in zip(THIRD_LABELS[lever], settings, strict=True):
            grid[label] = engine_folds(path, unit, patches, **config)
            print(f"{unit}, {lever}, {label}: {_summary(grid[label])}", flush=True)
        print_nested(grid, name)


def nested_loco(grid: dict[Any, dict[str, float]]) -> dict[str, tuple[Any, float]]:
    """Nested leave-one-conversation-out: for each fold, the grid value with the best mean
    hit@5 over the other folds (ties: the first in the grid, which lists the engine's own
    setting first), and the held-out fold's hit@5 at it.

    Args:
        grid: value → {conversation: hit@5}.

    Returns:
        {conversation: (chosen value, its hit@5 on that conversation)}.
    """
    folds = list(next(iter(grid.values())))
    out = {}
    for held in folds:
        def others(value: float, held: str = held) -> float:
            return float(np.mean([grid[value][f] for f in folds if f != held]))
        chosen = max(grid, key=others)  # max keeps the first of ties (the engine's own)
        out[held] = (chosen, grid[chosen][held])
    return out


def print_nested(grid: dict[Any, dict[str, float]], name: str) -> None:
    """Print :func:`nested_loco` per fold, its mean and worst fold."""
    nested = nested_loco(grid)
    print(f"nested LOCO ({name} chosen on the other four folds): " + ", ".join(
        f"{fold} {name} {value} -> {hit:.3f}" for fold, (value, hit) in nested.items()))
    print(f"nested LOCO: {_summary({f: h for f, (_, h) in nested.items()})}", flush=True)


def session_rows(path: Path, unit: str) -> list[tuple[str, list[Any]]]:
    """Per conversation, per question: the engine's scores of the eligible records, whether each
    holds evidence, their ids, creation times and vectors, and the query vector."""
    from engine.clock import DeterministicClock
    from engine.memory_engine import MemoryEngine
    from engine.retrieval.types import RetrievalRequest
    from engine.store import StoreSpec

    embedder = MixedEmbedder(VectorCache(), {}, 0.0)
    folds = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        memories = locomo_memories(sample, unit)
        questions = [q for q in sample["qa"] if _evidence(q) and q.get("category") != ADVERSARIAL]
        embedder.embed([m.content for m in memories])
        latest = max(m.created_at or 0.0 for m in memories)
        agent = str(sample["sample_id"])
        rows: list[Any] = []
        with tempfile.TemporaryDirectory(prefix="mnemoscope-levers-") as tmp:
            engine = MemoryEngine.open(StoreSpec(tmp), ledger_path=None, embedder=embedder,
                                       clock=DeterministicClock(latest + 86_400_000.0))
            try:
                dia = _record_dia_ids(engine, ingest(engine, memories))
                snapshot = engine.store.view.snapshot()
                for question in questions:
                    text = str(question["question"])
                    d = engine.retrieve(RetrievalRequest(max_tokens=1, agent_id=agent,
                                                         query=text), inspect=True).diagnostics
                    eligible = np.flatnonzero(d.eligible)
                    ids = [d.ids[r] for r in eligible.tolist()]
                    evidence = _evidence(question)
                    rows.append((np.asarray(d.scores)[eligible],
                                 np.asarray([bool(dia.get(i, set()) & evidence) for i in ids]),
                                 ids, np.asarray(snapshot.created_at)[eligible],
                                 np.asarray(snapshot.vectors)[eligible], embedder.embed([text])[0]))
            finally:
                engine.close()
        folds.append((agent, rows))
    return folds


def _sessions(created: Any) -> Any:
    order = np.argsort(created, kind="stable")
    group = np.zeros(len(created), dtype=np.int64)
    group[order] = np.concatenate(([0], np.cumsum(np.diff(created[order]) > SESSION_GAP_MS)))
    return group


def _session_scores(how: str, group: Any, scores: Any, vectors: Any, query: Any) -> Any:
    count = int(group.max()) + 1
    if how == "mean vector":
        summed = np.zeros((count, vectors.shape[1]))
        np.add.at(summed, group, vectors)
        return (summed / np.linalg.norm(summed, axis=1, keepdims=True)) @ query
    if how == "best cosine":
        best = np.full(count, -1.0)
        np.maximum.at(best, group, vectors @ query)
        return best
    if how == "best score":
        best = np.full(count, -np.inf)
        np.maximum.at(best, group, scores)
        return best
    return np.asarray([np.sort(scores[group == g])[::-1][:3].mean() for g in range(count)])


def boosted_hit5(folds: list[tuple[str, list[Any]]], how: str, weight: float,
                 top: int | None = None) -> dict[str, float]:
    """hit@5 per conversation with the session boost added to the engine's scores."""
    per = {}
    for agent, rows in folds:
        hits = 0
        for scores, relevant, ids, created, vectors, query in rows:
            group = _sessions(created)
            session = _session_scores(how, group, scores, vectors, query)
            if top:
                boost = np.isin(group, np.argsort(-session)[:top]).astype(np.float64)
            else:
                spread = float(session.max() - session.min()) or 1.0
                boost = ((session - session.min()) / spread)[group]
            order = np.lexsort((np.asarray(ids), -(scores + weight * boost)))[:5]
            hits += bool(relevant[order].any())
        per[agent] = hits / len(rows)
    return per


def print_sessions_table(path: Path) -> None:
    """hit@5 per fold for each session score, weight and top-session cut."""
    for unit in ("turns", "observations"):
        folds = session_rows(path, unit)
        print(f"{unit}, engine: {_summary(boosted_hit5(folds, 'best cosine', 0.0))}")
        for how in ("mean vector", "best cosine", "best score", "top-3 mean score"):
            for weight in (0.02, 0.05, 0.1, 0.2):
                print(f"{unit}, {how}, weight {weight}: "
                      f"{_summary(boosted_hit5(folds, how, weight))}", flush=True)
            for top in (3, 5):
                for weight in (0.05, 0.1):
                    print(f"{unit}, {how}, top {top} sessions + {weight}: "
                          f"{_summary(boosted_hit5(folds, how, weight, top))}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("table", choices=["context", "blend", "engine-blend", "sessions",
                                          "third"])
    parser.add_argument("--locomo", type=Path, default=DATA / "locomo" / "locomo_dev.json")
    parser.add_argument("--unit", choices=["turns", "observations"], default="observations",
                        help="third: the unit measured")
    parser.add_argument("--lever", default=None, help="third: only the levers naming this")
    args = parser.parse_args(argv)
    if args.table == "context":
        print_context_table(args.locomo)
    elif args.table == "blend":
        print_blend_table(args.locomo)
    elif args.table == "engine-blend":
        print_engine_blend_table(args.locomo)
    elif args.table == "third":
        print_third_round(args.locomo, args.unit, args.lever)
    else:
        print_sessions_table(args.locomo)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
