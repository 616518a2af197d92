"""Issue 18 A: stored text reaches the terminal with its control characters escaped."""

from __future__ import annotations

import io
import json
import logging

import pytest

from app.cli.context import CliContext, escape_controls
from app.settings import Settings
from tests.app.conftest import Runner

# Retitle the window (OSC 0), clear the screen (CSI 2J), return to column 0 and overwrite,
# a one-byte C1 CSI, and a right-to-left override that reorders what follows.
HOSTILE = ("Deploy notes \x1b]0;pwned\x07 then \x1b[2J\x1b[H gone\rFAKE "
           "\x9b31m red \u202egnp.exe done")
RAW_CONTROLS = ("\x1b", "\x07", "\r", "\x9b", "\u202e")


def test_escape_controls_keeps_layout_and_shows_the_rest() -> None:
    assert escape_controls("a\tb\nc") == "a\tb\nc"
    assert escape_controls("\x1b[2J\x00\x7f\x9b\u202e\u2066") == \
        "\\x1b[2J\\x00\\x7f\\x9b\\u202e\\u2066"
    assert escape_controls("plain café ✓") == "plain café ✓"


def test_list_get_search_show_escape_sequences_escaped(cli: Runner) -> None:
    code, out, _ = cli("--json", "add", HOSTILE, "--tags", "ops\x1b[5m,blink",
                       "--source", "chat\x1b]2;x\x07")
    assert code == 0
    record = json.loads(out)
    assert record["content"] == HOSTILE  # stored as given: escaping is for display
    assert "\\u009b" in out and "\\u202e" in out and "\x9b" not in out  # valid JSON, no C1
    for argv in (("list",), ("get", record["id"]), ("search", "--inspect"),
                 ("search", "deploy notes", "--inspect"), ("events",), ("redact-scan",)):
        code, out, err = cli(*argv)
        assert code == 0, (argv, err)
        shown = out + err
        assert not any(c in shown for c in RAW_CONTROLS), (argv, shown)
        if argv[0] in ("list", "get", "search"):
            assert "\\x1b]0;pwned\\x07" in shown and "\\x1b[2J" in shown, (argv, shown)
    code, out, _ = cli("get", record["id"])
    assert "ops\\x1b[5m" in out and "chat\\x1b]2;x\\x07" in out


def test_error_messages_quoting_input_are_escaped_and_masked(cli: Runner) -> None:
    assert cli("add", "a memory so the store exists")[0] == 0
    code, _, err = cli("get", "no-such-\x1b[2J-id")
    assert code == 1 and "\x1b" not in err and "\\x1b[2J" in err
    code, out, err = cli("--redact", "--json", "get", "jane.doe@example.com")
    assert code == 1 and "no record with id" in err
    assert "jane.doe@example.com" not in err + out and "<REDACT:sha256-" in err


def test_commands_write_only_through_the_context() -> None:
    """A command that printed by itself would skip masking and escaping: none does."""
    import ast
    from pathlib import Path

    import app.cli.commands as commands

    found = []
    for path in sorted(Path(commands.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id == "print":
                found.append(f"{path.name}:{node.lineno} print()")
            elif isinstance(func, ast.Attribute) and func.attr in ("write", "writelines") \
                    and isinstance(func.value, ast.Attribute) \
                    and func.value.attr in ("stdout", "stderr"):
                found.append(f"{path.name}:{node.lineno} .{func.value.attr}.{func.attr}()")
    assert found == []


@pytest.mark.parametrize("redaction", [False, True])
def test_log_lines_reach_the_terminal_escaped(redaction: bool) -> None:
    # `mcp` logs what a client sent (the SDK: an unknown prompt's name, with the traceback);
    # with redaction off no handler was installed and Python's last-resort one (or the one the
    # SDK configures) wrote the escape sequences to the terminal as they came; with it on the
    # masked handler wrote them too.
    stderr = io.StringIO()
    ctx = CliContext(Settings(redaction=redaction), stderr=stderr)
    log = logging.getLogger("mcp.server.probe")
    with ctx.masked_logs():
        try:
            raise ValueError(f"Unknown prompt: {HOSTILE}")
        except ValueError:
            log.exception("handler for %r raised", HOSTILE)
    shown = stderr.getvalue()
    assert "Traceback (most recent call last)" in shown
    assert not any(c in shown for c in RAW_CONTROLS), shown
    assert shown.count("\\x1b]0;pwned\\x07") == 2 and shown.count("\\x1b[2J") == 2
