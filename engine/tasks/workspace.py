"""A task workspace: a folder of markdown cards, its graphs, and incremental updates.

:class:`Workspace` reads every ``*.md`` file under its root (folders whose names start with a
dot are skipped; ``.mnemoscope/`` holds caches), parses the cards (:mod:`engine.tasks.cards`),
and builds the reference DAG and the task dependency graph (:mod:`engine.tasks.graph`).
Problems in single files (bad front matter, duplicate ids, references or dependencies to
nothing) are collected, not raised, so one bad card does not hide the rest: :meth:`validate`
lists them all, :meth:`check` raises the first. A scene or a dependency query on a broken
part raises.

Updates are incremental: :meth:`refresh` stats the files and re-parses only those whose
content hash changed; :meth:`update_paths` does the same for paths a watcher reported.
Not thread-safe: one owner (the GUI's worker or a CLI command) drives a workspace.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

from engine.clock import Clock, SystemClock
from engine.errors import CycleDetected, EngineError
from engine.tasks.cache import CardCache
from engine.tasks.cards import Card, Section, extract_anchor, parse_card, slugify
from engine.tasks.errors import (
    CardFormatError,
    CardNotFound,
    DuplicateCardId,
    MissingAnchor,
    MissingDependency,
    MissingReference,
    WorkspaceNotFound,
)
from engine.tasks.graph import TaskGraph, find_cycle

__all__ = [
    "CACHE_DIR_NAME",
    "CardImportance",
    "GraphEdge",
    "GraphNode",
    "GraphView",
    "ValidationReport",
    "Workspace",
    "WorkspaceChange",
]

CACHE_DIR_NAME = ".mnemoscope"

# seed 003 §5 strategy 3: Score = references*0.3 + recent_changes*0.35 + in_error_stack*0.35
IMPORTANCE_WEIGHTS = (0.3, 0.35, 0.35)
_RECENT_HALF_LIFE_DAYS = 7.0
_GIT_WINDOW_DAYS = 30
_DAY_MS = 86_400_000.0


@dataclass(frozen=True, slots=True)
class WorkspaceChange:
    """What an update did.

    Attributes:
        added: Paths of new cards.
        changed: Paths whose content changed (re-parsed).
        removed: Paths of deleted cards.
        unchanged: Paths that were looked at and had the same content hash.
    """

    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()

    @property
    def any(self) -> bool:
        """True when a card was added, changed or removed."""
        return bool(self.added or self.changed or self.removed)


@dataclass(frozen=True, slots=True)
class ValidationReport:
    """Whole-workspace validation (seed 003 §8.4 "Validate Graph").

    Attributes:
        problems: Every file-level problem, in path order.
        reference_cycle: A reference cycle as a path, or None.
        dependency_cycle: A dependency cycle as a path, or None.
        cards: Number of cards parsed.
    """

    problems: tuple[EngineError, ...]
    reference_cycle: tuple[str, ...] | None
    dependency_cycle: tuple[str, ...] | None
    cards: int

    @property
    def ok(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems and self.reference_cycle is None \
            and self.dependency_cycle is None

    def errors(self) -> list[EngineError]:
        """Problems and cycles as exceptions, cycles first."""
        cycles: list[EngineError] = [
            CycleDetected(cycle) for cycle in (self.reference_cycle, self.dependency_cycle)
            if cycle is not None
        ]
        return [*cycles, *self.problems]


@dataclass(frozen=True, slots=True)
class CardImportance:
    """Seed 003 §5 strategy 3 importance of one card, with its parts (each in [0, 1])."""

    score: float
    references: float
    recent_changes: float
    in_error_stack: float


@dataclass(frozen=True, slots=True)
class GraphNode:
    """A card as the dependency-graph view shows it."""

    id: str
    title: str
    path: str
    status: str | None
    priority: str | None
    importance: float
    is_task: bool


@dataclass(frozen=True, slots=True)
class GraphEdge:
    """``source -> target``; kind ``"depends_on"`` or ``"references"``."""

    source: str
    target: str
    kind: str


@dataclass(frozen=True, slots=True)
class GraphView:
    """What a graph view needs: nodes, edges, layers for a layered layout, cycles.

    Attributes:
        generations: Task layers, prerequisites first (``networkx.topological_generations``);
            empty when the dependency graph has a cycle.
        cycles: Dependency and reference cycles as paths (first id repeated last).
    """

    nodes: tuple[GraphNode, ...]
    edges: tuple[GraphEdge, ...]
    generations: tuple[tuple[str, ...], ...]
    cycles: tuple[tuple[str, ...], ...]


@dataclass(slots=True)
class _Links:
    refs: list[tuple[str, str]] = field(default_factory=list)
    deps: list[tuple[str, str]] = field(default_factory=list)
    problems: list[EngineError] = field(default_factory=list)


def _outside_link(root: Path, full: Path) -> str | None:
    """Where ``full`` leads when it is a symbolic link to a file outside ``root``, else None
    (one ``lstat`` for a plain file: the cold parse of 500 cards stays within its budget)."""
    if not full.is_symlink():
        return None
    target = full.resolve()
    return None if target.is_relative_to(root.resolve()) else str(target)


class Workspace:
    """A folder of cards with its reference DAG and task graph.

    Args:
        root: The workspace folder.
        cache: Parsed-card LRU (shared between workspaces if wanted); a private one by default.
        clock: Time source for importance (seed 000 §10).
        cache_dir: Where persistent caches live (scene snapshots, embeddings); default
            ``root/.mnemoscope``.
    """

    def __init__(self, root: str | os.PathLike[str], *, cache: CardCache | None = None,
                 clock: Clock | None = None, cache_dir: str | os.PathLike[str] | None = None
                 ) -> None:
        self.root = Path(root)
        self.cache = cache or CardCache(clock=clock)
        self.clock = clock or SystemClock()
        self.cache_dir = Path(cache_dir) if cache_dir is not None else self.root / CACHE_DIR_NAME
        self._by_path: dict[str, Card] = {}
        self._stats: dict[str, tuple[int, int]] = {}
        self._format_problems: dict[str, EngineError] = {}
        self._by_id: dict[str, Card] = {}
        self._by_ref: dict[str, Card] = {}
        self._duplicates: list[EngineError] = []
        self._links: dict[str, _Links] = {}
        self.reference_graph: nx.DiGraph = nx.DiGraph()
        self.task_graph = TaskGraph()
        self._git_cache: tuple[float, dict[str, float] | None] | None = None

    @classmethod
    def open(cls, root: str | os.PathLike[str], *, cache: CardCache | None = None,
             clock: Clock | None = None, cache_dir: str | os.PathLike[str] | None = None
             ) -> Workspace:
        """Build and :meth:`load` a workspace (arguments as for the constructor).

        Raises:
            WorkspaceNotFound: ``root`` is not a folder.
        """
        workspace = cls(root, cache=cache, clock=clock, cache_dir=cache_dir)
        workspace.load()
        return workspace

    # -- reading -------------------------------------------------------------------------

    def _scan(self) -> dict[str, tuple[int, int]]:
        if not self.root.is_dir():
            raise WorkspaceNotFound(str(self.root))
        found: dict[str, tuple[int, int]] = {}
        root = str(self.root)
        prefix = len(os.path.join(root, ""))
        stack = [root]
        while stack:
            folder = stack.pop()
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.startswith("."):
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.name.endswith(".md") and entry.is_file():
                        stat = entry.stat()
                        rel = entry.path[prefix:]
                        found[rel if os.sep == "/" else rel.replace(os.sep, "/")] = (
                            stat.st_mtime_ns, stat.st_size)
        return dict(sorted(found.items()))

    def _read(self, path: str) -> Card | None:
        """Parse ``path`` (via the cache); record a format problem and return None on error."""
        full = self.root / path
        outside = _outside_link(self.root, full)
        if outside is not None:
            # A workspace may come from someone else (a cloned repository): a card linked to
            # ~/.netrc would put that file in a scene, the context pasted to an LLM.
            self._format_problems[path] = CardFormatError(
                path, 0, "file", f"a link to {outside}, outside the workspace: not read")
            return None
        raw = full.read_bytes()
        digest = hashlib.sha256(raw).hexdigest()
        current = self._by_path.get(path)
        if current is not None and current.content_hash == digest:
            return current
        cached = self.cache.get(path, digest)
        if cached is not None:
            self._format_problems.pop(path, None)
            return cached
        try:
            card = parse_card(path, raw, digest)
        except CardFormatError as exc:
            self._format_problems[path] = exc
            return None
        self._format_problems.pop(path, None)
        self.cache.put(card)
        return card

    def load(self) -> None:
        """Read every card from disk (cold parse) and build both graphs."""
        stats = self._scan()
        self._by_path = {}
        self._format_problems = {}
        for path in stats:
            card = self._read(path)
            if card is not None:
                self._by_path[path] = card
        self._stats = stats
        self._relink_all()

    def refresh(self) -> WorkspaceChange:
        """Re-read files whose size or modification time changed; re-parse changed content."""
        stats = self._scan()
        touched = [path for path, stat in stats.items() if self._stats.get(path) != stat]
        removed = [path for path in self._stats if path not in stats]
        return self._apply(touched, removed, stats)

    def update_paths(self, paths: Iterable[str]) -> WorkspaceChange:
        """Re-read the given paths (relative, ``/``-separated), e.g. from a file watcher."""
        touched: list[str] = []
        removed: list[str] = []
        stats = dict(self._stats)
        for path in paths:
            if not path.endswith(".md") or any(part.startswith(".") for part in path.split("/")):
                continue  # not a card (the scan skips these too)
            full = self.root / path
            if full.is_file():
                stat = full.stat()
                stats[path] = (stat.st_mtime_ns, stat.st_size)
                touched.append(path)
            elif path in stats:
                del stats[path]
                removed.append(path)
        return self._apply(touched, removed, stats)

    def _apply(self, touched: list[str], removed: list[str],
               stats: dict[str, tuple[int, int]]) -> WorkspaceChange:
        added: list[str] = []
        changed: list[str] = []
        unchanged: list[str] = []
        identity_changed = bool(removed)
        for path in removed:
            self._by_path.pop(path, None)
            self._format_problems.pop(path, None)
        for path in touched:
            before = self._by_path.get(path)
            had_problem = path in self._format_problems
            card = self._read(path)
            if card is None:
                if before is not None:
                    del self._by_path[path]
                    identity_changed = True
                (changed if before is not None or had_problem else added).append(path)
                continue
            if before is not None and before.content_hash == card.content_hash:
                unchanged.append(path)
                continue
            self._by_path[path] = card
            if before is None:
                added.append(path)
                identity_changed = True
            else:
                changed.append(path)
                identity_changed |= before.id != card.id or before.is_task != card.is_task
                identity_changed |= self._by_id.get(card.id) is not before  # a duplicate id
        self._stats = dict(sorted(stats.items()))
        if identity_changed:
            self._relink_all()
        else:
            for path in changed:
                card = self._by_path.get(path)
                if card is not None:  # a file broken before and still broken has no links
                    self._relink_one(card)
        return WorkspaceChange(tuple(added), tuple(changed), tuple(removed), tuple(unchanged))

    # -- linking -------------------------------------------------------------------------

    def _resolve(self, target: str) -> Card | None:
        return self._by_ref.get(target) or self._by_id.get(target)

    def _links_of(self, card: Card) -> _Links:
        links = _Links()
        for ref in card.references:
            target = self._resolve(ref.target)
            if target is None:
                if "/" in ref.target:
                    links.problems.append(MissingReference(card.path, ref.line, ref.target))
                continue  # a plain mention such as @alice
            links.refs.append((card.id, target.id))
        for dependency in card.depends_on:
            target = self._by_id.get(dependency) or self._by_ref.get(dependency)
            if target is None:
                links.problems.append(
                    MissingDependency(card.path, card.depends_on_line, dependency))
                continue
            links.deps.append((card.id, target.id))
        return links

    def _relink_all(self) -> None:
        by_id: dict[str, Card] = {}
        owners: dict[str, list[str]] = {}
        for path, card in self._by_path.items():
            owners.setdefault(card.id, []).append(path)
            by_id.setdefault(card.id, card)
        self._by_id = by_id
        self._by_ref = {card.ref_name: card for card in by_id.values()}
        self._duplicates = [DuplicateCardId(card_id, paths) for card_id, paths in owners.items()
                            if len(paths) > 1]
        references: nx.DiGraph = nx.DiGraph()
        references.add_nodes_from(by_id)
        tasks = TaskGraph(card.id for card in by_id.values() if card.is_task)
        self._links = {}
        ref_edges: list[tuple[str, str]] = []
        dep_edges: list[tuple[str, str]] = []
        for card in by_id.values():
            links = self._links_of(card)
            self._links[card.path] = links
            ref_edges.extend(links.refs)
            dep_edges.extend(links.deps)
        references.add_edges_from(ref_edges)
        tasks.graph.add_edges_from(dep_edges)
        self.reference_graph = references
        self.task_graph = tasks

    def _relink_one(self, card: Card) -> None:
        """Update the edges of one card whose id did not change."""
        self._by_id[card.id] = card
        self._by_ref[card.ref_name] = card
        old = self._links.get(card.path)
        links = self._links_of(card)
        self._links[card.path] = links
        if old is not None:
            self.reference_graph.remove_edges_from(old.refs)
            self.task_graph.graph.remove_edges_from(old.deps)
        self.reference_graph.add_edges_from(links.refs)
        if card.is_task:
            self.task_graph.graph.add_node(card.id)
        self.task_graph.graph.add_edges_from(links.deps)

    # -- queries -------------------------------------------------------------------------

    @property
    def cards(self) -> Mapping[str, Card]:
        """Cards by id (the first file in path order when an id is duplicated)."""
        return self._by_id

    def paths(self) -> list[str]:
        """Paths of every parsed card, sorted."""
        return list(self._by_path)

    def card(self, key: str) -> Card:
        """The card with this id or path (``docs/api``, ``docs/api.md``).

        Raises:
            CardNotFound: no such card.
        """
        key = key.lstrip("@")
        card = self._by_id.get(key) or self._by_ref.get(key) or self._by_path.get(key)
        if card is None:
            raise CardNotFound(key)
        return card

    def problems(self) -> list[EngineError]:
        """File-level problems (format, duplicate ids, references and dependencies to nothing).

        Missing anchors are checked by :meth:`validate` (they need the markdown parse).
        """
        problems: list[EngineError] = [
            self._format_problems[path] for path in sorted(self._format_problems)
        ]
        problems.extend(self._duplicates)
        for path in sorted(self._links):
            problems.extend(self._links[path].problems)
        return problems

    def sections(self, card: Card) -> tuple[Section, ...]:
        """The card's sections (markdown-it parse, cached)."""
        return self.cache.sections(card)

    def section(self, card: Card, anchor: str) -> Section | None:
        """The first section of ``card`` whose heading matches ``anchor``, or None."""
        wanted = slugify(anchor)
        return next((s for s in self.sections(card) if s.slug == wanted), None)

    def resolve(self, target: str) -> Card | None:
        """The card a reference target names (path without ``.md`` first, then id)."""
        return self._resolve(target)

    def link_problems(self, card: Card) -> list[EngineError]:
        """Broken references and dependencies of one card."""
        links = self._links.get(card.path)
        return list(links.problems) if links is not None else []

    def section_text(self, card: Card, anchor: str) -> str | None:
        """The text under the heading ``anchor`` of ``card`` (seed 003 §3), or None."""
        return extract_anchor(card.body, anchor, self.sections(card))

    def anchor_problems(self) -> list[EngineError]:
        """Anchored references whose heading does not exist in the target."""
        problems: list[EngineError] = []
        for card in self._by_id.values():
            for ref in card.references:
                if ref.anchor is None:
                    continue
                target = self._resolve(ref.target)
                if target is None:
                    continue
                wanted = ref.anchor
                if not any(s.slug == slugify(wanted) for s in self.sections(target)):
                    problems.append(MissingAnchor(card.path, ref.line, ref.target, wanted))
        return problems

    def reference_cycle(self) -> list[str] | None:
        """A reference cycle anywhere in the workspace, as a path, or None."""
        return find_cycle(self.reference_graph.succ)

    def validate(self) -> ValidationReport:
        """Check the whole workspace: files, ids, references, anchors and both graphs."""
        problems = self.problems() + self.anchor_problems()
        ref_cycle = self.reference_cycle()
        dep_cycle = self.task_graph.find_cycle()
        return ValidationReport(
            tuple(problems),
            tuple(ref_cycle) if ref_cycle else None,
            tuple(dep_cycle) if dep_cycle else None,
            len(self._by_path),
        )

    def validate_task(self, task: str) -> list[EngineError]:
        """Check one task (seed 003 §8.4 "Validate Task"): its file, references, dependencies,
        and a dependency cycle through what it depends on (reported as :class:`CycleDetected`).

        Raises:
            CardNotFound: no such card.
        """
        card = self.card(task)
        problems: list[EngineError] = []
        if card.path in self._format_problems:
            problems.append(self._format_problems[card.path])
        problems.extend(e for e in self._duplicates
                        if isinstance(e, DuplicateCardId) and e.card_id == card.id)
        problems.extend(self.link_problems(card))
        if card.id in self.task_graph:
            cycle = find_cycle(self.task_graph.graph.succ, [card.id])
            if cycle is not None:
                problems.insert(0, CycleDetected(cycle))
        return problems

    def check(self) -> None:
        """Raise the first problem :meth:`validate` finds (cycles first)."""
        errors = self.validate().errors()
        if errors:
            raise errors[0]

    def dependencies(self, task: str) -> list[str]:
        """Ids ``task`` depends on directly.

        Raises:
            CardNotFound: no such card.
        """
        card = self.card(task)
        return self.task_graph.dependencies(card.id) if card.id in self.task_graph else []

    def dependents(self, task: str) -> list[str]:
        """Ids of the tasks that depend on ``task`` directly.

        Raises:
            CardNotFound: no such card.
        """
        card = self.card(task)
        return self.task_graph.dependents(card.id) if card.id in self.task_graph else []

    def add_dependency(self, task: str, dependency: str) -> bool:
        """Make ``task`` depend on ``dependency``, writing the card's front matter.

        Returns:
            False when the dependency was already there (nothing written).

        Raises:
            CardNotFound: either id is unknown.
            CycleDetected: the new edge would close a cycle (seed 003 §8.2); nothing is written.
        """
        card = self.card(task)
        target = self.card(dependency)
        if target.id in card.depends_on:
            return False
        self.task_graph.graph.add_node(card.id)
        self.task_graph.graph.add_node(target.id)
        cycle = self.task_graph.cycle_with(card.id, target.id)
        if cycle is not None:
            raise CycleDetected(cycle)
        full = self.root / card.path
        text = full.read_text(encoding="utf-8")
        _atomic_write(full, _with_dependency(text, [*card.depends_on, target.id]))
        self.update_paths([card.path])
        return True

    # -- importance (seed 003 §5 strategy 3) ------------------------------------------------

    def _git_changes(self) -> dict[str, float] | None:
        """Recency-weighted commit counts per path from ``git log``, or None if not a checkout."""
        now = self.clock.now()
        if self._git_cache is not None and now - self._git_cache[0] < 60_000:
            return self._git_cache[1]
        result: dict[str, float] | None
        root = self.root.resolve()
        if not any((folder / ".git").exists() for folder in (root, *root.parents)):
            self._git_cache = (now, None)  # not a checkout: no process to spawn
            return None
        try:
            out = subprocess.run(
                ["git", "-C", str(self.root), "log", f"--since={_GIT_WINDOW_DAYS}.days",
                 "--format=@%ct", "--name-only", "--relative", "--", "."],
                capture_output=True, text=True, timeout=10, check=False,
            )
        except (OSError, subprocess.SubprocessError):
            out = None
        if out is None or out.returncode != 0:
            result = None
        else:
            result = {}
            weight = 0.0
            for line in out.stdout.splitlines():
                if line.startswith("@"):
                    age_days = max(0.0, (now / 1000.0 - float(line[1:])) / 86_400.0)
                    weight = math.exp(-age_days * math.log(2) / _RECENT_HALF_LIFE_DAYS)
                elif line.endswith(".md"):
                    result[line] = result.get(line, 0.0) + weight
        self._git_cache = (now, result)
        return result

    def importance(self, error_stack: str | None = None) -> dict[str, CardImportance]:
        """Importance of every card (seed 003 §5 strategy 3), each part normalized to [0, 1].

        * references: how often the card is referenced (``@`` edges and ``depends_on``),
          divided by the workspace maximum;
        * recent changes: in a git checkout, commits of the last 30 days touching the file,
          each weighted by ``2^(-age/7 days)``, divided by the maximum; otherwise the file's
          modification time, ``2^(-age/7 days)``;
        * in error stack: 1 when ``error_stack`` mentions the card's path, ``@`` name or id.
        """
        w_refs, w_recent, w_error = IMPORTANCE_WEIGHTS
        counts = {card_id: 0 for card_id in self._by_id}
        for card in self._by_id.values():
            for ref in card.references:
                target = self._resolve(ref.target)
                if target is not None:
                    counts[target.id] += 1
            for dependency in card.depends_on:
                if dependency in counts:
                    counts[dependency] += 1
        max_refs = max(counts.values(), default=0) or 1
        git = self._git_changes()
        now = self.clock.now()
        recent: dict[str, float] = {}
        if git is not None:
            max_git = max(git.values(), default=0.0) or 1.0
            recent = {card.id: git.get(card.path, 0.0) / max_git for card in self._by_id.values()}
        else:
            for card in self._by_id.values():
                mtime_ms = self._stats.get(card.path, (0, 0))[0] / 1e6
                age_days = max(0.0, (now - mtime_ms) / _DAY_MS)
                recent[card.id] = 2.0 ** (-age_days / _RECENT_HALF_LIFE_DAYS)
        stack = error_stack or ""
        result: dict[str, CardImportance] = {}
        for card in self._by_id.values():
            refs = counts[card.id] / max_refs
            in_stack = 1.0 if stack and _mentions(stack, card) else 0.0
            score = w_refs * refs + w_recent * recent[card.id] + w_error * in_stack
            result[card.id] = CardImportance(round(score, 6), refs, recent[card.id], in_stack)
        return result

    # -- the graph view -----------------------------------------------------------------

    def graph_view(self, error_stack: str | None = None,
                   include_references: bool = True) -> GraphView:
        """Nodes, edges, layers and cycles for the dependency-graph view."""
        importance = self.importance(error_stack)
        nodes = tuple(
            GraphNode(card.id, card.title, card.path, card.status, card.priority,
                      importance[card.id].score, card.is_task)
            for card in self._by_id.values()
            if card.is_task or include_references
        )
        edges = [GraphEdge(a, b, "depends_on") for a, b in self.task_graph.graph.edges]
        if include_references:
            edges.extend(GraphEdge(a, b, "references") for a, b in self.reference_graph.edges)
        cycles = [tuple(c) for c in self.task_graph.all_cycles()]
        ref_cycle = self.reference_cycle()
        if ref_cycle is not None:
            cycles.append(tuple(ref_cycle))
        generations: tuple[tuple[str, ...], ...] = ()
        if not self.task_graph.find_cycle():
            generations = tuple(tuple(layer) for layer in self.task_graph.generations())
        return GraphView(nodes, tuple(edges), generations, tuple(cycles))


def _mentions(stack: str, card: Card) -> bool:
    for needle in (card.path, card.ref_name, card.id):
        if re.search(rf"(?<![\w/.-]){re.escape(needle)}(?![\w-])", stack):
            return True
    return False


_PLAIN_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")


def _yaml_item(value: str) -> str:
    return value if _PLAIN_ID.match(value) else json.dumps(value)


def _with_dependency(text: str, depends_on: list[str]) -> str:
    """``text`` with its front matter's ``depends_on`` set to ``depends_on`` (one flow line)."""
    line = "depends_on: [" + ", ".join(_yaml_item(d) for d in depends_on) + "]"
    if not text.startswith("---\n"):
        return f"---\n{line}\n---\n{text}"
    lines = text.split("\n")
    close = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
    if close is None:
        return f"---\n{line}\n---\n{text}"
    start = next((i for i in range(1, close) if lines[i].startswith("depends_on:")), None)
    if start is None:
        return "\n".join([*lines[:close], line, *lines[close:]])
    end = start + 1
    while end < close and (lines[end].startswith((" ", "\t", "-")) or not lines[end].strip()):
        end += 1
    return "\n".join([*lines[:start], line, *lines[end:]])


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
