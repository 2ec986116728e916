"""The GPU pages: who sees what (staff, lead, member, outsider), forms, htmx partials."""

import json
import re

import pytest
import time_machine
from django.conf import settings
from django.urls import reverse

from apps.gpu import services
from apps.gpu.models import Gpu, HostMapping, MetricSource

# A day after the fleet fixture's readings (2026-07-14 10:00-12:59 UTC).
NOW = "2026-07-15 02:00:00+00:00"


@pytest.fixture(autouse=True)
def _frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def test_the_fleet_page_shows_each_user_the_gpu_hours_of_their_projects(
    gpu_fleet, staff_client, lead_client, member_client, outsider_client
):
    staff = staff_client.get(reverse("gpu_fleet")).content.decode()
    member = member_client.get(reverse("gpu_fleet")).content.decode()
    outsider = outsider_client.get(reverse("gpu_fleet")).content.decode()

    assert "Image ranking" in staff and "Translation" in staff
    assert "Not attributed to a project" in staff
    assert "mystery-box" in staff
    assert "Image ranking" in member and "Translation" not in member
    assert "mystery-box" not in member and "Not attributed to a project" not in member
    assert "Translation" in outsider and "Image ranking" not in outsider
    assert lead_client.get(reverse("gpu_fleet")).status_code == 200


def test_the_fleet_chart_is_drawn_from_the_rollup_without_inline_script(gpu_fleet, staff_client):
    response = staff_client.get(reverse("gpu_fleet"), {"preset": "7d"})

    page = response.content.decode()
    assert 'data-figure="fleet-bands"' in page
    figure = json.loads(
        page.split('<script id="fleet-bands" type="application/json">')[1].split("</script>")[0]
    )
    bars = {trace["name"]: trace["y"] for trace in figure["data"]}
    # 2026-07-09 to 2026-07-15; all fifteen GPU-hours are on the 14th.
    assert bars == {
        "Idle (under 10%)": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        "Low (10–40%)": [0.0, 0.0, 0.0, 0.0, 0.0, 5.0, 0.0],
        "Moderate (40–70%)": [0.0, 0.0, 0.0, 0.0, 0.0, 5.0, 0.0],
        "Busy (70% and over)": [0.0, 0.0, 0.0, 0.0, 0.0, 5.0, 0.0],
    }
    assert "<script>" not in page
    assert "script-src 'self';" in response["Content-Security-Policy"] + ";"


def test_the_period_switch_swaps_only_the_fleets_body_for_htmx(gpu_fleet, member_client):
    headers = {"HX-Request": "true", "HX-Target": "spend"}
    response = member_client.get(reverse("gpu_fleet"), {"preset": "90d"}, headers=headers)

    page = response.content.decode()
    assert page.lstrip().startswith('<div id="spend" class="fleet-body">')
    assert "<html" not in page
    # The spend pages' range presets, keeping the range in the URL.
    assert 'href="/gpus/?preset=7d" hx-get="/gpus/?preset=7d"' in page
    assert 'aria-current="true" class="active">Last 90 days</a>' in page
    assert '<select name="team"' in page and '<select name="project"' in page


def test_the_fleet_takes_the_spend_pages_team_and_project_filters(
    gpu_fleet, staff_client, team, project
):
    by_team = staff_client.get(reverse("gpu_fleet"), {"team": team.slug}).content.decode()
    by_project = staff_client.get(
        reverse("gpu_fleet"), {"project": gpu_fleet["other_project"].slug}
    ).content.decode()

    # The team's project only: GPU-e1, GPU-e2 at 10:00 and 11:00, GPU-d1 at 10:00-12:00.
    assert ">Image ranking</a>" in by_team and ">Translation</a>" not in by_team
    assert "Not attributed to a project" not in by_team and "mystery-box" not in by_team
    assert '<p class="figure"><strong>7</strong></p>' in by_team
    assert ">Translation</a>" in by_project and ">Image ranking</a>" not in by_project
    assert '<p class="figure"><strong>3</strong></p>' in by_project


