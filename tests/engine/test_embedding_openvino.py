"""The OpenVINO backend: the same vectors as torch, a cached conversion, torch as the fallback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import cast

import numpy as np
import pytest

from engine.embedding import (
    EmbedBackend,
    EmbedderState,
    ModelSpec,
    SentenceTransformerEmbedder,
    default_model_path,
)
from engine.errors import EmbeddingUnavailable

pytestmark = [pytest.mark.slow, pytest.mark.model]

# What a memory store holds: one word, dialogue, numbers and dates, non-Latin script, emoji,
# and a text past the model's 256-token window (truncated alike by both backends).
TEXTS = [
    "ok",
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "The standup moved from 3pm to 5pm on 2026-03-14.",
    "Bob does not like tea.",
    "東京の会議は火曜日に移動しました。",
    "Deploy finished 🎉 — thanks all!",
    " ".join(f"word{i} and some filler text about the quarterly planning meeting"
             for i in range(60)),
]


def _ready(embedder: SentenceTransformerEmbedder) -> SentenceTransformerEmbedder:
    assert embedder.wait_ready(300), embedder.status().reason
    return embedder


def test_the_default_runs_on_openvino_and_agrees_with_torch(
        real_embedder: SentenceTransformerEmbedder) -> None:
    status = real_embedder.status()
    assert status.backend.startswith("OpenVINO "), status.backend
    for batch in (TEXTS, TEXTS[:1], TEXTS * 5):  # one text, a batch, more than one batch of 32
        fast = real_embedder.encode_raw(batch)
        reference = real_embedder.encode_raw(batch, torch=True)
        assert fast.shape == reference.shape == (len(batch), 384)
        assert np.allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)
        assert float(np.min(np.sum(fast * reference, axis=1))) > 0.9999
    # embed() takes the same path (a cache miss is encoded by OpenVINO)
    real_embedder.cache.clear()
    assert np.array_equal(real_embedder.embed(TEXTS[:3]), real_embedder.encode_raw(TEXTS[:3]))


def test_openvino_sends_no_telemetry(real_embedder: SentenceTransformerEmbedder) -> None:
    assert real_embedder.status().backend.startswith("OpenVINO ")
    import openvino.tools.ovc.telemetry_utils as telemetry

    assert cast(object, sys.modules["openvino_telemetry"]) is None  # None: import blocked
    assert telemetry.tm.__name__ == "openvino.tools.ovc.telemetry_stub"


def test_f32_conversion_is_cached_and_a_damaged_cache_is_converted_again(
        tmp_path: Path) -> None:
    spec = ModelSpec(backend=EmbedBackend.OPENVINO_F32, cache_dir=str(tmp_path))
    first = _ready(spec.embedder())
    assert first.status().backend == "OpenVINO f32 (converted)"
    [cached] = list(tmp_path.glob("openvino-*/model.xml"))
    assert not list(tmp_path.glob(".openvino-*"))  # no staging directory left behind
    second = _ready(spec.embedder())
    assert second.status().backend == "OpenVINO f32 (cached)"
    vectors = first.encode_raw(TEXTS)
    assert np.allclose(vectors, second.encode_raw(TEXTS), rtol=0, atol=1e-6)
    # f32 matches torch to float rounding
    assert float(np.abs(vectors - first.encode_raw(TEXTS, torch=True)).max()) < 1e-5
    cached.write_text("<not a model", encoding="utf-8")
    third = _ready(spec.embedder())
    assert third.status().backend == "OpenVINO f32 (converted)"
    assert np.allclose(vectors, third.encode_raw(TEXTS), rtol=0, atol=1e-6)


def test_a_cached_conversion_loads_without_torch(tmp_path: Path) -> None:
    """The app's second and later launches: importing torch, transformers and scipy held the
    GIL in C calls of 100-400 ms each, stalling the GUI thread while the model loaded on its
    own thread; the cached conversion is loaded with OpenVINO and ``tokenizers`` alone."""
    spec = ModelSpec(cache_dir=str(tmp_path))
    first = _ready(spec.embedder())
    assert first.status().backend.endswith("(converted)")
    script = (
        "import json, sys\n"
        "from engine.embedding import ModelSpec\n"
        f"e = ModelSpec(cache_dir={str(tmp_path)!r}).embedder()\n"
        "assert e.wait_ready(300), e.status().reason\n"
        "heavy = [m for m in ('torch', 'transformers', 'sentence_transformers', 'scipy')\n"
        "         if m in sys.modules]\n"
        f"vectors = e.embed({TEXTS!r})\n"
        "print(json.dumps({'backend': e.status().backend, 'heavy': heavy,\n"
        "                  'vectors': vectors.tolist()}))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"},
                          cwd=Path(__file__).resolve().parents[2], timeout=300)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded["heavy"] == []
    assert loaded["backend"].startswith("OpenVINO ") and loaded["backend"].endswith("(cached)")
    # the same vectors as the load that converted it (same graph, same tokenization)
    vectors = np.asarray(loaded["vectors"], dtype=np.float32)
    assert float(np.min(np.sum(vectors * first.encode_raw(TEXTS), axis=1))) > 0.9999
    # without torch loaded, the torch path says why it is not there
    cached = _ready(spec.embedder())
    with pytest.raises(EmbeddingUnavailable, match="cached conversion loaded without torch"):
        cached.encode_raw(TEXTS, torch=True)


def test_a_first_launch_converts_in_a_helper_process_and_never_loads_torch(
        tmp_path: Path, real_embedder: SentenceTransformerEmbedder) -> None:
    """The app's first launch (nothing cached): converting in the app's process imported torch
    and traced the model on the load thread, holding the GIL long enough to stall the GUI
    thread 258 ms on a quiet machine. The helper process converts and caches; the app's
    process loads the cached conversion, saying what it is doing while it waits."""
    script = (
        "import json, sys\n"
        "from engine.embedding import ModelSpec\n"
        "states = []\n"
        f"spec = ModelSpec(cache_dir={str(tmp_path)!r}, convert_in_child=True)\n"
        "e = spec.embedder(on_state=lambda s: states.append([s.state.value, s.reason]))\n"
        "assert e.wait_ready(600), e.status().reason\n"
        "heavy = [m for m in ('torch', 'transformers', 'sentence_transformers', 'scipy')\n"
        "         if m in sys.modules]\n"
        f"vectors = e.embed({TEXTS!r})\n"
        "print(json.dumps({'backend': e.status().backend, 'heavy': heavy, 'states': states,\n"
        "                  'vectors': vectors.tolist()}))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"},
                          cwd=Path(__file__).resolve().parents[2], timeout=900)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded["heavy"] == []
    assert loaded["backend"].startswith("OpenVINO ") and loaded["backend"].endswith("(cached)")
    assert len(list(tmp_path.glob("openvino-*/model.xml"))) == 1  # what later launches load
    # progress words while it waits, in order; the ready state carries no complaint
    words = [reason for state, reason in loaded["states"] if state == "loading" and reason]
    assert [w.rsplit(": ", 1)[-1] for w in words[1:]] == [
        "loading the model with torch (1 of 3)", "converting it for OpenVINO (2 of 3)",
        "loading the converted model (3 of 3)"]
    assert words[0] == "first launch: preparing the model for OpenVINO in a helper process"
    assert loaded["states"][-1] == ["ready", ""]
    vectors = np.asarray(loaded["vectors"], dtype=np.float32)
    assert float(np.min(np.sum(vectors * real_embedder.encode_raw(TEXTS, torch=True),
                               axis=1))) > 0.999


def test_a_failed_conversion_helper_falls_back_to_converting_here_and_says_so(
        tmp_path: Path) -> None:
    """A helper that cannot do its work (here: the cache folder lies under a file, so it
    cannot be created) is reported while loading and once ready; the model is converted in
    this process as before, never left silently on torch."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    states: list[tuple[EmbedderState, str]] = []
    embedder = _ready(ModelSpec(cache_dir=str(blocker / "models"), convert_in_child=True)
                      .embedder(on_state=lambda s: states.append((s.state, s.reason))))
    status = embedder.status()
    assert status.backend.startswith("OpenVINO ") and status.backend.endswith("(converted)")
    assert status.reason.startswith("the conversion helper failed (")
    assert "NotADirectoryError" in status.reason or "FileExistsError" in status.reason
    assert status.reason.endswith("; the model loaded in the app")
    assert any(state is EmbedderState.LOADING and "converting the model in the app instead"
               in reason for state, reason in states)
    assert embedder.embed(["a memory"]).shape == (1, 384)


