"""``extract`` and ``llm status`` through the real parser against the real LLM test server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app.conftest import Runner
from tests.support.llm_server import Behaviour, LLMTestServer

KEY = "sk-cli-SECRET-9876543210"

ANSWER = json.dumps({"schemaVersion": "v1", "memories": [
    {"content": "User works as a nurse", "category": "fact", "importance": 0.7,
     "confidence": 0.9, "emotionalContext": None},
    {"content": "", "category": "fact", "importance": 0.1, "confidence": 0.1},
]})


@pytest.fixture
def server() -> Iterator[LLMTestServer]:
    with LLMTestServer(default=Behaviour(content=ANSWER, input_tokens=1000,
                                         output_tokens=1000)) as running:
        yield running


@pytest.fixture
def conversation(tmp_path: Path) -> Path:
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps({"agent_id": "nurse-bot", "messages": [
        {"id": "u1", "role": "user", "content": "I work as a nurse. Mail me at bob@example.com"},
        {"id": "a1", "role": "assistant", "content": "Noted!"}]}), encoding="utf-8")
    return path


@pytest.fixture
def cli(cli: Runner, server: LLMTestServer, monkeypatch: pytest.MonkeyPatch) -> Runner:
    """The shared runner, with an LLM provider pointing at the test server."""
    for name, value in {"MNEMOSCOPE_LLM_PROVIDER": "openai",
                        "MNEMOSCOPE_LLM_BASE_URL": server.base_url + "/v1",
                        "MNEMOSCOPE_LLM_MODEL": "gpt-4o-mini",
                        "MNEMOSCOPE_LLM_API_KEY_ENV": "CLI_TEST_LLM_KEY",
                        "CLI_TEST_LLM_KEY": KEY,
                        "MNEMOSCOPE_LLM_DAILY_BUDGET_USD": "0.002"}.items():
        monkeypatch.setenv(name, value)
    return cli


def test_extract_dry_run_json_then_status_from_the_ledger(cli: Runner, conversation: Path,
                                                          server: LLMTestServer) -> None:
    code, out, _ = cli("extract", str(conversation), "--dry-run", "--json")
    assert code == 0
    doc = json.loads(out)
    assert (doc["source"], doc["dry_run"], doc["agent_id"]) == ("llm", True, "nurse-bot")
    assert [m["content"] for m in doc["memories"]] == ["User works as a nurse"]
    assert doc["invalid"] == [{"index": 1, "reason": "invalid_field", "field": "content",
                               "detail": "must be a non-empty string"}]
    assert doc["stored_ids"] is None
    # gpt-4o-mini: 1000 * 0.15/M + 1000 * 0.60/M = 0.00075 USD
    assert doc["cost_usd"] == pytest.approx(0.00075)
    assert server.requests[-1].headers["Authorization"] == f"Bearer {KEY}"
    # A new process (a restart) sees the spend from the ledger.
    code, out, _ = cli("--json", "llm", "status")
    assert code == 0
    status = json.loads(out)
    assert status["spent_usd"] == pytest.approx(0.00075)
    assert status["budget_usd"] == 0.002
    assert status["breaker"] == "closed"
    assert status["alerts"] == []
    assert status["window_start"].endswith("T00:00:00.000Z")
    assert set(status) >= {"window_utilization_percent", "projected_total", "should_throttle"}
    assert KEY not in out


def test_budget_spent_falls_back_and_says_why(cli: Runner, conversation: Path,
                                             server: LLMTestServer) -> None:
    assert cli("extract", str(conversation), "--dry-run", "--json")[0] == 0
    assert cli("extract", str(conversation), "--dry-run", "--json")[0] == 0  # 0.0015 USD: 75 %
    code, out, _ = cli("extract", str(conversation), "--dry-run", "--json")
    doc = json.loads(out)
    assert code == 0
    assert (doc["source"], doc["fallback_reason"]) == ("heuristic", "budget_exceeded")
    assert [m["content"] for m in doc["memories"]] == ["User work as a nurse."]
    assert len(server.requests) == 2
    code, out, _ = cli("llm", "status")
    assert "alerts:      70%" in out
    assert "breaker:     closed" in out


def test_extract_stores_valid_candidates(cli: Runner, conversation: Path) -> None:
    code, out, err = cli("extract", str(conversation), "--model", "gpt-4o-mini")
    assert code == 0, err
    assert "extracted 1 memory via openai/gpt-4o-mini" in out
    assert "rejected item 1: invalid_field content" in out
    assert "stored 1 records" in out
    code, out, _ = cli("--json", "list", "--agent", "nurse-bot")
    listing = json.loads(out)
    assert [r["content"] for r in listing["records"]] == ["User works as a nurse"]
    assert listing["records"][0]["source"] == "extractor:openai"


def test_no_provider_uses_the_heuristic(cli: Runner, conversation: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MNEMOSCOPE_LLM_PROVIDER", "MNEMOSCOPE_LLM_BASE_URL", "MNEMOSCOPE_LLM_MODEL"):
        monkeypatch.delenv(name)
    code, out, _ = cli("--json", "extract", str(conversation), "--dry-run")
    doc = json.loads(out)
    assert (code, doc["source"], doc["fallback_reason"]) == (0, "heuristic", "no_provider")
    code, out, _ = cli("llm", "status")
    assert "provider:    (none configured)" in out


def test_without_a_provider_the_human_output_says_what_the_heuristic_keeps(
        cli: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MNEMOSCOPE_LLM_PROVIDER", "MNEMOSCOPE_LLM_BASE_URL", "MNEMOSCOPE_LLM_MODEL",
                 "MNEMOSCOPE_LLM_DAILY_BUDGET_USD"):
        monkeypatch.delenv(name)
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "Two seats together, please."}]),
                    encoding="utf-8")
    code, out, _ = cli("extract", str(path), "--dry-run")
    lines = out.splitlines()
    assert code == 0 and lines[0] == \
        "extracted 0 memories via the local heuristic (no LLM provider configured)"
    assert "no_provider" not in out and "keeps first-person statements" in lines[1]
    code, out, _ = cli("llm", "status")
    assert "budget:      0.000000 USD spent since " in out
    assert out.split("budget:")[1].splitlines()[0].endswith(", no daily budget set")
    assert "of disabled" not in out


def test_bad_input_file(cli: Runner, tmp_path: Path) -> None:
    code, _, err = cli("extract", str(tmp_path / "missing.json"), "--dry-run")
    assert code == 1
    assert "missing.json" in err


TRIP = ["Went to Lisbon with Ana in May and ate pasteis de nata.",
        "Took the tram 28 up to the castle on the second morning.",
        "Ana lost her phone at the Alfama flea market, found it at a kiosk.",
        "Flew back from Lisbon to Berlin on a late Sunday flight."]


def _trip(cli: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every episodic record is old enough and none is kept back, so all four are compacted.
    monkeypatch.setenv("MEMORY_EPISODIC_WINDOW_MS", "0")
    monkeypatch.setenv("MEMORY_EPISODIC_KEEP_RECENT", "0")
    for text in TRIP:
        code, _, err = cli("add", text, "--agent", "traveller", "--layer", "episodic",
                           "--tags", "lisbon")
        assert code == 0, err


def test_compact_summarizes_through_the_configured_provider(
        cli: Runner, server: LLMTestServer, monkeypatch: pytest.MonkeyPatch) -> None:
    _trip(cli, monkeypatch)
    server.script(Behaviour(content="A May trip to Lisbon with Ana: tram 28, a lost phone "
                                    "found again, a late flight home."))
    code, out, err = cli("--json", "compact", "--agent", "traveller")
    assert code == 0, err
    [task] = json.loads(out)["agents"][0]["tasks"]
    assert (task["status"], task["summarizer"]) == ("completed", "llm:openai")
    sent = json.dumps(server.requests[-1].body)
    assert "Ana lost her phone" in sent
    code, out, _ = cli("--json", "list", "--agent", "traveller")
    [record] = json.loads(out)["records"]
    assert record["content"].startswith("A May trip to Lisbon")
    assert record["source"] == "compaction:llm:openai"


def test_compact_falls_back_when_the_provider_fails(
        cli: Runner, server: LLMTestServer, monkeypatch: pytest.MonkeyPatch) -> None:
    _trip(cli, monkeypatch)
    server.script(Behaviour(kind="status", status=400))  # not retryable: one request
    code, out, err = cli("compact", "--agent", "traveller")
    assert code == 0, err
    assert "completed 4 source(s)" in out and "via heuristic" in out
    code, out, _ = cli("--json", "events", "--limit", "50")
    kinds = {e["kind"]: e for e in json.loads(out)["events"]}
    assert kinds["llm:fallback"]["decision_reason"] == "provider_error"
    assert "memory:summarization:fallback" in kinds


def test_compact_no_llm_keeps_the_heuristic(cli: Runner, server: LLMTestServer,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _trip(cli, monkeypatch)
    code, out, err = cli("compact", "--agent", "traveller", "--no-llm")
    assert code == 0, err
    assert "via heuristic" in out
    assert server.requests == []


def test_metrics_reports_the_seed_llm_metrics(cli: Runner, conversation: Path) -> None:
    code, _, err = cli("extract", str(conversation))
    assert code == 0, err
    code, out, err = cli("--json", "metrics")
    assert code == 0, err
    llm = json.loads(out)["llm"]
    assert (llm["configured"], llm["provider"], llm["model"]) == (True, "openai", "gpt-4o-mini")
    assert llm["memory_llm_circuit_state"] == 0
    assert llm["memory_llm_budget_utilization_percent"] > 0  # the extraction was charged
    assert set(llm["memory_llm_budget_alerts_total"]) == {"70", "90", "100"}
    [row] = llm["memory_llm_latency_ms_summary"]["by_operation"]
    assert (row["provider"], row["operation"], row["count"]) == ("openai", "extract", 1)
    code, out, _ = cli("metrics")
    assert "memory_llm_circuit_state         0 (closed)" in out
    assert "openai/extract: p50" in out
    # retrieval latency and task counters live in the process that does the work: a one-off
    # command's zeros are set apart and labelled, not shown as the store's figures
    store_part, _, process_part = out.partition("\ncounted by this command only, so 0 here")
    assert "memory_records_total" in store_part and "retrievals" not in store_part
    assert "retrievals                       0" in process_part
