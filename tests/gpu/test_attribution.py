"""Joining GPUs to the bill, and GPU-hours per project, experiment, model and deployment."""

from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse

from apps.deployments.models import DeploymentResource
from apps.experiments.models import ExperimentResource
from apps.gpu import selectors, services
from apps.gpu.models import Gpu
from apps.gpu.resolution import registrations_naming
from apps.projects.models import tail_of
from tests.factories import (
    DeploymentResourceFactory,
    ExperimentFactory,
    ExperimentResourceFactory,
)

from .helpers import at


def test_each_gpu_is_joined_to_its_resource_by_the_first_rule_that_applies(gpu_fleet):
    resolved = {
        gpu.uuid: selectors.gpu_resolutions(gpus=[gpu]).get(gpu.pk) for gpu in Gpu.objects.all()
    }

    assert resolved["GPU-e1"] == selectors.Resolution("i-0aaa", "registered")
    assert resolved["GPU-d1"] == selectors.Resolution("i-0ddd", "label")
    assert resolved["GPU-o1"] == selectors.Resolution("i-0bbb", "mapping")
    assert resolved["GPU-x1"] is None


def test_a_label_beats_a_mapping_and_a_mapping_beats_a_registered_host(gpu_fleet):
    services.host_mapping_set(host="i-0aaa", resource_id="i-0zzz")
    services.host_mapping_set(host="ip-10-0-0-7", resource_id="i-0yyy")

    resolved = selectors.gpu_resolutions()

    assert resolved[Gpu.objects.get(uuid="GPU-e1").pk] == selectors.Resolution("i-0zzz", "mapping")
    assert resolved[Gpu.objects.get(uuid="GPU-d1").pk] == selectors.Resolution("i-0ddd", "label")


def test_an_experiment_counts_the_gpu_hours_of_its_resources_inside_its_window(gpu_fleet):
    usage = selectors.experiment_gpu_usage(experiment=gpu_fleet["train"])

    # Two GPUs at 10:00 and 11:00; 12:00 is after the run ended.
    assert usage.gpu_hours == 4.0
    assert usage.util_mean == 25.0  # (10 + 40) / 2 on each GPU
    assert usage.idle_gpu_hours == 0.0  # 10% is not under the 10% threshold


def test_a_deployment_counts_the_gpu_whose_series_names_its_instance(gpu_fleet):
    usage = selectors.deployment_gpu_usage(deployment=gpu_fleet["serve"])

    assert (usage.gpu_hours, usage.util_mean) == (3.0, 40.0)


def test_a_model_counts_the_runs_that_made_it_and_the_deployments_that_serve_it(gpu_fleet):
    usage = selectors.model_gpu_usage(model=gpu_fleet["model"])

    assert usage.gpu_hours == 4.0 + 3.0
    assert usage.util_mean == pytest.approx((4 * 25.0 + 3 * 40.0) / 7)


def test_a_project_counts_each_gpu_hour_once_however_many_owners_used_it(gpu_fleet, project):
    # A second run registers the same instance for an overlapping window.
    rerun = ExperimentFactory(
        project=project, started_at=at("2026-07-14 11:00"), ended_at=at("2026-07-14 13:00")
    )
    ExperimentResourceFactory(experiment=rerun, resource_id="i-0aaa")

    usage = selectors.project_gpu_usage(project=project)

    # GPU-e1 and GPU-e2 at 10:00, 11:00, 12:00 (the rerun reaches 12:00), and GPU-d1's three hours.
    assert usage.gpu_hours == 6.0 + 3.0
    assert usage.util_mean == 40.0


def test_a_mapped_host_counts_for_the_project_whose_run_registered_the_resource(gpu_fleet):
    usage = selectors.project_gpu_usage(project=gpu_fleet["other_project"])

    assert (usage.gpu_hours, usage.util_mean) == (3.0, 40.0)


