"""``RetrievalDiagnostics.explain``: the one-line why of a retrieved (or dropped) candidate, as
the MCP server's ``search_memories`` returns it."""

from __future__ import annotations

import re

from engine.config import COMPONENTS
from engine.memory_engine import MemoryEngine
from engine.retrieval import RetrievalRequest
from tests.engine.retrieval.conftest import make_record, write


def test_the_line_names_the_largest_weighted_components_in_order(engine: MemoryEngine) -> None:
    write(engine, [make_record(0, "the kettle needs descaling every month", importance=0.9),
                   make_record(1, "the garden hose is in the shed", agent="b")])
    bundle = engine.retrieve(RetrievalRequest(max_tokens=1000, query="kettle descaling",
                                              agent_id="a"), inspect=True)
    diagnostics = bundle.diagnostics
    row = diagnostics.ids.index("r000")
    line = diagnostics.explain(row)
    weights = diagnostics.weights
    parts = sorted(((weights[name] * float(diagnostics.components[row, j]), name)
                    for j, name in enumerate(COMPONENTS)), key=lambda p: (-p[0], p[1]))
    shown = re.findall(r"(\w+) \+(\d\.\d{3})", line)
    assert [name for name, _ in shown] == [name for _, name in parts[:3]]
    for (name, value), (expected, _) in zip(shown, parts, strict=False):
        assert float(value) == round(expected, 3), name
    assert line.startswith(f"score {float(diagnostics.scores[row]):.3f}: ")
    assert "semantic +" in line and "(cosine " in line  # says how meaning was compared
    assert "not packed" not in line

    dropped = diagnostics.explain(diagnostics.ids.index("r001"))
    assert dropped.endswith("; not packed: filter")  # another agent's record

