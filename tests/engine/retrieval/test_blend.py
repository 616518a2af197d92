"""The query-time blend of a record's vector with its predecessor's (``semantic_blend``,
docs/retrieval.md "Third round").

A record written right after another by the same agent in the same layer is scored with
``u = norm((1 - a)·v + a·v_previous)``: these tests hold the semantic component to that
definition (with and without the centring), check who counts as the predecessor (same agent
and layer, within the context window, eligible for the request) and what the diagnostics say.
The candidate path and appends are checked against exhaustive scoring in test_candidates.py
and test_append.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from engine.memory_engine import MemoryEngine
from engine.records import Layer, Privacy
from engine.retrieval import COMPONENTS, RetrievalRequest
from engine.retrieval.scoring import mean_rows
from engine.retrieval.types import RetrievalDiagnostics
from tests.engine.retrieval.conftest import make_record, open_engine, write

SECOND_DAYS = 1.0 / 86_400.0
SEMANTIC = COMPONENTS.index("semantic")

TURNS = [
    "Caroline: I went to a pottery workshop and made a clay bowl",
    "Melanie: Wow, that sounds amazing!",
    "Caroline: The teacher showed us how to glaze it",
    "Melanie: Did you bring the bowl home?",
    "Caroline: Yes, it sits on my kitchen shelf now",
    "Melanie: My kids went camping by the lake last week",
]


def _configure(engine: MemoryEngine, blend: float, centring: float = 0.5,
               layers: frozenset[Layer] = frozenset({Layer.EPISODIC})) -> None:
    engine.set_retrieval_config(dataclasses.replace(
        engine.retrieval_config, semantic_blend=blend, semantic_centering=centring,
        semantic_blend_layers=layers))


def _conversation(engine: MemoryEngine, *, layer: Layer = Layer.EPISODIC) -> None:
    """The turns one second apart, three days ago (one exchange)."""
    write(engine, [make_record(i, text, layer=layer, age_days=3.0 - i * SECOND_DAYS)
                   for i, text in enumerate(TURNS)])


def _inspect(engine: MemoryEngine, query: str, privacy: frozenset[Privacy] | None = None
             ) -> RetrievalDiagnostics:
    return engine.retrieve(RetrievalRequest(max_tokens=10_000, query=query, privacy=privacy),
                           inspect=True).diagnostics


def _row(diagnostics: RetrievalDiagnostics, record_id: str) -> int:
    return list(diagnostics.ids).index(record_id)


def _expected(engine: MemoryEngine, query: str, diagnostics: RetrievalDiagnostics,
              blend: float, centring: float) -> npt.NDArray[np.float64]:
    """``cos(q - m, u - m)`` clipped at 0, in float64 from the stored vectors: ``u`` each
    row's blended vector, ``m`` the centring's point (of the plain vectors)."""
    snapshot = engine.store.view.snapshot()
    plain = np.asarray(snapshot.vectors[: snapshot.n], dtype=np.float64)
    previous = diagnostics.blended
    blended = plain.copy()
    has = previous >= 0
    blended[has] = (1.0 - blend) * plain[has] + blend * plain[previous[has]]
    blended[has] /= np.linalg.norm(blended[has], axis=1, keepdims=True)
    rows = np.flatnonzero(diagnostics.eligible & snapshot.has_vector[: snapshot.n])
    mean = centring * plain[rows[: mean_rows(len(rows))]].mean(axis=0)
    vector = engine.embed_texts([query])
    assert vector is not None
    q = vector[0].astype(np.float64) - mean
    d = blended - mean
    cosine = (d @ q) / (np.linalg.norm(d, axis=1) * np.linalg.norm(q))
    clipped: npt.NDArray[np.float64] = np.maximum(cosine, 0.0)
    return clipped


@pytest.mark.parametrize("centring", [0.0, 0.5])
def test_the_semantic_component_is_the_cosine_of_the_blended_vector(
        engine: MemoryEngine, centring: float) -> None:
    _conversation(engine)
    _configure(engine, 0.3, centring)
    query = "what did Caroline make at the pottery workshop?"
    diagnostics = _inspect(engine, query)
    assert int(np.count_nonzero(diagnostics.blended >= 0)) == len(TURNS) - 1
    np.testing.assert_allclose(diagnostics.components[:, SEMANTIC],
                               _expected(engine, query, diagnostics, 0.3, centring),
                               rtol=1e-5, atol=1e-6)


def test_a_reply_takes_some_of_the_topic_of_the_turn_before_it(engine: MemoryEngine) -> None:
    _conversation(engine)
    query = "pottery workshop clay bowl"
    _configure(engine, 0.0)
    alone = _inspect(engine, query)
    _configure(engine, 0.3)
    blended = _inspect(engine, query)
    reply, opener = _row(blended, "r001"), _row(blended, "r000")
    # "Wow, that sounds amazing!" shares no word with the query: only the blend relates it
    assert alone.components[reply, SEMANTIC] == 0.0
    other = _row(blended, "r005")  # after an unrelated turn: still unrelated
    assert blended.components[reply, SEMANTIC] > 0.05 > blended.components[other, SEMANTIC]
    # the first turn has no predecessor: its component is what it was
    assert blended.components[opener, SEMANTIC] == alone.components[opener, SEMANTIC]
    assert int(blended.blended[reply]) == opener and int(blended.blended[opener]) == -1
    assert alone.semantic_blend == 0.0 and len(alone.blended) == 0
    assert "blended 0.3 with the previous record's" in blended.explain(reply, parts=9)
    assert "blended" not in blended.explain(opener, parts=9)
    assert blended.to_json(candidates=False)["semantic_blend"] == 0.3
    # the status line of the Retrieval view and of `search`
    assert blended.semantic_label == "cosine, 5 blended 0.3 with the previous record"
    assert alone.semantic_label == "cosine"


def test_only_an_eligible_record_of_the_same_stream_just_before_is_a_predecessor(
        engine: MemoryEngine) -> None:
    minute = 60.0 * SECOND_DAYS
    write(engine, [
        make_record(0, "Caroline: I adopted a puppy called Biscuit", layer=Layer.EPISODIC,
                    age_days=3.0, privacy=Privacy.PUBLIC),
        make_record(1, "Melanie: so cute!", layer=Layer.EPISODIC, age_days=3.0 - minute),
        make_record(2, "Melanie: we went hiking", layer=Layer.EPISODIC,
                    age_days=3.0 - 30 * minute),  # 29 minutes after: outside the window
        make_record(3, "Caroline: it rained all day", layer=Layer.EPISODIC, agent="b",
                    age_days=3.0 - 31 * minute),  # another agent's stream
        make_record(4, "Melanie: the lake was cold", layer=Layer.SEMANTIC,
                    age_days=3.0 - 32 * minute),  # another layer
    ])
    _configure(engine, 0.3, 0.0)  # plain cosines: 0 or not
    both = _inspect(engine, "puppy")
    assert int(both.blended[_row(both, "r001")]) == _row(both, "r000")
    assert all(int(both.blended[_row(both, f"r00{i}")]) == -1 for i in (0, 2, 3, 4))
    # a record the request may not see lends nothing to the one after it
    private = _inspect(engine, "puppy", privacy=frozenset({Privacy.PRIVATE}))
    assert int(private.blended[_row(private, "r001")]) == -1
    assert private.components[_row(private, "r001"), SEMANTIC] == 0.0
    assert both.components[_row(both, "r001"), SEMANTIC] > 0.0


def test_only_the_configured_layers_are_blended(engine: MemoryEngine) -> None:
    _conversation(engine, layer=Layer.SEMANTIC)  # facts state their own subject
    _configure(engine, 0.3)
    facts = _inspect(engine, "pottery workshop")
    assert not np.any(facts.blended >= 0)
    _configure(engine, 0.0)
    assert np.array_equal(_inspect(engine, "pottery workshop").components, facts.components)
    _configure(engine, 0.3, layers=frozenset({Layer.EPISODIC, Layer.SEMANTIC}))
    assert int(np.count_nonzero(_inspect(engine, "pottery workshop").blended >= 0)) == \
        len(TURNS) - 1


def test_the_blend_does_not_need_the_context_component(engine: MemoryEngine) -> None:
    _conversation(engine)
    _configure(engine, 0.3)
    with_context = _inspect(engine, "pottery workshop")
    engine.set_retrieval_config(dataclasses.replace(engine.retrieval_config,
                                                    context_neighbours=0))
    without = _inspect(engine, "pottery workshop")
    np.testing.assert_array_equal(without.blended, with_context.blended)
    np.testing.assert_array_equal(without.components[:, SEMANTIC],
                                  with_context.components[:, SEMANTIC])


def test_without_a_model_nothing_is_blended(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "store")
    try:
        write(engine, [make_record(i, text, layer=Layer.EPISODIC, age_days=3.0 - i * SECOND_DAYS)
                       for i, text in enumerate(TURNS[:3])])
        _configure(engine, 0.3)
        diagnostics = _inspect(engine, "pottery")
        assert diagnostics.semantic_mode.value == "jaccard"
        assert diagnostics.semantic_blend == 0.0 and len(diagnostics.blended) == 0
    finally:
        engine.close()
