"""The deployment's traffic source pages (no browser): its team's lead adds a Prometheus request
counter, sees its health and last poll and polls it now (through the loopback server of
test_traffic_source.py); members, outsiders and leads of other teams get 404."""

import pytest
import time_machine
from django.urls import reverse

from apps.deployments.models import TrafficHour
from apps.gpu.models import TrafficSource
from tests.factories import DeploymentFactory
from tests.gpu.servers import LoopbackServer
from tests.gpu.test_traffic_source import QUERY, at, failing, hours_of, route

pytestmark = pytest.mark.django_db


@pytest.fixture
def deployment(project):
    return DeploymentFactory(project=project, name="ranker-prod")


def form(url: str, **more) -> dict:
    return {
        "url": f"  {url}  ",
        "requests_query": QUERY,
        "interval_seconds": 900,
        "query_window_hours": 3,
        **more,
    }


def test_a_lead_adds_a_source_and_sees_it_not_polled_yet(lead_client, deployment):
    answer = lead_client.post(
        reverse("deployment_traffic_source_create", args=[deployment.pk]),
        form("http://prometheus:9090"),
    )
    assert answer.status_code == 302
    assert answer["Location"] == reverse("deployment_traffic_sources", args=[deployment.pk])
    source = TrafficSource.objects.get()
    assert (source.deployment, source.url, source.requests_query) == (
        deployment,
        "http://prometheus:9090",
        QUERY,
    )
    assert (source.interval_seconds, source.query_window_hours, source.is_paused) == (900, 3, False)
    assert source.next_poll_at is not None  # due at the next tick
    page = lead_client.get(reverse("deployment_traffic_sources", args=[deployment.pk]))
    text = page.content.decode()
    assert "Not polled yet" in text
    assert "none yet (the first pull reaches back 3 h)" in text
    detail = lead_client.get(reverse("deployment_detail", args=[deployment.pk])).content.decode()
    assert reverse("deployment_traffic_sources", args=[deployment.pk]) in detail


def test_bad_settings_are_refused_beside_their_fields(lead_client, deployment):
    answer = lead_client.post(
        reverse("deployment_traffic_source_create", args=[deployment.pk]),
        form("ftp://prometheus", interval_seconds=30, query_window_hours=745, requests_query=" "),
    )
    assert answer.status_code == 200
    errors = answer.context["form"].errors
    assert errors["interval_seconds"] == [
        "Poll at most every 60 seconds (a new hour comes once an hour)."
    ]
    assert errors["query_window_hours"] == ["The first pull reaches back 1 to 744 hours (31 days)."]
    assert errors["requests_query"] == ["This field is required."]
    assert "url" in errors
    assert not TrafficSource.objects.exists()


@time_machine.travel("2025-03-01T03:20:00Z", tick=False)
def test_poll_now_writes_the_whole_hours_and_the_page_shows_the_poll(
    lead_client, deployment, eager_celery, django_capture_on_commit_callbacks
):
    with LoopbackServer(route) as server:
        source = TrafficSource.objects.create(
            deployment=deployment, url=server.url, requests_query=QUERY, query_window_hours=3
        )
        with django_capture_on_commit_callbacks(execute=True):
            answer = lead_client.post(
                reverse("deployment_traffic_source_poll", args=[deployment.pk, source.pk])
            )
    assert answer.status_code == 302
    assert hours_of(deployment) == [("00:00", 120), ("01:00", 0), ("02:00", 50)]
    source.refresh_from_db()
    assert (source.health, source.last_samples, source.pulled_until) == (
        "healthy",
        3,
        at("2025-03-01 02:00"),
    )
    text = lead_client.get(
        reverse("deployment_traffic_sources", args=[deployment.pk])
    ).content.decode()
    assert "Healthy" in text
    assert "last success 1 Mar 03:20:00: 3 hours written" in text
    assert "1 Mar 2025 02:00 UTC" in text


