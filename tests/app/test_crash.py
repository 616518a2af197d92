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
