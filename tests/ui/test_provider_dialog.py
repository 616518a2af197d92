"""LLM provider settings dialog (issue 9): reachable from the menu and the Budget view; Test
connection through the real provider code against the real HTTP test server on 127.0.0.1
(success, 401, refused port, timeout, cancel); inline validation naming the field; Save
persists atomically and rebuilds the running gateway; the key is never shown unmasked, nor
written to the ledger, the events or the settings file."""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtWidgets import QLineEdit
from pytestqt.qtbot import QtBot

from app.settings import Settings, SettingsFile, load_settings
from engine.llm import (
    ChatMessage,
    ChatRequest,
    ConnectionCheck,
    KeyringStore,
    LLMGateway,
    LLMSettings,
    ProviderKind,
    SecretStore,
    key_lookup,
    llm_settings_from_env,
    llm_settings_to_json,
)
from engine.memory_engine import MemoryEngine
from tests.support.fakes import DictSecrets
from tests.support.llm_server import Behaviour, LLMTestServer
from tests.ui.conftest import DEMO, child_import, open_store, run
from tests.ui.redaction_scan import shown_texts
from ui.main_window import MainWindow
from ui.settings.provider_dialog import LLMServices, ProviderSettingsDialog
from ui.shared.dialogs import ImportProgressDialog
from ui.shared.tasks import TaskRunner, pending_tasks, spawn

# The offscreen platform warns when a dialog window is shown; nothing else may warn.
pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")

KEY = "sk-live-TOPSECRET-a1b2c3d4e5f6g7h8"
WRONG = "sk-wrong-ECHOED-0000111122223333"



@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer(Behaviour(content="pong", input_tokens=8, output_tokens=1),
                       api_key=KEY) as running:
        yield running


def _gateway(secrets: SecretStore, engine: MemoryEngine, settings: LLMSettings) -> LLMGateway:
    return LLMGateway(settings, ledger=engine.ledger, events=engine.events, clock=engine.clock,
                      api_key=key_lookup(settings, secrets, {}))


def _services(tmp_path: Path, secrets: SecretStore) -> tuple[LLMServices, SettingsFile]:
    settings_file = SettingsFile(Settings(data_dir=str(tmp_path / "data")), tmp_path / "config")

    def save(updated: LLMSettings) -> None:
        settings_file.update(llm=llm_settings_to_json(updated))

    services = LLMServices(settings=LLMSettings(), save=save, secrets=secrets,
                           make_gateway=lambda engine, s: _gateway(secrets, engine, s))
    return services, settings_file


@pytest.fixture
def secrets() -> DictSecrets:
    return DictSecrets()


@pytest.fixture
def window(qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow],
           secrets: DictSecrets) -> MainWindow:
    services, _file = _services(tmp_path, secrets)
    made = make_window(llm=services)
    open_store(qtbot, made, tmp_path / "store")
    return made


def _dialog(window: MainWindow) -> ProviderSettingsDialog:
    window.provider_action.trigger()  # Settings → LLM Provider…
    dialog = window.provider_dialog
    assert dialog is not None and dialog.isVisible()
    return dialog


def _fill(dialog: ProviderSettingsDialog, server: LLMTestServer, *, key: str | None = KEY,
          base_url: str | None = None, **spins: float) -> None:
    dialog.provider.setCurrentIndex(dialog.provider.findData("openai"))
    dialog.base_url.setText(base_url or server.base_url + "/v1")
    dialog.model.setText("test-model")
    if key is not None:
        dialog.key_source.setCurrentIndex(dialog.key_source.findData("keyring"))
        dialog.key.setText(key)
    for name, value in spins.items():
        getattr(dialog, name).setValue(value)


def _test(qtbot: QtBot, dialog: ProviderSettingsDialog) -> ConnectionCheck:
    with qtbot.waitSignal(dialog.tested, timeout=15_000) as shown:
        dialog.test_button.click()
    result: ConnectionCheck = shown.args[0]
    return result


