"""Scenes: order (seed 003 §1.2), greedy pruning (§2), masking (§4), compression and deltas (§5)."""

from __future__ import annotations

import pytest

from engine.errors import CycleDetected, ValidationError
from engine.redaction import Redactor, placeholder_for
from engine.tasks.errors import MissingAnchor, MissingReference
from engine.tasks.scene import (
    DEFAULT_BUDGET,
    TRUNCATION_WARNING,
    SceneStore,
    build_scene,
    delta_scene,
)
from engine.tasks.workspace import Workspace
from engine.text import estimate_tokens
from tests.engine.tasks.conftest import WriteCards, card

FILES = {
    "root.md": card("ROOT", "Active card. Uses @c1 and @c2 and @c3.\n", status="in_progress"),
    "c1.md": card("c1", "First direct reference, " + "words " * 40 + "\nSee @deep.\n"),
    "c2.md": card("c2", "Second direct reference " + "more " * 60 + "\n"),
    "c3.md": card("c3", "tiny\n"),
    "deep.md": card("deep", "Indirect reference.\n"),
    "glob.md": card("glob", "Global conventions.\n", **{"global": "true"}),
    "other.md": card("other", "Unrelated.\n"),
}


def scene_order(ws: Workspace, budget: int = DEFAULT_BUDGET) -> list[tuple[str, int, int]]:
    scene = build_scene(ws, "ROOT", budget, use_importance=False)
    return [(e.id, e.priority, e.depth) for e in scene.included]


def test_order_and_priorities(make_workspace: WriteCards) -> None:
    ws = make_workspace(FILES)
    assert scene_order(ws) == [("ROOT", 100, 0), ("c1", 50, 1), ("c2", 50, 1), ("c3", 50, 1),
                               ("deep", 25, 2), ("glob", 10, -1)]
    scene = build_scene(ws, "ROOT", use_importance=False)
    assert not scene.truncated
    assert scene.pruned == ()
    assert "Unrelated" not in scene.text
    assert scene.text.startswith("# SCENE: ROOT — ROOT\n")
    assert scene.text.index("## c1 —") < scene.text.index("## c2 —") < scene.text.index("## deep")
    assert scene.used_tokens == estimate_tokens("# SCENE: ROOT — ROOT\n") + sum(
        e.tokens for e in scene.included)


def test_greedy_pruning_is_exactly_seed_section_2(make_workspace: WriteCards) -> None:
    ws = make_workspace(FILES)
    full = build_scene(ws, "ROOT", use_importance=False)
    header = estimate_tokens("# SCENE: ROOT — ROOT\n")
    t = {e.id: e.tokens for e in full.included}
    # used + estimate < N: c1 fits; c2 (larger than c3) does not; the warning is appended and
    # the loop BREAKS, so c3, which would fit in what is left, is pruned with the rest.
    budget = header + t["ROOT"] + t["c1"] + t["c3"] + 1
    assert t["c2"] > t["c3"]
    scene = build_scene(ws, "ROOT", budget, use_importance=False)
    assert [e.id for e in scene.included] == ["ROOT", "c1"]
    assert scene.used_tokens + t["c3"] < budget
    assert [p.id for p in scene.pruned] == ["c2", "c3", "deep", "glob"]
    assert scene.truncated
    assert scene.text.rstrip().endswith(TRUNCATION_WARNING)
    # Equal is not less: N = header + root + c1 cuts c1.
    scene = build_scene(ws, "ROOT", header + t["ROOT"] + t["c1"], use_importance=False)
    assert [e.id for e in scene.included] == ["ROOT"]
    assert scene.pruned[0].id == "c1"


def test_active_card_is_kept_even_over_budget(make_workspace: WriteCards) -> None:
    ws = make_workspace(FILES)
    scene = build_scene(ws, "ROOT", 3, use_importance=False)
    assert [e.id for e in scene.included] == ["ROOT"]
    assert scene.over_budget
    assert scene.truncated
    with pytest.raises(ValidationError, match="budget"):
        build_scene(ws, "ROOT", 0)


def test_importance_orders_equal_priorities(make_workspace: WriteCards) -> None:
    files = dict(FILES)
    files["x.md"] = card("x", "@c3 @c3 @c3\n")  # c3 becomes the most referenced card
    ws = make_workspace(files)
    order = [e.id for e in build_scene(ws, "ROOT").included]
    assert order[:2] == ["ROOT", "c3"]
    stack = "Error in c2.md line 3"
    assert [e.id for e in build_scene(ws, "ROOT", error_stack=stack).included][1] == "c2"


def test_anchored_references_bring_only_their_sections(make_workspace: WriteCards) -> None:
    ws = make_workspace({
        "a.md": card("A", "Needs @docs/api#Login and @docs/api#logout.\n"),
        "docs/api.md": "# API\nintro\n## Login\nlogin body\n### Errors\n401\n"
                       "## Logout\nbye\n## Admin\nsecret admin stuff\n",
    })
    scene = build_scene(ws, "A")
    api = scene.included[1]
    assert api.anchors == ("Login", "logout")
    assert "login body" in scene.text
    assert "401" in scene.text
    assert "bye" in scene.text
    assert "intro" not in scene.text
    assert "admin stuff" not in scene.text
    # One plain reference brings the whole card.
    ws2 = make_workspace({"b.md": card("B", "@docs/api#Login and @docs/api\n")})
    whole = build_scene(ws2, "B")
    assert "admin stuff" in whole.text
    assert whole.included[1].anchors == ()


