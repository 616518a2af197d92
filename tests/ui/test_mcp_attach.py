"""Issue 22: the desktop app shows, live, a memory an MCP client added.

The decision (docs/architecture.md, "The MCP memory server and the desktop app"): the MCP
server process is the store's one writer and, with ``--api-port``, also serves the read-only
introspection API over the same engine; the window attaches to it (File → Attach) and follows
its events. Here a real ``python -m app mcp --http --api-port`` process runs, the window
attaches through the dialog, and the SDK's client adds a memory over MCP.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from tests.support.chroma_server import free_port
from tests.support.serve_process import ROOT, cli_env, read_json_document, reap
from tests.ui.conftest import run
from ui.main_window import MainWindow

pytestmark = [pytest.mark.slow,
              pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")]

MCP_TOKEN = "mcp-attach-token-0123456789abcdef"
API_TOKEN = "api-attach-token-0123456789abcdef"
MEMORY = "Jordan's flight to Lisbon leaves on Friday at 07:40"


def _contents(window: MainWindow) -> set[str]:
    model = window.records.model
    return {record.content for row in range(model.total)
            if (record := model.record_at(row)) is not None}


def _add_over_mcp(url: str, outcome: dict[str, Any]) -> None:
    """The agent's side, on its own thread: one add_memory call with the SDK's client."""
    async def run() -> None:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {MCP_TOKEN}"})
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            result = await client.call_tool("add_memory", {"content": MEMORY,
                                                           "agent_id": "travel-agent"})
            outcome["result"] = result.structured_content

    try:
        asyncio.run(run())
    except BaseException as exc:  # reported by the test on the GUI thread
        outcome["error"] = exc


def test_the_app_attached_to_the_mcp_server_shows_what_a_client_adds(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    api_port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "--store", str(tmp_path / "store"), "--no-model", "--json",
         "mcp", "--http", "--port", "0", "--token", MCP_TOKEN, "--api-port", str(api_port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=cli_env(tmp_path, API_TOKEN), cwd=str(ROOT))
    try:
        assert process.stdout is not None
        started = read_json_document(process.stdout, time.monotonic() + 120)
        api_url = f"http://127.0.0.1:{api_port}"
        assert started["api_url"] == api_url and started["api_token"] is None  # from the env
        assert started["token"] == MCP_TOKEN and started["token_from_env"] is False

        window = make_window()
        dialog = window.open_attach_dialog()
        assert dialog is not None
        dialog.url.setEditText(api_url)
        dialog.token.setText(API_TOKEN)
        qtbot.mouseClick(dialog.attach_button, Qt.MouseButton.LeftButton)  # type: ignore[no-untyped-call]
        qtbot.waitUntil(lambda: window.attached_session is not None, timeout=30_000)
        qtbot.waitUntil(lambda: window.records.model.settled, timeout=30_000)
        assert window.records.model.total == 0

        outcome: dict[str, Any] = {}
        agent = threading.Thread(target=_add_over_mcp, args=(str(started["url"]), outcome),
                                 name="mcp-test-agent")
        agent.start()
        qtbot.waitUntil(lambda: not agent.is_alive(), timeout=60_000)
        agent.join()
        assert "error" not in outcome, outcome.get("error")
        assert outcome["result"]["decision"] == "inserted"

        # The window follows the MCP server's events: the record appears without any action.
        qtbot.waitUntil(lambda: MEMORY in _contents(window), timeout=30_000)
        qtbot.waitUntil(lambda: window.count_label.text() == "1 record", timeout=15_000)
        run(qtbot, window.detach())
        process.terminate()
        process.wait(timeout=30)
        assert process.returncode == 0
    finally:
        reap(process)
