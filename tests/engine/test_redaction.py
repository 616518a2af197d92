"""Redaction: seed 002 §14 patterns and seed 003 §4 secret masking (DESIGN decision 8)."""

from __future__ import annotations

import hashlib
import re

import pytest

from engine.errors import RedactionPatternInvalid
from engine.redaction import (
    DEFAULT_PATTERNS,
    CustomPattern,
    Finding,
    Redactor,
    contains_secret,
    placeholder_for,
    redact_text,
    shannon_entropy,
)
from engine.text import content_hash

PLACEHOLDER = re.compile(r"<REDACT:sha256-[0-9a-f]{12}>")

# Fake credentials in the vendors' published shapes. Built from pieces so that no scanner
# mistakes this test file for a leak.
AWS_ID = "AKIA" + "IOSFODNN7EXAMPL3"
AWS_SESSION_ID = "ASIA" + "Y34FZKBOKMUTVV7A"
GCP_KEY = "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
GH_CLASSIC = "ghp_" + "R8tXq2LmZ0vBn4Kc7Yw1Hs9Ud3Fg6Ja5Pe0T"
GH_OAUTH = "gho_" + "16C7e42F292c6912E7710c838347Ae178B4a"
GH_APP = "ghs_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
GH_FINE = "github_pat_" + "11ABCDEFG0123456789abc_" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0Ed9Cb8Az7"
SLACK_BOT = "xoxb-" + "2400112233-2400998877665-AbCdEfGhIjKlMnOpQrStUvWx"
SLACK_USER = "xoxp-" + "1234567890-0987654321-1122334455-a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6"
SLACK_APP = "xapp-" + "1-A0123456789-1234567890123-abcdef0123456789abcdef"
SLACK_HOOK = "https://hooks.slack.com/services/" + "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
OPENAI = "sk-" + "proj-Q7mN2vX9kL4pR8sT1wY6zB3cD5fG0hJ"
ANTHROPIC = "sk-" + "ant-api03-Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed8Cb7Az6Yx5W"
STRIPE = "sk_" + "live_4eC39HqLyjWDarjtT1zdp7dc"
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
       + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
PEM = ("-----BEGIN RSA " + "PRIVATE KEY-----\n"
       "MIIEowIBAAKCAQEA7bq98jkVhZ1m3xU0oFd2XkQf0ZP3l+U3a2rEyKzL4t7Tn1Zq\n"
       "c2l0ZSBpcyBhIGZha2Uga2V5IGZvciB0ZXN0cw==\n"
       "-----END RSA " + "PRIVATE KEY-----")
OPENSSH = ("-----BEGIN OPENSSH " + "PRIVATE KEY-----\n"
           "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
           "-----END OPENSSH " + "PRIVATE KEY-----")
RANDOM_B64 = "Zk3Qp9Lw2Rt7Vx4Nb8Hc1Jd6Gs0Ym5"

