"""Record commands: ``add``, ``get``, ``list``, ``edit``, ``delete``, ``pause``, ``archive``,
``resume``, ``stats``, ``doctor``.

``pause`` and ``archive`` keep records but stop their retrieval (an archived record is also
hidden from ``list`` unless ``--state archived`` or ``--state all`` asks for it); ``resume``
makes them active again. All three are undoable edits (history rows, events).

``add`` goes through the ingest pipeline (dedup, merge, review): its JSON is the resulting
record plus an ``ingest`` object with the decision.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from app.cli.context import CliContext
from engine import SHOWN_STATES, RecordQuery, SortKey, parse_states
from engine.errors import ValidationError
from engine.records import (
    Category,
    Layer,
    MemoryRecord,
    NewMemory,
    Privacy,
    RecordState,
    TrustTier,
    format_timestamp,
    parse_timestamp,
)

__all__ = ["register"]


def _unit(name: str) -> Any:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number in 0..1") from None
        if not 0.0 <= value <= 1.0:
            raise argparse.ArgumentTypeError(f"{name} must be in 0..1 (got {text})")
        return value

    return parse


def _tags(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t.strip())


def _record_options(parser: argparse.ArgumentParser, *, editing: bool) -> None:
    parser.add_argument("--agent", help="agent id" + ("" if editing else " (default: default)"))
    parser.add_argument("--layer", choices=[x.value for x in Layer], type=str.lower)
    parser.add_argument("--importance", type=_unit("importance"))
    parser.add_argument("--confidence", type=_unit("confidence"))
    parser.add_argument("--tags", type=_tags, help="comma-separated tags")
    parser.add_argument("--privacy", choices=[x.value for x in Privacy], type=str.upper)
    parser.add_argument("--category", choices=[x.value for x in Category], type=str.lower)
    parser.add_argument("--tier", choices=[x.value for x in TrustTier], type=str.lower,
                        help="source trust tier")
    parser.add_argument("--expires-at", metavar="TIME",
                        help="ISO-8601 expiry time" + (" ('none' clears it)" if editing else ""))
    parser.add_argument("--ttl", metavar="SECONDS", type=float,
                        help="expire this many seconds from now")
    parser.add_argument("--metadata", metavar="JSON", help="metadata object as JSON")


def register(subparsers: Any) -> None:
    """Add the record commands to the CLI."""
    add = subparsers.add_parser("add", help="add a memory")
    add.add_argument("text", help="the memory's content")
    _record_options(add, editing=False)
    add.add_argument("--source", help="source instance (default: cli)")
    add.set_defaults(handler=_add)

    get = subparsers.add_parser("get", help="show one record")
    get.add_argument("id")
    get.set_defaults(handler=_get)

    lst = subparsers.add_parser("list", help="list records (newest first)")
    lst.add_argument("--agent")
    lst.add_argument("--layer", choices=[x.value for x in Layer], type=str.lower)
    lst.add_argument("--privacy", choices=[x.value for x in Privacy], type=str.upper)
    lst.add_argument("--tag", action="append", default=[], help="require this tag (repeatable)")
    lst.add_argument("--text", help="content contains this text")
    lst.add_argument("--state", type=_states, default=SHOWN_STATES, metavar="STATE",
                     help="active, paused, archived (comma-separated) or all "
                          "(default: active,paused; archived records are hidden)")
    lst.add_argument("--sort", choices=[k.value for k in SortKey], default=SortKey.CREATED.value)
    lst.add_argument("--ascending", action="store_true")
    lst.add_argument("--limit", type=int, default=20)
    lst.add_argument("--offset", type=int, default=0)
    lst.set_defaults(handler=_list)

    edit = subparsers.add_parser("edit", help="change fields of a record")
    edit.add_argument("id")
    edit.add_argument("--content")
    _record_options(edit, editing=True)
    edit.set_defaults(handler=_edit)

    # not "undoable from the app": the app's Edit → Undo holds only what the app itself did
    delete = subparsers.add_parser(
        "delete", help="delete records (each one's last state stays in the edit history: "
                       "`fate ID` tells what became of it)")
    delete.add_argument("ids", nargs="+", metavar="ID")
    delete.set_defaults(handler=_delete)

    for name, handler, text in (
            ("pause", _pause, "pause records: kept and listed, never retrieved until resumed"),
            ("archive", _archive,
             "archive records: kept, hidden from list by default, never retrieved"),
            ("resume", _resume, "make paused or archived records active (retrieved) again")):
        command = subparsers.add_parser(name, help=text)
        command.add_argument("ids", nargs="+", metavar="ID")
        command.set_defaults(handler=handler)

    stats = subparsers.add_parser("stats",
                                  help="record counts by layer, agent, privacy and state")
    stats.set_defaults(handler=_stats)

    doctor = subparsers.add_parser(
        "doctor", help="versions, store location, lock holder, model state")
    doctor.add_argument("--repair", action="store_true",
                        help="add the missing history rows of records a crash left without one")
    doctor.set_defaults(handler=_doctor)


def _states(text: str) -> frozenset[RecordState]:
    try:
        return parse_states(text, "--state")
    except ValidationError as exc:
        raise argparse.ArgumentTypeError(exc.reason) from None


def _metadata(args: argparse.Namespace) -> dict[str, Any] | None:
    if args.metadata is None:
        return None
    try:
        value = json.loads(args.metadata)
    except json.JSONDecodeError as exc:
        raise ValidationError("--metadata", args.metadata, f"not valid JSON: {exc.msg}") from exc
    if not isinstance(value, dict):
        raise ValidationError("--metadata", args.metadata, "must be a JSON object")
    return value


def _expiry(args: argparse.Namespace, now_ms: float) -> tuple[bool, float | None]:
    """(given, value) for --expires-at / --ttl."""
    if args.ttl is not None:
        if args.ttl <= 0:
            raise ValidationError("--ttl", args.ttl, "must be > 0 seconds")
        return True, now_ms + args.ttl * 1000.0
    if args.expires_at is not None:
        if args.expires_at.strip().lower() == "none":
            return True, None
        return True, parse_timestamp(args.expires_at, "--expires-at")
    return False, None


def _add(args: argparse.Namespace, ctx: CliContext) -> int:
    fields: dict[str, Any] = {"content": args.text}
    for option, name in (("agent", "agent_id"), ("layer", "layer"), ("importance", "importance"),
                         ("confidence", "confidence"), ("tags", "tags"), ("privacy", "privacy"),
                         ("category", "category"), ("tier", "source_tier")):
        value = getattr(args, option)
        if value is not None:
            fields[name] = value
    fields["source"] = args.source or "cli"
    metadata = _metadata(args)
    if metadata is not None:
        fields["metadata"] = metadata
    new = NewMemory(**fields)  # validate before opening the store
    engine = ctx.open_engine(embed=True)
    given, expires = _expiry(args, engine.clock.now())
    if given and expires is not None:
        new = NewMemory(**{**fields, "expires_at": expires})
    result = engine.ingest(new)
    if ctx.json:
        document = result.record.to_json() if result.record is not None else {}
        document["ingest"] = {"action": result.action.value, "reason": result.reason.value,
                              "target_id": result.target_id,
                              "similarity": None if result.similarity is None
                              else round(result.similarity, 6),
                              "review_id": result.review_id}
        ctx.emit_json(document)
    else:
        for record_id in (result.record_id, result.target_id, result.review_id):
            if record_id:
                ctx.ident(record_id)
        ctx.print(_describe_outcome(ctx, result))
    return 0


def _describe_outcome(ctx: CliContext, result: Any) -> str:
    """What ``add`` did, in words, naming the other record (merge target, duplicate, review
    partner) by its text beside its id."""
    from ui.shared.format import phrase, tag

    action, reason = result.action.value, result.reason.value
    if action == "inserted":
        return f"added {result.record_id}"
    if action == "error":
        return f"error: {result.error}"
    other = ""
    if result.target_id:
        # the ingest result's record is the target (merged into, duplicate, deferral partner)
        record = result.record
        text = record.content if record is not None and record.id == result.target_id else None
        other = result.target_id + (f"  {ctx.quoted(text)}" if text is not None else "")
    if action in ("merged", "updated"):
        state = result.record.state if result.record is not None else RecordState.ACTIVE
        kept = "" if state is RecordState.ACTIVE else f"; the record stays {state.value}"
        verb = "merged into" if action == "merged" else "updated"
        return f"{verb} {other} ({tag(reason)}){kept}"
    if action == "deferred":
        return f"held for review {result.review_id} ({tag(reason)}); the stored record: {other}"
    return phrase(reason) + (f"; the stored record: {other}" if other else "")


def _get(args: argparse.Namespace, ctx: CliContext) -> int:
    record = ctx.open_engine(read_only=True).get(args.id)
    if ctx.json:
        ctx.emit_json(record.to_json())
    else:
        for record_id in (record.id, *record.merged_from, *(link.id for link in record.related)):
            ctx.ident(record_id)
        ctx.print(_describe(ctx.policy.document(record.to_json())))
    return 0


def _list(args: argparse.Namespace, ctx: CliContext) -> int:
    query = RecordQuery(agent_id=args.agent, layer=args.layer, privacy=args.privacy,
                        tags=tuple(args.tag), text=args.text, states=args.state,
                        sort_by=SortKey(args.sort),
                        descending=not args.ascending, offset=args.offset, limit=args.limit)
    # With redaction on, --text/--agent/--tag match the masked text the listing shows.
    engine = ctx.open_engine(read_only=True)
    page = engine.list_records(query, shown=ctx.policy.shown)
    if not page.total and not ctx.policy.redacting:
        ctx.note_unknown_agent(engine, args.agent)
    if ctx.json:
        ctx.emit_json({"total": page.total, "offset": page.offset,
                       "records": [r.to_json() for r in page.records]})
        return 0
    for record in page.records:
        preview = ctx.preview(record.content, 70)
        state = "" if record.state is RecordState.ACTIVE else f"[{record.state.value}] "
        ctx.print(f"{ctx.ident(record.id)}  {record.layer.value:<10} {record.agent_id:<12} "
                  f"{record.importance:4.2f}  {state}{preview}")
    shown = len(page.records)
    if not page.total:
        filtered = any((args.agent, args.layer, args.privacy, args.tag, args.text)) \
            or args.state != SHOWN_STATES
        ctx.print("(no records match)" if filtered else "(no records)")
    elif not shown:
        ctx.print(f"(0 of {page.total}: --offset {page.offset} is past the end)")
    else:
        ctx.print(f"({page.offset + 1}-{page.offset + shown} of {page.total})")
    return 0


def _edit(args: argparse.Namespace, ctx: CliContext) -> int:
    changes: dict[str, Any] = {}
    for option, name in (("content", "content"), ("agent", "agent_id"), ("layer", "layer"),
                         ("importance", "importance"), ("confidence", "confidence"),
                         ("tags", "tags"), ("privacy", "privacy"), ("category", "category"),
                         ("tier", "source_tier")):
        value = getattr(args, option)
        if value is not None:
            changes[name] = value
    metadata = _metadata(args)
    if metadata is not None:
        changes["metadata"] = metadata
    engine = ctx.open_engine(embed="content" in changes)
    given, expires = _expiry(args, engine.clock.now())
    if given:
        changes["expires_at"] = expires
    if not changes:
        raise ValidationError("edit", args.id, "nothing to change: give at least one option")
    record = engine.update(args.id, changes, actor="cli")
    if ctx.json:
        ctx.emit_json(record.to_json())
    else:
        ctx.print(f"updated {ctx.ident(record.id)} (version {record.version})")
    return 0


def _delete(args: argparse.Namespace, ctx: CliContext) -> int:
    deleted = ctx.open_engine().delete(args.ids, actor="cli")
    if ctx.json:
        ctx.emit_json({"deleted": [r.id for r in deleted]})
    else:
        ctx.print(f"deleted {len(deleted)} record(s)")
    return 0


def _pause(args: argparse.Namespace, ctx: CliContext) -> int:
    return _set_state(ctx, ctx.open_engine().pause(args.ids, actor="cli"), "paused")


def _archive(args: argparse.Namespace, ctx: CliContext) -> int:
    return _set_state(ctx, ctx.open_engine().archive(args.ids, actor="cli"), "archived")


def _resume(args: argparse.Namespace, ctx: CliContext) -> int:
    return _set_state(ctx, ctx.open_engine().resume(args.ids, actor="cli"), "resumed")


def _set_state(ctx: CliContext, records: list[MemoryRecord], verb: str) -> int:
    if ctx.json:
        ctx.emit_json({verb: [r.id for r in records],
                       "records": [{"id": r.id, "state": r.state.value, "version": r.version}
                                   for r in records]})
    else:
        ctx.print(f"{verb} {len(records)} record(s)")
    return 0


def _stats(args: argparse.Namespace, ctx: CliContext) -> int:
    stats = ctx.open_engine(read_only=True).stats()
    if ctx.json:
        ctx.emit_json(stats.to_json())
        return 0
    # stats always reads the store read-only; only another tool's collection *is* read-only
    # (saying so for every store read as "your store is read-only")
    access = ", another tool's collection: read-only" if stats.foreign else ""
    ctx.print(f"store:    {stats.location} ({stats.kind}{access})")
    if stats.foreign_layout is not None:
        ctx.print(f"layout:   {stats.foreign_layout.describe()}")
    ctx.print(f"records:  {stats.records}  (pending embeddings: {stats.pending_embeddings}, "
              f"expired: {stats.expired})")
    ctx.print("layers:   " + ", ".join(f"{k} {v}" for k, v in stats.by_layer.items()))
    ctx.print("privacy:  " + ", ".join(f"{k} {v}" for k, v in stats.by_privacy.items()))
    ctx.print("states:   " + ", ".join(f"{k} {v}" for k, v in stats.by_state.items()))
    ctx.print("agents:   " + (", ".join(f"{k} {v}" for k, v in stats.by_agent.items()) or "-"))
    return 0


def _doctor(args: argparse.Namespace, ctx: CliContext) -> int:
    from engine.errors import StoreLocked

    try:
        engine = ctx.open_engine(read_only=False, embed=True)
    except StoreLocked:
        engine = ctx.open_engine(read_only=True, embed=True)
    if args.repair:
        repaired = engine.reconcile_history()
        ctx.warn(f"reconciled the history of {repaired} record(s)")
    report = engine.doctor()
    access = _folder_access(report["store"])
    report["store"]["others_can_read"] = None if access is None else access[0]
    if ctx.json:
        ctx.emit_json(report)
        return 0
    for package, version in report["versions"].items():
        ctx.print(f"{package:<22} {version}")
    store = report["store"]
    records = "1 record" if store["records"] == 1 else f"{store['records']} records"
    ctx.print(f"store                  {store['location']} ({store['kind']}, "
              f"{records}{', read-only' if store['read_only'] else ''})")
    ctx.print(f"lock holder            {_lock_holder(store['lock_holder'])}")
    if access is not None:
        ctx.print(f"store access           {access[1]}")
    if engine.store.foreign_info is not None:
        ctx.print(f"foreign layout         {engine.store.foreign_info.describe()}")
    orphans = report["ledger"]["records_without_history"]
    hint = "; run doctor --repair" if orphans else ""
    ctx.print(f"ledger                 {report['ledger']['path']} "
              f"({orphans} records without history{hint})")
    model = report["model"]
    ctx.print(f"model                  {model['name']}: {model['state']}, "
              f"{model['dimension']} dims {model['reason']}".rstrip())
    if model["backend"]:
        ctx.print(f"model backend          {model['backend']}")
    return 0


def _folder_access(store: dict[str, Any]) -> tuple[bool, str] | None:
    """Whether other users of the machine can read an embedded store's folder, in words (None
    for a server store, or where the OS has no such mode bits).

    New store folders are made 0700; one made by an earlier build, or copied, may be 0755 with
    every memory, the review queue and the edit history readable by every user.
    """
    if store["kind"] != "embedded" or os.name != "posix":
        return None
    try:
        mode = os.stat(store["location"]).st_mode & 0o777
    except OSError:
        return None
    if not mode & 0o077:
        return False, f"private (mode {mode:o})"
    return True, (f"readable by other users of this machine (mode {mode:o}); make it private "
                  f"with: chmod -R go-rwx {store['location']}")


def _lock_holder(holder: dict[str, Any] | None) -> str:
    """Who holds an embedded store's lock, in words. ``doctor`` takes the lock itself when it
    is free, so its own PID there means no other process has the store open."""
    if not holder:
        return "-"
    pid = holder.get("pid")
    if pid == os.getpid():
        return "none (only this doctor run, while it reads)"
    since = holder.get("since")
    when = f" since {format_timestamp(since * 1000.0)}" \
        if isinstance(since, (int, float)) else ""
    host = f" on {holder['host']}" if holder.get("host") else ""
    return f"PID {pid}{host}{when}"


def _describe(document: dict[str, Any]) -> str:
    """Human lines of a record document as the exit policy built it (masked hash included)."""
    lines = [f"{key:<16} {_shown_value(key, value)}" for key, value in document.items()
             if key not in ("provenance", "related", "metadata", "content")]
    lines.insert(0, f"{'content':<16} {document['content']}")
    metadata = document["metadata"]
    shown = json.dumps(metadata, ensure_ascii=False) if metadata else "-"
    lines.append(f"{'metadata':<16} {shown}")
    for entry in document["provenance"]:
        lines.append(f"{'provenance':<16} {entry['source']} ({entry['tier']}) at {entry['at']}")
    for link in document["related"]:
        lines.append(f"{'related':<16} {link['id']} ({link['similarity']:.3f})")
    return "\n".join(lines)


def _shown_value(key: str, value: Any) -> str:
    """A field's value in words for a person: lists comma-separated, booleans yes/no, nothing
    as ``-`` (``never`` for an expiry), rather than Python's ``['a']``, ``False`` and ``None``
    (``--json`` keeps the typed values)."""
    if value is None or value == "" or value == []:
        return "never" if key == "expires_at" else "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    return str(value)
