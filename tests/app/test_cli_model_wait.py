"""What a command says while it waits for the embedding model."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

from app.cli.context import CliContext
from app.settings import load_settings
from engine.embedding import EmbedderState, EmbedderStatus

CONVERTING = ("first launch: preparing the model for OpenVINO in a helper process: "
              "converting (2 of 4)")


@dataclass
class SlowModel:
    """An embedder that is not ready at the first wait and is at the second."""

    reason: str
    waits: list[float] = field(default_factory=list)

    def wait_ready(self, timeout: float) -> bool:
        self.waits.append(timeout)
        return len(self.waits) > 1

    def is_ready(self) -> bool:
        return len(self.waits) > 1

    def status(self) -> EmbedderStatus:
        return EmbedderStatus(EmbedderState.LOADING, "all-MiniLM-L6-v2", 384, self.reason)


def _context(tmp_path: Path, model: SlowModel) -> tuple[CliContext, io.StringIO]:
    env = {"MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "config"),
           "MNEMOSCOPE_DATA_DIR": str(tmp_path / "data")}
    err = io.StringIO()
    ctx = CliContext(load_settings(env), stderr=err)
    ctx._model = model  # type: ignore[assignment]
    return ctx, err


def test_a_first_run_says_the_model_is_being_prepared_instead_of_sitting_silent(
        tmp_path: Path) -> None:
    model = SlowModel(CONVERTING)
    ctx, err = _context(tmp_path, model)
    ctx.wait_for_model()
    assert err.getvalue() == f"note: {CONVERTING}…\n"
    assert len(model.waits) == 2 and model.waits[0] < model.waits[1]  # then waits on


def test_a_plain_load_says_nothing(tmp_path: Path) -> None:
    model = SlowModel("")
    ctx, err = _context(tmp_path, model)
    ctx.wait_for_model()
    assert err.getvalue() == ""
