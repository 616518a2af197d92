"""Ingest throughput with the real model, as a ratio to the raw model's encode rate.

The same texts (LoCoMo dialogue turns) are encoded raw and ingested through
``MemoryEngine.ingest_batch`` into a fresh embedded store (embedding, dedup decision, merge
rules, Chroma writes, edit history, review items, events). Two raw baselines, both
``encode_raw`` (no cache, no hashing, no pipeline, the same encode batch size):

* ``raw`` — the model as shipped: sentence-transformers on torch. DESIGN's baseline ("the raw
  model's encode rate"); the target's ratio is ingest against this.
* ``raw_backend`` — the same model on the backend the engine runs it on (OpenVINO by default,
  ``engine/embedding_openvino.py``): ingest against this is what the pipeline itself costs.
  Absent when the engine runs torch.

One model serves every run; its content-hash cache is cleared before each ingest so nothing is
served from an earlier run. Runs alternate — raw, raw_backend, each ingest variant, raw,
raw_backend, ... — and each ingest run is compared with the mean of the two runs of each
baseline around it, so drift on a shared machine cancels; the figures are medians over the
rounds. Wall rate (texts/s) and CPU rate (texts per CPU second, every thread of the process)
are both reported, with the load average: on a busy machine the wall ratio mostly measures who
got a core when, the CPU ratio what the pipeline costs.

Variants: ``ingest`` (defaults: the next chunk is encoded while this one is decided and
written), ``serial`` (``overlap_encode`` off), ``sampling0`` (event sampling 0).

Usage: ``python benchmarks/bench_ingest.py [--turns 2000] [--rounds 3]
[--variants ingest,serial] [--backend openvino|openvino-f32|torch] [--data PATH] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.embedding import EmbedBackend, SentenceTransformerEmbedder
from engine.ingest.policy import IngestPolicy
from engine.memory_engine import EngineConfig, MemoryEngine
from engine.records import Category, Layer, NewMemory, TrustTier
from engine.store import StoreSpec

_DATA = Path("shared/data/locomo/locomo_dev.json")  # ../shared beside the checkout
DEFAULT_DATA = next((p / _DATA for p in Path(__file__).resolve().parents if (p / _DATA).is_file()),
                    _DATA)
VARIANTS = {"ingest": (1.0, True), "serial": (1.0, False), "sampling0": (0.0, True)}


@dataclass(frozen=True)
class Timing:
    """One run: texts per wall second and per CPU second, and the 1-minute load average."""

    wall_rate: float
    cpu_rate: float
    load: float


def load_turns(path: Path, limit: int) -> list[tuple[str, str]]:
    """(agent, "speaker: text") for the first ``limit`` turns of the LoCoMo conversations."""
    turns: list[tuple[str, str]] = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conversation = sample["conversation"]
        sessions = sorted((k for k in conversation if k.startswith("session_")
                           and not k.endswith("date_time")),
                          key=lambda k: int(k.split("_")[1]))
        for key in sessions:
            for turn in conversation[key]:
                turns.append((sample["sample_id"], f"{turn['speaker']}: {turn['text']}"))
                if len(turns) >= limit:
                    return turns
    return turns


def model(backend: EmbedBackend = EmbedBackend.OPENVINO) -> SentenceTransformerEmbedder:
    """The packaged model, loaded (on ``backend``, converted in memory) and warmed up."""
    embedder = SentenceTransformerEmbedder(backend=backend)
    embedder.start_loading()
    if not embedder.wait_ready(600):
        raise SystemExit(f"model not available: {embedder.status().reason}")
    embedder.encode_raw(["warm up"] * 64)
    embedder.encode_raw(["warm up"] * 64, torch=True)
    return embedder


def timed(count: int, work: Callable[[], object]) -> Timing:
    """Run ``work`` and rate ``count`` texts by wall and process CPU time."""
    cpu, wall = time.process_time(), time.perf_counter()
    work()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return Timing(count / wall, count / cpu, os.getloadavg()[0])


def raw_run(embedder: SentenceTransformerEmbedder, texts: list[str], *,
            torch: bool) -> Timing:
    """The raw model on ``texts``: on torch, or on the engine's backend."""
    return timed(len(texts), lambda: embedder.encode_raw(texts, torch=torch))


def ingest_run(embedder: SentenceTransformerEmbedder, turns: list[tuple[str, str]],
               variant: str) -> tuple[Timing, dict[str, int]]:
    """``ingest_batch`` of ``turns`` into a fresh store (opening it is not timed)."""
    sampling, overlap = VARIANTS[variant]
    directory = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    engine = MemoryEngine.open(StoreSpec(str(directory / "store")), embedder=embedder,
                               config=EngineConfig(sampling_rate=sampling))
    engine.set_ingest_policy(IngestPolicy(overlap_encode=overlap))
    items = [NewMemory(text, agent_id=agent, layer=Layer.EPISODIC, category=Category.EPISODE,
                       source="locomo", source_tier=TrustTier.AGENT) for agent, text in turns]
    embedder.cache.clear()
    counts: dict[str, int] = {}
    try:
        timing = timed(len(items), lambda: counts.update(engine.ingest_batch(items).counts))
    finally:
        engine.close()
        shutil.rmtree(directory, ignore_errors=True)
    return timing, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default="ingest,serial",
                        help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--backend", choices=list(EmbedBackend),
                        default=EmbedBackend.OPENVINO.value, help="what runs the model")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    report = measure(load_turns(args.data, args.turns), rounds=args.rounds, variants=variants,
                     embedder=model(EmbedBackend(args.backend)))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)


