"""What a recompute's refresh reads of a finding's whole life (services._life_figures): the hours
of the period it recomputed and of the last 30 days, and for the other days their rollup
(FindingDayHours, FindingDayOwner), which gives exactly what the hours themselves give."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from apps.insights.days import day_rollup_rebuild
from apps.insights.models import Finding, FindingDayHours, FindingDayOwner, FindingHour, Kind
from apps.insights.services import _life_figures

pytestmark = pytest.mark.django_db

FIRST = date(2025, 1, 30)


def at(day: int, hour: int) -> datetime:
    return datetime.combine(FIRST + timedelta(days=day), datetime.min.time(), UTC).replace(
        hour=hour
    )


def rows(finding: Finding, *hours: tuple) -> None:
    """hours: (day, hour, line key, currency, wasted, spend, measured, project id)."""
    FindingHour.objects.bulk_create(
        FindingHour(
            finding=finding,
            hour=at(day, hour),
            line_key=line_key,
            currency=currency,
            wasted=Decimal(wasted),
            spend=Decimal(spend),
            measured=measured,
            project_id=project,
        )
        for day, hour, line_key, currency, wasted, spend, measured, project in hours
    )


@pytest.fixture
def lives():
    """Two findings over 30 January to 3 March 2025. The storage one: project 7's 10.00 a day
    before February, project 8's 1.00 a day in it (an hour of two line keys: counted once), an
    unmeasured hour, EUR on the last day. The failed run: nothing wasted but one hour."""
    storage = Finding.objects.create(
        kind=Kind.STORAGE_OF_FINISHED_RUNS, subject_key="run:1", reason="x"
    )
    failed = Finding.objects.create(kind=Kind.FAILED_RUN, subject_key="run:2", reason="x")
    rows(
        storage,
        (0, 5, "bucket-a", "USD", "10", "10", True, 7),
        (1, 5, "bucket-a", "USD", "10", "10", True, 7),
        (1, 6, "bucket-a", "USD", "0", "0.5", False, 7),
        (2, 5, "bucket-a", "USD", "0.5", "0.5", True, 8),
        (2, 5, "bucket-b", "USD", "0.5", "0.5", True, 8),
        (15, 5, "bucket-a", "USD", "1", "1", True, 8),
        (32, 23, "bucket-a", "USD", "1", "1", True, 8),
        (32, 23, "bucket-a", "EUR", "2", "2", True, 8),
    )
    rows(
        failed,
        (0, 1, "i-1", "USD", "0", "3", True, None),
        (20, 1, "i-1", "USD", "4", "4", True, 9),
        (20, 2, "i-1", "USD", "0", "4", True, 9),
    )
    day_rollup_rebuild(start=None, end=None)
    return [storage.pk, failed.pk]


def test_the_rollup_holds_each_days_hours_once(lives):
    storage, failed = lives
    day = FindingDayHours.objects.get(finding_id=storage, day=date(2025, 2, 1), measured=True)
    assert (day.hours, day.spend, day.wasted) == (1, Decimal("1"), Decimal("1"))
    assert (day.first_wasted, day.last_wasted) == (at(2, 5), at(2, 5))
    unmeasured = FindingDayHours.objects.get(finding_id=storage, measured=False)
    assert (unmeasured.day, unmeasured.hours, unmeasured.wasted) == (date(2025, 1, 31), 1, 0)
    assert unmeasured.first_wasted is None
    quiet = FindingDayHours.objects.get(finding_id=failed, day=FIRST)
    assert (quiet.hours, quiet.spend, quiet.first_wasted) == (1, Decimal("3"), None)
    owners = {
        (row.day, row.project_id): row.spend
        for row in FindingDayOwner.objects.filter(finding_id=storage)
    }
    assert owners == {
        (date(2025, 1, 30), 7): Decimal("10"),
        (date(2025, 1, 31), 7): Decimal("10.5"),
        (date(2025, 2, 1), 8): Decimal("1"),
        (date(2025, 2, 14), 8): Decimal("1"),
        (date(2025, 3, 3), 8): Decimal("3"),
    }
    assert FindingDayHours.objects.count() == 9


@pytest.mark.parametrize(
    "start, end, as_of",
    [
        (date(2025, 2, 1), date(2025, 3, 1), at(33, 0)),  # February, data as of 4 March
        (date(2025, 2, 1), date(2025, 3, 1), at(31, 7)),  # the 30 days begin at 07:00
        (date(2025, 2, 14), date(2025, 2, 15), None),
        (None, date(2025, 2, 1), at(33, 0)),
        (date(2025, 2, 1), None, None),
        (date(2026, 1, 1), date(2026, 2, 1), at(33, 0)),  # a month with none of their hours
    ],
)
def test_a_periods_figures_are_the_whole_lives_hours(lives, start, end, as_of):
    hours, owners = _life_figures(ids=lives, start=start, end=end, as_of=as_of)
    whole_hours, whole_owners = _life_figures(ids=lives, start=None, end=None, as_of=as_of)

    assert owners == whole_owners
    assert hours == whole_hours


def test_the_whole_lives_figures(lives):
    storage, failed = lives
    hours, owners = _life_figures(
        ids=lives, start=date(2025, 2, 1), end=date(2025, 3, 1), as_of=at(33, 0)
    )

    usd = hours[storage][(True, "USD")]
    assert (usd["hours"], usd["spend"], usd["wasted_total"]) == (5, Decimal("23"), Decimal("23"))
    assert (usd["first"], usd["last"], usd["wasted_recent"]) == (
        at(0, 5),
        at(32, 23),
        Decimal("2"),  # from 2 February: 14 February and 3 March, 1.00 each
    )
    assert hours[storage][(False, "USD")]["hours"] == 1
    assert hours[storage][(True, "EUR")]["wasted_total"] == Decimal("2")
    assert hours[failed][(True, "USD")]["first"] == at(20, 1)
    # Project 7's 20.50 before February outweighs project 8's 6.00.
    assert owners[storage] == {"project_id": 7, "experiment_id": None, "deployment_id": None}
    assert owners[failed]["project_id"] == 9  # 8.00 against 3.00 unset
