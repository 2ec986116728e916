"""POST /api/v1/projects/<slug>/deployments/<id>/traffic/log: a request-log CSV through the API,
the same service as the upload page: the hours counted by hand, all or nothing, errors naming the
file, row and column, an hour sent again replacing it, and the schema documenting it."""

import json
from datetime import UTC, datetime

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from apps.accounts.services import api_token_create
from apps.deployments.models import TrafficHour
from tests.deployments.test_request_log import LOG
from tests.factories import DeploymentFactory

PATH = "/api/v1/projects/image-ranking/deployments/ranker-prod/traffic/log"
HEADER = "timestamp,latency_ms,tokens_in,tokens_out,request_hash\n"


def send(user, text: str, *, name: str = "requests.csv", field: str = "file"):
    secret = api_token_create(user=user, name="test").secret
    response = Client().post(
        PATH,
        {field: SimpleUploadedFile(name, text.encode(), content_type="text/csv")},
        headers={"Authorization": f"Bearer {secret}"},
    )
    return response.status_code, json.loads(response.content)


def hours(deployment) -> list[tuple]:
    return list(
        TrafficHour.objects.filter(deployment=deployment)
        .order_by("hour")
        .values_list("hour", "requests", "duplicate_requests", "tokens_in", "latency_p95_ms")
    )


def test_a_request_log_posted_becomes_the_hours_counted_by_hand(member, project):
    """As tests/deployments/test_request_log.py counts LOG: 10:00 5 requests (1 repeat, 400
    tokens in, p95 300 ms), 11:00 2 requests (1 repeat, 10 tokens in, p95 60 ms)."""
    deployment = DeploymentFactory(project=project, external_id="ranker-prod")
    assert send(member, LOG) == (200, {"created": 2, "updated": 0})
    assert hours(deployment) == [
        (datetime(2025, 3, 1, 10, tzinfo=UTC), 5, 1, 400, 300.0),
        (datetime(2025, 3, 1, 11, tzinfo=UTC), 2, 1, 10, 60.0),
    ]
    # Sent again: the same hours replaced, never counted twice.
    assert send(member, LOG) == (200, {"created": 0, "updated": 2})
    assert TrafficHour.objects.filter(deployment=deployment).count() == 2
    assert hours(deployment)[0][1] == 5


def test_a_bad_log_is_a_400_naming_row_and_column_and_nothing_is_written(member, project):
    DeploymentFactory(project=project, external_id="ranker-prod")
    bad = HEADER + "2025-03-01T10:00:00Z,12,1,1,a\n2025-03-01T10:06:00Z,fast,1.5,1,a\n"
    status, body = send(member, bad, name="day.csv")
    assert status == 400
    assert body == {
        "detail": "2 problems in the input.",
        "errors": {
            "file": [
                "day.csv, row 3, column tokens_in: “1.5” is not a whole number of tokens.",
                "day.csv, row 3, column latency_ms: “fast” is not a duration in ms.",
            ]
        },
    }
    assert not TrafficHour.objects.exists()


def test_an_empty_log_and_a_missing_file_are_400s(member, project):
    DeploymentFactory(project=project, external_id="ranker-prod")
    assert send(member, HEADER, name="empty.csv") == (
        400,
        {
            "detail": "1 field is invalid.",
            "errors": {"file": ["empty.csv: no requests in the file."]},
        },
    )
    status, body = send(member, LOG, field="upload")
    assert status == 400
    assert list(body["errors"]) == ["file"]
    assert not TrafficHour.objects.exists()


def test_an_outsider_gets_404_and_writes_nothing(outsider, project):
    DeploymentFactory(project=project, external_id="ranker-prod")
    assert send(outsider, LOG) == (404, {"detail": "No such project."})
    assert not TrafficHour.objects.exists()


def test_the_schema_documents_the_upload(member_client):
    schema = json.loads(member_client.get("/api/v1/openapi.json").content)
    operation = schema["paths"]["/api/v1/projects/{slug}/deployments/{external_id}/traffic/log"][
        "post"
    ]
    assert operation["summary"] == "Upload a request log (CSV) as hourly traffic"
    assert "multipart/form-data" in operation["requestBody"]["content"]
    assert sorted(operation["responses"]) == ["200", "400", "401", "404"]
    assert "All or nothing" in operation["description"]


pytestmark = pytest.mark.django_db


def test_cells_python_reads_badly_are_a_400_not_a_500(member, project):
    """A time before the first UTC year once moved to UTC, a superscript digit (str.isdigit()
    takes it, int() refuses it) and token counts beyond a bigint, alone and summed by the hour."""
    DeploymentFactory(project=project, external_id="ranker-prod")
    half = str(2**62)
    bad = (
        HEADER
        + "0001-01-01T00:30:00+01:00,12,1,1,a\n"
        + "2025-03-01T10:00:00Z,12,²,1,b\n"
        + f"2025-03-01T10:01:00Z,12,{2**63},1,c\n"
        + f"2025-03-01T11:00:00Z,12,1,{half},d\n"
        + f"2025-03-01T11:01:00Z,12,1,{half},e\n"
    )
    status, body = send(member, bad, name="odd.csv")
    assert status == 400
    assert body["errors"]["file"] == [
        "odd.csv, row 2, column timestamp: “0001-01-01T00:30:00+01:00” is not an ISO 8601 time "
        "with a time zone.",
        "odd.csv, row 3, column tokens_in: “²” is not a whole number of tokens.",
        f"odd.csv, row 4, column tokens_in: “{2**63}” is more tokens than a figure holds "
        "(9,223,372,036,854,775,807 at most).",
        "odd.csv: the hour from 2025-03-01 11:00 UTC adds up to more than "
        "9,223,372,036,854,775,807 tokens_out (what a figure of traffic holds).",
    ]
    assert not TrafficHour.objects.exists()
