"""Make Qt unimportable, to prove the engine runs where PySide6 is absent (STYLE §1).

Put this folder on PYTHONPATH with MNEMOSCOPE_BLOCK_QT=1; any import of PySide6, shiboken6,
pyqtgraph or qasync then fails as if the package were not installed.
"""

import importlib.abc
import os
import sys

_BLOCKED = ("PySide6", "shiboken6", "pyqtgraph", "qasync")


class _QtBlocker(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        if fullname.split(".")[0] in _BLOCKED:
            raise ModuleNotFoundError(f"No module named {fullname!r} (blocked)", name=fullname)
        return None


if os.environ.get("MNEMOSCOPE_BLOCK_QT") == "1":
    sys.meta_path.insert(0, _QtBlocker())