def test_a_conversion_helper_that_does_not_finish_is_stopped_and_says_so(
        tmp_path: Path) -> None:
    """A hung helper must not leave the model "preparing" for ever: stopped after its time,
    the caller gets the reason (and the embedder converts in the app, as above)."""
    from engine.embedding_convert import convert_in_child
    from engine.embedding_openvino import Precision, Unsupported

    steps: list[str] = []
    with pytest.raises(Unsupported, match=r"did not finish in 0\.5 s and was stopped"):
        # half a second: the helper is still importing torch, far from done
        convert_in_child(default_model_path(), tmp_path / "models", dimension=384,
                         precision=Precision.AUTO, model_name="all-MiniLM-L6-v2",
                         on_step=steps.append, timeout_s=0.5)
    assert steps in ([], ["loading the model with torch"])
    assert not list(tmp_path.glob("models/openvino-*/model.xml"))  # nothing half-cached


def test_torch_when_asked(tmp_path: Path) -> None:
    embedder = _ready(ModelSpec(backend=EmbedBackend.TORCH, cache_dir=str(tmp_path)).embedder())
    assert embedder.status().backend == "torch"
    assert np.array_equal(embedder.encode_raw(TEXTS), embedder.encode_raw(TEXTS, torch=True))
    assert not list(tmp_path.iterdir())  # nothing converted


