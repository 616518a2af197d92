"""PyInstaller runtime hook: runs before the app in the frozen build.

* The embedding model is bundled (``mnemoscope_model``, converted for OpenVINO); the app is
  pointed at it and never reaches a model hub, even if the user's environment says otherwise.
  Chroma's anonymous telemetry is off as well.
* A windowed Windows executable has no stdout/stderr (``None``); give it null streams so a
  stray ``print`` cannot crash the app.
"""

import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["ANONYMIZED_TELEMETRY"] = "False"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# The embedding model converted for OpenVINO (packaging/export_model.py), bundled beside the
# app's modules: engine.embedding.default_model_path() loads it without torch.
os.environ["MNEMOSCOPE_BUNDLED_MODEL"] = os.path.join(
    getattr(sys, "_MEIPASS", os.path.dirname(sys.executable)), "mnemoscope_model")

if sys.stdout is None:
    sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the app
if sys.stderr is None:
    sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the app
