"""int8 (per-row scale) or float16 for the view's compact vectors: bytes, agreement, speed.

On generated unit vectors around 200 topics (the ``--candidates`` workload of
``bench_retrieval.py``) and queries near a record, for each codec: bytes per row, the top-5
agreement of a ranking by the codec's cosine with the exact float32 ranking (the share of the
exact top 5 the codec also ranks top 5), the largest cosine error, and the CPU time
(``time.thread_time``, median) of one pass computing every row's cosine — beside the float32
einsum of the same rows in the same run. For int8 it also reports how many rows
:func:`engine.retrieval.dense.shortlist` keeps of 20,000 probed rows for the 512 best (the
rows whose exact vectors are then read).

    python benchmarks/bench_vector_codecs.py [--n 100000] [--queries 50]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

if __name__ == "__main__":
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.retrieval.dense import approximate_cosines, rounding_bound, shortlist
from engine.store.view import quantize

F32 = npt.NDArray[np.float32]


def cpu_ms(run: Callable[[], object], repeat: int = 7) -> float:
    """Median CPU milliseconds of ``run``."""
    times = []
    for _ in range(repeat):
        began = time.thread_time()
        run()
        times.append((time.thread_time() - began) * 1000.0)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)
    options = parser.parse_args()
    n = options.n
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((200, 384)).astype(np.float32)
    vectors: F32 = centres[rng.integers(0, 200, n)]
    vectors += 0.9 * rng.standard_normal((n, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    codes, scales = quantize(vectors)
    half = vectors.astype(np.float16)
    rows = np.arange(n, dtype=np.intp)
    queries = vectors[rng.integers(0, n, options.queries)]
    queries = queries + 0.03 * rng.standard_normal(queries.shape).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)

    agreement: dict[str, list[float]] = {"int8": [], "float16": []}
    error: dict[str, float] = {"int8": 0.0, "float16": 0.0}
    kept: list[int] = []
    for query in queries:
        exact = np.einsum("ij,j->i", vectors, query)
        top = set(np.argsort(-exact, kind="stable")[:5].tolist())
        approximations = {
            "int8": approximate_cosines(codes, scales, rows, query),
            "float16": np.einsum("ij,j->i", half, query.astype(np.float16), dtype=np.float32),
        }
        for name, approximate in approximations.items():
            found = set(np.argsort(-approximate, kind="stable")[:5].tolist())
            agreement[name].append(len(found & top) / 5)
            error[name] = max(error[name], float(np.abs(approximate - exact).max()))
        probed = np.sort(rng.choice(n, size=min(n, 20_000), replace=False))
        kept.append(len(shortlist(probed, approximations["int8"][probed],
                                  rounding_bound(scales, probed, query), 512)))

    query = queries[0]
    times = {
        "float32": cpu_ms(lambda: np.einsum("ij,j->i", vectors, query)),
        "int8": cpu_ms(lambda: approximate_cosines(codes, scales, rows, query)),
        "float16": cpu_ms(lambda: np.einsum("ij,j->i", half, query.astype(np.float16),
                                            dtype=np.float32)),
    }
    load = os.getloadavg()[0]
    print(f"{n} rows × 384, {options.queries} queries near a record, load {load:.1f}")
    print(f"{'codec':>8} | {'B/row':>6} {'MiB':>7} | {'top-5 agree':>11} {'max error':>9} | "
          f"{'cpu ms/pass':>11} {'× f32':>6}")
    for name, size in (("float32", 384 * 4), ("int8", 384 + 4), ("float16", 384 * 2)):
        agree = float(np.mean(agreement[name])) if name in agreement else 1.0
        print(f"{name:>8} | {size:>6} {size * n / 2**20:>7.1f} | {agree:>11.3f} "
              f"{error.get(name, 0.0):>9.5f} | {times[name]:>11.2f} "
              f"{times[name] / times['float32']:>6.2f}")
    print(f"int8 shortlist of 20,000 probed rows for the 512 best: median {np.median(kept):.0f} "
          f"rows kept (max {max(kept)})")


if __name__ == "__main__":
    main()
