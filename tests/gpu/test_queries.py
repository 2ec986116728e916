"""The GPU pages cost the same number of SQL queries for the fleet fixture's five GPUs and for a
fleet grown by 240 GPUs on 12 more projects; and the fleet page's daily rollup (GpuDay) is
rebuilt by every kind of change that moves its figures, so a page never shows it stale."""

import json
from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.accounts.models import Organization
from apps.billing.services import import_run_create, import_run_execute
from apps.experiments.models import Experiment, ExperimentResource
from apps.gpu import daily, selectors, services
from apps.gpu.models import (
    Gpu,
    GpuDay,
    GpuHour,
    GpuModelDay,
    GpuMonth,
    GpuRollupStaleGpu,
    GpuRollupState,
    GpuSegment,
    HostMapping,
)
from apps.projects.services import resource_uses_replace
from tests.attribution.conftest import write_bill
from tests.factories import ExperimentFactory, ProjectFactory

from .conftest import smi
from .helpers import at

NOW = "2026-07-15 02:00:00+00:00"
HTMX = {"HX-Request": "true", "HX-Target": "spend"}


@pytest.fixture(autouse=True)
def _frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def grow(team) -> None:
    """Twelve projects of the team, each with two runs on ten GPUs of their own for the ten days
    before the fixture's readings; GPU-hours written straight to the hourly rollup."""
    hours = []
    for p in range(12):
        project = ProjectFactory(team=team, name=f"Bulk {p}", slug=f"bulk-{p}")
        for r in range(2):
            run = Experiment.objects.create(
                project=project,
                name=f"bulk-{p}-{r}",
                started_at=at("2026-07-04 00:00"),
                ended_at=at("2026-07-14 00:00"),
            )
            host = f"bulk-{p}-{r}"
            ExperimentResource.objects.create(experiment=run, resource_id=host)
            for g in range(10):
                gpu = Gpu.objects.create(uuid=f"GPU-{host}-{g}", host=host, index=g)
                hours += [
                    GpuHour(
                        gpu=gpu,
                        hour=at("2026-07-04 00:00") + timedelta(hours=h),
                        samples=60,
                        util_samples=60,
                        util_mean=(g * 10 + h) % 100,
                        idle_share=0.0,
                    )
                    for h in range(0, 240, 3)
                ]
    GpuHour.objects.bulk_create(hours)
    daily.days_mark()


def urls(gpu_fleet) -> list[tuple[str, dict, dict]]:
    gpu = Gpu.objects.get(uuid="GPU-e1")
    fleet = reverse("gpu_fleet")
    return [
        (fleet, {}, {}),
        (fleet, {}, HTMX),
        (fleet, {"preset": "7d"}, HTMX),
        (fleet, {"preset": "all", "sort": "util"}, {}),
        (fleet, {"preset": "12m", "sort": "-idle", "page": "2"}, {}),
        (fleet, {"team": "vision"}, HTMX),
        (fleet, {"project": "image-ranking", "sort": "model"}, {}),
        (reverse("gpu_detail", args=[gpu.pk]), {}, {}),
        (reverse("gpu_detail", args=[gpu.pk]), {"preset": "30d"}, HTMX),
        (reverse("gpu_host_mapping_list"), {}, {}),
    ]


def count_queries(client, url: str, params: dict, headers: dict) -> int:
    client.get(url, params, headers=headers)  # a rebuild after a change is not what is counted
    cache.clear()  # every figure computed, as after an import: not the page cached as HTML
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, params, headers=headers)
    assert response.status_code == 200, (url, params)
    return len(captured)


@pytest.mark.parametrize("who", ["staff_client", "lead_client"])
def test_the_gpu_pages_cost_the_same_queries_for_five_gpus_or_245(request, gpu_fleet, team, who):
    client = request.getfixturevalue(who)
    pages = urls(gpu_fleet)
    small = [count_queries(client, *page) for page in pages]

    grow(team)
    big = [count_queries(client, *page) for page in pages]

    assert GpuDay.objects.count() > 240 * 10
    assert big == small
    assert max(small) <= 40


