"""The monthly rollup: the daily rows summed per calendar month, kept in step by every import,
replacement and re-attribution, and read by long ranges for their whole months."""

from collections import defaultdict
from datetime import date
from decimal import Decimal

import pytest
from django.db.models import Q, Sum

from apps.billing.models import DailyCost, MonthlyCost
from apps.billing.services import attribution_refresh
from apps.projects.models import AllocationRule
from apps.spend.filters import Period
from apps.spend.selectors import rollup_rows
from costsite.months import RollupPlan, rollup_plan

from .conftest import focus_line, run_import, write_focus

pytestmark = pytest.mark.django_db(databases=["default", "progress"])


def line(day: str, cost: str, **values) -> dict:
    return focus_line(
        ChargePeriodStart=f"{day}T10:00:00Z",
        ChargePeriodEnd=f"{day}T11:00:00Z",
        EffectiveCost=cost,
        BilledCost=cost,
        **values,
    )


FEBRUARY = {
    "BillingPeriodStart": "2025-02-01T00:00:00Z",
    "BillingPeriodEnd": "2025-03-01T00:00:00Z",
}


def by_month_and_project(model, field: str) -> dict:
    totals: dict = defaultdict(Decimal)
    for row in model.objects.values(field, "project__slug", "effective_cost"):
        month = row[field].replace(day=1)
        totals[(month, row["project__slug"])] += row["effective_cost"]
    return dict(totals)


def monthly_totals() -> dict:
    return by_month_and_project(MonthlyCost, "month")


def daily_totals_by_month() -> dict:
    return by_month_and_project(DailyCost, "day")


@pytest.fixture
def two_months(acme, tmp_path):
    january = write_focus(
        tmp_path / "january.csv",
        [
            line("2025-01-02", "10.000000000000001", Tags='{"ml-project": "vision"}'),
            line("2025-01-31", "2.50", Tags='{"ml-project": "vision"}'),
            line("2025-01-15", "4.25", Tags='{"ml-project": "nlp"}'),
            line("2025-01-16", "0.75", ResourceId="vol-stray"),
        ],
    )
    february = write_focus(
        tmp_path / "february.csv",
        [
            line("2025-02-01", "7.00", Tags='{"ml-project": "vision"}', **FEBRUARY),
            line("2025-02-28", "1.00", ResourceId="vol-stray", **FEBRUARY),
        ],
    )
    assert run_import(january).status == "succeeded"
    assert run_import(february).status == "succeeded"
    return acme


def test_an_import_writes_each_month_once_per_delivery_with_the_daily_sums(two_months):
    assert monthly_totals() == {
        (date(2025, 1, 1), "vision"): Decimal("12.500000000000001"),
        (date(2025, 1, 1), "nlp"): Decimal("4.25"),
        (date(2025, 1, 1), None): Decimal("0.75"),
        (date(2025, 2, 1), "vision"): Decimal("7.00"),
        (date(2025, 2, 1), None): Decimal("1.00"),
    }
    assert monthly_totals() == daily_totals_by_month()
    assert MonthlyCost.objects.aggregate(n=Sum("line_items"))["n"] == 6


def test_a_restated_month_replaces_its_monthly_rows(two_months, tmp_path):
    restated = write_focus(
        tmp_path / "january-restated.csv",
        [
            line("2025-01-02", "9.00", Tags='{"ml-project": "vision"}'),
            line("2025-01-16", "0.80", ResourceId="vol-stray"),
        ],
    )
    assert run_import(restated).status == "succeeded"
    assert monthly_totals() == {
        (date(2025, 1, 1), "vision"): Decimal("9.00"),
        (date(2025, 1, 1), None): Decimal("0.80"),
        (date(2025, 2, 1), "vision"): Decimal("7.00"),
        (date(2025, 2, 1), None): Decimal("1.00"),
    }
    assert monthly_totals() == daily_totals_by_month()


def test_re_attribution_moves_the_monthly_rows_with_the_daily(two_months):
    AllocationRule.objects.create(
        name="Strays are search's",
        field=AllocationRule.Field.RESOURCE,
        pattern="vol-*",
        project=two_months.search,
    )
    attribution_refresh()
    assert monthly_totals() == {
        (date(2025, 1, 1), "vision"): Decimal("12.500000000000001"),
        (date(2025, 1, 1), "nlp"): Decimal("4.25"),
        (date(2025, 1, 1), "search"): Decimal("0.75"),
        (date(2025, 2, 1), "vision"): Decimal("7.00"),
        (date(2025, 2, 1), "search"): Decimal("1.00"),
    }
    assert monthly_totals() == daily_totals_by_month()


def by_project(rows: list[dict]) -> dict:
    totals: dict = defaultdict(Decimal)
    for row in rows:
        totals[row["project_id"]] += row["amount"]
    return dict(totals)


def grouped(rows):
    return rows.values("project_id").annotate(amount=Sum("effective_cost")).order_by()


@pytest.mark.parametrize(
    ("start", "end", "cuts"),
    [
        (date(2025, 1, 1), date(2025, 3, 1), ()),  # two whole months
        (date(2025, 1, 16), date(2025, 3, 1), ()),  # a ragged start
        (date(2025, 1, 1), date(2025, 2, 28), ()),  # a ragged end
        (date(2025, 1, 1), date(2025, 3, 1), (date(2025, 1, 31),)),  # a cut inside January
        (None, date(2025, 3, 1), ()),  # all time
        (None, date(2025, 2, 15), ()),
    ],
)
def test_reading_whole_months_monthly_gives_the_daily_figures(two_months, start, end, cuts):
    period = Period(start, end)
    daily = by_project(rollup_rows(Q(), period, grouped, monthly=False))
    assert by_project(rollup_rows(Q(), period, grouped, cuts=cuts)) == daily
    assert sum(daily.values()) == sum(
        row.effective_cost
        for row in DailyCost.objects.filter(day__lt=end, **({"day__gte": start} if start else {}))
    )


def test_the_plan_reads_whole_months_monthly_and_the_ragged_ends_daily():
    # The overview's "last 12 months" on 21 March 2025: eleven whole months and March so far.
    plan = rollup_plan(date(2024, 4, 1), date(2025, 3, 22))
    assert plan.months == tuple(date(2024 + (m < 4), m, 1) for m in [*range(4, 13), 1, 2])
    assert plan.day_ranges == ((date(2025, 3, 1), date(2025, 3, 22)),)
    # Top movers compare it with the year before, which starts mid-month: that month is daily.
    plan = rollup_plan(date(2023, 4, 5), date(2025, 3, 22), cuts=(date(2024, 4, 1),))
    assert plan.day_ranges[0] == (date(2023, 4, 5), date(2023, 5, 1))
    assert plan.months[0] == date(2023, 5, 1) and date(2024, 4, 1) in plan.months
    # A cut inside a month makes it daily.
    assert rollup_plan(date(2025, 1, 1), date(2025, 4, 1), cuts=(date(2025, 2, 15),)) == RollupPlan(
        months=(date(2025, 1, 1), date(2025, 3, 1)),
        day_ranges=((date(2025, 2, 1), date(2025, 3, 1)),),
    )
    # No start: every month before the last, which is daily.
    assert rollup_plan(None, date(2025, 3, 22)) == RollupPlan(
        months_before=date(2025, 3, 1), day_ranges=((date(2025, 3, 1), date(2025, 3, 22)),)
    )
    assert rollup_plan(None, date(2025, 3, 1)) == RollupPlan(months_before=date(2025, 3, 1))
