"""Redaction of personal data and secrets (DESIGN decision 8).

Seed 002 §14 asks for configurable patterns (``EMAIL``, ``UUID``, numeric sequences beyond a
length threshold) replaced by a hashed placeholder; seed 003 §4 (the "Security Guard") adds
secret masking (API keys, tokens, private keys) as the final filter on any output buffer. Both
live here so every view, log, export and LLM prompt masks the same things the same way.

Pattern names a :class:`Redactor` accepts:

* ``EMAIL`` — ``local@domain.tld``.
* ``UUID`` — 8-4-4-4-12 hex, any version. UUIDs ARE masked (seed 002 §14): record ids and
  session ids can identify people across logs.
* ``NUMSEQ16`` — 16 or more digits, either unbroken or in card-style groups of 4-6 digits
  separated by single spaces or dashes (``1234 5678 9012 3456``). Dates stay.
* ``CARD`` — a payment card number: 13-19 digits (unbroken or grouped) with a card brand's
  issuer prefix and length, passing the Luhn check. On the same span it names the finding
  instead of ``NUMSEQ16``.
* ``SSN`` — a US social security number, 3-2-4 digits split by dashes or spaces, never-issued
  areas (000, 666, 9xx), groups (00) and serials (0000) excluded.
* ``PHONE`` — a phone number with a phone's structure: ``+`` and a country code (E.164 or
  grouped), a parenthesised area code, or national groups (3-3-4, trunk ``0``); never a bare
  run of digits, a date, a time, a version, a price or an id.
* ``IBAN`` — an IBAN (upper case, unbroken or in groups of four) with a valid mod-97 check.
* ``SECRETS`` — every secret pattern below; each also works on its own by name:
  ``AWS_KEY_ID``, ``GCP_API_KEY``, ``GITHUB_TOKEN``, ``SLACK_TOKEN``, ``SLACK_WEBHOOK``,
  ``AI_API_KEY`` (OpenAI/Anthropic ``sk-…``), ``STRIPE_KEY``, ``JWT``, ``BEARER``
  (the credential of an ``Authorization:`` line), ``ASSIGNMENT`` (the value of
  ``password=``, ``api_key:``, ``secret=``… ), ``PASSWORD`` (the value of a password, PIN
  or door code stated in prose: "the wifi password is hunter2Pass!"), ``PRIVATE_KEY`` (a
  PEM private-key block, or from its BEGIN line to the end of the text when the END line is
  missing) and ``HIGH_ENTROPY``.
* Anything that is not an upper-case name is compiled as a custom regular expression (kind
  ``CUSTOM``); a :class:`CustomPattern` gives it a kind of its own.

docs/steer.md ("What redaction detects") lists what each kind leaves alone and why, with the
false-positive figures on LoCoMo and the demo data (``benchmarks/bench_redaction.py``).

What is deliberately NOT masked:

* The project's own content hashes: exactly 64 lower-case hex characters standing alone (a
  SHA-256 digest, :func:`engine.text.content_hash`) — they identify text, not people, and
  views and logs correlate by them.
* Free-standing hex strings in general (commit ids, digests): the high-entropy rule looks at
  hex only inside quotes, as detect-secrets does, and still skips a 64-hex digest there.

High-entropy strings follow detect-secrets' idea (Shannon entropy over the base64 or hex
alphabet with a limit) with two guards against ordinary identifiers and paths: a base64-alphabet
token must be at least 20 characters, mix upper case, lower case and digits, and reach an
entropy limit that grows with its length (a random string of that length clears it, a
camel-case identifier does not). Quoted hex strings of 32+ characters need entropy ≥ 3.0
(detect-secrets' hex limit).

The placeholder is ``<REDACT:sha256-XXXXXXXXXXXX>``, X the first 12 hex characters of the
SHA-256 of the masked text (seed 002 §14 "hashed placeholder"), so equal secrets map to equal
placeholders and logs still correlate. Redaction is idempotent: placeholders already in the
text are never matched again.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from engine.errors import RedactionPatternInvalid

__all__ = [
    "DEFAULT_PATTERNS",
    "PATTERN_NAMES",
    "SECRET_PATTERN_NAMES",
    "CustomPattern",
    "Finding",
    "Redactor",
    "contains_secret",
    "placeholder_for",
    "redact_text",
    "redactor_for",
    "shannon_entropy",
]

DEFAULT_PATTERNS: tuple[str, ...] = ("EMAIL", "UUID", "NUMSEQ16", "CARD", "SSN", "PHONE", "IBAN",
                                     "SECRETS")

_PLACEHOLDER = re.compile(r"<REDACT:sha256-[0-9a-f]{12}>")


@dataclass(frozen=True, slots=True)
class Finding:
    """One masked span, for the scan view and diagnostics (seed 002 §16 "redaction diagnostics").

    Attributes:
        kind: The pattern that matched (``"EMAIL"``, ``"GITHUB_TOKEN"``, ``"CUSTOM"``, …).
        start: Offset of the first masked character in the input text.
        end: Offset one past the last masked character.
        placeholder: The text that replaces ``text[start:end]``.
    """

    kind: str
    start: int
    end: int
    placeholder: str


@dataclass(frozen=True, slots=True)
class CustomPattern:
    """A user-supplied regular expression with a kind name of its own.

    Attributes:
        kind: Shown in findings (e.g. ``"EMPLOYEE_ID"``).
        regex: The expression; the whole match is masked, or group 1 when it has groups.
    """

    kind: str
    regex: str


def placeholder_for(text: str) -> str:
    """Return ``<REDACT:sha256-XXXXXXXXXXXX>`` for ``text`` (seed 002 §14)."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
    return f"<REDACT:sha256-{digest}>"


def shannon_entropy(text: str) -> float:
    """Shannon entropy of ``text`` in bits per character (0 for the empty string)."""
    if not text:
        return 0.0
    length = len(text)
    counts: dict[str, int] = {}
    for char in text:
        counts[char] = counts.get(char, 0) + 1
    return -sum((n / length) * math.log2(n / length) for n in counts.values())


# A validator looks at a match and returns the span to mask, or None to keep the text. It also
# gets the original text: a rule may have matched a classed copy of it (digits → ``0``).
_Validator = Callable[[re.Match[str], str], tuple[int, int] | None]


