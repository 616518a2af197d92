"""What the PyInstaller build leaves out, by bundle path or module name (used by mnemoscope.spec).

Every rule names why it is safe; docs/packaging.md lists what each one saves. Paths are the
bundle-relative destination names PyInstaller gives collected files (``torch/lib/x.so``), with
``/`` separators on every platform.
"""

from __future__ import annotations

import fnmatch

__all__ = ["DROP_MODULE_PREFIXES", "DROP_PATTERNS", "KEEP_TESTING_INTERNAL", "drop_entry",
           "drop_module"]

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
)

# Modules never imported by the app (see docs/packaging.md for how that was checked).
DROP_MODULE_PREFIXES: tuple[str, ...] = (
    "torch.utils.tensorboard", "torch.utils.benchmark", "torch.utils.bottleneck",
    "torch.contrib", "torch.onnx._internal.exporter._torchlib",
    "chromadb.test", "chromadb.server", "chromadb.cli", "chromadb.app",
)

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
    if "tests" in parts or (parts[0] != "torch" and "test" in parts[1:]):
        return True
    if name.startswith("torch.testing._internal"):
        return name not in KEEP_TESTING_INTERNAL
    return any(name == prefix or name.startswith(prefix + ".") for prefix in DROP_MODULE_PREFIXES)