def test_a_page_of_the_gpu_table_is_fifty_gpus_sorted_in_the_database(gpu_fleet, staff, team):
    grow(team)
    start, end = at("2026-07-04 00:00"), at("2026-07-15 00:00")

    first = selectors.fleet_gpus(user=staff, start=start, end=end, sort="gpu", page=1)
    last = selectors.fleet_gpus(user=staff, start=start, end=end, sort="gpu", page=5)

    assert (first.count, first.pages, len(first.rows), len(last.rows)) == (245, 5, 50, 45)
    past = selectors.fleet_gpus(user=staff, start=start, end=end, sort="gpu", page=9)
    assert (past.count, past.number, past.rows) == (245, 5, last.rows)
    far = selectors.fleet_gpus(user=staff, start=start, end=end, sort="gpu", page=2**31 - 1)
    assert (far.number, far.rows) == (5, last.rows)
    assert [str(row.gpu) for row in first.rows[:3]] == ["bulk-0-0 #0", "bulk-0-0 #1", "bulk-0-0 #2"]
    hosts = [row.gpu.host for row in last.rows[-5:]]
    assert hosts == ["gpu-node-9", "i-0aaa", "i-0aaa", "ip-10-0-0-7", "mystery-box"]
    by_hours = selectors.fleet_gpus(user=staff, start=start, end=end, sort="-hours")
    assert [row.usage.gpu_hours for row in by_hours.rows[:2]] == [80.0, 80.0]
    assert by_hours.rows[-1].usage.gpu_hours == 80.0
    fewest = selectors.fleet_gpus(user=staff, start=start, end=end, sort="hours")
    assert [row.usage.gpu_hours for row in fewest.rows[:5]] == [3.0] * 5
    summary = selectors.fleet(user=staff, start=start, end=end)
    assert summary.total.gpu_hours == 15.0 + 240 * 80
    assert sum(group.usage.gpu_hours for group in summary.projects) == 7.0 + 3.0 + 240 * 80


@pytest.mark.parametrize("sort", ["-hours", "hours", "-util", "util", "-idle", "idle", "gpu"])
def test_every_page_of_the_gpu_table_is_its_part_of_the_whole_ranking(gpu_fleet, staff, team, sort):
    """Sorted by a sum, a page joins only the GPUs that reach its last value: the pages of 7 put
    end to end are the whole ranking in one page, ties across a page's end included (240 of
    the 245 GPUs have 80 GPU-hours)."""
    grow(team)
    start, end = at("2026-07-04 00:00"), at("2026-07-15 00:00")

    def page(number: int, per_page: int) -> list:
        found = selectors.fleet_gpus(
            user=staff, start=start, end=end, sort=sort, page=number, per_page=per_page
        )
        return [(row.gpu.pk, row.usage.gpu_hours, row.usage.util_mean) for row in found.rows]

    whole = page(1, 245)
    pages = [page(number, 7) for number in range(1, 36)]
    assert [len(rows) for rows in pages] == [7] * 35
    assert [row for rows in pages for row in rows] == whole
    assert len({gpu for gpu, _, _ in whole}) == 245
    assert page(99, 7) == pages[-1]  # past the last page: the last


