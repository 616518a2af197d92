"""The first launch's model conversion, run in a helper process so the app's GUI never waits.

Converting the model for OpenVINO (:func:`engine.embedding_openvino.build`) needs torch,
transformers and the sentence-transformers model. Importing them holds the GIL in C calls of
100-400 ms (extension modules loading) and tracing the model holds it longer still, so on the
app's first launch, with no cached conversion yet, the GUI thread stalled 258 ms on a quiet
machine while the model loaded on its own thread (docs/gui.md, "No stall on the GUI thread").
A thread cannot avoid that; another process can. With ``convert_in_child``,
:class:`~engine.embedding.SentenceTransformerEmbedder` runs ``python -m engine.embedding_convert``:
the child loads the model with torch, converts it and writes the cached folder that every later
launch finds, and the app then loads that folder as later launches do, with OpenVINO and
``tokenizers`` alone (torch is never imported in the app's process).

The child runs at a lower CPU priority (as bulk imports do, :mod:`app.import_process`): on two
cores the GUI thread wins the CPU over the conversion.

Protocol (one JSON object per line on stdout): ``{"step": "words"}`` as the child goes, then
``{"done": "cached folder"}`` or ``{"error": "message"}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.embedding_openvino import Precision, Unsupported
from engine.errors import EmbeddingUnavailable

__all__ = ["CONVERT_TIMEOUT_S", "STEPS", "convert_in_child", "load_torch_model", "main"]

STEPS = ("loading the model with torch", "converting it for OpenVINO",
         "loading the converted model")
"""The first launch's steps, in order: the child reports the first two, the app does the last
(shown in the status bar while the first launch waits)."""

BACKGROUND_NICE = 5
"""How much the child lowers its CPU priority (the same as a bulk import's child)."""

CONVERT_TIMEOUT_S = 900.0
"""How long the helper may take before it is stopped (and the app converts itself): measured
20-60 s at load 16-22 on two cores, 10-15 s on a quiet machine; a hung helper must not leave
the model "preparing" for ever."""

_ROOT = Path(__file__).resolve().parent.parent


def load_torch_model(path: Path, dimension: int) -> Any:
    """The sentence-transformers model at ``path`` on torch (CPU), checked for ``dimension``
    (what the helper converts, and what runs a model the app does not convert).

    Raises:
        EmbeddingUnavailable: the model's vectors have another length.
    """
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # untyped lib

    model = SentenceTransformer(str(path), device="cpu")
    getter = (getattr(model, "get_embedding_dimension", None)
              or model.get_sentence_embedding_dimension)
    actual = int(getter() or 0)
    if actual != dimension:
        raise EmbeddingUnavailable(f"model {path} has dimension {actual}, the store expects "
                                   f"{dimension}")
    return model


def convert_in_child(model_path: Path, cache_dir: Path, *, dimension: int, precision: Precision,
                     model_name: str, on_step: Callable[[str], None] | None = None,
                     timeout_s: float = CONVERT_TIMEOUT_S) -> Path:
    """Convert the model at ``model_path`` and cache it in ``cache_dir``, in a child process.

    Blocks until the child is done (call it from the model's load thread): reading the child's
    lines releases the GIL, so the caller's other threads run meanwhile.

    Args:
        model_path: The sentence-transformers model folder (with ``tokenizer.json``).
        cache_dir: Where the conversion is cached (:func:`engine.embedding_openvino.build`).
        dimension: The vector length the store expects.
        precision: The precision the child checks the converted model at.
        model_name: Recorded in the cached folder's manifest.
        on_step: Called with each of the child's :data:`STEPS` as it reaches it.
        timeout_s: The child is stopped if it has not finished by then.

    Returns:
        The cached folder (:func:`engine.embedding_openvino.cached_folder` finds it).

    Raises:
        Unsupported: why the child did not convert or cache the model, or how it stopped
            (exit status and the end of its error output).
    """
    command = [sys.executable, "-m", "engine.embedding_convert", "--model", str(model_path),
               "--cache-dir", str(cache_dir), "--dimension", str(dimension),
               "--precision", precision.value, "--model-name", model_name]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), env.get("PYTHONPATH")) if p)
    result: dict[str, Any] | None = None
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errors:
        try:
            child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=errors, text=True, env=env, cwd=_ROOT)
        except OSError as exc:
            raise Unsupported(f"the conversion helper could not start: {exc}") from exc
        assert child.stdout is not None
        stopped = threading.Event()

        def stop() -> None:  # stopping the child ends its stdout, which ends the loop below
            stopped.set()
            child.kill()

        watchdog = threading.Timer(timeout_s, stop)
        watchdog.daemon = True
        watchdog.start()
        with child:
            for line in child.stdout:
                try:
                    message = json.loads(line) if line.startswith("{") else {}
                except ValueError:  # a library printing on stdout: not ours
                    continue
                if "step" in message and on_step is not None:
                    on_step(str(message["step"]))
                elif "done" in message or "error" in message:
                    result = message
        watchdog.cancel()
        watchdog.join()
        errors.seek(0)
        stderr = errors.read().strip()
    if result is None and stopped.is_set():
        raise Unsupported(f"the conversion helper did not finish in {timeout_s:g} s and was "
                          "stopped")
    if result is None:
        raise Unsupported(f"the conversion helper stopped without a result "
                          f"(exit {child.returncode}): {stderr[-500:] or 'no error output'}")
    if "error" in result:
        raise Unsupported(str(result["error"]))
    return Path(str(result["done"]))


def main(argv: list[str] | None = None) -> int:
    """The child: convert one model and cache it, reporting on stdout."""
    from engine import embedding_openvino

    parser = argparse.ArgumentParser(prog="python -m engine.embedding_convert")
    parser.add_argument("--model", required=True)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--dimension", type=int, required=True)
    parser.add_argument("--precision", choices=list(Precision), default=Precision.AUTO.value)
    parser.add_argument("--model-name", default="")
    args = parser.parse_args(argv)
    if hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(BACKGROUND_NICE)

    def emit(message: dict[str, str]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    path, cache_dir = Path(args.model), Path(args.cache_dir)
    try:
        # fail before the long part if the cache cannot be written (the conversion would be lost)
        cache_dir.mkdir(parents=True, exist_ok=True)
        emit({"step": STEPS[0]})
        model = load_torch_model(path, args.dimension)
        emit({"step": STEPS[1]})
        # build() converts, checks the graph against torch on probe texts, then caches it
        embedding_openvino.build(model, path, dimension=args.dimension,
                                 precision=Precision(args.precision), cache_dir=cache_dir,
                                 model_name=args.model_name or path.name)
        folder = embedding_openvino.cached_folder(path, cache_dir)
        if folder is None:
            raise Unsupported(f"the converted model could not be written to {cache_dir}")
    except Exception as exc:  # everything is reported: the app falls back and says why
        emit({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    emit({"done": str(folder)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
