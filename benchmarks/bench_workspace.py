"""Benchmark task workspaces on a generated 500-card workspace (seed 003 §6 figures).

Measures, each repeated and reported as median / p95 / p99 in milliseconds:

* cold parse: a new :class:`Workspace` with an empty card cache loads every file (read, hash,
  front matter, references) and builds both graphs. The OS file cache is warm (as for any
  repeated measurement); "cold" means no parse result is reused;
* incremental update of one file: one card's content changes, ``update_paths([path])``
  (what the watcher drives) and ``refresh()`` (stat every file, re-parse the changed one);
* scene generation: ``build_scene`` for a task whose references reach ~1/3 of the workspace,
  budget 32K tokens, masking on (markdown-it section parses warm in the cache, as after the
  first scene);
* cycle detection: DFS over the whole reference DAG and the task graph (acyclic, so every node
  and edge is visited: the worst case);
* secret masking of 32 KB of card text with the default patterns (EMAIL, UUID, NUMSEQ16, CARD,
  SSN, PHONE, IBAN and every secret rule; the seed's figure is for 4 patterns);
* an in-run baseline: reading the 500 files' bytes, to show how much of the parse is I/O.

Usage: ``python benchmarks/bench_workspace.py [--cards 500] [--repeat 30]``
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.redaction import Redactor
from engine.tasks.cache import CardCache
from engine.tasks.graph import find_cycle
from engine.tasks.scene import build_scene
from engine.tasks.workspace import Workspace

RUST_MS = {"cold parse": 87.0, "incremental (update_paths)": 2.3, "incremental (refresh)": 2.3,
           "scene generation": 41.0, "cycle detection": 6.1, "secret masking (32 KB)": 0.4}
GOAL_MS = {"cold parse": 90.0, "incremental (update_paths)": 2.3, "incremental (refresh)": 2.3,
           "scene generation": 41.0, "cycle detection": 6.1, "secret masking (32 KB)": 1.0}

WORDS = ("request", "token", "session", "user", "cache", "index", "query", "schema", "migration",
         "endpoint", "handler", "retry", "backoff", "queue", "worker", "config", "deploy",
         "metric", "alert", "log", "trace", "span", "field", "record", "payload", "client",
         "server", "timeout", "limit", "budget", "graph", "node", "edge", "parse", "render",
         "build")


def _para(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def generate(root: Path, cards: int, seed: int = 7) -> list[str]:
    """Write ``cards`` cards (1/5 tasks, the rest docs) forming a DAG; return their ids."""
    rng = random.Random(seed)
    ids: list[str] = []
    refs: list[str] = []  # @-names
    for index in range(cards):
        is_task = index % 5 == 0
        area = f"area{index % 12}"
        if is_task:
            card_id = f"T-{index:04d}"
            rel = f"tasks/{area}/t{index:04d}.md"
        else:
            card_id = f"docs/{area}/doc{index:04d}"
            rel = f"{card_id}.md"
        lines: list[str] = []
        if is_task:
            earlier = [i for i in ids if i.startswith("T-")]
            deps = rng.sample(earlier, min(len(earlier), 3))
            lines += ["---", f"id: {card_id}", f"title: Task {index} {rng.choice(WORDS)}",
                      f"status: {rng.choice(['todo', 'in_progress', 'done', 'blocked'])}",
                      f"priority: {rng.choice(['high', 'medium', 'low'])}",
                      f"depends_on: [{', '.join(deps)}]", "---"]
        elif index % 3 == 0:
            lines += ["---", f"title: Doc {index}", "tags: [design, notes]", "---"]
        lines.append(f"# {'Task' if is_task else 'Doc'} {index}")
        lines.append(_para(rng, 40))
        targets = rng.sample(refs, min(len(refs), 4)) if refs else []
        for section in range(3):
            lines += ["", f"## Part {section}", _para(rng, 30)]
            if targets and section < len(targets):
                anchor = "#Part-1" if rng.random() < 0.3 else ""
                lines.append(f"See @{targets[section]}{anchor} for details.")
            lines += ["", f"### Detail {section}", _para(rng, 25)]
            if section == 1:
                lines += ["", "```python", f"def handler_{index}(request):",
                          "    # Handle one request.", "    value = request.payload",
                          "    return render(value)", "```"]
        if index == 137:
            lines.append("Deploy key: AKIAIOSFODNN7EXAMPL3 and ops@example.com")
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        ids.append(card_id)
        refs.append(card_id)
    return ids


def measure(fn: Callable[[], object], repeat: int, setup: Callable[[], object] | None = None
            ) -> list[float]:
    times: list[float] = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000.0)
    return times


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cards", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        ids = generate(root, args.cards)
        files = sorted(root.rglob("*.md"))
        total_bytes = sum(f.stat().st_size for f in files)
        results: dict[str, list[float]] = {}
        results["baseline: read bytes"] = measure(
            lambda: [f.read_bytes() for f in files], args.repeat)
        results["cold parse"] = measure(
            lambda: Workspace(root, cache=CardCache()).load(), args.repeat)
        workspace = Workspace(root)
        workspace.load()
        assert not workspace.problems(), workspace.problems()[:3]
        target = workspace.cards[ids[250]].path
        counter = [0]

        def touch() -> None:
            counter[0] += 1
            full = root / target
            text = full.read_text(encoding="utf-8").rstrip("\n").rsplit("\n", 1)[0]
            full.write_text(f"{text}\nEdit number {counter[0]}.\n", encoding="utf-8")

        results["incremental (update_paths)"] = measure(
            lambda: workspace.update_paths([target]), args.repeat, touch)
        results["incremental (refresh)"] = measure(workspace.refresh, args.repeat, touch)
        active = next(i for i in reversed(ids) if i.startswith("T-"))
        build_scene(workspace, active)  # warm the section cache once, as after a first scene
        results["scene generation"] = measure(lambda: build_scene(workspace, active), args.repeat)

        def cycles() -> None:
            find_cycle(workspace.reference_graph.succ)
            workspace.task_graph.find_cycle()

        results["cycle detection"] = measure(cycles, args.repeat)
        sample = "".join(workspace.cards[i].body for i in ids[100:200])[:32 * 1024]
        redactor = Redactor()
        results["secret masking (32 KB)"] = measure(lambda: redactor.redact(sample), args.repeat)
        scene = build_scene(workspace, active)
        base = statistics.median(results["baseline: read bytes"])
        print(f"workspace: {len(files)} cards, {total_bytes / 1024:.0f} KiB, "
              f"{workspace.reference_graph.number_of_edges()} reference edges, "
              f"{workspace.task_graph.graph.number_of_edges()} dependency edges")
        print(f"scene for {active}: {len(scene.included)} cards in, {len(scene.pruned)} pruned, "
              f"{scene.used_tokens} tokens, truncated={scene.truncated}, masked={scene.masked}")
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"load average (1 min) at the end: {load:.1f} on {os.cpu_count()} CPUs; 'min' is "
              "the least disturbed run, 'met' compares the median with the goal")
        header = (f"{'operation':30} {'min':>7} {'median':>8} {'p95':>8} {'p99':>8} {'x base':>7} "
                  f"{'Rust':>6} {'goal':>6}  met")
        print(header)
        print("-" * len(header))
        for name, values in results.items():
            median = statistics.median(values)
            rust = RUST_MS.get(name)
            goal = GOAL_MS.get(name)
            met = "" if goal is None else ("yes" if median <= goal else "NO")
            print(f"{name:30} {min(values):7.2f} {median:8.2f} {pct(values, 0.95):8.2f} "
                  f"{pct(values, 0.99):8.2f} "
                  f"{median / base:7.1f} {rust if rust else '':>6} {goal if goal else '':>6}  "
                  f"{met}")


if __name__ == "__main__":
    main()
