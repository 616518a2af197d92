"""The LLM provider settings dialog (issue 9): provider, base URL, model, where the key is,
daily budget, token window, timeouts, and "Test connection".

* The key is never shown: it is read from an environment variable (the dialog names the
  variable and says whether it is set) or kept in the OS keyring (typed into a password field,
  stored on Save, on a worker). The settings value and file hold no key.
* Test connection sends one small real request with the settings as they are in the form
  (saved or not) through :func:`engine.llm.check_connection` on the task runner: a busy bar
  and the elapsed time while it runs, Cancel, and the outcome in plain words (reply and
  latency, or what failed and what to check).
* Problems are shown inline under the field they concern, naming it (``LLMSettings.problems``
  plus the settings' own validation).
* Save emits :attr:`ProviderSettingsDialog.saved`; the window persists the settings and rebuilds
  the running gateway (:class:`LLMServices`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from engine import Clock, EventBus, Ledger, MemoryEngine
from engine.errors import ConfigInvalid
from engine.llm import (
    PROVIDER_PRESETS,
    ConnectionCheck,
    KeyringUnavailable,
    LLMGateway,
    LLMSettings,
    SecretStore,
    check_connection,
    key_lookup,
    preset_name,
)
from ui.shared.dialogs import reserve_message_area
from ui.shared.tasks import CancelFlag, RequestTokens, TaskRunner, spawn

__all__ = ["FIELD_NAMES", "LLMServices", "ProviderSettingsDialog"]

FIELD_NAMES = {"provider": "Provider", "kind": "Provider", "base_url": "Base URL",
               "model": "Model", "api_key_env": "Key variable", "key": "API key",
               "daily_budget_usd": "Daily budget", "tpm_limit": "Token window",
               "connect_timeout_s": "Connect timeout", "read_timeout_s": "Read timeout",
               "total_timeout_s": "Total timeout"}
"""The label of each settings field, used in inline error messages."""

KEY_SOURCES = (("env", "Environment variable"), ("keyring", "OS keyring"),
               ("none", "No key (local server)"))
OK_COLOUR, FAIL_COLOUR = "#1a7f37", "#cf222e"


@dataclass(frozen=True, slots=True)
class LLMServices:
    """What ``app`` gives the window for the LLM provider: settings, saving, the gateway.

    Attributes:
        settings: The settings in effect at start (file section under the environment).
        make_gateway: Builds a gateway on an open engine's ledger and events (blocking).
        save: Persists settings (atomically; blocking: run it on a worker).
        secrets: Where typed keys are kept (the OS keyring).
        env_overrides: ``MNEMOSCOPE_LLM_*`` variables set now: they win at the next start.
        problem: Why the saved settings could not be used (shown in the Budget view).
    """

    settings: LLMSettings
    make_gateway: Callable[[MemoryEngine, LLMSettings], LLMGateway]
    save: Callable[[LLMSettings], None]
    secrets: SecretStore
    env_overrides: tuple[str, ...] = ()
    problem: str = ""


def _spin(minimum: float, maximum: float, value: float, suffix: str,
          decimals: int = 1, parent: QWidget | None = None) -> QDoubleSpinBox:
    spin = QDoubleSpinBox(parent)
    spin.setRange(minimum, maximum)
    spin.setDecimals(decimals)
    spin.setValue(value)
    spin.setSuffix(suffix)
    return spin


class ProviderSettingsDialog(QDialog):
    """Edit and test the LLM provider settings.

    Signals:
        saved(object): The validated :class:`LLMSettings` (a typed key is already stored).
        tested(object): A :class:`ConnectionCheck` was shown.
    """

    saved = Signal(object)
    tested = Signal(object)

    def __init__(self, runner: TaskRunner, settings: LLMSettings, secrets: SecretStore, *,
                 ledger: Ledger | None = None, events: EventBus | None = None,
                 clock: Clock | None = None, env: Mapping[str, str] | None = None,
                 env_overrides: tuple[str, ...] = (), parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("LLM provider")
        self._runner = runner
        self._base = settings
        self._secrets = secrets
        self._ledger, self._events, self._clock = ledger, events, clock
        self._env = os.environ if env is None else env
        self._tests = RequestTokens()
        self._probes = RequestTokens()
        self._cancel: CancelFlag | None = None
        self._started = 0.0
        self._limit = 0.0
        self._keyring: tuple[bool, bool] | None = None  # (available, a key is kept)
        self.last_result: ConnectionCheck | None = None

        self.provider = QComboBox(self)
        self.provider.addItem("None (local heuristics only)", "")
        for preset in PROVIDER_PRESETS.values():
            self.provider.addItem(preset.label, preset.name)
        self.base_url = QLineEdit(settings.base_url, self)
        self.model = QLineEdit(settings.model, self)
        self.model.setPlaceholderText("for example gpt-4o-mini, claude-3-5-haiku-latest, llama3.2")
        self.key_source = QComboBox(self)
        for value, label in KEY_SOURCES:
            self.key_source.addItem(label, value)
        self.key_env = QLineEdit(settings.api_key_env or "", self)
        self.key_env.setPlaceholderText("the variable that holds the key")
        self.key = QLineEdit(self)
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("type a key to store it in the OS keyring on Save")
        self.key_status = QLabel("", self)
        self.key_status.setWordWrap(True)
        self.budget = _spin(0.0, 100_000.0, max(0.0, settings.daily_budget_usd), "", 2, self)
        self.budget.setPrefix("$ ")
        self.budget.setSpecialValueText("off (no daily limit)")
        self.tpm = QSpinBox(self)
        self.tpm.setRange(0, 100_000_000)
        self.tpm.setSingleStep(1000)
        self.tpm.setSuffix(" tokens/min")
        self.tpm.setValue(settings.tpm_limit or 0)
        self.connect_timeout = _spin(0.1, 600.0, settings.connect_timeout_s, " s", 1, self)
        self.read_timeout = _spin(0.1, 3600.0, settings.read_timeout_s, " s", 1, self)
        self.total_timeout = _spin(0.1, 7200.0, settings.total_timeout_s, " s", 1, self)
        self.price_label = QLabel("", self)
        self.price_label.setWordWrap(True)
        self.env_note = QLabel("", self)
        self.env_note.setWordWrap(True)
        if env_overrides:
            self.env_note.setText("Set in the environment, and used instead of the saved "
                                  "values at the next start: " + ", ".join(env_overrides))
        self.env_note.setVisible(bool(env_overrides))

        self.errors: dict[str, QLabel] = {}
        self._field_widgets: dict[str, QWidget] = {
            "provider": self.provider, "kind": self.provider, "base_url": self.base_url,
            "model": self.model, "api_key_env": self.key_env, "key": self.key,
            "daily_budget_usd": self.budget, "tpm_limit": self.tpm,
            "connect_timeout_s": self.connect_timeout, "read_timeout_s": self.read_timeout,
            "total_timeout_s": self.total_timeout}
        form = self._build_form()

        self.test_button = QPushButton("Test connection", self)
        self.cancel_test_button = QPushButton("Cancel test", self)
        self.cancel_test_button.setEnabled(False)
        self.busy = QProgressBar(self)
        self.busy.setRange(0, 0)  # an indeterminate bar: the spinner while a test runs
        self.busy.setMaximumHeight(12)
        self.busy.setTextVisible(False)
        self.busy.hide()
        self.elapsed = QLabel("", self)
        self.result_label = QLabel("Test connection sends one short request (a few tokens) "
                                   "with the settings above, saved or not.", self)
        reserve_message_area(self.result_label)
        self.result_label.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse)
        self._timer = QTimer(self)
        self._timer.setInterval(100)
        self._timer.timeout.connect(self._on_timer_timeout)
        test_row = QHBoxLayout()
        for widget, stretch in ((self.test_button, 0), (self.cancel_test_button, 0),
                                (self.busy, 1), (self.elapsed, 0)):
            test_row.addWidget(widget, stretch)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save
                                        | QDialogButtonBox.StandardButton.Cancel, self)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.env_note)
        layout.addLayout(test_row)
        layout.addWidget(self.result_label)
        layout.addStretch(1)
        layout.addWidget(self.buttons)
        self.setMinimumWidth(520)
        # Wrapped labels report one line as their minimum: reserve what they may need, so a
        # dialog shrunk to its minimum never draws them under the next row.
        line = self.fontMetrics().lineSpacing()
        for wrapped, lines in ((self.key_status, 2), (self.price_label, 2),
                               (self.result_label, 3)):
            wrapped.setMinimumHeight(lines * line + 2)
            wrapped.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)

        self._select(self.provider, preset_name(settings))
        self._select(self.key_source, "env" if settings.api_key_env
                     else "keyring" if settings.use_keyring else "none")
        self._previous = str(self.provider.currentData())
        self.provider.currentIndexChanged.connect(self._on_provider_changed)
        self.key_source.currentIndexChanged.connect(self._on_key_source_changed)
        self.key_env.textChanged.connect(self._on_key_env_changed)
        self.model.textChanged.connect(self._on_model_changed)
        self.test_button.clicked.connect(self._on_test_clicked)
        self.cancel_test_button.clicked.connect(self.cancel_test)
        self.buttons.accepted.connect(self._on_save_clicked)
        self.buttons.rejected.connect(self.reject)
        self._refresh_hints()
        spawn(self._probe_keyring())

    def _build_form(self) -> QFormLayout:
        """The fields, each followed by its (hidden) inline error line."""
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        rows: tuple[tuple[str, str | None, QWidget], ...] = (
            ("Provider", "provider", self.provider), ("Base URL", "base_url", self.base_url),
            ("Model", "model", self.model), ("API key from", None, self.key_source),
            ("Key variable", "api_key_env", self.key_env), ("API key", "key", self.key),
            ("", None, self.key_status), ("Daily budget", "daily_budget_usd", self.budget),
            ("Token window", "tpm_limit", self.tpm),
            ("Connect timeout", "connect_timeout_s", self.connect_timeout),
            ("Read timeout", "read_timeout_s", self.read_timeout),
            ("Total timeout", "total_timeout_s", self.total_timeout),
            ("", None, self.price_label))
        for label, name, widget in rows:
            form.addRow(label, widget)
            if name is not None:
                error = QLabel("", self)
                error.setWordWrap(True)
                error.setStyleSheet(f"color: {FAIL_COLOUR};")
                error.hide()
                form.addRow("", error)
                self.errors[name] = error
        self.errors["kind"] = self.errors["provider"]
        return form

    # -- form state ------------------------------------------------------------------------

    @staticmethod
    def _select(combo: QComboBox, value: str) -> None:
        index = combo.findData(value)
        combo.setCurrentIndex(max(index, 0))

    def _provider_name(self) -> str:
        return str(self.provider.currentData() or "")

    def _key_source(self) -> str:
        return str(self.key_source.currentData())

    def _on_provider_changed(self, _index: int) -> None:
        """Follow the new provider's defaults where the user kept the old ones."""
        old = PROVIDER_PRESETS.get(self._previous)
        new = PROVIDER_PRESETS.get(self._provider_name())
        self._previous = self._provider_name()
        if new is not None:
            if not self.base_url.text().strip() or (
                    old is not None and self.base_url.text().strip() == old.base_url):
                self.base_url.setText(new.base_url)
            if not self.key_env.text().strip() or (
                    old is not None and self.key_env.text().strip() == old.api_key_env):
                self.key_env.setText(new.api_key_env or "")
            # a local server needs no key; a cloud one after "none"/local: its key variable
            keep = old is not None and not old.local and self._key_source() != "none"
            self._select(self.key_source, "none" if new.local else
                         self._key_source() if keep else "env")
        self._refresh_hints()
        spawn(self._probe_keyring())

    def _on_key_source_changed(self, _index: int) -> None:
        self._refresh_hints()

    def _on_key_env_changed(self, _text: str) -> None:
        self._refresh_hints()

    def _on_model_changed(self, _text: str) -> None:
        self._refresh_hints()

    def _refresh_hints(self) -> None:
        chosen = bool(self._provider_name())
        for widget in (self.base_url, self.model, self.key_source, self.budget, self.tpm,
                       self.connect_timeout, self.read_timeout, self.total_timeout,
                       self.test_button):
            widget.setEnabled(chosen and (widget is not self.test_button or self._cancel is None))
        source = self._key_source()
        self.key_env.setEnabled(chosen and source == "env")
        self.key.setEnabled(chosen and source == "keyring")
        self.key_status.setText(self._key_status_text() if chosen else "")
        preset = PROVIDER_PRESETS.get(self._provider_name())
        table = dataclasses.replace(self._base, kind=preset.kind, tpm_limit=None).tpm \
            if preset is not None else self._base.tpm
        self.tpm.setSpecialValueText(f"default ({table:,} tokens/min)")
        self.price_label.setText(self._price_text() if chosen else
                                 "No provider: extraction and compaction use local heuristics.")

    def _key_status_text(self) -> str:
        source, account = self._key_source(), self._provider_name()
        if source == "none":
            return "No key is sent (local servers usually need none)."
        if source == "env":
            name = self.key_env.text().strip()
            if not name:
                return "Name the environment variable that holds the key."
            state = "is set" if self._env.get(name, "").strip() else "is not set"
            return f"{name} {state} in this environment (the key itself is never shown)."
        if self._keyring is None:
            return "Checking the OS keyring…"
        available, kept = self._keyring
        if not available:
            return ("No OS keyring is available on this system: choose an environment "
                    "variable instead.")
        if kept:
            return f"A key for “{account}” is kept in the OS keyring; type a new one to replace it."
        return f"No key for “{account}” in the OS keyring yet: type it above; Save stores it."

    def _price_text(self) -> str:
        model = self.model.text().strip()
        if not model:
            return ""
        price = self._base.price_for(model)
        if price.input_per_million == 0 and price.output_per_million == 0:
            return (f"No price known for “{model}”: its calls count $0 against the budget "
                    f"(set MNEMOSCOPE_LLM_PRICES to price it).")
        return (f"Price of “{model}”: ${price.input_per_million:g} in / "
                f"${price.output_per_million:g} out per million tokens.")

    async def _probe_keyring(self) -> None:
        """Ask (on a worker: the keyring may block) whether it works and keeps a key."""
        account, token = self._provider_name(), self._probes.next_token()
        if not account:
            return
        secrets = self._secrets

        def probe() -> tuple[bool, bool]:
            available = secrets.available()
            return available, available and secrets.get(account) is not None

        state = await self._runner.run(probe)
        if self._probes.is_current(token):
            self._keyring = state
            self._refresh_hints()

    # -- validation ------------------------------------------------------------------------

    def candidate(self) -> LLMSettings | None:
        """The settings in the form, or None after showing what is wrong under each field."""
        self._clear_errors()
        name = self._provider_name()
        if not name:
            return dataclasses.replace(self._base, provider="", kind=None)
        preset = PROVIDER_PRESETS[name]
        source = self._key_source()
        fields: dict[str, object] = {
            "provider": name, "kind": preset.kind,
            "base_url": self.base_url.text().strip().rstrip("/"),
            "model": self.model.text().strip(),
            "api_key_env": self.key_env.text().strip() if source == "env" else None,
            "use_keyring": source == "keyring", "daily_budget_usd": self.budget.value(),
            "tpm_limit": self.tpm.value() or None,
            "connect_timeout_s": self.connect_timeout.value(),
            "read_timeout_s": self.read_timeout.value(),
            "total_timeout_s": self.total_timeout.value()}
        problems: list[ConfigInvalid] = []
        try:
            settings = dataclasses.replace(self._base, **fields)  # type: ignore[arg-type]
        except ConfigInvalid as exc:  # the spin boxes' ranges leave only the URL to refuse
            if exc.field != "llm.base_url":
                raise
            problems.append(exc)  # and collect the other fields' problems without it
            settings = dataclasses.replace(self._base, **{**fields, "base_url": ""})  # type: ignore[arg-type]
        problems += [p for p in settings.problems()
                     if not (problems and p.field == "llm.base_url")]
        if source == "env" and not self.key_env.text().strip():
            problems.append(ConfigInvalid("llm.api_key_env", "", "is required: name the "
                                          "environment variable that holds the key"))
        if problems:
            self._show_errors(problems)
            return None
        return settings

    def _clear_errors(self) -> None:
        for label in self.errors.values():
            label.clear()
            label.hide()

    def _show_errors(self, problems: tuple[ConfigInvalid, ...] | list[ConfigInvalid]) -> None:
        first: QWidget | None = None
        for problem in problems:
            name = problem.field.rsplit(".", 1)[-1]
            self._field_error(name, f"{FIELD_NAMES.get(name, name)}: {problem.reason}")
            first = first or self._field_widgets.get(name)
        if first is not None:
            first.setFocus()

    def _field_error(self, name: str, text: str) -> None:
        label = self.errors.get(name, self.errors["provider"])
        label.setText(text if not label.text() else f"{label.text()}\n{text}")
        label.show()

    # -- test connection -------------------------------------------------------------------

    def _on_test_clicked(self) -> None:
        spawn(self.test_connection())

    async def test_connection(self) -> ConnectionCheck | None:
        """Test the form's settings on a worker; None when invalid, cancelled or superseded."""
        settings = self.candidate()
        if settings is None:
            return None
        if not settings.configured:
            self._show_result_text("Choose a provider first.", FAIL_COLOUR)
            return None
        typed = self.key.text() if self._key_source() == "keyring" else ""
        lookup: Callable[[], str | None] = (lambda: typed) if typed else \
            key_lookup(settings, self._secrets, self._env)
        token, flag = self._tests.next_token(), CancelFlag()
        self._set_testing(flag, settings)
        try:
            result = await self._runner.run(
                check_connection, settings, lookup, ledger=self._ledger, events=self._events,
                clock=self._clock, cancelled=flag.is_set)
        finally:
            if self._tests.is_current(token):
                self._set_testing(None, settings)
        if not self._tests.is_current(token):
            return None
        self.last_result = result
        self._show_result_text(result.summary, OK_COLOUR if result.ok else FAIL_COLOUR)
        self.tested.emit(result)
        return result

    def cancel_test(self) -> None:
        """Stop waiting for the running test (its worker ends at its own timeout)."""
        if self._cancel is None:
            return
        self._cancel.set()
        self._tests.next_token()
        self._set_testing(None, None)
        self._show_result_text("Test cancelled.", FAIL_COLOUR)

    def _set_testing(self, flag: CancelFlag | None, settings: LLMSettings | None) -> None:
        self._cancel = flag
        running = flag is not None
        self.busy.setVisible(running)
        self.cancel_test_button.setEnabled(running)
        self.test_button.setEnabled(not running and bool(self._provider_name()))
        if running and settings is not None:
            self._started = time.monotonic()
            self._limit = settings.read_timeout_s if not settings.stream \
                else settings.total_timeout_s
            self._show_result_text(f"Sending one short request to {settings.model}…", "")
            self._on_timer_timeout()
            self._timer.start()
        else:
            self._timer.stop()
            self.elapsed.clear()

    def _on_timer_timeout(self) -> None:
        self.elapsed.setText(f"{time.monotonic() - self._started:.1f} s "
                             f"(gives up after {self._limit:g} s)")

    def _show_result_text(self, text: str, colour: str) -> None:
        self.result_label.setText(text)
        self.result_label.setStyleSheet(f"color: {colour};" if colour else "")

    # -- save / close ----------------------------------------------------------------------

    def _on_save_clicked(self) -> None:
        spawn(self.save())

    async def save(self) -> LLMSettings | None:
        """Validate, keep a typed key in the OS keyring (worker), emit :attr:`saved`, close."""
        settings = self.candidate()
        if settings is None:
            return None
        typed = self.key.text()
        if settings.use_keyring and typed:
            try:
                await self._runner.run(self._secrets.set, settings.keyring_account, typed)
            except KeyringUnavailable as exc:
                self._field_error("key", f"API key: {exc}")
                return None
            self.key.clear()
        self.cancel_test()
        self.saved.emit(settings)
        self.accept()
        return settings

    def reject(self) -> None:
        """Close without saving (a running test is cancelled)."""
        self.cancel_test()
        super().reject()
