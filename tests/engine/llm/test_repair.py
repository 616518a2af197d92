"""Seed 000 §7 and §12: the JSON repair corpus and edge corpus pass exactly; safety limits."""

from __future__ import annotations

import json

import pytest

from engine.llm import repair_json
from engine.llm.repair import MAX_LENGTH, repair_json_detailed

# seed 000 §12 REPAIR_TEST_CORPUS (JS string literals transcribed verbatim).
REPAIR_TEST_CORPUS: list[tuple[str, str, str | None]] = [
    ("trailing-comma-1", '{"key": "value",}', '{"key": "value"}'),
    ("unclosed-string-1", '{"key": "value', '{"key": "value"}'),
    ("unclosed-brace-1", '{"key": "value"', '{"key": "value"}'),
    ("single-quotes-1", "{'key': 'value'}", '{"key": "value"}'),
    ("mixed-issues-1", "{'key': 'value',", '{"key": "value"}'),
    ("unrepairable-1", "not even close to JSON", None),
]
# seed 000 §12 EDGE_CASE_CORPUS.
EDGE_CASE_CORPUS: list[tuple[str, str, str | None]] = [
    ("nested-quotes", '{"key": "value with \\"quotes\\"",}', '{"key": "value with \\"quotes\\""}'),
    ("deep-nesting", '{"a":{"b":{"c":{"d":"e"', '{"a":{"b":{"c":{"d":"e"}}}}'),
    ("array-trailing", '["a","b","c",]', '["a","b","c"]'),
]


@pytest.mark.parametrize(("case_id", "text", "expected"), REPAIR_TEST_CORPUS + EDGE_CASE_CORPUS,
                         ids=[c[0] for c in REPAIR_TEST_CORPUS + EDGE_CASE_CORPUS])
def test_corpus_exact(case_id: str, text: str, expected: str | None) -> None:
    assert repair_json(text) == expected
    if expected is not None:
        json.loads(expected)


def test_repair_kinds_are_reported() -> None:
    result = repair_json_detailed("{'key': 'value',")
    assert result is not None
    assert result.repairs == ("single_quotes", "trailing_comma", "unclosed_brace")
    assert result.truncated


def test_valid_json_is_returned_untouched_and_prose_is_trimmed() -> None:
    assert repair_json('{"a": [1, 2]}') == '{"a": [1, 2]}'
    text = 'Sure! Here it is:\n```json\n{"a": 1}\n```\nAnything else?'
    assert repair_json(text) == '{"a": 1}'


def test_inner_closers_are_not_counted_as_repairs() -> None:
    result = repair_json_detailed('{"a": [1,], "b": {"c": 2}}')
    assert result is not None
    assert result.text == '{"a": [1], "b": {"c": 2}}'
    assert result.repairs == ("trailing_comma",)
    assert not result.truncated


def test_truncation_closes_in_nesting_order() -> None:
    result = repair_json_detailed('{"memories":[{"content":"test"')
    assert result is not None
    assert result.text == '{"memories":[{"content":"test"}]}'
    assert result.unclosed == ("{", "[", "{")


def test_other_common_llm_slips() -> None:
    assert repair_json('{a: True, "b": None, // note\n "c": [1,2,]}') == \
        '{"a": true, "b": null, \n "c": [1,2]}'
    assert json.loads(repair_json('{"a": [1, 2}') or "") == {"a": [1, 2]}
    assert json.loads(repair_json('{"a": "line\nbreak"}') or "") == {"a": "line\nbreak"}


def test_library_fallback_keeps_container_kind() -> None:
    assert json.loads(repair_json('{"a": 1 "b": 2}') or "") == {"a": 1, "b": 2}
    assert repair_json("{garbage garbage}") is None


def test_safety_limits() -> None:
    assert repair_json("[" + " " * MAX_LENGTH + "]") is None
    too_broken = '{"a":' + "[" * 12
    assert repair_json(too_broken) is None
    assert repair_json("") is None
    assert repair_json("]") is None
