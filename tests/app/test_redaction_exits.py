"""Issue 18 A: with redaction on, no planted secret leaves through any exit.

The corpus (:mod:`tests.support.secrets_corpus`) plants 70 secrets of 20 kinds in the content,
tags, metadata, source, provenance and agent id of records, half of them while redaction is off
(their events are stored raw), half with it on, plus secrets in review items. Then every CLI
command that reads a store (human and ``--json``; the import commands with files of their
own), the export, the events, the review queue and every API route and filter are read with
redaction on and searched for the secrets, whole or any 10 characters of one.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from app.cli import run_cli
from app.cli.context import CliContext
from app.settings import load_settings
from engine.events import EventFilter
from engine.introspection import IntrospectionServer, ServerLimits
from engine.memory_engine import EngineConfig, MemoryEngine
from engine.records import NewMemory
from engine.redaction import DEFAULT_PATTERNS, redact_text, redactor_for
from engine.store import StoreSpec
from tests.support.secrets_corpus import PLACES, SECRETS, Plant, Secret, leaks, plants

TOKEN = "test-token-0123456789abcdef"
# Deferred to the review queue: a time conflict with an existing memory (the gray zone).
REVIEW_SECRETS = (
    Secret("EMAIL", "kim.ito@ops.example.com", "kim.ito@ops.example.com"),
    Secret("AI_API_KEY", "sk-proj-Rv5Tx8Zq2Wm6Kp1Ln9Bc4Hd7Jf3Gs0Ya",
           "Rv5Tx8Zq2Wm6Kp1Ln9Bc4Hd7Jf3Gs0Ya"),
)
ALL_SECRETS = (*SECRETS, *REVIEW_SECRETS)


@dataclass
class Planted:
    """A store with the corpus in it."""

    store: str
    env: dict[str, str]
    plants: list[Plant]
    ids: dict[int, str]  # plant number -> record id


def _open(store: str, *, redaction: bool, read_only: bool = False) -> MemoryEngine:
    return MemoryEngine.open(StoreSpec(store, read_only=read_only),
                             config=EngineConfig(redaction=redaction))


def _plant(engine: MemoryEngine, plant: Plant) -> str:
    record_id = ""
    for memory in plant.memories:
        result = engine.ingest(memory)
        assert result.record_id, (plant.secret, result.action, result.reason)
        record_id = record_id or result.record_id
    return record_id


@pytest.fixture
def planted(tmp_path: Path) -> Planted:
    store = str(tmp_path / "store")
    corpus = plants()
    ids: dict[int, str] = {}
    half = len(corpus) // 2
    engine = _open(store, redaction=False)  # these events are stored raw
    try:
        for number, plant in enumerate(corpus[:half]):
            ids[number] = _plant(engine, plant)
        raw_events = json.dumps([e.to_json() for e in engine.events.query(EventFilter())])
        assert leaks(raw_events), "setup: events recorded with redaction off hold the text"
    finally:
        engine.close()
    engine = _open(store, redaction=True)
    try:
        for number, plant in enumerate(corpus[half:], start=half):
            ids[number] = _plant(engine, plant)
        for secret in REVIEW_SECRETS:
            engine.ingest(NewMemory(f"The vault opens at 6am, ask {secret.text}",
                                    agent_id=f"review-{secret.kind}"))
            deferred = engine.ingest(NewMemory(f"The vault opens at 7am, ask {secret.text}",
                                               agent_id=f"review-{secret.kind}"))
            assert deferred.review_id is not None
        for number, plant in enumerate(corpus):  # every plant is where it claims to be
            assert plant.secret.needle in json.dumps(engine.get(ids[number]).to_json()), plant
    finally:
        engine.close()
    env = {"MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "config"),
           "MNEMOSCOPE_DATA_DIR": str(tmp_path / "data"), "MNEMOSCOPE_REDACTION": "1"}
    return Planted(store, env, corpus, ids)


def _cli(planted: Planted, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = run_cli(["--store", planted.store, "--no-model", *argv], planted.env)
    out, err = capsys.readouterr()
    assert code == 0, (argv, err)
    return out + err


def test_corpus_covers_every_kind_and_place() -> None:
    corpus = plants()
    assert len(SECRETS) == 70 and len({s.kind for s in SECRETS}) == 20  # as docs/reliability.md
    assert {p.place for p in corpus} == set(PLACES)
    keys = {next(iter(p.memories[0].metadata)) for p in corpus if p.place == "metadata"}
    assert {"note", "deploy"} < keys  # metadata plants: values, nested values and keys
    redactor = redactor_for(DEFAULT_PATTERNS)
    for secret in SECRETS:  # each secret is what its kind says: that detector masks its needle
        found = [(f.kind, secret.text[f.start:f.end]) for f in redactor.findings(secret.text)]
        assert any(kind == secret.kind and secret.needle in text for kind, text in found), \
            (secret, found)


def test_no_cli_command_prints_a_secret(planted: Planted, capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    export = tmp_path / "export.jsonl"
    some = [planted.ids[n] for n in range(0, len(planted.plants), 4)]
    commands: list[tuple[str, ...]] = [
        ("list", "--limit", "500"), ("search", "--inspect", "--max-tokens", "100000"),
        ("search", "rotate credentials value", "--inspect", "--max-tokens", "100000"),
        ("events", "--limit", "5000"), ("review", "list"), ("stats",), ("metrics",),
        ("redact-scan",), ("export", str(export)), ("prune", "--mode", "aggressive", "--dry-run"),
        ("expire", "--dry-run"), ("compact", "--dry-run"), ("retention", "--dry-run"),
        ("doctor",),
        *(("get", record_id) for record_id in some),
        *(("fate", record_id) for record_id in some),
    ]
    printed: dict[str, str] = {}
    for command in commands:
        printed[" ".join(command)] = _cli(planted, capsys, *command)
        printed["--json " + " ".join(command)] = _cli(planted, capsys, "--json", *command)
    printed["the export file"] = export.read_text(encoding="utf-8")
    shown = {where: found for where, text in printed.items()
             if (found := leaks(text, ALL_SECRETS))}
    assert shown == {}
    everything = "\n".join(printed.values())
    engine = _open(planted.store, redaction=False, read_only=True)
    try:  # the raw hash of a masked content would confirm a guess: shown nowhere
        raw_hashes = [engine.get(planted.ids[n]).content_hash
                      for n, plant in enumerate(planted.plants) if plant.place == "content"]
    finally:
        engine.close()
    assert raw_hashes and not [h for h in raw_hashes if h in everything]
    # still useful: ids shown, events and review items listed, the export complete
    listing = json.loads(_cli(planted, capsys, "--json", "list", "--limit", "500"))
    assert {r["id"] for r in listing["records"]} >= set(planted.ids.values())
    human = _cli(planted, capsys, "list", "--limit", "500")
    assert all(record_id in human for record_id in planted.ids.values())
    events = json.loads(_cli(planted, capsys, "--json", "events", "--limit", "5000"))["events"]
    assert len(events) > len(planted.plants)
    assert all(e["payload"].get("content") in (None, "<redacted>") for e in events)
    assert len(json.loads(_cli(planted, capsys, "--json", "review", "list"))["items"]) == 2
    assert len(export.read_text(encoding="utf-8").splitlines()) == len(listing["records"])


def _run(planted: Planted, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = run_cli(["--store", planted.store, "--no-model", *argv], planted.env)
    out, err = capsys.readouterr()
    return code, out + err


def test_no_import_command_prints_a_secret(planted: Planted,
                                           capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    """ingest (human, --json, --stream, with refused lines), import-conversation (its
    --dry-run samples quote the messages, cut to a width; --stream), imports and the
    undo-import plan. The first conversation messages put a quoted password, an IBAN and an
    Amex number where the samples quote and cut them: masked after quoting or cutting, they
    would show."""
    lines = [json.dumps({"content": f"Imported note {n}: {secret.text}",
                         "agent_id": f"import-{n}"}) for n, secret in enumerate(ALL_SECRETS)]
    lines += [f"{{not json {SECRETS[21].text}",  # refused lines quote what they refuse
              json.dumps({"content": "importance as text", "importance": SECRETS[3].text}),
              json.dumps({"content": "expiry as text", "expires_at": SECRETS[51].text}),
              json.dumps({"content": "a tag with a comma", "tags": [f"a,{SECRETS[36].text}"]})]
    jsonl = tmp_path / "notes.jsonl"
    jsonl.write_text("\n".join(lines) + "\n", encoding="utf-8")
    iban = next(s for s in SECRETS if s.kind == "IBAN")
    card = next(s for s in SECRETS if s.text.startswith("3782"))  # Amex, 15 digits
    lead = "Remember these for the quarterly review: "  # the samples cut lines at 72
    messages = [f'Please remember that the wifi password is "Blue Heron 77" for {lead}',
                f"{lead}{iban.text} is the account",
                f"{lead}and also {card.text} is the card",
                *(f"Note {n}: {secret.text}" for n, secret in enumerate(ALL_SECRETS))]
    conversation = tmp_path / "chat.json"
    conversation.write_text(json.dumps([{"role": "user", "content": text}
                                        for text in messages]), encoding="utf-8")
    secrets = (*ALL_SECRETS, Secret("PASSWORD", "", "Blue Heron 77"))
    printed: dict[str, str] = {}
    for json_flag in ((), ("--json",)):
        for command in (("import-conversation", "--keep", "all", "--dry-run", str(conversation)),
                        ("import-conversation", "--keep", "all", str(conversation)),
                        ("import-conversation", "--keep", "all", "--stream", str(conversation)),
                        ("ingest", str(jsonl)), ("ingest", "--stream", str(jsonl))):
            code, printed[" ".join((*json_flag, *command))] = _run(planted, capsys, *json_flag,
                                                                   *command)
            assert code == (1 if command[0] == "ingest" else 0), (command, code)
    imports = json.loads(_run(planted, capsys, "--json", "imports")[1])["imports"]
    assert len(imports) == 8  # the dry runs are not imports
    for json_flag in ((), ("--json",)):
        printed[" ".join((*json_flag, "imports"))] = _run(planted, capsys, *json_flag,
                                                          "imports")[1]
        for entry in imports:
            code, text = _run(planted, capsys, *json_flag, "undo-import", entry["id"])
            assert code == 0, text
            printed[" ".join((*json_flag, "undo-import", entry["id"]))] = text
    shown = {where: found for where, text in printed.items()
             if (found := leaks(text, secrets))}
    assert shown == {}
    # still useful: the samples, the refused lines and the plans are there
    human = printed["import-conversation --keep all --dry-run " + str(conversation)]
    assert "the wifi password is" in human and "<REDACT:sha256-" in human
    assert printed["ingest " + str(jsonl)].count(f"{jsonl}:") == 4
    assert all("Undo would: delete" in printed[f"undo-import {e['id']}"] for e in imports)


def test_no_writing_command_prints_a_secret(planted: Planted,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """add, edit and delete echo what they wrote (and refuse bad values by quoting them)."""
    by_kind = {secret.kind: secret for secret in SECRETS}
    content, tag, agent = by_kind["PASSWORD"], by_kind["PHONE"], by_kind["SSN"]
    meta, source, edited = by_kind["IBAN"], by_kind["EMAIL"], by_kind["CARD"]
    printed: dict[str, str] = {}
    for json_flag in ((), ("--json",)):
        add = (*json_flag, "add", f"Note: {content.text}", "--tags", tag.text, "--agent",
               agent.text, "--metadata", json.dumps({"iban": meta.text}), "--source",
               source.text)
        code, printed[" ".join(add)] = _run(planted, capsys, *add)
        assert code == 0, printed[" ".join(add)]
        record_id = json.loads(_run(planted, capsys, "--json", "list", "--agent",
                                    redact_text(agent.text))[1])["records"][0]["id"]
        for argv in (("edit", record_id, "--content", f"Card {edited.text} on file"),
                     ("edit", record_id, "--metadata", f'{{"note": "{meta.text}"'),
                     ("delete", record_id)):
            code, printed[" ".join((*json_flag, *argv))] = _run(planted, capsys, *json_flag,
                                                                *argv)
            assert code == (1 if "--metadata" in argv else 0), argv
    shown = {where: found for where, text in printed.items() if (found := leaks(text))}
    assert shown == {}
    refused = [text for where, text in printed.items() if " edit " in f" {where}" and
               "--metadata" in where]
    assert len(refused) == 2 and all("not valid JSON" in text for text in refused)


def test_export_redacts_every_field_and_hashes_the_masked_content(
        planted: Planted, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    planted.env.pop("MNEMOSCOPE_REDACTION")  # off: export --redact alone must suffice
    export = tmp_path / "export.jsonl"
    _cli(planted, capsys, "export", str(export), "--redact")
    text = export.read_text(encoding="utf-8")
    assert leaks(text) == []
    rows = {row["id"]: row for row in map(json.loads, text.splitlines())}
    engine = _open(planted.store, redaction=False, read_only=True)
    try:
        for number, plant in enumerate(planted.plants):
            row, raw = rows[planted.ids[number]], engine.get(planted.ids[number])
            assert row["redacted"] is True
            if plant.place == "content":
                from engine.text import content_hash

                assert row["content_hash"] != raw.content_hash
                assert row["content_hash"] == content_hash(row["content"])
            else:
                assert row["content_hash"] == raw.content_hash  # nothing masked: same hash
    finally:
        engine.close()


def test_filters_match_masked_text_never_raw(planted: Planted,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    for number, plant in enumerate(planted.plants):
        needle = plant.secret.needle
        if plant.place == "content":
            out = _cli(planted, capsys, "--json", "list", "--text", needle[:8])
            assert json.loads(out)["total"] == 0, plant.secret
        if plant.place == "agent_id":
            out = _cli(planted, capsys, "--json", "list", "--agent", plant.secret.text)
            assert json.loads(out)["total"] == 0, plant.secret
            masked = json.loads(_cli(planted, capsys, "--json", "get",
                                     planted.ids[number]))["agent_id"]
            out = _cli(planted, capsys, "--json", "list", "--agent", masked)
            assert [r["id"] for r in json.loads(out)["records"]] == [planted.ids[number]]
            out = _cli(planted, capsys, "--json", "search", "--inspect", "--agent", masked)
            assert [r["id"] for r in json.loads(out)["records"]] == [planted.ids[number]]
            for command in (("search", "--inspect"), ("prune", "--mode", "aggressive",
                                                      "--dry-run")):
                code = run_cli(["--store", planted.store, "--no-model", *command, "--agent",
                                plant.secret.text], planted.env)
                out, err = capsys.readouterr()
                assert code == 1 and "no agent is shown with this id" in err, command
                assert leaks(out + err) == []


def test_redact_scan_without_redaction_flags_the_planted_records(
        planted: Planted, capsys: pytest.CaptureFixture[str]) -> None:
    planted.env.pop("MNEMOSCOPE_REDACTION")
    report = json.loads(_cli(planted, capsys, "--json", "redact-scan"))
    flagged = {hit["id"]: hit for hit in report["records"]}
    holding = set(planted.ids.values())
    found = holding & flagged.keys()
    assert len(found) / len(holding) >= 0.95
    assert {f for hit in flagged.values() for f in hit["fields"]} >= {
        "content", "tags", "metadata", "source", "provenance", "agent_id"}
    assert leaks(json.dumps(report)) == []  # the scan shows where, never what


@pytest.fixture
def api(planted: Planted) -> Iterator[tuple[httpx.Client, MemoryEngine]]:
    engine = _open(planted.store, redaction=True)
    server = IntrospectionServer(engine, token=TOKEN, limits=ServerLimits(
        rate_per_s=10_000.0, burst=10_000, stream_max_s=0.5, keepalive_s=0.1)).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30.0,
                          headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            yield client, engine
    finally:
        server.stop()
        engine.close_layers()
        engine.close()


def test_no_api_route_shows_a_secret(planted: Planted,
                                     api: tuple[httpx.Client, MemoryEngine]) -> None:
    client, engine = api
    paths = ["/v1/snapshot", "/v1/records?limit=500", "/v1/diff?since=0",
             "/v1/events?limit=500", "/v1/events?limit=500&after=100",
             "/v1/events/stream", "/v1/layers/social", "/v1/layers/procedural?episodes=1",
             "/v1/layers/spatial", "/debug/memory",
             *(f"/v1/records/{record_id}" for record_id in planted.ids.values()),
             *(f"/v1/events?record={record_id}" for record_id in planted.ids.values()),
             "/v1/records?text=" + SECRETS[3].needle,  # error-free, echoed nowhere
             "/v1/records?limit=99999&text=" + SECRETS[3].needle]  # a 400 quoting the value
    bodies = []
    for path in paths:
        response = client.get(path)
        assert response.status_code in (200, 400), (path, response.text)
        bodies.append(response.text)
    everything = "\n".join(bodies)
    assert leaks(everything, ALL_SECRETS) == []
    records = {r["id"]: r for r in client.get("/v1/records?limit=500").json()["records"]}
    assert records.keys() >= set(planted.ids.values())
    # A raw content hash would confirm a guessed secret: records carry the masked text's
    # hash, events (whose text is stripped) a keyed digest.
    for number, plant in enumerate(planted.plants):
        record = records[planted.ids[number]]
        assert (record["content_hash"] == engine.get(record["id"]).content_hash) == \
            (plant.place != "content")
    events = client.get("/v1/events?limit=500").json()["events"]
    raw_hashes = {e.memory_hash for e in engine.events.query(EventFilter(limit=500))}
    shown_hashes = {e["memory_hash"] for e in events} - {None}
    assert shown_hashes and not shown_hashes & raw_hashes
    # The stream and the long-poll show one event alike (one masking pass each).
    streamed = {}
    for line in client.get("/v1/events/stream").text.splitlines():
        if line.startswith("data: "):
            event = json.loads(line[len("data: "):])
            streamed[event["event_id"]] = event
    assert streamed and all(streamed[e["event_id"]] == e for e in events
                            if e["event_id"] in streamed)


def test_prefix_probing_learns_nothing(planted: Planted,
                                       api: tuple[httpx.Client, MemoryEngine]) -> None:
    client, _ = api

    def total(**params: str) -> int:
        response = client.get("/v1/records", params={**params, "limit": "500"})
        assert response.status_code == 200, response.text
        count: int = response.json()["total"]
        return count

    for plant in planted.plants:
        secret = plant.secret
        if plant.place == "content":
            # A prober extends a guess while the filter still matches: it never matches.
            assert [total(text=secret.needle[:k]) for k in range(6, len(secret.needle) + 1)] \
                == [0] * (len(secret.needle) - 5), secret
            assert total(text=redact_text(secret.text)) == 1  # what the reader sees matches
        if plant.place == "tags":
            assert total(tag=secret.text) == 0
            assert total(tag=redact_text(secret.text)) == 1
        if plant.place == "agent_id":
            assert total(agent=secret.text) == 0
            assert total(agent=redact_text(secret.text)) == 1
            for route, key in (("/v1/layers/social", "summaries"),
                               ("/v1/layers/procedural", "patterns"),
                               ("/v1/layers/spatial", "points")):
                response = client.get(route, params={"agent": secret.text})
                assert response.status_code == 200 and response.json()[key] == []


def test_log_records_of_a_redacting_run_reach_stderr_masked(tmp_path: Path) -> None:
    env = {"MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "config"),
           "MNEMOSCOPE_DATA_DIR": str(tmp_path / "data"), "MNEMOSCOPE_REDACTION": "1"}
    err = io.StringIO()
    ctx = CliContext(load_settings(env), stderr=err)
    secret = SECRETS[9]
    with ctx.masked_logs():
        logging.getLogger("engine.introspection").warning("request for %s failed",
                                                          secret.text)
    logging.getLogger("engine.introspection").warning("after the run: %s", "not captured")
    assert secret.needle not in err.getvalue() and "<REDACT:sha256-" in err.getvalue()
    assert "not captured" not in err.getvalue()  # the handler left with the command


def test_human_lines_keep_vouched_ids_and_issued_tokens_mask_the_rest(tmp_path: Path) -> None:
    env = {"MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "config"),
           "MNEMOSCOPE_DATA_DIR": str(tmp_path / "data"), "MNEMOSCOPE_REDACTION": "1"}
    out = io.StringIO()
    ctx = CliContext(load_settings(env), stdout=out)
    record_id, other_uuid = "5e1d0c9b-3f2a-4b7c-9d8e-0a1b2c3d4e5f", SECRETS[40].text
    token = "Qm9vZ2llV29vZ2llQm9vZ2llMTIzNDU2Nzg5MA"  # secrets.token_urlsafe-like
    not_an_id = SECRETS[36].text  # an e-mail marked as an id is still masked
    ctx.print(f"{ctx.ident(record_id)} mentions {other_uuid}; {ctx.ident(not_an_id)}")
    ctx.print(f"Token: {ctx.issued(token)}")
    ctx.emit_json({"token": token, "note": other_uuid})
    text = out.getvalue()
    assert record_id in text and token in text
    assert other_uuid not in text and SECRETS[36].needle not in text  # fails closed


def test_a_crash_report_of_a_redacting_run_is_masked(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A bug never prints a traceback (app/crash.py writes it to a report); under redaction
    the message and the report are masked like any output."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.md").write_text("---\nid: A\nstatus: todo\n---\nhello\n", encoding="utf-8")
    stack = tmp_path / "jane.doe@example.com"
    stack.mkdir()  # reading a directory as the error log: an OSError no handler expects
    crash = tmp_path / "data" / "crash"
    env = {"MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "config"), "MNEMOSCOPE_LOAD_MODEL": "0",
           "MNEMOSCOPE_DATA_DIR": str(tmp_path / "data")}
    argv = ["scene", "A", "--workspace", str(workspace), "--error-stack", str(stack)]
    assert run_cli(argv, env) == 70  # redaction off: the report holds the bug as it is
    plain = capsys.readouterr().err
    assert "IsADirectoryError" in plain and "Traceback" not in plain
    [first] = crash.iterdir()
    assert "jane.doe@example.com" in first.read_text(encoding="utf-8")
    first.unlink()
    assert run_cli(["--redact", *argv], env) == 70
    err = capsys.readouterr().err
    assert "IsADirectoryError" in err and "Traceback" not in err
    assert "jane.doe@example.com" not in err and "<REDACT:sha256-" in err
    [masked] = crash.iterdir()
    report = masked.read_text(encoding="utf-8")
    assert "Traceback" in report and "IsADirectoryError" in report
    assert "jane.doe@example.com" not in report and "<REDACT:sha256-" in report
