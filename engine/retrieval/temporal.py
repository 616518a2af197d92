"""Calendar dates named in a query, and the records created on them (the ``date`` component).

"What did Maria donate in December 2023?", "Which book did Tim recommend on 8th December,
2023?": a query that names a calendar day or month asks about what was noted then, so the
records created in that span (give or take a tolerance for time zones and for notes written a
little after the fact) are more likely to answer it. :func:`query_spans` finds the spans,
:func:`date_match` marks the rows.

Recognized (case-insensitive, English month names or their three-letter abbreviations, a
four-digit year required): ``13 October 2023``, ``13th of Oct, 2023``, ``October 13, 2023``,
``October 13th 2023``, ``October 2023`` and ISO ``2023-10-13``. Dates are UTC, like every
timestamp in the store. Relative expressions (``yesterday``, ``last week``) and bare years are
left alone: the first depend on when the question was asked, the second rarely narrow much.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt

__all__ = ["DateSpan", "date_match", "query_spans"]

_MONTH_NUMBERS = {name.lower(): number for number, name in enumerate(calendar.month_name)
                  if name} | {name.lower(): number
                              for number, name in enumerate(calendar.month_abbr) if name}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTH_NUMBERS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{4})"
_PATTERNS = (
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s*{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s*{_YEAR}\b", re.IGNORECASE),
    re.compile(r"\b(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})\b"),
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),  # a whole month: tried last
)
_MS_PER_DAY = 86_400_000.0


@dataclass(frozen=True, slots=True)
class DateSpan:
    """A calendar day or month, as UTC epoch milliseconds ``[start, end)``."""

    start: float
    end: float


def query_spans(text: str) -> tuple[DateSpan, ...]:
    """The calendar days and months ``text`` names, in order of appearance (none: empty).

    A month inside a day already found (``October`` of ``13 October 2023``) is not counted
    again; impossible dates (``31 February 2023``) are skipped whole.
    """
    found: list[tuple[int, DateSpan]] = []
    taken: list[tuple[int, int]] = []
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(start < stop and end > begin for begin, stop in taken):
                continue
            taken.append((start, end))
            span = _span(match)
            if span is not None:
                found.append((start, span))
    return tuple(span for _, span in sorted(found, key=lambda item: item[0]))


def _span(match: re.Match[str]) -> DateSpan | None:
    parts = match.groupdict()
    month_text = parts["month"].lower()
    month = int(month_text) if month_text.isdigit() else _MONTH_NUMBERS[month_text]
    year = int(parts["year"])
    try:
        if parts.get("day") is None:
            first = datetime(year, month, 1, tzinfo=UTC)
            following = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
        else:
            first = datetime(year, month, int(parts["day"]), tzinfo=UTC)
            following = first + timedelta(days=1)
    except ValueError:  # 31 February, month 13, year 0
        return None
    return DateSpan(first.timestamp() * 1000.0, following.timestamp() * 1000.0)


def date_match(created_at: npt.NDArray[np.float64], spans: tuple[DateSpan, ...],
               tolerance_ms: float) -> npt.NDArray[np.bool_]:
    """By row: created within ``tolerance_ms`` of one of ``spans`` (``[start - tol, end + tol)``).
    """
    hit = np.zeros(len(created_at), dtype=bool)
    inside = np.empty(len(created_at), dtype=bool)
    for span in spans:
        np.greater_equal(created_at, span.start - tolerance_ms, out=inside)
        np.logical_and(inside, created_at < span.end + tolerance_ms, out=inside)
        hit |= inside
    return hit