def test_a_model_openvino_cannot_run_stays_on_torch_and_says_why(tmp_path: Path) -> None:
    # the packaged weights with CLS pooling: a model of another shape, still a working one
    model = tmp_path / "cls-model"
    shutil.copytree(default_model_path(), model)
    pooling = model / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text(encoding="utf-8"))
    config.update({key: False for key in config if key.startswith("pooling_mode_")})
    config["pooling_mode_cls_token"] = True
    pooling.write_text(json.dumps(config), encoding="utf-8")
    embedder = _ready(SentenceTransformerEmbedder(model, cache_dir=tmp_path / "cache"))
    status = embedder.status()
    assert status.state is EmbedderState.READY
    assert status.backend == "torch (OpenVINO not used: only mean pooling converts)"
    assert embedder.embed(["a memory"]).shape == (1, 384)


# -- the prebuilt folder the installers ship (packaging/export_model.py) -----------------------


@pytest.fixture(scope="module")
def prebuilt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The model exported the way scripts/package exports it."""
    from sentence_transformers import SentenceTransformer

    from engine.embedding_openvino import export_prebuilt

    source = default_model_path()
    model = SentenceTransformer(str(source), device="cpu")
    return export_prebuilt(model, source, tmp_path_factory.mktemp("prebuilt") / "model",
                           model_name="all-MiniLM-L6-v2", dimension=384)


def test_the_prebuilt_folder_tokenizes_and_embeds_as_the_source_model(
        prebuilt: Path, real_embedder: SentenceTransformerEmbedder) -> None:
    from engine.embedding_openvino import Precision, load_prebuilt

    encoder = load_prebuilt(prebuilt, precision=Precision.F32, dimension=384)
    texts = [*TEXTS, "  padded with spaces  ", "\ttabs\tand\nnewlines\n", ""]
    fast = encoder.encode(texts, batch_size=4)
    reference = real_embedder.encode_raw(texts, torch=True)
    # f32 inference on the weights stored as f16: measured min cosine 0.999999 with torch over
    # 1,000 LoCoMo turns, components within 4e-4
    assert float(np.min(np.sum(fast * reference, axis=1))) > 0.99999
    assert float(np.max(np.abs(fast - reference))) < 1e-3
    assert encoder.description == "OpenVINO f32 (prebuilt)"


def test_the_prebuilt_folder_runs_without_torch(prebuilt: Path) -> None:
    """What the installed app does: torch, transformers and sentence-transformers unimportable."""
    script = (
        "import sys\n"
        "for name in ('torch', 'transformers', 'sentence_transformers', 'scipy', 'sklearn'):\n"
        "    sys.modules[name] = None\n"
        "from engine.embedding import SentenceTransformerEmbedder\n"
        "e = SentenceTransformerEmbedder()\n"
        "assert e.wait_ready(300), e.status().reason\n"
        "print(e.status().backend, e.model_name, e.embed(['hello there']).shape)\n")
    env = {**os.environ, "MNEMOSCOPE_BUNDLED_MODEL": str(prebuilt), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, cwd=Path(__file__).resolve().parents[2], timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(" (")[0].startswith("OpenVINO")
    assert "(prebuilt) all-MiniLM-L6-v2 (1, 384)" in done.stdout


def test_a_tampered_or_incomplete_prebuilt_folder_is_refused(prebuilt: Path,
                                                             tmp_path: Path) -> None:
    from engine.embedding_openvino import PREBUILT_MANIFEST, Precision, Unsupported, load_prebuilt

    copy = tmp_path / "copy"
    shutil.copytree(prebuilt, copy)
    manifest = json.loads((copy / PREBUILT_MANIFEST).read_text())
    manifest["probe_vectors"] = [list(reversed(v)) for v in manifest["probe_vectors"]]
    (copy / PREBUILT_MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(Unsupported, match="disagrees with the vectors it was built with"):
        load_prebuilt(copy, precision=Precision.F32, dimension=384)
    with pytest.raises(Unsupported, match="dimension 384, the store expects 768"):
        load_prebuilt(prebuilt, precision=Precision.F32, dimension=768)
    (copy / "tokenizer.json").unlink()
    with pytest.raises(Unsupported, match="cannot be read"):
        load_prebuilt(copy, precision=Precision.F32, dimension=384)
    # the embedder reports it (and never falls back to a torch it does not have)
    embedder = SentenceTransformerEmbedder(copy)
    assert not embedder.wait_ready(300)
    assert embedder.status().state is EmbedderState.FAILED
    assert "cannot be read" in embedder.status().reason
    torch_asked = SentenceTransformerEmbedder(prebuilt, backend=EmbedBackend.TORCH)
    assert not torch_asked.wait_ready(300)
    assert "OpenVINO only" in torch_asked.status().reason
