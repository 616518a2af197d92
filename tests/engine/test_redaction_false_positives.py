"""False positives of the default redaction patterns on ordinary conversation (LoCoMo).

LoCoMo's turns and observations hold no secret and no personal number, so every finding there
is a false positive. The bound is a count (at most 1 text in 200 flagged), not a timing; the
measured figure is in docs/steer.md (``benchmarks/bench_redaction.py`` prints the table).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from engine.bench.suites import ROOT, load_script
from engine.redaction import Redactor

LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
MAX_FLAGGED_SHARE = 1 / 200


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    module = load_script("bench_redaction")
    assert module is not None, "benchmarks/bench_redaction.py is missing"
    return module


@pytest.fixture(scope="module")
def corpora(bench: ModuleType) -> dict[str, list[str]]:
    path = LOCOMO if LOCOMO.exists() else Path("/work/shared/data/locomo/locomo_dev.json")
    found: dict[str, list[str]] = bench.locomo_corpora(path)
    return found


@pytest.mark.parametrize("corpus", ["LoCoMo dev turns", "LoCoMo held-out turns",
                                    "LoCoMo observations"])
def test_ordinary_conversation_is_rarely_flagged(bench: ModuleType,
                                                 corpora: dict[str, list[str]],
                                                 corpus: str) -> None:
    texts = corpora[corpus]
    assert len(texts) > 1000  # the whole corpus was read
    flagged, kinds = bench.findings_per_kind(Redactor(), texts)
    assert flagged <= MAX_FLAGGED_SHARE * len(texts), dict(kinds)


def test_the_count_sees_findings(bench: ModuleType) -> None:
    # The measurement itself can fail: planted values are counted per kind.
    texts = ["call 415-555-0199", "the wifi password is hunter2Pass!", "nothing here"]
    flagged, kinds = bench.findings_per_kind(Redactor(), texts)
    assert flagged == 2 and dict(kinds) == {"PHONE": 1, "PASSWORD": 1}
