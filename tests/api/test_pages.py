"""What the API registers shows on the pages: the loss series on the experiment page, the hourly
traffic on the deployment page."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from apps.deployments.models import TrafficHour
from apps.experiments.models import MetricPoint
from apps.experiments.selectors import experiment_metric_series
from apps.experiments.services import MetricValues, experiment_metrics_record
from tests.factories import DeploymentFactory, ExperimentFactory, ExperimentResourceFactory

pytestmark = pytest.mark.django_db


def _figure(page: str, chart_id: str) -> dict:
    marker = f'<script id="{chart_id}" type="application/json">'
    return json.loads(page.split(marker)[1].split("</script>")[0])


def test_the_experiment_page_draws_the_loss_and_keeps_other_metrics_in_the_legend(
    member_client, project
):
    experiment = ExperimentFactory(project=project)
    experiment_metrics_record(
        experiment=experiment,
        points=[
            MetricValues(step=0, values={"train/loss": 3.5, "val_loss": 3.6, "accuracy": 0.1}),
            MetricValues(step=50, values={"train/loss": 2.25, "accuracy": 0.3}),
        ],
    )
    page = member_client.get(reverse("experiment_detail", args=[experiment.pk])).content.decode()
    traces = {t["name"]: t for t in _figure(page, "metrics")["data"]}
    assert traces["train/loss"]["x"] == [0, 50]
    assert traces["train/loss"]["y"] == [3.5, 2.25]
    assert traces["train/loss"]["visible"] is True
    assert traces["val_loss"]["mode"] == "markers"  # one point: no line to draw
    assert traces["accuracy"]["visible"] == "legendonly"


def test_an_experiment_without_metrics_says_how_to_send_them(member_client, project):
    experiment = ExperimentFactory(project=project)
    page = member_client.get(reverse("experiment_detail", args=[experiment.pk])).content.decode()
    assert "No metrics reported yet: a training script sends its loss by step" in page
    assert 'id="metrics"' not in page


def test_registered_usage_windows_show_beside_each_resource(member_client, project):
    experiment = ExperimentFactory(project=project)
    ExperimentResourceFactory(
        experiment=experiment,
        resource_id="i-spot-1",
        started_at=datetime(2025, 3, 1, 8, tzinfo=UTC),
        ended_at=datetime(2025, 3, 1, 9, 30, tzinfo=UTC),
    )
    page = member_client.get(reverse("experiment_detail", args=[experiment.pk])).content.decode()
    assert "<code>i-spot-1</code>" in page
    assert "1 Mar 2025 08:00" in page and "1 Mar 2025 09:30" in page


def test_a_long_series_is_thinned_in_the_database_and_keeps_its_last_point():
    experiment = ExperimentFactory()
    MetricPoint.objects.bulk_create(
        MetricPoint(experiment=experiment, name="loss", step=step, value=step / 10)
        for step in range(1001)
    )
    MetricPoint.objects.create(experiment=experiment, name="lr", step=0, value=0.1)
    loss, lr = experiment_metric_series(experiment=experiment, max_points=100)
    # 1001 points, a stride of 11: steps 0, 11, ..., 990, and the last one, 1000.
    assert loss.steps == [*range(0, 1001, 11), 1000]
    assert loss.values[-1] == 100.0
    assert (lr.name, lr.steps, lr.values) == ("lr", [0], [0.1])


def test_the_deployment_page_sums_the_last_two_weeks_of_traffic_and_draws_it(
    member_client, project
):
    deployment = DeploymentFactory(project=project, latency_objective_ms=300)
    last = datetime(2025, 3, 20, 23, tzinfo=UTC)
    now = datetime(2025, 3, 21, tzinfo=UTC)
    rows = [
        # Older than two weeks before the latest hour: left out.
        (last - timedelta(days=14), 999, 999, 250.0),
        (last - timedelta(days=14) + timedelta(hours=1), 1000, 100, 280.0),
        (last - timedelta(hours=1), 3000, 900, 320.0),
        (last, 2000, 0, None),
    ]
    TrafficHour.objects.bulk_create(
        TrafficHour(
            deployment=deployment,
            hour=hour,
            requests=requests,
            duplicate_requests=duplicates,
            tokens_in=requests * 10,
            tokens_out=requests * 2,
            latency_p95_ms=p95,
            updated_at=now,
        )
        for hour, requests, duplicates, p95 in rows
    )
    page = member_client.get(reverse("deployment_detail", args=[deployment.pk])).content.decode()
    assert "the last 14 days reported, to 20 Mar 2025 23:00" in page
    assert "<dt>Requests</dt><dd>6,000</dd>" in page
    assert '1,000 <span class="muted">(16.7%: what a cache would answer)</span>' in page
    assert "<dd>60,000 / 12,000</dd>" in page
    assert "<dt>Hours over the p95 objective</dt><dd>1 of 3</dd>" in page
    traces = {t["name"]: t for t in _figure(page, "traffic")["data"]}
    assert traces["requests"]["y"] == [900, 2100, 2000]
    assert traces["repeated requests"]["y"] == [100, 900, 0]
    assert traces["p95 latency (ms)"]["y"] == [280.0, 320.0, None]
    assert traces["p95 objective"]["y"] == [300, 300]


def test_a_deployment_without_traffic_says_how_to_report_it(member_client, project):
    deployment = DeploymentFactory(project=project)
    page = member_client.get(reverse("deployment_detail", args=[deployment.pk])).content.decode()
    assert "No traffic reported yet: the serving stack sends requests, tokens and latency" in page