def _ledger_and_events(window: MainWindow) -> str:
    session = window.session
    assert session is not None
    ledger = session.engine.ledger
    rows = [dict(r) for r in ledger.query("SELECT * FROM events")]
    rows += [dict(r) for r in ledger.query("SELECT * FROM llm_calls")]
    return json.dumps(rows, default=str)


def test_success_from_the_menu_shows_reply_and_latency_key_masked(
        qtbot: QtBot, window: MainWindow, server: LLMTestServer) -> None:
    dialog = _dialog(window)
    _fill(dialog, server)
    assert dialog.key.echoMode() is QLineEdit.EchoMode.Password
    assert KEY not in dialog.key.displayText()
    result = _test(qtbot, dialog)
    assert result.ok, result.summary
    text = dialog.result_label.text()
    assert text.startswith("Connected: test-model replied “pong” in ")
    assert f"{result.latency_ms:.0f} ms" in text and "8 tokens in, 1 out" in text
    assert not dialog.busy.isVisible() and dialog.test_button.isEnabled()
    assert server.requests[-1].headers["Authorization"] == f"Bearer {KEY}"  # the typed key
    assert not [t for t in shown_texts(window) if KEY in t]
    # recorded in the open store's ledger and events (the Budget view lists it), keyless
    qtbot.waitUntil(lambda: "connection-test" in _ledger_and_events(window), timeout=5000)
    assert KEY not in _ledger_and_events(window)


def test_401_names_the_key_problem_and_never_shows_the_echoed_key(
        qtbot: QtBot, window: MainWindow, server: LLMTestServer) -> None:
    dialog = _dialog(window)
    _fill(dialog, server, key=WRONG)
    result = _test(qtbot, dialog)
    assert result.failure == "auth"
    assert dialog.result_label.text().startswith(
        "The server refused the API key (HTTP 401): check the key.")
    assert "Incorrect API key provided: <key>." in dialog.result_label.text()  # scrubbed echo
    for secret in (WRONG, KEY):
        assert not [t for t in shown_texts(window) if secret in t]
        assert secret not in _ledger_and_events(window)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_refused_port(qtbot: QtBot, window: MainWindow, server: LLMTestServer) -> None:
    dialog = _dialog(window)
    port = _closed_port()
    _fill(dialog, server, base_url=f"http://127.0.0.1:{port}/v1")
    result = _test(qtbot, dialog)
    assert result.failure == "refused"
    assert dialog.result_label.text() == (f"Connection refused: nothing is listening at "
                                          f"127.0.0.1:{port}. Is the server running, and is "
                                          f"the port right?")


def test_timeout_shows_progress_then_plain_words(qtbot: QtBot, window: MainWindow,
                                                 server: LLMTestServer) -> None:
    server.default = Behaviour("hang", delay_s=10.0)
    dialog = _dialog(window)
    _fill(dialog, server, read_timeout=0.5)
    with qtbot.waitSignal(dialog.tested, timeout=15_000) as shown:
        dialog.test_button.click()
        # while it runs: the busy bar, the elapsed time, Cancel enabled, Test disabled
        qtbot.waitUntil(lambda: dialog.busy.isVisible() and "s (gives up after"
                        in dialog.elapsed.text(), timeout=5000)
        assert dialog.cancel_test_button.isEnabled() and not dialog.test_button.isEnabled()
    assert shown.args[0].failure == "timeout"
    port = server.base_url.rsplit(":", 1)[1]
    assert dialog.result_label.text() == (f"No answer from 127.0.0.1:{port} within 0.5 s "
                                          f"(read timeout).")
    assert not dialog.busy.isVisible() and dialog.elapsed.text() == ""


