"""The long kill -9 trials (``scripts/reliability``): several trials of a 10K-record ingest.

    python -m tests.reliability.long_trials [--trials 5] [--records 10000] [--seed N] [--json]

Prints one line per trial and a summary; exits 1 if any trial broke a hard invariant.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from tests.reliability.kill_trials import run_trial


def main(argv: list[str] | None = None) -> int:
    """Run the trials and report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    workdir = Path(tempfile.mkdtemp(prefix="mnemoscope-kill-"))
    results = []
    began = time.monotonic()
    try:
        for trial in range(args.trials):
            started = time.monotonic()
            result = run_trial(workdir / f"trial{trial}", args.records, rng, batch=args.batch)
            results.append(result)
            if not args.json:
                print(f"trial {trial}: killed after {result.killed_after_s:.1f} s, "
                      f"acked {result.acked}, stored {result.stored_after_kill}, "
                      f"missing {result.missing}, duplicates {result.duplicates}, "
                      f"bad vectors {result.bad_vectors}, orphan edits {result.orphan_edits}, "
                      f"acked w/o history {result.acked_without_history}, history gaps "
                      f"{result.history_gaps}, after re-run {result.rerun_count}, second "
                      f"re-run inserted {result.second_rerun_inserted}, errors "
                      f"{result.errors or 'none'} ({time.monotonic() - started:.0f} s) "
                      f"{'OK' if result.ok else 'FAILED'}", flush=True)
            shutil.rmtree(workdir / f"trial{trial}", ignore_errors=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    passed = sum(r.ok for r in results)
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"trials": args.trials, "records": args.records, "seed": args.seed,
                          "passed": passed, "minutes": (time.monotonic() - began) / 60,
                          "load": load, "results": [asdict(r) for r in results]}, indent=2))
    else:
        print(f"{passed}/{args.trials} trials passed ({args.records} records each, seed "
              f"{args.seed}, {(time.monotonic() - began) / 60:.1f} min, load {load:.1f})")
    return 0 if passed == args.trials else 1


if __name__ == "__main__":
    sys.exit(main())
