"""A request-log CSV counted into hourly traffic, equal to the hours counted by hand; all or
nothing, errors naming the file, row and column, and an hour sent again replacing it."""

import io
from datetime import UTC, datetime

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.deployments.models import TrafficHour
from apps.deployments.request_log import nearest_rank
from apps.deployments.services import deployment_traffic_import_log
from tests.factories import DeploymentFactory, ModelFactory

pytestmark = pytest.mark.django_db

# 10:00: 5 requests (hash a twice: 1 duplicate; an empty hash is never one), latencies 120, 80,
# 300, 95 and none; tokens in 100+200+50+50+0 = 400, out 10+20+5+5+0 = 40.
# 11:00: 2 requests (hash b twice: 1 duplicate; the 10:00 hour's b is another hour's),
# latencies 40, 60.
LOG = """timestamp,latency_ms,tokens_in,tokens_out,request_hash
2025-03-01T10:00:01Z,120,100,10,a
2025-03-01T10:15:00+00:00,80,200,20,b
2025-03-01T10:59:59.5Z,300,50,5,a
2025-03-01T11:30:00+01:00,95,50,5,
2025-03-01T10:20:00Z,,,,
2025-03-01T11:00:00Z,40,7,1,b
2025-03-01T11:10:00Z,60,3,1,b
"""


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def rows(deployment) -> list[tuple]:
    return list(
        TrafficHour.objects.filter(deployment=deployment)
        .order_by("hour")
        .values_list(
            "hour",
            "requests",
            "duplicate_requests",
            "tokens_in",
            "tokens_out",
            "latency_p50_ms",
            "latency_p95_ms",
            "latency_p99_ms",
        )
    )


def upload(deployment, text: str, name: str = "requests.csv"):
    return deployment_traffic_import_log(
        deployment=deployment, stream=io.BytesIO(text.encode()), name=name
    )


def test_a_request_log_becomes_the_hours_counted_by_hand():
    """10:00 latencies sorted 80, 95, 120, 300: p50 rank ⌈2⌉ = 95, p95 and p99 rank 4 = 300.
    11:00 (the +01:00 row is 10:30 UTC, so 10:00): 40, 60: p50 rank 1 = 40, p95 rank 2 = 60."""
    deployment = DeploymentFactory()
    written = upload(deployment, LOG)
    assert (written.created, written.updated) == (2, 0)
    assert rows(deployment) == [
        (at("2025-03-01 10:00"), 5, 1, 400, 40, 95.0, 300.0, 300.0),
        (at("2025-03-01 11:00"), 2, 1, 10, 2, 40.0, 60.0, 60.0),
    ]


def test_an_hour_sent_again_replaces_it():
    deployment = DeploymentFactory()
    upload(deployment, LOG)
    again = (
        "timestamp,latency_ms,tokens_in,tokens_out,request_hash\n2025-03-01T11:05:00Z,10,1,1,x\n"
    )
    written = upload(deployment, again)
    assert (written.created, written.updated) == (0, 1)
    assert rows(deployment)[1] == (at("2025-03-01 11:00"), 1, 0, 1, 1, 10.0, 10.0, 10.0)
    assert TrafficHour.objects.filter(deployment=deployment).count() == 2


def test_a_bad_file_names_each_row_and_column_and_imports_nothing():
    deployment = DeploymentFactory()
    bad = (
        "Timestamp,Latency_ms,tokens_in,tokens_out,request_hash\n"
        "2025-03-01T10:00:00Z,12,1,1,a\n"
        "2025-03-01 10:05,12,1,1,a\n"
        "2025-03-01T10:06:00Z,fast,1.5,1,a\n"
        "yesterday,1,1,1,a\n"
    )
    with pytest.raises(ValidationError) as caught:
        upload(deployment, bad)
    assert caught.value.messages == [
        "requests.csv, row 3, column timestamp: “2025-03-01 10:05” is not an ISO 8601 time with "
        "a time zone (add Z or +00:00).",
        "requests.csv, row 4, column tokens_in: “1.5” is not a whole number of tokens.",
        "requests.csv, row 4, column latency_ms: “fast” is not a duration in ms.",
        "requests.csv, row 5, column timestamp: “yesterday” is not an ISO 8601 time with a time "
        "zone.",
    ]
    assert not TrafficHour.objects.exists()


def test_a_log_without_a_timestamp_column_is_refused():
    with pytest.raises(ValidationError) as caught:
        upload(DeploymentFactory(), "when,latency_ms\n1,2\n", name="log.csv")
    assert caught.value.messages == [
        "log.csv, row 1: no column timestamp (the header has when, latency_ms)."
    ]


def test_nearest_rank_takes_an_observed_value():
    assert nearest_rank([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert nearest_rank([1.0] * 19 + [100.0], 95) == 1.0
    assert nearest_rank([1.0] * 19 + [100.0], 99) == 100.0
    assert nearest_rank([], 50) is None


def test_the_upload_page_imports_the_log_and_shows_errors(member_client, project):
    deployment = DeploymentFactory(project=project, model=ModelFactory(project=project))
    url = reverse("deployment_traffic_upload", args=[deployment.pk])
    assert member_client.get(url).status_code == 200
    response = member_client.post(
        url, {"file": SimpleUploadedFile("requests.csv", LOG.encode(), "text/csv")}
    )
    assert response.status_code == 302
    assert TrafficHour.objects.filter(deployment=deployment).count() == 2
    response = member_client.post(
        url,
        {"file": SimpleUploadedFile("bad.csv", b"timestamp\nnope\n", "text/csv")},
    )
    page = response.content.decode()
    assert "Nothing was imported" in page
    assert "bad.csv, row 2, column timestamp: “nope” is not an ISO 8601 time" in page
