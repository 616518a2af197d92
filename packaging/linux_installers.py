"""Turn the one-folder build into the Linux installers: a .deb (dpkg-deb) and a portable .tar.gz.

    python packaging/linux_installers.py dist/mnemoscope --out dist

The .deb installs the build under /opt/mnemoscope, links /usr/bin/mnemoscope to it, and adds the
desktop entry and the hicolor icons; its control file depends on the system libraries Qt loads
(the build bundles everything else). The .tar.gz holds the same folder plus INSTALL.txt, the
desktop entry and the icons. Both land in ``--out`` as
``mnemoscope_<version>_<arch>.deb`` and ``mnemoscope-<version>-linux-<machine>.tar.gz``.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

__all__ = ["DEPENDS", "build_deb", "build_tarball", "main", "project_version"]

ROOT = Path(__file__).resolve().parent.parent
LINUX = Path(__file__).resolve().parent / "linux"
ICONS = ROOT / "assets" / "icons"
ICON_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
INSTALL_DIR = "opt/mnemoscope"

# System libraries the bundled Qt (xcb and wayland platform plug-ins, OpenGL, fonts, D-Bus) links
# against and PyInstaller deliberately does not bundle: they must match the user's graphics stack.
DEPENDS = (
    "libc6 (>= 2.28)", "libgl1", "libegl1", "libopengl0", "libfontconfig1", "libfreetype6",
    "libdbus-1-3", "libglib2.0-0", "libxkbcommon0", "libxkbcommon-x11-0", "libx11-6",
    "libx11-xcb1", "libxcb1", "libxcb-cursor0", "libxcb-icccm4", "libxcb-image0",
    "libxcb-keysyms1", "libxcb-randr0", "libxcb-render-util0", "libxcb-shape0", "libxcb-shm0",
    "libxcb-sync1", "libxcb-xfixes0", "libxcb-xinerama0", "libxcb-xkb1", "libwayland-client0",
    "libwayland-cursor0", "libwayland-egl1",
)


def project_version() -> str:
    """The app version, read from app/__init__.py (without importing the app)."""
    text = (ROOT / "app" / "__init__.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__\s*=\s*"([^"]+)"', text, re.MULTILINE)
    if match is None:
        raise SystemExit(f"{ROOT / 'app' / '__init__.py'}: no __version__ = \"...\" line")
    return match.group(1)


def _deb_arch() -> str:
    result = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                            check=True)
    return result.stdout.strip()


def _fill(template: Path, values: dict[str, str]) -> str:
    text = template.read_text(encoding="utf-8")
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    if "@" in re.sub(r"<[^>]*>", "", text):
        leftover = re.findall(r"@[A-Z_]+@", text)
        if leftover:
            raise SystemExit(f"{template}: unfilled placeholders {leftover}")
    return text


def _normalize_modes(root: Path) -> None:
    """Directories 0755, executables 0755, everything else 0644 (dpkg and lintian expect it)."""
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        if path.is_dir():
            path.chmod(0o755)
        else:
            executable = path.stat().st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
            path.chmod(0o755 if executable else 0o644)


def _install_icons(share: Path) -> None:
    for size in ICON_SIZES:
        target = share / "icons" / "hicolor" / f"{size}x{size}" / "apps" / "mnemoscope.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ICONS / f"mnemoscope-{size}.png", target)
    scalable = share / "icons" / "hicolor" / "scalable" / "apps" / "mnemoscope.svg"
    scalable.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ICONS / "mnemoscope.svg", scalable)


def _tree_kib(root: Path) -> int:
    total = sum(path.lstat().st_size for path in root.rglob("*") if not path.is_dir())
    return (total + 1023) // 1024


def build_deb(bundle: Path, out_dir: Path, version: str, work: Path) -> Path:
    """Stage ``bundle`` as /opt/mnemoscope with the desktop integration and run dpkg-deb."""
    arch = _deb_arch()
    stage = work / "deb-root"
    if stage.exists():
        shutil.rmtree(stage)
    shutil.copytree(bundle, stage / INSTALL_DIR, symlinks=True)
    (stage / "usr" / "bin").mkdir(parents=True)
    os.symlink(f"/{INSTALL_DIR}/mnemoscope", stage / "usr" / "bin" / "mnemoscope")
    share = stage / "usr" / "share"
    (share / "applications").mkdir(parents=True)
    shutil.copyfile(LINUX / "mnemoscope.desktop", share / "applications" / "mnemoscope.desktop")
    _install_icons(share)
    doc = share / "doc" / "mnemoscope"
    doc.mkdir(parents=True)
    (doc / "copyright").write_text(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
        "Upstream-Name: mnemoscope\n\nFiles: *\nCopyright: Mnemoscope developers\n"
        "License: MIT\n\nFiles: opt/mnemoscope/_internal/*\n"
        "Copyright: the authors of each bundled package (Python, Qt/PySide6, PyTorch, Chroma,\n"
        " sentence-transformers, all-MiniLM-L6-v2 and their dependencies)\n"
        "License: various; see the package metadata under opt/mnemoscope/_internal\n",
        encoding="utf-8")
    installed_kib = _tree_kib(stage)
    control = _fill(LINUX / "control.in", {
        "VERSION": version, "ARCH": arch, "INSTALLED_SIZE": str(installed_kib),
        "DEPENDS": ", ".join(DEPENDS)})
    (stage / "DEBIAN").mkdir()
    (stage / "DEBIAN" / "control").write_text(control, encoding="utf-8")
    _normalize_modes(stage)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"mnemoscope_{version}_{arch}.deb"
    # xz level 1: every dpkg can read it; level 6 (the default) took 15 min on two busy cores
    # for a file only a few per cent smaller.
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", "-Zxz", "-z1", str(stage),
                    str(target)], check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(stage)
    return target


def build_tarball(bundle: Path, out_dir: Path, version: str) -> Path:
    """The one-folder build plus INSTALL.txt, the desktop entry and the icons, as .tar.gz."""
    arch = _deb_arch()
    top = f"mnemoscope-{version}-linux-{platform.machine()}"
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{top}.tar.gz"
    install = _fill(LINUX / "INSTALL.txt", {"VERSION": version, "ARCH": arch,
                                             "DEPENDS": " ".join(d.split()[0] for d in DEPENDS)})
    extra = bundle.parent / f".{top}-extra"
    if extra.exists():
        shutil.rmtree(extra)
    (extra / "icons").mkdir(parents=True)
    (extra / "INSTALL.txt").write_text(install, encoding="utf-8")
    shutil.copyfile(LINUX / "mnemoscope.desktop", extra / "mnemoscope.desktop")
    for size in ICON_SIZES:
        name = f"mnemoscope-{size}.png"
        shutil.copyfile(ICONS / name, extra / "icons" / name)
    shutil.copyfile(ICONS / "mnemoscope.svg", extra / "icons" / "mnemoscope.svg")

    def owner(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    try:
        with tarfile.open(target, "w:gz", compresslevel=6) as archive:
            archive.add(bundle, arcname=top, filter=owner)
            for item in sorted(extra.iterdir()):
                archive.add(item, arcname=f"{top}/{item.name}", filter=owner)
    finally:
        shutil.rmtree(extra)
    return target


def main(argv: list[str] | None = None) -> int:
    """Build both installers from the one-folder build; print their paths and sizes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path, help="the one-folder build (dist/mnemoscope)")
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="output directory")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "linux",
                        help="staging directory")
    args = parser.parse_args(argv)
    bundle: Path = args.bundle
    if not (bundle / "mnemoscope").is_file():
        print(f"error: {bundle}/mnemoscope not found; run PyInstaller first (scripts/package)",
              file=sys.stderr)
        return 2
    version = project_version()
    args.work.mkdir(parents=True, exist_ok=True)
    for built in (build_deb(bundle, args.out, version, args.work),
                  build_tarball(bundle, args.out, version)):
        print(f"{built}  {built.stat().st_size / 1_000_000:,.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
