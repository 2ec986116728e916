"""MLflow runs become experiments: against a real tracking server on loopback, with runs made by
MLflow's own client (tests/trackers/conftest.py)."""

import socket
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse

from apps.accounts.models import Organization, Team
from apps.accounts.services import api_token_create
from apps.experiments.models import Experiment, MetricPoint
from apps.gpu.models import HostMapping
from apps.projects.models import Project
from apps.trackers.mlflow import TrackerError
from apps.trackers.models import TrackedRun, TrackerSource
from apps.trackers.selectors import run_cost
from apps.trackers.services import tracker_source_create, tracker_source_poll
from tests.billing.conftest import focus_line, run_import, write_focus
from tests.factories import StaffFactory

pytestmark = pytest.mark.django_db


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens once the socket is closed


@pytest.fixture
def team(db):
    Organization.get()
    return Team.objects.create(name="Machine learning", slug="ml")


def project(team, slug: str) -> Project:
    return Project.objects.create(team=team, name=slug.title(), slug=slug)


def experiments_of(project: Project) -> dict[str, Experiment]:
    return {e.name: e for e in Experiment.objects.filter(project=project)}


def test_runs_made_with_mlflows_client_become_experiments_with_status_tags_and_loss(mlflow, team):
    vision = project(team, "vision-a")
    HostMapping.objects.create(host="gpu-node-7", resource_id="i-0vision7")
    day = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)
    finished, failed, killed, running, stray = mlflow.ops(
        {
            "op": "create_run",
            "experiment": "misc-a",
            "name": "resnet-a",
            "tags": {"project": "vision-a", "host": "gpu-node-7", "gpu_count": "4", "team": "cv"},
            "params": {"lr": "0.1", "epochs": "3"},
            "loss": [[0, 2.5], [1, 1.25], [2, 0.75]],
            "status": "FINISHED",
            "start_time": ms(day),
            "end_time": ms(day + timedelta(hours=1)),
        },
        {
            "op": "create_run",
            "experiment": "Vision-A",  # the experiment's name names the project
            "name": "resnet-b",
            "tags": {"instance_id": "i-0solo"},
            "status": "FAILED",
            "start_time": ms(day),
            "end_time": ms(day + timedelta(minutes=10)),
        },
        {
            "op": "create_run",
            "experiment": "Vision-A",
            "name": "resnet-c",
            "status": "KILLED",
            "start_time": ms(day),
            "end_time": ms(day + timedelta(minutes=5)),
        },
        {"op": "create_run", "experiment": "Vision-A", "name": "resnet-d", "start_time": ms(day)},
        {"op": "create_run", "experiment": "nobody-a", "name": "stray", "start_time": ms(day)},
    )
    source = tracker_source_create(name="mlflow", url=mlflow.url)

    outcome = tracker_source_poll(source=source)

    runs = experiments_of(vision)
    assert sorted(runs) == ["resnet-a", "resnet-b", "resnet-c", "resnet-d"]
    assert {name: run.status for name, run in runs.items()} == {
        "resnet-a": Experiment.Status.SUCCEEDED,
        "resnet-b": Experiment.Status.FAILED,
        "resnet-c": Experiment.Status.STOPPED,
        "resnet-d": Experiment.Status.RUNNING,
    }
    a = runs["resnet-a"]
    assert (a.started_at, a.ended_at) == (day, day + timedelta(hours=1))
    assert runs["resnet-d"].ended_at is None
    assert a.external_id == f"mlflow-{finished}"
    assert a.tags == {
        "project": "vision-a",
        "host": "gpu-node-7",
        "gpu_count": "4",
        "team": "cv",
        "param.epochs": "3",
        "param.lr": "0.1",
    }
    assert (a.gpu_count, a.gpu_type) == (4, "GPU")
    assert list(a.resources.values_list("resource_id", flat=True)) == ["i-0vision7"]
    assert list(runs["resnet-b"].resources.values_list("resource_id", flat=True)) == ["i-0solo"]
    assert list(MetricPoint.objects.filter(experiment=a).values_list("name", "step", "value")) == [
        ("loss", 0, 2.5),
        ("loss", 1, 1.25),
        ("loss", 2, 0.75),
    ]
    assert not Experiment.objects.filter(name="stray").exists()
    assert TrackedRun.objects.get(run_id=failed).experiment == runs["resnet-b"]
    assert TrackedRun.objects.get(run_id=killed).is_finished is True
    assert TrackedRun.objects.get(run_id=running).is_finished is False
    assert not TrackedRun.objects.filter(run_id=stray).exists()
    assert outcome.tally.created == 4
    source.refresh_from_db()
    assert source.health == TrackerSource.Health.HEALTHY
    assert source.last_unassigned >= 1  # the stray run (and other tests' runs on the server)


