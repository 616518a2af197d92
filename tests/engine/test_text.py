from engine.text import content_hash, estimate_tokens, jaccard, normalize, split_speaker, tokenize


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


def test_split_speaker_names_the_speaker_not_a_label() -> None:
    assert split_speaker("Caroline: I went to the support group") == (
        "Caroline", "I went to the support group")
    assert split_speaker("Dr. Ada Lovelace: notes on the engine") == (
        "Dr. Ada Lovelace", "notes on the engine")
    assert split_speaker("Note: the API key rotates") == (None, "Note: the API key rotates")
    assert split_speaker("rent is due: monday") == (None, "rent is due: monday")
