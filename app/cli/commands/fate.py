"""``fate ID``: why did this memory disappear? (issue 9; see :mod:`engine.fate`)."""

from __future__ import annotations

import argparse
from typing import Any

from app.cli.context import CliContext
from engine import DEFAULT_MASS_LIMIT, record_fate
from engine.records import format_timestamp

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ``fate`` command to the CLI."""
    fate = subparsers.add_parser(
        "fate", help="the story of a record id from the ledger (merged, pruned, compacted, …)")
    fate.add_argument("id", help="a record id, alive or gone (merged, deleted, compacted)")
    fate.add_argument("--json", dest="fate_json", action="store_true",
                      help="print one JSON document (same as the global --json)")
    fate.add_argument("--mass-limit", type=int, default=DEFAULT_MASS_LIMIT, metavar="N",
                      help=f"warn when one batch retired more than N records "
                           f"(default {DEFAULT_MASS_LIMIT})")
    fate.set_defaults(handler=_fate)


def _fate(args: argparse.Namespace, ctx: CliContext) -> int:
    engine = ctx.open_engine(read_only=True)
    fate = record_fate(engine, args.id, mass_limit=args.mass_limit)
    if ctx.json or args.fate_json:
        ctx.emit_json(fate.to_json())
        return 0
    # Ids inside step sentences are the record's own story: keep those of our shape.
    for record_id in (fate.record_id, fate.survivor_id,
                      *(step.related_id for step in fate.steps)):
        if record_id:
            ctx.ident(record_id)
    survivor = f" → {fate.survivor_id}" if fate.survivor_id else ""
    ctx.print(f"{fate.record_id}: {fate.status}{survivor}")
    # What the memory said, and what it lives on in: a story told in ids alone sends the
    # reader to `get` for every line (and `get` cannot show a record that has gone).
    if fate.content:
        ctx.print(f"  text     {ctx.preview(fate.content, 100)}")
    if fate.survivor_id:
        found = engine.get_many(engine.stored_ids([fate.survivor_id]))
        if found:
            ctx.print(f"  now in   {ctx.preview(found[0].content, 100)}")
    for step in fate.steps:
        ctx.print(f"  {format_timestamp(step.ts)}  {step.text}")
    if fate.forecast is not None:
        forecast = fate.forecast
        when = ("now (below the floor)" if forecast.already_below
                else format_timestamp(forecast.below_at) if forecast.below_at is not None
                else "never")
        ctx.print(f"  decayed importance {forecast.decayed_now:.3f} (stored "
                  f"{forecast.importance:.2f}); below the floor {forecast.floor} at {when}")
    for warning in fate.warnings:
        ctx.print(f"  WARNING: {warning.actor} retired {warning.count} records at once "
                  f"(batch {warning.batch})")
    if not fate.steps and fate.forecast is None:
        ctx.print("  the ledger has no trace of this id")
    return 0
