"""Application settings: one typed, versioned object built in ``app`` and passed down (STYLE §8).

Sources, later ones winning: defaults (platformdirs locations), the settings file
(``<config dir>/settings.json``), environment variables with the ``MNEMOSCOPE_`` prefix, then
command-line options. No global accessor: :func:`load_settings` returns a value the caller owns.
The file is written atomically (temp file, fsync, rename), so a crash never leaves it half-written.
A running app changes it through one :class:`SettingsFile`, so saves made by different parts of
the app (window preferences, the LLM provider dialog) never drop each other's changes.

The ``llm`` section holds the provider settings the GUI's dialog edits
(``engine.llm.settings.FILE_FIELDS``); :meth:`Settings.llm_settings` applies the
``MNEMOSCOPE_LLM_*`` environment over it. No key is ever written: keys live in an environment
variable or the OS keyring.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_READ_TIMEOUT_S,
    EmbedBackend,
    FieldMapping,
    ModelSpec,
    StoreSpec,
)
from engine.errors import ConfigInvalid, ValidationError

if TYPE_CHECKING:
    from engine.llm import LLMSettings

__all__ = [
    "SETTINGS_VERSION",
    "Settings",
    "SettingsFile",
    "atomic_write_text",
    "config_dir_from",
    "default_config_dir",
    "default_data_dir",
    "load_settings",
    "save_foreign_mapping",
    "save_settings",
    "server_ledger_path",
    "store_key",
]

SETTINGS_VERSION = 1
APP_NAME = "Mnemoscope"


def default_data_dir() -> Path:
    """Per-user data directory (stores, ledgers, caches)."""
    from platformdirs import user_data_dir

    return Path(user_data_dir(APP_NAME, appauthor=False))


def default_config_dir() -> Path:
    """Per-user configuration directory (settings.json)."""
    from platformdirs import user_config_dir

    return Path(user_config_dir(APP_NAME, appauthor=False))


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the app is configured with.

    Attributes:
        store: Default store: a directory or a Chroma server URL.
        store_token: Bearer token for a server store.
        store_connect_timeout_s: Server stores: longest wait for a connection.
        store_read_timeout_s: Server stores: longest wait for the answer to one call; a
            server that stops answering fails the call with ``StoreTimeout`` after this long.
        data_dir: Where the default store, server ledgers and caches live.
        model_path: A local sentence-transformers model directory (default: the packaged
            all-MiniLM-L6-v2).
        embed_backend: What runs the model: ``openvino`` (default; bf16 where the CPU has
            it), ``openvino-f32`` or ``torch`` (:class:`~engine.embedding.EmbedBackend`).
        load_model: Load the embedding model at all (off: Jaccard path only).
        redaction: Start with redaction on.
        sampling_rate: Voyeur event sampling rate.
        recent_stores: Most recent first.
        theme: "system", "light" or "dark".
        llm: The file's LLM provider section (JSON values; see :meth:`llm_settings`).
        foreign_mappings: Field mappings of collections written by other tools, by store
            location then collection name (``{"text": key, "agent": key, "time": key,
            "importance": key}``; ``mnemoscope map-collection``; :meth:`mapping_for`).
    """

    store: str = ""
    store_token: str | None = None
    store_connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    store_read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    data_dir: str = ""
    model_path: str | None = None
    embed_backend: str = EmbedBackend.OPENVINO.value
    load_model: bool = True
    redaction: bool = False
    sampling_rate: float = 1.0
    recent_stores: tuple[str, ...] = ()
    theme: str = "system"
    llm: Mapping[str, Any] = field(default_factory=dict)
    foreign_mappings: Mapping[str, Any] = field(default_factory=dict)
    version: int = SETTINGS_VERSION
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.data_dir:
            object.__setattr__(self, "data_dir", str(default_data_dir()))
        if not self.store:
            object.__setattr__(self, "store", str(Path(self.data_dir) / "store"))
        if not 0.0 <= self.sampling_rate <= 1.0:
            raise ConfigInvalid("sampling_rate", self.sampling_rate, "must be in 0..1")
        for name in ("store_connect_timeout_s", "store_read_timeout_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise ConfigInvalid(name, value, "must be a positive number of seconds")
        if self.theme not in ("system", "light", "dark"):
            raise ConfigInvalid("theme", self.theme, "must be system, light or dark")
        if self.embed_backend not in tuple(EmbedBackend):
            raise ConfigInvalid("embed_backend", self.embed_backend,
                                f"must be one of {', '.join(EmbedBackend)}")
        for location, collections in self.foreign_mappings.items():
            if not isinstance(collections, Mapping):
                raise ConfigInvalid(f"foreign_mappings.{location}", collections,
                                    "must map collection names to mappings")
            for name, mapping in collections.items():
                where = f"settings.json: foreign_mappings.{location}.{name}"
                try:
                    FieldMapping.from_json(mapping, where)
                except ValidationError as exc:
                    raise ConfigInvalid(exc.field, exc.value, exc.reason) from None

    def model_spec(self) -> ModelSpec:
        """The embedding model to load; its OpenVINO conversion is cached under
        ``data_dir/models``."""
        return ModelSpec(self.model_path, EmbedBackend(self.embed_backend),
                         str(Path(self.data_dir) / "models"))

    def with_store_timeouts(self, spec: StoreSpec) -> StoreSpec:
        """``spec`` with the configured server timeouts and its collection's saved field
        mapping (every store is opened through it)."""
        return dataclasses.replace(spec, connect_timeout_s=self.store_connect_timeout_s,
                                   read_timeout_s=self.store_read_timeout_s,
                                   mapping=self.mapping_for(spec.location, spec.collection))

    def mapping_for(self, location: str, collection: str) -> FieldMapping | None:
        """The field mapping saved for ``collection`` of the store at ``location``."""
        saved = self.foreign_mappings.get(store_key(location), {}).get(collection)
        if saved is None:
            return None
        return FieldMapping.from_json(saved, f"foreign_mappings.{collection}")

    def with_mapping(self, location: str, collection: str,
                     mapping: FieldMapping | None) -> Settings:
        """A copy with ``mapping`` saved for ``collection`` at ``location`` (None: forgotten)."""
        key = store_key(location)
        mappings = {k: dict(v) for k, v in self.foreign_mappings.items()}
        collections = mappings.setdefault(key, {})
        if mapping is None or mapping.empty:
            collections.pop(collection, None)
        else:
            collections[collection] = mapping.to_json()
        if not collections:
            del mappings[key]
        return dataclasses.replace(self, foreign_mappings=mappings)

    def with_recent(self, location: str, keep: int = 10) -> Settings:
        """A copy with ``location`` first in the recent-stores list."""
        recent = [location, *[r for r in self.recent_stores if r != location]][:keep]
        return dataclasses.replace(self, recent_stores=tuple(recent))

    def llm_settings(self, env: Mapping[str, str] | None = None) -> LLMSettings:
        """The LLM provider settings: defaults ← the file's ``llm`` section ←
        ``MNEMOSCOPE_LLM_*`` in ``env`` (default: the process environment).

        Raises:
            ConfigInvalid: naming ``settings.json: llm.<field>`` or the variable.
        """
        from engine.llm import llm_settings_from_env, llm_settings_from_json

        return llm_settings_from_env(env, base=llm_settings_from_json(
            self.llm, where="settings.json: llm"))

    def to_json(self) -> dict[str, Any]:
        """File form (the token is never written to the settings file)."""
        data = dataclasses.asdict(self)
        data["store_token"] = None
        data["recent_stores"] = list(self.recent_stores)
        data["extra"] = dict(self.extra)
        data["llm"] = dict(self.llm)
        data["foreign_mappings"] = {k: dict(v) for k, v in self.foreign_mappings.items()}
        return data


_ENV: Mapping[str, tuple[str, type]] = {
    "MNEMOSCOPE_STORE": ("store", str),
    "MNEMOSCOPE_STORE_TOKEN": ("store_token", str),
    "MNEMOSCOPE_STORE_CONNECT_TIMEOUT_S": ("store_connect_timeout_s", float),
    "MNEMOSCOPE_STORE_READ_TIMEOUT_S": ("store_read_timeout_s", float),
    "MNEMOSCOPE_DATA_DIR": ("data_dir", str),
    "MNEMOSCOPE_MODEL_PATH": ("model_path", str),
    "MNEMOSCOPE_EMBED_BACKEND": ("embed_backend", str),
    "MNEMOSCOPE_LOAD_MODEL": ("load_model", bool),
    "MNEMOSCOPE_REDACTION": ("redaction", bool),
    "MNEMOSCOPE_SAMPLING_RATE": ("sampling_rate", float),
    "MNEMOSCOPE_THEME": ("theme", str),
}
_TRUE = re.compile(r"^(1|true|yes|on)$", re.IGNORECASE)
_FALSE = re.compile(r"^(0|false|no|off)$", re.IGNORECASE)


def _env_value(name: str, raw: str, kind: type) -> Any:
    if kind is bool:
        if _TRUE.match(raw.strip()):
            return True
        if _FALSE.match(raw.strip()):
            return False
        raise ConfigInvalid(name, raw, "must be one of 1/0, true/false, yes/no, on/off")
    if kind is float:
        try:
            return float(raw)
        except ValueError:
            raise ConfigInvalid(name, raw, "must be a number") from None
    return raw


def config_dir_from(env: Mapping[str, str], default: Path | None = None) -> Path:
    """The settings folder: ``MNEMOSCOPE_CONFIG_DIR`` in ``env``, else ``default`` or the
    per-user configuration directory."""
    return Path(env["MNEMOSCOPE_CONFIG_DIR"]) if "MNEMOSCOPE_CONFIG_DIR" in env \
        else (default or default_config_dir())


def load_settings(env: Mapping[str, str] | None = None, *,
                  config_dir: Path | None = None) -> Settings:
    """Defaults ← settings file ← environment.

    Raises:
        ConfigInvalid: the file is not valid JSON (naming the file and line), has a bad value,
            or an environment variable is malformed (naming it).
    """
    env = dict(os.environ) if env is None else env
    config_dir = config_dir_from(env, config_dir)
    values: dict[str, Any] = {}
    path = config_dir / "settings.json"
    if path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ConfigInvalid(f"{path}:{exc.lineno}", exc.doc[:0] or "...",
                                f"not valid JSON: {exc.msg}") from exc
        if not isinstance(data, dict):
            raise ConfigInvalid(str(path), type(data).__name__, "must hold a JSON object")
        types: dict[str, type | tuple[type, ...]] = {
                 "store": str, "data_dir": str, "model_path": (str, type(None)),
                 "store_connect_timeout_s": (int, float), "store_read_timeout_s": (int, float),
                 "embed_backend": str,
                 "load_model": bool, "redaction": bool, "sampling_rate": (int, float),
                 "recent_stores": list, "theme": str, "version": int, "extra": dict,
                 "llm": dict, "foreign_mappings": dict}
        for key, raw in data.items():
            value: Any = raw
            expected = types.get(key)
            if expected is None:
                continue  # unknown keys (and the never-saved token) are ignored
            if not isinstance(value, expected) or (expected == (int, float)
                                                   and isinstance(value, bool)):
                raise ConfigInvalid(f"{path}: {key}", value, "has the wrong type")
            if isinstance(raw, list):
                if not all(isinstance(item, str) for item in raw):
                    raise ConfigInvalid(f"{path}: {key}", raw, "must be a list of strings")
                value = tuple(raw)
            values[key] = value
    for name, (attr, kind) in _ENV.items():
        if name in env and env[name] != "":
            values[attr] = _env_value(name, env[name], kind)
    return Settings(**values)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically: temp file in the same folder, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_settings(settings: Settings, *, config_dir: Path | None = None) -> Path:
    """Write the settings file atomically; returns its path."""
    path = (config_dir or default_config_dir()) / "settings.json"
    atomic_write_text(path, json.dumps(settings.to_json(), indent=2, sort_keys=True))
    return path


def save_foreign_mapping(config_dir: Path, location: str, collection: str,
                         mapping: FieldMapping | None) -> Path:
    """Save (or, with None, forget) the field mapping of ``collection`` at ``location`` in the
    settings file, changing nothing else in it.

    The CLI's settings are the file's with the environment and options over them; saving those
    would write ``--store`` or ``MNEMOSCOPE_*`` values into the file, so this edits the file's
    own JSON, and checks the result loads.

    Raises:
        ConfigInvalid: the file is not valid settings JSON (naming it and the line).
        OSError: it could not be written.
    """
    path = config_dir / "settings.json"
    current = load_settings({"MNEMOSCOPE_CONFIG_DIR": str(config_dir)})  # refuses a bad file
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() \
        else {}
    data["foreign_mappings"] = current.with_mapping(location, collection,
                                                    mapping).to_json()["foreign_mappings"]
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True))
    return path


