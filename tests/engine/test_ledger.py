import re
from pathlib import Path

import pytest

from engine.errors import SchemaMismatch, StoreReadOnly, StoreUnavailable
from engine.events import EventFilter
from engine.ledger import Ledger
from engine.memory_engine import MemoryEngine
from engine.records import NewMemory
from engine.store import StoreSpec
from tests.support.fakes import HashingEmbedder

V1 = "CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
V2 = "ALTER TABLE things ADD COLUMN colour TEXT;\nCREATE INDEX things_name ON things(name);"


def test_migrations_apply_once_in_order(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.sqlite3")
    ledger.migrate("things", [V1])
    ledger.migrate("things", [V1, V2])
    ledger.migrate("things", [V1, V2])  # idempotent
    assert ledger.version("things") == 2
    with ledger.transaction() as conn:
        conn.execute("INSERT INTO things(name, colour) VALUES ('a', 'red')")
    ledger.close()
    again = Ledger(tmp_path / "l.sqlite3")
    assert [tuple(r) for r in again.query("SELECT name, colour FROM things")] == [("a", "red")]
    assert again.query("PRAGMA journal_mode")[0][0] == "wal"


def test_newer_ledger_is_refused(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.sqlite3")
    ledger.migrate("things", [V1, V2])
    with pytest.raises(SchemaMismatch, match="schema version 2, this Mnemoscope knows 1"):
        ledger.migrate("things", [V1])


def test_failed_transaction_writes_nothing() -> None:
    ledger = Ledger(None)
    ledger.migrate("things", [V1])
    def half_write() -> None:
        with ledger.transaction() as conn:
            conn.execute("INSERT INTO things(name) VALUES ('half')")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        half_write()
    assert ledger.query("SELECT COUNT(*) FROM things")[0][0] == 0


def test_failed_migration_is_rolled_back(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.sqlite3")
    with pytest.raises(Exception, match="syntax"):
        ledger.migrate("things", [V1 + "\nCREATE TABLE broken (;"])
    assert ledger.version("things") == 0
    assert ledger.query("SELECT name FROM sqlite_master WHERE name = 'things'") == []


def test_read_only_refuses_writes(tmp_path: Path) -> None:
    Ledger(tmp_path / "l.sqlite3").migrate("things", [V1])
    ro = Ledger(tmp_path / "l.sqlite3", read_only=True)
    assert ro.version("things") == 1
    with pytest.raises(StoreReadOnly), ro.transaction():
        pass


@pytest.mark.parametrize("damage", ["not json", "[" * 100_000 + "]" * 100_000])
def test_a_damaged_event_or_review_row_is_named_not_a_crash(
        tmp_path: Path, fake_embedder: HashingEmbedder, damage: str) -> None:
    # A ledger from someone else (or a damaged one): `events` and `review list` ended in a
    # JSONDecodeError / RecursionError crash report ("this is a bug") naming nothing.
    engine = MemoryEngine.open(StoreSpec(str(tmp_path / "store")), embedder=fake_embedder)
    try:
        engine.ingest(NewMemory("Mia walks the dog every morning at seven before school"))
        deferred = engine.ingest(NewMemory("Mia walks her dog every morning at seven"))
        assert deferred.review_id is not None
        memories = tmp_path / "memories.jsonl"
        memories.write_text('{"content": "Deploys go out on Tuesdays"}\n', encoding="utf-8")
        imported = engine.import_jsonl(memories)
        ledger = engine.ledger
        with ledger.transaction() as conn:
            conn.execute("UPDATE events SET payload = ? WHERE seq = 2", (damage,))
            conn.execute("UPDATE review_items SET conflicts = ?", (damage,))
            conn.execute("UPDATE edits SET after = ?", (damage,))
            conn.execute("UPDATE imports SET counts = ?", (damage,))
        where = f"the ledger {ledger.path} is damaged:"
        with pytest.raises(StoreUnavailable, match="^" + re.escape(f"{where} events row 2 ")):
            engine.events.query(EventFilter(limit=100))
        with pytest.raises(StoreUnavailable, match="^" + re.escape(
                f"{where} review_items row {deferred.review_id!r} ")):
            engine.review_queue()
        with pytest.raises(StoreUnavailable, match="^" + re.escape(f"{where} edits row ")):
            engine.edit_history()
        with pytest.raises(StoreUnavailable, match="^" + re.escape(
                f"{where} imports row {imported.import_id!r} ")):
            engine.imports()
        assert engine.count() == 2  # the records are not affected
    finally:
        engine.close()
