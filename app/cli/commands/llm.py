"""LLM commands: ``extract CONVERSATION.json``, ``llm status`` (and the gateway ``compact`` uses).

``extract`` sends a conversation through the LLM gateway (breaker, throttle, budget, retries,
redaction), validates the answer against the extraction schema and either prints the candidates
(``--dry-run``) or stores the valid ones. Provider settings come from the settings file's ``llm``
section (the GUI's provider dialog writes it) under the ``MNEMOSCOPE_LLM_*`` environment
variables (``engine.llm.settings``), overridden by ``--provider`` / ``--model``.
``llm status`` prints the breaker state, the token projection of the next call and the day's
budget, restored from the ledger.
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.cli.context import CliContext
from app.settings import server_ledger_path
from engine import LEDGER_FILENAME, EventBus, Ledger, SystemClock, memory_config_from_env
from engine.llm import ExtractionResult, Extractor, LLMGateway, load_conversation

__all__ = ["open_gateway", "register"]


def register(subparsers: Any) -> None:
    """Add ``extract`` and ``llm status`` to the CLI."""
    extract = subparsers.add_parser(
        "extract", help="extract memories from a conversation with the configured LLM")
    extract.add_argument("conversation", metavar="CONVERSATION.json",
                         help="a JSON list of {role, content, id?}, an object with 'messages', "
                              "or a LoCoMo sample")
    extract.add_argument("--provider", help="openai, anthropic, ollama, vllm, lmstudio, llamacpp "
                                            "(default: $MNEMOSCOPE_LLM_PROVIDER)")
    extract.add_argument("--model", help="model name (default: $MNEMOSCOPE_LLM_MODEL)")
    extract.add_argument("--agent", help="agent id for the memories (default: the file's, or "
                                         "'default')")
    extract.add_argument("--dry-run", action="store_true",
                         help="print the validated candidates; store nothing")
    extract.add_argument("--json", dest="json_here", action="store_true",
                         default=argparse.SUPPRESS, help="print one JSON document")
    extract.set_defaults(handler=_extract)

    llm = subparsers.add_parser("llm", help="LLM gateway commands")
    commands = llm.add_subparsers(dest="llm_command", metavar="SUBCOMMAND", required=True)
    status = commands.add_parser("status", help="breaker, rate projection and budget")
    status.add_argument("--provider", help="provider alias (default: $MNEMOSCOPE_LLM_PROVIDER)")
    status.add_argument("--json", dest="json_here", action="store_true",
                        default=argparse.SUPPRESS, help="print one JSON document")
    status.set_defaults(handler=_status)


def _ledger_path(ctx: CliContext) -> Path:
    """Where the store's ledger lives (the same rule as ``MemoryEngine.open``)."""
    spec = ctx.store_spec()
    if spec.is_remote:
        return server_ledger_path(ctx.settings, spec.location, spec.collection)
    return Path(spec.location).expanduser() / LEDGER_FILENAME


def _redactor(ctx: CliContext, *, sends_prompts: bool) -> Callable[[str], str] | None:
    """The engine's redaction function (DESIGN decision 8), or None if it is not installed."""
    try:
        module = importlib.import_module("engine.redaction")
    except ImportError:
        if sends_prompts:
            ctx.warn("note: engine.redaction is not available; prompts are sent unredacted")
        return None
    # The engine's patterns for this process, MEMORY_REDACT_PATTERNS included.
    redact: Callable[[str], str] = module.redactor_for(
        memory_config_from_env(os.environ).redact_patterns).redact
    return redact


def open_gateway(ctx: CliContext, args: argparse.Namespace, ledger: Ledger,
                 events: EventBus | None, *, sends_prompts: bool) -> LLMGateway:
    """The gateway of the configured provider (``--provider`` / ``--model`` override it),
    closed with the CLI context. ``compact`` uses it too."""
    settings = ctx.settings.llm_settings().with_overrides(
        provider=getattr(args, "provider", None), model=getattr(args, "model", None))
    redactor = _redactor(ctx, sends_prompts=sends_prompts and settings.configured)
    gateway = LLMGateway(settings, ledger=ledger, events=events, clock=SystemClock(),
                         redactor=redactor, redact=True)
    ctx.on_close(gateway.close)
    return gateway


