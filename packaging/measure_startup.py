"""Start-up times of the frozen app: ``--version``, time to window shown, ``--self-test``,
model ready; with ``--texts``, its embedding rate against the source tree's.

    python packaging/measure_startup.py dist/mnemoscope/mnemoscope [--runs 5] [--cold] \
        [--texts TEXTS.txt]

Each measurement runs the executable in a fresh HOME with ``QT_QPA_PLATFORM=offscreen`` and
``HF_HUB_OFFLINE=1`` and times the whole process from outside (wall clock). "window shown" uses
the app's ``MNEMOSCOPE_BENCHMARK_STARTUP=exit`` hook (it prints ``window-shown <s>`` at first
paint and exits) on an empty temporary store. ``--cold`` first drops the kernel's page cache
(root only: ``/proc/sys/vm/drop_caches``) so the first run reads the bundle from disk; later runs
are warm. Prints a table of first run, median and p95 per measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["main", "measure"]


def _drop_caches() -> bool:
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n", encoding="ascii")
    except OSError:
        return False
    return True


def measure(exe: Path, args: list[str], extra_env: dict[str, str]) -> tuple[float, str]:
    """Run ``exe args`` once in a fresh HOME; return (wall seconds, stdout). Raises on failure."""
    with tempfile.TemporaryDirectory(prefix="mnemoscope-start-") as home:
        env = {"PATH": os.environ.get("PATH", ""), "HOME": home,
               "XDG_CONFIG_HOME": f"{home}/.config", "XDG_DATA_HOME": f"{home}/.local/share",
               "QT_QPA_PLATFORM": "offscreen", "HF_HUB_OFFLINE": "1", **extra_env}
        command = [str(exe), *(arg.replace("{home}", home) for arg in args)]
        started = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, env=env, check=False,
                                timeout=600)
        elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {result.returncode}:\n{result.stderr}")
    return elapsed, result.stdout


def main(argv: list[str] | None = None) -> int:
    """Print the start-up table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("exe", type=Path, help="the frozen executable")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cold", action="store_true", help="drop the page cache first (root)")
    parser.add_argument("--texts", type=Path, default=None,
                        help="a file of texts (one per line): also compare the frozen app's "
                             "embedding rate with the source tree's on them")
    parser.add_argument("--source-python", default=sys.executable,
                        help="the source tree's interpreter for --texts (default: this one)")
    args = parser.parse_args(argv)
    cases = [
        ("--version", ["--version"], {}),
        ("window shown (empty store)", ["--store", "{home}/store"],
         {"MNEMOSCOPE_BENCHMARK_STARTUP": "exit"}),
        ("--self-test", ["--self-test"], {}),
    ]
    print(f"| measurement | first run{' (cold)' if args.cold else ''} s | median s | p95 s | "
          f"in-app window-shown s |\n|---|---:|---:|---:|---:|")
    for name, case_args, env in cases:
        cold = args.cold and _drop_caches()
        times: list[float] = []
        shown: list[float] = []
        for _ in range(args.runs):
            elapsed, stdout = measure(args.exe, case_args, env)
            times.append(elapsed)
            for line in stdout.splitlines():
                if line.startswith("window-shown "):
                    shown.append(float(line.split()[1]))
        ordered = sorted(times)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        first = f"{times[0]:.2f}{'' if cold or not args.cold else ' (warm: no root)'}"
        inner = f"{statistics.median(shown):.2f}" if shown else "-"
        print(f"| {name} | {first} | {statistics.median(times):.2f} | {p95:.2f} | {inner} |")
    ready = [_model_ready(args.exe) for _ in range(args.runs)]
    print(f"\nmodel ready (in-process load, `doctor`): median {statistics.median(ready):.2f} s "
          f"of {', '.join(f'{r:.2f}' for r in ready)}")
    if args.texts is not None:
        _compare_rates(args.exe, args.source_python, args.texts.resolve(), args.runs)
    return 0


def _model_ready(exe: Path) -> float:
    """Seconds the frozen app took to load the model (``doctor``'s ``load_seconds``)."""
    _, stdout = measure(exe, ["--store", "{home}/store", "--json", "doctor"], {})
    model = json.loads(stdout)["model"]
    if model["state"] != "ready":
        raise RuntimeError(f"the frozen app's model is {model['state']}: {model['reason']}")
    return float(model["load_seconds"])


def _compare_rates(exe: Path, python: str, texts: Path, runs: int) -> None:
    """Frozen and source embedding rates on the same texts, alternating runs, and their ratio."""
    frozen: list[float] = []
    source: list[float] = []
    backends: set[str] = set()
    root = Path(__file__).resolve().parent.parent
    for _ in range(runs):
        for rates, command, cwd in (
                (frozen, [str(exe), "-m", "engine.bench.embed_rate", str(texts)], None),
                (source, [python, "-m", "engine.bench.embed_rate", str(texts)], root)):
            done = subprocess.run(command, capture_output=True, text=True, check=True,
                                  cwd=cwd, timeout=900,
                                  env={**os.environ, "HF_HUB_OFFLINE": "1"})
            result = json.loads(done.stdout.strip().splitlines()[-1])
            rates.append(float(result["median"]))
            backends.add(result["backend"])
    ratio = statistics.median(frozen) / statistics.median(source)
    print(f"\nembedding rate on {texts.name}: frozen {statistics.median(frozen):.1f} texts/s "
          f"({', '.join(f'{r:.1f}' for r in frozen)}), source {statistics.median(source):.1f} "
          f"({', '.join(f'{r:.1f}' for r in source)}); frozen/source {ratio:.3f}; "
          f"backends: {'; '.join(sorted(backends))}")


if __name__ == "__main__":
    sys.exit(main())