@dataclass(slots=True)
class _Subject:
    """The text being scanned, with its lower-case twin computed once and only if needed."""

    text: str
    _lower: str | None = None

    @property
    def lower(self) -> str:
        if self._lower is None:
            self._lower = self.text.lower()
        return self._lower

    _shapes: dict[str, str | None] | None = None

    @property
    def lower_aligned(self) -> bool:
        # str.lower() never shrinks a character, so equal lengths mean equal offsets.
        return len(self.lower) == len(self.text)

    _digits: int | None = None
    _digits_any: str | None = None

    @property
    def digits(self) -> int:
        """How many ASCII digits the text holds (counted once; several rules gate on it)."""
        if self._digits is None:
            # Ten counts cost ~1 µs on a short text; on a long one (a card, an export) one
            # count over the classed copy, which the number rules scan anyway, is ~5x cheaper.
            self._digits = sum(map(self.text.count, "0123456789")) if len(self.text) < 2048 \
                else self.digits_classed().count("0")
        return self._digits

    def digits_classed(self) -> str:
        """``text`` with every ASCII digit replaced by ``0`` (same offsets), for any text.

        The number rules (CARD, SSN, PHONE, IBAN) scan only this copy, so their expressions
        start with a literal on every text. ``str.translate`` is slow on non-ASCII text
        (~50 ns a character); such text is translated as UTF-8 bytes instead, which is exact
        because the bytes of ``1``-``9`` never occur inside a multi-byte character.
        """
        shaped = self.shape("digits", _DIGITS_TO_ZERO)
        if shaped is None:
            if self._digits_any is None:
                self._digits_any = self.text.encode("utf-8", "surrogatepass").translate(
                    _DIGIT_BYTES_TO_ZERO).decode("utf-8", "surrogatepass")
            shaped = self._digits_any
        return shaped

    def shape(self, name: str, table: dict[int, int]) -> str | None:
        """``text`` with characters classed by ``table`` (same offsets), for ASCII text only.

        Classing characters (every digit → ``0``; every token character → ``a``) lets a rule
        find its candidates with a literal scan, which Python's regex engine does at C speed,
        instead of testing a character class at every position. ``str.translate`` is fast
        only on ASCII text, so other text returns None and the rule scans the usual way.
        """
        if self._shapes is None:
            self._shapes = {}
        if name not in self._shapes:
            self._shapes[name] = self.text.translate(table) if self.text.isascii() else None
        return self._shapes[name]


# A gate is a cheap test (substring search at C speed) that says whether a rule can match at
# all; it keeps ordinary text from paying a regex pass per rule (seed 003 §6: 32 KB < 1 ms).
_Gate = Callable[[_Subject], bool]


@dataclass(frozen=True, slots=True)
class _Rule:
    kind: str
    regex: re.Pattern[str]
    validate: _Validator
    gate: _Gate | None = None
    # When set, ``regex`` is written for lower-case text and runs on the lower-case twin;
    # ``folded`` (the same expression with IGNORECASE) serves text whose case folding
    # changes length.
    folded: re.Pattern[str] | None = None
    # A faster way to produce the same matches, when the text allows it (None: no shortcut).
    shortcut: Callable[[_Subject], Iterable[re.Match[str]] | None] | None = None
    # Where two rules mask the same span, the lower rank names it: a specific detector (a
    # Luhn-valid CARD) wins over a generic one (NUMSEQ16, HIGH_ENTROPY, PASSWORD).
    rank: int = 0
    # The fewest ASCII digits a match needs: the cheapest gate, checked by findings() before
    # any call (most text holds a handful of digits; five rules need 8 or more).
    min_digits: int = 0

    def matches(self, subject: _Subject) -> Iterable[re.Match[str]]:
        if self.gate is not None and not self.gate(subject):
            return ()
        if self.shortcut is not None:
            fast = self.shortcut(subject)
            if fast is not None:
                return fast
        if self.folded is None:
            return self.regex.finditer(subject.text)
        if subject.lower_aligned:
            return self.regex.finditer(subject.lower)
        return self.folded.finditer(subject.text)


def _contains(*needles: str) -> _Gate:
    return lambda subject: any(needle in subject.text for needle in needles)


def _contains_folded(*needles: str) -> _Gate:
    return lambda subject: any(needle in subject.lower for needle in needles)


def _searches(regex: str) -> _Gate:
    compiled = re.compile(regex)  # must start with a literal, so the search is a fast scan
    return lambda subject: compiled.search(subject.text) is not None


def _whole(match: re.Match[str], _text: str) -> tuple[int, int] | None:
    return match.span()


def _group1(match: re.Match[str], _text: str) -> tuple[int, int] | None:
    return match.span(1)


def _numseq(match: re.Match[str], _text: str) -> tuple[int, int] | None:
    # seed 002 §14: "numeric sequences beyond length threshold" — 16 digits, grouping ignored.
    digits = sum(ch.isdigit() for ch in match.group(0))
    return match.span() if digits >= 16 else None


_NON_SECRET_VALUES = frozenset(
    {"none", "null", "nil", "true", "false", "undefined", "empty", "required", "optional",
     "redacted", "changeme", "string", "str", "bytes", "int", "secret", "password", "****"}
)
_SYMBOLS = frozenset("0123456789_-+/=.!@#$%^&*~?")


def _assignment(match: re.Match[str], _text: str) -> tuple[int, int] | None:
    quoted = match.group("quote") is not None
    group = "qvalue" if quoted else "value"
    value = match.group(group)
    end = match.end(group)
    if end < len(match.string) and match.string[end] in "([" and not quoted:
        return None  # a call or subscript (`password = getpass()`), not a literal
    if len(value) < 4 or value.lower() in _NON_SECRET_VALUES:
        return None
    if value[0] in "$<{%" or set(value) <= {"*", "x", "X", "."}:
        return None  # an environment reference, a template slot, or an already masked value
    if match.group("sep") == ":" and not quoted and not any(ch in _SYMBOLS for ch in value):
        return None  # prose such as "Password: must be long" — a plain word after a colon
    return match.span(group)


_HEX_CHARS = frozenset("0123456789abcdefABCDEF")
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_=-")
_WORDISH = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")


def _base64_limit(length: int) -> float:
    """Entropy a base64-alphabet token of ``length`` characters must reach to count as random.

    A random string over 64 symbols has entropy close to ``log2(length)`` while the length is
    well under 64 and approaches 6 beyond; 85 % of that bound separates random keys from
    identifiers (camel case and paths repeat letters). Capped at 4.5, detect-secrets' limit.
    """
    return min(4.5, 0.85 * math.log2(min(length, 64)))


