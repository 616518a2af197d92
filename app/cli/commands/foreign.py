"""Collections written by other tools (issue 22): ``map-collection`` and ``adopt``.

``mnemoscope --collection NAME map-collection [--text KEY] [--agent KEY] [--time KEY]
[--updated KEY] [--importance KEY] [--run KEY] [--clear]`` saves which metadata keys of a
foreign collection hold those fields (``time``: created; ``updated``: the last change;
``run``: a run or session id), per store and collection, in the settings file; every later
open of that collection (CLI and app, whose Store → Field Mapping dialog saves the same
mapping) reads its records through it (:mod:`engine.store.foreign`). Without any option it
shows the saved mapping and the detected layout.

``mnemoscope --collection NAME adopt --into STORE`` copies the collection's records into the
Mnemoscope store ``STORE`` (its default collection) through the ingest pipeline, and prints the
dedup report as ``ingest`` does (``--json``: the same document, with ``import_id``; undo it with
``undo-import``). The source is only read.
"""

from __future__ import annotations

import argparse
from typing import Any

from app.cli.commands.ingest import run_import
from app.cli.context import CliContext
from app.settings import save_foreign_mapping
from engine import MAPPED_FIELDS, FieldMapping, StoreSpec, list_collections
from engine.errors import ValidationError

__all__ = ["register"]

_FIELDS = MAPPED_FIELDS
_HELP = {"time": "creation time", "updated": "time of the last change",
         "run": "run or session id"}


def register(subparsers: Any) -> None:
    """Add ``map-collection`` and ``adopt`` to the CLI."""
    mapping = subparsers.add_parser(
        "map-collection",
        help="save which metadata keys of another tool's collection (--collection) hold the "
             "text, agent, times, importance and run")
    for name in _FIELDS:
        mapping.add_argument(f"--{name}", metavar="KEY",
                             help=f"the metadata key holding the {_HELP.get(name, name)}")
    mapping.add_argument("--clear", action="store_true", help="forget the saved mapping")
    mapping.set_defaults(handler=_map_collection)
    adopt = subparsers.add_parser(
        "adopt", help="copy another tool's collection (--collection) into a Mnemoscope store "
                      "through the ingest pipeline, with a dedup report")
    adopt.add_argument("--into", required=True, metavar="PATH|URL",
                       help="the Mnemoscope store to copy into (its default collection)")
    adopt.add_argument("--stream", action="store_true",
                       help="print one JSON line per record as it commits, then a summary line")
    adopt.set_defaults(handler=_adopt)


def _map_collection(args: argparse.Namespace, ctx: CliContext) -> int:
    if not ctx.collection:
        raise ValidationError("--collection", None, "name the collection to map")
    spec = ctx.store_spec(read_only=True)
    found = {info.name: info for info in list_collections(spec)}
    if spec.collection not in found:
        raise ValidationError("--collection", spec.collection,
                              f"no such collection at {spec.location} "
                              f"(there: {', '.join(sorted(found)) or 'none'})")
    if found[spec.collection].ours:
        raise ValidationError("--collection", spec.collection,
                              "is a Mnemoscope collection; mappings are for other tools' ones")
    given = {name: getattr(args, name) for name in _FIELDS if getattr(args, name)}
    if args.clear and given:
        raise ValidationError("--clear", True, "cannot be combined with field options")
    if args.clear or given:
        mapping = None if args.clear else FieldMapping(**given)
        if ctx.config_dir is None:
            raise ValidationError("settings", None, "no settings folder to save to")
        path = save_foreign_mapping(ctx.config_dir, spec.location, spec.collection, mapping)
        ctx.settings = ctx.settings.with_mapping(spec.location, spec.collection, mapping)
        ctx.warn(f"{'forgot' if mapping is None else 'saved'} the mapping of "
                 f"{spec.collection!r} in {path}")
    info = ctx.open_engine(read_only=True).stats().foreign_layout
    if ctx.json:
        ctx.emit_json({"collection": spec.collection,
                       "foreign_layout": None if info is None else info.to_json()})
        return 0
    ctx.print(f"{spec.collection}: " + ("a Mnemoscope collection (no mapping applies)"
                                        if info is None else info.describe()))
    return 0


def _adopt(args: argparse.Namespace, ctx: CliContext) -> int:
    from engine import CancelFn, ImportReport, LineFn

    source = ctx.open_engine(read_only=True)
    info = source.store.foreign_info
    if info is None:
        raise ValidationError("--collection", source.store.spec.collection,
                              "is already a Mnemoscope collection; nothing to adopt")
    target = ctx.open_other_engine(StoreSpec(args.into, token=ctx.settings.store_token))
    label = f"{source.store.spec.collection} ({info.layout.value})"

    def run(on_lines: LineFn | None, cancelled: CancelFn) -> ImportReport:
        return target.adopt(source, on_lines=on_lines, cancelled=cancelled)

    def show(report: ImportReport) -> None:
        ctx.print(f"adopted {label} into {args.into}: "
                  + ", ".join(f"{action} {n}" for action, n in report.counts.items() if n))
        for outcome in report.lines:
            target_id = f" → {outcome.target_id}" if outcome.target_id else ""
            ctx.print(f"  record {outcome.line}: {outcome.action} ({outcome.reason})"
                      f"{target_id}")
        if report.import_id:
            ctx.print(f"import id {report.import_id} (undo-import takes it back)")

    args.file = label  # what run_import names in a bug's partial report
    return run_import(args, ctx, run, prefix=lambda line: f"{label}: record {line}: ",
                      show=show)
