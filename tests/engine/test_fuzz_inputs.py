"""Fuzzing (hypothesis): record JSON, new memories, config and settings values.

Every input either parses or raises a ValidationError/ConfigInvalid that names a field; nothing
else escapes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.config import ENV_VARS, memory_config_from_env
from engine.errors import ConfigInvalid, ValidationError
from engine.records import MemoryRecord, NewMemory

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text()
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                           max_leaves=12)
FIELDS = ["id", "content", "layer", "agent_id", "importance", "confidence", "category", "tags",
          "privacy", "source", "source_tier", "created_at", "last_accessed", "access_count",
          "expires_at", "provenance", "merged_from", "related", "metadata", "redacted", "version"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from([*FIELDS, "bogus"]), json_values, max_size=12))
def test_record_json_parses_or_names_the_field(data: dict[str, Any]) -> None:
    try:
        record = MemoryRecord.from_json(data)
    except ValidationError as exc:
        assert exc.field and str(exc).startswith(exc.field.split(".")[0])
        return
    assert MemoryRecord.from_json(record.to_json()) == record


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["content", "layer", "importance", "confidence", "tags",
                                        "privacy", "category", "source_tier", "agent_id",
                                        "metadata"]), json_values, max_size=6))
def test_new_memory_parses_or_names_the_field(fields: dict[str, Any]) -> None:
    fields.setdefault("content", "x")
    try:
        NewMemory(**fields)
    except ValidationError as exc:
        assert exc.field


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(ENV_VARS)), st.text(max_size=12), max_size=4))
def test_config_env_parses_or_names_the_variable(env: dict[str, str]) -> None:
    try:
        memory_config_from_env(env)
    except ConfigInvalid as exc:
        assert exc.field in env


@settings(max_examples=100, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture])
@given(st.text(max_size=200) | json_values.map(json.dumps))
def test_settings_file_parses_or_names_the_file(tmp_path: Path, text: str) -> None:
    from app.settings import load_settings

    (tmp_path / "settings.json").write_text(text, encoding="utf-8")
    try:
        load_settings({"MNEMOSCOPE_CONFIG_DIR": str(tmp_path)})
    except ConfigInvalid as exc:
        assert "settings.json" in exc.field or exc.field in {
            "sampling_rate", "theme", "store", "data_dir", "recent_stores"}
    except TypeError as exc:  # pragma: no cover - reported below
        raise AssertionError(f"settings file {text!r} escaped validation: {exc}") from exc
