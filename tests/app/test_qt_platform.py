"""Before Qt starts, missing X11 libraries are named with the packages to install."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.qt_platform import (
    DEBIAN_PACKAGES,
    check_xcb,
    missing_libraries,
    missing_xcb_message,
    parse_ldd,
    uses_xcb,
    xcb_plugin_path,
)

ROOT = Path(__file__).resolve().parents[2]

LDD_OUTPUT = """\
\tlinux-vdso.so.1 (0x00007ffd)
\tlibxcb-cursor.so.0 => not found
\tlibxcb-icccm.so.4 => not found
\tlibQt6XcbQpa.so.6 => /opt/Qt/lib/libQt6XcbQpa.so.6 (0x00007f)
\tlibxcb-icccm.so.4 => not found
\tlibxcb-keysyms.so.1 => not found
\tlibfoo-special.so.3 => not found
"""


def test_ldd_output_is_read_for_what_is_not_found() -> None:
    assert parse_ldd(LDD_OUTPUT) == ["libxcb-cursor.so.0", "libxcb-icccm.so.4",
                                     "libxcb-keysyms.so.1", "libfoo-special.so.3"]
    assert parse_ldd("\tlibc.so.6 => /lib/libc.so.6 (0x1)\n") == []


def test_the_message_names_the_debian_packages_and_what_still_works() -> None:
    message = missing_xcb_message(parse_ldd(LDD_OUTPUT))
    assert "sudo apt-get install libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1" in message
    assert "libfoo-special.so.3" in message  # unknown to the table: named, not dropped
    assert "--help" in message


def test_every_xcb_package_the_deb_declares_is_known() -> None:
    # By path: the folder's name is shadowed by the PyPI package `packaging`.
    spec = importlib.util.spec_from_file_location(
        "linux_installers", ROOT / "packaging" / "linux_installers.py")
    assert spec is not None and spec.loader is not None
    installers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(installers)
    declared = {item.split()[0] for item in installers.DEPENDS
                if item.startswith(("libxcb", "libx11-xcb"))}
    assert declared <= set(DEBIAN_PACKAGES.values())


@pytest.mark.parametrize(("environ", "expected"), [
    ({"DISPLAY": ":0"}, True),
    ({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}, False),
    ({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}, False),
    ({"QT_QPA_PLATFORM": "xcb"}, True),
    ({}, False),
])
def test_the_check_runs_only_where_qt_would_pick_xcb(environ: dict[str, str],
                                                     expected: bool) -> None:
    assert uses_xcb(environ, "linux") is expected
    assert uses_xcb(environ, "darwin") is False


def test_the_check_reads_the_real_plugin_through_an_injected_loader() -> None:
    plugin = xcb_plugin_path()
    assert plugin is not None and plugin.name == "libqxcb.so"
    seen: list[Path] = []

    def ldd(path: Path) -> str:
        seen.append(path)
        return LDD_OUTPUT

    message = check_xcb({"DISPLAY": ":0"}, ldd)
    assert seen == [plugin]
    assert message is not None and "libxcb-cursor0" in message
    assert check_xcb({"DISPLAY": ":0"}, lambda path: "") is None
    assert check_xcb({"QT_QPA_PLATFORM": "offscreen"}, ldd) is None


def test_the_app_exits_with_the_packages_instead_of_a_qt_abort(tmp_path: Path) -> None:
    """Against this machine's real loader: whatever it lacks is named, and the exit is clean."""
    plugin = xcb_plugin_path()
    assert plugin is not None
    missing = missing_libraries(plugin)
    env = dict(os.environ, DISPLAY=":93", HF_HUB_OFFLINE="1",
               MNEMOSCOPE_CONFIG_DIR=str(tmp_path / "config"),
               MNEMOSCOPE_DATA_DIR=str(tmp_path / "data"))
    env.pop("QT_QPA_PLATFORM", None)
    env.pop("WAYLAND_DISPLAY", None)
    if not missing:
        # Nothing to name here: Qt would load and then fail on the absent display, so the
        # check must stay silent.
        assert check_xcb(env) is None
        return
    done = subprocess.run([sys.executable, "-m", "app.main", "--no-model"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    for name in missing:
        assert name in done.stderr
        if name in DEBIAN_PACKAGES:
            assert DEBIAN_PACKAGES[name] in done.stderr
    assert "Traceback" not in done.stderr