def _status(args: argparse.Namespace, ctx: CliContext) -> int:
    ctx.json = ctx.json or bool(getattr(args, "json_here", False))
    path = _ledger_path(ctx)
    ledger = Ledger(path, read_only=True)
    ctx.on_close(ledger.close)
    gateway = open_gateway(ctx, args, ledger, None, sends_prompts=False)
    status = gateway.status()
    document = status.to_json()
    if ctx.json:
        ctx.emit_json(document)
        return 0
    ctx.print(f"provider:    {status.provider or '(none configured)'}"
              f"{' / ' + status.model if status.model else ''}")
    ctx.print(f"breaker:     {status.breaker}")
    throttling = " - throttling" if status.should_throttle else ""
    ctx.print(f"rate window: {status.window_utilization_percent:.1f}% projected "
              f"({status.projected_total:.0f} tokens){throttling}")
    budget = "no daily budget set" if status.budget_usd <= 0 \
        else f"a daily budget of {status.budget_usd:.2f} USD"
    ctx.print(f"budget:      {status.spent_usd:.6f} USD spent since "
              f"{document['window_start']}, {budget}")
    ctx.print(f"alerts:      {', '.join(f'{a}%' for a in status.alerts) or 'none'}")
    return 0


def _print_result(ctx: CliContext, result: ExtractionResult, stored: list[str] | None) -> None:
    from ui.shared.format import phrase

    how = (f"{result.provider}/{result.model}" if result.source == "llm"
           else f"the local heuristic ({result.detail or phrase(result.fallback_reason)})")
    count = len(result.candidates)
    ctx.print(f"extracted {count} {'memory' if count == 1 else 'memories'} via {how}")
    if result.source != "llm" and not result.candidates:
        # Zero from the fallback reads as a broken command unless it says what it looks for.
        ctx.print("  (the local heuristic keeps first-person statements of the user's turns, "
                  "such as \"I prefer aisle seats\"; an LLM provider, set up under Settings → "
                  "LLM Provider… or with MNEMOSCOPE_LLM_* variables, finds more)")
    for candidate in result.candidates:
        importance = "-" if candidate.importance is None else f"{candidate.importance:.2f}"
        ctx.print(f"  [{candidate.category.value}] {candidate.content}  "
                  f"(importance {importance}, confidence {candidate.confidence:.2f})")
    for repair in result.field_repairs:
        where = "answer" if repair.index is None else f"item {repair.index}"
        default = "left to ingest" if repair.value is None else repr(repair.value)
        ctx.print(f"  repaired {where}: {repair.field} {repair.reason}, default {default}")
    for item in result.invalid:
        where = "answer" if item.index is None else f"item {item.index}"
        field = f" {item.field}" if item.field else ""
        ctx.print(f"  rejected {where}: {item.reason}{field} {item.detail}".rstrip())
    if stored is not None:
        ctx.print(f"stored {len(stored)} records")


def _extract(args: argparse.Namespace, ctx: CliContext) -> int:
    ctx.json = ctx.json or bool(getattr(args, "json_here", False))
    conversation = load_conversation(args.conversation)
    agent = args.agent or conversation.agent_id
    if args.dry_run:
        ledger = Ledger(_ledger_path(ctx))
        ctx.on_close(ledger.close)
        events = EventBus(clock=SystemClock(), ledger=ledger,
                          sampling_rate=ctx.settings.sampling_rate,
                          redaction=ctx.settings.redaction)
    else:
        engine = ctx.open_engine(embed=True)
        ledger, events = engine.ledger, engine.events
    gateway = open_gateway(ctx, args, ledger, events, sends_prompts=True)
    result = Extractor(gateway, events).extract(conversation, model=args.model)
    stored: list[str] | None = None
    decisions: list[dict[str, object]] | None = None
    if not args.dry_run:
        # Valid candidates go through the ingest pipeline (dedup, merge, surprise, review), in
        # one batch: an extraction that fails validation has already stopped above, so a
        # half-extracted conversation never reaches the store.
        source = f"extractor:{result.provider or 'heuristic'}"
        batch = engine.ingest_batch([c.to_new_memory(agent_id=agent, source=source)
                                     for c in result.candidates])
        stored = [o.record.id for o in batch.results if o.record is not None]
        decisions = [{"action": o.action, "reason": o.reason, "id": o.record.id
                      if o.record is not None else None, "target_id": o.target_id,
                      "similarity": o.similarity} for o in batch.results]
    if ctx.json:
        document = result.to_json()
        document["dry_run"] = bool(args.dry_run)
        document["agent_id"] = agent
        document["stored_ids"] = stored
        document["ingest"] = decisions
        ctx.emit_json(document)
    else:
        _print_result(ctx, result, stored)
    return 0
