"""CLI: search --json shape, prune/compact dry runs, redact-scan, metrics, eval locomo (slice)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from app.cli import run_cli
from tests.app.conftest import Runner


def _run(store: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = run_cli(["--store", str(store), "--no-model", *args], settings_env={})
    return code, out.getvalue()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "store"
    for text, extra in (("User prefers TypeScript over JavaScript.", []),
                        ("Contact me at jane.doe@example.com any time.", []),
                        ("The cat is named Tom.", ["--layer", "episodic"])):
        code, _ = _run(path, "add", text, "--agent", "a", *extra)
        assert code == 0
    return path


def test_search_json_shape(store: Path) -> None:
    code, out = _run(store, "--json", "search", "typescript", "--agent", "a",
                     "--max-tokens", "12", "--inspect")
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == {"records", "total_tokens", "truncated", "strategy_applied",
                        "diagnostics"}
    assert doc["records"][0]["content"].startswith("User prefers TypeScript")
    diagnostics = doc["diagnostics"]
    assert {"candidate_count", "filtered_count", "time_ms", "compression_applied",
            "candidates"} <= set(diagnostics)
    assert diagnostics["candidate_count"] == 3
    first = diagnostics["candidates"][0]
    assert first["packed"] is True
    assert first["drop_reason"] is None
    assert any(c["drop_reason"] == "budget" for c in diagnostics["candidates"])


def test_search_human_output_and_pressure(store: Path) -> None:
    code, out = _run(store, "search", "cat", "--pressure", "throttle", "--inspect")
    assert code == 0
    assert "strategy balanced:throttle" in out


def test_search_prints_ids_that_get_accepts(store: Path) -> None:
    code, out = _run(store, "search", "the cat's name")
    assert code == 0
    found = [line.split()[3] for line in out.splitlines()[1:]]
    assert found
    for record_id in found:
        code, shown = _run(store, "get", record_id)
        assert code == 0 and f"id               {record_id}" in shown


def test_search_uses_the_retrieval_weights_from_the_environment(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_RETRIEVAL_WEIGHT_REASONING_RECENCY", "0")
    monkeypatch.setenv("MEMORY_RETRIEVAL_WEIGHT_REASONING_SEMANTIC", "2")
    code, out = _run(store, "--json", "search", "typescript", "--inspect")
    assert code == 0
    weights = {w["key"]: w["weight"] for w in json.loads(out)["diagnostics"]["scoring_breakdown"]}
    assert weights["recency"] == 0.0
    assert weights["semantic"] == max(weights.values())


def test_search_names_a_bad_retrieval_variable(store: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MEMORY_RETRIEVAL_BM25_K1", "fast")
    code, _ = _run(store, "search", "typescript", "--inspect")
    assert code == 1
    assert "MEMORY_RETRIEVAL_BM25_K1: must be a number" in capsys.readouterr().err


def test_search_rejects_bad_budget(store: Path) -> None:
    with pytest.raises(SystemExit) as info:
        _run(store, "search", "x", "--max-tokens", "0")
    assert info.value.code == 2


def test_prune_and_compact_dry_runs(store: Path) -> None:
    code, out = _run(store, "--json", "prune", "--mode", "aggressive", "--dry-run")
    assert code == 0
    assert json.loads(out)["dry_run"] is True
    code, out = _run(store, "--json", "compact", "--agent", "a", "--dry-run")
    assert code == 0
    assert json.loads(out)["agents"][0]["agent_id"] == "a"


def test_prune_lists_the_memories_it_would_remove_in_words(cli: Runner) -> None:
    texts = ["Ana keeps bees on the roof", "The gym opens at six", "Bob plays chess on Sundays",
             "Lena drinks oolong tea", "The printer jams on thick paper",
             "Marco rides a red bicycle", "Our office moved to Utrecht", "Priya owns payments",
             "The cat is named Tom", "Sam is allergic to peanuts", "Jordan waters the ferns",
             "Kim speaks fluent Portuguese"]
    for n, text in enumerate(texts):
        assert cli("add", text, "--importance", f"{0.05 + n / 20:.2f}")[0] == 0
    code, out, _ = cli("prune", "--mode", "aggressive", "--dry-run")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("prune (aggressive): would remove 1 record "
                               "(in the least important tenth: 1); 12 in store")
    record_id, shown = lines[1].split(maxsplit=1)
    assert shown == "in the least important tenth: Ana keeps bees on the roof"
    code, out, _ = cli("prune", "--mode", "aggressive")
    assert code == 0 and out.splitlines()[1].split() == [record_id, "in", "the", "least",
                                                         "important", "tenth"]
    assert "`mnemoscope fate ID`" in out and "bottom_decile" not in out


def test_redact_scan_and_metrics(store: Path) -> None:
    code, out = _run(store, "--json", "redact-scan")
    doc = json.loads(out)
    assert code == 0
    assert doc["count"] == 1
    assert doc["records"][0]["kinds"] == {"EMAIL": 1}
    assert "jane.doe" not in doc["records"][0]["preview"]
    code, out = _run(store, "redact-scan")
    assert code == 0 and " 1 e-mail address in content: Contact me at <REDACT:sha256-" in out
    code, out = _run(store, "--json", "metrics")
    assert code == 0
    assert json.loads(out)["aggregate"]["memory_records_total"] == 3


LOCOMO = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo_dev.json"


@pytest.mark.slow
@pytest.mark.model
def test_eval_locomo_slice(tmp_path: Path) -> None:
    path = LOCOMO if LOCOMO.exists() else Path("/work/shared/data/locomo/locomo_dev.json")
    out = io.StringIO()
    with redirect_stdout(out):
        code = run_cli(["--store", str(tmp_path / "unused"), "--json", "eval", "locomo",
                        str(path), "--unit", "observations", "--conversations", "1",
                        "--questions", "12"], settings_env={})
    doc = json.loads(out.getvalue())
    assert code == 0
    assert doc["questions"] == 12
    assert set(doc["ours"]) == {"hit@1", "hit@5", "hit@10"}
    assert doc["ours"]["hit@10"] >= doc["ours"]["hit@1"]
    assert doc["baseline"]["hit@5"] > 0.0


def test_eval_locomo_prints_folds(tmp_path: Path) -> None:
    def sample(i: int) -> dict[str, object]:
        turns = [{"speaker": "Ann", "dia_id": "D1:1", "text": f"I took up chess {i}."},
                 {"speaker": "Bob", "dia_id": "D1:2", "text": "The weather was grey."}]
        return {"sample_id": f"conv-{i}",
                "conversation": {"speaker_a": "Ann", "speaker_b": "Bob",
                                 "session_1_date_time": "1:56 pm on 8 May, 2023",
                                 "session_1": turns},
                "qa": [{"question": "What did Ann take up?", "evidence": ["D1:1"],
                        "category": 4}]}

    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([sample(0), sample(1)]), encoding="utf-8")
    code, out = _run(tmp_path / "unused", "eval", "locomo", str(path), "--folds")
    assert code == 0
    lines = out.splitlines()
    assert "  ingest: 0 of 4 turns deferred to review" in lines
    assert any(line.split()[:2] == ["conv-1", "1"] for line in lines)
    assert any(line.split()[:2] == ["mean", "1.000"] for line in lines)
    assert any(line.split()[:2] == ["worst", "1.000"] for line in lines)
