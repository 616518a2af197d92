"""Ingest commands: ``ingest``, ``import-conversation``, ``export``, ``events``, ``review``,
``eval dedup``.

``ingest FILE.jsonl --json`` prints ``{"results": [{"line", "action", "reason", "id",
"target_id", "similarity"}], "counts": {action: n}}``; it exits 1 when any line was refused or
failed (the good lines are still ingested), else 0.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from app.cli.context import CliContext
from app.cli.groups import eval_group
from engine.errors import ValidationError
from engine.events import EventFilter
from engine.records import TrustTier, format_timestamp, parse_timestamp

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ingest commands to the CLI."""
    ingest = subparsers.add_parser(
        "ingest", help="ingest a JSONL file through dedup and merge (one memory per line)")
    ingest.add_argument("file", metavar="FILE.jsonl")
    ingest.add_argument("--source", help="source instance for every line "
                                         "(default: the line's own, else import:<file>)")
    ingest.add_argument("--tier", choices=[t.value for t in TrustTier], type=str.lower,
                        help="trust tier for every line (default: the line's own, else auto)")
    ingest.set_defaults(handler=_ingest)

    conversation = subparsers.add_parser(
        "import-conversation",
        help="turn a conversation (JSON list of {speaker|role, content, ts}) into memories")
    conversation.add_argument("file", metavar="FILE")
    conversation.add_argument("--agent", default="default", help="agent id (default: default)")
    conversation.set_defaults(handler=_import_conversation)

    export = subparsers.add_parser("export", help="write every record to a JSONL file")
    export.add_argument("file", metavar="FILE")
    export.add_argument("--redact", action="store_true",
                        help="redact secrets and personal data in the content")
    export.set_defaults(handler=_export)

    events = subparsers.add_parser("events", help="show recorded pipeline and audit events")
    events.add_argument("--since", metavar="TIME", help="ISO-8601 time or epoch ms")
    events.add_argument("--kind", action="append", default=[], help="event kind (repeatable)")
    events.add_argument("--record", metavar="ID", help="events about this record")
    events.add_argument("--limit", type=int, default=100, help="most recent N (default 100)")
    events.set_defaults(handler=_events)

    review = subparsers.add_parser("review", help="the review queue of deferred merges")
    actions = review.add_subparsers(dest="review_action", metavar="ACTION", required=True)
    actions.add_parser("list", help="pending items").set_defaults(handler=_review_list)
    approve = actions.add_parser("approve", help="apply the merge")
    approve.add_argument("id")
    approve.set_defaults(handler=_review_approve)
    reject = actions.add_parser("reject", help="keep both memories")
    reject.add_argument("id")
    reject.set_defaults(handler=_review_reject)

    evaluation = eval_group(subparsers)
    dedup = evaluation.add_parser(
        "dedup", help="merge decision quality on an STS-B-format file, per trust tier")
    dedup.add_argument("file", metavar="FILE.csv")
    dedup.set_defaults(handler=_eval_dedup)


def _ingest(args: argparse.Namespace, ctx: CliContext) -> int:
    engine = ctx.open_engine(embed=True)
    tier = TrustTier(args.tier) if args.tier else None
    report = engine.import_jsonl(args.file, source=args.source, tier=tier)
    if ctx.json:
        ctx.emit_json({"results": [o.to_json() for o in report.lines],
                       "counts": report.counts})
    else:
        for outcome in report.errors:
            ctx.print(f"{args.file}:{outcome.line}: {outcome.reason}")
        ctx.print(", ".join(f"{k} {v}" for k, v in report.counts.items()))
    return 1 if report.errors else 0


def _import_conversation(args: argparse.Namespace, ctx: CliContext) -> int:
    engine = ctx.open_engine(embed=True)
    report = engine.import_conversation(args.file, agent_id=args.agent)
    if ctx.json:
        ctx.emit_json({"results": [o.to_json() for o in report.lines],
                       "counts": report.counts})
    else:
        for outcome in report.errors:
            ctx.print(f"{args.file}: {outcome.reason}")
        ctx.print(", ".join(f"{k} {v}" for k, v in report.counts.items()))
    return 1 if report.errors else 0


def _export(args: argparse.Namespace, ctx: CliContext) -> int:
    engine = ctx.open_engine(read_only=True)
    # The engine's redaction (DESIGN 8): its Redactor carries MEMORY_REDACT_PATTERNS.
    count = engine.export_jsonl(args.file, redact=engine.redact if args.redact else None)
    if ctx.json:
        ctx.emit_json({"file": args.file, "records": count, "redacted": bool(args.redact)})
    else:
        ctx.print(f"exported {count} record(s) to {args.file}")
    return 0


