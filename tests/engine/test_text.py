import random

import pytest

from engine.text import (
    content_hash,
    estimate_tokens,
    jaccard,
    jaccard_pairs,
    normalize,
    split_speaker,
    tokenize,
)


def test_hash_ignores_case_whitespace_and_trailing_punctuation() -> None:
    assert content_hash("Hello,   World!!") == content_hash(" hello, world")


def test_hash_ignores_zero_width_and_control_characters() -> None:
    assert content_hash("hel\u200blo wor\u2060ld\ufeff") == content_hash("hello world")
    assert content_hash("tab\x07bed") == content_hash("tabbed")


def test_internal_punctuation_is_preserved() -> None:
    # DESIGN decision 1: follow seed 000 §9's steps, not its contradicting example.
    assert content_hash("hello world") != content_hash("hello, world")


def test_nfkc_normalization_and_hash_shape() -> None:
    assert normalize("ｆｕｌｌｗｉｄｔｈ") == "fullwidth"
    digest = content_hash("x")
    assert len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)


def test_trailing_punctuation_run_only() -> None:
    assert normalize("Wait... what?!") == "wait... what"


def test_tokenize_and_jaccard() -> None:
    assert tokenize("User prefers TypeScript") == ["user", "prefers", "typescript"]
    # seed 004 keyword novelty example: 2 shared of 4 → 0.5
    assert jaccard(["user", "prefers", "typescript"], ["user", "likes", "typescript"]) == 0.5
    assert jaccard([], []) == 0.0


def test_estimate_tokens() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("hi") == 1
    assert estimate_tokens("a" * 400) == 100


def _brute_force(sets: list[list[str]], threshold: float,
                 probes: set[int] | None = None) -> list[tuple[int, int, float]]:
    return [(i, j, jaccard(sets[i], sets[j])) for i in range(len(sets))
            for j in range(i + 1, len(sets))
            if (probes is None or i in probes or j in probes)
            and jaccard(sets[i], sets[j]) >= threshold]


@pytest.mark.parametrize("threshold", [0.05, 0.3, 0.5, 0.6, 0.65, 0.7, 0.9, 1.0])
def test_jaccard_pairs_finds_exactly_what_comparing_every_pair_finds(threshold: float) -> None:
    # a small vocabulary with a few very common words: many overlapping sets, many near misses
    rng = random.Random(23)
    vocabulary = [f"w{k}" for k in range(40)]
    common = ["the", "a", "is"]
    sets = [rng.sample(vocabulary, rng.randint(0, 8)) + rng.sample(common, rng.randint(0, 3))
            for _ in range(300)]
    sets += [list(s) for s in sets[:20]]  # exact copies score 1.0
    assert jaccard_pairs(sets, threshold) == _brute_force(sets, threshold)
    probes = set(range(0, len(sets), 7))
    assert jaccard_pairs(sets, threshold, probes=probes) == _brute_force(sets, threshold,
                                                                         probes)


def test_jaccard_pairs_on_edge_cases() -> None:
    assert jaccard_pairs([], 0.5) == []
    assert jaccard_pairs([[], []], 0.5) == []  # two empty sets score 0 (as jaccard says)
    # 0.6 × 5 = 3.0000000000000004 in floating point: a 3-of-5 overlap still counts
    assert jaccard_pairs([["a", "b", "c", "d"], ["a", "b", "c", "e"]], 0.6) == [(0, 1, 0.6)]
    with pytest.raises(ValueError, match="threshold > 0"):
        jaccard_pairs([["a"]], 0.0)

def test_split_speaker_names_the_speaker_not_a_label() -> None:
    assert split_speaker("Caroline: I went to the support group") == (
        "Caroline", "I went to the support group")
    assert split_speaker("Dr. Ada Lovelace: notes on the engine") == (
        "Dr. Ada Lovelace", "notes on the engine")
    assert split_speaker("Note: the API key rotates") == (None, "Note: the API key rotates")
    assert split_speaker("rent is due: monday") == (None, "rent is due: monday")
