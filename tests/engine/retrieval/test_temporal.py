"""Calendar dates named in queries (the ``date`` component's spans)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from engine.retrieval.temporal import DateSpan, date_match, query_spans

DAY = 86_400_000.0


def _ms(year: int, month: int, day: int) -> float:
    return datetime(year, month, day, tzinfo=UTC).timestamp() * 1000.0


@pytest.mark.parametrize(("text", "start", "end"), [
    ("What did Maria do on 13 October 2023?", (2023, 10, 13), (2023, 10, 14)),
    ("as mentioned on 8th December, 2023", (2023, 12, 8), (2023, 12, 9)),
    ("on the 3rd of Feb 2022", (2022, 2, 3), (2022, 2, 4)),
    ("What painting did Melanie show on October 13, 2023?", (2023, 10, 13), (2023, 10, 14)),
    ("the forest picture shared on December 1,2023", (2023, 12, 1), (2023, 12, 2)),
    ("logged at 2024-02-29 by the agent", (2024, 2, 29), (2024, 3, 1)),
    ("What did Mel paint in July 2023?", (2023, 7, 1), (2023, 8, 1)),
    ("a class she started in December 2023", (2023, 12, 1), (2024, 1, 1)),
])
def test_a_named_day_or_month_becomes_its_utc_span(text: str, start: tuple[int, int, int],
                                                   end: tuple[int, int, int]) -> None:
    assert query_spans(text) == (DateSpan(_ms(*start), _ms(*end)),)


def test_several_dates_come_in_order_and_a_days_month_is_not_counted_again() -> None:
    spans = query_spans("between 11 August 2023 and September 2023, not 31 February 2023")
    assert spans == (DateSpan(_ms(2023, 8, 11), _ms(2023, 8, 12)),
                     DateSpan(_ms(2023, 9, 1), _ms(2023, 10, 1)))


@pytest.mark.parametrize("text", ["What did Caroline do yesterday?", "in 2023", "13 October",
                                  "room 12 May", "order 20231013", ""])
def test_relative_partial_or_bare_dates_name_no_span(text: str) -> None:
    assert query_spans(text) == ()


def test_date_match_keeps_rows_within_the_tolerance() -> None:
    span = DateSpan(_ms(2023, 5, 8), _ms(2023, 5, 9))
    created = np.asarray([_ms(2023, 5, 8) + 3_600_000.0, _ms(2023, 5, 9) + 3_600_000.0,
                          _ms(2023, 5, 7) - 1.0, _ms(2023, 5, 10) + 1.0])
    assert date_match(created, (span,), 0.0).tolist() == [True, False, False, False]
    assert date_match(created, (span,), DAY).tolist() == [True, True, False, False]
    assert date_match(created, (), DAY).tolist() == [False] * 4
