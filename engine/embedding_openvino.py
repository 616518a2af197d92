"""The embedding model run by OpenVINO: the same weights, about twice the torch rate on a CPU.

:class:`~engine.embedding.SentenceTransformerEmbedder` loads the sentence-transformers model
(its tokenizer, and torch as the fallback) and then, unless told to use torch, converts the
model to OpenVINO with :func:`build`: the transformer, mean pooling over the attention mask and
L2 normalization become one graph, so a batch is tokenized by the model's own tokenizer and
inferred in one call that releases the GIL. The converted model is cached on disk (keyed by the
weights, the pipeline and the OpenVINO version) as a folder in the prebuilt format (graph,
``tokenizer.json``, manifest with torch's probe vectors), so later loads skip the two-second
conversion *and* torch: :func:`cached_folder` finds it and :func:`load_prebuilt` runs it with
OpenVINO and ``tokenizers`` alone. Importing torch, transformers and scipy holds the GIL in long
C calls (extension modules loading: 100-400 ms each, measured), which stalled the GUI thread
while the app loaded the model on its worker thread; the cached folder needs none of them.

Precision: :attr:`Precision.AUTO` lets OpenVINO's CPU plugin pick, which is bf16 on CPUs with
native bf16 (AVX512-BF16, AMX) and f32 elsewhere; :attr:`Precision.F32` forces f32. Measured
on all-MiniLM-L6-v2 (2,000 LoCoMo turns, 2 cores with AVX512-BF16; docs/ingest.md): torch
~160 texts/s, OpenVINO f32 ~200, OpenVINO bf16 ~350; every bf16 vector has cosine ≥ 0.99995
with torch's (f32: ≥ 0.9999998). :func:`build` checks the converted model against torch on
probe texts and refuses it below :data:`MIN_AGREEMENT`.

Only the pipeline all-MiniLM-L6-v2 has — a transformer, then mean pooling — is converted;
other models configured by path stay on torch (``build`` raises :class:`Unsupported`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["MIN_AGREEMENT", "PREBUILT_MANIFEST", "OpenVinoEncoder", "Precision", "Unsupported",
           "build", "cached_folder", "export_prebuilt", "forget_cached", "is_prebuilt",
           "load_prebuilt"]

Vectors = npt.NDArray[np.float32]

MIN_AGREEMENT = 0.999
"""Lowest cosine allowed between a probe text's OpenVINO and torch vectors."""
_PIPELINE_VERSION = 2  # bump when the cached folder changes (2: the prebuilt format)
_PROBES = (
    "The standup meeting moved to Tuesday morning.",
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "ok",
    "Bob is allergic to peanuts, so no satay at the team dinner on 2026-03-14 at 7pm.",
)


class Precision(StrEnum):
    """Inference precision of the OpenVINO model."""

    AUTO = "auto"
    F32 = "f32"


class Unsupported(Exception):
    """The model cannot run on OpenVINO here (not installed, other pooling, bad conversion)."""


Tokenize = Callable[[list[str]], Mapping[str, npt.NDArray[np.int64]]]
"""Texts → ``input_ids``, ``attention_mask``, ``token_type_ids`` (batch × tokens, padded)."""


