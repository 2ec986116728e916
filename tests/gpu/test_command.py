"""python manage.py import_gpu_metrics: formats detected, --json, --at, --timezone, failures."""

import io
import json
import os
from datetime import timedelta

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from apps.gpu import services, tasks
from apps.gpu.models import Gpu, GpuHour, MetricImport
from costsite.polling import STALE_AFTER
from tests.celery_worker import _database_url

from .helpers import at, hour_values

SMI = """\
timestamp, uuid, utilization.gpu [%]
2026/07/14 12:00:00.000, GPU-cmd-1, 20 %
2026/07/14 12:30:00.000, GPU-cmd-1, 60 %
2026/07/14 13:00:00.000, GPU-cmd-1, 5 %
"""
SCRAPE = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-cmd-2",Hostname="node-c"} 33\n'
PULL = json.dumps(
    {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {
                    "metric": {
                        "__name__": "DCGM_FI_DEV_GPU_UTIL",
                        "UUID": "GPU-cmd-3",
                        "Hostname": "node-d",
                    },
                    "values": [[1784023200, "70"], [1784023260, "90"]],
                }
            ],
        },
    }
)


def run(*args: str) -> list[dict]:
    out = io.StringIO()
    call_command("import_gpu_metrics", *args, "--json", stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_each_format_is_recognised_and_reported_one_json_object_per_file(organization, write):
    smi = write("gpus.csv", SMI)
    scrape = write("scrape.prom", SCRAPE)
    pull = write("pull.json", PULL)

    records = run(
        str(smi), str(scrape), str(pull), "--host", "box-1", "--at", "2026-07-14T09:00:00Z"
    )

    assert records == [
        {
            "file": str(smi),
            "format": "nvidia-smi",
            "status": "succeeded",
            "samples": 3,
            "gpus": 1,
            "hours": 2,
        },
        {
            "file": str(scrape),
            "format": "dcgm",
            "status": "succeeded",
            "samples": 1,
            "gpus": 1,
            "hours": 1,
        },
        {
            "file": str(pull),
            "format": "prometheus-json",
            "status": "succeeded",
            "samples": 2,
            "gpus": 1,
            "hours": 1,
        },
    ]
    assert Gpu.objects.get(uuid="GPU-cmd-1").host == "box-1"
    assert hour_values("GPU-cmd-2", "2026-07-14 09:00")["util_mean"] == 33.0
    assert hour_values("GPU-cmd-3", "2026-07-14 10:00")["util_mean"] == 80.0
    assert MetricImport.objects.filter(status=MetricImport.Status.SUCCEEDED).count() == 3


def test_a_file_imported_again_is_unchanged(organization, write):
    smi = write("gpus.csv", SMI)
    run(str(smi), "--host", "box-1")

    assert run(str(smi), "--host", "box-1") == [
        {
            "file": str(smi),
            "format": "nvidia-smi",
            "status": "unchanged",
            "samples": 0,
            "gpus": 0,
            "hours": 0,
        }
    ]


def test_nvidia_smi_times_are_in_the_organisations_zone_unless_timezone_says_otherwise(
    organization, write
):
    organization.time_zone = "America/New_York"
    organization.save()
    smi = write("gpus.csv", SMI)

    run(str(smi), "--host", "box-1")
    assert GpuHour.objects.filter(hour=at("2026-07-14 16:00")).exists()  # 12:00 EDT

    GpuHour.objects.all().delete()
    run(str(smi), "--host", "box-1", "--timezone", "Asia/Tokyo")
    assert GpuHour.objects.filter(hour=at("2026-07-14 03:00")).exists()  # 12:00 JST


def test_a_scrape_without_at_was_taken_when_the_file_was_written(organization, write):
    scrape = write("scrape.prom", SCRAPE)
    taken = at("2026-07-14 07:45").timestamp()
    os.utime(scrape, (taken, taken))

    run(str(scrape))

    assert hour_values("GPU-cmd-2", "2026-07-14 07:00")["samples"] == 1


def test_a_failed_file_is_reported_with_its_error_and_the_command_fails(organization, write):
    good = write("gpus.csv", SMI)
    bad = write("bad.csv", SMI.replace("60 %", "sixty %"))
    unknown = write("notes.txt", "hello\n")
    out = io.StringIO()

    with pytest.raises(CommandError) as error:
        call_command(
            "import_gpu_metrics",
            str(good),
            str(bad),
            str(unknown),
            "--host",
            "b",
            "--json",
            stdout=out,
        )

    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [record["status"] for record in records] == ["succeeded", "failed", "failed"]
    assert records[1] == {
        "file": str(bad),
        "format": "nvidia-smi",
        "status": "failed",
        "samples": 0,
        "gpus": 0,
        "hours": 0,
        "error": f"{bad}: line 3, column 'utilization.gpu [%]': 'sixty %' is not a number.",
    }
    assert records[2]["error"] == (
        f"{unknown}: cannot tell the format from its start (not dcgm-exporter text, Prometheus "
        "JSON or an nvidia-smi CSV header); pass --format."
    )
    assert error.value.returncode == 1
    assert str(error.value) == "2 of 3 files failed."


def test_a_forced_format_is_used_as_given(organization, write):
    text = write("metrics.data", SCRAPE)

    records = run(str(text), "--format", "dcgm", "--at", "2026-07-14 09:30")

    assert records[0]["format"] == "dcgm"
    assert hour_values("GPU-cmd-2", "2026-07-14 09:00")["samples"] == 1


def test_bad_options_are_refused_before_anything_is_read(organization, write):
    smi = write("gpus.csv", SMI)

    with pytest.raises(CommandError, match="--timezone: unknown time zone 'Mars/Olympus'"):
        run(str(smi), "--timezone", "Mars/Olympus")
    with pytest.raises(CommandError, match="--at: 'yesterday' is not a time"):
        run(str(smi), "--at", "yesterday")
    assert MetricImport.objects.count() == 0


def test_the_import_task_runs_a_queued_import_once(organization, write):
    path = write("gpus.csv", SMI)
    metric_import = services.metric_import_create(path=str(path), host="box-1")

    assert tasks.metric_import_execute_task.apply(args=[metric_import.pk]).get() == "succeeded"
    metric_import.refresh_from_db()
    finished = metric_import.finished_at
    # Delivered twice (a retried message): claimed already, so not run again.
    assert tasks.metric_import_execute_task.apply(args=[metric_import.pk]).get() == "succeeded"
    metric_import.refresh_from_db()
    assert metric_import.finished_at == finished
    assert metric_import.samples == 3
    assert GpuHour.objects.filter(gpu__uuid="GPU-cmd-1").count() == 2


def test_a_running_import_whose_worker_stopped_beating_is_claimed_again(organization, write):
    """A worker killed mid-import leaves it running; the redelivered task claims it again once
    its heartbeat is older than STALE_AFTER, and runs it to the end."""
    path = write("gpus.csv", SMI)
    metric_import = services.metric_import_create(path=str(path), host="box-1")
    killed_at = timezone.now() - STALE_AFTER - timedelta(seconds=1)
    MetricImport.objects.filter(pk=metric_import.pk).update(
        status=MetricImport.Status.RUNNING, started_at=killed_at, heartbeat_at=killed_at
    )

    assert tasks.metric_import_execute_task.apply(args=[metric_import.pk]).get() == "succeeded"
    metric_import.refresh_from_db()
    assert metric_import.samples == 3
    assert metric_import.heartbeat_at > killed_at
    assert GpuHour.objects.filter(gpu__uuid="GPU-cmd-1").count() == 2


def test_a_running_import_with_a_fresh_heartbeat_is_left_to_its_worker(organization, write):
    path = write("gpus.csv", SMI)
    metric_import = services.metric_import_create(path=str(path), host="box-1")
    beat = timezone.now() - STALE_AFTER + timedelta(seconds=30)
    MetricImport.objects.filter(pk=metric_import.pk).update(
        status=MetricImport.Status.RUNNING, started_at=beat, heartbeat_at=beat
    )

    assert tasks.metric_import_execute_task.apply(args=[metric_import.pk]).get() == "running"
    metric_import.refresh_from_db()
    assert (metric_import.samples, metric_import.finished_at) == (0, None)
    assert GpuHour.objects.count() == 0


@pytest.mark.django_db(transaction=True, databases=["default", "progress"])
def test_a_loading_import_beats_where_another_worker_sees_it(organization, write, monkeypatch):
    """The heartbeat commits at once, while the load's own transaction is still open."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has one writer at a time: the beat goes through the load's connection")
    path = write("gpus.csv", SMI)
    metric_import = services.metric_import_create(path=str(path), host="box-1")
    monkeypatch.setattr(services, "HEARTBEAT_EVERY_SECONDS", 0)
    seen = []
    real_beat = services._MetricImportBeat.__call__

    def beat_and_look(self):
        real_beat(self)
        # From a connection of its own, as a worker claiming stale imports would look.
        with psycopg.connect(_database_url(connection.settings_dict)) as other:
            seen.append(
                other.execute(
                    "SELECT heartbeat_at, status FROM gpu_metricimport WHERE id = %s",
                    [metric_import.pk],
                ).fetchone()
            )

    monkeypatch.setattr(services._MetricImportBeat, "__call__", beat_and_look)
    services.metric_import_execute(metric_import=metric_import)

    metric_import.refresh_from_db()
    assert metric_import.status == "succeeded"
    assert len(seen) >= 1
    heartbeat_at, status = seen[-1]
    assert status == "running"
    assert metric_import.started_at < heartbeat_at < metric_import.finished_at