def test_secrets_are_masked(make_workspace: WriteCards) -> None:
    key = "AKIA" + "IOSFODNN7EXAMPL3"
    ws = make_workspace({"a.md": card("A", f"Deploy with {key} and mail ops@example.com\n")})
    scene = build_scene(ws, "A")
    assert key not in scene.text
    assert "ops@example.com" not in scene.text
    assert placeholder_for(key) in scene.text
    assert scene.included[0].masked == 2
    only_secrets = build_scene(ws, "A", redactor=Redactor(["SECRETS"]))
    assert "ops@example.com" in only_secrets.text
    assert key not in only_secrets.text


def test_compression_is_tried_before_cutting(make_workspace: WriteCards) -> None:
    code = "\n".join(["```python", "def handler(request):", "    # Serve one request.",
                      *[f"    step_{i} = compute({i}, request.payload, opts)" for i in range(60)],
                      "    return step_0", "```"])
    ws = make_workspace({"a.md": card("A", "@code\n"), "code.md": card("code", code + "\n")})
    full = build_scene(ws, "A", use_importance=False)
    budget = full.used_tokens - 10
    scene = build_scene(ws, "A", budget, use_importance=False)
    entry = scene.included[1]
    assert entry.compressed
    assert not scene.truncated
    assert "def handler(request):" in scene.text
    assert "step_59" not in scene.text
    assert "Serve one request.; 63 lines elided (full code: code.md)" in scene.text
    no_compress = build_scene(ws, "A", budget, compress=False, use_importance=False)
    assert no_compress.truncated
    assert [p.id for p in no_compress.pruned] == ["code"]


def test_scene_fails_on_cycle_and_broken_references(make_workspace: WriteCards) -> None:
    ws = make_workspace({"a.md": card("A", "@B\n"), "b.md": card("B", "@C\n"),
                         "c.md": card("C", "@A\n")})
    with pytest.raises(CycleDetected, match=r"^error 1002: cycle detected: A -> B -> C -> A$"):
        build_scene(ws, "A")
    ws2 = make_workspace({"d.md": card("D", "@docs/gone\n"), "e.md": card("E", "@docs/x#Nope\n"),
                          "docs/x.md": "# X\n"})
    with pytest.raises(MissingReference, match=r"d\.md:4"):
        build_scene(ws2, "D")
    with pytest.raises(MissingAnchor, match=r"e\.md:4"):
        build_scene(ws2, "E")


def test_delta_scene(make_workspace: WriteCards) -> None:
    ws = make_workspace(FILES)
    store = SceneStore(ws.cache_dir / "scenes")
    first = build_scene(ws, "ROOT", use_importance=False)
    store.save(first)
    (ws.root / "c2.md").write_text(card("c2", "Second direct reference\nchanged line\n"),
                                   encoding="utf-8")
    (ws.root / "c3.md").unlink()
    (ws.root / "root.md").write_text(
        card("ROOT", "Active card. Uses @c1 and @c2 and @new.\n", status="in_progress"),
        encoding="utf-8")
    (ws.root / "new.md").write_text(card("new", "brand new\n"), encoding="utf-8")
    ws.refresh()
    delta = delta_scene(ws, "ROOT", first.scene_hash[:12], store=store, use_importance=False)
    assert delta.changed == ("ROOT", "c2")
    assert delta.added == ("new",)
    assert delta.removed == ("c3",)
    assert set(delta.unchanged) == {"c1", "deep", "glob"}
    assert "## changed: c2" in delta.text
    assert "changed line" in delta.text
    assert "L" in delta.text
    assert "lines unchanged]" in delta.text
    assert "words words" not in delta.text  # unchanged c1 is not repeated
    # The new scene is stored: a delta against it is empty.
    again = delta_scene(ws, "ROOT", delta.scene.scene_hash, store=store, use_importance=False)
    assert again.changed == again.added == again.removed == ()
    with pytest.raises(ValidationError, match="no stored scene"):
        delta_scene(ws, "ROOT", "0123456789abcdef", store=store)


def test_anchored_cards_follow_only_references_in_their_sections(
        make_workspace: WriteCards) -> None:
    ws = make_workspace({
        "a.md": card("A", "@docs/api#Login and @docs/api#Login-errors\n"),
        "docs/api.md": "# API\n## Login\nsee @docs/sessions\n### Login errors\n401\n"
                       "## Admin\nsee @docs/admin\n",
        "docs/sessions.md": "# Sessions\ncookies\n",
        "docs/admin.md": "# Admin\nnot for this scene\n",
    })
    scene = build_scene(ws, "A", use_importance=False)
    assert [(e.id, e.depth) for e in scene.included] == [
        ("A", 0), ("docs/api", 1), ("docs/sessions", 2)]
    assert scene.text.count("### Login errors") == 1  # nested section not repeated
    assert scene.included[1].anchors == ("Login", "Login-errors")
    assert "not for this scene" not in scene.text
