"""The settings file's ``llm`` section and the running app's one SettingsFile (issue 9)."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

import pytest

from app.settings import Settings, SettingsFile, load_settings
from app.wiring import _llm_services, _preference_saver, _preferences, gui_model_spec
from engine.errors import ConfigInvalid
from engine.llm import LLMSettings, ProviderKind
from ui.main_window import Preferences


def test_llm_section_under_the_environment(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text(json.dumps({"llm": {
        "provider": "ollama", "base_url": "http://127.0.0.1:11434/v1", "model": "llama3.2",
        "daily_budget_usd": 1.0}}), encoding="utf-8")
    settings = load_settings({}, config_dir=tmp_path)
    llm = settings.llm_settings({})
    assert (llm.kind, llm.model, llm.daily_budget_usd) == (ProviderKind.OPENAI, "llama3.2", 1.0)
    env = {"MNEMOSCOPE_LLM_MODEL": "qwen2.5", "MNEMOSCOPE_LLM_DAILY_BUDGET_USD": "3"}
    assert (settings.llm_settings(env).model,
            settings.llm_settings(env).daily_budget_usd) == ("qwen2.5", 3.0)


def test_bad_llm_section_names_the_file_and_field(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text(json.dumps({"llm": {"base_url": "ftp://x"}}),
                                            encoding="utf-8")
    settings = load_settings({}, config_dir=tmp_path)
    with pytest.raises(ConfigInvalid, match=r"settings.json: llm.base_url: must start with"):
        settings.llm_settings({})


def test_preferences_and_llm_saves_keep_each_others_changes(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    monkeypatch.setenv("MNEMOSCOPE_CONFIG_DIR", str(tmp_path))
    settings_file = SettingsFile(Settings(data_dir=str(tmp_path / "data")), tmp_path)
    services = _llm_services(settings_file)
    save_preferences = _preference_saver(settings_file)
    llm = LLMSettings(provider="openai", kind=ProviderKind.OPENAI,
                      base_url="https://api.openai.com/v1", model="gpt-4o-mini",
                      api_key_env="OPENAI_API_KEY", use_keyring=False)
    worker = threading.Thread(target=services.save, args=(llm,))  # the dialog saves off-GUI
    worker.start()
    save_preferences(Preferences(theme="dark", recent_stores=("/a",)))
    worker.join()
    save_preferences(Preferences(theme="light", recent_stores=("/b", "/a")))
    data = json.loads((tmp_path / "settings.json").read_text(encoding="utf-8"))
    assert data["theme"] == "light" and data["recent_stores"] == ["/b", "/a"]
    assert data["llm"]["model"] == "gpt-4o-mini" and data["llm"]["use_keyring"] is False
    reloaded = load_settings({}, config_dir=tmp_path).llm_settings({})
    assert (reloaded.base_url, reloaded.api_key_env) == ("https://api.openai.com/v1",
                                                         "OPENAI_API_KEY")


def test_a_bad_section_does_not_stop_the_app(tmp_path: Path) -> None:
    settings_file = SettingsFile(Settings(data_dir=str(tmp_path), llm={"model": 3}), tmp_path,
                                 persist=False)
    services = _llm_services(settings_file)
    assert services.settings == LLMSettings()
    assert services.problem.startswith("LLM settings ignored: settings.json: llm.model")


def test_embedding_backend_from_the_file_and_the_environment(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text(json.dumps({"embed_backend": "torch"}))
    settings = load_settings({}, config_dir=tmp_path)
    assert settings.embed_backend == "torch"
    overridden = load_settings({"MNEMOSCOPE_EMBED_BACKEND": "openvino-f32",
                                "MNEMOSCOPE_DATA_DIR": str(tmp_path / "data")},
                               config_dir=tmp_path)
    spec = overridden.model_spec()
    assert spec.backend.value == "openvino-f32" and spec.path is None
    assert spec.cache_dir == str(tmp_path / "data" / "models")
    assert Settings().model_spec().backend.value == "openvino"  # the default
    # the window converts a model not yet cached in a helper process; the CLI in its own
    assert gui_model_spec(overridden) == dataclasses.replace(spec, convert_in_child=True)
    assert not spec.convert_in_child


def test_an_unknown_embedding_backend_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigInvalid, match=r"embed_backend.*openvino, openvino-f32, torch.*onnx"):
        load_settings({"MNEMOSCOPE_EMBED_BACKEND": "onnx"}, config_dir=tmp_path)
    (tmp_path / "settings.json").write_text(json.dumps({"embed_backend": 2}))
    with pytest.raises(ConfigInvalid, match="embed_backend"):
        load_settings({}, config_dir=tmp_path)


def test_store_timeouts_from_the_file_and_the_environment(tmp_path: Path) -> None:
    from engine.store import StoreSpec

    assert (Settings().store_connect_timeout_s, Settings().store_read_timeout_s) == (10.0, 60.0)
    (tmp_path / "settings.json").write_text(json.dumps({"store_read_timeout_s": 30}))
    settings = load_settings({"MNEMOSCOPE_STORE_CONNECT_TIMEOUT_S": "2.5"}, config_dir=tmp_path)
    spec = settings.with_store_timeouts(StoreSpec("http://127.0.0.1:8000", read_only=True))
    assert (spec.connect_timeout_s, spec.read_timeout_s, spec.read_only) == (2.5, 30.0, True)
    overridden = load_settings({"MNEMOSCOPE_STORE_READ_TIMEOUT_S": "5"}, config_dir=tmp_path)
    assert overridden.store_read_timeout_s == 5.0


@pytest.mark.parametrize(("env", "file", "named"), [
    ({"MNEMOSCOPE_STORE_READ_TIMEOUT_S": "soon"}, {}, "MNEMOSCOPE_STORE_READ_TIMEOUT_S"),
    ({"MNEMOSCOPE_STORE_CONNECT_TIMEOUT_S": "0"}, {}, "store_connect_timeout_s"),
    ({"MNEMOSCOPE_STORE_READ_TIMEOUT_S": "inf"}, {}, "store_read_timeout_s"),
    ({}, {"store_read_timeout_s": True}, "store_read_timeout_s"),
    ({}, {"store_connect_timeout_s": -1}, "store_connect_timeout_s"),
])
def test_a_bad_store_timeout_is_refused_by_name(tmp_path: Path, env: dict[str, str],
                                                file: dict[str, object], named: str) -> None:
    (tmp_path / "settings.json").write_text(json.dumps(file))
    with pytest.raises(ConfigInvalid, match=named):
        load_settings(env, config_dir=tmp_path)


def test_the_windows_redaction_toggle_is_remembered_over_the_configured_floor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Turned on in the window, redaction was off again after a restart (the saver left it
    out); turned off, it does not unmask what settings.json or the environment masks."""
    monkeypatch.setenv("MNEMOSCOPE_CONFIG_DIR", str(tmp_path))
    settings_file = SettingsFile(Settings(data_dir=str(tmp_path / "data")), tmp_path)
    save_preferences = _preference_saver(settings_file)
    save_preferences(Preferences(redaction=True))
    assert _preferences(load_settings({}, config_dir=tmp_path)).redaction is True
    save_preferences(Preferences(redaction=False))
    assert _preferences(load_settings({}, config_dir=tmp_path)).redaction is False
    assert _preferences(load_settings({"MNEMOSCOPE_REDACTION": "1"},
                                      config_dir=tmp_path)).redaction is True
    data = json.loads((tmp_path / "settings.json").read_text(encoding="utf-8"))
    assert data["redaction"] is False  # the CLI's setting is not the window's to change