def test_cancel_stops_waiting_and_drops_the_late_result(qtbot: QtBot, window: MainWindow,
                                                        server: LLMTestServer) -> None:
    server.default = Behaviour("hang", delay_s=10.0)
    dialog = _dialog(window)
    _fill(dialog, server, read_timeout=1.0)
    dialog.test_button.click()
    qtbot.waitUntil(lambda: len(server.requests) == 1, timeout=5000)
    dialog.cancel_test_button.click()
    assert dialog.result_label.text() == "Test cancelled."
    assert not dialog.busy.isVisible() and dialog.test_button.isEnabled()
    with qtbot.assertNotEmitted(dialog.tested, wait=1800):  # the worker's timeout passes
        pass
    assert dialog.result_label.text() == "Test cancelled."


def test_closing_the_store_under_a_cancelled_test_is_no_error(
        qtbot: QtBot, window: MainWindow, server: LLMTestServer) -> None:
    server.default = Behaviour("hang", delay_s=10.0)
    dialog = _dialog(window)
    _fill(dialog, server, read_timeout=1.0)
    dialog.test_button.click()
    qtbot.waitUntil(lambda: len(server.requests) == 1, timeout=5000)
    dialog.cancel_test_button.click()
    dialog.reject()  # Cancel: the dialog goes, the request still hangs on its worker
    assert run(qtbot, window.close_store()) is None and window.session is None
    # the worker's read timeout passes after the store's ledger closed: the test's row cannot
    # be written, which is no crash (pytest-qt fails the test on an escaped exception)
    qtbot.waitUntil(lambda: not pending_tasks(), timeout=10_000)


def test_validation_errors_are_inline_and_name_the_field(
        qtbot: QtBot, window: MainWindow, server: LLMTestServer) -> None:
    dialog = _dialog(window)
    dialog.provider.setCurrentIndex(dialog.provider.findData("openai"))
    dialog.base_url.setText("ftp://example.com")
    dialog.model.setText("  ")
    dialog.key_source.setCurrentIndex(dialog.key_source.findData("env"))
    dialog.key_env.setText("1NOT-A-NAME")
    dialog.read_timeout.setValue(90.0)
    dialog.total_timeout.setValue(30.0)
    with qtbot.assertNotEmitted(dialog.saved):
        assert run(qtbot, dialog.save()) is None
    shown = {name: label.text() for name, label in dialog.errors.items() if label.isVisible()}
    assert shown["base_url"] == "Base URL: must start with http:// or https://"
    assert shown["model"].startswith("Model: is required")
    assert shown["api_key_env"].startswith("Key variable: is not an environment variable name")
    assert shown["total_timeout_s"] == "Total timeout: must be at least the read timeout (90 s)"
    assert dialog.isVisible() and server.requests == []
    assert run(qtbot, dialog.test_connection()) is None and server.requests == []
    dialog.base_url.setText(server.base_url + "/v1")  # fixed fields lose their message
    dialog.model.setText("test-model")
    dialog.key_env.setText("OPENAI_API_KEY")
    dialog.total_timeout.setValue(120.0)
    assert dialog.candidate() is not None
    assert not [label for label in dialog.errors.values() if label.isVisible()]
    assert run(qtbot, dialog.save()) is not None
    assert window.provider_dialog is None  # closed (and released)
    qtbot.waitUntil(lambda: window.llm_settings.model == "test-model"
                    and window.gateway is not None
                    and window.gateway.settings.model == "test-model")