def measure(turns: list[tuple[str, str]], *, rounds: int = 3,
            variants: Sequence[str] = ("ingest",),
            embedder: SentenceTransformerEmbedder | None = None) -> dict[str, Any]:
    """Alternate raw and ingest runs (see the module docstring) and summarize them: ``{"texts",
    "decisions", "backend", "model_threads", "raw": {...}, "raw_backend": {...} (when not
    torch), variant: {"wall_rate", "cpu_rate", "wall_ratio", "cpu_ratio", "wall_ratios",
    "backend_ratio", "backend_cpu_ratio", "load"}}`` (rates in texts/s, ratios as medians over
    the rounds; ``wall_ratio`` against torch, ``backend_ratio`` against the engine's backend).
    ``embedder``: a loaded model to use instead of loading one."""
    texts = [text for _, text in turns]
    embedder = embedder or model()
    backend = embedder.status().backend
    baselines = {"raw": True} if backend.startswith("torch") else {"raw": True,
                                                                    "raw_backend": False}
    raws: dict[str, list[Timing]] = {name: [raw_run(embedder, texts, torch=torch)]
                                     for name, torch in baselines.items()}
    runs: dict[str, list[Timing]] = {v: [] for v in variants}
    counts: dict[str, int] = {}
    for _ in range(rounds):
        for variant in variants:
            timing, counts = ingest_run(embedder, turns, variant)
            runs[variant].append(timing)
        for name, torch in baselines.items():
            raws[name].append(raw_run(embedder, texts, torch=torch))
    report = summarize(len(texts), counts, raws, runs)
    report["backend"] = backend
    report["model_threads"] = model_threads()
    return report


def model_threads() -> int:
    """Torch's intra-op threads (the raw rate depends on it: an inherited OMP_NUM_THREADS=1
    leaves the second core to the pipeline and flatters the ratio)."""
    import torch  # loaded by the model already

    return int(torch.get_num_threads())


def summarize(count: int, counts: dict[str, int], raws: dict[str, list[Timing]],
              runs: dict[str, list[Timing]]) -> dict[str, Any]:
    """Medians over rounds of each variant's rates and its ratios to the raw runs around it
    (``raws[name][i]`` and ``raws[name][i + 1]`` surround ``runs[variant][i]``)."""
    def median(values: list[float]) -> float:
        return round(statistics.median(values), 3)

    def ratios(timings: list[Timing], baseline: list[Timing], rate: str) -> list[float]:
        return [round(getattr(t, rate) / statistics.mean([getattr(a, rate), getattr(b, rate)]),
                      3) for t, a, b in zip(timings, baseline, baseline[1:], strict=False)]

    report: dict[str, Any] = {"texts": count, "decisions": {k: v for k, v in counts.items() if v}}
    for name, timings in raws.items():
        report[name] = {"wall_rate": median([r.wall_rate for r in timings]),
                        "cpu_rate": median([r.cpu_rate for r in timings]),
                        "load": [round(r.load, 2) for r in timings]}
    for variant, timings in runs.items():
        row = report[variant] = {
            "wall_rate": median([t.wall_rate for t in timings]),
            "cpu_rate": median([t.cpu_rate for t in timings]),
            "wall_ratios": ratios(timings, raws["raw"], "wall_rate"),
            "load": [round(t.load, 2) for t in timings],
        }
        row["wall_ratio"] = median(row["wall_ratios"])
        row["cpu_ratio"] = median(ratios(timings, raws["raw"], "cpu_rate"))
        if "raw_backend" in raws:
            row["backend_ratios"] = ratios(timings, raws["raw_backend"], "wall_rate")
            row["backend_ratio"] = median(row["backend_ratios"])
            row["backend_cpu_ratio"] = median(ratios(timings, raws["raw_backend"], "cpu_rate"))
    return report


def print_report(report: dict[str, Any]) -> None:
    """The figures as a table."""
    decisions = report["decisions"]
    print(f"{report['texts']} LoCoMo turns; engine backend {report['backend']}; torch threads "
          f"{report['model_threads']} of {os.cpu_count()} CPUs; decisions: "
          + ", ".join(f"{k} {v}" for k, v in decisions.items()))
    print("ratios: against raw (sentence-transformers on torch) and, after the slash, against "
          "raw_backend (the engine's backend)")
    print(f"{'run':<12}{'texts/s':>9}{'texts/CPU s':>13}{'wall ratio':>16}{'CPU ratio':>16}"
          "  per-round wall ratios; load")
    for name, row in report.items():
        if not isinstance(row, dict) or "wall_rate" not in row:
            continue
        wall = f"{row.get('wall_ratio', 1.0):.3f}" + (
            f" / {row['backend_ratio']:.3f}" if "backend_ratio" in row else "")
        cpu = f"{row.get('cpu_ratio', 1.0):.3f}" + (
            f" / {row['backend_cpu_ratio']:.3f}" if "backend_cpu_ratio" in row else "")
        ratios = row.get("wall_ratios", "")
        print(f"{name:<12}{row['wall_rate']:>9.1f}{row['cpu_rate']:>13.1f}{wall:>16}{cpu:>16}"
              f"  {ratios}; {row['load']}")


if __name__ == "__main__":
    main()