def _high_entropy(match: re.Match[str], _text: str) -> tuple[int, int] | None:
    text = match.string
    start, end = match.span()
    if start > 0 and text[start - 1] in _TOKEN_CHARS:
        return None  # the regex runs without a look-behind (speed); check the boundary here
    quoted = start > 0 and text[start - 1] in "\"'`"
    core = match.group(0).rstrip("=")
    if all(ch in _HEX_CHARS for ch in core):
        # Hex: only quoted strings count (detect-secrets looks at string literals); a lone
        # 64-hex lower-case digest is one of our own content hashes and stays.
        if not quoted or len(core) < 32 or (len(core) == 64 and core == core.lower()):
            return None
        if core.isdigit():
            return None  # NUMSEQ16 decides about plain numbers
        return (start, end) if shannon_entropy(core) >= 3.0 else None
    if len(core) < 20:
        return None
    if not (any(c.isdigit() for c in core) and any(c.islower() for c in core)
            and any(c.isupper() for c in core)):
        return None
    if "/" in core:
        parts = [part for part in core.split("/") if part]
        if sum(part == part.lower() for part in parts) * 2 >= len(parts):
            return None  # a path: most of its parts are lower-case names
    # Identifiers are made of words (``HTTPRequestHandler2Factory``: segments of ~5
    # characters); random keys switch case and digits every one or two characters.
    segments = _WORDISH.findall(core)
    if not segments or sum(map(len, segments)) / len(segments) >= 3.0:
        return None
    return (start, end) if shannon_entropy(core) >= _base64_limit(len(core)) else None


# Keywords of ASSIGNMENT. The first set counts inside longer names (``DB_PASSWORD``,
# ``aws_secret_access_key`` ends in "key" after "_"); the second only after a non-letter, so
# ``monkey = 'banana'`` and ``tokens: 5`` stay.
_KEYWORDS_ANYWHERE = ("password", "passwd", "passphrase", "secret", "credentials", "credential")
_KEYWORDS_BOUNDED = ("key", "pwd", "token", "apikey", "secretkey", "accesskey", "privatekey",
                     "authtoken", "accesstoken", "refreshtoken")
_ASSIGNMENT_TAIL = (
    r"(?![a-z0-9_])[\"']?[ \t]*(?P<sep>:=|=>|=|:)[ \t]*"
    r"(?:(?P<quote>[\"'`])(?P<qvalue>[^\"'`\n]+)(?P=quote)|(?P<value>[^\s\"'`,;()\[\]{}<>]+))"
)


def _keyword(word: str) -> str:
    # The look-behind after the word checks the character before it (a pattern that starts
    # with a literal is scanned fast).
    return f"{word}(?<![a-z0-9]{word})" if word in _KEYWORDS_BOUNDED else word


_ASSIGNMENT_REGEX = (
    "(?:" + "|".join(_keyword(w) for w in (*_KEYWORDS_ANYWHERE, *_KEYWORDS_BOUNDED)) + ")"
    + _ASSIGNMENT_TAIL
)
_ASSIGNMENT_EACH = tuple(
    (word, re.compile(_keyword(word) + _ASSIGNMENT_TAIL))
    for word in (*_KEYWORDS_ANYWHERE, *_KEYWORDS_BOUNDED)
)


_ASSIGNMENT_ROOTS = {
    root: tuple((word, regex) for word, regex in _ASSIGNMENT_EACH if root in word)
    for root in ("pass", "pwd", "secret", "key", "token", "credential")
}


def _assignment_shortcut(subject: _Subject) -> Iterable[re.Match[str]] | None:
    """One literal-first scan per keyword present, instead of an alternation at every position.

    Emulates ``finditer`` over the alternation exactly: the leftmost match wins, a tie goes to
    the keyword listed first, and scanning resumes at the end of the match.
    """
    lower = subject.lower
    if not subject.lower_aligned:
        return None
    present = [root for root in _ASSIGNMENT_ROOTS if root in lower]
    if not present:
        return []
    regexes = [regex for word, regex in _ASSIGNMENT_EACH
               if any(root in word for root in present) and word in lower]
    return _leftmost(regexes, lower)


def _leftmost(regexes: Sequence[re.Pattern[str]], text: str) -> list[re.Match[str]]:
    """``finditer`` of the alternation of ``regexes``, emulated with one scan per expression.

    Each expression starts with a literal, which Python's engine finds at C speed; their
    alternation starts with a character set, tested at every position (~10x slower). The
    leftmost match wins, a tie goes to the expression listed first, and scanning resumes at
    the end of the match — exactly what ``finditer`` does with the alternation.
    """
    found: list[re.Match[str]] = []
    # Each expression's next match; searched again only once scanning has passed its start
    # (a search from an earlier position that found a match at or after the current one
    # finds the same match, and one that found nothing finds nothing later).
    ahead: list[re.Match[str] | None] = [regex.search(text) for regex in regexes]
    position = 0
    while True:
        best: re.Match[str] | None = None
        for index, regex in enumerate(regexes):
            match = ahead[index]
            if match is not None and match.start() < position:
                match = ahead[index] = regex.search(text, position)
            if match is not None and (best is None or match.start() < best.start()):
                best = match
        if best is None:
            return found
        found.append(best)
        position = best.end() if best.end() > best.start() else best.start() + 1


# -- passwords and codes stated in prose ("the wifi password is hunter2Pass!") ----------------
#
# ASSIGNMENT covers ``password=…`` in code and config; people write "my PIN is 1234",
# "passcode: 4821", "the password for the router is hunter2Pass!", "door code is 4821#".
# (``=`` stays ASSIGNMENT's: it knows calls and references in code from literals.)
# Only the value is masked. A keyword, an optional "for/to/of/on the <thing>" of up to two
# words, then a connector ("is", "was", "'s", ":", "changed to", "set to"; for PINs and codes
# also none: "PIN 4417"), then the value. "I forgot my password" has no connector and stays;
# the value decides the rest (see ``_stated_password``).
_PASSWORD_WORDS = ("password", "passwd", "passphrase", "pass code")
# Keywords that take numeric values only ("the PIN is 1234"; "the error code is 404" and
# "the pin on her purse" stay: "code" counts only after one of these qualifiers).
_CODE_QUALIFIERS = ("door", "gate", "alarm", "garage", "lock", "locker", "safe", "keypad",
                    "access", "entry", "building", "security", "unlock", "pin")
