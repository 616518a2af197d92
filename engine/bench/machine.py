"""Machine information recorded with every benchmark run (the machine is shared and noisy)."""

from __future__ import annotations

import math
import os
import platform
import subprocess
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["MachineInfo", "collect_machine_info", "load_average"]

_PACKAGES = ("numpy", "chromadb", "torch", "sentence-transformers", "PySide6-Essentials",
             "pyqtgraph")


def load_average() -> tuple[float, float, float]:
    """1-, 5- and 15-minute load averages (nan where the OS has none)."""
    try:
        return os.getloadavg()
    except (AttributeError, OSError):
        return (math.nan, math.nan, math.nan)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / (1024.0 * 1024.0)
    except (OSError, ValueError, IndexError):
        pass
    return math.nan


def _git_commit(root: Path) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, check=True,
                             capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, check=True, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() + (" (modified)" if dirty.stdout.strip() else "")


@dataclass(frozen=True, slots=True)
class MachineInfo:
    """Where and under what load a benchmark ran.

    Attributes:
        cpu: CPU model name.
        cpus: Logical CPUs visible to the process.
        affinity: CPUs the process may run on.
        memory_gib: Total memory.
        system: OS and kernel.
        python: Interpreter version.
        packages: Versions of the libraries that matter for speed.
        commit: Git commit of the code measured.
        load_start: Load averages (1, 5, 15 min) when the run started.
        load_end: Load averages when it ended (filled in by the runner).
    """

    cpu: str
    cpus: int
    affinity: int
    memory_gib: float
    system: str
    python: str
    packages: dict[str, str] = field(default_factory=dict)
    commit: str = "unknown"
    load_start: tuple[float, float, float] = (math.nan, math.nan, math.nan)
    load_end: tuple[float, float, float] = (math.nan, math.nan, math.nan)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {"cpu": self.cpu, "cpus": self.cpus, "affinity": self.affinity,
                "memory_gib": round(self.memory_gib, 1), "system": self.system,
                "python": self.python, "packages": dict(self.packages), "commit": self.commit,
                "load_start": list(self.load_start), "load_end": list(self.load_end)}


def collect_machine_info(root: Path) -> MachineInfo:
    """Machine information now, with the git commit of the checkout at ``root``."""
    packages: dict[str, str] = {}
    for name in _PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = "not installed"
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count() or 1
    return MachineInfo(
        cpu=_cpu_model(), cpus=os.cpu_count() or 1, affinity=affinity,
        memory_gib=_memory_gib(), system=f"{platform.system()} {platform.release()}",
        python=sys.version.split()[0], packages=packages, commit=_git_commit(root),
        load_start=load_average())
