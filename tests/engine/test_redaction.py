"""Redaction: seed 002 §14 patterns and seed 003 §4 secret masking (DESIGN decision 8)."""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import RedactionPatternInvalid
from engine.redaction import (
    _PASSWORD_REGEX,
    _PHONE_ZERO,
    DEFAULT_PATTERNS,
    CustomPattern,
    Finding,
    Redactor,
    _password_shortcut,
    _phone_shortcut,
    _Subject,
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
    ("APIKEY=Zx81_abc9", "Zx81_abc9", "ASSIGNMENT"),
    ("refresh-token => 'r1-abc-def'", "r1-abc-def", "ASSIGNMENT"),
    ('"credentials": "u:p@ss-9"', "u:p@ss-9", "ASSIGNMENT"),
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
    # Luhn-valid card numbers are CARD; other runs of 16+ digits stay NUMSEQ16 (seed 002 §14).
    ("card 4111 1111 1111 1111 expires", "4111 1111 1111 1111", "CARD"),
    ("card 5500-0000-0000-0004 on file", "5500-0000-0000-0004", "CARD"),
    ("account 12345678901234567890", "12345678901234567890", "NUMSEQ16"),
    ("exactly sixteen 1234567890123456.", "1234567890123456", "NUMSEQ16"),
    ("grouped 1234 5678 9012 3456 fails Luhn", "1234 5678 9012 3456", "NUMSEQ16"),
    # Every card brand, unbroken and grouped (the networks' published test numbers).
    ("amex 378282246310005 on file", "378282246310005", "CARD"),
    ("amex 3782 822463 10005", "3782 822463 10005", "CARD"),
    ("visa 4012888888881881", "4012888888881881", "CARD"),
    ("old visa 4222222222222", "4222222222222", "CARD"),
    ("mastercard 5555-5555-5555-4444", "5555-5555-5555-4444", "CARD"),
    ("mastercard 2-series 2223003122003222", "2223003122003222", "CARD"),
    ("discover 6011 1111 1111 1117", "6011 1111 1111 1117", "CARD"),
    ("diners 3056 930902 5904", "3056 930902 5904", "CARD"),
    ("jcb 3530111333300000", "3530111333300000", "CARD"),
    ("unionpay 6200000000000005", "6200000000000005", "CARD"),
    ("maestro 6759649826438453", "6759649826438453", "CARD"),
    ("visa 19 digits 4111 1111 1111 1111 003", "4111 1111 1111 1111 003", "CARD"),
    # US SSNs, 3-2-4 with dashes or spaces.
    ("SSN 123-45-6789 on the form", "123-45-6789", "SSN"),
    ("social security number: 536 22 1045.", "536 22 1045", "SSN"),
    ("(078-05-1120)", "078-05-1120", "SSN"),
    # Phone numbers: E.164, international groups, national formats.
    ("call +1 (415) 555-0134 tomorrow", "+1 (415) 555-0134", "PHONE"),
    ("her cell is 415-555-0199.", "415-555-0199", "PHONE"),
    ("London office +44 20 7946 0958", "+44 20 7946 0958", "PHONE"),
    ("E.164 +14155550134 in the CRM", "+14155550134", "PHONE"),
    ("from abroad: +44 (0)20 7946 0958", "+44 (0)20 7946 0958", "PHONE"),
    ("Paris +33 1 23 45 67 89", "+33 1 23 45 67 89", "PHONE"),
    ("desk (415) 555-0134 ext 2", "(415) 555-0134", "PHONE"),
    ("London (020) 7946 0958", "(020) 7946 0958", "PHONE"),
    ("dotted 415.555.0199 works", "415.555.0199", "PHONE"),
    ("spaced 415 555 0199 works", "415 555 0199", "PHONE"),
    ("mixed 415 555-0199 works", "415 555-0199", "PHONE"),
    ("Berlin +49 30 1234567", "+49 30 1234567", "PHONE"),
    ("Berlin +49 (0) 30 123456", "+49 (0) 30 123456", "PHONE"),
    ("Berlin national 030 12345678", "030 12345678", "PHONE"),
    ("toll free 1-800-555-0199", "1-800-555-0199", "PHONE"),
    ("UK national 020 7946 0958", "020 7946 0958", "PHONE"),
    ("Manchester 0161 496 0000", "0161 496 0000", "PHONE"),
    ("French national 01 23 45 67 89", "01 23 45 67 89", "PHONE"),
    ("tel:415-555-0199", "415-555-0199", "PHONE"),
    ("Initech, phone +1 555 0142.", "+1 555 0142", "PHONE"),
    # IBANs with a valid mod-97 check, grouped and unbroken.
    ("pay to DE89 3704 0044 0532 0130 00 today", "DE89 3704 0044 0532 0130 00", "IBAN"),
    ("IBAN GB82WEST12345698765432.", "GB82WEST12345698765432", "IBAN"),
    ("Dutch NL91ABNA0417164300", "NL91ABNA0417164300", "IBAN"),
    ("Norway NO93 8601 1117 947", "NO93 8601 1117 947", "IBAN"),
    ("France FR14 2004 1010 0505 0001 3M02 606", "FR14 2004 1010 0505 0001 3M02 606", "IBAN"),
    # Passwords and codes stated in prose: the value is masked, not the sentence.
    ("the wifi password is hunter2Pass!", "hunter2Pass!", "PASSWORD"),
    ("passcode: 4821", "4821", "PASSWORD"),
    ("my PIN is 1234.", "1234", "PASSWORD"),
    ("pw is Xy9!abc", "Xy9!abc", "PASSWORD"),
    ("The password for the router is swordfish.", "swordfish", "PASSWORD"),
    ("the front door code is 4821#", "4821#", "PASSWORD"),
    ("the password was changed to 'blue moon'", "blue moon", "PASSWORD"),
    ("Bob's password's tr0ub4dor", "tr0ub4dor", "PASSWORD"),
    ("lock combination: 12-34-56", "12-34-56", "PASSWORD"),
    ("My pin code is 9876!", "9876", "PASSWORD"),
    ("the passphrase is now “correct horse”", "correct horse", "PASSWORD"),
    ("the password is correct-horse-battery-staple.", "correct-horse-battery-staple",
     "PASSWORD"),
    ("card PIN 4417, gate code 2580#", "4417", "PASSWORD"),
    ("the wifi password was reset to Summer2024", "Summer2024", "PASSWORD"),
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
    "monkey = 'banana' and turkey: 'roasted-2024'",
    "tokens: 12345 and max_tokens=4096",
]