_PASSWORD_TAIL = (
    r"(?:[ \t]+(?:for|to|of|on)[ \t]+(?:(?:the|my|our|your|his|her|their|this|that)[ \t]+)?"
    r"[\w'-]+(?:[ \t]+(?!(?:is|was|are|were|has|had|got|been|changed|set|updated|reset)\b)"
    r"[\w'-]+)?)?"
    r"(?:(?P<colon>[ \t]*:)|[ \t]+(?:(?:is|was|has[ \t]+been|had[ \t]+been|got|been)[ \t]+)?"
    r"(?:changed|set|updated|reset)[ \t]+to|(?:'s|’s|[ \t]+(?:is|was|are|were))"
    r"(?:[ \t]+(?:now|still|just|actually|currently|always))?(?:[ \t]*:)?|(?P<bare>[ \t]))[ \t]*"
    r"(?:(?P<quote>[\"'`“‘])(?P<qvalue>[^\"'`”’\n]{1,64})[\"'`”’]"
    r"|(?P<value>[^\s\"'`“”‘’<]+))"
)


def _password_keywords() -> tuple[tuple[str, str], ...]:
    """(literal that must occur, expression) per keyword; every expression starts with it."""
    spelled = [(word.split()[0], word.replace(" ", r"[ -]?") + "s?") for word in _PASSWORD_WORDS]
    bounded = [(word, f"{word}(?<![a-z0-9_]{word})(?![a-z])") for word in ("pw", "pwd")]
    pin = [("pin", r"pin(?<![a-z0-9_]pin)(?:\s+(?:code|number))?(?![a-z])")]
    code = [("code", "code(?:" + "|".join(f"(?<={q}{sep}code)" for q in _CODE_QUALIFIERS
                                           for sep in (" ", "-")) + ")s?(?![a-z])")]
    combination = [("combination", r"combination(?![a-z])")]
    return (*spelled, *bounded, *pin, *code, *combination)


_PASSWORD_KEYWORDS = _password_keywords()
_PASSWORD_EACH = tuple((needle, re.compile(f"(?P<kw>{regex}){_PASSWORD_TAIL}"))
                       for needle, regex in _PASSWORD_KEYWORDS)
_PASSWORD_FOLDED = tuple((needle, re.compile(f"(?P<kw>{regex}){_PASSWORD_TAIL}", re.IGNORECASE))
                         for needle, regex in _PASSWORD_KEYWORDS)
_PASSWORD_REGEX = ("(?P<kw>" + "|".join(f"(?:{regex})" for _, regex in _PASSWORD_KEYWORDS)
                   + ")" + _PASSWORD_TAIL)

# Words that follow "the password is" in sentences that do not state one.
_NOT_A_PASSWORD = frozenset({
    "a", "an", "the", "this", "that", "these", "those", "my", "your", "his", "her", "its",
    "our", "their", "it", "he", "she", "they", "we", "you", "i", "me", "him", "them", "us",
    "on", "in", "at", "under", "behind", "inside", "near", "by", "with", "without", "from",
    "for", "of", "to", "into", "onto", "over", "above", "below", "next", "beside", "between",
    "not", "no", "never", "still", "also", "just", "now", "then", "there", "here", "required",
    "optional", "needed", "necessary", "mandatory", "missing", "empty", "blank", "wrong",
    "right", "correct", "incorrect", "invalid", "valid", "weak", "strong", "secure",
    "insecure", "safe", "unsafe", "long", "short", "simple", "easy", "hard", "difficult",
    "complex", "complicated", "same", "different", "new", "old", "default", "temporary",
    "unique", "random", "case", "sensitive", "hidden", "visible", "private", "secret", "too",
    "very", "really", "quite", "so", "must", "should", "will", "would", "can", "could", "may",
    "might", "shall", "be", "been", "being", "am", "are", "was", "were", "is", "and", "or",
    "but", "if", "because", "what", "which", "who", "where", "when", "how", "why",
    "something", "anything", "nothing", "everything", "written",
}) | _NON_SECRET_VALUES
_PROSE_ENDINGS = ("ed", "ing", "ly")  # participles and adverbs ("expired", "changing", "really")
_IRREGULAR_PARTICIPLES = frozenset({
    "kept", "known", "shown", "given", "hidden", "taken", "stolen", "forgotten", "lost", "sent",
    "left", "put", "held", "found", "set", "reset", "written", "broken", "done", "gone", "made",
    "told", "got", "been", "has", "had",
})
# "the password is kept in the vault", "is swordfish for the guest network": a plain word
# followed by one of these is a predicate, not a password.
_PREPOSITIONS = frozenset({"in", "on", "at", "under", "behind", "inside", "with", "by", "from",
                           "into", "somewhere", "there", "here"})
_NEXT_WORD = re.compile(r"\s+([A-Za-z]+)")
_CALL = re.compile(r"[A-Za-z_][\w.]*\(")
_COMPOUND = re.compile(r"[a-z]+(?:-[a-z]+)+")
# Sentence punctuation after an unquoted value. "!" and "?" stay part of a password
# ("hunter2Pass!"): masking a sentence's last "!" costs nothing, leaking one character would.
_TRAILING = ".,;:)]}"


def _stated_password(match: re.Match[str], text: str) -> tuple[int, int] | None:
    """The span of the stated value, or None when the words around it state no password.

    A quoted value always counts. Otherwise the value (trailing ``.,;:)`` dropped) must not be
    a template slot, a masked value or a word from ``_NOT_A_PASSWORD``; after a colon it needs
    a digit or a symbol (as ASSIGNMENT: "To reset a password: Settings → Security"); a plain
    word must not read as a participle or adverb, nor be followed by a preposition ("is kept
    in the vault"), and a hyphenated lower-case compound must not end in such a word
    ("case-sensitive"); digits only need at least 4 ("12 characters long" is a rule, not a
    password); and the PIN and code keywords take 4 or more digits only (with ``-``, ``#``
    or ``*``), which they may follow without a connector ("PIN 1234").
    """
    quoted = match.group("quote") is not None
    group = "qvalue" if quoted else "value"
    start, end = match.span(group)
    if not quoted:
        while end - start > 1 and text[end - 1] in _TRAILING:
            end -= 1
    value = text[start:end]
    keyword = match.group("kw").lower()
    if keyword.startswith(("pass", "pw")) and match.group("bare") is not None:
        return None  # "password hunter2" states nothing; "PIN 1234" and "door code 4821" do
    if not keyword.startswith(("pass", "pw")):  # a PIN, a door code, a lock combination
        while end - start > 1 and text[end - 1] in "!?":
            end -= 1
        value = text[start:end]
        digits = sum(ch.isdigit() for ch in value)
        if digits < 4 or any(not (ch.isdigit() or ch in "-#*") for ch in value):
            return None
        return (start, end)
    if quoted:
        return (start, end) if value.strip() else None
    lowered = value.lower()
    if value[0] in "$<{%[(" or set(value) <= {"*", "x", "X", "."} or lowered in _NOT_A_PASSWORD:
        return None
    if not any(ch.isalnum() for ch in value):
        return None  # punctuation ("the password is : …", "password is — see below")
    if _CALL.match(value):
        return None  # code: ``password: get_secret("db")``
    if value.isdigit():
        return (start, end) if len(value) >= 4 else None
    if value.isalpha():
        if match.group("colon") is not None:
            return None
        if value[1:].islower():
            if lowered.endswith(_PROSE_ENDINGS) or lowered in _IRREGULAR_PARTICIPLES:
                return None
            following = _NEXT_WORD.match(text, end)
            if following is not None and following.group(1).lower() in _PREPOSITIONS:
                return None
    elif _COMPOUND.fullmatch(value):
        # "case-sensitive", "auto-generated" describe; "correct-horse-battery-staple" is one.
        last = lowered.rsplit("-", 1)[1]
        if last in _NOT_A_PASSWORD or last.endswith(_PROSE_ENDINGS) \
                or last in _IRREGULAR_PARTICIPLES:
            return None
    return (start, end)


