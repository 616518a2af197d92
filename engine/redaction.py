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
  separated by single spaces or dashes (``4111 1111 1111 1111``). Dates and phone numbers
  (at most 15 digits, E.164) stay.
* ``SECRETS`` — every secret pattern below; each also works on its own by name:
  ``AWS_KEY_ID``, ``GCP_API_KEY``, ``GITHUB_TOKEN``, ``SLACK_TOKEN``, ``SLACK_WEBHOOK``,
  ``AI_API_KEY`` (OpenAI/Anthropic ``sk-…``), ``STRIPE_KEY``, ``JWT``, ``BEARER``
  (the credential of an ``Authorization:`` line), ``ASSIGNMENT`` (the value of
  ``password=``, ``api_key:``, ``secret=``… ), ``PRIVATE_KEY`` (a PEM private-key block, or
  from its BEGIN line to the end of the text when the END line is missing) and
  ``HIGH_ENTROPY``.
* Anything that is not an upper-case name is compiled as a custom regular expression (kind
  ``CUSTOM``); a :class:`CustomPattern` gives it a kind of its own.

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
    "shannon_entropy",
]

DEFAULT_PATTERNS: tuple[str, ...] = ("EMAIL", "UUID", "NUMSEQ16", "SECRETS")

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


# A validator looks at a match and returns the span to mask, or None to keep the text.
_Validator = Callable[[re.Match[str]], tuple[int, int] | None]


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


def _has_digits(count: int) -> _Gate:
    return lambda subject: sum(map(subject.text.count, "0123456789")) >= count


def _searches(regex: str) -> _Gate:
    compiled = re.compile(regex)  # must start with a literal, so the search is a fast scan
    return lambda subject: compiled.search(subject.text) is not None


def _whole(match: re.Match[str]) -> tuple[int, int] | None:
    return match.span()


def _group1(match: re.Match[str]) -> tuple[int, int] | None:
    return match.span(1)


def _numseq(match: re.Match[str]) -> tuple[int, int] | None:
    # seed 002 §14: "numeric sequences beyond length threshold" — 16 digits, grouping ignored.
    digits = sum(ch.isdigit() for ch in match.group(0))
    return match.span() if digits >= 16 else None


_NON_SECRET_VALUES = frozenset(
    {"none", "null", "nil", "true", "false", "undefined", "empty", "required", "optional",
     "redacted", "changeme", "string", "str", "bytes", "int", "secret", "password", "****"}
)
_SYMBOLS = frozenset("0123456789_-+/=.!@#$%^&*~?")


def _assignment(match: re.Match[str]) -> tuple[int, int] | None:
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


def _high_entropy(match: re.Match[str]) -> tuple[int, int] | None:
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
    found: list[re.Match[str]] = []
    position = 0
    while True:
        best: re.Match[str] | None = None
        for regex in regexes:
            match = regex.search(lower, position)
            if match is not None and (best is None or match.start() < best.start()):
                best = match
        if best is None:
            return found
        found.append(best)
        position = best.end() if best.end() > best.start() else best.start() + 1


_AWS_PREFIXES = ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA",
                 "APKA")


def _rule(kind: str, regex: str, validate: _Validator = _whole, gate: _Gate | None = None,
          *, folded: bool = False,
          shortcut: Callable[[_Subject], Iterable[re.Match[str]] | None] | None = None) -> _Rule:
    return _Rule(kind, re.compile(regex), validate, gate,
                 re.compile(regex, re.IGNORECASE) if folded else None, shortcut)


_DIGITS_TO_ZERO = {ord(d): ord("0") for d in "123456789"}
# NUMSEQ16 written over the digit-classed text: it starts with the literal "0", so the engine
# jumps from digit to digit. Offsets, groups and the validator are unchanged.
_NUMSEQ_ZERO = re.compile(
    r"0(?<![0-9A-Za-z_.-].)(?:0{15,}|0{3,5}(?:([ -])0{3,6})(?:(?:\1)0{3,6})+)"
    r"(?![0-9A-Za-z_]|[.-]0)"
)


def _numseq_shortcut(subject: _Subject) -> Iterable[re.Match[str]] | None:
    shaped = subject.shape("digits", _DIGITS_TO_ZERO)
    return None if shaped is None else _NUMSEQ_ZERO.finditer(shaped)


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
        _rule("HIGH_ENTROPY", _HIGH_ENTROPY_REGEX, _high_entropy,
              shortcut=_high_entropy_shortcut),
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
            _numseq, _has_digits(16), shortcut=_numseq_shortcut),
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

        Where two patterns overlap, the one starting first wins, then the longer one.
        """
        protected = [m.span() for m in _PLACEHOLDER.finditer(text)] if "<REDACT:" in text else []
        subject = _Subject(text)
        spans: list[tuple[int, int, str]] = []
        for rule in self._rules:
            for match in rule.matches(subject):
                span = rule.validate(match)
                if span is None or span[0] >= span[1]:
                    continue
                start, end = span
                if any(p_start < end and start < p_end for p_start, p_end in protected):
                    continue
                spans.append((start, end, rule.kind))
        spans.sort(key=lambda item: (item[0], -item[1]))
        found: list[Finding] = []
        last_end = -1
        for start, end, kind in spans:
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


@lru_cache(maxsize=1)
def _default() -> Redactor:
    # Built on first use (compiling is not free) and immutable afterwards, so sharing is safe.
    return Redactor(DEFAULT_PATTERNS)


def redact_text(text: str) -> str:
    """Mask ``text`` with the default patterns (EMAIL, UUID, NUMSEQ16, SECRETS)."""
    return _default().redact(text)


def contains_secret(text: str) -> bool:
    """True when ``text`` holds a secret under the default patterns."""
    return _default().contains_secret(text)