# (text, the exact substring that must disappear, expected kind)
SENSITIVE: list[tuple[str, str, str]] = [
    (f"aws id {AWS_ID} in the config", AWS_ID, "AWS_KEY_ID"),
    (f"temporary credentials {AWS_SESSION_ID}", AWS_SESSION_ID, "AWS_KEY_ID"),
    (f"maps key={GCP_KEY}", GCP_KEY, "GCP_API_KEY"),
    (f"export GH={GH_CLASSIC}", GH_CLASSIC, "GITHUB_TOKEN"),
    (f"oauth {GH_OAUTH} issued", GH_OAUTH, "GITHUB_TOKEN"),
    (f"installation token {GH_APP}", GH_APP, "GITHUB_TOKEN"),
    (f"fine-grained: {GH_FINE}", GH_FINE, "GITHUB_TOKEN"),
    (f"bot token {SLACK_BOT}", SLACK_BOT, "SLACK_TOKEN"),
    (f"user token {SLACK_USER}", SLACK_USER, "SLACK_TOKEN"),
    (f"socket mode {SLACK_APP}", SLACK_APP, "SLACK_TOKEN"),
    (f"post alerts to {SLACK_HOOK} please", SLACK_HOOK, "SLACK_WEBHOOK"),
    (f"OPENAI key is {OPENAI}", OPENAI, "AI_API_KEY"),
    (f"claude: {ANTHROPIC}", ANTHROPIC, "AI_API_KEY"),
    (f"stripe.api_key is set to {STRIPE}", STRIPE, "STRIPE_KEY"),
    (f"cookie session={JWT}; Path=/", JWT, "JWT"),
    (f"key file:\n{PEM}\nend", PEM, "PRIVATE_KEY"),
    (f"{OPENSSH}\n", OPENSSH, "PRIVATE_KEY"),
    ("Authorization: Bearer abc123.def456-ghi789", "abc123.def456-ghi789", "BEARER"),
    ("curl -H 'Authorization: token 0123abcd4567ef89'", "0123abcd4567ef89", "BEARER"),
    ("password=hunter2!", "hunter2!", "ASSIGNMENT"),
    ("DB_PASSWORD = 'correct horse'", "correct horse", "ASSIGNMENT"),
    ('api_key: "q9w8e7r6t5"', "q9w8e7r6t5", "ASSIGNMENT"),
    ("client_secret=s3cr3t-value", "s3cr3t-value", "ASSIGNMENT"),
    ("secret: Tr0ub4dor&3", "Tr0ub4dor&3", "ASSIGNMENT"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "ASSIGNMENT"),
    (f"the blob {RANDOM_B64} was pasted", RANDOM_B64, "HIGH_ENTROPY"),
    ('digest = "9f86d081884c7d659a2feaa0c55ad015"', "9f86d081884c7d659a2feaa0c55ad015",
     "HIGH_ENTROPY"),
    ("mail alice.smith+tag@example.co.uk now", "alice.smith+tag@example.co.uk", "EMAIL"),
    ("from bob@mail.example.org", "bob@mail.example.org", "EMAIL"),
    ("session 123e4567-e89b-12d3-a456-426614174000 opened",
     "123e4567-e89b-12d3-a456-426614174000", "UUID"),
    ("upper UUID 123E4567-E89B-12D3-A456-426614174000.", "123E4567-E89B-12D3-A456-426614174000",
     "UUID"),
    ("card 4111 1111 1111 1111 expires", "4111 1111 1111 1111", "NUMSEQ16"),
    ("card 5500-0000-0000-0004 on file", "5500-0000-0000-0004", "NUMSEQ16"),
    ("account 12345678901234567890", "12345678901234567890", "NUMSEQ16"),
    ("exactly sixteen 1234567890123456.", "1234567890123456", "NUMSEQ16"),
]

ORDINARY: list[str] = [
    "The quick brown fox jumps over the lazy dog.",
    "Meeting moved to 2024-03-15 at 14:30 UTC; see you on 15/03/2024.",
    "Released version 3.12.1, then 2.0.0-rc.1 and v10.4.7+build.5.",
    "Call the front desk and ask for room 1204 on floor 12.",
    "def fetch_user(user_id: str) -> User:\n    return db.get(user_id)\n",
    "const handler = new HTTPRequestHandler2Factory(config);",
    "See https://example.com/docs/getting-started/installation for details.",
    "git checkout 4f3c2a1b9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b && make test",
    "The password must be at least 12 characters long.",
    "Password: must contain a digit.",
    "token_count = 32000\nmax_tokens = 4096",
    "password = getpass.getpass()",
    "secret = None",
    "api_key: ${OPENAI_API_KEY}",
    "Reference @docs/api#Login and @tasks/auth-flow in the card.",
    "task-force sk-learn is a library name and so is scikit-learn",
    "Years 2019, 2020, 2021 and 2022 were good.",
    "Order #12345 shipped; tracking 1Z999AA10123456784.",
    "src/engine/Tasks/Workspace2Parser.py and org/repo/blob/main/src/Main.java",
    "MyVeryLongClassName1234ForTesting extends BaseTestCase",
    "Phone numbers are out of scope; prices like $1,299.99 stay.",
    "Coordinates 48.8566, 2.3522 and ratio 0.3333333333333333",
]


@pytest.mark.parametrize(("text", "secret", "kind"), SENSITIVE)
def test_sensitive_corpus_is_masked(text: str, secret: str, kind: str) -> None:
    redacted = redact_text(text)
    assert secret not in redacted
    assert PLACEHOLDER.search(redacted)
    assert kind in [item.kind for item in Redactor().findings(text)]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_text(text) == text
    assert Redactor().findings(text) == []


