"""The two graphs of a workspace: references (seed 003 §1) and task dependencies (§8).

Both are ``networkx.DiGraph`` objects whose nodes are card ids:

* the reference DAG has an edge ``A -> B`` when card A references ``@B`` (or ``@B#anchor``);
* the task graph has an edge ``A -> B`` when task A ``depends_on`` B (B must be done first).

Cycle detection is the seed's depth-first search with a recursion stack (§1.1), iterative so
deep graphs do not hit Python's recursion limit, and it returns the whole path, first node
repeated last (``A -> B -> C -> A``), for error 1002. Nodes and children are visited in a
fixed order (sorted roots, children in insertion order) so the same workspace always reports
the same cycle.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import networkx as nx

from engine.errors import CycleDetected

__all__ = [
    "PRIORITY_ACTIVE",
    "PRIORITY_DIRECT",
    "PRIORITY_GLOBAL",
    "PRIORITY_INDIRECT",
    "OrderedCard",
    "TaskGraph",
    "find_cycle",
    "priority_order",
]

# seed 003 §1.2 priority levels.
PRIORITY_ACTIVE = 100
PRIORITY_DIRECT = 50
PRIORITY_INDIRECT = 25
PRIORITY_GLOBAL = 10


def find_cycle(
    successors: Mapping[str, Iterable[str]], roots: Iterable[str] | None = None
) -> list[str] | None:
    """Return one cycle as a path ``[A, B, …, A]``, or None when the graph is acyclic.

    Seed 003 §1.1: DFS keeping ``visited`` and the recursion ``stack``; meeting a node that is
    on the stack closes a cycle, reported from that node to itself.

    Args:
        successors: Adjacency (``graph.succ`` of a networkx graph works).
        roots: Where to start; defaults to every node in sorted order.
    """
    visited: set[str] = set()
    for root in sorted(successors) if roots is None else roots:
        if root in visited:
            continue
        visited.add(root)
        stack: list[str] = [root]
        on_stack: dict[str, int] = {root: 0}
        iterators = [iter(successors.get(root, ()))]
        while iterators:
            child = next(iterators[-1], None)
            if child is None:
                iterators.pop()
                del on_stack[stack.pop()]
                continue
            if child in on_stack:
                return [*stack[on_stack[child]:], child]
            if child not in visited:
                visited.add(child)
                on_stack[child] = len(stack)
                stack.append(child)
                iterators.append(iter(successors.get(child, ())))
    return None


@dataclass(frozen=True, slots=True)
class OrderedCard:
    """A card's place in a scene order (seed 003 §1.2).

    Attributes:
        id: Card id.
        priority: 100 active, 50 direct reference, 25 indirect, 10 global doc.
        depth: Shortest reference distance from the active card (0 for it; -1 for a global
            doc that is not reachable).
        importance: The §5 importance used to order cards of equal priority.
    """

    id: str
    priority: int
    depth: int
    importance: float


def priority_order(
    graph: nx.DiGraph,
    root: str,
    global_ids: Sequence[str] = (),
    importance: Callable[[str], float] | None = None,
) -> list[OrderedCard]:
    """Linearize what ``root`` references: modified Kahn's algorithm (seed 003 §1.2).

    Reachable cards get a priority by depth (active 100, direct 50, indirect 25); Kahn's
    algorithm over the reachable sub-graph keeps every card after the cards that reference
    it, and among the cards ready at each step takes the highest priority first, then the
    higher importance (§5), then the order of discovery (breadth-first, references in file
    order) — so ties are stable. Global docs not otherwise reached follow, priority 10,
    ordered by importance then as given.

    Raises:
        CycleDetected: the references reachable from ``root`` contain a cycle.
    """
    cycle = find_cycle(graph.succ, [root])
    if cycle is not None:
        raise CycleDetected(cycle)
    score = importance or (lambda _card: 0.0)
    depth: dict[str, int] = {root: 0}
    discovery: list[str] = [root]
    for node in discovery:  # breadth-first; the list grows while we walk it
        for child in graph.succ[node]:
            if child not in depth:
                depth[child] = depth[node] + 1
                discovery.append(child)
    rank = {node: index for index, node in enumerate(discovery)}
    indegree = {node: 0 for node in discovery}
    for node in discovery:
        for child in graph.succ[node]:
            indegree[child] += 1

    def priority(node: str) -> int:
        level = depth[node]
        return PRIORITY_ACTIVE if level == 0 else PRIORITY_DIRECT if level == 1 \
            else PRIORITY_INDIRECT

    ready: list[tuple[int, float, int, str]] = [(-PRIORITY_ACTIVE, -score(root), 0, root)]
    order: list[OrderedCard] = []
    while ready:
        neg_priority, neg_importance, _, node = heapq.heappop(ready)
        order.append(OrderedCard(node, -neg_priority, depth[node], -neg_importance))
        for child in graph.succ[node]:
            indegree[child] -= 1
            if indegree[child] == 0:
                heapq.heappush(ready, (-priority(child), -score(child), rank[child], child))
    extra = [card for card in global_ids if card not in depth]
    position = {card: index for index, card in enumerate(extra)}
    extra.sort(key=lambda card: (-score(card), position[card]))
    order.extend(OrderedCard(card, PRIORITY_GLOBAL, -1, score(card)) for card in extra)
    return order


class TaskGraph:
    """Task dependencies (seed 003 §8): ``A -> B`` means task A depends on task B.

    Args:
        edges: ``(task, dependency)`` pairs.
        tasks: Every task id, including those without dependencies.
    """

    def __init__(self, tasks: Iterable[str] = (), edges: Iterable[tuple[str, str]] = ()) -> None:
        self.graph: nx.DiGraph = nx.DiGraph()
        self.graph.add_nodes_from(tasks)
        self.graph.add_edges_from(edges)

    def __contains__(self, task: object) -> bool:
        return task in self.graph

    def dependencies(self, task: str) -> list[str]:
        """Tasks ``task`` depends on directly (§8.3 forward), in declaration order."""
        return list(self.graph.succ[task])

    def dependents(self, task: str) -> list[str]:
        """Tasks that depend on ``task`` directly (§8.3 reverse), sorted."""
        return sorted(self.graph.pred[task])

    def all_dependencies(self, task: str) -> set[str]:
        """Every task ``task`` depends on, directly or not."""
        return set(nx.descendants(self.graph, task))

    def all_dependents(self, task: str) -> set[str]:
        """Every task that depends on ``task``, directly or not."""
        return set(nx.ancestors(self.graph, task))

    def cycle_with(self, task: str, dependency: str) -> list[str] | None:
        """The cycle that ``task -> dependency`` would close, as a path, or None (§8.2)."""
        if task == dependency:
            return [task, task]
        if task not in self.graph or dependency not in self.graph:
            return None
        try:
            back = nx.shortest_path(self.graph, dependency, task)
        except nx.NetworkXNoPath:
            return None
        return [task, *back]

    def add_dependency(self, task: str, dependency: str) -> None:
        """Add ``task -> dependency`` unless it closes a cycle.

        Raises:
            CycleDetected: the edge would close a cycle; the graph is unchanged.
        """
        cycle = self.cycle_with(task, dependency)
        if cycle is not None:
            raise CycleDetected(cycle)
        self.graph.add_edge(task, dependency)

    def find_cycle(self) -> list[str] | None:
        """One dependency cycle as a path, or None (§8.4 validate graph)."""
        return find_cycle(self.graph.succ)

    def all_cycles(self, limit: int = 20) -> list[list[str]]:
        """Up to ``limit`` elementary cycles, each as a path with its first node repeated."""
        cycles: list[list[str]] = []
        for cycle in nx.simple_cycles(self.graph):
            start = cycle.index(min(cycle))  # rotate to a canonical start for stable output
            rotated = cycle[start:] + cycle[:start]
            cycles.append([*rotated, rotated[0]])
            if len(cycles) >= limit:
                break
        return sorted(cycles)

    def generations(self) -> list[list[str]]:
        """Layers for a layered layout: tasks without dependencies first.

        Raises:
            CycleDetected: the graph has a cycle (there is no layering then).
        """
        cycle = self.find_cycle()
        if cycle is not None:
            raise CycleDetected(cycle)
        layers = nx.topological_generations(self.graph.reverse(copy=False))
        return [sorted(layer) for layer in layers]