# Near misses of the number and password detectors: none of these is masked.
NEAR_MISSES: list[str] = [
    "Dates 2024-05-06, 05/06/2024, 06.05.2024 and 2024/05/06; at 14:30:15 or 12:30-14:30.",
    "Versions 1.2.3, 10.4.7, v2.0.1, v1.415.555.0199 and 415.555.0199.1 are releases.",
    "Prices $1,299.99, €415.55 and 1 299,00 kr.",
    "Order #415-555-0199, ID-415-555-0199, SKU 4155550199 and invoice 2024-0042-7788.",
    "ISBN 978-3-16-148410-0 and 0-306-40615-2.",
    "Scores 3-1 and 100 200 3000; years 2019 2020 2021; 1+2=3; +5 points; +020 7946 0958.",
    "Ranges 123-456-7890 (area code 123 is not assigned) and 555-0199.",
    "Groups in no phone's shape: 415 5550 199, 3782 822463, 4155 555 0199, (123) 456-7890.",
    "Card-like 4111 1111 1111 2 and 3782 822463 10006 (Luhn fails).",
    "Luhn-valid but no card brand: 7111 1111 1111 113, 9111 1111 1111 111, 0000 0000 0000 0.",
    "IBAN with a bad check: NL92ABNA0417164300; lower case nl91abna0417164300.",
    "SSN-shaped but never issued: 000-12-3456, 666-12-3456, 912-12-3456, 123-00-4567, "
    "123-45-0000.",
    "Unbroken nine digits 123456789 and ten digits 4155550199 are not taken for numbers.",
    "I forgot my password. The password is on the fridge; the password is kept in the vault.",
    "The password must be at least 12 characters long; the password is 12 characters.",
    "Password: must contain a digit. To reset a password: Settings → Security.",
    "The password is required, the password was expired and the password is too short.",
    "She wore a Spider-Man pin on her purse; the pin is 3 cm wide.",
    "The error code is 404, the zip code is 94110 and the area code is 415.",
    "Shipping took 1234 days; the PIN field is empty.",
    "password: get_secret('db')\nnext_line = 1",
    "The password is case-sensitive and auto-generated passwords are long-lived.",
    "Password reset links expire; password hunter lists; the password is what protects you.",
    "Spider-Man pin 2 years ago; the gate code works; PIN entry failed.",
]


