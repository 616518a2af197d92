"""Collections written by mem0, LangChain and LlamaIndex (issue 22): detected, mapped, read-only
in every view, and adopted through the ingest pipeline."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.clock import DeterministicClock
from engine.embedding import SentenceTransformerEmbedder
from engine.errors import StoreReadOnly, ValidationError
from engine.fate import record_fate
from engine.memory_engine import MemoryEngine
from engine.projection import project_snapshot
from engine.records import NewMemory, format_timestamp
from engine.retrieval import RetrievalRequest
from engine.store import StoreSpec
from engine.store.foreign import NO_DOCUMENT, FieldMapping, ForeignLayout, detect_layout
from tests.support import foreign_stores
from tests.support.fakes import HashingEmbedder


def _open(path: Path, collection: str, clock: DeterministicClock,
          mapping: FieldMapping | None = None) -> MemoryEngine:
    return MemoryEngine.open(StoreSpec(str(path), collection=collection, read_only=True,
                                       mapping=mapping),
                             embedder=HashingEmbedder(), clock=clock)


def _by_content(engine: MemoryEngine) -> dict[str, list[tuple[str, str | None, tuple[str, ...]]]]:
    page = engine.list_records()
    out: dict[str, list[tuple[str, str | None, tuple[str, ...]]]] = {}
    for record in page.records:
        out.setdefault(record.content, []).append(
            (record.agent_id, format_timestamp(record.created_at), record.tags))
    return out


def test_mem0_records_show_their_text_agent_run_and_times(
        tmp_path: Path, clock: DeterministicClock) -> None:
    ids = foreign_stores.write_mem0(tmp_path)
    engine = _open(tmp_path, "mem0", clock)
    try:
        assert engine.store.foreign_info is not None
        assert engine.store.foreign_info.layout is ForeignLayout.MEM0
        assert engine.store.foreign_info.vectors_used
        shown = _by_content(engine)
        assert sorted(shown["Likes green tea in the morning"]) == [
            ("travel-bot", "2024-05-01T15:15:00.000Z", ("run:trip-42",)),
            ("travel-bot", "2024-07-01T16:00:00.000Z", ("run:trip-43",))]
        assert shown["Is allergic to peanuts"] == [("bob", "2024-06-10T19:00:00.000Z", ())]
        first = engine.get(ids[0])
        assert format_timestamp(first.last_accessed) == "2024-05-03T17:00:00.000Z"
        assert first.source == "mem0"
        assert first.metadata["foreign"]["hash"]  # nothing of the original is hidden
        stats = engine.stats().to_json()
        assert stats["by_agent"] == {"bob": 1, "travel-bot": 2}
        assert stats["foreign_layout"]["layout"] == "mem0"
        assert engine.doctor()["store"]["foreign_layout"]["layout"] == "mem0"
    finally:
        engine.close()


def test_mem0_search_map_and_fate_use_the_real_fields(
        tmp_path: Path, clock: DeterministicClock) -> None:
    ids = foreign_stores.write_mem0(tmp_path)
    engine = _open(tmp_path, "mem0", clock)
    try:
        bundle = engine.retrieve(RetrievalRequest(max_tokens=500, query="peanuts allergy"),
                                 inspect=True)
        assert bundle.records[0].content == "Is allergic to peanuts"
        assert bundle.records[0].agent_id == "bob"
        projection = project_snapshot(engine.store.view.snapshot())
        assert sorted(projection.ids) == sorted(ids)  # 384-d vectors: every record placed
        fate = record_fate(engine, ids[1])
        assert fate.status == "alive"
        assert fate.content == "Is allergic to peanuts"
        assert [(format_timestamp(s.ts), s.text) for s in fate.steps] == [
            ("2024-06-10T19:00:00.000Z", "created by mem0 in collection mem0")]
        with pytest.raises(StoreReadOnly):
            engine.add(NewMemory("written into another tool's store"))
    finally:
        engine.close()


def test_langchain_documents_with_vectors_of_another_length(
        tmp_path: Path, clock: DeterministicClock) -> None:
    ids = foreign_stores.write_langchain(tmp_path)
    engine = _open(tmp_path, "langchain", clock)
    try:
        info = engine.store.foreign_info
        assert info is not None and info.layout is ForeignLayout.LANGCHAIN
        assert info.vector_dimension == 1536 and not info.vectors_used
        assert "search uses words only" in info.describe()
        shown = _by_content(engine)
        assert shown["The deploy key rotates every Friday"] == [
            ("carol", "2024-03-02T09:30:00.000Z", ())]
        # epoch seconds, as a LangChain app stores time.time()
        assert shown["Staging database lives in eu-west-1"] == [
            ("default", "2024-05-01T10:00:00.000Z", ())]
        assert engine.get(ids[0]).source == "runbook.md"
        # the 1536-d vectors are not comparable with the model's 384-d queries: words rank
        bundle = engine.retrieve(RetrievalRequest(max_tokens=500, query="staging database"),
                                 inspect=True)
        assert bundle.records[0].id == ids[1]
        assert engine.stats().pending_embeddings == 2
        assert project_snapshot(engine.store.view.snapshot()).ids == ()
    finally:
        engine.close()


def test_llamaindex_nodes(tmp_path: Path, clock: DeterministicClock) -> None:
    ids = foreign_stores.write_llamaindex(tmp_path)
    engine = _open(tmp_path, "llamaindex", clock)
    try:
        assert engine.store.foreign_info is not None
        assert engine.store.foreign_info.layout is ForeignLayout.LLAMAINDEX
        shown = _by_content(engine)
        assert shown["Quarterly revenue grew eight percent"] == [
            ("erin", "2024-04-05T00:00:00.000Z", ())]
        lease = engine.get(ids[1])
        assert lease.agent_id == "default"
        assert format_timestamp(lease.last_accessed) == "2024-04-09T00:00:00.000Z"
        assert lease.source == "minutes.txt"
        assert lease.metadata["foreign"]["ref_doc_id"] == lease.metadata["foreign"]["doc_id"]
    finally:
        engine.close()


def test_llamaindex_text_only_in_the_node_json() -> None:
    """A node stored without a document still shows its text (``_node_content``)."""
    from engine.store.foreign import ForeignReader

    reader = ForeignReader(ForeignLayout.LLAMAINDEX, "nodes")
    record = reader.record("n1", None, {"_node_content": '{"text": "kept in the node"}',
                                        "_node_type": "TextNode"}, now_ms=0.0)
    assert record.content == "kept in the node"
    # another tool's collection nested past the parser: no text, not a RecursionError
    deep = reader.record("n2", None, {"_node_content": "[" * 100_000 + "]" * 100_000},
                         now_ms=0.0)
    assert deep.content == NO_DOCUMENT


def test_detection_of_plain_collections() -> None:
    assert detect_layout("things", ["a document"], [{"colour": "red"}]) is ForeignLayout.PLAIN
    assert detect_layout("langchain", ["a document"], [None]) is ForeignLayout.LANGCHAIN
    assert detect_layout("x", [None], [{"data": "t", "hash": "h"}]) is ForeignLayout.MEM0


def test_a_saved_mapping_reads_an_unknown_layout(
        tmp_path: Path, clock: DeterministicClock) -> None:
    foreign_stores.write_custom(tmp_path)
    before = _open(tmp_path, "notes", clock)
    try:
        assert before.store.foreign_info is not None
        assert before.store.foreign_info.layout is ForeignLayout.PLAIN
        assert set(_by_content(before)) == {"(no document)"}
    finally:
        before.close()
    mapping = FieldMapping(text="memory", agent="who", time="when", importance="weight")
    engine = _open(tmp_path, "notes", clock, mapping)
    try:
        assert engine.store.foreign_info is not None
        assert engine.store.foreign_info.layout is ForeignLayout.CUSTOM
        record = engine.get("note-0")
        assert (record.content, record.agent_id, format_timestamp(record.created_at),
                record.importance) == ("Prefers aisle seats", "frank",
                                       "2024-02-01T10:00:00.000Z", 0.9)
    finally:
        engine.close()


def test_a_mapping_names_the_last_change_and_the_run(
        tmp_path: Path, clock: DeterministicClock) -> None:
    foreign_stores.write_custom(tmp_path)
    mapping = FieldMapping(text="memory", time="when", updated="changed", run="thread")
    engine = _open(tmp_path, "notes", clock, mapping)
    try:
        record = engine.get("note-0")
        assert (format_timestamp(record.created_at), format_timestamp(record.last_accessed),
                record.tags) == ("2024-02-01T10:00:00.000Z", "2024-02-02T10:00:00.000Z",
                                 ("run:t-1",))
        assert FieldMapping.from_json(mapping.to_json(), "notes") == mapping
    finally:
        engine.close()


def test_the_sample_a_mapping_is_chosen_from(tmp_path: Path, clock: DeterministicClock) -> None:
    foreign_stores.write_custom(tmp_path)
    engine = _open(tmp_path, "notes", clock)
    try:
        sample = engine.store.foreign_sample()
        assert sample.ids == ("note-0", "note-1") and not sample.has_documents
        assert sample.detected is ForeignLayout.PLAIN
        keys = dict(sample.keys())
        assert keys["who"] == ["frank", "grace"] and set(keys) == {
            "memory", "who", "when", "changed", "weight", "thread"}
        assert {r.content for r in sample.preview(None, now_ms=clock.now())} == {
            "(no document)"}
        mapped = sample.preview(FieldMapping(text="memory", agent="who"), now_ms=clock.now())
        assert [(r.content, r.agent_id) for r in mapped] == [
            ("Prefers aisle seats", "frank"), ("Works from Lisbon in winter", "grace")]
    finally:
        engine.close()
    ours = MemoryEngine.open(StoreSpec(str(tmp_path / "ours")), embedder=HashingEmbedder(),
                             clock=clock)
    try:
        with pytest.raises(ValidationError, match="is a Mnemoscope collection"):
            ours.store.foreign_sample()
    finally:
        ours.close()


def test_mapping_from_settings_json_names_the_bad_field() -> None:
    with pytest.raises(ValidationError, match=r"notes\.colour"):
        FieldMapping.from_json({"colour": "x"}, "notes")
    with pytest.raises(ValidationError, match=r"notes\.text"):
        FieldMapping.from_json({"text": 3}, "notes")


def test_adopt_reports_dedup_and_keeps_provenance(
        tmp_path: Path, clock: DeterministicClock) -> None:
    source_dir = tmp_path / "mem0-store"
    ids = foreign_stores.write_mem0(source_dir)
    source = _open(source_dir, "mem0", clock)
    target = MemoryEngine.open(StoreSpec(str(tmp_path / "ours")), embedder=HashingEmbedder(),
                               clock=clock)
    try:
        report = target.adopt(source)
        outcomes = {line.line: line for line in report.lines}
        # oldest first: tea (May), peanuts (June), tea again (July: an exact duplicate)
        assert outcomes[1].action == "inserted" and outcomes[2].action == "inserted"
        assert outcomes[3].action == "skipped" and outcomes[3].reason == "equal_confidence"
        assert outcomes[3].target_id == outcomes[1].id
        assert report.import_id is not None
        tea = target.get(str(outcomes[1].id))
        assert tea.agent_id == "travel-bot"
        assert format_timestamp(tea.created_at) == "2024-05-01T15:15:00.000Z"
        assert tea.metadata["adopted_from"] == {
            "store": str(source_dir), "collection": "mem0", "id": ids[0], "layout": "mem0"}
        sources = [p.source for p in tea.provenance]
        assert f"mem0/{ids[0]}" in sources and f"mem0/{ids[2]}" in sources
        with pytest.raises(ValidationError, match="into"):
            source.adopt(source)
    finally:
        target.close()
        source.close()


def test_api_snapshot_names_the_layout(tmp_path: Path, clock: DeterministicClock) -> None:
    from engine.introspection.source import EngineSource

    foreign_stores.write_llamaindex(tmp_path)
    engine = _open(tmp_path, "llamaindex", clock)
    source = EngineSource(engine)
    try:
        snapshot = source.snapshot()
        assert snapshot["store"]["foreign_layout"] == {
            "layout": "llamaindex", "mapping": None, "vector_dimension": 384,
            "vectors_used": True}
        assert {a["agent_id"] for a in snapshot["agents"]} == {"default", "erin"}
    finally:
        source.close()
        engine.close()


@pytest.mark.slow
@pytest.mark.model
def test_adopting_mem0_with_the_real_model_finds_paraphrases(
        tmp_path: Path, clock: DeterministicClock, real_embedder: SentenceTransformerEmbedder
        ) -> None:
    """mem0 stored these with all-MiniLM-L6-v2 (its huggingface embedder): 384-d, so search
    uses their vectors, and adopting them re-judges each with our model."""
    import chromadb
    from chromadb.config import Settings

    texts = ["Alice likes green tea in the morning",
             "Alice likes to drink green tea in the morning",
             "The flight to Oslo leaves at seven"]
    client = chromadb.PersistentClient(path=str(tmp_path / "mem0-store"),
                                       settings=Settings(anonymized_telemetry=False))
    client.get_or_create_collection("mem0", embedding_function=None).add(
        ids=["a", "b", "c"], embeddings=real_embedder.embed(texts),
        metadatas=[{"data": text, "hash": str(n), "user_id": "alice",
                    "created_at": f"2024-05-0{n + 1}T08:00:00-07:00"}
                   for n, text in enumerate(texts)])
    del client
    source = MemoryEngine.open(StoreSpec(str(tmp_path / "mem0-store"), collection="mem0",
                                         read_only=True), embedder=real_embedder, clock=clock)
    target = MemoryEngine.open(StoreSpec(str(tmp_path / "ours")), embedder=real_embedder,
                               clock=clock)
    try:
        found = source.retrieve(RetrievalRequest(max_tokens=500, query="when is my flight?"),
                                inspect=True)
        assert found.records[0].id == "c"
        report = target.adopt(source)
        actions = [(o.line, o.action, o.target_id) for o in report.lines]
        first = report.lines[0].id
        assert actions[0] == (1, "inserted", None)
        assert actions[1][1] in ("merged", "deferred") and actions[1][2] == first
        assert actions[2][1] == "inserted"
    finally:
        target.close()
        source.close()


def test_adopt_refuses_records_without_text_and_says_how_to_map(
        tmp_path: Path, clock: DeterministicClock) -> None:
    foreign_stores.write_custom(tmp_path / "src")
    source = _open(tmp_path / "src", "notes", clock)
    target = MemoryEngine.open(StoreSpec(str(tmp_path / "ours")), embedder=HashingEmbedder(),
                               clock=clock)
    try:
        report = target.adopt(source)
        assert [o.action for o in report.lines] == ["error", "error"]
        assert "record note-0" in report.lines[0].reason
        assert "map-collection" in report.lines[0].reason
        assert target.count() == 0
    finally:
        target.close()
        source.close()
