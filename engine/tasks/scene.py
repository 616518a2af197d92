"""Scenes: the context an agent gets for one card (seed 003 §1.2, §2, §4, §5).

:func:`build_scene` follows the seed's pipeline: parse references, fail on a cycle (error
1002 with its path), order by the priority topological sort, prune greedily to the token
budget, mask secrets, and render ``SCENE.md``.

Pruning is the seed's §2 greedy loop, exactly: the active card is always added; then for each
card in order, if ``used + estimate < budget`` it is appended, else the truncation warning is
appended and the loop stops — nothing after the first card that does not fit is considered.
Before a card is cut, its semantically compressed form (§5 strategy 1: code blocks reduced to
signatures and a one-line summary) is tried under the same test. Token counts are
:func:`engine.text.estimate_tokens` of each rendered block (the seed leaves ``Estimate``
undefined), counted after masking so that the count is that of the text actually emitted.
Secret masking (§4 Security Guard) uses :mod:`engine.redaction`; masking block by block gives
the same text as masking the final buffer, because no pattern spans two blocks.

A card reached only through anchored references (``@docs/api#Login``) contributes just those
sections (§3); one plain reference brings the whole card.

Delta scenes (§5 strategy 2) compare a new scene with a stored earlier one by its hash and
emit only what changed, line ranges for changed cards.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

from engine.errors import CycleDetected, ValidationError
from engine.redaction import Redactor
from engine.tasks.cards import Card, Reference, compress_code_blocks
from engine.tasks.errors import MissingAnchor, MissingReference
from engine.tasks.graph import find_cycle, priority_order
from engine.tasks.workspace import Workspace
from engine.text import estimate_tokens

__all__ = [
    "DEFAULT_BUDGET",
    "TRUNCATION_WARNING",
    "PrunedEntry",
    "Scene",
    "SceneDelta",
    "SceneEntry",
    "SceneStore",
    "build_scene",
    "delta_scene",
]

DEFAULT_BUDGET = 32_000  # seed 003 §2: "Budget: N tokens (default 32k)"
TRUNCATION_WARNING = "> [!WARNING] Context Truncated here..."  # seed 003 §2, verbatim
_MASK_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class SceneEntry:
    """A card that made it into the scene.

    Attributes:
        id: Card id.
        path: Card path.
        title: Card title.
        priority: Seed 003 §1.2 priority (100 / 50 / 25 / 10).
        depth: Reference distance from the active card (-1: global doc).
        importance: Seed 003 §5 importance.
        tokens: Tokens of the emitted block.
        compressed: True when code blocks were compressed to fit.
        anchors: The sections included; empty when the whole card is.
        masked: Number of secrets / personal data masked in the block.
    """

    id: str
    path: str
    title: str
    priority: int
    depth: int
    importance: float
    tokens: int
    compressed: bool
    anchors: tuple[str, ...]
    masked: int


@dataclass(frozen=True, slots=True)
class PrunedEntry:
    """A card of the order that was cut (at or after the truncation point)."""

    id: str
    path: str
    priority: int
    depth: int
    tokens: int


@dataclass(frozen=True, slots=True)
class Scene:
    """A rendered scene with everything a preview needs.

    Attributes:
        active_id: The card the scene is for.
        budget: Token budget.
        used_tokens: Tokens of the included blocks (the warning line is not counted).
        text: ``SCENE.md`` content.
        scene_hash: SHA-256 hex of the blocks; names the scene for delta scenes.
        included: Cards in, in order.
        pruned: Cards cut, in order.
        truncated: True when the warning was appended.
        over_budget: True when the active card alone exceeds the budget (it is kept).
    """

    active_id: str
    budget: int
    used_tokens: int
    text: str
    scene_hash: str
    included: tuple[SceneEntry, ...]
    pruned: tuple[PrunedEntry, ...]
    truncated: bool
    over_budget: bool
    blocks: tuple[tuple[str, str], ...]

    @property
    def masked(self) -> int:
        """Total number of masked spans."""
        return sum(entry.masked for entry in self.included)


def _header(card: Card) -> str:
    facts = [f"path: {card.path}"]
    if card.status:
        facts.append(f"status: {card.status}")
    if card.priority:
        facts.append(f"priority: {card.priority}")
    if card.depends_on:
        facts.append("depends on: " + ", ".join(card.depends_on))
    return " · ".join(facts)


def _refs_in_scope(workspace: Workspace, card: Card,
                   anchors: set[str] | None) -> list[Reference]:
    """The references of ``card`` that lie in the part of it the scene includes."""
    if anchors is None:
        return list(card.references)
    ranges = [(s.start, s.end) for s in (workspace.section(card, a) for a in anchors) if s]
    return [ref for ref in card.references
            if any(start <= ref.line - card.body_line < end for start, end in ranges)]


def _scene_graph(workspace: Workspace,
                 root: Card) -> tuple[nx.DiGraph, dict[str, set[str] | None]]:
    """What the scene reaches, and which part of each card (None: all; else anchors).

    A card brought in only by anchored references contributes those sections, and only the
    references inside them are followed (seed 003 §3 applied to the traversal). Fixpoint:
    a card's part grows when another reference asks for more of it.

    Raises:
        MissingReference, MissingAnchor: a followed reference is broken.
    """
    needed: dict[str, set[str] | None] = {root.id: None}
    pending = [root.id]
    while pending:
        card = workspace.cards[pending.pop()]
        for ref in _refs_in_scope(workspace, card, needed[card.id]):
            target = workspace.resolve(ref.target)
            if target is None:
                if "/" in ref.target:
                    raise MissingReference(card.path, ref.line, ref.target)
                continue
            if target.id == card.id:
                continue
            before = needed.get(target.id, set())
            if ref.anchor is None:
                after: set[str] | None = None
            else:
                if workspace.section(target, ref.anchor) is None:
                    raise MissingAnchor(card.path, ref.line, ref.target, ref.anchor)
                after = None if before is None else {*before, ref.anchor}
            if target.id not in needed or after != before:
                needed[target.id] = after
                pending.append(target.id)
    graph: nx.DiGraph = nx.DiGraph()
    graph.add_nodes_from(needed)
    for card_id, anchors in needed.items():
        card = workspace.cards[card_id]
        for ref in _refs_in_scope(workspace, card, anchors):
            target = workspace.resolve(ref.target)
            if target is not None and target.id != card_id:
                graph.add_edge(card_id, target.id)
    return graph, needed


def _content(workspace: Workspace, card: Card,
             anchors: set[str] | None) -> tuple[str, tuple[str, ...]]:
    """The card's text for the scene: the whole body, or the asked-for sections in file order."""
    if anchors is None:
        return card.body.strip("\n"), ()
    found = [(section, anchor) for anchor in sorted(anchors)
             if (section := workspace.section(card, anchor)) is not None]
    # Widest first at each start, so a section nested in another chosen one is dropped.
    found.sort(key=lambda item: (item[0].start, -item[0].end))
    lines = card.body.split("\n")
    parts: list[str] = []
    names: list[str] = []
    covered_to = -1
    for section, anchor in found:
        if section.end <= covered_to:
            names.append(anchor)  # inside a section already included
            continue
        start = max(section.start, covered_to)
        parts.append("\n".join(lines[start:section.end]).strip("\n"))
        names.append(anchor)
        covered_to = section.end
    return "\n\n".join(parts), tuple(names)


