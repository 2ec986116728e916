"""The date range and filters every spend page reads from its URL."""

from datetime import date

import pytest
from django.http import QueryDict

from apps.spend.filters import Period, preset_period, spend_filters_from

TODAY = date(2025, 3, 20)


@pytest.mark.parametrize(
    ("preset", "start", "last"),
    [
        ("7d", date(2025, 3, 14), date(2025, 3, 20)),
        ("30d", date(2025, 2, 19), date(2025, 3, 20)),
        ("90d", date(2024, 12, 21), date(2025, 3, 20)),
        ("mtd", date(2025, 3, 1), date(2025, 3, 20)),
        ("last-month", date(2025, 2, 1), date(2025, 2, 28)),
        ("ytd", date(2025, 1, 1), date(2025, 3, 20)),
        ("12m", date(2024, 4, 1), date(2025, 3, 20)),
    ],
)
def test_each_preset_covers_whole_utc_days_up_to_today(preset, start, last):
    period = preset_period(preset, today=TODAY)
    assert (period.start, period.last_day) == (start, last)


def test_the_period_before_has_the_same_length():
    period = preset_period("30d", today=TODAY)
    assert period.previous == Period(date(2025, 1, 20), date(2025, 2, 19))
    assert preset_period("all", today=TODAY).previous is None


def test_ranges_past_92_days_are_drawn_by_month():
    assert preset_period("90d", today=TODAY).bucket() == "day"
    assert preset_period("ytd", today=TODAY).bucket() == "day"  # 79 days
    assert preset_period("12m", today=TODAY).bucket() == "month"
    assert preset_period("all", today=TODAY).bucket(first_day=date(2024, 1, 1)) == "month"


def filters(query: str, **kwargs):
    return spend_filters_from(QueryDict(query), today=TODAY, dimensions=("workload",), **kwargs)


@pytest.mark.django_db
def test_a_custom_range_includes_its_last_day_and_round_trips_through_the_url():
    state = filters("start=2025-01-05&end=2025-01-10&workload=inference")
    assert state.period == Period(date(2025, 1, 5), date(2025, 1, 11))
    assert state.workload == "inference"
    assert state.query_string == "start=2025-01-05&end=2025-01-10&workload=inference"
    # Choosing a preset drops the custom dates and keeps the filter.
    assert state.query(preset="7d") == "workload=inference&preset=7d"
    assert state.query(preset="30d") == "workload=inference"  # the default


@pytest.mark.django_db
def test_dates_sent_back_beside_their_preset_keep_the_preset():
    state = filters("preset=7d&start=2025-03-14&end=2025-03-20&workload=training")
    assert state.period.preset == "7d"
    edited = filters("preset=7d&start=2025-03-01&end=2025-03-20")
    assert (edited.period.preset, edited.period.start) == ("", date(2025, 3, 1))


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("start=2025-03-10", "Give both a start and an end date for a custom range"),
        ("start=2025-03-10&end=2025-03-01", "The start date must be on or before the end date."),
        (
            "start=2022-01-01&end=2025-01-01",
            "Choose a range of at most 731 days (two years); this one has 1097.",
        ),
        ("start=yesterday&end=2025-03-01", "Enter a valid date."),
        ("preset=century", "Choose one of the date ranges offered."),
        ("workload=gpu", "Choose one of the workloads."),
    ],
)
def test_a_bad_range_or_filter_says_why_and_falls_back_to_the_default(query, message):
    state = filters(query)
    errors = [str(e) for errors in state.form.errors.values() for e in errors]
    assert any(message in error for error in errors), errors
    assert state.period == preset_period("30d", today=TODAY)
