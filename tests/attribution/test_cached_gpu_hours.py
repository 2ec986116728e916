"""The runs' GPU-hours on the project page are cached with the runs they are for, and each kind
of change that moves them shows at the next load: new GPU metrics, a host mapped to the run's
resource, a GPU's host edited by hand, a resource registered; a new bill leaves them cached."""

from datetime import date

import pytest
from django.core.cache import cache
from django.urls import reverse

from apps.experiments.models import Experiment, ExperimentResource
from apps.gpu.models import Gpu, GpuHour
from apps.gpu.services import host_mapping_set
from apps.projects.ports import spend_data_changed

from ..pages import table_rows
from .conftest import at

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def empty_cache():
    cache.clear()


def resnet_hours(client) -> str:
    """Resnet's GPU-hours as the project page's table of experiments by spend shows them."""
    response = client.get(reverse("project_detail", args=["image-ranking"]))
    assert response.status_code == 200
    header, *rows = table_rows(response.content.decode(), "experiment-costs")
    column = header.index("GPU-hours")
    return {row[0]: row[column] for row in rows}["resnet"]


def hour_on(gpu: Gpu, hour: str) -> None:
    GpuHour.objects.create(gpu=gpu, hour=at(hour), samples=60, util_samples=60, util_mean=50)


def test_a_second_load_reads_the_gpu_hours_from_the_cache(member_client, bill):
    assert resnet_hours(member_client) == "2.5"
    # Written behind every announcement's back: the cached figure stays (what the cache is for).
    hour_on(Gpu.objects.get(uuid="GPU-1", mig_instance=""), "2025-03-11T08:00:00")
    assert resnet_hours(member_client) == "2.5"


def test_new_gpu_metrics_show_on_the_next_load(member_client, bill):
    assert resnet_hours(member_client) == "2.5"
    hour_on(Gpu.objects.get(uuid="GPU-1", mig_instance=""), "2025-03-11T08:00:00")
    # As a GPU metrics import announces the days it wrote.
    spend_data_changed.announce(start=date(2025, 3, 11), end=date(2025, 3, 12), reason="gpu_import")
    assert resnet_hours(member_client) == "3.5"


def test_a_new_bill_leaves_the_gpu_hours_cached(member_client, bill):
    """A delivery or a re-attribution moves every spend figure but not what GPU-hours read (the
    GPU metrics, GPUs, host mappings, registrations): the page after it reads no GPU-hour."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    assert resnet_hours(member_client) == "2.5"
    # Written behind every announcement's back, to show what is read from the cache.
    hour_on(Gpu.objects.get(uuid="GPU-1", mig_instance=""), "2025-03-11T08:00:00")
    for reason in ("delivery", "reattribution"):
        spend_data_changed.announce(start=date(2025, 3, 1), end=date(2025, 4, 1), reason=reason)
        with CaptureQueriesContext(connection) as queries:
            assert resnet_hours(member_client) == "2.5"
        assert [q["sql"] for q in queries if GpuHour._meta.db_table in q["sql"]] == []
    spend_data_changed.announce(start=date(2025, 3, 11), end=date(2025, 3, 12), reason="gpu_import")
    assert resnet_hours(member_client) == "3.5"


def test_a_host_mapped_to_the_runs_resource_shows_on_the_next_load(member_client, bill):
    assert resnet_hours(member_client) == "2.5"
    node = Gpu.objects.create(uuid="GPU-9", host="node-9", model_name="A100")
    hour_on(node, "2025-03-10T10:00:00")
    assert resnet_hours(member_client) == "2.5"  # node-9 is nobody's yet
    host_mapping_set(host="node-9", resource_id="i-resnet")
    assert resnet_hours(member_client) == "3.5"


def test_a_gpu_moved_to_another_host_by_hand_shows_on_the_next_load(member_client, bill):
    assert resnet_hours(member_client) == "2.5"
    slice_ = Gpu.objects.get(uuid="GPU-1", mig_instance="1")
    slice_.host = "elsewhere"
    slice_.save()
    assert resnet_hours(member_client) == "2.0"  # the half-GPU slice's 12:00 hour is gone


def test_a_resource_registered_by_hand_shows_on_the_next_load(member_client, bill):
    assert resnet_hours(member_client) == "2.5"
    ExperimentResource.objects.filter(experiment__name="resnet").delete()
    assert resnet_hours(member_client) == "–"
    ExperimentResource.objects.create(
        experiment=Experiment.objects.get(name="resnet"), resource_id="i-resnet"
    )
    assert resnet_hours(member_client) == "2.5"