@pytest.mark.parametrize(("text", "secret", "kind"), SENSITIVE)
def test_sensitive_corpus_is_masked(text: str, secret: str, kind: str) -> None:
    redacted = redact_text(text)
    assert secret not in redacted
    assert PLACEHOLDER.search(redacted)
    assert kind in [item.kind for item in Redactor().findings(text)]


@pytest.mark.parametrize("text", ORDINARY + NEAR_MISSES)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_text(text) == text
    assert Redactor().findings(text) == []


@pytest.mark.parametrize(("text", "kinds"), [
    # 16 digits: a card only with a brand prefix and a Luhn check; else NUMSEQ16 (seed 002).
    ("4111 1111 1111 1112", ["NUMSEQ16"]),
    ("7111 1111 1111 1114", ["NUMSEQ16"]),  # Luhn-valid, no brand starts with 7
    ("0000 0000 0000 0000", ["NUMSEQ16"]),
    ("4111 1111 1111 1111", ["CARD"]),
    # 20 digits (Luhn-valid or not) are too long for a card.
    ("41111111111111111115", ["NUMSEQ16"]),  # Luhn-valid
    # An IBAN whose check digits fail: its 16-digit grouped run is still NUMSEQ16's.
    ("DE88 3704 0044 0532 0130 00", ["NUMSEQ16"]),
])
def test_cards_need_luhn_and_a_brand(text: str, kinds: list[str]) -> None:
    assert [item.kind for item in Redactor().findings(text)] == kinds


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
    assert DEFAULT_PATTERNS == ("EMAIL", "UUID", "NUMSEQ16", "CARD", "SSN", "PHONE", "IBAN",
                                "SECRETS")


def test_custom_patterns() -> None:
    redactor = Redactor([r"EMP-\d{5}", CustomPattern("TICKET", r"ticket (T\d+)")])
    found = redactor.findings("EMP-12345 filed ticket T998")
    assert [(f.kind, f.start, f.end) for f in found] == [("CUSTOM", 0, 9), ("TICKET", 23, 27)]