def _password_gate(subject: _Subject) -> bool:
    lower = subject.lower  # every keyword contains one of these
    return "pass" in lower or "pw" in lower or "pin" in lower or "code" in lower \
        or "combination" in lower


def _password_shortcut(subject: _Subject) -> Iterable[re.Match[str]]:
    lower = subject.lower
    if subject.lower_aligned:
        return _leftmost([regex for needle, regex in _PASSWORD_EACH if needle in lower], lower)
    return _leftmost([regex for needle, regex in _PASSWORD_FOLDED if needle in lower],
                     subject.text)


_AWS_PREFIXES = ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA",
                 "APKA")


def _rule(kind: str, regex: str, validate: _Validator = _whole, gate: _Gate | None = None,
          *, folded: bool = False,
          shortcut: Callable[[_Subject], Iterable[re.Match[str]] | None] | None = None,
          rank: int = 0, min_digits: int = 0) -> _Rule:
    return _Rule(kind, re.compile(regex), validate, gate,
                 re.compile(regex, re.IGNORECASE) if folded else None, shortcut, rank,
                 min_digits)


_DIGITS_TO_ZERO = {ord(d): ord("0") for d in "123456789"}
_DIGIT_BYTES_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
# NUMSEQ16 written over the digit-classed text: it starts with the literal "0", so the engine
# jumps from digit to digit. Offsets, groups and the validator are unchanged.
_NUMSEQ_ZERO = re.compile(
    r"0(?<![0-9A-Za-z_.-].)(?:0{15,}|0{3,5}(?:([ -])0{3,6})(?:(?:\1)0{3,6})+)"
    r"(?![0-9A-Za-z_]|[.-]0)"
)


def _numseq_shortcut(subject: _Subject) -> Iterable[re.Match[str]] | None:
    shaped = subject.shape("digits", _DIGITS_TO_ZERO)
    return None if shaped is None else _NUMSEQ_ZERO.finditer(shaped)


# -- numbers that identify people: cards, SSNs, phone numbers, IBANs ---------------------------
#
# These rules scan the digit-classed copy of the text (every ASCII digit → ``0``), so each
# expression starts with a literal and the engine jumps from candidate to candidate at C speed;
# validators read the digits from the original text. A candidate must be set off from
# surrounding word characters, and from ``.`` / ``-`` + digit (``v1.415.555.0199`` and
# ``ID-415-555-0199`` are identifiers), which keeps versions, ids and most dates out.

_NUMBER_END = r"(?![0-9A-Za-z_]|[.-]0)"


def _digits_in(text: str, start: int, end: int) -> str:
    return "".join(ch for ch in text[start:end] if "0" <= ch <= "9")


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


# Issuer prefixes (IIN ranges) and lengths of the card brands in circulation: (first digits
# from, to, lengths). One random number in ten passes Luhn; the prefixes rule out most of those.
_CARD_BRANDS: tuple[tuple[str, str, frozenset[int]], ...] = (
    ("4", "4", frozenset({13, 16, 19})),                          # Visa, Visa Electron
    ("51", "55", frozenset({16})),                                 # Mastercard
    ("2221", "2720", frozenset({16})),                             # Mastercard 2-series
    ("34", "34", frozenset({15})),                                 # American Express
    ("37", "37", frozenset({15})),
    ("6011", "6011", frozenset(range(16, 20))),                    # Discover
    ("644", "649", frozenset(range(16, 20))),
    ("65", "65", frozenset(range(16, 20))),                        # Discover, RuPay
    ("300", "305", frozenset(range(14, 20))),                      # Diners Club
    ("3095", "3095", frozenset(range(14, 20))),
    ("36", "36", frozenset(range(14, 20))),
    ("38", "39", frozenset(range(16, 20))),
    ("3528", "3589", frozenset(range(16, 20))),                    # JCB
    ("62", "62", frozenset(range(16, 20))),                        # UnionPay
    ("81", "82", frozenset({16})),                                 # UnionPay, RuPay
    ("60", "60", frozenset({16})),                                 # RuPay
    ("2200", "2204", frozenset(range(16, 20))),                    # Mir
    ("50", "50", frozenset(range(13, 20))),                        # Maestro
    ("56", "69", frozenset(range(13, 20))),
    ("9792", "9792", frozenset({16})),                             # Troy
    ("1", "1", frozenset({15})),                                   # UATP
)


def _card_brand_fits(digits: str) -> bool:
    return any(low <= digits[:len(low)] <= high and len(digits) in lengths
               for low, high, lengths in _CARD_BRANDS)


# 13-19 digits, unbroken or in 3-5 groups of 3-6 (4-4-4-4, Amex 4-6-5, 4-4-4-4-3) separated
# by one space or one dash, the same throughout.
_CARD_ZERO = re.compile(
    r"0000(?<![0-9A-Za-z_.-]....)(?:0{9,15}|0{0,2}(?P<sep>[ -])0{3,6}(?:(?P=sep)0{3,6}){1,3}"
    r"(?!(?P=sep)0))" + _NUMBER_END
)


