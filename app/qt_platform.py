"""Check, before Qt starts, that the system libraries its X11 platform plug-in needs are there.

Qt's xcb plug-in links against a dozen ``libxcb-*`` libraries that a minimal Linux install
lacks (``libxcb-cursor0``, ``libxcb-icccm4``, ``libxcb-keysyms1`` are the usual ones). When one
is missing, Qt aborts the process from C++ ("could not load the Qt platform plugin xcb"), which
Python cannot catch, and the message does not say which package to install. So the app asks
the dynamic loader first (``ldd`` on the plug-in) and, if anything is missing, names the
packages and exits cleanly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

__all__ = ["DEBIAN_PACKAGES", "check_xcb", "missing_libraries", "missing_xcb_message",
           "parse_ldd", "uses_xcb", "xcb_plugin_path"]

# Shared object → the Debian/Ubuntu package that ships it (the .deb declares the same set:
# packaging/linux_installers.py DEPENDS).
DEBIAN_PACKAGES: Mapping[str, str] = {
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xinerama.so.0": "libxcb-xinerama0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb.so.1": "libxcb1",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libX11.so.6": "libx11-6",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libOpenGL.so.0": "libopengl0",
    "libGLX.so.0": "libglx0",
    "libdbus-1.so.3": "libdbus-1-3",
    "libglib-2.0.so.0": "libglib2.0-0",
}

Ldd = Callable[[Path], str]


def uses_xcb(environ: Mapping[str, str] = os.environ, platform: str = sys.platform) -> bool:
    """Whether Qt will pick its X11 (xcb) plug-in in this environment."""
    if not platform.startswith("linux"):
        return False
    chosen = environ.get("QT_QPA_PLATFORM", "")
    if chosen:
        return chosen.split(":")[0] == "xcb"
    # Qt 6 prefers Wayland only in a Wayland session; without one it takes xcb on $DISPLAY.
    return bool(environ.get("DISPLAY")) and not environ.get("WAYLAND_DISPLAY")


def xcb_plugin_path() -> Path | None:
    """The bundled Qt's xcb platform plug-in, or None where this Qt has none."""
    from PySide6.QtCore import QLibraryInfo

    plugins = Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath))
    plugin = plugins / "platforms" / "libqxcb.so"
    return plugin if plugin.is_file() else None


def parse_ldd(output: str) -> list[str]:
    """The shared objects ``ldd`` reports as ``not found``, each once, in order."""
    missing: list[str] = []
    for line in output.splitlines():
        name, arrow, where = line.strip().partition("=>")
        if arrow and where.strip() == "not found" and name.strip() not in missing:
            missing.append(name.strip())
    return missing


def _run_ldd(path: Path) -> str:
    done = subprocess.run(["ldd", str(path)], capture_output=True, text=True, timeout=30,
                          check=False)
    return done.stdout


def missing_libraries(plugin: Path, ldd: Ldd = _run_ldd) -> list[str]:
    """Shared objects the plug-in needs that the dynamic loader cannot find."""
    return parse_ldd(ldd(plugin))


def missing_xcb_message(missing: list[str]) -> str:
    """What to tell the user: which libraries, which packages, and what works meanwhile."""
    packages = sorted({DEBIAN_PACKAGES[name] for name in missing if name in DEBIAN_PACKAGES})
    unknown = [name for name in missing if name not in DEBIAN_PACKAGES]
    lines = [f"Mnemoscope cannot open a window: Qt's X11 support needs system libraries that "
             f"are not installed ({', '.join(missing)})."]
    if packages:
        lines.append(f"On Debian or Ubuntu install them with:\n"
                     f"    sudo apt-get install {' '.join(packages)}")
    if unknown:
        lines.append(f"Install the packages that provide {', '.join(unknown)} "
                     f"with your system's package manager.")
    lines.append("Meanwhile the command line works (`mnemoscope --help`), and "
                 "`mnemoscope --screenshot DIR` renders the views without a display.")
    return "\n".join(lines)


def check_xcb(environ: Mapping[str, str] = os.environ, ldd: Ldd = _run_ldd) -> str | None:
    """The message to show before exiting when Qt's xcb plug-in cannot load, else None.

    Where ``ldd`` is not installed the check cannot run and Qt is left to try.
    """
    if not uses_xcb(environ) or (ldd is _run_ldd and shutil.which("ldd") is None):
        return None
    plugin = xcb_plugin_path()
    if plugin is None:
        return None
    missing = missing_libraries(plugin, ldd)
    return missing_xcb_message(missing) if missing else None
