"""DailyProjectCost, the daily rollup at the grain the spend pages group by (day × project ×
workload × cost kind × provider × currency), is DailyCost summed to that grain whatever wrote the
daily rows: an import, a replacement, a re-attribution, the migration's backfill; and the pages
read it exactly where their filter and grouping need no other key."""

import importlib
from datetime import date
from decimal import Decimal

import pytest
from django.db import connection
from django.db.models import F, Q, Sum

from apps.billing.loader import PROJECT_KEYS
from apps.billing.models import DailyCost, DailyProjectCost, Delivery
from apps.billing.services import attribution_refresh
from apps.projects.models import AllocationRule
from apps.spend.rollup import SpendScope, daily_shaped

from .conftest import focus_line, run_import, write_focus

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

GRAIN = [key for key in PROJECT_KEYS if key != "delivery_id"]
SUMS = ["effective_cost", "billed_cost", "list_cost", "consumed_hours", "line_items"]


def rows(model) -> list[tuple]:
    return [
        tuple(row.values())
        for row in model.objects.values("delivery_id", *GRAIN)
        .annotate(**{f"{name}_sum": Sum(name) for name in SUMS})
        .order_by("delivery_id", *GRAIN)
    ]


def assert_it_sums_the_daily_rows() -> None:
    assert rows(DailyProjectCost) == rows(DailyCost)


@pytest.fixture
def two_runs_bill(acme, tmp_path):
    """A training run's machines in two regions and a stray unattributed VM on one day: three
    daily rows (the region is one of their keys), two rows per project."""
    lines = [
        focus_line(ResourceId="i-0a", EffectiveCost="3.00", BilledCost="3.50", Tags=RUN_17),
        focus_line(
            ResourceId="i-0b",
            RegionId="us-west-2",
            EffectiveCost="2.25",
            BilledCost="2.25",
            Tags=RUN_17,
        ),
        focus_line(ResourceId="i-stray", EffectiveCost="1.10", BilledCost="1.10", Tags="{}"),
    ]
    run = run_import(write_focus(tmp_path / "runs.csv", lines))
    assert run.status == "succeeded", run.error
    return run


RUN_17 = '{"run-id": "run-17"}'


def project_rows() -> list[tuple]:
    return list(
        DailyProjectCost.objects.values_list(
            "day", "project__slug", "workload", "effective_cost", "billed_cost", "line_items"
        ).order_by("project__slug", "workload", "effective_cost")
    )


def test_an_import_writes_one_row_per_project_and_workload(two_runs_bill):
    assert DailyCost.objects.count() == 3
    assert project_rows() == [
        (date(2025, 1, 2), "vision", "training", Decimal("5.25"), Decimal("5.75"), 2),
        (date(2025, 1, 2), None, "unattributed", Decimal("1.10"), Decimal("1.10"), 1),
    ]
    assert_it_sums_the_daily_rows()


def test_a_replacement_leaves_only_the_new_deliverys_rows(two_runs_bill, tmp_path):
    run = run_import(write_focus(tmp_path / "again.csv", [focus_line(EffectiveCost="4.00")]))
    assert run.status == "succeeded", run.error
    current = Delivery.objects.get(status="current")
    assert set(DailyProjectCost.objects.values_list("delivery_id", flat=True)) == {current.pk}
    assert [row[3] for row in project_rows()] == [Decimal("4.00")]
    assert_it_sums_the_daily_rows()


def test_a_reattribution_moves_its_rows_with_the_daily_ones(two_runs_bill, acme):
    AllocationRule.objects.create(
        name="Strays are vision's",
        field=AllocationRule.Field.RESOURCE,
        pattern="i-stray",
        project=acme.vision,
    )
    attribution_refresh()
    # The stray VM is vision's now, a project's spend of no run (workload "other"), no
    # longer unattributed; the run's row is as it was.
    assert [(slug, workload, spend) for _, slug, workload, spend, *_ in project_rows()] == [
        ("vision", "other", Decimal("1.10")),
        ("vision", "training", Decimal("5.25")),
    ]
    assert_it_sums_the_daily_rows()


def test_the_migrations_backfill_gives_what_the_import_wrote(two_runs_bill):
    before = rows(DailyProjectCost)
    DailyProjectCost.objects.all().delete()
    migration = importlib.import_module("apps.billing.migrations.0016_daily_project_cost")
    migration.backfill(None, None)
    assert rows(DailyProjectCost) == before


def test_a_write_behind_the_ports_back_moves_the_data_version(two_runs_bill):
    with connection.cursor() as cursor:
        cursor.execute("SELECT last_value FROM spend_rollup_writes")
        before = cursor.fetchone()[0]
        DailyProjectCost.objects.update(effective_cost=F("effective_cost"))
        cursor.execute("SELECT last_value FROM spend_rollup_writes")
        assert cursor.fetchone()[0] > before


def test_pages_read_it_only_where_they_need_no_other_key(acme):
    scope = SpendScope(currency="USD", project_ids=None, unattributed=True, workload="training")
    by_day = daily_shaped(
        scope.q(),
        lambda rows: rows.values("day", "workload").annotate(amount=Sum("effective_cost")),
    )
    assert by_day.model is DailyProjectCost
    by_owner = daily_shaped(
        scope.q(),
        lambda rows: rows.values("project_id", "experiment_id").annotate(a=Sum("effective_cost")),
    )
    assert by_owner.model is DailyCost
    by_service = daily_shaped(
        scope.q() & Q(service_name="Amazon S3"),
        lambda rows: rows.values("day").annotate(a=Sum("effective_cost")),
    )
    assert by_service.model is DailyCost
