"""LLM provider settings: one frozen value built by ``app`` (STYLE §8) and handed down.

Keys are never part of the settings value: :class:`LLMSettings` names *where* the key is (an
environment variable, or the OS keyring via ``keyring``) and :func:`resolve_api_key` reads it at
call time. ``repr`` of the settings therefore never shows a secret, and neither does an export.

Environment variables (all optional; see docs/llm.md):

==================================  =========================================================
``MNEMOSCOPE_LLM_PROVIDER``         openai, anthropic, ollama, vllm, lmstudio, llamacpp
                                    (``MEMORY_LLM_PRIMARY`` of seed 000 §3 is an alias:
                                    ``claude`` = anthropic)
``MNEMOSCOPE_LLM_BASE_URL``         API base (defaults per provider, e.g. Ollama's
                                    ``http://127.0.0.1:11434/v1``)
``MNEMOSCOPE_LLM_MODEL``            model name
``MNEMOSCOPE_LLM_API_KEY_ENV``      name of the variable holding the key (default
                                    ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``)
``MNEMOSCOPE_LLM_DAILY_BUDGET_USD`` daily budget; 0 disables enforcement (seed 000 §6)
``MNEMOSCOPE_LLM_TIMEOUT_S``        read timeout per call (connect timeout is 5 s)
``MNEMOSCOPE_LLM_TOTAL_TIMEOUT_S``  deadline for a whole (streamed) answer
``MNEMOSCOPE_LLM_MAX_TOKENS``       max output tokens per call
``MNEMOSCOPE_LLM_MAX_ATTEMPTS``     attempts per call (first try + retries)
``MNEMOSCOPE_LLM_STREAM``           1/0: stream answers (SSE)
``MNEMOSCOPE_LLM_RPM``              requests per minute allowed by the rate limiter
``MNEMOSCOPE_LLM_TPM``              tokens-per-minute limit (overrides the table of seed 000 §3)
``MNEMOSCOPE_LLM_PRICES``           JSON ``{"model-prefix": [usd_per_M_input, usd_per_M_output]}``
==================================  =========================================================

The settings file's ``llm`` section (written by the GUI's provider dialog) holds the editable
part (:data:`FILE_FIELDS`): :func:`llm_settings_to_json` / :func:`llm_settings_from_json`; the
environment is applied over it. :meth:`LLMSettings.problems` lists what a user must fix before
saving, each naming its field. Keys a user types are kept by a :class:`SecretStore` — the OS
keyring (:class:`KeyringStore`), never the settings file.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Protocol
from urllib.parse import urlsplit

from engine.errors import ConfigInvalid
from engine.llm.backoff import BackoffConfig
from engine.llm.breaker import CircuitConfig
from engine.llm.errors import KeyringUnavailable
from engine.llm.projection import DEFAULT_TOKENS_PER_MINUTE

__all__ = [
    "DEFAULT_PRICES",
    "FILE_FIELDS",
    "KEYRING_SERVICE",
    "PROVIDER_PRESETS",
    "KeyringStore",
    "LLMSettings",
    "ModelPrice",
    "ProviderKind",
    "ProviderPreset",
    "SecretStore",
    "env_overrides",
    "key_lookup",
    "llm_settings_from_env",
    "llm_settings_from_json",
    "llm_settings_to_json",
    "preset_name",
    "resolve_api_key",
]

KEYRING_SERVICE = "mnemoscope"
"""Keyring service name; the user name is the provider kind (``openai`` / ``anthropic``)."""


class ProviderKind(StrEnum):
    """The two wire protocols spoken."""

    OPENAI = "openai"  # OpenAI chat completions: OpenAI, Ollama, vLLM, llama.cpp, LM Studio
    ANTHROPIC = "anthropic"  # Anthropic Messages


_ALIASES: Mapping[str, tuple[ProviderKind, str]] = MappingProxyType({
    "openai": (ProviderKind.OPENAI, "https://api.openai.com/v1"),
    "anthropic": (ProviderKind.ANTHROPIC, "https://api.anthropic.com"),
    "claude": (ProviderKind.ANTHROPIC, "https://api.anthropic.com"),
    "ollama": (ProviderKind.OPENAI, "http://127.0.0.1:11434/v1"),
    "vllm": (ProviderKind.OPENAI, "http://127.0.0.1:8000/v1"),
    "lmstudio": (ProviderKind.OPENAI, "http://127.0.0.1:1234/v1"),
    "llamacpp": (ProviderKind.OPENAI, "http://127.0.0.1:8080/v1"),
})
_LOCAL = frozenset({"ollama", "vllm", "lmstudio", "llamacpp"})
_LABELS = {"openai": "OpenAI", "anthropic": "Anthropic", "ollama": "Ollama (local)",
           "vllm": "vLLM (local)", "lmstudio": "LM Studio (local)",
           "llamacpp": "llama.cpp server (local)"}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per million input and output tokens."""

    input_per_million: float
    output_per_million: float

    def __post_init__(self) -> None:
        for name in ("input_per_million", "output_per_million"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or \
                    not math.isfinite(value) or value < 0:
                raise ConfigInvalid(f"price.{name}", value, "must be a finite number >= 0")

    def cost(self, input_tokens: int, output_tokens: int) -> Decimal:
        """Exact decimal cost of a call."""
        million = Decimal(1_000_000)
        return (Decimal(repr(float(self.input_per_million))) * input_tokens
                + Decimal(repr(float(self.output_per_million))) * output_tokens) / million


# Published list prices at the time of writing; override with MNEMOSCOPE_LLM_PRICES.
DEFAULT_PRICES: Mapping[str, ModelPrice] = MappingProxyType({
    "gpt-4o-mini": ModelPrice(0.15, 0.60),
    "gpt-4o": ModelPrice(2.50, 10.00),
    "gpt-4.1-mini": ModelPrice(0.40, 1.60),
    "gpt-4.1": ModelPrice(2.00, 8.00),
    "claude-3-5-haiku": ModelPrice(0.80, 4.00),
    "claude-3-5-sonnet": ModelPrice(3.00, 15.00),
    "claude-sonnet-4": ModelPrice(3.00, 15.00),
    "claude-haiku-4": ModelPrice(1.00, 5.00),
})


@dataclass(frozen=True, slots=True)
class LLMSettings:
    """Everything the gateway needs to reach one provider. Holds no secret.

    Attributes:
        provider: Display/alias name (``openai``, ``ollama``, ``anthropic`` ...); "" = none.
        kind: Wire protocol; None when no provider is configured.
        base_url: API base URL (OpenAI-style bases end in ``/v1``).
        model: Model name sent to the provider.
        api_key_env: Environment variable that holds the key (None: keyring only / no key).
        use_keyring: Look the key up in the OS keyring when the variable is unset.
        connect_timeout_s: TCP connect timeout.
        read_timeout_s: Longest silence while reading a response or stream.
        total_timeout_s: Deadline for a whole answer, streamed or not.
        max_tokens: Output token cap per call (also bounds the budget reservation).
        temperature: Sampling temperature.
        stream: Stream answers (SSE) and assemble them (seed 000 §8).
        max_attempts: First try plus retries.
        daily_budget_usd: Seed 000 §6 budget; <= 0 disables enforcement.
        prices: Model-name prefix -> price; the longest matching prefix wins.
        default_price: Price of a model missing from ``prices`` (local models cost 0).
        tokens_per_minute: Seed 000 §3 TPM table, keyed ``claude`` / ``openai``.
        tpm_limit: Explicit TPM limit for this provider (overrides the table).
        requests_per_minute: Request rate limiter.
        max_throttle_wait_ms: Longest a call waits for the rate window before failing.
        backoff: Seed 000 §2 retry delays.
        circuit: Seed 000 §4 breaker thresholds.
        json_response_format: Send ``response_format: json_object`` (OpenAI-style servers).
        anthropic_version: ``anthropic-version`` header.
    """

    provider: str = ""
    kind: ProviderKind | None = None
    base_url: str = ""
    model: str = ""
    api_key_env: str | None = None
    use_keyring: bool = True
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 60.0
    total_timeout_s: float = 180.0
    max_tokens: int = 1024
    temperature: float = 0.0
    stream: bool = True
    max_attempts: int = 4
    daily_budget_usd: float = 0.0
    prices: Mapping[str, ModelPrice] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    default_price: ModelPrice = field(default_factory=lambda: ModelPrice(0.0, 0.0))
    tokens_per_minute: Mapping[str, int] = field(
        default_factory=lambda: dict(DEFAULT_TOKENS_PER_MINUTE))
    tpm_limit: int | None = None
    requests_per_minute: int = 60
    max_throttle_wait_ms: float = 120_000.0
    backoff: BackoffConfig = field(default_factory=BackoffConfig)
    circuit: CircuitConfig = field(default_factory=CircuitConfig)
    json_response_format: bool = False
    anthropic_version: str = "2023-06-01"

    def __post_init__(self) -> None:
        for name in ("connect_timeout_s", "read_timeout_s", "total_timeout_s"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise ConfigInvalid(f"llm.{name}", value, "must be a number > 0")
        for name in ("max_tokens", "max_attempts", "requests_per_minute"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigInvalid(f"llm.{name}", value, "must be an integer >= 1")
        if not math.isfinite(self.daily_budget_usd):
            raise ConfigInvalid("llm.daily_budget_usd", self.daily_budget_usd, "must be finite")
        if self.base_url and not re.match(r"^https?://", self.base_url):
            raise ConfigInvalid("llm.base_url", self.base_url, "must start with http:// or https://")
        if self.tpm_limit is not None and (not isinstance(self.tpm_limit, int)
                                           or isinstance(self.tpm_limit, bool)
                                           or self.tpm_limit < 1):
            raise ConfigInvalid("llm.tpm_limit", self.tpm_limit, "must be an integer >= 1")
        object.__setattr__(self, "prices", dict(self.prices))
        object.__setattr__(self, "tokens_per_minute", dict(self.tokens_per_minute))

    @property
    def configured(self) -> bool:
        """True when a provider kind, base URL and model are all set."""
        return self.kind is not None and bool(self.base_url) and bool(self.model)

    @property
    def keyring_account(self) -> str:
        """The keyring user name the key is kept under: the provider name (``openai``, ...)."""
        return self.provider or (self.kind.value if self.kind is not None else "")

    def problems(self) -> tuple[ConfigInvalid, ...]:
        """What a user must fix before these settings can reach a provider, each naming its
        field (``llm.base_url``, ``llm.model`` ...). Empty when no provider is chosen (local
        heuristics only) or when nothing is missing."""
        if not self.provider and self.kind is None:
            return ()
        found: list[ConfigInvalid] = []
        if self.kind is None:
            found.append(ConfigInvalid("llm.provider", self.provider, "is not a known provider")
                         if self.provider.lower() not in _ALIASES else
                         ConfigInvalid("llm.kind", None, "is not set (openai or anthropic)"))
        url = urlsplit(self.base_url)
        if not self.base_url:
            found.append(ConfigInvalid("llm.base_url", self.base_url, "is required"))
        elif url.scheme not in ("http", "https") or not url.hostname:
            found.append(ConfigInvalid("llm.base_url", self.base_url,
                                       "must look like http(s)://host[:port][/path]"))
        elif url.username or url.password:
            found.append(ConfigInvalid("llm.base_url", "<hidden>", "must not hold a user name "
                                       "or password (the key has its own field)"))
        if not self.model.strip():
            found.append(ConfigInvalid("llm.model", self.model,
                                       "is required (for example gpt-4o-mini or llama3.2)"))
        if self.api_key_env is not None and not _ENV_NAME.match(self.api_key_env):
            found.append(ConfigInvalid("llm.api_key_env", self.api_key_env,
                                       "is not an environment variable name (letters, digits "
                                       "and _, not starting with a digit)"))
        if self.read_timeout_s > self.total_timeout_s:
            found.append(ConfigInvalid("llm.total_timeout_s", self.total_timeout_s,
                                       f"must be at least the read timeout "
                                       f"({self.read_timeout_s:g} s)"))
        return tuple(found)

    @property
    def tpm(self) -> int:
        """Tokens-per-minute limit used by the projector (seed 000 §3 table, or the override)."""
        if self.tpm_limit is not None:
            return self.tpm_limit
        key = "claude" if self.kind is ProviderKind.ANTHROPIC else "openai"
        return int(self.tokens_per_minute.get(key, DEFAULT_TOKENS_PER_MINUTE[key]))

    def price_for(self, model: str) -> ModelPrice:
        """Price of ``model``: the longest matching prefix in ``prices``, else the default."""
        best = ""
        for prefix in self.prices:
            if model.startswith(prefix) and len(prefix) > len(best):
                best = prefix
        return self.prices[best] if best else self.default_price

    def with_overrides(self, *, provider: str | None = None, model: str | None = None
                       ) -> LLMSettings:
        """A copy for another provider alias and/or model (CLI ``--provider`` / ``--model``)."""
        changes: dict[str, object] = {}
        if provider:
            kind, base = _alias(provider, "provider")
            changes.update(provider=provider.lower(), kind=kind)
            if provider.lower() != self.provider:
                changes["base_url"] = base
                changes["api_key_env"] = _default_key_env(provider.lower(), kind)
        if model:
            changes["model"] = model
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def _alias(name: str, field_name: str) -> tuple[ProviderKind, str]:
    key = name.strip().lower()
    if key not in _ALIASES:
        raise ConfigInvalid(field_name, name, f"unknown provider; one of {', '.join(_ALIASES)}")
    return _ALIASES[key]


def _default_key_env(provider: str, kind: ProviderKind) -> str | None:
    if provider in _LOCAL:
        return None
    return "ANTHROPIC_API_KEY" if kind is ProviderKind.ANTHROPIC else "OPENAI_API_KEY"


@dataclass(frozen=True, slots=True)
class ProviderPreset:
    """A provider the settings dialog offers, with its defaults.

    Attributes:
        name: Alias stored in the settings (``openai``, ``ollama`` ...).
        label: What the user reads.
        kind: Wire protocol.
        base_url: Default API base.
        api_key_env: Default key variable; None for local servers (usually no key).
    """

    name: str
    label: str
    kind: ProviderKind
    base_url: str
    api_key_env: str | None

    @property
    def local(self) -> bool:
        """A server on this machine (Ollama, vLLM, LM Studio, llama.cpp)."""
        return self.name in _LOCAL


PROVIDER_PRESETS: Mapping[str, ProviderPreset] = MappingProxyType({
    name: ProviderPreset(name, label, _ALIASES[name][0], _ALIASES[name][1],
                         _default_key_env(name, _ALIASES[name][0]))
    for name, label in _LABELS.items()})
"""Every provider alias except ``claude`` (= anthropic), in menu order."""


def preset_name(settings: LLMSettings) -> str:
    """The :data:`PROVIDER_PRESETS` key for ``settings`` (``claude`` → ``anthropic``; a
    nameless provider by its protocol); "" when no provider is configured."""
    if settings.provider in PROVIDER_PRESETS:
        return settings.provider
    if settings.kind is None:
        return ""
    return "anthropic" if settings.kind is ProviderKind.ANTHROPIC else "openai"


def _number(env: Mapping[str, str], name: str, kind: type) -> float | int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        value = int(raw) if kind is int else float(raw)
    except ValueError:
        raise ConfigInvalid(name, raw, f"must be {'an integer' if kind is int else 'a number'}"
                            ) from None
    return value


def llm_settings_from_env(env: Mapping[str, str] | None = None,
                          base: LLMSettings | None = None) -> LLMSettings:
    """Build :class:`LLMSettings` from the variables listed in the module docstring.

    Raises:
        ConfigInvalid: naming the variable and the bad value.
    """
    env = dict(os.environ) if env is None else env
    settings = base if base is not None else LLMSettings()
    name = env.get("MNEMOSCOPE_LLM_PROVIDER") or env.get("MEMORY_LLM_PRIMARY") or ""
    changes: dict[str, object] = {}
    if name.strip():
        var = "MNEMOSCOPE_LLM_PROVIDER" if env.get("MNEMOSCOPE_LLM_PROVIDER") \
            else "MEMORY_LLM_PRIMARY"
        kind, default_base = _alias(name, var)
        changes.update(provider=name.strip().lower(), kind=kind, base_url=default_base,
                       api_key_env=_default_key_env(name.strip().lower(), kind))
    if env.get("MNEMOSCOPE_LLM_BASE_URL", "").strip():
        changes["base_url"] = env["MNEMOSCOPE_LLM_BASE_URL"].strip().rstrip("/")
    if env.get("MNEMOSCOPE_LLM_MODEL", "").strip():
        changes["model"] = env["MNEMOSCOPE_LLM_MODEL"].strip()
    if env.get("MNEMOSCOPE_LLM_API_KEY_ENV", "").strip():
        changes["api_key_env"] = env["MNEMOSCOPE_LLM_API_KEY_ENV"].strip()
    numeric = {
        "MNEMOSCOPE_LLM_DAILY_BUDGET_USD": ("daily_budget_usd", float),
        "MNEMOSCOPE_LLM_TIMEOUT_S": ("read_timeout_s", float),
        "MNEMOSCOPE_LLM_TOTAL_TIMEOUT_S": ("total_timeout_s", float),
        "MNEMOSCOPE_LLM_MAX_TOKENS": ("max_tokens", int),
        "MNEMOSCOPE_LLM_MAX_ATTEMPTS": ("max_attempts", int),
        "MNEMOSCOPE_LLM_RPM": ("requests_per_minute", int),
        "MNEMOSCOPE_LLM_TPM": ("tpm_limit", int),
    }
    for var, (attr, kind_) in numeric.items():
        value = _number(env, var, kind_)
        if value is not None:
            changes[attr] = value
    stream = env.get("MNEMOSCOPE_LLM_STREAM", "").strip().lower()
    if stream:
        if stream not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
            raise ConfigInvalid("MNEMOSCOPE_LLM_STREAM", stream, "must be 1/0 or true/false")
        changes["stream"] = stream in ("1", "true", "yes", "on")
    prices_raw = env.get("MNEMOSCOPE_LLM_PRICES", "").strip()
    if prices_raw:
        changes["prices"] = {**settings.prices, **_parse_prices(prices_raw)}
    try:
        return dataclasses.replace(settings, **changes)  # type: ignore[arg-type]
    except ConfigInvalid as exc:
        var = next((v for v, (a, _) in numeric.items() if exc.field.endswith(a)), exc.field)
        raise ConfigInvalid(var, exc.value, exc.reason) from exc


def env_overrides(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The LLM variables set (non-empty) in ``env``: they win over the settings file."""
    env = dict(os.environ) if env is None else env
    return tuple(sorted(name for name, value in env.items() if value.strip() and (
        name.startswith("MNEMOSCOPE_LLM_") or name == "MEMORY_LLM_PRIMARY")))


def _parse_prices(raw: str) -> dict[str, ModelPrice]:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ConfigInvalid("MNEMOSCOPE_LLM_PRICES", raw, f"not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigInvalid("MNEMOSCOPE_LLM_PRICES", raw, "must be a JSON object")
    prices: dict[str, ModelPrice] = {}
    for model, pair in data.items():
        if not isinstance(pair, list) or len(pair) != 2:
            raise ConfigInvalid(f"MNEMOSCOPE_LLM_PRICES[{model}]", pair,
                                "must be [usd_per_million_input, usd_per_million_output]")
        prices[str(model)] = ModelPrice(pair[0], pair[1])
    return prices


FILE_FIELDS: tuple[str, ...] = (
    "provider", "base_url", "model", "api_key_env", "use_keyring", "daily_budget_usd",
    "tpm_limit", "connect_timeout_s", "read_timeout_s", "total_timeout_s")
"""The settings a user edits (provider dialog) and the settings file's ``llm`` section holds."""

_FILE_TYPES: Mapping[str, tuple[type, ...]] = MappingProxyType({
    "provider": (str,), "base_url": (str,), "model": (str,), "api_key_env": (str, type(None)),
    "use_keyring": (bool,), "daily_budget_usd": (int, float), "tpm_limit": (int, type(None)),
    "connect_timeout_s": (int, float), "read_timeout_s": (int, float),
    "total_timeout_s": (int, float)})


def llm_settings_to_json(settings: LLMSettings) -> dict[str, Any]:
    """The :data:`FILE_FIELDS` of ``settings`` as JSON values (no key: settings hold none)."""
    return {name: getattr(settings, name) for name in FILE_FIELDS}


def llm_settings_from_json(data: Mapping[str, Any], base: LLMSettings | None = None,
                           where: str = "llm") -> LLMSettings:
    """``base`` (default: defaults) with the :data:`FILE_FIELDS` found in ``data``.

    Unknown keys are ignored (a newer version may write more). The provider alias sets the
    wire protocol.

    Raises:
        ConfigInvalid: naming ``<where>.<field>`` and the bad value.
    """
    settings = base if base is not None else LLMSettings()
    changes: dict[str, Any] = {}
    for name, expected in _FILE_TYPES.items():
        if name not in data:
            continue
        value = data[name]
        if not isinstance(value, expected) or (isinstance(value, bool)
                                               and bool not in expected):
            raise ConfigInvalid(f"{where}.{name}", value, "has the wrong type")
        changes[name] = value
    if "provider" in changes:
        provider = str(changes["provider"]).strip().lower()
        changes["provider"] = provider
        changes["kind"] = _alias(provider, f"{where}.provider")[0] if provider else None
    if isinstance(changes.get("base_url"), str):
        changes["base_url"] = changes["base_url"].strip().rstrip("/")
    try:
        return dataclasses.replace(settings, **changes)
    except ConfigInvalid as exc:
        raise ConfigInvalid(f"{where}.{exc.field.removeprefix('llm.')}", exc.value,
                            exc.reason) from exc


class SecretStore(Protocol):
    """Keeps API keys by account (the provider name). Methods may block: call them off the
    GUI thread."""

    def available(self) -> bool:
        """Keys can be kept here."""
        ...

    def get(self, account: str) -> str | None:
        """The key kept for ``account``, or None."""
        ...

    def set(self, account: str, secret: str) -> None:
        """Keep ``secret`` for ``account`` (raises :class:`KeyringUnavailable`)."""
        ...

    def delete(self, account: str) -> None:
        """Forget the key of ``account`` (no error when there is none)."""
        ...


class KeyringStore:
    """The OS keyring (``keyring``): service :data:`KEYRING_SERVICE`, one account per provider.

    Every call may block (D-Bus, a Keychain prompt); ``keyring`` is imported on first use.
    """

    def available(self) -> bool:
        """A real backend is installed (not ``keyring``'s "fail" placeholder)."""
        try:
            import keyring
            from keyring.backends import fail

            return not isinstance(keyring.get_keyring(), fail.Keyring)
        except Exception:  # a broken backend configuration is "not available", not a crash
            return False

    def get(self, account: str) -> str | None:
        """The key kept for ``account``; None when none is kept or the keyring fails."""
        try:
            return _keyring_get(KEYRING_SERVICE, account)
        except Exception:  # locked keyring, D-Bus missing: as if no key were kept
            return None

    def set(self, account: str, secret: str) -> None:
        """Keep ``secret``.

        Raises:
            KeyringUnavailable: the keyring refused (the message never holds the key).
        """
        import keyring

        try:
            keyring.set_password(KEYRING_SERVICE, account, secret)
        except Exception as exc:  # NoKeyringError, a locked keyring, D-Bus gone ...
            raise KeyringUnavailable(
                f"the OS keyring could not keep the key for {account!r} "
                f"({type(exc).__name__}); put the key in an environment variable and name "
                f"that variable instead") from exc

    def delete(self, account: str) -> None:
        """Forget the key of ``account``."""
        import keyring

        try:
            keyring.delete_password(KEYRING_SERVICE, account)
        except Exception:  # nothing kept, or no keyring: nothing to forget
            return


def key_lookup(settings: LLMSettings, secrets: SecretStore | None = None,
               env: Mapping[str, str] | None = None) -> Callable[[], str | None]:
    """The key function a gateway or a connection test calls at request time:
    :func:`resolve_api_key` with ``secrets`` standing in for the OS keyring."""
    getter = None if secrets is None else (lambda _service, account: secrets.get(account))

    def lookup() -> str | None:
        return resolve_api_key(settings, env, getter)

    return lookup


def resolve_api_key(settings: LLMSettings, env: Mapping[str, str] | None = None,
                    keyring_get: Callable[[str, str], str | None] | None = None) -> str | None:
    """Read the provider's key: the named environment variable, else the OS keyring.

    Returns None when no key is set (local servers usually need none). Never logs the key.
    """
    env = os.environ if env is None else env
    if settings.api_key_env:
        value = env.get(settings.api_key_env, "").strip()
        if value:
            return value
    if not settings.use_keyring or settings.kind is None:
        return None
    getter = keyring_get if keyring_get is not None else _keyring_get
    try:
        return getter(KEYRING_SERVICE, settings.keyring_account) or None
    except Exception:  # no keyring backend, locked keyring, D-Bus missing: treat as no key
        return None


def _keyring_get(service: str, user: str) -> str | None:
    import keyring

    value = keyring.get_password(service, user)
    return value if isinstance(value, str) else None
