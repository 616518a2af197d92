"""Redaction on ordinary text: false positives per kind, and the cost per text.

Runs the default :class:`~engine.redaction.Redactor` over texts that hold no secret and no
personal number — the LoCoMo conversations (turns of the dev and held-out splits, and the
observations) — and over the demo data set (``assets/``), which plants a few on purpose. For
each corpus it prints how many texts got a finding and the findings per kind; every finding on
LoCoMo is a false positive. ``--show`` prints each finding with its context for review.

It also times ``Redactor.findings`` per text on the LoCoMo dev turns: the default patterns and
seed 002's original set (EMAIL, UUID, NUMSEQ16, SECRETS) in alternating runs, so the cost of
the number and password detectors reads from one table.

Usage: ``python benchmarks/bench_redaction.py [--locomo PATH] [--repeat 7] [--show]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.locomo import locomo_memories, split_of  # noqa: E402
from engine.redaction import Redactor  # noqa: E402

LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
SEED_002_PATTERNS = ("EMAIL", "UUID", "NUMSEQ16", "SECRETS")


def locomo_corpora(path: Path) -> dict[str, list[str]]:
    """LoCoMo texts as the engine stores them: turns by split, and all observations."""
    samples = json.loads(path.read_text(encoding="utf-8"))
    corpora: dict[str, list[str]] = {"LoCoMo dev turns": [], "LoCoMo held-out turns": [],
                                     "LoCoMo observations": []}
    for index, sample in enumerate(samples):
        turns = [memory.content for memory in locomo_memories(sample, "turns")]
        corpora[f"LoCoMo {split_of(index)} turns"].extend(turns)
        corpora["LoCoMo observations"].extend(
            memory.content for memory in locomo_memories(sample, "observations"))
    return corpora


def demo_corpora(root: Path = ROOT) -> dict[str, list[str]]:
    """The demo data set: memories, the conversation, and the task workspace's cards."""
    demo = root / "assets" / "demo"
    memories = [json.loads(line)["content"]
                for line in (demo / "memories.jsonl").read_text(encoding="utf-8").splitlines()
                if line.strip()]
    turns = [turn["content"] for turn in
             json.loads((demo / "conversation.json").read_text(encoding="utf-8"))]
    cards = [card.read_text(encoding="utf-8")
             for card in sorted((root / "assets" / "demo_workspace").rglob("*.md"))]
    return {"demo memories": memories, "demo conversation": turns, "demo workspace cards": cards}


def findings_per_kind(redactor: Redactor, texts: Sequence[str]) -> tuple[int, Counter[str]]:
    """(texts with at least one finding, findings per kind) of ``redactor`` over ``texts``."""
    flagged = 0
    kinds: Counter[str] = Counter()
    for text in texts:
        found = redactor.findings(text)
        flagged += bool(found)
        kinds.update(item.kind for item in found)
    return flagged, kinds


def _time_per_text(redactor: Redactor, texts: Sequence[str]) -> float:
    started = time.perf_counter()
    for text in texts:
        redactor.findings(text)
    return (time.perf_counter() - started) / len(texts) * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--show", action="store_true", help="print every finding")
    args = parser.parse_args(argv)
    redactor = Redactor()
    corpora = {**locomo_corpora(args.locomo), **demo_corpora()}
    print(f"patterns: {', '.join(redactor.patterns)}")
    print(f"{'corpus':24} {'texts':>6} {'flagged':>8} {'rate':>7}  findings per kind")
    for name, texts in corpora.items():
        flagged, kinds = findings_per_kind(redactor, texts)
        per_kind = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items())) or "-"
        print(f"{name:24} {len(texts):6d} {flagged:8d} {flagged / len(texts):7.2%}  {per_kind}")
        if args.show:
            for text in texts:
                for item in redactor.findings(text):
                    context = text[max(0, item.start - 40):item.end + 20].replace("\n", " ")
                    print(f"    {item.kind:10} {text[item.start:item.end]!r} in …{context}…")
    dev = corpora["LoCoMo dev turns"]
    seed = Redactor(SEED_002_PATTERNS)
    runs: dict[str, list[float]] = {"default patterns": [], "seed 002 set": []}
    for _ in range(args.repeat):
        runs["default patterns"].append(_time_per_text(redactor, dev))
        runs["seed 002 set"].append(_time_per_text(seed, dev))
    print(f"\nfindings() per LoCoMo dev turn ({len(dev)} turns, "
          f"{sum(map(len, dev)) / len(dev):.0f} characters on average), {args.repeat} runs:")
    for name, values in runs.items():
        print(f"  {name:18} min {min(values):6.2f} µs   median {statistics.median(values):6.2f} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