def test_the_gpu_table_is_ranked_without_parallel_workers_and_the_summary_in_one_statement(
    gpu_fleet, staff, team
):
    """The ranking's workers took longer to start than they saved, and a core from the request
    beside it (costsite/plans.py); the model-days are summed per day, model and set of projects
    by one statement (GROUPING SETS), which gives the figures three statements gave."""
    grow(team)
    start, end = at("2026-07-04 00:00"), at("2026-07-15 00:00")
    with CaptureQueriesContext(connection) as captured:
        page = selectors.fleet_gpus(user=staff, start=start, end=end)
    statements = [query["sql"] for query in captured]
    ranking = next(index for index, sql in enumerate(statements) if "per_gpu" in sql)
    assert statements[ranking - 1] == "SET LOCAL max_parallel_workers_per_gather = 0"
    assert page.count == 245
    with connection.cursor() as cursor:
        cursor.execute("SHOW max_parallel_workers_per_gather")
        assert cursor.fetchone()[0] != "0"

    with CaptureQueriesContext(connection) as captured:
        summary = selectors.fleet(user=staff, start=start, end=end)
    model_days = [query["sql"] for query in captured if "gpu_gpumodelday" in query["sql"]]
    assert len(model_days) == 1
    assert "GROUPING SETS" in model_days[0]
    # 240 GPUs of the twelve projects at 80 GPU-hours each, the fixture's five at three.
    assert summary.total.gpu_hours == 15.0 + 240 * 80
    assert [(model.label, model.gpus, model.usage.gpu_hours) for model in summary.models] == [
        ("Unknown model", 245, 15.0 + 240 * 80)
    ]
    assert [day.day.isoformat() for day in summary.days][:1] == ["2026-07-04"]
    assert sum(day.gpu_hours for day in summary.days) == 15.0 + 240 * 80
    assert len(summary.projects) == 12 + 2


# The rollup refreshes on every kind of change that moves the fleet's figures ------------------


def _fleet(staff):
    return selectors.fleet(user=staff, start=at("2026-07-14 00:00"), end=at("2026-07-15 00:00"))


def _projects(summary) -> dict[str, float]:
    return {group.label: group.usage.gpu_hours for group in summary.projects}


def test_a_gpu_import_moves_the_fleet_figures_at_once(gpu_fleet, staff, load):
    assert _fleet(staff).total.gpu_hours == 15.0

    load(smi([("mystery-box", "GPU-x1", "13:00", 50)]), "nvidia-smi", name="later.csv")

    summary = _fleet(staff)
    assert summary.total.gpu_hours == 16.0
    assert summary.unattributed.gpu_hours == 6.0


def test_a_registration_through_the_service_moves_the_fleet_figures(gpu_fleet, staff, project):
    assert _projects(_fleet(staff)) == {"Image ranking": 7.0, "Translation": 3.0}
    run = ExperimentFactory(
        project=project, started_at=at("2026-07-14 00:00"), ended_at=at("2026-07-15 00:00")
    )

    resource_uses_replace(uses=run.resources, resource_ids=["mystery-box"])

    summary = _fleet(staff)
    assert _projects(summary) == {"Image ranking": 10.0, "Translation": 3.0}
    assert summary.unattributed.gpu_hours == 15.0 - 10.0 - 3.0


def _rollup() -> dict[str, list[tuple]]:
    """Every row of the fleet's rollups but their ids, sorted."""
    tables = {
        "segments": (GpuSegment, ("gpu_id", "start", "end", "projects")),
        "days": (GpuDay, ("day", "gpu_id", "projects", "gpu_hours", "weighted_util", "band_idle")),
        "model days": (GpuModelDay, ("day", "model_name", "projects", "gpu_hours", "band_busy")),
        "months": (GpuMonth, ("month", "gpu_id", "projects", "gpu_hours", "idle_gpu_hours")),
    }
    return {
        name: sorted(model.objects.values_list(*columns), key=str)
        for name, (model, columns) in tables.items()
    }


