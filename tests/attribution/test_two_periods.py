"""A period and the one before read from whole months corrected by days (changes.two_periods_plan)
count every day exactly as reading the days would, and the spend changes equal the days' sums."""

from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.db.models import Case, F, Sum, Value, When
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.billing.loader import monthly_rebuild
from apps.billing.models import DailyCost
from apps.spend.changes import spend_changes, two_periods_plan
from apps.spend.filters import Period, preset_period
from apps.spend.rollup import MONEY, ZERO, SpendScope
from costsite.months import next_month_start
from tests.factories import (
    DeploymentFactory,
    ExperimentFactory,
    ModelFactory,
    ProjectFactory,
)

from .conftest import daily_cost, delivery

D = Decimal


def counts(start: date, cut: date, end: date) -> dict[date, tuple[int, int]]:
    """How many times the plan counts each day to (current, previous)."""
    months, pieces = two_periods_plan(start, cut, end)
    counted: dict[date, list[int]] = {}

    def add(day: date, current: int, previous: int) -> None:
        totals = counted.setdefault(day, [0, 0])
        totals[0] += current
        totals[1] += previous

    for month, side in months.items():
        day = month
        while day < next_month_start(month):
            add(day, side == "current", side == "previous")
            day += timedelta(days=1)
    for piece in pieces:
        day = piece.start
        while day < piece.end:
            add(day, piece.current, piece.previous)
            day += timedelta(days=1)
    return {day: tuple(totals) for day, totals in counted.items() if totals != [0, 0]}


def expected(start: date, cut: date, end: date) -> dict[date, tuple[int, int]]:
    days = {}
    day = start
    while day < end:
        days[day] = (1, 0) if day >= cut else (0, 1)
        day += timedelta(days=1)
    return days


@settings(max_examples=500, deadline=None)
@given(
    st.dates(min_value=date(2023, 1, 1), max_value=date(2026, 12, 31)),
    st.integers(min_value=1, max_value=400),
    st.integers(min_value=1, max_value=400),
)
def test_the_plan_counts_each_day_once_to_its_side(start, before, after):
    cut = start + timedelta(days=before)
    end = cut + timedelta(days=after)

    assert counts(start, cut, end) == expected(start, cut, end)


def test_a_30_day_period_reads_two_months_and_eleven_days():
    # 5 Nov - 4 Dec and 6 Oct - 4 Nov: October and November whole, corrected by 5 + 4 days;
    # December's 4 days as they are.
    months, pieces = two_periods_plan(date(2026, 10, 6), date(2026, 11, 5), date(2026, 12, 5))

    assert months == {date(2026, 10, 1): "previous", date(2026, 11, 1): "current"}
    assert [(p.start.isoformat(), p.end.isoformat(), p.current, p.previous) for p in pieces] == [
        ("2026-10-01", "2026-10-06", 0, -1),  # before the range: taken out
        ("2026-11-01", "2026-11-05", -1, 1),  # before the cut: moved to the period before
        ("2026-12-01", "2026-12-05", 1, 0),
    ]


@pytest.fixture
def year_of_days(organization):
    """Every day from October 2023 to March 2025: two projects, runs with and without a model,
    a deployment, unattributed spend, and a credit every ninth day."""
    vision, language = ProjectFactory(name="Vision"), ProjectFactory(name="Language")
    ranker = ModelFactory(project=vision, name="ranker")
    owners = [
        (vision, ExperimentFactory(project=vision, name="resnet", model=ranker), None),
        (vision, ExperimentFactory(project=vision, name="vit"), None),
        (language, ExperimentFactory(project=language, name="mt"), None),
        (vision, None, DeploymentFactory(project=vision, name="ranker-prod", model=ranker)),
        (language, None, None),
        (None, None, None),
    ]
    bill = delivery(account="acct", month=date(2024, 1, 1), as_of=None)
    rows = []
    day = date(2023, 10, 1)
    while day < date(2025, 3, 20):
        for number, (project, experiment, deployment) in enumerate(owners, start=1):
            amount = D(day.toordinal() % (7 + number)) + D(number) / 100
            if day.toordinal() % 9 == number:
                amount = -amount  # a credit
            rows.append(
                daily_cost(
                    bill,
                    day,
                    amount,
                    project=project,
                    experiment=experiment,
                    deployment=deployment,
                    workload="training",
                )
            )
        day += timedelta(days=1)
    DailyCost.objects.bulk_create(rows)
    monthly_rebuild(delivery_id=bill.pk)
    return owners


def days_summed(key: str, period: Period) -> dict[int, tuple[Decimal, Decimal]]:
    previous = period.previous
    rows = (
        DailyCost.objects.filter(
            day__gte=previous.start, day__lt=period.end, billing_currency="USD"
        )
        .exclude(**{key: None})
        .values(key)
        .annotate(
            current=Sum(
                Case(When(day__gte=period.start, then=F("effective_cost")), default=Value(ZERO)),
                output_field=MONEY,
            ),
            previous=Sum(
                Case(When(day__lt=period.start, then=F("effective_cost")), default=Value(ZERO)),
                output_field=MONEY,
            ),
        )
        .order_by()
    )
    return {row[key]: (row["current"], row["previous"]) for row in rows}


PERIODS = [
    *(preset_period(preset, today=date(2025, 3, 19)) for preset in ("7d", "30d", "90d", "12m")),
    *(preset_period(preset, today=date(2025, 3, 19)) for preset in ("mtd", "last-month", "ytd")),
    Period(date(2024, 11, 3), date(2025, 2, 17)),
    Period(date(2024, 2, 29), date(2024, 3, 1)),
    Period(date(2024, 1, 1), date(2025, 1, 1)),
    Period(date(2024, 6, 28), date(2024, 7, 3)),
    Period(date(2024, 8, 31), date(2024, 10, 30)),
]


@pytest.mark.parametrize("period", PERIODS, ids=lambda period: f"{period.start}..{period.end}")
def test_the_changes_equal_the_days_summed(year_of_days, period):
    changes = spend_changes(
        scope=SpendScope(currency="USD", unattributed=True), period=period, names_for=None
    )

    projects = days_summed("project_id", period)
    assert {c.pk: (c.current, c.previous) for c in changes.projects} == projects
    experiments = days_summed("experiment_id", period)
    deployments = days_summed("deployment_id", period)
    moved = {pk: sums for pk, sums in experiments.items() if sums[0] != sums[1]}
    assert {c.pk: (c.current, c.previous) for c in changes.experiments} == moved
    assert {c.pk: (c.current, c.previous) for c in changes.deployments} == {
        pk: sums for pk, sums in deployments.items() if sums[0] != sums[1]
    }
    resnet, ranker_prod = year_of_days[0][1], year_of_days[3][2]
    ranker = experiments[resnet.pk][0] + deployments[ranker_prod.pk][0]
    assert [(item.name, item.amount) for item in changes.models.items] == [("ranker", ranker)]
