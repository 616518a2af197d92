"""Cycle detection with paths (seed 003 §1.1, §8.2) and the priority order (§1.2)."""

from __future__ import annotations

from itertools import pairwise

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import CycleDetected
from engine.tasks.graph import TaskGraph, find_cycle, priority_order


def graph(edges: list[tuple[str, str]], nodes: list[str] | None = None) -> nx.DiGraph:
    g: nx.DiGraph = nx.DiGraph()
    g.add_nodes_from(nodes or [])
    g.add_edges_from(edges)
    return g


@pytest.mark.parametrize(
    ("edges", "path"),
    [
        ([("A", "A")], ["A", "A"]),
        ([("A", "B"), ("B", "A")], ["A", "B", "A"]),
        ([("A", "B"), ("B", "C"), ("C", "D"), ("D", "E"), ("E", "A")],
         ["A", "B", "C", "D", "E", "A"]),
        # A tail before the cycle is not part of the path.
        ([("S", "A"), ("A", "B"), ("B", "C"), ("C", "A")], ["A", "B", "C", "A"]),
    ],
)
def test_find_cycle_reports_the_whole_path(edges: list[tuple[str, str]], path: list[str]) -> None:
    assert find_cycle(graph(edges).succ) == path
    assert str(CycleDetected(path)) == "error 1002: cycle detected: " + " -> ".join(path)


def test_acyclic_and_deep_graphs() -> None:
    chain = [(f"n{i}", f"n{i + 1}") for i in range(5000)]  # deeper than the recursion limit
    assert find_cycle(graph(chain).succ) is None
    assert find_cycle(graph([*chain, ("n5000", "n10")]).succ) == [
        *(f"n{i}" for i in range(10, 5001)), "n10"]


def test_priority_levels_and_kahn_order() -> None:
    # root -> a, b (depth 1); a -> c (depth 2); c -> d (depth 3); b -> d (d stays depth 2).
    g = graph([("root", "a"), ("root", "b"), ("a", "c"), ("b", "d"), ("c", "d")],
              ["root", "a", "b", "c", "d", "g1", "g2", "x"])
    order = priority_order(g, "root", ["g2", "g1"])
    assert [(o.id, o.priority, o.depth) for o in order] == [
        ("root", 100, 0), ("a", 50, 1), ("b", 50, 1), ("c", 25, 2), ("d", 25, 2),
        ("g2", 10, -1), ("g1", 10, -1)]


def test_higher_priority_first_among_ready_cards() -> None:
    # A direct reference (b) that an indirect one (x) also references waits for it (Kahn);
    # without that edge, b (50) goes before x (25).
    g = graph([("root", "a"), ("a", "x"), ("root", "b"), ("x", "b")])
    assert [o.id for o in priority_order(g, "root")] == ["root", "a", "x", "b"]
    g2 = graph([("root", "a"), ("a", "x"), ("root", "b")])
    assert [o.id for o in priority_order(g2, "root")] == ["root", "a", "b", "x"]


def test_ties_are_stable_and_importance_breaks_them() -> None:
    g = graph([("r", "c3"), ("r", "c1"), ("r", "c2")])
    assert [o.id for o in priority_order(g, "r")] == ["r", "c3", "c1", "c2"]
    weights = {"r": 0.0, "c1": 0.2, "c2": 0.9, "c3": 0.2}
    assert [o.id for o in priority_order(g, "r", importance=weights.__getitem__)] == [
        "r", "c2", "c3", "c1"]


def test_priority_order_refuses_a_reachable_cycle() -> None:
    g = graph([("r", "a"), ("a", "b"), ("b", "a")], ["other"])
    with pytest.raises(CycleDetected) as info:
        priority_order(g, "r")
    assert info.value.path == ["a", "b", "a"]


def test_task_graph_queries_and_add_dependency() -> None:
    tasks = TaskGraph(["A", "B", "C", "D"], [("B", "A"), ("C", "A"), ("D", "B"), ("D", "C")])
    assert tasks.dependencies("D") == ["B", "C"]
    assert tasks.dependents("A") == ["B", "C"]
    assert tasks.all_dependencies("D") == {"A", "B", "C"}
    assert tasks.all_dependents("A") == {"B", "C", "D"}
    assert tasks.generations() == [["A"], ["B", "C"], ["D"]]
    with pytest.raises(CycleDetected) as info:
        tasks.add_dependency("A", "D")
    assert str(info.value) == "error 1002: cycle detected: A -> D -> B -> A"
    assert ("A", "D") not in tasks.graph.edges
    with pytest.raises(CycleDetected, match="A -> A"):
        tasks.add_dependency("A", "A")
    tasks.add_dependency("A", "E")
    assert tasks.dependencies("A") == ["E"]
    assert tasks.find_cycle() is None


def test_task_graph_lists_cycles_canonically() -> None:
    tasks = TaskGraph(edges=[("B", "C"), ("C", "B"), ("X", "Y"), ("Y", "Z"), ("Z", "X")])
    assert tasks.all_cycles() == [["B", "C", "B"], ["X", "Y", "Z", "X"]]
    with pytest.raises(CycleDetected):
        tasks.generations()


@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=20))
@settings(max_examples=100, deadline=None)
def test_find_cycle_agrees_with_networkx(pairs: list[tuple[int, int]]) -> None:
    g = graph([(f"n{a}", f"n{b}") for a, b in pairs], [f"n{i}" for i in range(8)])
    path = find_cycle(g.succ)
    assert (path is None) == nx.is_directed_acyclic_graph(g)
    if path is not None:
        assert path[0] == path[-1]
        assert len(set(path[:-1])) == len(path) - 1  # an elementary cycle
        assert all(g.has_edge(a, b) for a, b in pairwise(path))
