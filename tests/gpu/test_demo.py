"""The demo's GPU metrics: files every importer accepts, with the stories the demo tells."""

from datetime import timedelta

import pytest

from apps.demo import gpu as demo
from apps.demo.seed import demo_organization_create
from apps.experiments.models import Experiment
from apps.gpu import selectors, services
from apps.gpu.models import GpuHour, MetricImport
from tests.factories import (
    DeploymentFactory,
    DeploymentResourceFactory,
    ExperimentFactory,
    ExperimentResourceFactory,
)

from .helpers import at

NOW = at("2026-07-14 12:00")


def import_all(paths) -> list[MetricImport]:
    return [
        services.metric_import_execute(metric_import=services.metric_import_create(path=str(path)))
        for path in paths
    ]


@pytest.fixture
def runs(organization, project):
    def experiment(name, kind, hours, gpus=2, ended=None):
        run = ExperimentFactory(
            project=project,
            name=name,
            kind=kind,
            gpu_type="A100-40GB",
            gpu_count=gpus,
            started_at=NOW - timedelta(hours=hours),
            ended_at=ended,
        )
        ExperimentResourceFactory(experiment=run, resource_id=f"i-0{name}")
        return run

    serving = DeploymentFactory(
        project=project, gpu_type="L4", gpu_count=1, started_at=NOW - timedelta(days=30)
    )
    DeploymentResourceFactory(deployment=serving, resource_id="i-0serve")
    return {
        "busy": experiment("busy", Experiment.Kind.TRAINING, 30),
        "starved": experiment("starved", Experiment.Kind.TRAINING, 30),
        "notebook": experiment("notebook", Experiment.Kind.NOTEBOOK, 40, gpus=1),
        "serving": serving,
    }


def test_the_demo_files_import_with_the_importers_defaults_and_tell_their_stories(runs, tmp_path):
    paths = demo.demo_gpu_metrics_write(directory=tmp_path, small=True, now=NOW)

    imports = import_all(paths)

    assert {item.format for item in imports} == {"nvidia-smi", "prometheus-json", "dcgm"}
    assert all(item.status == MetricImport.Status.SUCCEEDED for item in imports), [
        item.error for item in imports
    ]
    busy = selectors.experiment_gpu_usage(experiment=runs["busy"])
    starved = selectors.experiment_gpu_usage(experiment=runs["starved"])
    notebook = selectors.experiment_gpu_usage(experiment=runs["notebook"])
    assert busy.util_mean > 80
    assert 25 < starved.util_mean < 35
    # Used in its first hour and a half, then idle for the rest of the two days shown.
    assert notebook.idle_share > 0.9
    serving = GpuHour.objects.filter(gpu__host="i-0serve")
    afternoon = serving.get(hour=at("2026-07-13 15:00")).util_mean
    night = serving.get(hour=at("2026-07-14 03:00")).util_mean
    assert afternoon - night > 40
    assert selectors.deployment_gpu_usage(deployment=runs["serving"]).gpu_hours == 48.0
    unmapped = [host.host for host in selectors.unmapped_hosts(since=NOW - timedelta(days=3))]
    assert unmapped == list(demo.UNREGISTERED_HOSTS)


def test_writing_the_demo_twice_gives_the_same_files(runs, tmp_path):
    first = demo.demo_gpu_metrics_write(directory=tmp_path / "a", small=True, now=NOW)
    second = demo.demo_gpu_metrics_write(directory=tmp_path / "b", small=True, now=NOW)

    assert [path.name for path in first] == [path.name for path in second]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(first, second, strict=True))


def test_the_seed_step_loads_the_demo_organisations_metrics(organization, tmp_path):
    demo_organization_create(small=True)
    lines = []

    demo.demo_gpu_metrics_load(directory=tmp_path, small=True, log=lines.append)

    assert MetricImport.objects.exclude(status=MetricImport.Status.SUCCEEDED).count() == 0
    assert len(lines) == MetricImport.objects.count() > 0
    assert GpuHour.objects.exists()


def test_the_full_demo_reports_gpus_for_the_whole_span_of_its_runs(runs, tmp_path):
    """GPU metrics cover every run of the demo's 88 days, not only the last two weeks: an old run
    has a GPU-hour for every hour it ran (half-hourly samples then, five-minutely lately)."""
    from apps.demo.seed import DEMO_HISTORY_DAYS

    old = ExperimentFactory(
        project=runs["busy"].project,
        name="old",
        kind=Experiment.Kind.TRAINING,
        gpu_type="H100-80GB",
        gpu_count=8,
        started_at=NOW - timedelta(days=80),
        ended_at=NOW - timedelta(days=80) + timedelta(hours=10),
    )
    ExperimentResourceFactory(experiment=old, resource_id="i-0old")
    paths = demo.demo_gpu_metrics_write(directory=tmp_path, small=False, now=NOW)

    assert all(item.status == MetricImport.Status.SUCCEEDED for item in import_all(paths))
    assert demo.HISTORY_DAYS == DEMO_HISTORY_DAYS
    usage = selectors.experiment_gpu_usage(experiment=old)
    assert usage.gpu_hours == 8 * 10.0
    assert usage.util_mean > 75  # busy; half-hourly samples catch a checkpoint's stall more often
    hours = GpuHour.objects.filter(gpu__host="i-0old")
    assert set(hours.values_list("samples", flat=True)) == {2}
    # Serving for 30 days: every hour of it, five-minute samples in the last two weeks.
    serving = GpuHour.objects.filter(gpu__host="i-0serve")
    assert serving.count() == 30 * 24
    assert serving.get(hour=at("2026-07-13 15:00")).samples == 12
    assert serving.get(hour=at("2026-06-20 15:00")).samples == 2
    # One query_range answer per metric per week of the span.
    pulled = [path.name for path in paths if path.name.startswith("prometheus-")]
    assert len(pulled) == 4 * 5