def _block(card: Card, title_suffix: str, content: str) -> str:
    return f"## {card.id} — {card.title}{title_suffix}\n_{_header(card)}_\n\n{content}\n"


def build_scene(
    workspace: Workspace,
    card_key: str,
    budget: int = DEFAULT_BUDGET,
    *,
    redactor: Redactor | None = None,
    compress: bool = True,
    use_importance: bool = True,
    error_stack: str | None = None,
) -> Scene:
    """Build the scene for one card.

    Args:
        workspace: A loaded workspace.
        card_key: Id or path of the active card.
        budget: Token budget ``N`` (seed 003 §2).
        redactor: Masking patterns; the engine's default set (EMAIL, UUID, NUMSEQ16, SECRETS)
            when None.
        compress: Try semantic compression before cutting a card (§5 strategy 1).
        use_importance: Order cards of equal priority by §5 importance (else discovery order).
        error_stack: Error text whose mentioned cards gain importance (§5 strategy 3).

    Raises:
        CardNotFound: no such card.
        CycleDetected: the references reachable from the card form a cycle (error 1002).
        MissingReference, MissingAnchor: a reachable reference is broken.
        ValidationError: ``budget`` is not positive.
    """
    if budget <= 0:
        raise ValidationError("budget", budget, "must be a positive number of tokens")
    active = workspace.card(card_key)
    masker = redactor or Redactor()
    importance = workspace.importance(error_stack) if use_importance else {}
    global_ids = [card.id for card in workspace.cards.values() if card.is_global]
    # seed 003 §1.1: any cycle reachable in the card-level reference DAG fails the scene.
    cycle = find_cycle(workspace.reference_graph.succ, [active.id])
    if cycle is not None:
        raise CycleDetected(cycle)
    graph, needed = _scene_graph(workspace, active)
    order = priority_order(
        graph, active.id, global_ids,
        (lambda card_id: importance[card_id].score) if importance else None,
    )

    title = f"# SCENE: {active.id} — {active.title}\n"
    blocks: list[tuple[str, str]] = []
    included: list[SceneEntry] = []
    pruned: list[PrunedEntry] = []
    used = estimate_tokens(title)
    truncated = False
    over_budget = False
    parts_of: dict[int, tuple[str, tuple[str, ...], str]] = {}  # content, anchors, suffix
    masked: dict[int, tuple[str, int]] = {}

    def prepare(position: int) -> None:
        # Mask blocks a chunk at a time (one redaction pass per ~64 KB instead of one per
        # card); at most one chunk beyond the truncation point is masked for nothing.
        start = len(parts_of)
        raw: list[str] = []
        while len(parts_of) < len(order) and (len(parts_of) <= position
                                              or sum(map(len, raw)) < _MASK_CHUNK):
            index = len(parts_of)
            card = workspace.cards[order[index].id]
            content, anchors = _content(workspace, card, needed.get(card.id))
            suffix = (" #" + ", #".join(anchors)) if anchors else ""
            parts_of[index] = (content, anchors, suffix)
            raw.append(_block(card, suffix, content))
        for offset, result in enumerate(masker.redact_many(raw)):
            masked[start + offset] = result

    for position, item in enumerate(order):
        card = workspace.cards[item.id]
        if position not in masked:
            prepare(position)
        content, anchors, suffix = parts_of[position]
        block, found = masked[position]
        cost = estimate_tokens(block)
        compressed = False
        fits = used + cost < budget  # seed 003 §2: strict "<"
        if not fits and compress and ("```" in content or "~~~" in content):
            small_raw = _block(card, suffix, compress_code_blocks(content, card.path))
            [(small, small_found)] = masker.redact_many([small_raw])
            small_cost = estimate_tokens(small)
            if small_cost < cost and (used + small_cost < budget or position == 0):
                block, cost, found = small, small_cost, small_found
                compressed = True
                fits = used + cost < budget
        if position == 0 and not fits:
            over_budget = True  # the active card is critical: kept even alone over budget
            fits = True
        if not fits:
            truncated = True
            pruned.extend(
                PrunedEntry(rest.id, workspace.cards[rest.id].path, rest.priority, rest.depth,
                            workspace.cards[rest.id].tokens)
                for rest in order[position:]
            )
            break
        used += cost
        key = f"{card.id}#{','.join(anchors)}" if anchors else card.id
        blocks.append((key, block))
        included.append(SceneEntry(card.id, card.path, card.title, item.priority, item.depth,
                                   item.importance, cost, compressed, anchors, found))
    body = "\n".join(block for _, block in blocks)
    scene_hash = hashlib.sha256(body.encode("utf-8")).hexdigest()
    parts = [title, f"<!-- scene {scene_hash[:12]} · {used}/{budget} tokens -->\n", body]
    if truncated:
        parts.append(f"\n{TRUNCATION_WARNING}\n")
    return Scene(active.id, budget, used, "\n".join(parts), scene_hash, tuple(included),
                 tuple(pruned), truncated, over_budget, tuple(blocks))


