"""The GUI entry points run headless: --self-test and --screenshot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path) -> dict[str, str]:
    return dict(os.environ, QT_QPA_PLATFORM="offscreen", HF_HUB_OFFLINE="1",
                MNEMOSCOPE_CONFIG_DIR=str(tmp_path / "config"),
                MNEMOSCOPE_DATA_DIR=str(tmp_path / "data"))


@pytest.mark.slow
def test_self_test_passes_and_reports(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "app.main", "--self-test"], cwd=ROOT,
                          env=_env(tmp_path), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "self-test: 7 passed, 0 failed" in done.stdout
    assert "embedding model on its intended backend: all-MiniLM-L6-v2 on OpenVINO" in done.stdout
    assert not (tmp_path / "config" / "settings.json").exists()  # a self-test saves nothing


@pytest.mark.slow
def test_screenshot_writes_one_png_per_view(tmp_path: Path) -> None:
    out = tmp_path / "shots"
    done = subprocess.run([sys.executable, "-m", "app.main", "--no-model", "--screenshot",
                           str(out)], cwd=ROOT, env=_env(tmp_path), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    png = (out / "records.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 20_000
    # docs/gui.md's workflow, step by step
    workflow = sorted(path.name for path in out.glob("workflow-*.png"))
    assert workflow == ["workflow-1-search.png", "workflow-2-menu.png", "workflow-3-fate.png",
                        "workflow-4-duplicate.png", "workflow-5-survivor.png"]
