"""Retrieval commands: ``search`` (hybrid retrieval with diagnostics) and ``eval locomo``."""

from __future__ import annotations

import argparse
from typing import Any

from app.cli.context import MODEL_WAIT_SECONDS, CliContext
from app.cli.groups import eval_group
from engine import SPLITS, PressureState, Purpose, RetrievalRequest, Strategy

__all__ = ["register"]


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number (got {text})") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1 (got {text})")
    return value


def register(subparsers: Any) -> None:
    """Add ``search`` and ``eval`` to the CLI."""
    search = subparsers.add_parser(
        "search", help="retrieve memories for a query (hybrid ranking, token packing)")
    search.add_argument("query", nargs="?", default=None,
                        help="query text (optional: without it, importance/recency rank)")
    search.add_argument("--agent", help="only this agent's records")
    search.add_argument("--purpose", choices=[p.value for p in Purpose],
                        default=Purpose.REASONING.value)
    search.add_argument("--strategy", choices=[s.value for s in Strategy],
                        default=Strategy.BALANCED.value)
    search.add_argument("--max-tokens", type=_positive, metavar="N",
                        help="token budget (default: MEMORY_MAX_CONTEXT_TOKENS)")
    search.add_argument("--pressure", choices=[p.value for p in PressureState],
                        default=PressureState.NORMAL.value, help="rate-governor pressure state")
    search.add_argument("--inspect", action="store_true",
                        help="look only: do not count accesses or emit events")
    search.add_argument("--candidates", type=int, default=None, metavar="N",
                        help="with --json: list only the top N candidates (default: all)")
    search.set_defaults(handler=_search)

    locomo = eval_group(subparsers).add_parser(
        "locomo", help="LoCoMo hit@k: ours vs plain cosine top-k")
    locomo.add_argument("file", help="LoCoMo JSON (a list of conversations)")
    locomo.add_argument("--unit", choices=["turns", "observations"], default="turns")
    locomo.add_argument("--k", type=_positive, default=5, help="k shown in the summary line")
    locomo.add_argument("--include-adversarial", action="store_true",
                        help="also ask category-5 (unanswerable) questions")
    locomo.add_argument("--review", choices=["keep", "merge", "leave"], default="keep",
                        help="resolve memories the pipeline deferred to review: keep both "
                             "(default), merge, or leave pending (lost to the eval)")
    locomo.add_argument("--split", choices=list(SPLITS), default="all",
                        help="dev: the first 3 of every 5 conversations (tune on these); "
                             "held-out: the other 2 (they decide); all (default): both, "
                             "reported per split too")
    locomo.add_argument("--folds", action="store_true",
                        help="also print each conversation as a leave-one-out fold (hit@5, "
                             "memories deferred to review), with the mean and the worst fold")
    locomo.add_argument("--conversations", type=_positive, default=None, metavar="N",
                        help="only the first N conversations (of the split)")
    locomo.add_argument("--questions", type=_positive, default=None, metavar="N",
                        help="only the first N questions per conversation")
    locomo.set_defaults(handler=_eval_locomo)


def _search(args: argparse.Namespace, ctx: CliContext) -> int:
    engine = ctx.open_engine(read_only=args.inspect, embed=bool(args.query))
    budget = args.max_tokens or engine.config.memory.max_context_tokens
    request = RetrievalRequest(max_tokens=budget, query=args.query,
                               agent_id=ctx.agent(engine, args.agent),
                               purpose=args.purpose, strategy=args.strategy,
                               pressure_state=args.pressure)
    bundle = engine.retrieve(request, inspect=args.inspect)
    if not bundle.records:
        ctx.note_unknown_agent(engine, request.agent_id)
    if ctx.json:
        ctx.emit_json(bundle.to_json(limit=args.candidates))
        return 0
    d = bundle.diagnostics
    ctx.print(f"{len(bundle.records)} of {d.candidate_count} candidates "
              f"({d.filtered_count} filtered), {bundle.total_tokens}/{d.budget} tokens"
              f"{', truncated' if bundle.truncated else ''}"
              f"{', compressed' if d.compression_applied else ''}; "
              f"strategy {bundle.strategy_applied}, semantic {d.semantic_label}, "
              f"{d.time_ms:.2f} ms")
    scores = {d.ids[r]: float(d.scores[r]) for r in d.rows.tolist()}
    for i, record in enumerate(bundle.records, 1):
        # the whole id, as `list` prints it: `get`, `edit` and `fate` take nothing shorter
        ctx.print(f"{i:>3}. {scores.get(record.id, 0.0):.3f}  [{record.layer.value}] "
                  f"{ctx.ident(record.id)}  {record.content}")
    return 0


def _eval_locomo(args: argparse.Namespace, ctx: CliContext) -> int:
    from engine import evaluate_locomo

    embedder = None
    if ctx.load_model and ctx.settings.load_model:
        embedder = ctx.settings.model_spec().embedder()
        if not embedder.wait_ready(MODEL_WAIT_SECONDS):
            ctx.warn(f"note: embedding model unavailable ({embedder.status().reason}); "
                     "ranking on token Jaccard, the cosine baseline scores 0")
            embedder = None
    result = evaluate_locomo(args.file, unit=args.unit, embedder=embedder,
                             include_adversarial=args.include_adversarial, review=args.review,
                             split=args.split, limit_conversations=args.conversations,
                             limit_questions=args.questions, progress=ctx.warn)
    document = result.to_json()
    if ctx.json:
        ctx.emit_json(document)
        return 0
    k = f"hit@{args.k}" if f"hit@{args.k}" in document["ours"] else "hit@5"
    ctx.print(f"LoCoMo {args.unit}: {document['questions']} questions; "
              f"ours {k} {document['ours'][k]:.3f}, cosine baseline "
              f"{document['baseline'][k]:.3f}")
    for name in ("ours", "baseline"):
        ctx.print(f"  {name:<9} " + "  ".join(f"{key} {value:.3f}"
                                              for key, value in document[name].items()))
    for part, line in document["by_split"].items():
        ctx.print(f"  {part:<9} {line['questions']} questions: ours hit@5 "
                  f"{line['ours_hit@5']:.3f}, cosine {line['baseline_hit@5']:.3f}")
    ingested = sum(document["ingest"].get(a, 0) for a in
                   ("inserted", "merged", "updated", "skipped", "deferred", "error"))
    if ingested:
        ctx.print(f"  ingest: {document['ingest'].get('deferred', 0)} of {ingested} "
                  f"{args.unit} deferred to review")
    if args.folds:
        ctx.print("  folds (one conversation each): questions, ours hit@5, cosine hit@5, "
                  "deferred")
        for name, line in document["by_conversation"].items():
            ctx.print(f"    {name:<10}{line['questions']:>5}{line['ours_hit@5']:>8.3f}"
                      f"{line['baseline_hit@5']:>8.3f}{line['deferred_rate']:>8.3f}")
        folds = document["folds"]
        if folds["count"]:
            ctx.print(f"    mean      {'':>5}{folds['ours_hit@5']['mean']:>8.3f}"
                      f"{folds['baseline_hit@5']['mean']:>8.3f}"
                      f"{folds['deferred_rate']['mean']:>8.3f}")
            ctx.print(f"    worst     {'':>5}{folds['ours_hit@5']['worst']:>8.3f}"
                      f"{folds['baseline_hit@5']['worst']:>8.3f}"
                      f"{folds['deferred_rate']['worst']:>8.3f}")
    return 0