def test_an_anonymous_visitor_is_sent_to_log_in(client, db):
    response = client.get(reverse("gpu_fleet"))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_a_gpu_page_is_404_to_whoever_cannot_see_its_project(
    gpu_fleet, staff_client, lead_client, member_client, outsider_client
):
    vision_gpu = Gpu.objects.get(uuid="GPU-e1")
    other_gpu = Gpu.objects.get(uuid="GPU-o1")
    unmapped = Gpu.objects.get(uuid="GPU-x1")
    url = lambda gpu: reverse("gpu_detail", args=[gpu.pk])  # noqa: E731

    assert staff_client.get(url(unmapped)).status_code == 200
    assert lead_client.get(url(vision_gpu)).status_code == 200
    assert member_client.get(url(vision_gpu)).status_code == 200
    assert member_client.get(url(unmapped)).status_code == 404
    assert outsider_client.get(url(vision_gpu)).status_code == 404
    assert outsider_client.get(url(other_gpu)).status_code == 200


def test_a_gpu_page_says_how_its_host_joins_the_bill_and_charts_its_hours(gpu_fleet, member_client):
    page = member_client.get(
        reverse("gpu_detail", args=[Gpu.objects.get(uuid="GPU-e1").pk])
    ).content.decode()

    assert "<code>i-0aaa</code>" in page
    assert "a resource id registered on a run or deployment" in page
    assert f'href="{reverse("experiment_detail", args=[gpu_fleet["train"].pk])}"' in page
    assert '<script id="gpu-hourly" type="application/json">' in page
    assert "3 GPU-hours, 40% mean utilisation, 0% of it idle." in page


