"""The ingest benchmark measures the model as a user runs it: every core, both runs alike."""

from __future__ import annotations

import os
import subprocess
import sys

from engine.bench.suites import ROOT, load_script
from engine.embedding import SentenceTransformerEmbedder


def test_importing_the_retrieval_bench_leaves_the_thread_settings_alone() -> None:
    # `mnemoscope bench` imports bench_retrieval before the ingest suite loads torch; an
    # OMP_NUM_THREADS=1 set then gave the model one thread and flattered the ingest ratio.
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    code = ("import os; from engine.bench.suites import load_script; "
            "load_script('bench_retrieval'); "
            "print([v for v in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS') "
            "if v in os.environ])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert out.strip() == "[]"


def test_a_small_run_reports_rates_ratios_and_the_model_threads(
        real_embedder: SentenceTransformerEmbedder) -> None:
    import torch

    script = load_script("bench_ingest")
    assert script is not None
    turns = script.load_turns(script.DEFAULT_DATA, 24)
    assert len(turns) == 24 and all(":" in text for _, text in turns)
    report = script.measure(turns, rounds=1, embedder=real_embedder)
    assert report["texts"] == 24 and sum(report["decisions"].values()) == 24
    assert report["model_threads"] == torch.get_num_threads()
    assert report["raw"]["wall_rate"] > 0 and len(report["raw"]["load"]) == 2
    row = report["ingest"]
    assert row["wall_rate"] > 0 and row["cpu_rate"] > 0 and len(row["wall_ratios"]) == 1
    assert row["wall_ratio"] == row["wall_ratios"][0]