def test_own_sha256_content_hashes_are_not_masked() -> None:
    hashes = [content_hash(f"memory number {i}") for i in range(200)]
    text = "\n".join(f"record hash {h} stored" for h in hashes)
    quoted = "\n".join(f'"hash": "{h}"' for h in hashes)
    assert redact_text(text) == text
    assert redact_text(quoted) == quoted


def test_placeholder_is_sha256_prefix_of_masked_text() -> None:
    expected = "<REDACT:sha256-" + hashlib.sha256(GH_CLASSIC.encode()).hexdigest()[:12] + ">"
    assert placeholder_for(GH_CLASSIC) == expected
    assert redact_text(f"t={GH_CLASSIC}") == f"t={expected}"


def test_equal_secrets_get_equal_placeholders() -> None:
    redacted = redact_text(f"{AWS_ID} and again {AWS_ID}, but {AWS_SESSION_ID}")
    found = PLACEHOLDER.findall(redacted)
    assert len(found) == 3
    assert found[0] == found[1] != found[2]


def test_redaction_is_idempotent() -> None:
    corpus = "\n".join(text for text, _, _ in SENSITIVE) + "\n" + "\n".join(ORDINARY)
    once = redact_text(corpus)
    assert redact_text(once) == once
    assert Redactor().findings(once) == []


def test_findings_give_spans_and_placeholders() -> None:
    text = f"mail a@b.io then {GH_CLASSIC}"
    found = Redactor().findings(text)
    assert [item.kind for item in found] == ["EMAIL", "GITHUB_TOKEN"]
    for item in found:
        assert isinstance(item, Finding)
        assert item.placeholder == placeholder_for(text[item.start:item.end])
    assert text[found[1].start:found[1].end] == GH_CLASSIC


def test_bearer_keeps_the_scheme_visible() -> None:
    assert redact_text("Authorization: Bearer abcdef123456").startswith("Authorization: Bearer <")


def test_pem_block_without_end_is_masked_to_the_end() -> None:
    text = "before\n-----BEGIN EC " + "PRIVATE KEY-----\nMHcCAQEEIBkg\nmore lines"
    assert redact_text(text) == "before\n" + placeholder_for(text[7:])


def test_contains_secret_distinguishes_secrets_from_personal_data() -> None:
    assert contains_secret(f"token {SLACK_BOT}")
    assert not contains_secret("write to carol@example.com")
    assert not contains_secret("nothing here")


def test_selected_patterns_only() -> None:
    text = f"x@y.com {AWS_ID}"
    assert Redactor(["EMAIL"]).redact(text) == f"{placeholder_for('x@y.com')} {AWS_ID}"
    assert Redactor(["AWS_KEY_ID"]).redact(text) == f"x@y.com {placeholder_for(AWS_ID)}"
    assert DEFAULT_PATTERNS == ("EMAIL", "UUID", "NUMSEQ16", "SECRETS")


def test_custom_patterns() -> None:
    redactor = Redactor([r"EMP-\d{5}", CustomPattern("TICKET", r"ticket (T\d+)")])
    found = redactor.findings("EMP-12345 filed ticket T998")
    assert [(f.kind, f.start, f.end) for f in found] == [("CUSTOM", 0, 9), ("TICKET", 23, 27)]


@pytest.mark.parametrize(
    ("pattern", "named"),
    [("PHONE", "'PHONE'"), ("[unclosed", "'[unclosed'"), ("a*", "'a*'"), ("", "''")],
)
def test_invalid_pattern_names_the_pattern(pattern: str, named: str) -> None:
    with pytest.raises(RedactionPatternInvalid) as info:
        Redactor([pattern])
    assert named in str(info.value)
    assert info.value.code == "MEMORY_REDACTION_PATTERN_INVALID"


def test_invalid_custom_kind() -> None:
    with pytest.raises(RedactionPatternInvalid, match="lower"):
        Redactor([CustomPattern("lower", r"x+")])


def test_shannon_entropy() -> None:
    assert shannon_entropy("") == 0.0
    assert shannon_entropy("aaaa") == 0.0
    assert shannon_entropy("abcd") == pytest.approx(2.0)