@pytest.mark.parametrize("now", [True, False], ids=["by the writer", "by the task"])
def test_a_registration_rebuilds_only_the_gpus_it_reaches_as_a_whole_rebuild_would(
    gpu_fleet, staff, team, django_capture_on_commit_callbacks, monkeypatch, now
):
    """A run registered on one instance marks that instance's GPUs, not the fleet. Their rows are
    rebuilt before the registration commits (a few GPUs), or by the task after it, or the first
    page (more than REBUILD_NOW_GPUS), and come out as a rebuild of everything writes them."""
    if not now:
        monkeypatch.setattr(daily, "REBUILD_NOW_GPUS", 1)
    grow(team)
    daily.days_ensure()
    run = ExperimentFactory(
        project=gpu_fleet["other_project"],
        started_at=at("2026-07-14 11:00"),
        ended_at=at("2026-07-15 00:00"),
    )
    builds = GpuRollupState.objects.get().builds

    with django_capture_on_commit_callbacks() as tasks:
        resource_uses_replace(uses=run.resources, resource_ids=["i-0aaa"])

    marked = set(GpuRollupStaleGpu.objects.values_list("gpu__uuid", flat=True))
    assert marked == (set() if now else {"GPU-e1", "GPU-e2"})
    assert GpuRollupState.objects.get().stale_all is False
    assert GpuRollupState.objects.get().builds == builds + (1 if now else 0)
    assert [repr(task) for task in tasks if "gpu_days_rebuild_task" in repr(task)]
    assert daily.days_ensure() == builds + 1
    assert not GpuRollupStaleGpu.objects.exists()
    narrow = _rollup()
    assert len(narrow["days"]) > 240 * 10
    # GPU-e1 and GPU-e2 at 11:00 and 12:00 count for the other team's run too.
    summary = _fleet(staff)
    assert _projects(summary)["Translation"] == 3.0 + 4.0

    daily.days_mark()
    daily.days_ensure()
    assert _rollup() == narrow


def test_a_registration_removed_rebuilds_the_gpu_it_named_by_its_host(
    gpu_fleet, staff, project, monkeypatch
):
    """GPU-x1 on host mystery-box resolves to a run's registered `mystery-box` (nothing else
    names it). When the registration goes, no GPU resolves to that id any more: the GPU is found
    by its host, rebuilt alone, and its hours are unattributed again. (Left to the task here, so
    that what is marked can be read.)"""
    monkeypatch.setattr(daily, "REBUILD_NOW_GPUS", 0)
    run = ExperimentFactory(
        project=project, started_at=at("2026-07-14 00:00"), ended_at=at("2026-07-15 00:00")
    )
    resource_uses_replace(uses=run.resources, resource_ids=["mystery-box"])
    assert _fleet(staff).unattributed.gpu_hours == 15.0 - 10.0 - 3.0

    resource_uses_replace(uses=run.resources, resource_ids=[])

    assert set(GpuRollupStaleGpu.objects.values_list("gpu__uuid", flat=True)) == {"GPU-x1"}
    summary = _fleet(staff)
    assert _projects(summary) == {"Image ranking": 7.0, "Translation": 3.0}
    assert summary.unattributed.gpu_hours == 5.0
    narrow = _rollup()
    daily.days_mark()
    daily.days_ensure()
    assert _rollup() == narrow


def test_a_host_mapping_moves_the_fleet_figures(gpu_fleet, staff):
    assert _fleet(staff).unattributed.gpu_hours == 5.0

    services.host_mapping_set(host="mystery-box", resource_id="i-0bbb")
    assert _projects(_fleet(staff)) == {"Image ranking": 7.0, "Translation": 6.0}

    services.host_mapping_delete(mapping=HostMapping.objects.get(host="mystery-box"))
    assert _projects(_fleet(staff)) == {"Image ranking": 7.0, "Translation": 3.0}


def test_a_new_idle_threshold_moves_the_bands(gpu_fleet, staff):
    assert _fleet(staff).total.bands == {"low": 5.0, "moderate": 5.0, "busy": 5.0}
    org = Organization.get()
    org.idle_threshold_percent = Decimal("50")
    org.save()

    # Under 50%: the 10% and 40% hours; 50-70% is moderate: none; 70% busy.
    assert _fleet(staff).total.bands == {"idle": 10.0, "busy": 5.0}


