"""A deployment's traffic pulled from a Prometheus request counter on loopback (a small server
answering query_range as Prometheus does), equal to the hours counted by hand."""

import io
import json
from datetime import UTC, datetime

import pytest

from apps.deployments.models import TrafficHour
from apps.gpu import services_traffic
from apps.gpu.models import TrafficSource
from apps.gpu.services import MetricSourceError
from tests.factories import DeploymentFactory
from tests.gpu.servers import LoopbackServer

pytestmark = pytest.mark.django_db

QUERY = 'sum by (pod) (increase(vllm:request_success_total{model_name="chat"}[1h]))'


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# The counter's increase in the hour before each point, per pod (what Prometheus would answer):
# 00:00-01:00 120.4 (100.4 + 20), 01:00-02:00 0, 02:00-03:00 50 (pod b's NaN is no figure),
# 03:00-04:00 7.5 -> 8 (rounded half up).
POINTS = {
    "pod-a": {
        at("2025-03-01 01:00"): "100.4",
        at("2025-03-01 02:00"): "0",
        at("2025-03-01 03:00"): "50",
        at("2025-03-01 04:00"): "7.5",
    },
    "pod-b": {
        at("2025-03-01 01:00"): "20",
        at("2025-03-01 02:00"): "0",
        at("2025-03-01 03:00"): "NaN",
    },
}


def route(path: str, query: dict) -> tuple[int, str, str]:
    if path != "/api/v1/query_range":
        return 404, "text/plain", "404 page not found\n"
    start, end, step = float(query["start"]), float(query["end"]), float(query["step"])
    result = []
    for pod, points in POINTS.items():
        values = [
            [moment.timestamp(), value]
            for moment, value in sorted(points.items())
            if start <= moment.timestamp() <= end and (moment.timestamp() - start) % step == 0
        ]
        if values:
            result.append({"metric": {"pod": pod}, "values": values})
    body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    return 200, "application/json", json.dumps(body)


def failing(path: str, query: dict) -> tuple[int, str, str]:
    body = {"status": "error", "errorType": "unavailable", "error": "TSDB is not ready"}
    return 503, "application/json", json.dumps(body)


def hours_of(deployment) -> list[tuple[str, int]]:
    return [
        (f"{row.hour:%H:%M}", row.requests)
        for row in TrafficHour.objects.filter(deployment=deployment).order_by("hour")
    ]


def source_for(server, **fields) -> TrafficSource:
    return TrafficSource.objects.create(
        deployment=DeploymentFactory(), url=server.url, requests_query=QUERY, **fields
    )


def test_a_pull_writes_each_whole_hour_the_counter_increased_in():
    """At 03:20 with a 3-hour window: the points at 01:00, 02:00 and 03:00 are the hours from
    00:00, 01:00 and 02:00; the hour still running (03:00) waits."""
    with LoopbackServer(route) as server:
        source = source_for(server, query_window_hours=3)
        written = services_traffic.traffic_source_poll(source=source, now=at("2025-03-01 03:20"))
    assert written == 3
    assert hours_of(source.deployment) == [("00:00", 120), ("01:00", 0), ("02:00", 50)]
    path, query = server.requests[0]
    assert (path, query["query"], query["step"]) == ("/api/v1/query_range", QUERY, "3600")
    assert query["start"] == f"{at('2025-03-01 01:00').timestamp():.3f}"
    assert query["end"] == f"{at('2025-03-01 03:00').timestamp():.3f}"
    source.refresh_from_db()
    assert source.pulled_until == at("2025-03-01 02:00")
    assert (source.health, source.last_samples) == ("healthy", 3)


def test_the_next_pull_starts_after_the_last_hour_and_a_pull_again_replaces_hours():
    with LoopbackServer(route) as server:
        source = source_for(server, query_window_hours=3)
        services_traffic.traffic_source_poll(source=source, now=at("2025-03-01 03:20"))
        source.refresh_from_db()
        assert services_traffic.traffic_source_poll(source=source, now=at("2025-03-01 04:05")) == 1
        assert server.requests[-1][1]["start"] == f"{at('2025-03-01 04:00').timestamp():.3f}"
        # Pulled again from the start: the same hours, replaced, never counted twice.
        TrafficSource.objects.filter(pk=source.pk).update(pulled_until=None)
        source.refresh_from_db()
        services_traffic.traffic_source_poll(source=source, now=at("2025-03-01 04:05"))
    assert hours_of(source.deployment) == [
        ("00:00", 120),
        ("01:00", 0),
        ("02:00", 50),
        ("03:00", 8),
    ]


def test_a_prometheus_error_marks_the_source_unhealthy_and_writes_nothing():
    with LoopbackServer(failing) as server:
        source = source_for(server)
        with pytest.raises(MetricSourceError, match="answered HTTP 503"):
            services_traffic.traffic_source_poll(source=source, now=at("2025-03-01 03:20"))
    source.refresh_from_db()
    assert source.health == "unhealthy"
    assert "unavailable: TSDB is not ready" in source.last_error
    assert source.pulled_until is None
    assert not TrafficHour.objects.exists()


def test_an_answer_that_is_not_a_matrix_is_refused():
    answer = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}})
    with pytest.raises(
        MetricSourceError, match="expected a matrix \\(query_range\\), got 'vector'"
    ):
        services_traffic.requests_by_hour(io.BytesIO(answer.encode()), name="q")
