"""Ingest commands: ``ingest``, ``import-conversation``, ``imports``, ``undo-import``,
``consolidate``, ``export``, ``events``, ``review``, ``eval dedup``.

``ingest FILE.jsonl --json`` prints ``{"results": [{"line", "action", "reason", "id",
"target_id", "similarity"}], "counts": {action: n}}``; it exits 1 when any line was refused or
failed (the good lines are still ingested), else 0.

Say what was committed (issue 18): a run that fails part way (the store became unavailable)
still prints the results of every committed line, with ``"stopped_at_line"`` (the first line
not committed) and the ``"error"`` object, and exits 1. Ctrl-C or SIGTERM stops the run between
two memories (the chunk in progress is not written): the same document with ``"cancelled":
true``, exit 130. ``--stream`` prints one JSON line per line of the file as its chunk commits
(flushed), then one ``{"summary": {...}}`` line, for callers that may be killed before the end:
every line printed is committed. ``import-conversation`` does the same.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli import EXIT_INTERRUPTED, report_crash, report_error
from app.cli.context import CliContext
from app.cli.groups import eval_group
from engine import ConversationFormat, EventFilter, EventKind, LineOutcome, SalienceCut
from engine.errors import EngineError, ValidationError
from engine.records import TrustTier, format_timestamp, parse_timestamp

if TYPE_CHECKING:
    from engine import CancelFn, ImportReport, LineFn, MemoryEngine

__all__ = ["register", "run_import"]


def register(subparsers: Any) -> None:
    """Add the ingest commands to the CLI."""
    ingest = subparsers.add_parser(
        "ingest", help="ingest a JSONL file through dedup and merge (one memory per line)")
    ingest.add_argument("file", metavar="FILE.jsonl")
    ingest.add_argument("--source", help="source instance for every line "
                                         "(default: the line's own, else import:<file>)")
    ingest.add_argument("--tier", choices=[t.value for t in TrustTier], type=str.lower,
                        help="trust tier for every line (default: the line's own, else auto)")
    _stream_option(ingest)
    ingest.set_defaults(handler=_ingest)

    conversation = subparsers.add_parser(
        "import-conversation",
        help="turn a conversation into memories (message list, OpenAI chat, Anthropic "
             "messages, LoCoMo sessions, or a Name: text transcript)")
    conversation.add_argument("file", metavar="FILE")
    conversation.add_argument("--agent", default="default", help="agent id (default: default)")
    conversation.add_argument(
        "--keep", default="default", metavar="default|all|N%",
        help="which turns to keep: the salient ones (default), all, or the top N%% by salience")
    conversation.add_argument("--dry-run", action="store_true",
                              help="show what the import would do; write nothing")
    _stream_option(conversation)
    conversation.set_defaults(handler=_import_conversation)

    imports = subparsers.add_parser("imports", help="recent imports (ids for undo-import)")
    imports.add_argument("--limit", type=int, default=20, help="most recent N (default 20)")
    imports.set_defaults(handler=_imports)

    undo = subparsers.add_parser(
        "undo-import", help="take an import back: delete what it inserted, restore what it "
                            "merged into, withdraw its review items")
    undo.add_argument("id", metavar="IMPORT_ID")
    undo.add_argument("--yes", action="store_true",
                      help="do it (without --yes, only show what would be undone)")
    undo.set_defaults(handler=_undo_import)

    consolidate = subparsers.add_parser(
        "consolidate", help="merge stored near-duplicates by the ingest rules (contradictions "
                            "and close calls go to the review queue); undo with undo-import")
    consolidate.add_argument("--agent", help="only this agent's records (default: all)")
    consolidate.add_argument("--dry-run", action="store_true",
                             help="show what would be merged and deferred; write nothing")
    consolidate.set_defaults(handler=_consolidate)

    export = subparsers.add_parser("export", help="write every record to a JSONL file")
    export.add_argument("file", metavar="FILE")
    export.add_argument("--redact", action="store_true",
                        help="redact secrets and personal data in every field (always on "
                             "when redaction is on)")
    export.set_defaults(handler=_export)

    events = subparsers.add_parser("events", help="show recorded pipeline and audit events")
    events.add_argument("--since", metavar="TIME", help="ISO-8601 time or epoch ms")
    events.add_argument(
        "--kind", action="append", default=[], metavar="KIND",
        help=f"only events of this kind (repeatable): {', '.join(EventKind)}, "
             "or a namespaced memory:… / llm:… kind (docs/ingest.md lists them all)")
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
        "dedup", help="merge decision quality on STS-B-format files, per trust tier (several "
                      "files, e.g. sts-train.csv sts-dev.csv: the rules' tuning data beside "
                      "the check, side by side)")
    dedup.add_argument("files", metavar="FILE.csv", nargs="+")
    dedup.set_defaults(handler=_eval_dedup)


def _stream_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stream", action="store_true",
                        help="print one JSON line per line of the file as it commits, then a "
                             "summary line (every line printed is committed)")


def _ingest(args: argparse.Namespace, ctx: CliContext) -> int:
    engine = ctx.open_engine(embed=True)
    tier = TrustTier(args.tier) if args.tier else None

    def run(on_lines: LineFn | None, cancelled: CancelFn) -> ImportReport:
        return engine.import_jsonl(args.file, source=args.source, tier=tier,
                                   on_lines=on_lines, cancelled=cancelled)

    return run_import(args, ctx, run, prefix=lambda line: f"{args.file}:{line}: ")


_SAMPLES = 3  # lines shown per decision in the human summary


def _import_conversation(args: argparse.Namespace, ctx: CliContext) -> int:
    keep = SalienceCut.parse(args.keep)
    # a dry run reads an existing store read-only (it may be open elsewhere) and writes nothing
    engine = ctx.open_engine(read_only=args.dry_run and ctx.store_spec().exists, embed=True)

    def run(on_lines: LineFn | None, cancelled: CancelFn) -> ImportReport:
        return engine.import_conversation(args.file, agent_id=args.agent, keep=keep,
                                          dry_run=args.dry_run, on_lines=on_lines,
                                          cancelled=cancelled)

    def show(report: ImportReport) -> None:
        from ui.shared.format import tag

        label = ConversationFormat(report.format).label if report.format else "conversation"
        ctx.print(f"{args.file}: {label}, {_count(len(report.lines), 'message')}; "
                  f"kept {keep.describe()}")
        counts = {action: n for action, n in report.counts.items() if n}
        verb = "Dry run, nothing was written. It would have" if report.dry_run else "Done:"
        ctx.print(f"{verb} " + ", ".join(f"{action} {n}" for action, n in counts.items()))
        by_action: dict[str, list[LineOutcome]] = {}
        for outcome in report.lines:
            by_action.setdefault(outcome.action, []).append(outcome)
        for action, outcomes in by_action.items():
            reasons = Counter(tag(o.reason) for o in outcomes)
            ctx.print(f"\n{action} ({', '.join(f'{r}: {n}' for r, n in reasons.most_common())}):")
            for outcome in outcomes[:_SAMPLES]:
                ctx.print(f"  message {outcome.line}: {_outcome_text(ctx, outcome)}")
            if len(outcomes) > _SAMPLES:
                ctx.print(f"  … and {len(outcomes) - _SAMPLES} more")

    return run_import(args, ctx, run, prefix=lambda line: f"{args.file}: ", show=show)


def run_import(args: argparse.Namespace, ctx: CliContext,
               run: Callable[[LineFn | None, CancelFn], ImportReport], *,
               prefix: Callable[[int], str],
               show: Callable[[ImportReport], None] | None = None) -> int:
    """Run an import and say what was committed, whether it finished, failed or was stopped
    (``show`` prints a finished report for a person; default: its errors and counts)."""
    from engine import ImportReport, ImportStopped

    told: list[LineOutcome] = []  # committed (and refused) so far, for a bug's report

    def tell(outcomes: Sequence[LineOutcome]) -> None:
        told.extend(outcomes)
        if args.stream:
            for outcome in outcomes:
                ctx.emit_json_line(outcome.to_json())

    with _stop_on_signal() as stop:
        try:
            report = run(tell, stop.is_set)
        except ImportStopped as exc:
            error = {"code": exc.code, "message": str(exc)}
            if args.stream:
                ctx.emit_json_line({"summary": _summary(exc.report, error)})
                ctx.warn(f"error: {exc}")
                return 1
            if not ctx.json:
                _print_report(ctx, exc.report, prefix)
                _print_undo(ctx, exc.report)
            return report_error(ctx, exc.code, str(exc), 1,
                                document=_document(exc.report))
        except (EngineError, BrokenPipeError):
            raise  # before anything was committed (a file error), or the reader left: run_cli
        except Exception as exc:
            # A bug part way: still say which lines were committed before it.
            partial = ImportReport(args.file, tuple(told))
            if args.stream:
                ctx.emit_json_line({"summary": _summary(partial, {
                    "code": "INTERNAL_ERROR", "message": f"unexpected {type(exc).__name__}"})})
            return report_crash(ctx, exc, args.command, document=_document(partial))
    if args.stream:
        ctx.emit_json_line({"summary": _summary(report, None)})
    elif ctx.json:
        ctx.emit_json(_document(report))
    else:
        if show is not None:
            show(report)
        else:
            _print_report(ctx, report, prefix)
        _print_undo(ctx, report)
    if not report.lines and not report.cancelled:
        # exit 0 with all-zero counts reads as "it worked"; the file was likely the wrong one
        ctx.warn(f"note: {report.path}: nothing to import (it holds no memories)")
    if report.cancelled:
        ctx.warn(f"cancelled: lines before {report.stopped_at} were committed, "
                 f"line {report.stopped_at} and later were not" if report.stopped_at
                 else "cancelled after the last line")
        return EXIT_INTERRUPTED
    return 1 if report.errors else 0


def _document(report: ImportReport) -> dict[str, Any]:
    """``--json``: results and counts (and the import id, a conversation's format); with
    where it stopped when it did not finish."""
    document = report.to_json()
    if report.cancelled or report.stopped_at is not None:
        document["stopped_at_line"] = report.stopped_at
    return document


def _summary(report: ImportReport, error: dict[str, str] | None) -> dict[str, Any]:
    """The last line of ``--stream``."""
    return {"counts": report.counts, "cancelled": report.cancelled,
            "stopped_at_line": report.stopped_at, "error": error}


def _print_report(ctx: CliContext, report: ImportReport,
                  prefix: Callable[[int], str]) -> None:
    for outcome in report.errors:
        ctx.print(f"{prefix(outcome.line)}{outcome.reason}")
    ctx.print(", ".join(f"{k} {v}" for k, v in report.counts.items()))


def _print_undo(ctx: CliContext, report: ImportReport) -> None:
    """How to take back what an import wrote (its id is otherwise only in ``imports``)."""
    written = sum(report.counts[action] for action in ("inserted", "updated", "merged",
                                                       "deferred"))
    if report.import_id is not None and written and not report.dry_run:
        ctx.print(f"Import {ctx.ident(report.import_id)}; undo it with "
                  f"`mnemoscope undo-import {ctx.ident(report.import_id)} --yes`.")


@contextmanager
def _stop_on_signal() -> Iterator[threading.Event]:
    """Turn the first Ctrl-C / SIGTERM into a request to stop between two memories (the chunk
    in progress is dropped, the committed ones are reported); a second one acts as usual."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop  # signal handlers can only be set from the main thread
        return
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {number: signal.getsignal(number) for number in signals}

    def request_stop(number: int, frame: object) -> None:
        stop.set()
        for each, handler in previous.items():
            signal.signal(each, handler)

    for number in signals:
        signal.signal(number, request_stop)
    try:
        yield stop
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _outcome_text(ctx: CliContext, outcome: LineOutcome) -> str:
    """One line of the summary: the message's text and, where there is one, its target's."""
    if outcome.action == "error":
        return outcome.reason
    record = outcome.result.record if outcome.result is not None else None
    text = outcome.content or (record.content if record is not None else "")
    line = ctx.quoted(text) if text else "(no text)"
    if record is not None and outcome.action != "inserted" and record.content != text:
        line += f"  →  {ctx.quoted(record.content)}"
    return line


def _imports(args: argparse.Namespace, ctx: CliContext) -> int:
    entries = ctx.open_engine(read_only=ctx.store_spec().exists).imports(args.limit)
    if ctx.json:
        ctx.emit_json({"imports": [e.to_json() for e in entries]})
        return 0
    if not entries:
        ctx.print("no imports yet (`mnemoscope ingest FILE` or `import-conversation FILE`)")
    for entry in entries:
        counts = ", ".join(f"{action} {n}" for action, n in entry.counts.items() if n)
        state = f"undone {format_timestamp(entry.undone_at)}" if entry.undone_at is not None \
            else "stopped part way" if entry.finished_at is None else counts or "nothing"
        ctx.print(f"{ctx.ident(entry.id)}  {format_timestamp(entry.started_at)}  {entry.kind:<12} "
                  f"{entry.path}  ({state})")
    return 0


def _undo_import(args: argparse.Namespace, ctx: CliContext) -> int:
    engine = ctx.open_engine(read_only=not args.yes and ctx.store_spec().exists)
    plan = engine.undo_import(args.id, dry_run=not args.yes)
    if ctx.json:
        ctx.emit_json({**plan.to_json(), "done": bool(args.yes)})
        return 0
    counts = plan.counts
    what = (f"delete {_count(counts['deleted'], 'inserted record')}, restore "
            f"{_count(counts['restored'], 'merged or updated record')}, withdraw "
            f"{_count(counts['withdrawn'], 'pending review item')}")
    ctx.print(f"{'Undone' if args.yes else 'Undo would'}: {what}.")
    # a record left alone is named by its text too: the person decides what to do with it
    texts = {record.id: record.content for record in
             engine.get_many(engine.stored_ids(record_id for record_id, _ in plan.conflicts))}
    for record_id, why in plan.conflicts:
        text = f"  {ctx.quoted(texts[record_id])}" if record_id in texts else ""
        ctx.print(f"  left alone: {ctx.ident(record_id)}{text} ({why})")
    if not args.yes:
        ctx.print(f"Run `mnemoscope undo-import {ctx.ident(args.id)} --yes` to undo the import.")
    return 0


def _consolidate(args: argparse.Namespace, ctx: CliContext) -> int:
    engine = ctx.open_engine(read_only=args.dry_run and ctx.store_spec().exists, embed=True)
    report = engine.consolidate(ctx.agent(engine, args.agent), dry_run=args.dry_run)
    if ctx.json:
        ctx.emit_json(report.to_json())
        return 0
    from ui.shared.format import tag

    for step in report.steps:
        what = "merge" if step.action.value == "merged" else "defer"
        review = f"  review {ctx.ident(step.review_id)}" if step.review_id else ""
        ctx.print(f"{what:<5} {tag(step.reason.value):<18} sim {step.similarity:.3f} "
                  f"({'embedding' if step.semantic else 'jaccard'}){review}")
        ctx.print(f"    keep   {ctx.ident(step.kept.id)}  {ctx.quoted(step.kept.content)}")
        ctx.print(f"    {'merge' if what == 'merge' else 'vs   '}  {ctx.ident(step.other.id)}  "
                  f"{ctx.quoted(step.other.content)}")
    counts = report.counts
    summary = (f"{_count(counts['merged'], 'merge')}, {_count(counts['deferred'], 'deferral')} "
               f"among {_count(report.scanned, 'record')}")
    if report.dry_run:
        ctx.print(f"Dry run: {summary}; nothing written.")
    elif report.id is not None:
        ctx.print(f"Consolidated: {summary}. Undo with "
                  f"`mnemoscope undo-import {ctx.ident(report.id)} --yes`.")
    else:
        ctx.print(f"Nothing to consolidate ({summary}).")
    return 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _export(args: argparse.Namespace, ctx: CliContext) -> int:
    target = _export_target(args.file)
    policy = ctx.policy_for(redact=args.redact)
    engine = ctx.open_engine(read_only=True)
    # Scripts rely on export replacing its file, so it does; a person is told what was there.
    replaced = target.is_file()
    held = _line_count(target) if replaced else None
    count = engine.export_jsonl(target, redact=policy.shown)
    if ctx.json:
        ctx.emit_json({"file": args.file, "records": count, "redacted": policy.redacting})
        return 0
    if replaced:
        ctx.warn(f"note: replaced {args.file}"
                 + (f" (it held {_count(held, 'line')})" if held is not None else ""))
    ctx.print(f"exported {count} record(s) to {args.file}"
              f"{' (redacted)' if policy.redacting else ''}")
    return 0


def _export_target(given: str) -> Path:
    """``export``'s FILE argument as a path to write, refused before any store is opened when
    it cannot be one (was "cannot write .: Device or resource busy" for ``""``).

    Raises:
        ValidationError: ``given`` is empty or names a folder.
    """
    if not given.strip():
        raise ValidationError("FILE", given, "give the path of the file to write, "
                                             "e.g. memories.jsonl")
    target = Path(given)
    if target.is_dir() or given.endswith(("/", os.sep)):
        raise ValidationError("FILE", given, "is a folder; give the path of a file to write in "
                                             f"it, e.g. {target / 'memories.jsonl'}")
    return target


def _line_count(path: Path) -> int | None:
    """Lines in ``path`` (a last line without a newline counts), read in chunks; None when it
    cannot be read (the export replaces it all the same: the rename needs only the folder)."""
    lines, last = 0, b"\n"
    try:
        with path.open("rb") as stream:
            while chunk := stream.read(1 << 20):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
    except OSError:
        return None
    return lines + (last != b"\n")


def _events(args: argparse.Namespace, ctx: CliContext) -> int:
    if args.limit < 1:
        raise ValidationError("--limit", args.limit, "must be >= 1")
    since = parse_timestamp(args.since, "--since") if args.since else None
    engine = ctx.open_engine(read_only=True)
    for kind in args.kind:
        _check_kind(engine, kind)
    found = engine.events.query(EventFilter(since=since, kinds=args.kind or None,
                                            record_id=args.record, limit=args.limit,
                                            newest_first=True))
    found.reverse()
    if ctx.json:
        # Stripped of memory text here, masked once with the whole document by emit_json.
        ctx.emit_json({"events": [ctx.policy.stripped(e.to_json()) for e in found]})
        return 0
    for event in found:
        similarity = "" if event.similarity is None else f" sim={event.similarity:.3f}"
        reason = f" ({event.decision_reason})" if event.decision_reason else ""
        ctx.print(f"{format_timestamp(event.ts)} #{event.seq} {event.kind}{reason} "
                  f"{ctx.ident(event.record_id) if event.record_id else '-'}{similarity}")
    return 0


def _check_kind(engine: MemoryEngine, kind: str) -> None:
    """Refuse a ``--kind`` that names no event kind, rather than print nothing for a typo.

    Valid: the ingest pipeline's kinds (:class:`engine.EventKind`), the namespaced kinds other
    parts of the engine emit (``memory:…``, ``llm:…``; a namespace is never a typo of a
    pipeline kind) and any kind this store has recorded (the model's ``embedding-fallback``).

    Raises:
        ValidationError: none of these.
    """
    if kind in {str(known) for known in EventKind} or ":" in kind:
        return
    if engine.events.query(EventFilter(kinds=[kind], limit=1)):
        return
    raise ValidationError("--kind", kind, f"no such event kind; give one of {', '.join(EventKind)}"
                                          ", or a memory:… / llm:… kind (docs/ingest.md)")


def _review_list(args: argparse.Namespace, ctx: CliContext) -> int:
    from ui.shared.format import conflict_phrase, phrase, tag

    engine = ctx.open_engine(read_only=True)
    items = engine.review_queue()
    if ctx.json:
        ctx.emit_json({"items": [item.to_json() for item in items]})
        return 0
    # A pair is judged by its two texts: the stored one is read here (one batch), not left
    # for the reader to look up by id.
    targets = engine.stored_ids(dict.fromkeys(item.target_id for item in items))
    stored = {record.id: record.content for record in engine.get_many(targets)}
    for item in items:
        similarity = "-" if item.similarity is None else f"{item.similarity:.3f}"
        conflicts = "; ".join(f"{phrase(c.kind)}: {conflict_phrase(c.to_json())}"
                              for c in item.conflicts)
        ctx.print(f"{ctx.ident(item.id)}  {tag(item.reason)}, similarity {similarity}")
        ctx.print(f"    stored:   {stored.get(item.target_id, '(no longer stored)')}  "
                  f"({ctx.ident(item.target_id)})")
        ctx.print(f"    incoming: {item.incoming.content}")
        if conflicts:
            ctx.print(f"    conflicts: {conflicts}")
    ctx.print(f"({len(items)} pending: `review approve ID` merges the incoming memory into the "
              "stored one, `review reject ID` stores it as its own record)" if items
              else "(0 pending)")
    return 0


def _review_resolve(args: argparse.Namespace, ctx: CliContext, approve: bool) -> int:
    engine = ctx.open_engine(embed=not approve)
    result = engine.approve_review(args.id) if approve else engine.reject_review(args.id)
    if ctx.json:
        ctx.emit_json({"review_id": args.id, "ingest": result.to_json(),
                       "record": None if result.record is None else result.record.to_json()})
    else:
        verb = "merged into" if approve else "kept as"
        text = f"  {ctx.quoted(result.record.content)}" if result.record is not None else ""
        ctx.print(f"review {ctx.ident(args.id)}: {verb} "
                  f"{ctx.ident(result.record_id or '-')}{text}")
    return 0


def _review_approve(args: argparse.Namespace, ctx: CliContext) -> int:
    return _review_resolve(args, ctx, approve=True)


def _review_reject(args: argparse.Namespace, ctx: CliContext) -> int:
    return _review_resolve(args, ctx, approve=False)


def _eval_dedup(args: argparse.Namespace, ctx: CliContext) -> int:
    from engine import IngestPolicy, evaluate_dedup, read_sts

    files = [(Path(name), read_sts(name)) for name in args.files]  # bad input: before the model
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
    results = [(path, evaluate_dedup(pairs, IngestPolicy(), embed=embed))
               for path, pairs in files]
    if ctx.json:
        documents = [{"file": str(path), **result.to_json()} for path, result in results]
        ctx.emit_json(documents[0] if len(documents) == 1 else {"files": documents})
        return 0
    for path, result in results:
        ctx.print(f"{path.name}: {result.pairs} pairs ({result.duplicates} duplicates >= 4.0, "
                  f"{result.distinct} distinct < 3.0), "
                  f"{'embedding' if result.semantic else 'jaccard'} path")
        ctx.print(f"{'tier':<7}{'thr':>6}{'precision':>11}{'recall':>8}{'merge|rev':>11}"
                  f"{'review':>8}{'plain prec':>12}{'plain rec':>11}")
        for tier, metrics in result.tiers.items():
            plain = result.baseline[tier]
            ctx.print(f"{tier:<7}{metrics.threshold:>6.2f}"
                      f"{_rate(metrics.merge_precision):>11}{metrics.merge_recall:>8.3f}"
                      f"{metrics.merge_or_review_recall:>11.3f}{metrics.review_rate:>8.3f}"
                      f"{_rate(plain.merge_precision):>12}{plain.merge_recall:>11.3f}")
    if len(results) > 1:
        names = " | ".join(path.name for path, _ in results)
        ctx.print(f"side by side ({names}): merge precision; merge-or-review recall")
        for tier in results[0][1].tiers:
            precision = " | ".join(_rate(r.tiers[tier].merge_precision) for _, r in results)
            recall = " | ".join(f"{r.tiers[tier].merge_or_review_recall:.3f}"
                                for _, r in results)
            ctx.print(f"  {tier:<6} {precision};  {recall}")
    return 0


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