def test_closing_the_store_while_the_gateway_rebuilds_leaves_no_gateway_on_its_ledger(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow],
        server: LLMTestServer, secrets: DictSecrets) -> None:
    services, _file = _services(tmp_path, secrets)
    building, release = threading.Event(), threading.Event()

    failures: list[Exception] = []

    def slow_gateway(engine: MemoryEngine, settings: LLMSettings) -> LLMGateway:
        if settings.configured:  # the rebuild after Save, not the one on opening
            building.set()
            release.wait(10)
        try:
            return _gateway(secrets, engine, settings)
        except Exception as exc:  # e.g. StoreUnavailable: the ledger was closed under it
            failures.append(exc)
            raise

    window = make_window(llm=dataclasses.replace(services, make_gateway=slow_gateway))
    open_store(qtbot, window, tmp_path / "store")
    dialog = _dialog(window)
    _fill(dialog, server)
    assert run(qtbot, dialog.save()) is not None  # the rebuild is spawned, not awaited
    qtbot.waitUntil(building.is_set)
    closed = spawn(window.close_store())  # File → Close while the gateway is being built
    # Closing waits for the build to finish; were it not to, it would be done (the store's
    # ledger closed under the build) well within these two seconds.
    deadline = time.monotonic() + 2.0
    qtbot.waitUntil(lambda: closed.done() or time.monotonic() > deadline, timeout=5000)
    release.set()
    qtbot.waitUntil(lambda: closed.done() and not pending_tasks(), timeout=15_000)
    assert closed.result() is None and window.session is None
    assert failures == []  # the build finished before the store's ledger closed
    assert window.gateway is None  # and was closed with the store, not left on its ledger
    assert window.llm_settings.model == "test-model"  # the saved settings still apply
    assert "not usable" not in window.budget.provider_label.text()


def test_save_persists_atomically_and_rebuilds_the_running_gateway(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow],
        server: LLMTestServer, secrets: DictSecrets) -> None:
    services, settings_file = _services(tmp_path, secrets)
    window = make_window(llm=services)
    open_store(qtbot, window, tmp_path / "store")
    qtbot.waitUntil(lambda: window.gateway is not None)
    before = window.gateway
    assert before is not None and not before.configured
    window.nav.setCurrentRow(list(window.views).index("budget"))
    window.budget.settings_button.click()  # the Budget view's way in
    dialog = window.provider_dialog
    assert dialog is not None
    _fill(dialog, server, budget=2.5, tpm=20_000, connect_timeout=3.0)
    with qtbot.waitSignal(window.budget.refreshed, timeout=15_000,
                          check_params_cb=lambda s: s.status.configured):
        assert run(qtbot, dialog.save()) is not None
    assert window.provider_dialog is None  # closed (and released)
    gateway = window.gateway
    assert gateway is not None and gateway is not before and gateway.configured
    assert (gateway.settings.base_url, gateway.settings.model) == (server.base_url + "/v1",
                                                                  "test-model")
    assert gateway.budget.budget_usd == 2.5 and gateway.settings.tpm == 20_000
    assert window.budget.provider_label.text().startswith("openai · test-model")
    assert secrets.kept == {"openai": KEY}  # the typed key went to the keyring only
    path = tmp_path / "config" / "settings.json"
    text = path.read_text(encoding="utf-8")
    assert KEY not in text
    assert not list(path.parent.glob("*.tmp"))  # atomic: no temp file left behind
    loaded = load_settings({}, config_dir=tmp_path / "config").llm_settings({})
    assert llm_settings_to_json(loaded) == llm_settings_to_json(gateway.settings)
    assert settings_file.current.llm["use_keyring"] is True
    # the rebuilt gateway really calls the provider with the key from the keyring
    answer = run(qtbot, window._runner.run(
        gateway.complete, ChatRequest((ChatMessage("user", "hi"),), max_tokens=1)))
    assert answer.text == "pong"
    assert server.requests[-1].headers["Authorization"] == f"Bearer {KEY}"
    assert KEY not in _ledger_and_events(window)


def test_no_os_keyring_is_said_inline_and_nothing_is_saved(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow],
        server: LLMTestServer) -> None:
    keyring = KeyringStore()  # the real OS keyring: this machine has no backend
    assert not keyring.available()
    services, settings_file = _services(tmp_path, keyring)
    window = make_window(llm=services)
    dialog = _dialog(window)
    _fill(dialog, server)
    qtbot.waitUntil(lambda: "No OS keyring is available" in dialog.key_status.text())
    with qtbot.assertNotEmitted(dialog.saved):
        assert run(qtbot, dialog.save()) is None
    error = dialog.errors["key"]
    assert error.isVisible() and error.text().startswith(
        "API key: the OS keyring could not keep the key for 'openai'")
    assert KEY not in error.text() and dialog.isVisible()
    assert settings_file.current.llm == {}


