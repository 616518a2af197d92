"""Guards against a Qt binding that corrupts reference counts.

PySide6 6.12.0 on CPython 3.11 dropped one reference to ``True`` on every ``Signal.emit()``; a
few thousand emits (a minute of live timeline) aborted the interpreter with ``bool_dealloc``.
constraints.txt pins 6.11.3, and pyproject excludes 6.12.0; this test fails if a binding with
such a leak comes back.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, Signal


class _Emitter(QObject):
    number = Signal(int)
    flag = Signal(bool)
    nothing = Signal()


def test_emitting_signals_keeps_singleton_reference_counts() -> None:
    emitter = _Emitter()
    received: list[object] = []
    emitter.number.connect(received.append)
    before = {name: sys.getrefcount(value) for name, value in
              (("True", True), ("False", False), ("None", None))}
    for i in range(5000):
        emitter.number.emit(i)
        emitter.flag.emit(i % 2 == 0)
        emitter.nothing.emit()
    after = {name: sys.getrefcount(value) for name, value in
             (("True", True), ("False", False), ("None", None))}
    assert len(received) == 5000
    for name in before:
        # Other threads may hold a few transient references; a leak would be thousands.
        assert abs(after[name] - before[name]) < 100, (name, before[name], after[name])