def test_a_mig_instance_counts_as_its_share_of_a_gpu(load, project):
    run = ExperimentFactory(project=project, started_at=at("2026-07-14 00:00"), ended_at=None)
    ExperimentResourceFactory(experiment=run, resource_id="mig-host")
    load(
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{UUID="GPU-m",gpu="0",GPU_I_ID="1",GPU_I_PROFILE="3g.40gb",'
        'modelName="NVIDIA H100 80GB HBM3",Hostname="mig-host"} 0.5\n'
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{UUID="GPU-m",gpu="0",GPU_I_ID="2",GPU_I_PROFILE="1g.10gb",'
        'modelName="NVIDIA H100 80GB HBM3",Hostname="mig-host"} 0.05\n',
        "dcgm",
        taken_at=at("2026-07-14 10:00"),
    )

    usage = selectors.experiment_gpu_usage(experiment=run)

    assert usage.gpu_hours == pytest.approx(4 / 7)
    assert usage.util_mean == pytest.approx((3 / 7 * 50 + 1 / 7 * 5) / (4 / 7))
    assert usage.idle_gpu_hours == pytest.approx(1 / 7)


def test_unmapped_hosts_are_listed_with_their_gpu_hours(gpu_fleet):
    hosts = selectors.unmapped_hosts(since=at("2026-07-14 00:00"))

    assert [(host.host, host.gpus, host.gpu_hours) for host in hosts] == [("mystery-box", 1, 3.0)]
    assert hosts[0].last_seen_at == at("2026-07-14 13:00")


def test_an_unmapped_host_counts_its_unlabelled_gpus_and_mig_instances_as_their_gpu(
    gpu_fleet, load
):
    load(
        # A MIG GPU on a host nobody mapped: its instances' hours are its hours.
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{UUID="GPU-m",gpu="0",GPU_I_ID="1",GPU_I_PROFILE="3g.40gb",'
        'modelName="NVIDIA H100 80GB HBM3",Hostname="mig-free"} 0.5\n'
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{UUID="GPU-m",gpu="0",GPU_I_ID="2",GPU_I_PROFILE="1g.10gb",'
        'modelName="NVIDIA H100 80GB HBM3",Hostname="mig-free"} 0.05\n'
        # A labelled GPU on the unmapped host: its label joins it to the bill.
        'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-x2",gpu="1",modelName="NVIDIA L4",'
        'Hostname="mystery-box",instance_id="i-0eee"} 30\n'
        # A host named by the tail of the ARN deployment `serve` registered.
        'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-t1",gpu="0",modelName="NVIDIA L4",Hostname="i-0ddd"} 30\n',
        "dcgm",
        taken_at=at("2026-07-14 10:00"),
    )

    hosts = selectors.unmapped_hosts(since=at("2026-07-14 00:00"))

    assert [(host.host, host.gpus, host.models) for host in hosts] == [
        ("mystery-box", 1, []),
        ("mig-free", 1, ["NVIDIA H100 80GB HBM3"]),
    ]
    assert hosts[0].gpu_hours == 3.0
    assert hosts[1].gpu_hours == pytest.approx(4 / 7)


def test_a_few_gpus_resolve_by_a_registered_id_or_its_tail_and_nothing_that_merely_holds_it(
    gpu_fleet, load
):
    ExperimentResourceFactory(experiment=gpu_fleet["train"], resource_id="instance/i-0fff/")
    load(
        "".join(
            f'DCGM_FI_DEV_GPU_UTIL{{UUID="GPU-{host}",gpu="0",Hostname="{host}"}} 30\n'
            for host in ("i-0ddd", "i-0aaa", "i-0fff", "i-0ddd-2", "xi-0aaa", "i.0aaa")
        ),
        "dcgm",
        taken_at=at("2026-07-14 10:00"),
    )
    gpus = list(Gpu.objects.filter(uuid__in=["GPU-i-0ddd", "GPU-i-0aaa", "GPU-i-0fff"]))
    gpus += list(Gpu.objects.filter(uuid__in=["GPU-i-0ddd-2", "GPU-xi-0aaa", "GPU-i.0aaa"]))

    resolved = selectors.gpu_resolutions(gpus=gpus)

    assert {Gpu.objects.get(pk=pk).host: resolution for pk, resolution in resolved.items()} == {
        "i-0ddd": selectors.Resolution("arn:aws:ec2:us-east-1:1:instance/i-0ddd", "registered"),
        "i-0aaa": selectors.Resolution("i-0aaa", "registered"),
        "i-0fff": selectors.Resolution("instance/i-0fff/", "registered"),
    }


@pytest.mark.parametrize("first", ["bare", "arn"])
def test_a_host_registered_as_itself_and_inside_longer_ids_resolves_to_itself(
    gpu_fleet, load, first
):
    """`i-0fff` registered bare and inside two ARNs: the host resolves to the bare id, however
    the registrations come back; without it, to the first ARN in order (a set's order, which
    changes from one process to the next, used to decide)."""
    ids = ["arn:aws:ec2:us-east-1:2:instance/i-0fff", "arn:aws:ec2:eu-west-1:1:instance/i-0fff"]
    ids = ["i-0fff", *ids] if first == "bare" else [*ids, "i-0fff"]
    for resource_id in ids:
        ExperimentResourceFactory(experiment=gpu_fleet["train"], resource_id=resource_id)
    load(
        'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-f1",gpu="0",Hostname="i-0fff"} 30\n'
        'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-g1",gpu="0",Hostname="i-0ggg"} 30\n',
        "dcgm",
        taken_at=at("2026-07-14 10:00"),
    )
    gpu = Gpu.objects.get(uuid="GPU-f1")

    assert selectors.gpu_resolutions(gpus=[gpu])[gpu.pk] == selectors.Resolution(
        "i-0fff", "registered"
    )
    ExperimentResource.objects.filter(resource_id="i-0fff").delete()
    assert selectors.gpu_resolutions()[gpu.pk] == selectors.Resolution(
        "arn:aws:ec2:eu-west-1:1:instance/i-0fff", "registered"
    )


def test_the_hosts_page_leaves_out_hosts_named_by_a_mapping_an_id_or_its_tail(gpu_fleet, load):
    """Named by the tail of a run's id, a deployment's id, a mapping: only the hosts nobody
    named are listed (a deployment ARN's tail, i-0ddd: the test of MIG instances above)."""
    ExperimentResourceFactory(experiment=gpu_fleet["train"], resource_id="instance/i-0fff//")
    DeploymentResourceFactory(deployment=gpu_fleet["serve"], resource_id="i-0ppp")
    # An id whose tail is empty names no host, not even the GPUs that report none.
    ExperimentResourceFactory(experiment=gpu_fleet["train"], resource_id="/")
    load(
        'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-f1",gpu="0",Hostname="i-0fff"} 30\n'
        'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-p1",gpu="0",Hostname="i-0ppp"} 30\n'
        'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-m1",gpu="0",Hostname="mapped-box"} 30\n',
        "dcgm",
        taken_at=at("2026-07-14 10:00"),
    )
    # A GPU with no host (the importers refuse one; rows older than that rule may have it).
    Gpu.objects.create(uuid="GPU-n1", host="")
    services.host_mapping_create(created_by=None, host="mapped-box", resource_id="i-0mmm")

    hosts = selectors.unmapped_hosts(since=at("2026-07-14 00:00"))

    assert [(host.host, host.gpus, host.gpu_hours) for host in hosts] == [
        ("mystery-box", 1, 3.0),
        ("", 1, 0.0),
    ]


def test_the_unmapped_hosts_come_a_page_at_a_time_most_gpu_hours_first(gpu_fleet, load):
    load(
        "".join(
            f'DCGM_FI_DEV_GPU_UTIL{{UUID="GPU-{host}",gpu="0",Hostname="{host}"}} 30\n'
            for host in ("box-b", "box-a")
        ),
        "dcgm",
        taken_at=at("2026-07-14 10:00"),
    )
    since = at("2026-07-14 00:00")

    pages = [selectors.unmapped_hosts_page(since=since, page=n, per_page=2) for n in (1, 2, 9)]

    assert [[host.host for host in page.rows] for page in pages] == [
        ["mystery-box", "box-a"],
        ["box-b"],
        ["box-b"],
    ]
    assert [(page.count, page.number, page.pages) for page in pages] == [
        (3, 1, 2),
        (3, 2, 2),
        (3, 2, 2),
    ]


def test_a_gpu_named_by_an_id_ending_in_a_slash_is_its_projects_and_no_one_elses(
    gpu_fleet, load, project, member, member_client, outsider, outsider_client
):
    for name, resource_id, started in (
        ("slash-run", "instance/i-0fff/", "09:00"),
        ("slashes-run", "x/i-0fff//", "08:00"),
    ):
        run = ExperimentFactory(
            project=project,
            name=name,
            started_at=at(f"2026-07-14 {started}"),
            ended_at=at("2026-07-14 13:00"),
        )
        ExperimentResourceFactory(experiment=run, resource_id=resource_id)
    # The other team's run holds the host's name inside its own, which does not name it.
    holds = ExperimentFactory(project=gpu_fleet["other_project"], name="holds-it")
    ExperimentResourceFactory(experiment=holds, resource_id="arn:x:instance/i-0fff-2")
    load(
        'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-f1",gpu="0",Hostname="i-0fff"} 30\n',
        "dcgm",
        taken_at=at("2026-07-14 10:00"),
    )
    gpu = Gpu.objects.get(uuid="GPU-f1")
    url = reverse("gpu_detail", args=[gpu.pk])

    page = member_client.get(url, {"preset": "30d"})

    assert page.status_code == 200
    assert ">slash-run</a>" in page.content.decode()
    assert ">slashes-run</a>" in page.content.decode()
    assert ">holds-it</a>" not in page.content.decode()
    assert outsider_client.get(url).status_code == 404
    # Resolved as the bare host (a mapping to it, say), the id ending in a slash still names it.
    july = {"start": at("2026-07-01 00:00"), "end": at("2026-07-15 00:00")}
    bare = selectors.Resolution("i-0fff", "mapping")
    owners = selectors.gpu_owners(gpu=gpu, user=member, resolution=bare, **july)
    assert [owner.name for owner in owners.shown] == ["slash-run", "slashes-run"]
    assert selectors.gpu_owners(gpu=gpu, user=outsider, resolution=bare, **july).total == 0


def test_the_stored_tail_is_the_tail_python_cuts(db):
    ids = [
        "i-0aaa",
        "arn:aws:ec2:us-east-1:1:instance/i-0aaa",
        "instance/i-0fff/",
        "x/i-0fff//",
        "i-0ggg/",
        "/",
        "a/b/c",
        "projects/p/zones/europe-west4-a/instances/gpu-ü-7",
    ]
    for resource_id in ids:
        ExperimentResourceFactory(resource_id=resource_id)

    stored = dict(ExperimentResource.objects.values_list("resource_id", "tail"))

    assert stored == {resource_id: tail_of(resource_id) for resource_id in ids}
    assert stored["x/i-0fff//"] == "i-0fff" and stored["/"] == ""


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plans")
@pytest.mark.parametrize(
    ("model", "index"),
    [
        (ExperimentResource, "experimentresource_tail"),
        (DeploymentResource, "deploymentresource_tail"),
    ],
)
def test_registrations_naming_a_host_are_read_from_the_index_of_their_tails(db, model, index):
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a few rows: a scan would win

    plan = registrations_naming(model.objects.all(), {"i-0aaa", "gpu-node-9"}).explain()

    # The stored tail's index and the id's, and nothing that needs a scan.
    assert f"Bitmap Index Scan on {index}" in plan
    assert "Seq Scan" not in plan


def test_the_fleet_counts_gpu_hours_by_band_per_day_model_and_project(gpu_fleet, staff):
    summary = selectors.fleet(user=staff, start=at("2026-07-14 00:00"), end=at("2026-07-15 00:00"))

    assert summary.total.gpu_hours == 15.0
    by_band = {(row.day.isoformat(), row.band): row.gpu_hours for row in summary.days}
    # 10% is not idle (under 10%), so it is "low"; 40% is moderate; 70% is busy.
    assert by_band == {
        ("2026-07-14", "low"): 5.0,
        ("2026-07-14", "moderate"): 5.0,
        ("2026-07-14", "busy"): 5.0,
    }
    assert [
        (group.label, group.gpu_hours if hasattr(group, "gpu_hours") else group.usage.gpu_hours)
        for group in summary.projects
    ] == [
        ("Image ranking", 7.0),
        ("Translation", 3.0),
    ]
    assert summary.unattributed.gpu_hours == 15.0 - 7.0 - 3.0
    assert [(group.label, group.gpus) for group in summary.models] == [("Unknown model", 5)]


def test_a_member_sees_only_the_gpu_hours_of_their_projects(gpu_fleet, member):
    summary = selectors.fleet(
        user=member, start=at("2026-07-14 00:00"), end=at("2026-07-14 00:00") + timedelta(days=1)
    )

    assert summary.total.gpu_hours == 7.0
    assert [group.label for group in summary.projects] == ["Image ranking"]
    assert summary.unattributed is None


def test_gpu_use_per_resource_and_day_is_there_to_price_idle_time(gpu_fleet, load):
    load(
        "timestamp, hostname, uuid, utilization.gpu [%]\n"
        "2026/07/15 01:00:00.000, mystery-box, GPU-x1, 2 %\n"
        "2026/07/15 01:30:00.000, mystery-box, GPU-x1, 4 %\n"
        "2026/07/15 02:00:00.000, gpu-node-9, GPU-o1, 0 %\n",
        "nvidia-smi",
        name="more.csv",
    )

    days = selectors.resource_gpu_days(
        start=at("2026-07-14 00:00").date(), end=at("2026-07-16 00:00").date()
    )

    assert [
        (d.resource_id, d.day.isoformat(), d.gpu_hours, d.idle_gpu_hours, d.util_mean) for d in days
    ] == [
        ("i-0aaa", "2026-07-14", 6.0, 0.0, 40.0),
        ("i-0bbb", "2026-07-14", 3.0, 0.0, 40.0),
        ("i-0bbb", "2026-07-15", 1.0, 1.0, 0.0),
        ("i-0ddd", "2026-07-14", 3.0, 0.0, 40.0),
    ]
    assert days[2].idle_share == 1.0