@time_machine.travel("2025-03-01T03:20:00Z", tick=False)
def test_a_failing_poll_shows_unhealthy_with_its_error(
    lead_client, deployment, eager_celery, django_capture_on_commit_callbacks
):
    with LoopbackServer(failing) as server:
        source = TrafficSource.objects.create(
            deployment=deployment, url=server.url, requests_query=QUERY
        )
        with django_capture_on_commit_callbacks(execute=True):
            lead_client.post(
                reverse("deployment_traffic_source_poll", args=[deployment.pk, source.pk])
            )
    text = lead_client.get(
        reverse("deployment_traffic_sources", args=[deployment.pk])
    ).content.decode()
    assert "Unhealthy" in text
    assert "1 failure in a row" in text
    assert "unavailable: TSDB is not ready" in text
    assert not TrafficHour.objects.exists()


def test_a_paused_source_is_not_polled_and_resumes(lead_client, deployment):
    source = TrafficSource.objects.create(
        deployment=deployment, url="http://prometheus:9090", requests_query=QUERY
    )
    pause = reverse("deployment_traffic_source_pause", args=[deployment.pk, source.pk])
    lead_client.post(pause)
    source.refresh_from_db()
    assert source.is_paused is True
    answer = lead_client.post(
        reverse("deployment_traffic_source_poll", args=[deployment.pk, source.pk]), follow=True
    )
    assert "Traffic source http://prometheus:9090 is paused: resume it to poll it." in (
        answer.content.decode()
    )
    lead_client.post(pause)
    source.refresh_from_db()
    assert source.is_paused is False


def test_a_lead_edits_the_query_and_the_next_pull_still_starts_after_the_last_hour(
    lead_client, deployment
):
    source = TrafficSource.objects.create(
        deployment=deployment,
        url="http://prometheus:9090",
        requests_query=QUERY,
        pulled_until=at("2025-03-01 02:00"),
    )
    answer = lead_client.post(
        reverse("deployment_traffic_source_edit", args=[deployment.pk, source.pk]),
        form("http://prometheus:9090", requests_query="sum(increase(http_requests_total[1h]))"),
    )
    assert answer.status_code == 302
    source.refresh_from_db()
    assert source.requests_query == "sum(increase(http_requests_total[1h]))"
    assert source.pulled_until == at("2025-03-01 02:00")


def test_members_outsiders_and_other_leads_get_404(
    member_client, outsider_client, deployment, lead_client
):
    source = TrafficSource.objects.create(
        deployment=deployment, url="http://prometheus:9090", requests_query=QUERY
    )
    other = DeploymentFactory()  # another team's: its lead is not this team's
    pages = [
        ("get", reverse("deployment_traffic_sources", args=[deployment.pk])),
        ("get", reverse("deployment_traffic_source_create", args=[deployment.pk])),
        ("get", reverse("deployment_traffic_source_edit", args=[deployment.pk, source.pk])),
        ("post", reverse("deployment_traffic_source_poll", args=[deployment.pk, source.pk])),
        ("post", reverse("deployment_traffic_source_pause", args=[deployment.pk, source.pk])),
    ]
    for client in (member_client, outsider_client):
        assert [getattr(client, method)(url).status_code for method, url in pages] == [404] * 5
    # The lead of the deployment's team cannot reach another team's source through its URL.
    assert (
        lead_client.get(
            reverse("deployment_traffic_source_edit", args=[other.pk, source.pk])
        ).status_code
        == 404
    )
    member_detail = member_client.get(reverse("deployment_detail", args=[deployment.pk]))
    assert reverse("deployment_traffic_sources", args=[deployment.pk]) not in (
        member_detail.content.decode()
    )
    source.refresh_from_db()
    assert source.is_paused is False
    assert source.last_attempt_at is None


def test_staff_may_set_up_any_deployments_source(staff_client, deployment):
    page = staff_client.get(reverse("deployment_traffic_sources", args=[deployment.pk]))
    assert page.status_code == 200