def test_env_source_says_whether_the_variable_is_set_never_its_value(
        qtbot: QtBot, window: MainWindow, server: LLMTestServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNEMO_TEST_KEY", KEY)
    dialog = _dialog(window)
    _fill(dialog, server, key=None)
    dialog.key_source.setCurrentIndex(dialog.key_source.findData("env"))
    dialog.key_env.setText("MNEMO_TEST_KEY")
    assert dialog.key_status.text().startswith("MNEMO_TEST_KEY is set in this environment")
    result = _test(qtbot, dialog)
    assert result.ok, result.summary  # the key came from the variable
    dialog.key_env.setText("MNEMO_TEST_UNSET")
    assert "MNEMO_TEST_UNSET is not set" in dialog.key_status.text()
    assert not [t for t in shown_texts(window) if KEY in t]


def test_provider_choice_fills_its_defaults(qtbot: QtBot, window: MainWindow) -> None:
    dialog = _dialog(window)
    dialog.provider.setCurrentIndex(dialog.provider.findData("anthropic"))
    assert dialog.base_url.text() == "https://api.anthropic.com"
    assert dialog.key_env.text() == "ANTHROPIC_API_KEY"
    assert dialog.key_source.currentData() == "env"  # a cloud provider: its key variable
    assert dialog.tpm.specialValueText() == "default (40,000 tokens/min)"
    dialog.provider.setCurrentIndex(dialog.provider.findData("ollama"))
    assert dialog.base_url.text() == "http://127.0.0.1:11434/v1"
    assert dialog.key_source.currentData() == "none"
    dialog.model.setText("llama3.2")
    assert "No price known for “llama3.2”" in dialog.price_label.text()
    dialog.model.setText("gpt-4o-mini")
    assert dialog.price_label.text() == ("Price of “gpt-4o-mini”: $0.15 in / $0.6 out per "
                                         "million tokens.")


def test_the_budget_view_follows_the_store_reopened_after_an_import(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow],
        server: LLMTestServer, secrets: DictSecrets) -> None:
    services, _file = _services(tmp_path, secrets)
    window = make_window(llm=services, bulk_import=child_import)
    open_store(qtbot, window, tmp_path / "store")
    dialog = ImportProgressDialog("Import", window)
    summary = run(qtbot, window.run_import(DEMO, dialog=dialog), timeout=180)
    dialog.accept()
    assert summary is not None and summary.written > 0
    session = window.session
    assert session is not None and window.gateway is not None
    # the out-of-process import closed and reopened the engine: the gateway follows it
    assert window.budget._ledger is session.engine.ledger
    provider = _dialog(window)
    _fill(provider, server)
    assert _test(qtbot, provider).ok

    def listed() -> bool:
        calls = window.budget.calls
        return any(calls.topLevelItem(i).text(1) == "connection test"  # type: ignore[union-attr]
                   for i in range(calls.topLevelItemCount()))

    qtbot.waitUntil(listed, timeout=10_000)  # live: the llm:connection-test event refreshed it


def test_an_alias_from_the_environment_shows_its_provider(
        qtbot: QtBot, qloop: object, runner: TaskRunner, secrets: DictSecrets) -> None:
    settings = llm_settings_from_env({"MEMORY_LLM_PRIMARY": "claude",
                                      "MNEMOSCOPE_LLM_MODEL": "claude-3-5-haiku-latest"})
    dialog = ProviderSettingsDialog(runner, settings, secrets,
                                    env_overrides=("MEMORY_LLM_PRIMARY",))
    qtbot.addWidget(dialog)
    assert dialog.provider.currentData() == "anthropic"
    assert dialog.base_url.text() == "https://api.anthropic.com"
    assert dialog.key_source.currentData() == "env"
    assert dialog.key_env.text() == "ANTHROPIC_API_KEY"
    assert "MEMORY_LLM_PRIMARY" in dialog.env_note.text()
    candidate = dialog.candidate()
    assert candidate is not None and candidate.kind is ProviderKind.ANTHROPIC
