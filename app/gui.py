"""Start the desktop app: the Qt application, the asyncio loop (qasync) and the main window.

Only this module (and ``ui``) imports Qt, so CLI commands never pay for it.
"""

from __future__ import annotations

import argparse
import os
import sys

from app.settings import Settings

__all__ = ["run_gui"]


def run_gui(args: argparse.Namespace, settings: Settings) -> int:
    """Run the window until it closes (or, with --screenshot / --self-test, until done)."""
    if args.screenshot or args.self_test:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    elif (sys.platform.startswith("linux") and not os.environ.get("DISPLAY")
          and not os.environ.get("WAYLAND_DISPLAY") and not os.environ.get("QT_QPA_PLATFORM")):
        print("No display found. Run on a virtual display (xvfb-run mnemoscope), render the views "
              "with `mnemoscope --screenshot DIR`, check the app with "
              "`QT_QPA_PLATFORM=offscreen mnemoscope --self-test`, or use the command line "
              "(`mnemoscope --help`).", file=sys.stderr)
        return 2
    from app.qt_platform import check_xcb

    problem = check_xcb()
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    from pathlib import Path

    from app.crash import crash_reports
    from app.wiring import launch

    with crash_reports(Path(settings.data_dir) / "crash") as crashes:
        return launch(args, settings, crashes=crashes)
