"""Unattributed spend's month rollup (MonthlyResourceCost): each month is its days summed after
an import, a replacement, a re-attribution and a project's delete; and a period's ranking and
names read from whole months and ragged days are what its days alone give, whatever its ends."""

from collections import defaultdict
from dataclasses import replace
from datetime import UTC, date, datetime
from decimal import Decimal as D

import pytest
import time_machine
from django.db.models import Sum

from apps.billing.loader import resource_monthly_rebuild
from apps.billing.models import DailyResourceCost, MonthlyResourceCost
from apps.billing.services import attribution_refresh, import_run_create, import_run_execute
from apps.projects.models import AllocationRule
from apps.spend.filters import Period
from apps.spend.unattributed import (
    NAMES,
    _names,
    _ranking,
    unattributed_ranked,
    unattributed_resources,
    unattributed_summary,
)

from .conftest import write_bill

pytestmark = pytest.mark.django_db
NOW = datetime(2025, 4, 20, 12, 0, tzinfo=UTC)
TAGGED = '{"project": "image-ranking"}'


def line(day: str, resource: str, amount: str, **more) -> dict:
    return {
        "ChargePeriodStart": f"{day}T10:00:00Z",
        "ChargePeriodEnd": f"{day}T11:00:00Z",
        "BilledCost": amount,
        "EffectiveCost": amount,
        "ResourceId": resource,
        **more,
    }


# Days either side of month ends, so that most periods have ragged ends with spend on them.
LINES = [
    line("2025-01-31", "i-a", "10.00", ResourceName="box a"),
    line("2025-01-31", "i-b", "3.00"),
    line("2025-02-01", "i-a", "5.00", ResourceName="box a2"),
    line("2025-02-01", "i-c", "7.00", RegionId="eu-west-1"),
    line("2025-02-20", "i-b", "-3.00"),  # a credit: i-b nets to nothing over both days
    line("2025-03-31", "i-c", "2.00"),
    line("2025-03-31", "i-d", "4.00", ProviderName="Other cloud"),
    line("2025-04-01", "i-a", "1.00"),
    line("2025-04-01", "i-e", "6.00", Tags=TAGGED),  # attributed: never listed
    line("2025-04-15", "i-f", "4.00"),  # ties i-d over any period holding both
]


def load(tmp_path, lines: list[dict], name: str = "") -> None:
    """One delivery per month, as a provider delivers them."""
    by_month = defaultdict(list)
    for item in lines:
        by_month[item["ChargePeriodStart"][:7]].append(item)
    for month, items in sorted(by_month.items()):
        year, number = map(int, month.split("-"))
        period = {
            "BillingPeriodStart": f"{month}-01T00:00:00Z",
            "BillingPeriodEnd": f"{year + number // 12}-{number % 12 + 1:02d}-01T00:00:00Z",
        }
        path = write_bill(tmp_path / f"{month}{name}.csv", [{**i, **period} for i in items])
        run = import_run_execute(import_run=import_run_create(paths=[str(path)]))
        assert run.status == "succeeded", run.error


@pytest.fixture
def bill(organization, project, tmp_path):
    with time_machine.travel(NOW, tick=False):
        load(tmp_path, LINES)
        yield


def months_from_days() -> dict:
    summed: dict = defaultdict(D)
    for row in DailyResourceCost.objects.all():
        key = (row.delivery_id, row.day.replace(day=1), row.resource_id, row.project_id)
        summed[key] += row.effective_cost
    return dict(summed)


def months_stored() -> dict:
    return {
        (row.delivery_id, row.month, row.resource_id, row.project_id): row.effective_cost
        for row in MonthlyResourceCost.objects.all()
    }


def test_each_month_is_its_days_summed_with_the_largest_names(bill):
    stored = months_stored()
    assert stored == months_from_days()
    assert len(stored) == 10
    february = MonthlyResourceCost.objects.get(resource_id="i-a", month=date(2025, 2, 1))
    assert (february.effective_cost, february.resource_name) == (D("5.00"), "box a2")
    assert MonthlyResourceCost.objects.get(resource_id="i-e").project.slug == "image-ranking"