class OpenVinoEncoder:
    """Encodes texts with a compiled OpenVINO model and the model's tokenizer.

    Thread-safe: tokenizing is serialized (a fast tokenizer must not be called from two
    threads at once), and each thread infers with its own request.
    """

    def __init__(self, compiled: Any, tokenize: Tokenize, *, dimension: int,
                 source: str) -> None:
        self._compiled = compiled
        self._tokenize = tokenize
        self._dimension = dimension
        self._inputs = [port.get_any_name() for port in compiled.inputs]
        self._tokenizer_lock = threading.Lock()
        self._local = threading.local()
        self.source = source
        hint = compiled.get_property("INFERENCE_PRECISION_HINT")
        self.precision = str(getattr(hint, "get_type_name", lambda: hint)())

    @property
    def description(self) -> str:
        """E.g. ``OpenVINO bf16 (cached)``."""
        return f"OpenVINO {self.precision} ({self.source})"

    def encode(self, texts: Sequence[str], batch_size: int) -> Vectors:
        """Unit vectors of ``texts``, in order (longest first in batches, as
        sentence-transformers does, so a batch pads little)."""
        out = np.empty((len(texts), self._dimension), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        request = getattr(self._local, "request", None)
        if request is None:
            request = self._local.request = self._compiled.create_infer_request()
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            with self._tokenizer_lock:
                features = self._tokenize([texts[i] for i in rows])
            feed = {name: features[name] for name in self._inputs}
            out[rows] = request.infer(feed)[0]
        return out


def build(model: Any, model_path: Path, *, dimension: int, precision: Precision,
          cache_dir: Path | None, model_name: str = "") -> OpenVinoEncoder:
    """Convert the loaded sentence-transformers ``model`` (and cache the conversion).

    The conversion is checked against torch on probe texts before it is cached; the cached
    folder is what :func:`cached_folder` finds and :func:`load_prebuilt` loads next time,
    without torch. A model whose folder has no ``tokenizer.json`` is converted on every load
    (its tokenizer could not run without transformers).

    Args:
        model: The loaded ``SentenceTransformer``.
        model_path: Its directory (part of the cache key).
        dimension: Its vector length.
        precision: Inference precision.
        cache_dir: Where converted models are kept; None converts in memory every time.
        model_name: Recorded in the cached folder's manifest.

    Raises:
        Unsupported: OpenVINO is missing, the model's pipeline is not transformer + mean
            pooling, or the converted model disagrees with torch.
    """
    ov = _import_openvino()
    transformer = _check_pipeline(model)
    graph = _convert(ov, model, transformer)
    encoder = OpenVinoEncoder(_compile(ov.Core(), graph, precision), _torch_tokenize(model),
                              dimension=dimension, source="converted")
    _check_agreement(encoder, model)
    if cache_dir is not None and (model_path / "tokenizer.json").is_file():
        _save(ov, graph, model, model_path, _cache_folder(cache_dir, model_path, ov),
              model_name=model_name or model_path.name, dimension=dimension)
    return encoder


def cached_folder(model_path: Path, cache_dir: Path) -> Path | None:
    """The cached conversion of the model at ``model_path`` in ``cache_dir``, if there is one.

    Imports OpenVINO (its version is part of the key), not torch.

    Raises:
        Unsupported: OpenVINO is not installed.
    """
    folder = _cache_folder(cache_dir, model_path, _import_openvino())
    return folder if is_prebuilt(folder) else None


def forget_cached(folder: Path) -> None:
    """Remove a cached conversion that would not load (converted again on the next load)."""
    shutil.rmtree(folder, ignore_errors=True)


def _cache_folder(cache_dir: Path, model_path: Path, ov: Any) -> Path:
    return cache_dir / f"openvino-{_cache_key(model_path, ov.get_version())}"


def _compile(core: Any, graph: Any, precision: Precision) -> Any:
    config: dict[str, Any] = {"PERFORMANCE_HINT": "LATENCY"}
    if precision is Precision.F32:
        config["INFERENCE_PRECISION_HINT"] = "f32"
    try:
        return core.compile_model(graph, "CPU", config)
    except Exception as exc:  # a CPU the plugin does not support, a damaged cache
        raise Unsupported(f"OpenVINO could not compile the model: {exc}") from exc


def _torch_tokenize(model: Any) -> Tokenize:
    """The sentence-transformers model's own tokenizer, giving numpy arrays."""
    def tokenize(texts: list[str]) -> Mapping[str, npt.NDArray[np.int64]]:
        return {name: value.numpy() for name, value in model.preprocess(texts).items()
                if hasattr(value, "numpy")}  # tensors only (it also returns text fields)

    return tokenize


# -- the prebuilt model: converted at build time, loaded without torch -----------------------

PREBUILT_MANIFEST = "mnemoscope-openvino.json"
"""The file that marks a folder as a prebuilt model (:func:`export_prebuilt`)."""
_PREBUILT_FORMAT = 1


def is_prebuilt(path: Path) -> bool:
    """Whether ``path`` is a folder written by :func:`export_prebuilt`."""
    return (path / PREBUILT_MANIFEST).is_file()


def export_prebuilt(model: Any, model_path: Path, out_dir: Path, *, model_name: str,
                    dimension: int) -> Path:
    """Write the model as a folder that runs on OpenVINO without torch (the installers').

    The folder holds the converted graph (``model.xml``/``.bin``, f16 weights), the model's
    ``tokenizer.json`` and a manifest with the sequence length and the torch vectors of the
    probe texts, against which :func:`load_prebuilt` checks the loaded model (the same format
    as the cached conversion :func:`build` writes, with f32 weights there). Before returning,
    the folder is loaded the way the installed app loads it and compared with torch.

    Raises:
        Unsupported: the model does not convert, or the folder disagrees with torch.
    """
    ov = _import_openvino()
    graph = _convert(ov, model, _check_pipeline(model))
    # Weights stored as f16 (45 MB instead of 90, decompressed when compiled): against torch
    # min cosine 0.999999 at f32 inference over 1,000 LoCoMo turns (docs/packaging.md); the
    # default precision on CPUs with native bf16 is unchanged by it (0.99991 either way).
    _write_folder(ov, graph, model, model_path, out_dir, model_name=model_name,
                  dimension=dimension, compress=True)
    _check_agreement(load_prebuilt(out_dir, precision=Precision.F32, dimension=dimension),
                     model)
    return out_dir


def _write_folder(ov: Any, graph: Any, model: Any, model_path: Path, out_dir: Path, *,
                  model_name: str, dimension: int, compress: bool) -> None:
    """The prebuilt folder: graph, ``tokenizer.json`` and the manifest with torch's vectors
    of the probe texts (what :func:`load_prebuilt` checks the loaded model against)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ov.save_model(graph, str(out_dir / "model.xml"), compress_to_fp16=compress)
    shutil.copy2(model_path / "tokenizer.json", out_dir / "tokenizer.json")
    probes = model.encode(list(_PROBES), normalize_embeddings=True, convert_to_numpy=True)
    manifest = {"format": _PREBUILT_FORMAT, "model_name": model_name, "dimension": dimension,
                "max_seq_length": int(model.max_seq_length), "openvino": ov.get_version(),
                "probes": list(_PROBES), "probe_vectors": probes.astype(float).tolist()}
    # the manifest last: a folder without it is not prebuilt (is_prebuilt), whatever else it has
    (out_dir / PREBUILT_MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")


def load_prebuilt(path: Path, *, precision: Precision, dimension: int,
                  source: str = "prebuilt") -> OpenVinoEncoder:
    """The encoder of a folder written by :func:`export_prebuilt`: OpenVINO and the
    ``tokenizers`` package only (no torch, no transformers).

    Raises:
        Unsupported: the folder is incomplete or for another dimension, OpenVINO or its CPU
            plugin is missing, or the model disagrees with the probe vectors it was built with.
    """
    try:
        manifest = json.loads((path / PREBUILT_MANIFEST).read_text(encoding="utf-8"))
        length = int(manifest["max_seq_length"])
        probes = [str(text) for text in manifest["probes"]]
        expected = np.asarray(manifest["probe_vectors"], dtype=np.float32)
        built_dimension = int(manifest["dimension"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise Unsupported(f"{path / PREBUILT_MANIFEST} is unreadable: {exc}") from exc
    if built_dimension != dimension:
        raise Unsupported(f"the prebuilt model has dimension {built_dimension}, the store "
                          f"expects {dimension}")
    ov = _import_openvino()
    try:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        graph = ov.Core().read_model(str(path / "model.xml"))
    except Exception as exc:  # missing files, a damaged graph, no tokenizers package
        raise Unsupported(f"the prebuilt model at {path} cannot be read: {exc}") from exc
    encoder = OpenVinoEncoder(_compile(ov.Core(), graph, precision),
                              _fast_tokenize(tokenizer, length), dimension=dimension,
                              source=source)
    found = encoder.encode(probes, batch_size=len(probes))
    agreement = float(np.min(np.sum(expected * found, axis=1)))
    if not agreement >= MIN_AGREEMENT:
        raise Unsupported(f"the prebuilt model disagrees with the vectors it was built with "
                          f"(cosine {agreement:.5f})")
    return encoder


def _fast_tokenize(tokenizer: Any, max_length: int) -> Tokenize:
    """sentence-transformers' tokenization with the ``tokenizers`` package alone: each text
    trimmed, truncated to ``max_length`` tokens, the batch padded to its longest."""
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    pad = tokenizer.token_to_id("[PAD]")
    tokenizer.enable_padding(pad_id=0 if pad is None else pad, pad_token="[PAD]")

    def tokenize(texts: list[str]) -> Mapping[str, npt.NDArray[np.int64]]:
        encodings = tokenizer.encode_batch([text.strip() for text in texts])
        return {"input_ids": np.asarray([e.ids for e in encodings], dtype=np.int64),
                "attention_mask": np.asarray([e.attention_mask for e in encodings],
                                             dtype=np.int64),
                "token_type_ids": np.asarray([e.type_ids for e in encodings], dtype=np.int64)}

    return tokenize


def _import_openvino() -> Any:
    """``openvino``, with its usage telemetry off.

    OpenVINO's model conversion reports usage to Google Analytics unless a consent file in the
    user's home says no. Mnemoscope holds people's memories and sends nothing anywhere: made
    unimportable, the telemetry package is replaced by OpenVINO's own no-op stub.

    Raises:
        Unsupported: OpenVINO is not installed.
    """
    if "openvino" not in sys.modules:
        for name in ("openvino_telemetry", "openvino_telemetry.backend"):
            sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # None blocks the import
    try:
        import openvino
    except ImportError as exc:
        raise Unsupported(f"OpenVINO is not installed ({exc})") from exc
    return openvino


def _check_pipeline(model: Any) -> Any:
    """The transformer module, if the model is transformer → mean pooling (→ normalize)."""
    modules = list(model)
    names = [type(m).__name__ for m in modules]
    if len(modules) < 2 or names[0] != "Transformer" or names[1] != "Pooling" \
            or any(name != "Normalize" for name in names[2:]):
        raise Unsupported(f"only transformer + mean pooling models convert; this is "
                          f"{' → '.join(names)}")
    if getattr(modules[1], "pooling_mode", None) != "mean":
        raise Unsupported("only mean pooling converts")
    return modules[0]


def _cache_key(model_path: Path, ov_version: str) -> str:
    """Changes with the weights, the pipeline and OpenVINO's version."""
    digest = hashlib.sha256(json.dumps([_PIPELINE_VERSION, ov_version]).encode())
    for path in sorted(model_path.rglob("*")):
        if path.is_file():
            stat = path.stat()
            digest.update(f"{path.relative_to(model_path)}:{stat.st_size}:{stat.st_mtime_ns}"
                          .encode())
    return digest.hexdigest()[:16]


def _convert(ov: Any, model: Any, transformer: Any) -> Any:
    import torch

    class Pooled(torch.nn.Module):
        """Transformer → mean over the attention mask → unit length (the ST pipeline)."""

        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    token_type_ids: torch.Tensor) -> torch.Tensor:
            hidden = self.inner(input_ids=input_ids, attention_mask=attention_mask,
                                token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=1)

    example = model.preprocess(["a short example", "and a slightly longer example text"])
    if "token_type_ids" not in example:
        raise Unsupported("the tokenizer gives no token type ids")
    wrapped = Pooled(transformer.auto_model).eval()
    try:
        # Tracing warns where transformers branches on shapes: whether to pad the mask (never,
        # for self-attention) and whether attention is causal (never, with a mask). Both are
        # constants for this model; _check_agreement compares the result with torch.
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ov.convert_model(wrapped, example_input={
                name: example[name] for name in ("input_ids", "attention_mask",
                                                 "token_type_ids")})
    except Exception as exc:
        raise Unsupported(f"OpenVINO could not convert the model: {exc}") from exc


def _save(ov: Any, graph: Any, model: Any, model_path: Path, target: Path, *,
          model_name: str, dimension: int) -> None:
    """Write the cached folder beside its final place, then move it there (a crash leaves
    no half-written model; an unwritable cache only costs the next load a conversion)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".openvino-", dir=target.parent))
        try:
            _write_folder(ov, graph, model, model_path, staging, model_name=model_name,
                          dimension=dimension, compress=False)
            os.replace(staging, target)
        except OSError:  # another process cached it first, or the disk is full
            shutil.rmtree(staging, ignore_errors=True)
    except OSError:
        return


def _check_agreement(encoder: OpenVinoEncoder, model: Any) -> None:
    expected = model.encode(list(_PROBES), normalize_embeddings=True, convert_to_numpy=True)
    found = encoder.encode(_PROBES, batch_size=len(_PROBES))
    agreement = float(np.min(np.sum(expected * found, axis=1)))
    if not agreement >= MIN_AGREEMENT:
        raise Unsupported(f"the OpenVINO model disagrees with torch (cosine {agreement:.5f})")