def _card(match: re.Match[str], text: str) -> tuple[int, int] | None:
    digits = _digits_in(text, *match.span())
    if 13 <= len(digits) <= 19 and _card_brand_fits(digits) and _luhn(digits):
        return match.span()
    return None


# US SSN: 3-2-4 digits separated by dashes or by spaces. An unbroken 9-digit number is not
# taken for one: order numbers and ids share that shape.
_SSN_ZERO = re.compile(
    r"000(?<![0-9A-Za-z_.+$#/-]...)(?P<sep>[- ])00(?P=sep)0000" + _NUMBER_END)


def _ssn(match: re.Match[str], text: str) -> tuple[int, int] | None:
    # Never issued (SSA): area 000, 666 or 900-999; group 00; serial 0000.
    digits = _digits_in(text, *match.span())
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    if area in ("000", "666") or area[0] == "9" or group == "00" or serial == "0000":
        return None
    return match.span()


# Phone numbers need a phone's structure, not just digits:
# * international: ``+`` and a country code, then the number unbroken (E.164: 10-15 digits)
#   or in groups, optionally with a parenthesised area code (``+1 (415) 555-0134``,
#   ``+44 20 7946 0958``, ``+44 (0)20 7946 0958``, ``+33 1 23 45 67 89``): 8-15 digits;
# * a parenthesised area code: ``(415) 555-0134``, ``(020) 7946 0958``;
# * national groups: 3-3-4 (``415-555-0199``, ``415.555.0199``, ``415 555-0199``, also after
#   ``1-``), a trunk ``0`` then 3-5 / 3-4 / 3-4 or 3-5 / 5-8 digits (``020 7946 0958``,
#   ``0161 496 0000``, ``030 12345678``), or five pairs from ``0`` (``01 23 45 67 89``).
# A slash, colon or comma is never part of one, so dates (05/06/2024), times, prices
# ($1,299.99) and ranges stay; nor is a bare run of digits.
_PHONE_PARTS = (
    r"\+(?<![0-9A-Za-z_)+]\+)0(?:0{9,14}|0{0,2}(?:[ .-]?\(0{1,4}\)[ .-]?0{1,8}|[ .-]0{1,8})"
    r"(?:[ .-]0{1,8}){0,5})" + _NUMBER_END,
    r"\((?<![0-9A-Za-z_]\()0{3,5}\)[ .-]?0{3,4}[ .-]0{3,4}" + _NUMBER_END,
    r"0(?<![0-9A-Za-z_.+(#$/-].)"
    r"(?:(?P<lead>[ .-]0)?(?P<nanp>00[ .-]000[ .-]0000)"
    r"|0{2,4}(?P<sep3>[ -])0{3,4}(?P=sep3)0{3,4}|0{2,4}[ -]0{5,8}"
    r"|0(?P<sep2>[ .])00(?P=sep2)00(?P=sep2)00(?P=sep2)00)" + _NUMBER_END,
)
_PHONE_EACH = tuple(re.compile(part) for part in _PHONE_PARTS)
_PHONE_ZERO = re.compile("|".join(f"(?:{part})" for part in _PHONE_PARTS))
_NANP_LEADS = frozenset("23456789")


def _nanp(digits: str) -> bool:
    # North American numbering: area code and exchange both start with 2-9.
    return len(digits) == 10 and digits[0] in _NANP_LEADS and digits[3] in _NANP_LEADS


def _trunk(digits: str) -> bool:
    # A national number dialled with its trunk prefix 0 (not 00, the international prefix).
    return 10 <= len(digits) <= 11 and digits[0] == "0" and digits[1] != "0"


def _phone(match: re.Match[str], text: str) -> tuple[int, int] | None:
    start, end = match.span()
    digits = _digits_in(text, start, end)
    first = text[start]
    if first == "+":  # no country code starts with 0
        return (start, end) if 8 <= len(digits) <= 15 and digits[0] != "0" else None
    if first == "(":
        return (start, end) if _nanp(digits) or _trunk(digits) else None
    if match.group("nanp") is None:  # trunk-0 groups and pairs
        return (start, end) if _trunk(digits) else None
    if match.group("lead") is not None:
        if not (_nanp(digits[1:]) or _trunk(digits[1:])):
            return None
        # ``1-800-555-0199`` whole; after another digit only the number itself.
        return (start, end) if first == "1" else (match.end("lead") - 1, end)
    return (start, end) if _nanp(digits) or _trunk(digits) else None


def _phone_shortcut(subject: _Subject) -> Iterable[re.Match[str]]:
    return _leftmost(_PHONE_EACH, subject.digits_classed())


# IBAN (ISO 13616): country code, two check digits, 11-30 letters and digits, unbroken or in
# groups of four (``DE89 3704 0044 0532 0130 00``); upper case as printed. The scan finds the
# check digits (literal ``00`` in the classed text) and looks back for the country code.
_IBAN_ZERO = re.compile(
    r"(?P<check>00)(?<![0-9A-Za-z][A-Z]{2}00)(?<=[A-Z]{2}00)"
    r"(?:[A-Z0]{11,30}|(?: [A-Z0]{4}){2,7}(?: [A-Z0]{1,3})?)(?![0-9A-Za-z])"
)


def _iban(match: re.Match[str], text: str) -> tuple[int, int] | None:
    start, end = match.start() - 2, match.end()
    compact = text[start:end].replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return None
    # ISO 7064 mod 97-10: move the first four characters to the end, letters A=10 … Z=35.
    rotated = compact[4:] + compact[:4]
    number = int("".join(str(int(ch, 36)) for ch in rotated))
    return (start, end) if number % 97 == 1 else None


def _classed_scan(regex: re.Pattern[str]) -> Callable[[_Subject], Iterable[re.Match[str]]]:
    return lambda subject: regex.finditer(subject.digits_classed())


_TOKEN_SHAPE = {code: ord("a") if chr(code) in
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-" else
                (ord("=") if chr(code) == "=" else ord(" ")) for code in range(128)}
_TOKEN_RUN = "a" * 20
_NOT_TOKEN = re.compile(r"[^a]")
_HIGH_ENTROPY_REGEX = r"[A-Za-z0-9+/_-]{20,}={0,2}(?![A-Za-z0-9+/_=-])"
_HIGH_ENTROPY = re.compile(_HIGH_ENTROPY_REGEX)