def test_a_replacement_a_reattribution_and_a_delete_keep_the_months(bill, project, tmp_path):
    # February again, with i-c's charge raised: the replaced delivery's months go with it.
    load(tmp_path, [LINES[2], LINES[4], line("2025-02-01", "i-c", "70.00")], name="-again")
    assert months_stored() == months_from_days()
    assert MonthlyResourceCost.objects.get(
        resource_id="i-c", month=date(2025, 2, 1)
    ).effective_cost == D("70.00")
    # A rule gives i-c to the project: its months move with its days.
    AllocationRule.objects.create(
        name="c", field=AllocationRule.Field.RESOURCE, pattern="i-c", project=project
    )
    assert attribution_refresh() > 0
    assert months_stored() == months_from_days()
    assert set(
        MonthlyResourceCost.objects.filter(resource_id="i-c").values_list("project", flat=True)
    ) == {project.pk}
    # The project deleted: its resources are unattributed again, in the months as in the days.
    project.delete()
    assert months_stored() == months_from_days()
    assert not MonthlyResourceCost.objects.filter(project__isnull=False).exists()
    # And the migration's backfill, over every delivery, writes the same rows.
    before = months_stored()
    MonthlyResourceCost.objects.all().delete()
    resource_monthly_rebuild(delivery_id=None)
    assert months_stored() == before


PERIODS = [
    Period(None, date(2025, 4, 21)),  # all time
    Period(date(2024, 4, 21), date(2025, 4, 21)),  # the last 12 months
    Period(date(2025, 1, 31), date(2025, 4, 2)),  # ragged: one day either side of two months
    Period(date(2025, 2, 1), date(2025, 4, 1)),  # exactly two months
    Period(date(2025, 2, 2), date(2025, 3, 31)),  # inside, no whole month
    Period(date(2025, 1, 1), date(2025, 2, 1)),  # one whole month, read as days
    Period(date(2025, 3, 22), date(2025, 4, 21)),  # the last 30 days
]


def days_ranking(period: Period, provider: str = "") -> list[dict]:
    return list(unattributed_ranked(period=period, currency="USD", provider=provider, detail=False))


def days_names(period: Period, provider: str = "") -> dict[str, dict]:
    rows = unattributed_ranked(period=period, currency="USD", provider=provider)
    rows = rows.values("resource_id")
    return {
        row.pop("resource_id"): row
        for row in rows.annotate(**NAMES).values("resource_id", *NAMES).order_by()
    }


@pytest.mark.parametrize("period", PERIODS, ids=str)
@pytest.mark.parametrize("provider", ["", "Other cloud"])
def test_a_periods_ranking_and_names_are_its_days(bill, period, provider):
    ranking = _ranking(period=period, currency="USD", provider=provider)
    assert ranking == days_ranking(period, provider)
    ids = [row["resource_id"] for row in ranking]
    if ids:
        names = _names(ids, period=period, currency="USD", provider=provider)
        expected = days_names(period, provider)
        assert names == {key: value for key, value in expected.items() if key in ids}


def test_the_overviews_list_and_the_summary_over_all_time(bill):
    period = PERIODS[0]
    listed = unattributed_resources(period=period, currency="USD", detail=False)
    # i-a 16.00 named by its largest name; i-c 9.00; i-d and i-f tie at 4.00 (by id); i-b nets
    # to nothing and i-e is the project's: neither is listed.
    assert [(row.resource_id, row.resource_name, row.region_id, row.amount) for row in listed] == [
        ("i-a", "box a2", "us-east-1", D("16.00")),
        ("i-c", "", "us-east-1", D("9.00")),
        ("i-d", "", "us-east-1", D("4.00")),
        ("i-f", "", "us-east-1", D("4.00")),
    ]
    # The page's list (days counted, from the days alone) names and sums them alike.
    detailed = unattributed_resources(period=period, currency="USD")
    assert [replace(row, days=None, first_day=None, last_day=None) for row in detailed] == listed
    summary = unattributed_summary(period=period, currency="USD")
    assert (summary.amount, summary.resources, summary.without_resource_id) == (
        D("33.00"),
        4,
        D("0.00"),
    )
    total = DailyResourceCost.objects.filter(project__isnull=True).aggregate(
        s=Sum("effective_cost")
    )
    assert total["s"] == D("33.00")
