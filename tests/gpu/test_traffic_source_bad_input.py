"""What a user or a Prometheus can send the deployment's traffic source pages that they must not
fall over on: a URL urlsplit refuses (a form error, not a 500), answers of the wrong shape and a
connection cut short (the source unhealthy with the reason, "Poll now" a redirect), and the list
page's queries, which do not grow with its sources."""

import io
import json

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.deployments.models import TrafficHour
from apps.gpu import services_traffic
from apps.gpu.models import MetricSource, TrafficSource
from apps.gpu.services import MetricSourceError
from tests.factories import DeploymentFactory
from tests.gpu.servers import LoopbackServer
from tests.gpu.test_traffic_source import QUERY, route

pytestmark = pytest.mark.django_db

BAD_URLS = ["http://[::1", "http://[prometheus]:9090"]


@pytest.fixture
def deployment(project):
    return DeploymentFactory(project=project, name="ranker-prod")


def matrix(result) -> dict:
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ({"status": "success", "data": ["matrix"]}, "expected a matrix (query_range), got 'list'."),
        (matrix({"values": []}), "the matrix's result is not a list of series."),
        (matrix(["pod-a"]), "the matrix's result is not a list of series."),
        (matrix([{"values": {"1740790800": "3"}}]), "a series' values are not a list of points."),
        (matrix([{"values": [[1740790800, "3", "x"]]}]), "is not a [time, value] pair."),
        (matrix([{"values": [1740790800]}]), "is not a [time, value] pair."),
        (matrix([{"values": [["soon", "3"]]}]), "the time 'soon' is not a time."),
        (matrix([{"values": [[1e20, "3"]]}]), "the time 1e+20 is not a time."),
    ],
    ids=[
        "data-list",
        "result-object",
        "series-text",
        "values-object",
        "triple",
        "bare",
        "word",
        "far",
    ],
)
def test_an_answer_of_the_wrong_shape_is_a_metric_source_error(answer, problem):
    stream = io.BytesIO(json.dumps(answer).encode())
    with pytest.raises(MetricSourceError) as raised:
        services_traffic.requests_by_hour(stream, name="http://prometheus:9090/api/v1/query_range")
    assert str(raised.value).startswith("http://prometheus:9090/api/v1/query_range: ")
    assert str(raised.value).endswith(problem), str(raised.value)


def wrong_shape(path: str, query: dict) -> tuple[int, str, str]:
    return 200, "application/json", json.dumps({"status": "success", "data": ["matrix"]})


@time_machine.travel("2025-03-01T03:20:00Z", tick=False)
@pytest.mark.parametrize(
    ("server", "problem"),
    [
        (lambda: LoopbackServer(wrong_shape), "expected a matrix (query_range), got 'list'."),
        (lambda: LoopbackServer(route), "answered a broken HTTP response (BadStatusLine)."),
    ],
    ids=["wrong-shape", "not-http"],
)
def test_poll_now_on_a_bad_answer_redirects_and_shows_the_source_unhealthy(
    lead_client, deployment, eager_celery, django_capture_on_commit_callbacks, server, problem
):
    with server() as prometheus:
        prometheus.not_http = problem.startswith("answered a broken")
        source = TrafficSource.objects.create(
            deployment=deployment, url=prometheus.url, requests_query=QUERY, query_window_hours=3
        )
        with django_capture_on_commit_callbacks(execute=True):
            answer = lead_client.post(
                reverse("deployment_traffic_source_poll", args=[deployment.pk, source.pk])
            )
    assert answer.status_code == 302
    source.refresh_from_db()
    assert (source.health, source.consecutive_failures) == ("unhealthy", 1)
    assert source.last_error.endswith(problem), source.last_error
    assert source.pulled_until is None
    assert not TrafficHour.objects.exists()
    page = lead_client.get(reverse("deployment_traffic_sources", args=[deployment.pk]))
    assert "Unhealthy" in page.content.decode()


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_url_urlsplit_refuses_is_a_form_error(lead_client, deployment, url):
    answer = lead_client.post(
        reverse("deployment_traffic_source_create", args=[deployment.pk]),
        {"url": url, "requests_query": QUERY, "interval_seconds": 900, "query_window_hours": 3},
    )
    assert answer.status_code == 200
    assert answer.context["form"].errors == {
        "url": ["Enter an http:// or https:// URL with a host, e.g. http://node:9400/metrics."]
    }
    assert not TrafficSource.objects.exists()


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_metric_source_url_urlsplit_refuses_is_a_form_error(organization, staff_client, url):
    answer = staff_client.post(
        reverse("gpu_source_create"),
        {
            "name": "node-1",
            "kind": "dcgm",
            "url": url,
            "interval_seconds": 60,
            "step_seconds": 60,
            "query_window_minutes": 60,
        },
    )
    assert answer.status_code == 200
    assert answer.context["form"].errors == {
        "url": ["Enter an http:// or https:// URL with a host, e.g. http://node:9400/metrics."]
    }
    assert not MetricSource.objects.exists()


def test_the_list_reads_the_same_queries_for_2_and_20_sources(lead_client, deployment):
    def queries(count: int) -> int:
        TrafficSource.objects.all().delete()
        for n in range(count):
            TrafficSource.objects.create(
                deployment=deployment, url=f"http://prometheus-{n}:9090", requests_query=QUERY
            )
        url = reverse("deployment_traffic_sources", args=[deployment.pk])
        lead_client.get(url)  # what a process reads once (the organisation) is read
        with CaptureQueriesContext(connection) as captured:
            page = lead_client.get(url)
        assert page.content.decode().count('<tr id="traffic-source-') == count
        return len(captured)

    assert queries(2) == queries(20)
