"""Link previews (record detail's merged-from / related lists) never cut a token in half: half
a key escapes the redaction patterns and would be shown unmasked (issue 9 redaction)."""

from __future__ import annotations

import pytest

from engine.browse import link_preview
from engine.redaction import redact_text

TOKEN = "ghp_1234567890abcdefghijABCDEFGHIJ123456"


@pytest.mark.parametrize("cut", range(100, 140))
def test_a_token_across_the_limit_is_whole_or_absent(cut: int) -> None:
    content = "x" * 5 + " " + "deploy " * 20
    content = content[:cut - 10] + " " + TOKEN + " and more words after the token"
    preview = link_preview(content)
    assert len(preview) <= 120
    masked = redact_text(preview)
    assert TOKEN[:8] not in masked  # not even the start of it shows once masked
    assert preview == content[:len(preview)]  # a prefix of the content


def test_short_content_and_clean_cuts_are_kept() -> None:
    assert link_preview("short text") == "short text"
    words = "alpha beta " * 20
    assert link_preview(words) == words[:120].rstrip()
    assert link_preview("y" * 200) == ""  # one long word: nothing rather than half of it
    assert link_preview("word " + "z" * 200) == "word"
