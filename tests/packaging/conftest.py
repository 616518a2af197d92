"""The packaging tests need a built .deb (minutes to build), so they are not part of the default
run: this folder is collected only when ``MNEMOSCOPE_PACKAGE_TEST=1``, which ``scripts/package``
sets after building. Without it every test module here is ignored (not skipped)."""

from __future__ import annotations

import os

collect_ignore_glob: list[str] = []
if os.environ.get("MNEMOSCOPE_PACKAGE_TEST") != "1":
    collect_ignore_glob = ["test_*.py"]