def test_repolling_adds_nothing_twice_and_a_run_that_changes_status_is_updated(mlflow, team):
    vision = project(team, "vision-b")
    long_ago = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)
    done, open_run = mlflow.ops(
        {
            "op": "create_run",
            "experiment": "vision-b",
            "name": "done",
            "loss": [[0, 1.0]],
            "status": "FINISHED",
            "start_time": ms(long_ago),
            "end_time": ms(long_ago + timedelta(minutes=30)),
        },
        {
            "op": "create_run",
            "experiment": "vision-b",
            "name": "open",
            "loss": [[0, 3.0], [1, 2.0]],
            "start_time": ms(long_ago),
        },
    )
    source = tracker_source_create(name="mlflow", url=mlflow.url)
    tracker_source_poll(source=source)

    again = tracker_source_poll(source=source)

    # Started before the last poll and finished then: not read again. The open run is.
    assert (again.tally.created, again.tally.updated, again.tally.unchanged) == (0, 0, 1)
    assert Experiment.objects.filter(project=vision).count() == 2
    assert MetricPoint.objects.filter(experiment__project=vision).count() == 3

    ended = long_ago + timedelta(hours=2)
    mlflow.ops(
        {"op": "log_loss", "run_id": open_run, "loss": [[2, 1.5]]},
        {"op": "terminate", "run_id": open_run, "status": "FAILED", "end_time": ms(ended)},
    )
    third = tracker_source_poll(source=source)

    assert (third.tally.created, third.tally.updated) == (0, 1)
    run = Experiment.objects.get(project=vision, name="open")
    assert (run.status, run.ended_at) == (Experiment.Status.FAILED, ended)
    assert list(run.metric_points.values_list("step", "value")) == [(0, 3.0), (1, 2.0), (2, 1.5)]
    assert TrackedRun.objects.get(run_id=open_run).is_finished is True
    # Finished now: the next poll reads neither run.
    assert tracker_source_poll(source=source).tally.runs == 0
    assert Experiment.objects.filter(project=vision).count() == 2
    assert TrackedRun.objects.filter(run_id__in=[done, open_run]).count() == 2


def test_a_full_re_read_reads_every_run_again_and_changes_nothing(mlflow, team):
    vision = project(team, "vision-f")
    long_ago = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=5)
    mlflow.ops(
        {
            "op": "create_run",
            "experiment": "vision-f",
            "name": "done",
            "status": "FINISHED",
            "start_time": ms(long_ago),
            "end_time": ms(long_ago + timedelta(minutes=1)),
        }
    )
    source = tracker_source_create(name="mlflow", url=mlflow.url)
    tracker_source_poll(source=source)
    assert tracker_source_poll(source=source).tally.runs == 0

    full = tracker_source_poll(source=source, full=True)

    assert full.tally.unchanged >= 1 and full.tally.created == 0
    assert Experiment.objects.filter(project=vision).count() == 1


def test_a_server_that_is_down_marks_the_source_unhealthy_and_loses_nothing(mlflow, team):
    vision = project(team, "vision-c")
    source = tracker_source_create(name="mlflow", url=mlflow.url)
    tracker_source_poll(source=source)
    source.refresh_from_db()
    first_poll = source.polled_from
    # A run that starts while the server cannot be reached from costsite.
    (run_id,) = mlflow.ops({"op": "create_run", "experiment": "vision-c", "name": "during"})
    source.url = closed_port_url()
    source.save()

    with pytest.raises(TrackerError) as raised:
        tracker_source_poll(source=source)

    source.refresh_from_db()
    assert "cannot be reached" in str(raised.value)
    assert source.health == TrackerSource.Health.UNHEALTHY
    assert source.consecutive_failures == 1
    assert source.last_error == str(raised.value)
    assert source.polled_from == first_poll  # the next poll starts where the last good one did
    assert not Experiment.objects.filter(project=vision).exists()

    source.url = mlflow.url
    source.save()
    tracker_source_poll(source=source)

    source.refresh_from_db()
    assert source.health == TrackerSource.Health.HEALTHY
    assert source.consecutive_failures == 0
    assert list(Experiment.objects.filter(project=vision).values_list("name", flat=True)) == [
        "during"
    ]
    assert TrackedRun.objects.get(run_id=run_id).source == source


