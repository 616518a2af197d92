"""Work around a PySide6 6.12.0 reference-count bug: ``Signal.emit()`` drops a ``True``.

Measured here (PySide6 6.12.0, CPython 3.11.7): each Python-side ``emit()`` — with or without
receivers, any signature — lowers ``sys.getrefcount(True)`` by one (``False`` is unaffected).
``True`` starts with a few thousand references, so after a few thousand emits (a minute of
pyqtgraph panning, a live timeline, a long session) the interpreter aborts with
``Fatal Python error: bool_dealloc: deallocating True or False``; a 100K-event timeline
benchmark also ended in ``none_dealloc`` (``None`` loses references the same way somewhere in
pyqtgraph's paths). CPython 3.12+ makes these singletons immortal; on 3.11
:func:`immortalize_bools` gives ``True``, ``False`` and ``None`` 2**40 extra references each,
which is what immortality amounts to. Nothing is freed or changed otherwise.
"""

from __future__ import annotations

import ctypes
import sys

__all__ = ["immortalize_bools"]

_EXTRA = 1 << 40
_done = False


def immortalize_bools() -> None:
    """Add 2**40 references to ``True``, ``False`` and ``None`` once per process (CPython < 3.12
    only)."""
    global _done
    if _done or sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return
    for value in (True, False, None):
        refcount = ctypes.c_ssize_t.from_address(id(value))  # ob_refcnt is the first field
        refcount.value += _EXTRA
    _done = True