def test_a_gpu_page_lists_the_latest_runs_on_its_resource_in_its_days_and_counts_the_rest(
    gpu_fleet, project, member, member_client
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.gpu import selectors
    from tests.factories import ExperimentFactory, ExperimentResourceFactory

    from .helpers import at

    # A sweep of twelve runs on the instance, one a day from 1 July (the last by its ARN), and
    # one run in June; the fixture's run `train` is on 14 July.
    for day in range(1, 13):
        run = ExperimentFactory(
            project=project,
            name=f"sweep-{day:02d}",
            started_at=at(f"2026-07-{day:02d} 00:00"),
            ended_at=at(f"2026-07-{day:02d} 23:00"),
        )
        ExperimentResourceFactory(
            experiment=run,
            resource_id="arn:aws:ec2:us-east-1:1:instance/i-0aaa" if day == 12 else "i-0aaa",
        )
        if day == 11:  # registered under the ARN too: one run, listed and counted once
            ExperimentResourceFactory(
                experiment=run, resource_id="arn:aws:ec2:us-east-1:1:instance/i-0aaa"
            )
    june = ExperimentFactory(
        project=project,
        name="june-run",
        started_at=at("2026-06-01 00:00"),
        ended_at=at("2026-06-02 00:00"),
    )
    ExperimentResourceFactory(experiment=june, resource_id="i-0aaa")
    gpu = Gpu.objects.get(uuid="GPU-e1")
    url = reverse("gpu_detail", args=[gpu.pk])
    listed = lambda page: re.findall(r">(train|sweep-\d\d|june-run)</a>", page)  # noqa: E731

    # The default week (8-14 July): all six runs on it, the latest first.
    week = member_client.get(url).content.decode()
    assert listed(week) == ["train", "sweep-12", "sweep-11", "sweep-10", "sweep-09", "sweep-08"]
    assert "in these days; choose fewer days" not in week
    times = "<td>14 Jul 2026 09:30 UTC</td><td>14 Jul 2026 12:00 UTC</td>"
    assert f"<td>{project.name}</td>{times}" in week

    # Thirty days hold thirteen: the latest ten are listed, and the rest counted.
    month = member_client.get(url, {"preset": "30d"}).content.decode()
    assert listed(month) == ["train"] + [f"sweep-{day:02d}" for day in range(12, 3, -1)]
    assert "The latest 10 of 13 in these days; choose fewer days to see the others." in month

    # A day in June: only the June run; the htmx body carries the list with the chart.
    june_day = member_client.get(
        url, {"start": "2026-06-01", "end": "2026-06-01"}, headers={"HX-Request": "true"}
    ).content.decode()
    assert listed(june_day) == ["june-run"]
    nothing = member_client.get(url, {"start": "2026-05-01", "end": "2026-05-02"}).content
    assert "No run or deployment you can see registered its resource in these days." in (
        nothing.decode()
    )

    # Chosen, counted and cut in the database: the same queries for thirteen runs as for one.
    def queries(start: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            selectors.gpu_owners(
                gpu=gpu,
                user=member,
                start=at(start),
                end=at("2026-07-15 00:00"),
                resolution=selectors.Resolution("i-0aaa", "registered"),
            )
        return len(captured)

    assert queries("2026-06-15 00:00") == queries("2026-07-14 00:00") == 2


def test_a_gpu_pages_days_are_the_utc_days_of_its_figures_whatever_the_organisations_zone(
    gpu_fleet, member_client
):
    from apps.accounts.models import Organization

    Organization.objects.update(time_zone="America/New_York")
    page = member_client.get(
        reverse("gpu_detail", args=[Gpu.objects.get(uuid="GPU-e1").pk])
    ).content.decode()

    # The default week ends on the day the GPU last reported (14 July); in New York its UTC
    # midnights fall on the evening before, which the line used to show.
    assert "8 Jul 2026 – 14 Jul 2026 (UTC days): 3 GPU-hours" in page


def test_a_gpu_page_charts_hours_up_to_a_month_and_utc_days_past_it(gpu_fleet, load, member_client):
    from apps.accounts.models import Organization

    Organization.objects.update(time_zone="America/New_York")
    # Three more hours of GPU-e1, one sample each, with memory; the last is 13 July in UTC, the
    # evening of the 12th in New York.
    load(
        "timestamp, hostname, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB]\n"
        "2026/07/12 10:00:00.000, i-0aaa, GPU-e1, 20 %, 8192 MiB, 81920 MiB\n"
        "2026/07/12 11:00:00.000, i-0aaa, GPU-e1, 60 %, 24576 MiB, 81920 MiB\n"
        "2026/07/13 02:00:00.000, i-0aaa, GPU-e1, 100 %, 40960 MiB, 81920 MiB\n",
        "nvidia-smi",
        name="more.csv",
    )
    url = reverse("gpu_detail", args=[Gpu.objects.get(uuid="GPU-e1").pk])

    def figure(page: str) -> dict:
        return json.loads(
            page.split('<script id="gpu-hourly" type="application/json">')[1].split("</script>")[0]
        )

    def chart(page: str) -> dict:
        return {trace["name"]: (trace["x"], trace["y"]) for trace in figure(page)["data"]}

    def chart_modes(page: str) -> set:
        return {trace["mode"] for trace in figure(page)["data"]}

    month = member_client.get(url, {"preset": "30d"}).content.decode()
    assert '<h2 id="hourly-title">By hour</h2>' in month
    # Every hour of 15 June to 14 July (UTC), on New York's wall clock; the hours with no
    # reading are gaps.
    mean_x, mean_y = chart(month)["Mean utilisation"]
    assert (len(mean_x), mean_x[0], mean_x[-1]) == (
        720,
        "2026-06-14T20:00:00",
        "2026-07-14T19:00:00",
    )
    assert chart_modes(month) == {"lines+markers"}  # six readings in 720 hours: dots too
    read = {x: y for x, y in zip(mean_x, mean_y, strict=True) if y is not None}
    assert read == {
        "2026-07-12T06:00:00": 20.0,
        "2026-07-12T07:00:00": 60.0,
        "2026-07-12T22:00:00": 100.0,
        "2026-07-14T06:00:00": 10.0,
        "2026-07-14T07:00:00": 40.0,
        "2026-07-14T08:00:00": 70.0,
    }

    quarter = member_client.get(url, {"preset": "90d"}).content.decode()
    assert '<h2 id="hourly-title">By day</h2>' in quarter
    # Every UTC day of 16 April to 14 July, a dot each; the days with no reading are gaps.
    traces = chart(quarter)
    days = traces["Mean utilisation"][0]
    assert (len(days), days[0], days[-3:]) == (
        90,
        "2026-04-16",
        ["2026-07-12", "2026-07-13", "2026-07-14"],
    )
    gaps = [None] * 87
    assert {name: y for name, (_x, y) in traces.items()} == {
        "Mean utilisation": gaps + [40.0, 100.0, 40.0],
        "Peak utilisation": gaps + [60.0, 100.0, 70.0],
        "Memory used": gaps + [20.0, 50.0, None],
    }
    assert "6 GPU-hours, 50% mean utilisation" in quarter


def test_an_unmapped_gpus_page_says_no_registration_can_name_it(gpu_fleet, staff_client):
    page = staff_client.get(
        reverse("gpu_detail", args=[Gpu.objects.get(uuid="GPU-x1").pk])
    ).content.decode()

    assert "None: its host is not joined to the bill, so no registration can name it." in page


def test_metric_sources_are_listed_to_staff_and_leads_and_changed_by_staff_only(
    organization, staff_client, lead_client, member_client
):
    source = services.metric_source_create(
        name="rack-1", kind=MetricSource.Kind.DCGM, url="http://rack-1:9400/metrics"
    )
    MetricSource.objects.filter(pk=source.pk).update(
        health=MetricSource.Health.UNHEALTHY,
        last_error="http://rack-1:9400/metrics cannot be reached: timed out",
        consecutive_failures=3,
    )
    list_url = reverse("gpu_source_list")
    edit_url = reverse("gpu_source_edit", args=[source.pk])
    pause_url = reverse("gpu_source_pause", args=[source.pk])

    staff_page = staff_client.get(list_url).content.decode()
    lead_page = lead_client.get(list_url).content.decode()
    assert "cannot be reached: timed out" in staff_page and "3 failures in a row" in staff_page
    assert edit_url in staff_page
    assert "cannot be reached: timed out" in lead_page and edit_url not in lead_page
    assert member_client.get(list_url).status_code == 404
    assert lead_client.get(edit_url).status_code == 404
    assert lead_client.post(pause_url).status_code == 404
    assert lead_client.get(reverse("gpu_source_create")).status_code == 404
    source.refresh_from_db()
    assert source.is_paused is False


def test_staff_add_edit_and_pause_a_source(organization, staff_client):
    response = staff_client.post(
        reverse("gpu_source_create"),
        {
            "name": "prom",
            "kind": "prometheus",
            "url": "http://prometheus:9090",
            "interval_seconds": 300,
            "series_selector": 'job="gpu"',
            "step_seconds": 30,
            "query_window_minutes": 120,
        },
    )
    assert response.status_code == 302
    source = MetricSource.objects.get(name="prom")
    assert (source.kind, source.step_seconds, source.series_selector) == (
        "prometheus",
        30,
        'job="gpu"',
    )
    assert source.next_poll_at is not None

    staff_client.post(
        reverse("gpu_source_edit", args=[source.pk]),
        {
            "name": "prom",
            "kind": "prometheus",
            "url": "http://prometheus:9090",
            "interval_seconds": 60,
            "step_seconds": 30,
            "query_window_minutes": 120,
            "is_paused": "on",
        },
    )
    source.refresh_from_db()
    assert (source.interval_seconds, source.is_paused) == (60, True)

    response = staff_client.post(
        reverse("gpu_source_pause", args=[source.pk]), headers={"HX-Request": "true"}
    )
    source.refresh_from_db()
    assert source.is_paused is False
    assert response.content.decode().lstrip().startswith('<div id="source-rows"')


def test_poll_now_on_a_down_source_shows_its_error_without_a_worker(
    organization, staff_client, django_capture_on_commit_callbacks
):
    from costsite.celery import app as celery_app

    from .servers import closed_port_url

    source = services.metric_source_create(name="down", kind="dcgm", url=closed_port_url())
    celery_app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            response = staff_client.post(reverse("gpu_source_poll", args=[source.pk]))
    finally:
        celery_app.conf.task_always_eager = settings.CELERY_TASK_ALWAYS_EAGER

    assert response.status_code == 302
    source.refresh_from_db()
    assert source.health == MetricSource.Health.UNHEALTHY
    assert "Connection refused" in source.last_error
    assert "Connection refused" in staff_client.get(reverse("gpu_source_list")).content.decode()


def test_a_source_form_refuses_what_cannot_be_polled(organization, staff_client):
    response = staff_client.post(
        reverse("gpu_source_create"),
        {
            "name": "x",
            "kind": "dcgm",
            "url": "http://node:9400",
            "interval_seconds": 1,
            "step_seconds": 60,
            "query_window_minutes": 60,
            "series_selector": '{job="x"}',
        },
    )

    page = response.content.decode()
    assert "Give the exporter&#x27;s full metrics URL, e.g. http://node:9400/metrics." in page
    assert "Poll at most every 5 seconds." in page
    assert "Leave out the braces" in page
    assert not MetricSource.objects.exists()


def test_the_mapping_page_lists_unmapped_hosts_to_staff_and_leads_only(
    gpu_fleet, staff_client, lead_client, member_client
):
    url = reverse("gpu_host_mapping_list")

    page = lead_client.get(url).content.decode()
    assert "<code>mystery-box</code>" in page
    assert staff_client.get(url).status_code == 200
    assert member_client.get(url).status_code == 404


def test_the_mapping_page_pages_its_unmapped_hosts(gpu_fleet, load, lead_client, monkeypatch):
    from .helpers import at

    load(
        'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-b1",gpu="0",Hostname="box-b"} 30\n',
        "dcgm",
        taken_at=at("2026-07-14 10:00"),
    )
    monkeypatch.setattr("apps.gpu.selectors.UNMAPPED_HOSTS_PER_PAGE", 1)
    url = reverse("gpu_host_mapping_list")

    first = lead_client.get(url).content.decode()
    second = lead_client.get(url, {"page": "2"}).content.decode()

    assert 'Unmapped hosts <small class="muted">2</small>' in first
    assert "<code>mystery-box</code>" in first and "<code>box-b</code>" not in first
    assert "Hosts 1–1 of 2 · page 1 of 2" in first
    assert '<a href="?page=2#unmapped-title" rel="next">Next</a>' in first
    assert "<code>box-b</code>" in second and "<code>mystery-box</code>" not in second
    assert "Hosts 2–2 of 2 · page 2 of 2" in second
    assert '<a href="?page=1#unmapped-title" rel="prev">Previous</a>' in second
    # Mapping a host from the second page comes back to it.
    assert '<a href="?page=2&amp;host=box-b#mapping-form">Map</a>' in second
    assert '<a href="?host=mystery-box#mapping-form">Map</a>' in first
    assert 'rel="next"' not in second


def test_a_lead_maps_a_host_and_its_gpus_join_the_project(gpu_fleet, lead_client, lead, project):
    from tests.factories import ExperimentFactory, ExperimentResourceFactory

    from .helpers import at

    run = ExperimentFactory(project=project, started_at=at("2026-07-14 00:00"), ended_at=None)
    ExperimentResourceFactory(experiment=run, resource_id="i-0fff")

    response = lead_client.post(
        reverse("gpu_host_mapping_list"),
        {"host": " mystery-box ", "resource_id": "i-0fff", "note": "the desk-side box"},
    )

    assert response.status_code == 302
    mapping = HostMapping.objects.get(host="mystery-box")
    assert (mapping.resource_id, mapping.created_by) == ("i-0fff", lead)
    from apps.gpu import selectors

    assert selectors.experiment_gpu_usage(experiment=run).gpu_hours == 3.0
    page = lead_client.get(reverse("gpu_host_mapping_list")).content.decode()
    unmapped = page.split('id="unmapped-title"')[1].split('id="map-title"')[0]
    assert "mystery-box" not in unmapped
    assert "Every host that reported GPU metrics maps to a resource." in unmapped


def test_mapping_a_host_twice_is_refused_with_where_to_edit_it(gpu_fleet, lead_client):
    response = lead_client.post(
        reverse("gpu_host_mapping_list"),
        {"host": "gpu-node-9", "resource_id": "i-0fff"},
        headers={"HX-Request": "true"},
    )

    page = response.content.decode()
    assert page.lstrip().startswith("<form")
    assert "This host is mapped already: edit its mapping in the list below." in page
    assert HostMapping.objects.get(host="gpu-node-9").resource_id == "i-0bbb"


def test_an_outsider_gets_404_for_a_mapping_of_another_teams_resource(
    gpu_fleet, outsider_client, lead_client, staff_client
):
    theirs = HostMapping.objects.get(host="gpu-node-9")  # i-0bbb: the other team's run
    ours = services.host_mapping_set(host="spare", resource_id="i-0aaa")  # the lead's project's

    assert outsider_client.get(reverse("gpu_host_mapping_edit", args=[ours.pk])).status_code == 404
    assert (
        outsider_client.post(reverse("gpu_host_mapping_delete", args=[ours.pk])).status_code == 404
    )
    assert lead_client.get(reverse("gpu_host_mapping_edit", args=[theirs.pk])).status_code == 404
    assert (
        outsider_client.get(reverse("gpu_host_mapping_edit", args=[theirs.pk])).status_code == 200
    )
    assert HostMapping.objects.filter(pk=ours.pk).exists()

    response = lead_client.post(
        reverse("gpu_host_mapping_edit", args=[ours.pk]),
        {"host": "spare", "resource_id": "i-0aaa", "note": "moved"},
    )
    assert response.status_code == 302
    assert staff_client.post(reverse("gpu_host_mapping_delete", args=[ours.pk])).status_code == 302
    assert not HostMapping.objects.filter(pk=ours.pk).exists()


def test_the_gpu_table_sorts_by_the_column_asked_for(gpu_fleet, staff_client):
    def order(sort):
        page = staff_client.get(reverse("gpu_fleet"), {"sort": sort}).content.decode()
        table = page.split('id="gpus-title"')[1]
        return [
            Gpu.objects.get(pk=int(pk)).uuid for pk in re.findall(r'href="/gpus/(\d+)/"', table)
        ]

    assert order("gpu") == ["GPU-o1", "GPU-e1", "GPU-e2", "GPU-d1", "GPU-x1"]
    assert order("-gpu") == ["GPU-x1", "GPU-d1", "GPU-e2", "GPU-e1", "GPU-o1"]
    assert order("nonsense")[0] in {"GPU-o1", "GPU-e1", "GPU-e2", "GPU-d1", "GPU-x1"}


def test_the_nav_links_to_the_fleet(member_client, organization):
    page = member_client.get(reverse("gpu_fleet")).content.decode()

    assert f'<a href="{reverse("gpu_fleet")}">GPUs</a>' in page
    assert "No GPU-hours in this period" in page


@pytest.mark.parametrize("host", ["..", "gpu/node", "node\x07", "-node", ".gpu-node"])
def test_the_mapping_form_refuses_what_is_not_a_host_name(gpu_fleet, lead_client, host):
    response = lead_client.post(
        reverse("gpu_host_mapping_list"),
        {"host": host, "resource_id": "i-0fff"},
        headers={"HX-Request": "true"},
    )

    page = response.content.decode()
    assert (
        "A host name is labels of letters, digits, hyphens and underscores separated by single "
        "dots (gpu-node-7, ip-10-0-0-7.ec2.internal): each label 1 to 63 characters, not "
        "starting or ending with a hyphen, 253 characters in all."
    ) in page
    assert not HostMapping.objects.filter(resource_id="i-0fff").exists()


def test_a_host_mapped_between_the_forms_check_and_its_save_is_refused_not_replaced(
    gpu_fleet, lead_client, monkeypatch
):
    """The form's own check saw no mapping; another request maps the host before the save."""
    from apps.gpu.forms import HostMappingForm

    clean = HostMappingForm.validate_unique

    def raced(form):
        clean(form)
        HostMapping.objects.create(host="fresh-node", resource_id="i-0other")

    monkeypatch.setattr(HostMappingForm, "validate_unique", raced)
    response = lead_client.post(
        reverse("gpu_host_mapping_list"),
        {"host": "fresh-node", "resource_id": "i-0fff"},
        headers={"HX-Request": "true"},
    )

    assert "This host is mapped already: edit its mapping in the list below." in (
        response.content.decode()
    )
    assert HostMapping.objects.get(host="fresh-node").resource_id == "i-0other"
    assert services.host_mapping_create(host="fresh-node", resource_id="i-1") is None
