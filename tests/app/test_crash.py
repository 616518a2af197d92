"""Crash reports (app/crash.py): the CLI's and the desktop app's one writer."""

from __future__ import annotations

import sys
from pathlib import Path
from types import TracebackType

import pytest

from app.crash import crash_reports, write_crash_report


def test_the_app_hook_writes_a_report_then_passes_the_exception_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    passed_on: list[BaseException] = []

    def previous(kind: type[BaseException], exc: BaseException,
                 tb: TracebackType | None) -> None:
        passed_on.append(exc)

    monkeypatch.setattr(sys, "excepthook", previous)
    with crash_reports(tmp_path / "crash"):
        try:
            raise ValueError("a bug in a slot")
        except ValueError as exc:
            sys.excepthook(type(exc), exc, exc.__traceback__)
    assert sys.excepthook is previous
    [report] = (tmp_path / "crash").iterdir()
    text = report.read_text(encoding="utf-8")
    assert "command:  app" in text and "ValueError: a bug in a slot" in text
    assert "raise ValueError" in text  # the traceback, with its source line
    assert [str(e) for e in passed_on] == ["a bug in a slot"]
    assert f"crash report: {report}" in capsys.readouterr().err


def test_an_unwritable_directory_gives_no_path(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("", encoding="utf-8")
    assert write_crash_report(RuntimeError("x"), blocker / "crash", command="ingest") is None


def test_an_unencodable_message_is_still_written(tmp_path: Path) -> None:
    report = write_crash_report(RuntimeError("bad \udcff text"), tmp_path, command="add")
    assert report is not None and "bad \\udcff text" in report.read_text(encoding="utf-8")


def test_the_app_hook_masks_report_and_stderr_while_redaction_is_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # A bug whose message quotes a memory: the report and Python's own traceback on stderr
    # showed it in clear while the window's redaction mode was on (logs were masked, these
    # were not).
    from app.log_masking import ToggledLogMasking
    from engine.config import MemoryConfig

    secret = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
    masking = ToggledLogMasking(MemoryConfig().redactor().redact, enabled=True)
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    for on in (True, False):
        masking.set_enabled(on)
        directory = tmp_path / f"crash-{on}"
        with crash_reports(directory) as reports:
            reports.mask = masking.text
            try:
                raise ValueError(f"cannot show memory 'the deploy key is {secret}'")
            except ValueError as exc:
                sys.excepthook(type(exc), exc, exc.__traceback__)
        [report] = directory.iterdir()
        shown = report.read_text(encoding="utf-8") + capsys.readouterr().err
        assert "ValueError: cannot show memory 'the deploy key is " in shown
        assert shown.count("Traceback (most recent call last)") == 2  # report and stderr
        # masked while on; as raised once the user switched redaction off
        assert (secret in shown) is not on and ("<REDACT:" in shown) is on


def test_the_crash_folder_is_private(tmp_path: Path) -> None:
    import os
    import stat

    previous = os.umask(0o022)
    try:
        report = write_crash_report(RuntimeError("quotes a memory"), tmp_path / "crash",
                                    command="add")
    finally:
        os.umask(previous)
    assert report is not None
    assert stat.S_IMODE((tmp_path / "crash").stat().st_mode) == 0o700