def test_a_refused_token_is_the_sources_error(mlflow, team):
    source = tracker_source_create(name="mlflow", url=mlflow.url + "/no-such-prefix")

    with pytest.raises(TrackerError) as raised:
        tracker_source_poll(source=source)

    assert "answered HTTP 404" in str(raised.value)
    source.refresh_from_db()
    assert source.health == TrackerSource.Health.UNHEALTHY


def test_a_runs_cost_is_its_share_of_its_resources_spend_and_is_written_back(
    mlflow, team, tmp_path
):
    vision = project(team, "vision-d")
    start = datetime(2025, 1, 2, 10, tzinfo=UTC)
    end = datetime(2025, 1, 2, 12, tzinfo=UTC)
    big, small = mlflow.ops(
        {
            "op": "create_run",
            "experiment": "vision-d",
            "name": "big",
            "tags": {"instance_id": "i-0shared", "cluster_id": "i-0solo", "gpu_count": "6"},
            "status": "FINISHED",
            "start_time": ms(start),
            "end_time": ms(end),
        },
        {
            "op": "create_run",
            "experiment": "vision-d",
            "name": "small",
            "tags": {"instance_id": "i-0shared", "gpu_count": "2"},
            "status": "FINISHED",
            "start_time": ms(start),
            "end_time": ms(end),
        },
    )
    source = tracker_source_create(
        name="mlflow", url=mlflow.url, allow_writes=True, site_url="https://costsite.example.com"
    )
    tracker_source_poll(source=source)
    # The bill: an hour of the box both runs shared (split 6:2 by GPUs), an hour of the big run's
    # own box, and an hour of the shared box the next day, when neither ran.
    run_import(
        write_focus(
            tmp_path / "bill.csv",
            [
                focus_line(ResourceId="i-0shared", BilledCost="8.00", EffectiveCost="8.00"),
                focus_line(ResourceId="i-0solo", BilledCost="3.30", EffectiveCost="3.30"),
                focus_line(
                    ResourceId="i-0shared",
                    ChargePeriodStart="2025-01-03T10:00:00Z",
                    ChargePeriodEnd="2025-01-03T11:00:00Z",
                    BilledCost="5.00",
                    EffectiveCost="5.00",
                ),
            ],
        )
    )
    runs = experiments_of(vision)
    assert run_cost(experiment=runs["big"], currency="USD") == Decimal("6.00") + Decimal("3.30")
    assert run_cost(experiment=runs["small"], currency="USD") == Decimal("2.00")
    # The API's spend of the run says the same.
    token = api_token_create(user=StaffFactory(), name="t").secret
    answer = Client().get(
        f"/api/v1/projects/vision-d/experiments/{runs['big'].external_id}/spend",
        {"start": "2025-01-01", "end": "2025-02-01"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert answer.status_code == 200, answer.content
    assert [(t["currency"], Decimal(t["effective_cost"])) for t in answer.json()["totals"]] == [
        ("USD", Decimal("9.30"))
    ]

    outcome = tracker_source_poll(source=source)

    assert outcome.costs_written == 2
    big_tags = mlflow.tags(big)
    assert big_tags["costsite.cost"] == "9.30"
    assert big_tags["costsite.currency"] == "USD"
    assert big_tags["costsite.url"] == "https://costsite.example.com" + reverse(
        "experiment_detail", args=[runs["big"].pk]
    )
    assert mlflow.tags(small)["costsite.cost"] == "2.00"
    # Written once: the same cost is not written again.
    assert tracker_source_poll(source=source).costs_written == 0


def test_a_source_that_does_not_allow_writes_leaves_the_runs_tags_alone(mlflow, team, tmp_path):
    project(team, "vision-e")
    start = datetime(2025, 1, 2, 10, tzinfo=UTC)
    (run_id,) = mlflow.ops(
        {
            "op": "create_run",
            "experiment": "vision-e",
            "name": "quiet",
            "tags": {"instance_id": "i-0quiet"},
            "status": "FINISHED",
            "start_time": ms(start),
            "end_time": ms(start + timedelta(hours=2)),
        }
    )
    source = tracker_source_create(name="mlflow", url=mlflow.url)
    tracker_source_poll(source=source)
    run_import(write_focus(tmp_path / "bill.csv", [focus_line(ResourceId="i-0quiet")]))

    assert tracker_source_poll(source=source).costs_written == 0
    assert "costsite.cost" not in mlflow.tags(run_id)
