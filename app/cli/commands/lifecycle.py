"""Lifecycle commands: ``prune``, ``compact``, ``expire``, ``retention``, ``redact-scan``,
``metrics``."""

from __future__ import annotations

import argparse
from typing import Any

from app.cli.commands.llm import open_gateway
from app.cli.context import CliContext
from engine import LifecycleReport, MemoryEngine, PruneMode
from engine.llm import CompactionSummarizer, Summarizer

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the lifecycle commands to the CLI."""
    prune = subparsers.add_parser("prune", help="seed 004 pruning: gentle, normal, aggressive")
    prune.add_argument("--mode", choices=[m.value for m in PruneMode], required=True,
                       help="gentle: expired records; normal: also those whose decayed "
                            "importance fell below 0.01; aggressive: also each agent's least "
                            "important tenth (paused and archived records only when expired)")
    prune.add_argument("--agent", help="only this agent's records")
    prune.add_argument("--dry-run", action="store_true", help="list, do not delete")
    prune.set_defaults(handler=_prune)

    expire = subparsers.add_parser("expire", help="delete records whose TTL has passed")
    expire.add_argument("--agent")
    expire.add_argument("--dry-run", action="store_true")
    expire.set_defaults(handler=_expire)

    retention = subparsers.add_parser("retention", help="enforce the per-layer retention caps")
    retention.add_argument("--agent")
    retention.add_argument("--dry-run", action="store_true")
    retention.set_defaults(handler=_retention)

    compact = subparsers.add_parser(
        "compact", help="summarize old low-importance episodic records (seed 002 §8)")
    compact.add_argument("--agent", help="only this agent (default: every agent)")
    compact.add_argument("--dry-run", action="store_true", help="show the groups, change nothing")
    compact.add_argument("--limit", type=int, default=None, metavar="N",
                         help="compact at most N records per agent")
    compact.add_argument("--provider", help="LLM provider that writes the summaries (default: "
                                            "the configured one; none: the local heuristic)")
    compact.add_argument("--model", help="model name (default: $MNEMOSCOPE_LLM_MODEL)")
    compact.add_argument("--no-llm", action="store_true",
                         help="summarize with the local heuristic even if a provider is set")
    compact.set_defaults(handler=_compact)

    scan = subparsers.add_parser("redact-scan",
                                 help="list stored records holding secrets or personal data")
    scan.set_defaults(handler=_redact_scan)

    metrics = subparsers.add_parser(
        "metrics", help="seed 002 §20 memory metrics and seed 000 memory_llm_* metrics")
    metrics.set_defaults(handler=_metrics)


def _report(ctx: CliContext, engine: MemoryEngine, report: LifecycleReport) -> int:
    """What a prune / expire / retention run removed or, dry run, would remove: each record
    with its reason in words and, while it is still stored (a dry run), its text, so the
    person deciding sees the memories rather than ids to look up one by one."""
    from ui.shared.format import phrase

    if ctx.json:
        ctx.emit_json(report.to_json())
        return 0
    selection = report.selection
    verb = "would remove" if report.dry_run else "removed"
    reasons = ", ".join(f"{phrase(k)}: {v}" for k, v in sorted(selection.by_reason().items()))
    action, _, mode = report.action.partition(":")
    noun = "record" if len(selection) == 1 else "records"
    ctx.print(f"{action}{f' ({mode})' if mode else ''}: {verb} {len(selection)} {noun}"
              f"{' (' + reasons + ')' if reasons else ''}; {report.remaining} in store")
    texts = {record.id: record.content
             for record in engine.get_many(engine.stored_ids(selection.ids))}
    for record_id in selection.ids:
        text = texts.get(record_id)
        ctx.print(f"  {ctx.ident(record_id)}  {phrase(selection.reasons[record_id])}"
                  + (f": {ctx.preview(text, 70)}" if text is not None else ""))
    if selection.ids and not report.dry_run:
        ctx.print("(`mnemoscope fate ID` tells where each one went)")
    return 0


def _prune(args: argparse.Namespace, ctx: CliContext) -> int:
    engine = ctx.open_engine(read_only=args.dry_run)
    return _report(ctx, engine, engine.prune(args.mode, args.dry_run,
                                             agent_id=ctx.agent(engine, args.agent)))


def _expire(args: argparse.Namespace, ctx: CliContext) -> int:
    engine = ctx.open_engine(read_only=args.dry_run)
    return _report(ctx, engine, engine.expire(args.dry_run,
                                              agent_id=ctx.agent(engine, args.agent)))


def _retention(args: argparse.Namespace, ctx: CliContext) -> int:
    engine = ctx.open_engine(read_only=args.dry_run)
    return _report(ctx, engine, engine.enforce_retention(
        args.dry_run, agent_id=ctx.agent(engine, args.agent)))


def _compact(args: argparse.Namespace, ctx: CliContext) -> int:
    engine = ctx.open_engine(read_only=args.dry_run, embed=not args.dry_run)
    summarizer: CompactionSummarizer | None = None
    if not args.dry_run and not args.no_llm:
        # Through the same gateway as ``extract`` (breaker, budget, retries, redaction, ledger);
        # when it says no, compaction falls back to its heuristic and says why (events).
        gateway = open_gateway(ctx, args, engine.ledger, engine.events, sends_prompts=True)
        if gateway.configured:
            summarizer = CompactionSummarizer(Summarizer(gateway, engine.events),
                                              model=args.model)
    reports = engine.compact(ctx.agent(engine, args.agent), args.dry_run, summarizer,
                             limit=args.limit)
    if ctx.json:
        ctx.emit_json({"agents": [r.to_json() for r in reports]})
        return 0
    for report in reports:
        groups = [t for t in report.tasks if t.status.value != "skipped"]
        if report.dry_run:
            ctx.print(f"{report.agent_id}: would summarize {sum(len(t.source_ids) for t in groups)}"
                      f" record(s) in {len(groups)} group(s); {report.remaining} episodic now")
        else:
            ctx.print(f"{report.agent_id}: removed {report.removed} episodic record(s) into "
                      f"{len(report.summaries)} summary record(s); "
                      f"{report.remaining} episodic remain")
        for task in report.tasks:
            target = f" -> {ctx.ident(task.summary_record_id)}" if task.summary_record_id else ""
            why = f" ({task.failure_reason})" if task.failure_reason else ""
            via = f" via {task.summarizer}" if task.status.value == "completed" else ""
            ctx.print(f"  task {task.id[:8]} {task.status.value:<9} {len(task.source_ids)} "
                      f"source(s){target}{via}{why}")
    return 0


def _redact_scan(args: argparse.Namespace, ctx: CliContext) -> int:
    hits = ctx.open_engine(read_only=True).redaction_scan()
    if ctx.json:
        ctx.emit_json({"count": len(hits), "records": [h.to_json() for h in hits]})
        return 0
    from ui.shared.format import findings

    ctx.print(f"{len(hits)} record(s) with secret-shaped or personal text")
    for hit in hits:
        ctx.print(f"  {ctx.ident(hit.id)}  [{hit.agent_id}] {'secret: ' if hit.secret else ''}"
                  f"{findings(hit.kinds)} in {', '.join(hit.fields)}: {hit.preview}")
    return 0


def _metrics(args: argparse.Namespace, ctx: CliContext) -> int:
    engine = ctx.open_engine(read_only=True)
    # The configured provider's gateway over the store's ledger: breaker and budget as they
    # stand, latency samples and alerts as earlier processes recorded them. Nothing is sent.
    gateway = open_gateway(ctx, args, engine.ledger, None, sends_prompts=False)
    report = engine.metrics(gateway)
    if ctx.json:
        ctx.emit_json(report)
        return 0
    aggregate = {key: value for key, value in report["aggregate"].items()
                 if not isinstance(value, dict)}
    # Retrieval latency and the task counters are kept in memory by the process that does the
    # work (seed 002 §20; docs/retrieval.md "Metrics"): a one-off command starts them at zero,
    # so they are shown apart from what the store and its ledger say, and labelled so.
    in_process = {key: aggregate.pop(key) for key in list(aggregate)
                  if key != "memory_records_total" and not key.endswith("_count")}
    for key, value in aggregate.items():
        ctx.print(f"{key:<32} {value}")
    ctx.print(f"{'redacted_records_stored':<32} {report['redacted_records_stored']}")
    llm = report["llm"]
    ctx.print(f"{'memory_llm_circuit_state':<32} {llm['memory_llm_circuit_state']} "
              f"({llm['circuit_state']})")
    ctx.print(f"{'memory_llm_budget_utilization_percent':<32} "
              f"{llm['memory_llm_budget_utilization_percent']}")
    alerts = ", ".join(f"{k}%: {v}" for k, v in llm["memory_llm_budget_alerts_total"].items())
    ctx.print(f"{'memory_llm_budget_alerts_total':<32} {alerts}")
    for row in llm["memory_llm_latency_ms_summary"]["by_operation"]:
        ctx.print(f"{'memory_llm_latency_ms_summary':<32} {row['provider']}/{row['operation']}: "
                  f"p50 {row['p50']} p95 {row['p95']} p99 {row['p99']} ms "
                  f"({row['count']} calls)")
    ctx.print("\ncounted by this command only, so 0 here (a running `mnemoscope serve` reports "
              "its own at GET /v1/metrics):")
    for key, value in in_process.items():
        ctx.print(f"{key:<32} {value}")
    return 0
