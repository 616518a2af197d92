"""The contradiction guard: near-duplicates that disagree on a detail must never merge.

Embeddings place "standup at 3pm" and "standup at 5pm", or "likes tea" and "does not like
tea", very close together: a plain cosine threshold merges them and the user silently loses one
of the two facts. Before any near-duplicate merge the pipeline asks :func:`find_conflicts`
whether the two texts differ in a detail that changes their meaning; if so the pair is deferred
to the review queue with reason ``possible_contradiction`` (issue 3), never merged.

The rules are deliberately general (no word lists tuned to one data set):

* ``number``   — both texts state numbers and the sets differ (digits, decimals, separators,
  currency, percentages, number words two..ninety, scale words such as million).
* ``time``     — both texts state a time and they differ: clock times (3pm, 15:00), weekdays,
  month names, relative days (today/tomorrow/yesterday/tonight).
* ``negation`` — the texts carry a different number of negations (not, n't, never, no, ...).
* ``antonym``  — one text has a word whose opposite the other has: a negating prefix
  (like/dislike, able/unable, possible/impossible) or a small table of everyday opposites
  (higher/lower, man/woman, buy/sell, ...).
* ``color``    — both texts state colours and they differ ("blue car" / "red car").
* ``name``     — each text names someone or something (a capitalized word that is not a
  function word) that the other does not mention: a substituted name. Inflected forms
  (Syria/Syrian), short forms (Mel/Melanie), discourse words (Thanks, Wow), sentence-initial
  -ing/-ly/-ed words and title-case headlines, where capitals say nothing, are not counted.

A detail stated by only one text (a number, a time) is extra information, not a contradiction;
the merge keeps the stored text (seed 001 merge rules), so such pairs still merge.
* ``mood``     — one single-sentence text is a question and the other a statement.

Each rule reports what it saw on each side, so the review queue can show the user *why*.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = ["CONFLICT_KINDS", "Conflict", "TextFacts", "extract_facts", "find_conflicts"]

CONFLICT_KINDS = ("number", "time", "negation", "antonym", "color", "name", "mood")


@dataclass(frozen=True, slots=True)
class Conflict:
    """One detail on which two texts disagree.

    Attributes:
        kind: One of :data:`CONFLICT_KINDS`.
        existing: What the stored text says (normalized tokens).
        incoming: What the incoming text says.
    """

    kind: str
    existing: tuple[str, ...]
    incoming: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """Wire form (used in event payloads and the review queue)."""
        return {"kind": self.kind, "existing": list(self.existing),
                "incoming": list(self.incoming)}


@dataclass(frozen=True, slots=True)
class TextFacts:
    """The details of one text the guard compares."""

    numbers: frozenset[str]
    times: frozenset[str]
    negations: int
    colors: frozenset[str]
    stems: frozenset[str]
    names: frozenset[str]
    words: frozenset[str]
    question: bool
    single_sentence: bool


_NUMBER_WORDS: Mapping[str, float] = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
    "dozen": 12, "twice": 2, "thrice": 3, "half": 0.5,
}
_SCALES = frozenset({"hundred", "thousand", "million", "billion", "trillion"})
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")
_MONTH_ABBR = {m[:3]: m for m in _MONTHS if m != "may"} | {"sept": "september"}
_RELATIVE_DAYS = frozenset({"today", "tomorrow", "yesterday", "tonight"})
_NEGATIONS = frozenset({"not", "no", "never", "none", "nobody", "nothing", "nowhere", "neither",
                        "nor", "without", "cannot", "cant", "dont", "doesnt", "didnt", "isnt",
                        "arent", "wasnt", "werent", "wont", "wouldnt", "shouldnt", "couldnt",
                        "hasnt", "havent", "hadnt", "mustnt"})
_COLORS = frozenset({"red", "orange", "yellow", "green", "blue", "purple", "violet", "pink",
                     "brown", "black", "white", "gray", "grey", "silver", "gold", "golden",
                     "beige", "tan", "maroon", "navy", "teal", "turquoise"})
_NEG_PREFIXES = ("dis", "un", "in", "im", "ir", "il", "non")
# Everyday opposites; each side lists base forms (a light stemmer maps inflections onto them).
_OPPOSITES: tuple[tuple[str, str], ...] = (
    ("high", "low"), ("higher", "lower"), ("highest", "lowest"), ("up", "down"),
    ("rise", "fall"), ("rose", "fell"), ("increase", "decrease"), ("gain", "lose"),
    ("gain", "loss"), ("win", "lose"), ("won", "lost"), ("open", "close"), ("true", "false"),
    ("yes", "no"), ("always", "never"), ("before", "after"), ("more", "less"),
    ("most", "least"), ("accept", "reject"), ("allow", "forbid"), ("start", "stop"),
    ("begin", "end"), ("enable", "disable"), ("love", "hate"), ("like", "hate"),
    ("best", "worst"), ("better", "worse"), ("male", "female"), ("man", "woman"),
    ("men", "women"), ("boy", "girl"), ("husband", "wife"), ("father", "mother"),
    ("son", "daughter"), ("brother", "sister"), ("he", "she"), ("his", "her"), ("him", "her"),
    ("buy", "sell"), ("bought", "sold"), ("arrive", "leave"), ("early", "late"),
    ("first", "last"), ("same", "different"), ("success", "failure"), ("pass", "fail"),
    ("positive", "negative"), ("guilty", "innocent"), ("alive", "dead"), ("hot", "cold"),
    ("north", "south"), ("east", "west"), ("left", "right"), ("inside", "outside"),
    ("enter", "exit"), ("add", "remove"), ("include", "exclude"), ("above", "below"),
    ("strong", "weak"), ("stronger", "weaker"), ("cheap", "expensive"), ("safe", "unsafe"),
    ("old", "new"), ("older", "newer"), ("old", "young"), ("older", "younger"),
    ("big", "small"), ("bigger", "smaller"), ("large", "small"), ("long", "short"),
    ("fast", "slow"), ("faster", "slower"), ("full", "empty"), ("light", "dark"),
    ("wet", "dry"), ("hard", "soft"), ("rich", "poor"), ("happy", "sad"), ("agree", "oppose"),
    ("support", "oppose"), ("approve", "reject"), ("online", "offline"), ("on", "off"),
    ("always", "sometimes"), ("present", "absent"), ("morning", "evening"),
    ("day", "night"), ("summer", "winter"), ("spring", "autumn"),
)

_TIME = re.compile(
    r"\b(\d{1,2})(?:[:.](\d{2}))?\s*([ap])\.?\s?m\b\.?|\b(\d{1,2}):(\d{2})\b", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])[-+]?[$€£¥]?\d[\d,]*(?:\.\d+)?(?:%|st|nd|rd|th|p|k)?",
                     re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_][^\W_]*(?:['’][^\W\d_]+)*(?:-[^\W_]+)*")
# Closed-class words: capitalized (at the start of a sentence) they are still not names.
_FUNCTION_WORD_LIST = """
a an the this that these those there here it its it's he she they we you i me my our your
their his her him them us who what when where why how which whom whose is are was were be
been being do does did done can could should would will shall may might must has have had
having and or but so yet if then than as at by for from in into of on onto off out over to
up with within without about above after again against all any both each few more most other
some such no nor not only own same too very just also now once because before below between
during through under until while many much every several another one two three four five six
seven eight nine ten i'm i've i'd i'll you're you've we're we've they're it's that's
there's what's let's hey hi hello oh ok okay yes yeah yep no nope wow thanks thank please
sorry well sure great cool awesome nice congrats congratulations anyway also maybe
"""
_FUNCTION_WORDS = frozenset(_FUNCTION_WORD_LIST.split())

def _canonical_number(raw: str) -> str | None:
    text = raw.lower().lstrip("+$€£¥").rstrip("%").removesuffix("k")
    for suffix in ("st", "nd", "rd", "th", "p"):
        text = text.removesuffix(suffix)
    text = text.replace(",", "")
    try:
        value = float(text)
    except ValueError:
        return None
    if raw.lower().endswith("k"):
        value *= 1000
    return f"{value:g}"


def _stem(word: str) -> str:
    """A deliberately light stemmer: enough to match inflections of the same word."""
    if word.endswith(("sses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    for suffix, keep in (("ies", "y"), ("ied", "y"), ("ing", ""), ("ed", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: len(word) - len(suffix)] + keep
    return word


def _words_of(text: str) -> list[tuple[str, int]]:
    return [(m.group(0), m.start()) for m in _WORD.finditer(text)]


_VERB_ENDINGS = ("ing", "ly", "ed")
_SENTENCE_END = re.compile(r"(^|[.!?:;\"“”(\[])\s*$")


def _sentence_start(text: str, start: int) -> bool:
    """True when the word at ``start`` opens a sentence (a capital there says little)."""
    return bool(_SENTENCE_END.search(text[:start]))


def _sentences(text: str) -> int:
    return max(1, len([p for p in re.split(r"[.!?]+(?:\s|$)", text.strip()) if p.strip()]))


def _is_title_case(words: list[tuple[str, int]]) -> bool:
    alphabetic = [w for w, _ in words if w[0].isalpha() and len(w) > 3]
    if len(alphabetic) < 3:
        return False
    capitals = sum(1 for w in alphabetic if w[0].isupper())
    return capitals / len(alphabetic) >= 0.6


@lru_cache(maxsize=4096)
def extract_facts(text: str) -> TextFacts:
    """Extract the details :func:`find_conflicts` compares (cached: texts repeat in batches)."""
    times: set[str] = set()
    remainder = text
    for match in _TIME.finditer(text):
        if match.group(4) is not None:
            hour, minute = int(match.group(4)), int(match.group(5))
        else:
            hour = int(match.group(1)) % 12 + (12 if match.group(3).lower() == "p" else 0)
            minute = int(match.group(2) or 0)
        times.add(f"{hour:02d}:{minute:02d}")
    remainder = _TIME.sub(" ", remainder)
    numbers = {n for n in (_canonical_number(m.group(0)) for m in _NUMBER.finditer(remainder))
               if n is not None}
    words = _words_of(remainder)
    lower = [w.lower().replace("’", "'") for w, _ in words]
    negations = 0
    for position, word in enumerate(lower):
        bare = word.replace("'", "")
        if bare in _NEGATIONS or word.endswith("n't"):
            negations += 1
        if bare in _NUMBER_WORDS:
            numbers.add(f"{_NUMBER_WORDS[bare]:g}")
        if bare in _SCALES:
            numbers.add(bare)
        capitalized = words[position][0][0].isupper()
        if bare in _WEEKDAYS or bare in _RELATIVE_DAYS:
            times.add(bare)
        elif bare in _MONTHS and (bare != "may" or capitalized):
            times.add(bare)  # "may" is a month only when capitalized
        elif bare.rstrip(".") in _MONTH_ABBR and capitalized:
            times.add(_MONTH_ABBR[bare.rstrip(".")])
    names: set[str] = set()
    if not _is_title_case(words):
        for word, start in words:
            key = word.lower().replace("’", "'")
            if (word[0].isupper() and len(word) > 1
                    and key not in _FUNCTION_WORDS and key not in _NUMBER_WORDS
                    and key not in _MONTHS and key not in _WEEKDAYS
                    and not (_sentence_start(text, start) and key.endswith(_VERB_ENDINGS))):
                names.add(word.lower().replace("’", "'").removesuffix("'s"))
    question = text.strip().endswith("?")
    single = _sentences(text) == 1
    return TextFacts(
        numbers=frozenset(numbers), times=frozenset(times), negations=negations,
        colors=frozenset("gray" if w == "grey" else w for w in lower if w in _COLORS),
        stems=frozenset(_stem(w.replace("'", "")) for w in lower),
        names=frozenset(names),
        words=frozenset(w.removesuffix("'s") for w in lower) | frozenset(lower),
        question=question, single_sentence=single,
    )


def _opposite_table() -> dict[str, set[str]]:
    table: dict[str, set[str]] = {}
    for a, b in _OPPOSITES:
        table.setdefault(a, set()).add(b)
        table.setdefault(b, set()).add(a)
    return table


_OPPOSITE = _opposite_table()


def _antonyms(left: frozenset[str], right: frozenset[str]) -> tuple[list[str], list[str]]:
    """Words only in ``left`` whose opposite is only in ``right`` (and the opposites)."""
    only_left, only_right = left - right, right - left
    seen_left: list[str] = []
    seen_right: list[str] = []
    for word in sorted(only_left):
        for other in sorted(_OPPOSITE.get(word, ())):
            if other in only_right:
                seen_left.append(word)
                seen_right.append(other)
        for prefix in _NEG_PREFIXES:
            # like / dislike, able / unable: a negating prefix on one side only
            if len(word) >= 3 and prefix + word in only_right:
                seen_left.append(word)
                seen_right.append(prefix + word)
            if word.startswith(prefix) and len(word) - len(prefix) >= 3 and \
                    word[len(prefix):] in only_right:
                seen_left.append(word)
                seen_right.append(word[len(prefix):])
    return seen_left, seen_right


def find_conflicts(existing: str, incoming: str) -> tuple[Conflict, ...]:
    """Details on which ``incoming`` disagrees with ``existing``; empty when none were found.

    Only meaningful for texts already judged near-duplicates (the pipeline asks only then).
    """
    a, b = extract_facts(existing), extract_facts(incoming)
    conflicts: list[Conflict] = []
    if a.numbers != b.numbers and a.numbers and b.numbers:
        conflicts.append(_conflict("number", a.numbers - b.numbers, b.numbers - a.numbers))
    if a.times != b.times and a.times and b.times:
        conflicts.append(_conflict("time", a.times - b.times, b.times - a.times))
    if a.negations != b.negations:
        conflicts.append(Conflict("negation", (str(a.negations),), (str(b.negations),)))
    left, right = _antonyms(a.stems | a.words, b.stems | b.words)
    if left:
        conflicts.append(Conflict("antonym", tuple(left), tuple(right)))
    if a.colors and b.colors and a.colors != b.colors:
        conflicts.append(_conflict("color", a.colors - b.colors, b.colors - a.colors))
    names_a = _unmatched_names(a.names, b)
    names_b = _unmatched_names(b.names, a)
    if names_a and names_b:
        conflicts.append(_conflict("name", names_a, names_b))
    if a.question != b.question and a.single_sentence and b.single_sentence:
        conflicts.append(Conflict("mood", ("question" if a.question else "statement",),
                                  ("question" if b.question else "statement",)))
    return tuple(conflicts)


def _unmatched_names(names: frozenset[str], other: TextFacts) -> set[str]:
    """Names not mentioned by ``other``, allowing inflected forms (Syria / Syrian, China /
    Chinese: a shared stem of at least four letters) and hyphenated compounds (US-China)."""
    out: set[str] = set()
    for name in names:
        if name in other.words or name in other.names:
            continue  # the same name, whole (A-Team: its part "a" alone is no word of the other)
        parts = [p for p in name.split("-") if p]
        if all(_mentioned(part, other) for part in parts):
            continue
        out.add(name)
    return out


def _mentioned(word: str, other: TextFacts) -> bool:
    if word in other.words or _stem(word) in other.stems:
        return True
    if len(word) < 3:
        return False
    # Syria / Syrian (a shared stem of four letters), Mel / Melanie (a short form)
    return any((len(w) >= 4 and len(word) >= 4 and w[:4] == word[:4])
               or (len(w) >= 3 and (w.startswith(word) or word.startswith(w)))
               for w in other.words)


def _conflict(kind: str, left: Iterable[str], right: Iterable[str]) -> Conflict:
    return Conflict(kind, tuple(sorted(left)), tuple(sorted(right)))