def _high_entropy_shortcut(subject: _Subject) -> Iterable[re.Match[str]] | None:
    """Candidates of HIGH_ENTROPY: runs of 20+ token characters, found by ``str.find``."""
    shaped = subject.shape("tokens", _TOKEN_SHAPE)
    if shaped is None:
        return None
    found: list[re.Match[str]] = []
    pos = shaped.find(_TOKEN_RUN)
    while pos >= 0:
        # ``pos`` starts a maximal run (the search resumes after the previous run), which is
        # where the plain scan would also match first.
        match = _HIGH_ENTROPY.match(subject.text, pos)
        if match is not None:
            found.append(match)
        end = _NOT_TOKEN.search(shaped, pos + 20)
        if end is None:
            break
        pos = shaped.find(_TOKEN_RUN, end.end())
    return found


# Seed 003 §4 Security Guard; expressions written for this module after reading the rule sets
# of gitleaks and detect-secrets (prefixes and lengths are the vendors' documented formats).
# Most start with their literal prefix and check the left boundary after it (a look-behind
# at the start of an expression makes Python's engine try every position).
def _secret_rules() -> tuple[_Rule, ...]:
    return (
        _rule("PRIVATE_KEY",
              r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[^\x00]*?"
              r"(?:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|\Z|(?=\x00))",
              gate=_contains("PRIVATE KEY")),
        _rule("AWS_KEY_ID",
              rf"(?:{'|'.join(_AWS_PREFIXES)})(?<![A-Za-z0-9]....)[A-Z0-9]{{16}}"
              r"(?![A-Za-z0-9])",
              gate=_searches(rf"A(?:{'|'.join(p[1:] for p in _AWS_PREFIXES)})[A-Z0-9]{{16}}")),
        _rule("GCP_API_KEY", r"AIza(?<![A-Za-z0-9_-]....)[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])",
              gate=_contains("AIza")),
        _rule("GITHUB_TOKEN",
              r"(?:gh[pousr]_(?<![A-Za-z0-9_]....)[A-Za-z0-9]{36,255}"
              r"|github_pat_(?<![A-Za-z0-9_]...........)[A-Za-z0-9_]{22,255})(?![A-Za-z0-9_])",
              gate=_contains("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
        _rule("SLACK_WEBHOOK",
              r"https://hooks\.slack(?:-gov)?\.com/(?:services|workflows|triggers)/"
              r"[A-Za-z0-9+/_-]{20,}",
              gate=_contains("hooks.slack")),
        _rule("SLACK_TOKEN",
              r"(?:xox[abposre]-(?<![A-Za-z0-9_-].....)[A-Za-z0-9-]{10,}"
              r"|xapp-(?<![A-Za-z0-9_-].....)\d-[A-Za-z0-9-]{10,})",
              gate=_contains("xox", "xapp-")),
        _rule("STRIPE_KEY",
              r"(?:(?:sk|rk|pk)(?<![A-Za-z0-9_]..)_(?:live|test)_[A-Za-z0-9]{10,}"
              r"|whsec_(?<![A-Za-z0-9_]......)[A-Za-z0-9]{20,})(?![A-Za-z0-9_])",
              gate=_contains("_live_", "_test_", "whsec_")),
        _rule("AI_API_KEY",
              r"sk-(?<![A-Za-z0-9_-]...)(?:ant-[a-z0-9]*-?|proj-|svcacct-|admin-)?"
              r"[A-Za-z0-9_-]{20,}(?![A-Za-z0-9_-])",
              gate=_contains("sk-")),
        _rule("JWT",
              r"eyJ(?<![A-Za-z0-9_-]...)[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}"
              r"\.[A-Za-z0-9_-]*(?![A-Za-z0-9_-])",
              gate=_contains("eyJ")),
        _rule("BEARER",
              r"authorization\b[\"']?\s*[:=]\s*[\"']?(?:bearer|basic|token|digest)\s+"
              r"([a-z0-9._~+/=-]{8,})",
              _group1, _contains_folded("authorization"), folded=True),
        _rule("ASSIGNMENT", _ASSIGNMENT_REGEX, _assignment, folded=True,
              shortcut=_assignment_shortcut),
        _rule("PASSWORD", _PASSWORD_REGEX, _stated_password,
              _password_gate, folded=True,
              shortcut=_password_shortcut, rank=1),
        _rule("HIGH_ENTROPY", _HIGH_ENTROPY_REGEX, _high_entropy,
              shortcut=_high_entropy_shortcut, rank=1),
    )


def _pii_rules() -> dict[str, _Rule]:
    # seed 002 §14: EMAIL, UUID, numeric sequences beyond a length threshold (16 digits).
    return {
        "EMAIL": _rule(
            "EMAIL",
            r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*"
            r"\.[A-Za-z]{2,}(?![A-Za-z0-9-])",
            gate=_searches(r"@[A-Za-z0-9-]+\.[A-Za-z]")),
        "UUID": _rule(
            "UUID",
            r"[0-9a-fA-F](?<![0-9A-Za-z-].)[0-9a-fA-F]{7}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}"
            r"-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![0-9A-Za-z-])",
            gate=_searches(r"-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-")),
        "NUMSEQ16": _rule(
            "NUMSEQ16",
            r"\d(?<![0-9A-Za-z_.-].)(?:\d{15,}|\d{3,5}(?:([ -])\d{3,6})(?:\1\d{3,6})+)"
            r"(?![0-9A-Za-z_]|[.-]\d)",
            _numseq, shortcut=_numseq_shortcut, rank=1, min_digits=16),
        # The number rules' expressions are written for the digit-classed text, which their
        # shortcuts always scan (so they never run on the original text).
        "CARD": _Rule("CARD", _CARD_ZERO, _card, shortcut=_classed_scan(_CARD_ZERO),
                      min_digits=13),
        "SSN": _Rule("SSN", _SSN_ZERO, _ssn, shortcut=_classed_scan(_SSN_ZERO), min_digits=9),
        "PHONE": _Rule("PHONE", _PHONE_ZERO, _phone, shortcut=_phone_shortcut, min_digits=8),
        "IBAN": _Rule("IBAN", _IBAN_ZERO, _iban, shortcut=_classed_scan(_IBAN_ZERO),
                      min_digits=10),
    }


_SECRET_RULES = _secret_rules()
_PII_RULES = _pii_rules()
SECRET_PATTERN_NAMES: tuple[str, ...] = tuple(rule.kind for rule in _SECRET_RULES)
PATTERN_NAMES: tuple[str, ...] = (*_PII_RULES, "SECRETS", *SECRET_PATTERN_NAMES)
_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


def _builtin_rules(name: str) -> list[_Rule]:
    if name in _PII_RULES:
        return [_PII_RULES[name]]
    if name == "SECRETS":
        return list(_SECRET_RULES)
    for rule in _SECRET_RULES:
        if rule.kind == name:
            return [rule]
    raise RedactionPatternInvalid(
        f"unknown redaction pattern {name!r}; known names: {', '.join(PATTERN_NAMES)}"
    )


def _custom_rule(kind: str, regex: str) -> _Rule:
    try:
        compiled = re.compile(regex)
    except re.error as exc:
        raise RedactionPatternInvalid(
            f"redaction pattern {regex!r} does not compile: {exc}"
        ) from exc
    if compiled.match("") is not None:
        raise RedactionPatternInvalid(f"redaction pattern {regex!r} matches the empty string")
    return _Rule(kind, compiled, _group1 if compiled.groups else _whole)


class Redactor:
    """Masks the configured patterns; compiled once, safe to share between threads.

    Args:
        patterns: Pattern names (see the module docstring), custom regular expressions, or
            :class:`CustomPattern` values. Defaults to :data:`DEFAULT_PATTERNS`.

    Raises:
        RedactionPatternInvalid: a name is unknown, a regex does not compile or matches the
            empty string. The message names the pattern.
    """

    def __init__(self, patterns: Iterable[str | CustomPattern] = DEFAULT_PATTERNS) -> None:
        rules: list[_Rule] = []
        names: list[str] = []
        for pattern in patterns:
            if isinstance(pattern, CustomPattern):
                if not _NAME.match(pattern.kind):
                    raise RedactionPatternInvalid(
                        f"custom redaction kind {pattern.kind!r} must be an upper-case name"
                    )
                rules.append(_custom_rule(pattern.kind, pattern.regex))
                names.append(pattern.kind)
            elif _NAME.match(pattern):
                rules.extend(_builtin_rules(pattern))
                names.append(pattern)
            elif pattern:
                rules.append(_custom_rule("CUSTOM", pattern))
                names.append(pattern)
            else:
                raise RedactionPatternInvalid("redaction pattern '' is empty")
        self._rules = tuple(rules)
        self._secret_kinds = frozenset(SECRET_PATTERN_NAMES)
        self.patterns: tuple[str, ...] = tuple(names)

    def findings(self, text: str) -> list[Finding]:
        """Return the spans that :meth:`redact` masks, sorted by position, non-overlapping.

        Where two patterns overlap, the one starting first wins, then the longer one; on equal
        spans the specific kind (``CARD``) names the finding rather than the generic one
        (``NUMSEQ16``).
        """
        protected = [m.span() for m in _PLACEHOLDER.finditer(text)] if "<REDACT:" in text else []
        # Rules scan the text with each placeholder blanked to word characters (same offsets):
        # a placeholder stands where a value was, so a neighbour that a rule's boundary check
        # refused beside the value ("415-555-0199+415-555-0199", "a@b.io+1 555 0142") is still
        # refused beside its placeholder, and masking twice changes nothing.
        scanned = _PLACEHOLDER.sub(lambda m: "_" * len(m.group()), text) if protected else text
        subject = _Subject(scanned)
        spans: list[tuple[int, int, int, str]] = []
        for rule in self._rules:
            if rule.min_digits and subject.digits < rule.min_digits:
                continue
            for match in rule.matches(subject):
                span = rule.validate(match, scanned)
                if span is None or span[0] >= span[1]:
                    continue
                start, end = span
                if any(p_start < end and start < p_end for p_start, p_end in protected):
                    continue
                spans.append((start, end, rule.rank, rule.kind))
        spans.sort(key=lambda item: (item[0], -item[1], item[2]))
        found: list[Finding] = []
        last_end = -1
        for start, end, _rank, kind in spans:
            if start < last_end:
                continue
            found.append(Finding(kind, start, end, placeholder_for(text[start:end])))
            last_end = end
        return found

    def redact(self, text: str) -> str:
        """Return ``text`` with every finding replaced by its placeholder."""
        return _apply(text, self.findings(text))

    def redact_many(self, texts: Sequence[str]) -> list[tuple[str, int]]:
        """Mask several texts in one pass; returns (masked text, number of findings) each.

        Equivalent to :meth:`redact` on each text (no pattern crosses the NUL-line separator
        used to join them), but the per-call cost of the gates and regex passes is paid once.
        """
        if not texts:
            return []
        if any(_SEPARATOR_CHAR in text for text in texts):
            return [(_apply(text, found), len(found))
                    for text, found in ((t, self.findings(t)) for t in texts)]
        joined = _SEPARATOR.join(texts)
        found = self.findings(joined)
        bounds: list[int] = []
        offset = 0
        for text in texts:
            offset += len(text)
            bounds.append(offset)
            offset += len(_SEPARATOR)
        counts = [0] * len(texts)
        index = 0
        for item in found:
            while item.start >= bounds[index]:
                index += 1
            counts[index] += 1
        masked = _apply(joined, found).split(_SEPARATOR)
        return list(zip(masked, counts, strict=True))

    def contains_secret(self, text: str) -> bool:
        """True when a secret pattern (not only personal data) occurs in ``text``."""
        return any(item.kind in self._secret_kinds for item in self.findings(text))


_SEPARATOR_CHAR = "\x00"
_SEPARATOR = "\n\x00\n"


def _apply(text: str, found: Sequence[Finding]) -> str:
    if not found:
        return text
    parts: list[str] = []
    cursor = 0
    for item in found:
        parts.append(text[cursor:item.start])
        parts.append(item.placeholder)
        cursor = item.end
    parts.append(text[cursor:])
    return "".join(parts)


@lru_cache(maxsize=8)
def redactor_for(patterns: tuple[str, ...]) -> Redactor:
    """The shared :class:`Redactor` for ``patterns`` (one per pattern list, built on first use).

    A Redactor is immutable, so every path configured with the same patterns — the engine's
    events, exports and scans, the CLI, the server, the views — shares one.

    Raises:
        RedactionPatternInvalid: as :class:`Redactor`.
    """
    return Redactor(patterns)


def _default() -> Redactor:
    return redactor_for(DEFAULT_PATTERNS)


def redact_text(text: str) -> str:
    """Mask ``text`` with :data:`DEFAULT_PATTERNS` (for code without an engine configuration;
    the engine's exits use :attr:`engine.memory_engine.MemoryEngine.redactor`)."""
    return _default().redact(text)


def contains_secret(text: str) -> bool:
    """True when ``text`` holds a secret under the default patterns."""
    return _default().contains_secret(text)