class SettingsFile:
    """The running app's settings and their file: one current value, atomic saves.

    Parts of the app change different fields (the window its preferences on the GUI thread,
    the provider dialog the ``llm`` section on a worker); each calls :meth:`update` with only
    its own fields, under one lock, so no save drops another's change.

    Args:
        settings: The value loaded at start.
        config_dir: Where ``settings.json`` goes (default: the user config directory).
        persist: False keeps changes in memory only (screenshot and self-test runs).
    """

    def __init__(self, settings: Settings, config_dir: Path | None = None, *,
                 persist: bool = True) -> None:
        self._current = settings
        self._config_dir = config_dir
        self._persist = persist
        self._lock = threading.Lock()

    @property
    def current(self) -> Settings:
        """The latest value."""
        return self._current

    def update(self, **changes: Any) -> Settings:
        """Replace ``changes`` and write the file atomically (blocking: disk).

        Raises:
            OSError: the file could not be written (the value in memory is unchanged).
            ConfigInvalid: a changed value is invalid.
        """
        with self._lock:
            updated = dataclasses.replace(self._current, **changes)
            if self._persist:
                save_settings(updated, config_dir=self._config_dir)
            self._current = updated
            return updated


def store_key(location: str) -> str:
    """How a store location is keyed in the settings: a server URL as given (no trailing
    slash), a directory as its absolute path (``./store`` and ``store`` are one store)."""
    if re.match(r"^https?://", location, re.IGNORECASE):
        return location.rstrip("/")
    return str(Path(location).expanduser().absolute())


def server_ledger_path(settings: Settings, url: str, collection: str) -> Path:
    """Where the ledger of a server store lives (Chroma keeps no ledger for us)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{url}_{collection}").strip("_")
    return Path(settings.data_dir) / "servers" / slug / "mnemoscope-ledger.sqlite3"