@pytest.mark.parametrize(
    ("pattern", "named"),
    [("PHONEBOOK", "'PHONEBOOK'"), ("[unclosed", "'[unclosed'"), ("a*", "'a*'"), ("", "''")],
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


def test_redact_many_equals_redact_each() -> None:
    texts = [text for text, _, _ in SENSITIVE] + ORDINARY + [
        "-----BEGIN EC " + "PRIVATE KEY-----\nno end line here",
        "the next text survives a PEM block without END",
        "",
        "has a NUL \x00 inside " + AWS_ID,
    ]
    redactor = Redactor()
    assert redactor.redact_many(texts) == [
        (redactor.redact(t), len(redactor.findings(t))) for t in texts]
    assert redactor.redact_many([]) == []


_SHAPED_ALPHABET = "0123456789 -.=_+/'\"aZkQ9x\n"


@given(st.lists(st.sampled_from([*_SHAPED_ALPHABET, "4111 1111 1111 1111", RANDOM_B64,
                                 "Zk3Qp9Lw2Rt7Vx4Nb8Hc1Jd6", "1234-5678-9012-3456-789"]),
                max_size=40))
@settings(max_examples=150, deadline=None)
def test_ascii_shortcuts_find_what_the_plain_scan_finds(pieces: list[str]) -> None:
    # Non-ASCII text takes the plain regex scan; ASCII text the classed-text shortcut.
    text = "".join(pieces)
    for name in ("NUMSEQ16", "HIGH_ENTROPY"):
        redactor = Redactor([name])
        assert redactor.findings(text) == redactor.findings(text + "\né")


@given(st.lists(st.sampled_from(["password", "DB_PASSWORD", "api_key", "monkey", "TOKEN",
                                 "secret", "pwd", "=", ": ", " = ", "'", '"', "hunter2!",
                                 "abc", "s3cr3t-value", " ", "\n", "x", "(", "None"]),
                max_size=30))
@settings(max_examples=150, deadline=None)
def test_assignment_shortcut_matches_the_folded_scan(pieces: list[str]) -> None:
    # "İ" lower-cases to two characters: such text takes the IGNORECASE regex instead.
    text = "".join(pieces)
    redactor = Redactor(["ASSIGNMENT"])
    assert redactor.findings(text) == redactor.findings(text + "\nİ")


def test_stated_passwords_are_secrets_and_numbers_are_personal_data() -> None:
    assert contains_secret("the wifi password is hunter2Pass!")
    assert contains_secret("my PIN is 1234")
    for text in ("call 415-555-0199", "SSN 123-45-6789", "card 4111 1111 1111 1111",
                 "IBAN GB82WEST12345698765432"):
        assert redact_text(text) != text
        assert not contains_secret(text)


@pytest.mark.parametrize("text", ["415-555-0199+415-555-0199", "write a@b.io+1 555 0142",
                                  "the wifi password was reset to Summer2024"])
def test_a_placeholder_keeps_its_value_s_boundaries(text: str) -> None:
    # Before, the second pass found what the masked value's neighbourhood had refused.
    once = redact_text(text)
    assert once != text
    assert redact_text(once) == once


def test_only_the_stated_value_is_masked() -> None:
    text = "Reminder: the wifi password is hunter2Pass! Ask Sam for the guest one."
    assert redact_text(text) == text.replace("hunter2Pass!", placeholder_for("hunter2Pass!"))


_NUMBER_PIECES = ["0", "1", "4", "5", "9", " ", "-", ".", "(", ")", "+", "+1 ", "+44 ", "(415) ",
                  "415-555-0199", "555", "0134", "020 7946 0958", "123-45-6789", "DE89",
                  "3704 0044 0532 0130 00", "GB", "4111 1111 1111 1111", "a", "#", "/", "\n"]


@given(st.lists(st.sampled_from(_NUMBER_PIECES), max_size=30))
@settings(max_examples=200, deadline=None)
def test_number_rules_find_the_same_in_ascii_and_other_text(pieces: list[str]) -> None:
    # ASCII text is digit-classed by str.translate's fast path; other text the slow way.
    text = "".join(pieces)
    for name in ("CARD", "SSN", "PHONE", "IBAN"):
        redactor = Redactor([name])
        assert redactor.findings(text) == redactor.findings(text + "\né") \
            == redactor.findings(text + "\n\ud800")  # a lone surrogate survives too


@given(st.lists(st.sampled_from(_NUMBER_PIECES), max_size=12),
       st.lists(st.sampled_from([", ", " and ", "; ", " or call ", "\n"]), min_size=12,
                max_size=12))
@settings(max_examples=300, deadline=None)
def test_numbers_in_prose_are_masked_once(pieces: list[str], separators: list[str]) -> None:
    # Numbers written one after another in prose. (Glued together with a bare space, a
    # rejected candidate can swallow its neighbour, which a second pass then finds alone.)
    text = "".join(piece + separator for piece, separator in zip(pieces, separators,
                                                                 strict=False))
    once = redact_text(text)
    assert redact_text(once) == once


@given(st.lists(st.sampled_from(_NUMBER_PIECES), max_size=30))
@settings(max_examples=200, deadline=None)
def test_phone_scan_per_part_equals_the_alternation(pieces: list[str]) -> None:
    subject = _Subject("".join(pieces))
    fast = [match.span() for match in _phone_shortcut(subject)]
    assert fast == [match.span() for match in _PHONE_ZERO.finditer(subject.digits_classed())]


@given(st.lists(st.sampled_from(["password", "PIN", "pw", "door code", "combination", "pass code",
                                 " is ", ": ", "'s ", " was changed to ", " for the router",
                                 " reset to ", "hunter2!", "1234", "swordfish", "'blue moon'",
                                 "kept", " in", "x", " ", "\n", "-", "#", "case-sensitive"]),
                max_size=25))
@settings(max_examples=200, deadline=None)
def test_password_scan_matches_the_folded_scan(pieces: list[str]) -> None:
    # "İ" lower-cases to two characters: such text takes the IGNORECASE expressions.
    text = "".join(pieces)
    redactor = Redactor(["PASSWORD"])
    assert redactor.findings(text) == redactor.findings(text + "\nİ")
    once = redactor.redact(text)
    assert redactor.redact(once) == once  # a masked value leaves nothing new to mask
    # One scan per keyword finds what the alternation of all keywords finds.
    fast = [match.span() for match in _password_shortcut(_Subject(text))]
    assert fast == [match.span() for match in re.finditer(_PASSWORD_REGEX, text.lower())]


_MONTHS = ("January", "May", "December")


@st.composite
def _ordinary_number(draw: st.DrawFn) -> str:
    """A date, time, version, price, quantity or id as people write them."""
    year, month, day = (draw(st.integers(1900, 2099)), draw(st.integers(1, 12)),
                        draw(st.integers(1, 28)))
    hour, minute, second = (draw(st.integers(0, 23)), draw(st.integers(0, 59)),
                            draw(st.integers(0, 59)))
    parts = draw(st.lists(st.integers(0, 999), min_size=2, max_size=4))
    amount, cents = draw(st.integers(0, 10**9)), draw(st.integers(0, 99))
    ident = draw(st.integers(0, 10**12))
    return draw(st.sampled_from([
        f"{year:04d}-{month:02d}-{day:02d}", f"{month:02d}/{day:02d}/{year:04d}",
        f"{day:02d}.{month:02d}.{year:04d}", f"{day} {_MONTHS[month % 3]} {year}",
        f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z",
        f"{hour:02d}:{minute:02d}", f"{hour:02d}:{minute:02d}:{second:02d}",
        "v" + ".".join(map(str, parts)), ".".join(map(str, parts)),
        f"${amount:,}.{cents:02d}", f"€{amount}", f"{amount:,} USD",
        f"{amount:,}".replace(",", " ") + " kr", f"#{ident}", f"order {ident}",
        f"ID-{ident % 1000}-{amount % 1000}-{cents}", f"{year}-{year + 1}",
    ]))


@given(st.lists(_ordinary_number(), min_size=1, max_size=8))
@settings(max_examples=300, deadline=None)
def test_dates_times_versions_prices_and_ids_are_not_numbers_to_mask(numbers: list[str]) -> None:
    text = "On " + " and ".join(numbers) + "."
    assert Redactor(["CARD", "SSN", "PHONE", "IBAN"]).findings(text) == []
