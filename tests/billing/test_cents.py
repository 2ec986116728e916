"""Exact to the cent: a line three runs shared, of an amount that does not divide by three, is
split into parts that add up exactly to the line (the last part takes the remainder), and the
line, the rollups, the pages and the CSVs all agree; amounts on half a cent are shown rounded
half up, the CSVs keep every decimal."""

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal

import pytest
import time_machine
from django.urls import reverse

from apps.accounts.models import Team
from apps.billing.models import CostLineItem, DailyCost, DailyResourceCost
from apps.experiments.models import Experiment, ExperimentResource
from apps.projects.models import Project

from .conftest import focus_line, run_import, when, write_focus

pytestmark = pytest.mark.django_db(databases=["default", "progress"])
D = Decimal
NOW = datetime(2025, 1, 20, 12, tzinfo=UTC)


@pytest.fixture
def three_runs(db, staff, tmp_path):
    team = Team.objects.create(name="Research", slug="research")
    project = Project.objects.create(team=team, name="Vision", slug="vision")
    runs = [
        Experiment.objects.create(
            project=project,
            name=name,
            external_id=name,
            kind=Experiment.Kind.TRAINING,
            gpu_count=1,
            started_at=when("2025-01-01T00:00:00"),
            ended_at=when("2025-01-31T00:00:00"),
        )
        for name in ("run-a", "run-b", "run-c")
    ]
    for run in runs:
        ExperimentResource.objects.create(experiment=run, resource_id="i-shared3")
    lines = [
        # One dollar over three runs with one GPU each: 0.333…3, 0.333…3 and 0.333…4.
        focus_line(ResourceId="i-shared3", EffectiveCost="1.00", BilledCost="1.00"),
        # Half a cent twice over, on a project tag: 2.005 reads $2.01 (half up, not half even).
        focus_line(
            Tags='{"project": "vision"}',
            ResourceId="i-half",
            EffectiveCost="2.005",
            BilledCost="2.005",
            ChargePeriodStart="2025-01-03T10:00:00Z",
            ChargePeriodEnd="2025-01-03T11:00:00Z",
        ),
    ]
    run = run_import(write_focus(tmp_path / "bill.csv", lines))
    assert run.status == "succeeded", run.error
    return project, runs


def test_a_three_way_split_adds_up_exactly_to_the_line_the_last_part_taking_the_remainder(
    three_runs,
):
    project, runs = three_runs
    parts = CostLineItem.objects.filter(resource_id="i-shared3")
    third, last = D("0.333333333333333"), D("0.333333333333334")
    assert {p.experiment_id for p in parts} == {run.pk for run in runs}
    # Two parts of a third rounded to the stored 15 decimals, the last takes the remainder.
    assert sorted((p.effective_cost, p.billed_cost) for p in parts) == [
        (third, third),
        (third, third),
        (last, last),
    ]
    assert sum(p.effective_cost for p in parts) == D("1.00")
    # The rollups: per run the same parts, and the project's day adds up to the line exactly.
    by_run = dict(
        DailyCost.objects.filter(experiment__in=runs).values_list("experiment_id", "effective_cost")
    )
    assert by_run == {p.experiment_id: p.effective_cost for p in parts}
    shared = DailyResourceCost.objects.filter(resource_id="i-shared3")
    assert sum(row.effective_cost for row in shared) == D("1.00")
    assert sum(by_run.values()) == D("1.00")


def test_the_pages_and_csvs_agree_with_the_split_and_round_half_up(three_runs, staff_client):
    project, runs = three_runs
    with time_machine.travel(NOW, tick=False):
        page = staff_client.get(reverse("project_detail", args=[project.slug]), {"preset": "mtd"})
        export = staff_client.get(
            reverse("project_spend_export", args=[project.slug]),
            {"preset": "mtd", "table": "experiments"},
        )
        run_page = staff_client.get(
            reverse("experiment_detail", args=[runs[2].pk]), {"preset": "mtd"}
        )
    costs = {row.name: row.amount for row in page.context["experiment_costs"].rows}
    parts = {
        p.experiment.name: p.effective_cost
        for p in CostLineItem.objects.filter(resource_id="i-shared3")
    }
    assert costs == parts and sum(costs.values()) == D("1.00")
    # 1.00 split plus 2.005 tagged: 3.005, shown $3.01 (half up); the parts show $0.33 each.
    assert page.context["series"].total == D("3.005")
    html = page.content.decode()
    assert '<p class="figure" id="period-total">$3.01</p>' in html  # half even says $3.00
    # Three runs cost $1.00 in all, $0.33 per run (each part shown on its own, rounded).
    assert "3 runs cost $1.00, $0.33 per run" in html
    assert "$0.33" in run_page.content.decode()
    # The CSV keeps every decimal: the three parts add up to the line exactly.
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    spend = {row["experiment"]: D(row["spend"]) for row in rows}
    assert spend == costs
    assert sum(spend.values()) == D("1.000000000000000")


def test_a_forecast_on_half_a_cent_is_rounded_half_up(three_runs):
    from apps.spend.series import run_rate_forecast

    # Run rates that land on half a cent: 0.25 * 31 / 2 = 3.875 and 0.0025 * 28 / 14 = 0.005.
    assert run_rate_forecast(month_to_date=D("0.25"), elapsed_days=2, month_days=31) == D("3.88")
    assert run_rate_forecast(month_to_date=D("0.0025"), elapsed_days=14, month_days=28) == D(
        "0.01"
    )  # 0.005: half up, where half even says 0.00