def _bands_shown(client) -> tuple[dict[str, float], int]:
    """The fleet page's GPU-hours by utilisation band on 14 July, as its chart draws them, and
    how many queries read the daily rollup."""
    with CaptureQueriesContext(connection) as captured:
        page = client.get(reverse("gpu_fleet"), {"preset": "7d"}).content.decode()
    figure = json.loads(
        page.split('<script id="fleet-bands" type="application/json">')[1].split("</script>")[0]
    )
    day = figure["data"][0]["x"].index("2026-07-14")
    bands = {trace["name"]: trace["y"][day] for trace in figure["data"] if trace["y"][day]}
    return bands, sum('"gpu_gpuday"' in query["sql"] for query in captured)


def test_the_fleet_page_is_cached_until_its_rollup_is_built_again(gpu_fleet, staff_client, load):
    # The page is cached as HTML by the build of its rollup: a second load reads none of it, and
    # a GPU import or a new idle threshold (each builds it again) shows on the next load.
    before = {"Low (10–40%)": 5.0, "Moderate (40–70%)": 5.0, "Busy (70% and over)": 5.0}
    assert _bands_shown(staff_client)[0] == before
    assert _bands_shown(staff_client) == (before, 0)

    load(smi([("mystery-box", "GPU-x1", "13:00", 50)]), "nvidia-smi", name="later.csv")
    assert _bands_shown(staff_client)[0] == {**before, "Moderate (40–70%)": 6.0}

    org = Organization.get()
    org.idle_threshold_percent = Decimal("50")
    org.save()
    # Under 50%: the 10% and 40% hours; the import's 50% hour is moderate (50-70%).
    after = {"Idle (under 50%)": 10.0, "Moderate (50–70%)": 1.0, "Busy (70% and over)": 5.0}
    assert _bands_shown(staff_client)[0] == after


def test_the_gpu_pages_say_how_far_the_bill_has_got(gpu_fleet, staff_client, tmp_path):
    # The filters' line of the fleet and of a GPU's page, as on the spend pages.
    gpu = Gpu.objects.get(uuid="GPU-e1")
    pages = [reverse("gpu_fleet"), reverse("gpu_detail", args=[gpu.pk])]
    for url in pages:
        assert "no bill loaded yet" in staff_client.get(url).content.decode()
    line = {
        "BillingPeriodStart": "2026-07-01T00:00:00Z",
        "BillingPeriodEnd": "2026-08-01T00:00:00Z",
        "ChargePeriodStart": "2026-07-14T10:00:00Z",
        "ChargePeriodEnd": "2026-07-14T11:00:00Z",
        "BilledCost": "3.00",
        "EffectiveCost": "3.00",
        "ResourceId": "i-0aaa",
    }
    run = import_run_execute(
        import_run=import_run_create(paths=[str(write_bill(tmp_path / "july.csv", [line]))])
    )
    assert run.status == "succeeded", run.error
    for url in pages:
        page = staff_client.get(url).content.decode()
        assert 'bill loaded up to <span class="data-as-of">14 Jul 2026 11:00</span>' in page


def test_a_gpu_hour_two_projects_registered_counts_for_each_and_once_in_the_total(
    gpu_fleet, staff, project, lead
):
    # The other team's run registers the instance the Vision run trains on, for the whole day.
    other = gpu_fleet["other_project"]
    run = ExperimentFactory(
        project=other, started_at=at("2026-07-14 00:00"), ended_at=at("2026-07-15 00:00")
    )
    resource_uses_replace(uses=run.resources, resource_ids=["i-0aaa"])

    summary = _fleet(staff)
    # GPU-e1 and GPU-e2: 10:00 and 11:00 for Vision's run, 10:00-12:00 for the other's.
    assert _projects(summary) == {"Image ranking": 7.0, "Translation": 3.0 + 6.0}
    assert summary.total.gpu_hours == 15.0
    assert summary.unattributed.gpu_hours == 3.0
