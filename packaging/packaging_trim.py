"""What the PyInstaller build leaves out, by bundle path or module name (used by mnemoscope.spec).

Every rule names why it is safe; docs/packaging.md lists what each one saves. Paths are the
bundle-relative destination names PyInstaller gives collected files (``torch/lib/x.so``), with
``/`` separators on every platform.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["DROP_MODULE_PREFIXES", "DROP_PATTERNS", "KEEP_TESTING_INTERNAL", "TEST_SUITE_OWNERS",
           "drop_entry", "drop_module", "strip_torch_libraries", "write_trim_report"]

DROP_PATTERNS: tuple[str, ...] = (
    # torch's C++ test programs, protoc and test fixtures (the CPU wheel ships them; unused).
    "torch/test/*",
    "torch/bin/test_*", "torch/bin/*Test", "torch/bin/protoc*", "torch/bin/*.pt",
    "torch/bin/*.ptl", "torch/bin/upgrader_models/*",
    # Headers, CMake files and static archives are for compiling extensions against torch.
    "torch/include/*", "torch/share/*", "torch/lib/*.a", "torch/lib/*.lib",
    # Shared libraries torch builds only for its own tests.
    "torch/lib/libjitbackend_test.*", "torch/lib/libbackend_with_compiler.*",
    "torch/lib/libaoti_custom_ops.*", "torch/lib/libtorchbind_test.*",
    # torch.utils.model_dump's web page, torch's type stubs.
    "torch/utils/model_dump/*", "*.pyi",
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
    # CUDA runtimes: transformers calls ctypes.CDLL("libcudart.so"), so PyInstaller copies the
    # build machine's one if it has CUDA installed. The CPU build of torch never uses them.
    "libcudart*", "libcublas*", "libcudnn*", "libnvrtc*", "libnccl*", "libcufft*",
    "libcurand*", "libcusolver*", "libcusparse*", "libnvJitLink*", "nvidia/*",
)

# Modules never imported by the app (see docs/packaging.md for how that was checked).
DROP_MODULE_PREFIXES: tuple[str, ...] = (
    "torch.utils.tensorboard", "torch.utils.benchmark", "torch.utils.bottleneck",
    "torch.contrib", "torch.onnx._internal.exporter._torchlib",
    "chromadb.test", "chromadb.server", "chromadb.cli", "chromadb.app",
)

# Packages whose ``tests``/``test`` subpackages are their own test suites (unlike, say,
# ``jinja2.tests``, which is a runtime module).
TEST_SUITE_OWNERS: frozenset[str] = frozenset({
    "scipy", "sklearn", "sympy", "numpy", "networkx", "mpmath", "pyqtgraph", "joblib", "grpc",
    "google", "pydantic", "chromadb", "opentelemetry", "transformers", "sentence_transformers",
    "tokenizers", "huggingface_hub", "safetensors", "PySide6", "shiboken6", "yaml", "httpx",
})

# torch.testing._internal is mostly torch's own test suite (11 MB of source); these are the
# modules torch itself imports at run time (found with the import probe in docs/packaging.md).
KEEP_TESTING_INTERNAL: frozenset[str] = frozenset({
    "torch.testing._internal", "torch.testing._internal.common_dtype",
    "torch.testing._internal.distributed", "torch.testing._internal.distributed.fake_pg",
    "torch.testing._internal.logging_tensor",
})


def drop_entry(dest: str) -> bool:
    """True when the collected file at bundle path ``dest`` is left out."""
    path = dest.replace("\\", "/")
    if path.startswith("torch/testing/_internal/"):
        module = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        return module not in KEEP_TESTING_INTERNAL
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in DROP_PATTERNS)


def drop_module(name: str) -> bool:
    """True when the Python module ``name`` is left out of the archive."""
    parts = name.split(".")
    if parts[0] in TEST_SUITE_OWNERS and ("tests" in parts[1:] or "test" in parts[1:]):
        return True
    if name.startswith("torch.testing._internal"):
        return name not in KEEP_TESTING_INTERNAL
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


def strip_torch_libraries(bundle: Path, report: Path) -> None:
    """Strip symbols from torch's own shared libraries in the built folder (Linux only).

    libtorch_cpu.so ships with its full symbol table (415 MB → 330 MB stripped). PyInstaller's
    global ``strip`` option is not used because it also strips the auditwheel-patched libraries
    of numpy and scipy, which then fail to load ("ELF load command address/offset not
    page-aligned"); torch's libraries are not patched that way. Appends the saving to ``report``.
    """
    import shutil
    import subprocess

    tool = shutil.which("strip")
    if tool is None:
        raise SystemExit("strip (binutils) is needed to build the Linux bundle")
    before = after = 0
    for library in sorted((bundle / "_internal" / "torch" / "lib").glob("*.so*")):
        if library.is_symlink():
            continue
        before += library.stat().st_size
        subprocess.run([tool, "--strip-unneeded", str(library)], check=True)
        after += library.stat().st_size
    with report.open("a", encoding="utf-8") as out:
        out.write(f"\nStripped torch/lib/*.so: {before / 1_000_000:,.1f} MB → "
                  f"{after / 1_000_000:,.1f} MB (saves {(before - after) / 1_000_000:,.1f} MB)\n")
