"""Each page costs the same number of SQL queries whatever the size of the bill: measured on the
small bill of conftest.py and on one with ten times the projects, fifty times the runs and the
rollup rows of two months of every day."""

import re
from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.billing.loader import monthly_rebuild
from apps.billing.models import DailyCost, DailyResourceCost
from apps.deployments.models import TrafficHour
from apps.experiments.models import Experiment, ExperimentResource
from apps.gpu.models import Gpu, GpuHour
from tests.factories import DeploymentFactory, ModelFactory, ProjectFactory

from .conftest import NOW, SAGEMAKER, at, daily_cost

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true", "HX-Target": "spend"}
# No page may need more than this, whatever the data (the project page is the largest: 30 for
# its spend (its runs and its deployments each summed per owner, then named by id), the data
# version its cached figures are keyed by included, 9 for its findings
# section (cold: its top findings by the period's days, then by rank those the period has no
# day of, when fewer than five have; counted once from the days' wasted alone, the share groups'
# days and the groups the set splits, a tenth when it splits one), 1 for its alerts, 1 for its
# failed runs' share, 1 for its rules without a workload: 3 when it has some, to read its usual
# workload; 1 for its hosted model API spend; for a lead, 1 for the ids of the projects they
# see, read once a request, which the findings figures are filtered by so that a team shares
# them, 1 for whether they lead a team, also read once a request, and 1 for their teams,
# which the page's parts cached as HTML are keyed by with how fresh the bill is, 1 more; and
# 4 around the findings section's reads, which PostgreSQL plans without parallel workers in a
# transaction of their own: here a savepoint, the setting, its reset and the release).
MOST = 50


def grow(bill, team) -> None:
    """Ten more projects of the team, each with 50 runs, 3 deployments and a model, spend on
    every day of February and March, GPU-hours and traffic; and 200 unattributed resources."""
    days = [date(2025, 2, 1) + timedelta(days=n) for n in range(48)]
    rows, resources, gpu_hours = [], [], []
    for p in range(10):
        project = ProjectFactory(team=team, name=f"Bulk {p}", slug=f"bulk-{p}")
        model = ModelFactory(project=project, name=f"bulk-model-{p}")
        runs = Experiment.objects.bulk_create(
            Experiment(
                project=project,
                name=f"bulk-{p}-run-{r}",
                model=model,
                status="failed" if r % 7 == 0 else "succeeded",
                started_at=at("2025-02-01T00:00:00"),
                ended_at=at("2025-03-19T00:00:00"),
            )
            for r in range(50)
        )
        deployments = [DeploymentFactory(project=project, model=model) for _ in range(3)]
        for run in runs[:10]:
            use = ExperimentResource.objects.create(experiment=run, resource_id=f"i-{run.pk}")
            gpu = Gpu.objects.create(uuid=f"GPU-{run.pk}", host=use.resource_id)
            gpu_hours += [
                GpuHour(
                    gpu=gpu,
                    hour=at("2025-03-01T00:00:00") + timedelta(hours=h),
                    samples=60,
                    util_samples=60,
                    util_mean=40,
                )
                for h in range(24)
            ]
        for deployment in deployments:
            TrafficHour.objects.bulk_create(
                TrafficHour(
                    deployment=deployment,
                    hour=at("2025-03-01T00:00:00") + timedelta(hours=h),
                    requests=100,
                    updated_at=NOW,
                )
                for h in range(48)
            )
        for day in days:
            delivered = bill.march if day.month == 3 else bill.february
            for run in runs[day.day % 5 :: 5]:
                rows.append(
                    daily_cost(
                        delivered,
                        day,
                        "1.25",
                        project=project,
                        experiment=run,
                        workload="training",
                        line_items=24,
                    )
                )
            for deployment in deployments:
                rows.append(
                    daily_cost(
                        delivered,
                        day,
                        "3.50",
                        project=project,
                        deployment=deployment,
                        workload="inference",
                        region="us-west-2",
                        service=SAGEMAKER,
                        pricing="Committed",
                        line_items=24,
                    )
                )
    for n in range(200):
        for day in days[::6]:
            resources.append(
                DailyResourceCost(
                    delivery=bill.march if day.month == 3 else bill.february,
                    day=day,
                    resource_id=f"vol-{n:04d}",
                    billing_account_id="111111111111",
                    provider_name="AWS",
                    service_name="Amazon Elastic Compute Cloud",
                    workload="unattributed",
                    cost_kind="storage",
                    billing_currency="USD",
                    effective_cost=Decimal("0.40"),
                    billed_cost=Decimal("0.40"),
                    line_items=24,
                )
            )
    DailyCost.objects.bulk_create(rows)
    DailyResourceCost.objects.bulk_create(resources)
    for delivery in (bill.march, bill.february):
        monthly_rebuild(delivery_id=delivery.pk)
    GpuHour.objects.bulk_create(gpu_hours)


def urls(bill) -> list[str]:
    return [
        reverse("home"),
        reverse("home") + "?preset=12m",
        reverse("project_detail", args=["image-ranking"]),
        reverse("model_detail", args=[bill.ranker.pk]),
        reverse("experiment_detail", args=[bill.resnet.pk]),
        reverse("deployment_detail", args=[bill.ranker_prod.pk]),
        reverse("unattributed"),
    ]


def count(client, url: str, **headers) -> int:
    """The queries of a cold request: the figures cached per data version are dropped first (the
    bulk writes here bump no version), so every figure is computed, as after a change."""
    cache.clear()
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, headers=headers)
    assert response.status_code == 200, url
    return len(queries)


@pytest.mark.parametrize("who", ["lead", "staff"])
def test_every_page_and_partial_costs_the_same_queries_on_a_bill_ten_times_bigger(
    request, bill, team, who
):
    client = request.getfixturevalue(f"{who}_client")
    small = {url: (count(client, url), count(client, url, **HTMX)) for url in urls(bill)}
    grow(bill, team)
    assert DailyCost.objects.count() > 50 * 13
    large = {url: (count(client, url), count(client, url, **HTMX)) for url in urls(bill)}
    assert large == small
    assert max(max(pair) for pair in large.values()) <= MOST, large


def test_the_bigger_bill_really_reaches_the_pages(staff_client, bill, team):
    """Guards the test above: the grown data must be on the pages it measures."""
    grow(bill, team)
    context = staff_client.get(reverse("home")).context
    assert len(context["projects"].items) == 12
    assert len(context["experiment_movers"]) == 5
    assert staff_client.get(reverse("unattributed")).context["page"].paginator.count == 202


def test_the_filter_bar_reads_its_teams_and_projects_without_a_server_side_cursor(
    staff_client, bill, team, other_team, project
):
    """Django reads a model choice field's options through QuerySet.iterator(): on PostgreSQL a
    server-side cursor, three round trips (DECLARE, FETCH, CLOSE) for a few dozen rows. The
    filter bar's teams and projects are read by one plain query each, and all of them listed."""
    with CaptureQueriesContext(connection) as queries:
        page = staff_client.get(reverse("home")).content.decode()
    assert [q["sql"] for q in queries if q["sql"].startswith(("DECLARE", "FETCH", "CLOSE"))] == []
    teams = re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', page)
    assert ("", "All teams") in teams and ("", "All projects") in teams
    for slug, name in [
        (team.slug, team.name),
        (other_team.slug, other_team.name),
        (project.slug, project.name),
        ("translation", "Translation"),
    ]:
        assert (slug, name) in teams
