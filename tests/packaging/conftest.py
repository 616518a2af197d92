"""The packaging tests check a built .deb (minutes to build). ``scripts/package`` builds it and
then runs this folder with ``MNEMOSCOPE_PACKAGE_TEST=1``; ``scripts/test`` ends with that stage,
so CI builds and checks the installers on every change. In any other run (a bare ``pytest``, the
suite stage of ``scripts/test`` before the build), each test here is reported as skipped with the
reason, never hidden."""

from __future__ import annotations

import os

import pytest

_REASON = ("checks a built .deb: run by scripts/package after building (the last stage of "
           "scripts/test), or with MNEMOSCOPE_PACKAGE_TEST=1 once dist/ holds one")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip (visibly) this folder's tests unless the packaging stage runs them."""
    if os.environ.get("MNEMOSCOPE_PACKAGE_TEST") == "1":
        return
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.skip(reason=_REASON))
