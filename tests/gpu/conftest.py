"""Fixtures for the GPU metrics tests: the organisation's settings, a way to load metrics text
through the real importer, and GPUs registered on the standing users' project."""

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest

from apps.accounts.models import Organization
from apps.gpu import services
from tests.factories import (
    DeploymentFactory,
    DeploymentResourceFactory,
    ExperimentFactory,
    ExperimentResourceFactory,
    ModelFactory,
    ProjectFactory,
)

from .helpers import at


@pytest.fixture
def organization(db) -> Organization:
    org = Organization.get()
    org.idle_threshold_percent = Decimal("10")
    org.time_zone = "UTC"
    org.save()
    return org


@pytest.fixture
def write(tmp_path) -> Callable[..., Path]:
    """Write `text` to a file under tmp_path and return its path."""

    def write(name: str, text: str | bytes) -> Path:
        path = tmp_path / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        return path

    return write


@pytest.fixture
def load(organization, write) -> Callable[..., services.ImportOutcome]:
    """Import text in a format through gpu_metrics_load, as one unit."""

    def load(
        text: str | bytes,
        fmt: str,
        *,
        name: str = "metrics.txt",
        host: str = "",
        time_zone: str = "UTC",
        taken_at: datetime | None = None,
    ) -> services.ImportOutcome:
        path = write(name, text)
        return services.gpu_metrics_load(
            inputs=[
                services.MetricInput(
                    name=str(path),
                    format=fmt,
                    open=lambda: open(path, "rb"),  # noqa: SIM115
                    host=host,
                    time_zone=time_zone,
                    taken_at=taken_at,
                )
            ]
        )

    return load


def smi(host_rows: list[tuple[str, str, str, float]]) -> str:
    """nvidia-smi rows (hostname, uuid, 'HH:MM' on 2026-07-14, utilisation)."""
    return "timestamp, hostname, uuid, utilization.gpu [%]\n" + "".join(
        f"2026/07/14 {moment}:00.000, {host}, {uuid}, {util:g} %\n"
        for host, uuid, moment, util in host_rows
    )


@pytest.fixture
def gpu_fleet(load, project, other_team):
    """Four GPUs, each joined to the bill a different way (or not at all):

    - GPU-e1, GPU-e2 on host i-0aaa: the resource id registered on experiment `train` itself;
    - GPU-d1 carries instance_id=i-0ddd on its series: a label; deployment `serve` registered the
      instance's ARN;
    - GPU-o1 on host gpu-node-9, mapped by hand to i-0bbb, which the other team's run registered;
    - GPU-x1 on host mystery-box: unmapped.
    Every GPU reports 10:00-12:59 at 10, 40, 70% (one sample an hour)."""
    model = ModelFactory(project=project, name="ranker")
    train = ExperimentFactory(
        project=project,
        name="train",
        model=model,
        started_at=at("2026-07-14 09:30"),
        ended_at=at("2026-07-14 12:00"),
    )
    ExperimentResourceFactory(experiment=train, resource_id="i-0aaa")
    serve = DeploymentFactory(
        model=model, project=project, name="serve", started_at=at("2026-07-01 00:00")
    )
    DeploymentResourceFactory(
        deployment=serve, resource_id="arn:aws:ec2:us-east-1:1:instance/i-0ddd"
    )
    other_project = ProjectFactory(team=other_team, name="Translation", slug="translation")
    other_run = ExperimentFactory(
        project=other_project, name="mt-big", started_at=at("2026-07-14 00:00"), ended_at=None
    )
    ExperimentResourceFactory(experiment=other_run, resource_id="i-0bbb")
    services.host_mapping_set(host="gpu-node-9", resource_id="i-0bbb")

    rows = []
    for host, uuid in (
        ("i-0aaa", "GPU-e1"),
        ("i-0aaa", "GPU-e2"),
        ("gpu-node-9", "GPU-o1"),
        ("mystery-box", "GPU-x1"),
    ):
        rows += [(host, uuid, "10:00", 10), (host, uuid, "11:00", 40), (host, uuid, "12:00", 70)]
    load(smi(rows), "nvidia-smi", name="fleet.csv")
    labelled = (
        '{"status":"success","data":{"resultType":"matrix","result":[{"metric":{'
        '"__name__":"DCGM_FI_DEV_GPU_UTIL","UUID":"GPU-d1","Hostname":"ip-10-0-0-7",'
        '"instance_id":"i-0ddd"},"values":[[1784023200,"10"],[1784026800,"40"],[1784030400,"70"]]}]}}'
    )
    load(labelled, "prometheus-json", name="serve.json")
    return {"model": model, "train": train, "serve": serve, "other_project": other_project}
