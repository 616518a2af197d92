"""What the PyInstaller build leaves out, by bundle path or module name (used by mnemoscope.spec).

Every rule names why it is safe; docs/packaging.md lists what each one saves. Paths are the
bundle-relative destination names PyInstaller gives collected files (``openvino/libs/x.so``),
with ``/`` separators on every platform. torch and the libraries around it are excluded whole in
the spec (the bundle runs the model on OpenVINO), so no rule here concerns them.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["DROP_MODULE_PREFIXES", "DROP_PATTERNS", "TEST_SUITE_OWNERS", "drop_entry",
           "drop_module", "write_trim_report"]

DROP_PATTERNS: tuple[str, ...] = (
    # Type stubs.
    "*.pyi",
    # Test suites of third-party packages (collected as data by their hooks).
    "*/tests/*", "*/test/*", "*/testing/tests/*",
    # Cython sources and C headers shipped beside compiled modules.
    "*.pyx", "*.pxd", "*.pxi", "*.h", "*.hpp", "*.cpp", "*.c",
    # Qt plug-ins for modules the app does not load (QML tooling, SQL drivers, Designer).
    "PySide6/Qt/plugins/qmltooling/*", "PySide6/Qt/plugins/sqldrivers/*",
    "PySide6/Qt/plugins/designer/*",
    # The GTK3 platform theme would run the user's GTK against pango/cairo copied from the build
    # machine; without it Qt uses its own style (or the xdg-desktop-portal theme). These are the
    # libraries only that plug-in needs (checked with readelf: nothing else in the bundle links
    # them; tests/packaging checks every bundled library's dependencies still resolve).
    "PySide6/Qt/plugins/platformthemes/libqgtk3.so", "libatk-1.0.so*", "libcairo-gobject.so*",
    "libgdk_pixbuf-2.0.so*", "libpangocairo-1.0.so*", "libcairo.so*", "libpangoft2-1.0.so*",
    "libpango-1.0.so*", "libpixman-1.so*", "libfribidi.so*", "libharfbuzz.so*", "libthai.so*",
    "libdatrie.so*", "libgraphite2.so*", "libjpeg.so*", "libXext.so*", "libXrender.so*",
    # OpenVINO: the app runs the CPU plug-in on an IR model it ships. The GPU and NPU plug-ins
    # (and the GPU's OpenCL runtime) and the readers of other model formats are never loaded.
    "openvino/libs/libopenvino_intel_gpu_plugin.so",
    "openvino/libs/libopenvino_intel_npu_plugin.so",
    "openvino/libs/libopenvino_*tensorflow*_frontend.so*",
    "openvino/libs/libopenvino_paddle_frontend.so*", "openvino/libs/libopenvino_jax_frontend.so*",
    "openvino/libs/libopenvino_gguf_frontend.so*", "openvino/libs/libopenvino_onnx_frontend.so*",
    "openvino/libs/libopenvino_pytorch_frontend.so*", "libOpenCL.so*",
    "openvino/include/*", "openvino/cmake/*",
    # CUDA runtimes: never used (the app runs on the CPU); a guard should a dependency ever
    # bring the build machine's copies in (size_report.py fails the build on them too).
    "libcudart*", "libcublas*", "libcudnn*", "libnvrtc*", "libnccl*", "libcufft*",
    "libcurand*", "libcusolver*", "libcusparse*", "libnvJitLink*", "nvidia/*",
)

# Modules never imported by the app (see docs/packaging.md for how that was checked).
DROP_MODULE_PREFIXES: tuple[str, ...] = (
    "chromadb.test", "chromadb.server", "chromadb.cli", "chromadb.app",
)

# Packages whose ``tests``/``test`` subpackages are their own test suites (unlike, say,
# ``jinja2.tests``, which is a runtime module).
TEST_SUITE_OWNERS: frozenset[str] = frozenset({
    "numpy", "networkx", "pyqtgraph", "grpc", "google", "pydantic", "chromadb", "opentelemetry",
    "tokenizers", "PySide6", "shiboken6", "yaml", "httpx",
})

def drop_entry(dest: str) -> bool:
    """True when the collected file at bundle path ``dest`` is left out."""
    path = dest.replace("\\", "/")
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in DROP_PATTERNS)


def drop_module(name: str) -> bool:
    """True when the Python module ``name`` is left out of the archive."""
    parts = name.split(".")
    if parts[0] in TEST_SUITE_OWNERS and ("tests" in parts[1:] or "test" in parts[1:]):
        return True
    return any(name == prefix or name.startswith(prefix + ".") for prefix in DROP_MODULE_PREFIXES)


def _size(path: str | None) -> int:
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0


def _package_size(name: str) -> int:
    """Installed bytes of the top-level package ``name`` in the build environment (0 if absent)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return 0
    if spec is None:
        return 0
    if not spec.submodule_search_locations:
        return _size(spec.origin)
    return sum(_size(os.path.join(folder, file))
               for location in spec.submodule_search_locations
               for folder, _dirs, files in os.walk(location) for file in files)


def write_trim_report(target: Path, dropped: Iterable[Sequence[str]],
                      excludes: Iterable[str]) -> None:
    """Write what the trims removed: dropped files and modules by package, excluded packages.

    ``dropped`` holds PyInstaller TOC entries (destination or module name, source path, kind);
    sizes are those of the source files before stripping.
    """
    by_group: dict[str, int] = defaultdict(int)
    for name, source, kind in dropped:
        parts = name.replace("\\", "/").split("/") if kind != "PYMODULE" else name.split(".")
        group = "/".join(parts[:2]) if len(parts) > 2 else parts[0]
        by_group[f"{group} ({'modules' if kind == 'PYMODULE' else 'files'})"] += _size(source)
    lines = ["## Left out of the bundle (sizes before stripping)", "",
             "| dropped by a trim rule (packaging/packaging_trim.py) | MB |", "|---|---:|"]
    for group, size in sorted(by_group.items(), key=lambda item: item[1], reverse=True):
        if size >= 100_000:
            lines.append(f"| {group} | {size / 1_000_000:,.1f} |")
    lines.append(f"| **total** | **{sum(by_group.values()) / 1_000_000:,.1f}** |")
    lines += ["", "| excluded package (installed size) | MB |", "|---|---:|"]
    for name in sorted(item for item in set(excludes) if "." not in item):
        size = _package_size(name)
        if size >= 50_000:
            lines.append(f"| {name} | {size / 1_000_000:,.1f} |")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
