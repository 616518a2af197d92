"""Build step: convert the embedding model for OpenVINO into a folder the installed app loads
without torch (``engine.embedding_openvino.export_prebuilt``).

    python packaging/export_model.py build/model-openvino

The folder (model.xml/.bin with f32 weights, tokenizer.json, a manifest with the probe
vectors torch gives) is what the spec bundles as ``_internal/mnemoscope_model``; the runtime hook
points ``MNEMOSCOPE_BUNDLED_MODEL`` at it. Writing it checks it against torch on probe texts.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: export_model.py OUT_DIR", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    from engine.embedding import DEFAULT_MODEL_NAME, default_model_path
    from engine.embedding_openvino import export_prebuilt

    out = Path(argv[0])
    started = time.perf_counter()
    source = default_model_path()
    model = SentenceTransformer(str(source), device="cpu")
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    dimension = getattr(model, "get_embedding_dimension", None) \
        or model.get_sentence_embedding_dimension
    export_prebuilt(model, source, staging, model_name=DEFAULT_MODEL_NAME,
                    dimension=int(dimension() or 0))
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    size = sum(p.stat().st_size for p in out.iterdir()) / 1e6
    print(f"model for OpenVINO: {out} ({size:.1f} MB) in {time.perf_counter() - started:.1f} s",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
