"""A corpus of planted secrets for redaction tests: every detector kind, every record field.

Each :class:`Secret` is a value one detector of :mod:`engine.redaction` must find, with the
``needle`` — the part that is the secret itself (the random core after a vendor prefix, the
value of an assignment) — that must never reach a reader while redaction is on. :func:`plants`
places them, one per record, in the content, tags, metadata (values, nested values and keys),
source, provenance (a second source of an exact duplicate) and agent id of the records.

To cover a new detector, append its secrets to :data:`SECRETS` (three per kind keeps every
kind in at least two places); nothing else changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from engine.records import NewMemory

__all__ = ["FRAGMENT", "PLACES", "SECRETS", "Plant", "Secret", "leaks", "plants"]


@dataclass(frozen=True, slots=True)
class Secret:
    """One planted secret.

    Attributes:
        kind: The detector that must find it (``Finding.kind``).
        text: The value as planted (with its context, e.g. ``password=…``).
        needle: The part that must not appear in any output while redaction is on.
    """

    kind: str
    text: str
    needle: str


def _s(kind: str, text: str, needle: str | None = None) -> Secret:
    return Secret(kind, text, needle or text)


_PEM = ("-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----")

SECRETS: tuple[Secret, ...] = (
    _s("PRIVATE_KEY", _PEM.format(kind="RSA ", body="MIIEowIBAAKCAQEAu9Kq3TzW7pLxV2mN"),
       "MIIEowIBAAKCAQEAu9Kq3TzW7pLxV2mN"),
    _s("PRIVATE_KEY", _PEM.format(kind="OPENSSH ", body="b3BlbnNzaC1rZXktdjEAAAAABG5vbmUx"),
       "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUx"),
    _s("PRIVATE_KEY", _PEM.format(kind="EC ", body="MHcCAQEEIBkP7q2VxLm9Tz4RsWn8YcA"),
       "MHcCAQEEIBkP7q2VxLm9Tz4RsWn8YcA"),
    _s("AWS_KEY_ID", "AKIAQ3EGRZ5TPLM2WXYB", "Q3EGRZ5TPLM2WXYB"),
    _s("AWS_KEY_ID", "ASIAZ7KD2M4XQ9PLR1VB", "Z7KD2M4XQ9PLR1VB"),
    _s("AWS_KEY_ID", "AKIAT6WQ8NB3HY5JC2ZF", "T6WQ8NB3HY5JC2ZF"),
    _s("GCP_API_KEY", "AIzaSyD4kP9vQ2mX7tL1wR8nB5cZ3hJ6gF0yE2a", "SyD4kP9vQ2mX7tL1wR8nB5cZ3hJ6"),
    _s("GCP_API_KEY", "AIzaSyB7nM2qW9xK4vT6pL3rC8dF1hG5jZ0sA7b", "SyB7nM2qW9xK4vT6pL3rC8dF1hG5"),
    _s("GCP_API_KEY", "AIzaSyC1qL8mR3vN6xP9tW2kB7dH4jF5gZ0yQ3c", "SyC1qL8mR3vN6xP9tW2kB7dH4jF5"),
    _s("GITHUB_TOKEN", "ghp_R8kQ2mZ7xL4vT9pW1nB6cH3jF5gD0sA2yE8u", "R8kQ2mZ7xL4vT9pW1nB6cH3jF5gD"),
    _s("GITHUB_TOKEN", "gho_T3nV8qK1mX6zL9pR2wB5cJ7hF4gD0sA8yE2i", "T3nV8qK1mX6zL9pR2wB5cJ7hF4gD"),
    _s("GITHUB_TOKEN", "github_pat_11ABCDE7Q0kL9mZ2xT5vR8_pW3nB6cH1jF4gD7sA0yE9uQ2i",
       "11ABCDE7Q0kL9mZ2xT5vR8_pW3nB6cH1jF4gD7sA0y"),
    _s("SLACK_WEBHOOK", "https://hooks.slack.com/services/T0A1B2C3D/B4E5F6G7H/q8Zt3LmX9vR2",
       "T0A1B2C3D/B4E5F6G7H/q8Zt3LmX9vR2"),
    _s("SLACK_WEBHOOK", "https://hooks.slack.com/services/T9Z8Y7X6W/B5V4U3T2S/k2Lm9Qx7Wv4N",
       "T9Z8Y7X6W/B5V4U3T2S/k2Lm9Qx7Wv4N"),
    _s("SLACK_WEBHOOK", "https://hooks.slack.com/workflows/T1Q2W3E4R/A5T6Y7U8I/p3Xc8Vn1Bm6Z",
       "T1Q2W3E4R/A5T6Y7U8I/p3Xc8Vn1Bm6Z"),
    _s("SLACK_TOKEN", "xoxb-2401937651-8815270321-Qp7Xk2Lm9Vz4Rt", "2401937651-8815270321-Qp7Xk"),
    _s("SLACK_TOKEN", "xoxp-5512093384-7730126645-Hn3Bv8Cx1Zq6Wd", "5512093384-7730126645-Hn3Bv"),
    _s("SLACK_TOKEN", "xapp-1-A0481RT7ZQ3-9935561207-Kd4Mf9", "A0481RT7ZQ3-9935561207"),
    _s("STRIPE_KEY", "sk_live_51HqT8vK2mZ7xL4pW9nB6cR3j", "51HqT8vK2mZ7xL4pW9nB6cR3j"),
    _s("STRIPE_KEY", "rk_test_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
    _s("STRIPE_KEY", "whsec_Mz8Qv3Lk7Xp2Wn9Rt5Bc1Hd6Jf4Gs0", "Mz8Qv3Lk7Xp2Wn9Rt5Bc1Hd6Jf4Gs0"),
    _s("AI_API_KEY", "sk-proj-Abc123Def456Ghi789Jkl012Mno345", "Abc123Def456Ghi789Jkl012Mno345"),
    _s("AI_API_KEY", "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0",
       "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0"),
    _s("AI_API_KEY", "sk-Tq4Wm8Zp2Xr6Vn1Bk9Lc3Hj7Fd5Gs0Ya", "Tq4Wm8Zp2Xr6Vn1Bk9Lc3Hj7Fd5Gs0Ya"),
    _s("JWT", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJqYW5lIn0.Wk3Fq8Zr1Lm6Xv9Tp2Nb5Hc",
       "Wk3Fq8Zr1Lm6Xv9Tp2Nb5Hc"),
    _s("JWT", "eyJ0eXAiOiJKV1QifQ.eyJ1aWQiOjQyfQ.Rt7Yp2Mx9Kq4Vz1Ln8Bw3Gs",
       "eyJ1aWQiOjQyfQ.Rt7Yp2Mx9Kq4Vz1Ln8Bw3Gs"),
    _s("JWT", "eyJraWQiOiIxIn0.eyJzY29wZSI6ImFsbCJ9.Hd5Jf2Ks8Lq1Mw7Nx4Pz0Rv",
       "eyJzY29wZSI6ImFsbCJ9.Hd5Jf2Ks8Lq1Mw7Nx4Pz0Rv"),
    _s("BEARER", "Authorization: Bearer v4Rq8Tz2Wm6Xk1Pn9", "v4Rq8Tz2Wm6Xk1Pn9"),
    _s("BEARER", "authorization=token 7Gh2Kd9Lp4Mz1Qx6", "7Gh2Kd9Lp4Mz1Qx6"),
    _s("BEARER", "Authorization: Basic am9objpzM2NyM3Q=", "am9objpzM2NyM3Q="),
    _s("ASSIGNMENT", "password=Hunter2!Blue#Sky", "Hunter2!Blue#Sky"),
    _s("ASSIGNMENT", "db_secret: 'tr0ub4dor&3-horse'", "tr0ub4dor&3-horse"),
    _s("ASSIGNMENT", "api_key = Zebra-Quartz-9981", "Zebra-Quartz-9981"),
    _s("HIGH_ENTROPY", "q8Zt3LmX9vR2pW7nK4bY6cJ1", "q8Zt3LmX9vR2pW7nK4bY6cJ1"),
    _s("HIGH_ENTROPY", "Xk7Qm2Vz9Lp4Tn8Rw1Bc6Hd3", "Xk7Qm2Vz9Lp4Tn8Rw1Bc6Hd3"),
    _s("HIGH_ENTROPY", "P9wL2kQ7zM4xN1vB8cT5rY3h", "P9wL2kQ7zM4xN1vB8cT5rY3h"),
    _s("EMAIL", "jane.doe@example.com"),
    _s("EMAIL", "r.okafor+ops@mail.example.org"),
    _s("EMAIL", "chen.wei@corp.example.net"),
    _s("UUID", "0b8ac2e9-500d-4db6-b8fc-474a341a01c9"),
    _s("UUID", "7f3e91c4-2a6b-4d8e-9c1f-5b0a7d3e6f24"),
    _s("UUID", "c5d2a8e1-9b4f-4c7a-8e3d-1f6b0a9c2e57"),
    # 16+ digits that are no card (no brand's prefix, or Luhn fails): NUMSEQ16 alone finds them.
    _s("NUMSEQ16", "7384 9102 5561 2209"),
    _s("NUMSEQ16", "0032-4471-9056-1183"),
    _s("NUMSEQ16", "88120475503316629"),
    # Payment cards of several brands (test numbers, Luhn-valid), unbroken and grouped.
    _s("CARD", "4111 1111 1111 1111"),                  # Visa
    _s("CARD", "5500-0000-0000-0004"),                  # Mastercard
    _s("CARD", "6011000990139424"),                     # Discover
    _s("CARD", "3782 822463 10005"),                    # American Express: 15 digits, 4-6-5
    _s("CARD", "2221000000000009"),                     # Mastercard 2-series
    _s("CARD", "3530-1113-3330-0000"),                  # JCB
    # US social security numbers, dashed and spaced.
    _s("SSN", "SSN 219-09-9999", "219-09-9999"),
    _s("SSN", "078-05-1120"),
    _s("SSN", "social security 536 22 4187", "536 22 4187"),
    # Phone numbers: E.164, international groups, US and UK national formats.
    _s("PHONE", "+14155550134"),
    _s("PHONE", "+44 20 7946 0958"),
    _s("PHONE", "(415) 555-0172"),
    _s("PHONE", "call 020 7946 0321", "020 7946 0321"),
    _s("PHONE", "+33 1 42 68 53 07"),
    _s("PHONE", "415-555-0199"),
    # IBANs with valid check digits, unbroken and in groups of four.
    _s("IBAN", "DE89 3704 0044 0532 0130 00"),
    _s("IBAN", "GB29NWBK60161331926819"),
    _s("IBAN", "FR14 2004 1010 0505 0001 3M02 606"),
    _s("IBAN", "NL91ABNA0417164300"),
    # Passwords, passcodes, PINs and door codes stated in prose.
    _s("PASSWORD", "the wifi password is Tr0mb0ne-Sky!", "Tr0mb0ne-Sky!"),
    _s("PASSWORD", "my passcode is 'violet meadow 42'", "violet meadow 42"),
    _s("PASSWORD", "the PIN for the debit card is 58213907", "58213907"),
    _s("PASSWORD", "the gate code is 7730-4821#", "7730-4821#"),
    _s("PASSWORD", "password for the router: Gr4nite&Moss", "Gr4nite&Moss"),
    _s("PASSWORD", "the vault passphrase was changed to Copper9Lantern", "Copper9Lantern"),
)

PLACES = ("content", "tags", "metadata", "source", "provenance", "agent_id")
_LIMITS = {"tags": 64, "agent_id": 128, "source": 256, "provenance": 256}
_TOPICS = ("the billing service", "the staging cluster", "the release pipeline",
           "the support inbox", "the data warehouse", "the mobile app", "the CI runners",
           "the status page", "the analytics job", "the backup vault", "the search index",
           "the payment gateway", "the chat bot", "the DNS zone", "the VPN gateway")


@dataclass(frozen=True, slots=True)
class Plant:
    """One secret placed in one record.

    Attributes:
        secret: What was planted.
        place: The field that holds it (one of :data:`PLACES`; ``metadata`` plants alternate
            between a value, a nested value and a key).
        memories: What to ingest, in order (a provenance plant is an exact duplicate whose
            second source is the secret).
    """

    secret: Secret
    place: str
    memories: tuple[NewMemory, ...] = field(default=())


def _fits(secret: Secret, place: str) -> bool:
    limit = _LIMITS.get(place)
    if limit is not None and len(secret.text) > limit:
        return False
    return not (place == "tags" and ("," in secret.text or "\n" in secret.text))


def plants(secrets: Iterable[Secret] = SECRETS) -> list[Plant]:
    """One plant per secret, places taken in turn (skipping fields too small for a value).

    Every record has an agent of its own (``corpus-<n>`` unless the agent id is the plant), so
    the merge pipeline never folds two plants together.
    """
    out: list[Plant] = []
    in_metadata = 0  # metadata plants so far: value, nested value and key take turns
    for number, secret in enumerate(secrets):
        place = next(p for step in range(len(PLACES))
                     if _fits(secret, p := PLACES[(number + step) % len(PLACES)]))
        topic = _TOPICS[number % len(_TOPICS)]
        content = f"Memory {number} about {topic}: rotate credentials every quarter {number}"
        fields: dict[str, Any] = {"agent_id": f"corpus-{number}", "source": "corpus",
                                  "tags": ("corpus",), "content": content}
        if place == "content":
            fields["content"] = f"Memory {number} about {topic}: the value is {secret.text} ok"
        elif place == "tags":
            fields["tags"] = ("corpus", secret.text)
        elif place == "metadata":
            fields["metadata"] = ({"note": secret.text}, {"deploy": {"env": [secret.text]}},
                                  {secret.text: "flag"})[in_metadata % 3]
            in_metadata += 1
        elif place == "source":
            fields["source"] = secret.text
        elif place == "agent_id":
            fields["agent_id"] = secret.text
        memories: tuple[NewMemory, ...] = (NewMemory(**fields),)
        if place == "provenance":
            memories = (NewMemory(**fields), NewMemory(**{**fields, "source": secret.text}))
        out.append(Plant(secret, place, memories))
    return out


FRAGMENT = 10  # characters of a needle that count as a leak on their own


def leaks(text: str, secrets: Iterable[Secret] = SECRETS) -> list[Secret]:
    """The secrets whose needle, or any :data:`FRAGMENT` characters of it, occur in ``text``
    (case-sensitive, as printed).

    A fragment counts because output that shortens a value before masking it (a preview cut
    to a width) shows part of a secret that the detector no longer recognises.
    """
    return [secret for secret in secrets if _shown(secret.needle, text)]


def _shown(needle: str, text: str) -> bool:
    if len(needle) <= FRAGMENT:
        return needle in text
    return any(needle[i:i + FRAGMENT] in text for i in range(len(needle) - FRAGMENT + 1))