# --- delta scenes (seed 003 §5 strategy 2) ----------------------------------------------------


class SceneStore:
    """Snapshots of recent scenes on disk, by scene hash, so a later run can send a delta.

    Args:
        folder: Where snapshots live (``<workspace>/.mnemoscope/scenes``).
        keep: How many snapshots to keep (oldest removed first).
    """

    def __init__(self, folder: str | os.PathLike[str], keep: int = 32) -> None:
        self.folder = Path(folder)
        self.keep = keep

    def save(self, scene: Scene) -> None:
        """Store ``scene`` under its hash."""
        self.folder.mkdir(parents=True, exist_ok=True)
        target = self.folder / f"{scene.scene_hash}.json"
        data = {"active": scene.active_id, "blocks": [list(block) for block in scene.blocks]}
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, target)
        snapshots = sorted(self.folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
        for old in snapshots[:-self.keep] if len(snapshots) > self.keep else []:
            old.unlink(missing_ok=True)

    def load(self, scene_hash: str) -> list[tuple[str, str]]:
        """The blocks of a stored scene; a unique hash prefix of 8+ characters is enough.

        Raises:
            ValidationError: no stored scene has this hash.
        """
        if len(scene_hash) >= 8 and all(ch in "0123456789abcdef" for ch in scene_hash):
            matches = list(self.folder.glob(f"{scene_hash}*.json")) if self.folder.is_dir() else []
            if len(matches) == 1:
                data = json.loads(matches[0].read_text(encoding="utf-8"))
                return [(str(key), str(text)) for key, text in data["blocks"]]
        raise ValidationError("since", scene_hash,
                              f"no stored scene with this hash in {self.folder}")


@dataclass(frozen=True, slots=True)
class SceneDelta:
    """What changed between a stored scene and the current one.

    Attributes:
        base_hash: Hash of the earlier scene.
        scene: The current full scene (stored, so it can be the next base).
        text: The delta document.
        added, changed, removed, unchanged: Block keys (card id, ``id#anchors`` for sections).
    """

    base_hash: str
    scene: Scene
    text: str
    added: tuple[str, ...]
    changed: tuple[str, ...]
    removed: tuple[str, ...]
    unchanged: tuple[str, ...]


def _line_delta(old: str, new: str) -> list[str]:
    old_lines, new_lines = old.split("\n"), new.split("\n")
    out: list[str] = []
    same = 0
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            same += i2 - i1
        elif tag == "delete":
            out.append(f"L{j1 + 1}: [{i2 - i1} line(s) deleted]")
        else:
            where = f"L{j1 + 1}" if j2 - j1 == 1 else f"L{j1 + 1}-{j2}"
            out.append(f"{where}:")
            out.extend(new_lines[j1:j2])
    out.append(f"[other {same} lines unchanged]")
    return out


def delta_scene(
    workspace: Workspace,
    card_key: str,
    since: str,
    budget: int = DEFAULT_BUDGET,
    *,
    store: SceneStore | None = None,
    redactor: Redactor | None = None,
    compress: bool = True,
    use_importance: bool = True,
    error_stack: str | None = None,
) -> SceneDelta:
    """Build the current scene and describe only what changed since scene ``since``.

    The other arguments are those of :func:`build_scene`; the new scene is stored in
    ``store`` (default ``<workspace>/.mnemoscope/scenes``) so it can be the next base.

    Raises:
        ValidationError: ``since`` names no stored scene.
        Everything :func:`build_scene` raises.
    """
    store = store or SceneStore(workspace.cache_dir / "scenes")
    base = dict(store.load(since))
    scene = build_scene(workspace, card_key, budget, redactor=redactor, compress=compress,
                        use_importance=use_importance, error_stack=error_stack)
    store.save(scene)
    current = dict(scene.blocks)
    added = [key for key in current if key not in base]
    removed = [key for key in base if key not in current]
    changed = [key for key in current if key in base and base[key] != current[key]]
    unchanged = [key for key in current if key in base and base[key] == current[key]]
    lines = [f"# SCENE DELTA: {scene.active_id} — since {since[:12]} → {scene.scene_hash[:12]}", ""]
    for key in changed:
        lines += [f"## changed: {key}", *_line_delta(base[key], current[key]), ""]
    for key in added:
        lines += [f"## added: {key}", current[key]]
    if removed:
        lines += ["## removed: " + ", ".join(removed), ""]
    if unchanged:
        lines += ["## unchanged: " + ", ".join(unchanged), ""]
    if scene.truncated:
        lines.append(TRUNCATION_WARNING)
    return SceneDelta(since, scene, "\n".join(lines).rstrip("\n") + "\n", tuple(added),
                      tuple(changed), tuple(removed), tuple(unchanged))
