"""The app opens its engine with the ``MEMORY_*`` configuration, redaction patterns included."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.settings import Settings
from app.wiring import _memory_config, _redact, open_engine
from engine.errors import ConfigInvalid
from engine.redaction import placeholder_for
from engine.store import StoreSpec


@pytest.fixture(autouse=True)
def _fresh_config() -> Iterator[None]:
    _memory_config.cache_clear()
    yield
    _memory_config.cache_clear()


def test_window_engine_and_views_mask_memory_redact_patterns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before, the window's engine ignored MEMORY_* and masked with the default patterns only.
    monkeypatch.setenv("MEMORY_REDACT_PATTERNS", r"EMAIL, EMP-\d{5}")
    engine = open_engine(Settings(), None, StoreSpec(str(tmp_path / "store")))
    try:
        assert engine.redactor.patterns == ("EMAIL", r"EMP-\d{5}")
        assert engine.redact("badge EMP-40417") == f"badge {placeholder_for('EMP-40417')}"
    finally:
        engine.close()
    assert _redact("badge EMP-40417") == f"badge {placeholder_for('EMP-40417')}"


def test_window_engine_refuses_a_bad_pattern(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_REDACT_PATTERNS", "EMAIL, [unclosed")
    with pytest.raises(ConfigInvalid, match=r"MEMORY_REDACT_PATTERNS: .*'\[unclosed'"):
        open_engine(Settings(), None, StoreSpec(str(tmp_path / "store")))
    # The views keep masking (default patterns) while the store cannot open.
    assert _redact("mail a@b.io") == f"mail {placeholder_for('a@b.io')}"
