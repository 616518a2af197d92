"""The desktop app's log lines follow redaction mode (DESIGN decision 8: logs are an exit)."""

from __future__ import annotations

import io
import logging
from collections.abc import Callable

from pytestqt.qtbot import QtBot

from app.log_masking import ToggledLogMasking, masked_log_handlers
from app.wiring import window_log_masking
from engine.redaction import redact_text
from ui.main_window import MainWindow

SECRET = "AKIAIOSFODNN7EXAMPLE"


def test_log_lines_are_masked_while_redaction_mode_is_on(
        qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    window = make_window()
    stream = io.StringIO()
    log = logging.getLogger("ui.test_log_masking")
    with masked_log_handlers(window_log_masking(window, redact_text), stream):
        log.warning("backup key is %s", SECRET)
        assert SECRET in stream.getvalue()  # off: the line as written (the check can fail)
        window.redaction_action.trigger()
        log.warning("backup key is %s", SECRET)
        try:
            raise RuntimeError(f"refused {SECRET}")
        except RuntimeError:
            log.exception("upload failed")
        lines = stream.getvalue().splitlines()[1:]
        assert lines and not any(SECRET in line for line in lines), lines
        assert any("<REDACT:" in line for line in lines)
        assert any("RuntimeError" in line for line in lines)  # the traceback is kept, masked
        window.redaction_action.trigger()
        log.warning("backup key is %s", SECRET)
        assert stream.getvalue().splitlines()[-1].endswith(SECRET)
    # after the block the filter is gone from the root's handlers
    assert not any(isinstance(f, ToggledLogMasking)
                   for h in logging.getLogger().handlers for f in h.filters)
