"""The API takes every body its schemas allow, and answers a JSON 413 over its own limit.

Django's DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB) is a limit for form posts; a metrics batch within the
schema's bounds can be eight times that.
"""

import json

import pytest
from django.conf import settings

from apps.api.schemas import MAX_METRICS_PER_POINT, MAX_POINTS, MetricsIn
from apps.experiments.models import MetricPoint
from tests.factories import ExperimentFactory

pytestmark = pytest.mark.django_db
METRICS = "/projects/image-ranking/experiments/run-1/metrics"


def _names(count: int) -> list[str]:
    return [f"{n:02d}-" + "m" * 97 for n in range(count)]  # 100 characters each, the most


def _batch(points: int, names: list[str], value: float) -> dict:
    return {
        "points": [
            {
                "step": 2**53 - 1 - step,
                "values": dict.fromkeys(names, value),
                "time": "2025-03-01T10:00:00.123456+00:00",
            }
            for step in range(points)
        ]
    }


def test_the_largest_metrics_batch_the_schema_allows_fits_the_api_limit():
    largest = _batch(MAX_POINTS, _names(MAX_METRICS_PER_POINT), -1.2345678901234567e-299)
    MetricsIn.model_validate(largest)  # valid: every bound at its maximum
    size = len(json.dumps(largest, separators=(",", ":")))
    assert size == 20_875_012
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE < size <= settings.API_MAX_BODY_BYTES
    assert settings.API_MAX_BODY_BYTES == 33_554_432


def test_a_valid_batch_over_djangos_form_limit_is_stored(member_api, project, settings):
    ExperimentFactory(project=project, external_id="run-1")
    batch = _batch(MAX_POINTS, _names(6), 0.5)
    assert len(json.dumps(batch)) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    answer = member_api.post(METRICS, batch)
    assert (answer.status, answer.body) == (200, {"created": 30_000, "updated": 0})
    assert MetricPoint.objects.count() == 30_000


@pytest.mark.parametrize("debug", [False, True])
def test_a_body_over_the_api_limit_is_a_json_413(member_api, project, settings, debug):
    settings.DEBUG = debug
    ExperimentFactory(project=project, external_id="run-1")
    body = b" " * (settings.API_MAX_BODY_BYTES + 1)
    response = member_api.client.post(
        "/api/v1" + METRICS, body, content_type="application/json", headers=member_api.headers
    )
    assert response.status_code == 413
    assert response.json() == {
        "detail": "The request body is 33,554,433 bytes; the API takes at most 33,554,432 bytes "
        "per call. Send the points or hours in smaller batches."
    }
    assert not MetricPoint.objects.exists()


def test_a_body_at_the_api_limit_is_read_and_judged_by_the_schema(member_api, project, settings):
    ExperimentFactory(project=project, external_id="run-1")
    point = json.dumps({"points": [{"step": 1, "values": {"loss": 2.5}}]}).encode()
    body = point + b" " * (settings.API_MAX_BODY_BYTES - len(point))  # JSON allows the spaces
    response = member_api.client.post(
        "/api/v1" + METRICS, body, content_type="application/json", headers=member_api.headers
    )
    assert (response.status_code, response.json()) == (200, {"created": 1, "updated": 0})
