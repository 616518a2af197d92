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

from engine.errors import ConfigInvalid
from engine.llm.backoff import BackoffConfig
from engine.llm.breaker import CircuitConfig
from engine.llm.projection import DEFAULT_TOKENS_PER_MINUTE

__all__ = [
    "DEFAULT_PRICES",
    "KEYRING_SERVICE",
    "LLMSettings",
    "ModelPrice",
    "ProviderKind",
    "llm_settings_from_env",
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
        object.__setattr__(self, "prices", dict(self.prices))
        object.__setattr__(self, "tokens_per_minute", dict(self.tokens_per_minute))

    @property
    def configured(self) -> bool:
        """True when a provider kind, base URL and model are all set."""
        return self.kind is not None and bool(self.base_url) and bool(self.model)

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
        return getter(KEYRING_SERVICE, settings.provider or settings.kind.value) or None
    except Exception:  # no keyring backend, locked keyring, D-Bus missing: treat as no key
        return None


def _keyring_get(service: str, user: str) -> str | None:
    import keyring

    value = keyring.get_password(service, user)
    return value if isinstance(value, str) else None