def _events(args: argparse.Namespace, ctx: CliContext) -> int:
    if args.limit < 1:
        raise ValidationError("--limit", args.limit, "must be >= 1")
    since = parse_timestamp(args.since, "--since") if args.since else None
    engine = ctx.open_engine(read_only=True)
    found = engine.events.query(EventFilter(since=since, kinds=args.kind or None,
                                            record_id=args.record, limit=args.limit,
                                            newest_first=True))
    found.reverse()
    if ctx.json:
        ctx.emit_json({"events": [e.to_json() for e in found]})
        return 0
    for event in found:
        similarity = "" if event.similarity is None else f" sim={event.similarity:.3f}"
        reason = f" ({event.decision_reason})" if event.decision_reason else ""
        ctx.print(f"{format_timestamp(event.ts)} #{event.seq} {event.kind}{reason} "
                  f"{event.record_id or '-'}{similarity}")
    return 0


def _review_list(args: argparse.Namespace, ctx: CliContext) -> int:
    items = ctx.open_engine(read_only=True).review_queue()
    if ctx.json:
        ctx.emit_json({"items": [item.to_json() for item in items]})
        return 0
    for item in items:
        similarity = "-" if item.similarity is None else f"{item.similarity:.3f}"
        conflicts = "; ".join(f"{c.kind}: {', '.join(c.existing) or '-'} vs "
                              f"{', '.join(c.incoming) or '-'}" for c in item.conflicts)
        ctx.print(f"{item.id}  {item.reason:<22} sim {similarity}  target {item.target_id}")
        ctx.print(f"    incoming: {item.incoming.content}")
        if conflicts:
            ctx.print(f"    conflicts: {conflicts}")
    ctx.print(f"({len(items)} pending)")
    return 0


def _review_resolve(args: argparse.Namespace, ctx: CliContext, approve: bool) -> int:
    engine = ctx.open_engine(embed=not approve)
    result = engine.approve_review(args.id) if approve else engine.reject_review(args.id)
    if ctx.json:
        ctx.emit_json({"review_id": args.id, "ingest": result.to_json(),
                       "record": None if result.record is None else result.record.to_json()})
    else:
        verb = "merged into" if approve else "kept as"
        ctx.print(f"review {args.id}: {verb} {result.record_id}")
    return 0


def _review_approve(args: argparse.Namespace, ctx: CliContext) -> int:
    return _review_resolve(args, ctx, approve=True)


def _review_reject(args: argparse.Namespace, ctx: CliContext) -> int:
    return _review_resolve(args, ctx, approve=False)


def _eval_dedup(args: argparse.Namespace, ctx: CliContext) -> int:
    from engine.ingest import IngestPolicy
    from engine.ingest.evaluation import evaluate_dedup, read_sts

    pairs = read_sts(args.file)
    def no_model(texts: Any) -> None:
        return None  # the Jaccard path

    embed: Callable[[Any], Any] = no_model
    if ctx.load_model and ctx.settings.load_model:
        embedder = ctx.settings.model_spec().embedder()
        if embedder.wait_ready(180.0):
            embed = embedder.embed
        else:
            ctx.warn(f"note: embedding model unavailable ({embedder.status().reason}); "
                     "evaluating the token-Jaccard path")
    result = evaluate_dedup(pairs, IngestPolicy(), embed=embed)
    if ctx.json:
        ctx.emit_json(result.to_json())
        return 0
    ctx.print(f"{result.pairs} pairs ({result.duplicates} duplicates >= 4.0, "
              f"{result.distinct} distinct < 3.0), {'embedding' if result.semantic else 'jaccard'}"
              " path")
    ctx.print(f"{'tier':<7}{'thr':>6}{'precision':>11}{'recall':>8}{'merge|rev':>11}"
              f"{'review':>8}{'plain prec':>12}{'plain rec':>11}")
    for tier, metrics in result.tiers.items():
        plain = result.baseline[tier]
        precision = "-" if metrics.merge_precision is None else f"{metrics.merge_precision:.3f}"
        plain_precision = "-" if plain.merge_precision is None else f"{plain.merge_precision:.3f}"
        ctx.print(f"{tier:<7}{metrics.threshold:>6.2f}{precision:>11}{metrics.merge_recall:>8.3f}"
                  f"{metrics.merge_or_review_recall:>11.3f}{metrics.review_rate:>8.3f}"
                  f"{plain_precision:>12}{plain.merge_recall:>11.3f}")
    return 0
