"""docs/agents.md is true: its Python example runs and prints what the page says, and every MCP
client configuration in it is valid JSON naming a command line the real parser accepts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import build_parser
from tests.support.serve_process import ROOT, cli_env

DOC = ROOT / "docs" / "agents.md"
_BLOCK = re.compile(r"```(\w*)\n(.*?)```", re.DOTALL)


def _section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def _blocks(section: str, language: str) -> list[str]:
    return [body for lang, body in _BLOCK.findall(section) if lang == language]


@pytest.mark.slow
@pytest.mark.model
def test_the_python_example_runs_and_prints_what_the_page_says(tmp_path: Path) -> None:
    section = _section("In process: the Python API")
    (example,) = _blocks(section, "python")
    (printed,) = _blocks(section, "")
    script = tmp_path / "example.py"
    script.write_text(example, encoding="utf-8")
    process = subprocess.run([sys.executable, str(script), str(tmp_path / "store")],
                             capture_output=True, text=True, env=cli_env(tmp_path),
                             cwd=str(tmp_path), timeout=280)
    assert process.returncode == 0, process.stderr
    assert process.stdout == printed


def test_every_client_configuration_names_a_real_command() -> None:
    configs = [json.loads(body) for body in _blocks(_section("MCP"), "json")]
    assert len(configs) == 3
    parser = build_parser()
    for config in configs:
        (entry,) = config["mcpServers"].values()
        if "url" in entry:  # the HTTP form: the endpoint and header the server expects
            assert entry["url"] == "http://127.0.0.1:8766/mcp"
            assert entry["headers"]["Authorization"].startswith("Bearer ")
            continue
        assert entry["command"] == "mnemoscope"
        args = parser.parse_args(entry["args"])
        assert args.command == "mcp" and args.store
