"""Task-workspace commands (seed 003): ``scene``, ``tasks …``, ``cards search``.

* ``scene CARD --workspace DIR [--budget N] [--out FILE] [--since HASH]`` renders SCENE.md
  (or, with ``--since``, only what changed since an earlier scene);
* ``tasks validate|deps ID|dependents ID|add-dep FROM TO --workspace DIR``;
* ``cards search QUERY --workspace DIR`` — hybrid keyword + embedding search.

Every command takes ``--json`` (as well as the global one). A cycle exits with status 3 and
prints ``error 1002: cycle detected: A -> B -> A`` on stderr (and, with ``--json``, an error
document carrying the path on stdout). These commands do not open the memory store.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import Any

from app.cli.context import CliContext
from engine.errors import CycleDetected, EngineError
from engine.tasks import (
    DEFAULT_BUDGET,
    CardSearch,
    Scene,
    SceneStore,
    Workspace,
    build_scene,
    delta_scene,
)

__all__ = ["EXIT_CYCLE", "register"]

EXIT_CYCLE = 3
EXIT_PROBLEMS = 1
MODEL_WAIT_SECONDS = 180.0


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", metavar="DIR", default=".",
                        help="the workspace folder of markdown cards (default: .)")
    parser.add_argument("--json", dest="local_json", action="store_true",
                        help="print one JSON document")


def _budget(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"budget must be a whole number (got {text})") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"budget must be positive (got {text})")
    return value


def register(subparsers: Any) -> None:
    """Add ``scene``, ``tasks`` and ``cards`` to the CLI."""
    scene = subparsers.add_parser("scene", help="render the context scene of a card (SCENE.md)")
    scene.add_argument("card", help="id or path of the active card")
    _common(scene)
    scene.add_argument("--budget", type=_budget, default=DEFAULT_BUDGET,
                       help=f"token budget (default {DEFAULT_BUDGET})")
    scene.add_argument("--out", metavar="FILE", help="write SCENE.md here instead of stdout")
    scene.add_argument("--since", metavar="HASH",
                       help="print only what changed since the scene with this hash")
    scene.add_argument("--error-stack", metavar="FILE",
                       help="an error log; cards it mentions gain importance")
    scene.add_argument("--no-compress", action="store_true",
                       help="cut cards instead of compressing their code blocks first")
    scene.set_defaults(handler=_scene)

    tasks = subparsers.add_parser("tasks", help="task dependency graph of a workspace")
    actions = tasks.add_subparsers(dest="tasks_command", metavar="ACTION", required=True)
    validate = actions.add_parser("validate", help="check every card, reference and dependency")
    _common(validate)
    validate.set_defaults(handler=_validate)
    deps = actions.add_parser("deps", help="tasks that ID depends on")
    deps.add_argument("id")
    _common(deps)
    deps.set_defaults(handler=_deps)
    dependents = actions.add_parser("dependents", help="tasks that depend on ID")
    dependents.add_argument("id")
    _common(dependents)
    dependents.set_defaults(handler=_dependents)
    add_dep = actions.add_parser("add-dep", help="make FROM depend on TO (refuses a cycle)")
    add_dep.add_argument("source", metavar="FROM")
    add_dep.add_argument("target", metavar="TO")
    _common(add_dep)
    add_dep.set_defaults(handler=_add_dep)

    cards = subparsers.add_parser("cards", help="search the cards of a workspace")
    card_actions = cards.add_subparsers(dest="cards_command", metavar="ACTION", required=True)
    search = card_actions.add_parser("search", help="hybrid keyword + semantic search")
    search.add_argument("query")
    _common(search)
    search.add_argument("--limit", type=int, default=10)
    search.add_argument("--keyword-only", action="store_true",
                        help="skip the embedding model")
    search.set_defaults(handler=_search)


def _open(args: argparse.Namespace, ctx: CliContext) -> Workspace:
    if args.local_json:
        ctx.json = True
    return Workspace.open(Path(args.workspace))


def _cycle(ctx: CliContext, exc: CycleDetected) -> int:
    ctx.warn(str(exc))
    if ctx.json:
        ctx.emit_json({"error": {"code": exc.code, "message": str(exc), "path": exc.path}})
    return EXIT_CYCLE


def _scene_json(scene: Scene, with_text: bool) -> dict[str, Any]:
    document: dict[str, Any] = {
        "card": scene.active_id,
        "scene_hash": scene.scene_hash,
        "budget": scene.budget,
        "used_tokens": scene.used_tokens,
        "truncated": scene.truncated,
        "over_budget": scene.over_budget,
        "masked": scene.masked,
        "included": [asdict(entry) for entry in scene.included],
        "pruned": [asdict(entry) for entry in scene.pruned],
    }
    if with_text:
        document["text"] = scene.text
    return document


def _scene(args: argparse.Namespace, ctx: CliContext) -> int:
    workspace = _open(args, ctx)
    stack = Path(args.error_stack).read_text(encoding="utf-8", errors="replace") \
        if args.error_stack else None
    store = SceneStore(workspace.cache_dir / "scenes")
    try:
        if args.since:
            delta = delta_scene(workspace, args.card, args.since, args.budget, store=store,
                                compress=not args.no_compress, error_stack=stack)
            scene, text = delta.scene, delta.text
        else:
            scene = build_scene(workspace, args.card, args.budget,
                                compress=not args.no_compress, error_stack=stack)
            store.save(scene)
            text = scene.text
    except CycleDetected as exc:
        return _cycle(ctx, exc)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    if ctx.json:
        document = _scene_json(scene, with_text=not args.out)
        if args.since:
            document["delta"] = {"since": args.since, "text": text}
        ctx.emit_json(document)
    elif args.out:
        pruned = ", ".join(p.id for p in scene.pruned) or "none"
        ctx.print(f"wrote {args.out}: {len(scene.included)} cards, "
                  f"{scene.used_tokens}/{scene.budget} tokens, pruned: {pruned}, "
                  f"masked: {scene.masked}, scene {scene.scene_hash[:12]}")
    else:
        ctx.write(text)
    return 0


def _validate(args: argparse.Namespace, ctx: CliContext) -> int:
    workspace = _open(args, ctx)
    report = workspace.validate()
    code = EXIT_CYCLE if (report.reference_cycle or report.dependency_cycle) else (
        EXIT_PROBLEMS if report.problems else 0)
    errors: list[EngineError] = report.errors()
    if ctx.json:
        ctx.emit_json({
            "ok": report.ok,
            "cards": report.cards,
            "reference_cycle": list(report.reference_cycle or []) or None,
            "dependency_cycle": list(report.dependency_cycle or []) or None,
            "problems": [{"code": e.code, "type": type(e).__name__, "message": str(e)}
                         for e in errors],
        })
        return code
    for error in errors:
        ctx.warn(str(error))
    ctx.print(f"{report.cards} cards: " + ("ok" if report.ok else f"{len(errors)} problem(s)"))
    return code


def _listing(args: argparse.Namespace, ctx: CliContext, workspace: Workspace, ids: list[str],
             relation: str) -> int:
    """A card's dependencies or dependents: one card a line, its id and title (an empty
    answer says so rather than printing nothing)."""
    if ctx.json:
        ctx.emit_json({"id": args.id, relation: ids})
        return 0
    if not ids:
        ctx.print(f"{args.id} has no {relation}")
    width = max((len(card_id) for card_id in ids), default=0)
    for card_id in ids:
        ctx.print(f"{card_id:<{width}}  {workspace.card(card_id).title}")
    return 0


def _deps(args: argparse.Namespace, ctx: CliContext) -> int:
    workspace = _open(args, ctx)
    return _listing(args, ctx, workspace, workspace.dependencies(args.id), "dependencies")


def _dependents(args: argparse.Namespace, ctx: CliContext) -> int:
    workspace = _open(args, ctx)
    return _listing(args, ctx, workspace, workspace.dependents(args.id), "dependents")


def _add_dep(args: argparse.Namespace, ctx: CliContext) -> int:
    workspace = _open(args, ctx)
    try:
        added = workspace.add_dependency(args.source, args.target)
    except CycleDetected as exc:
        return _cycle(ctx, exc)
    if ctx.json:
        ctx.emit_json({"from": args.source, "to": args.target, "added": added})
    else:
        ctx.print(f"{args.source} now depends on {args.target}" if added
                  else f"{args.source} already depends on {args.target}")
    return 0


def _search(args: argparse.Namespace, ctx: CliContext) -> int:
    workspace = _open(args, ctx)
    embedder = None
    if not args.keyword_only and ctx.load_model and ctx.settings.load_model:
        embedder = ctx.settings.model_spec().embedder()
        embedder.wait_ready(MODEL_WAIT_SECONDS)
    result = CardSearch(workspace, embedder).search(
        args.query, limit=args.limit, mode="keyword" if args.keyword_only else "hybrid")
    if ctx.json:
        ctx.emit_json({"query": result.query, "mode": result.mode, "note": result.note,
                       "hits": [asdict(hit) for hit in result.hits]})
        return 0
    if result.note:
        ctx.warn(f"note: {result.note}")
    for hit in result.hits:
        semantic = "" if hit.semantic is None else f"  semantic {hit.semantic:.3f}"
        ctx.print(f"{hit.score:.3f}  {hit.id:30} {hit.title}  (keyword {hit.keyword:.3f}"
                  f"{semantic})")
    if not result.hits:
        ctx.print("no matching cards")
    return 0
