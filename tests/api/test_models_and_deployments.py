"""PUT/GET of models and deployments by external id, and a deployment's hourly traffic."""

from datetime import UTC, datetime

import pytest
import time_machine

from apps.billing.models import AttributionRun
from apps.deployments.models import Deployment, DeploymentResource, Model, TrafficHour
from tests.factories import DeploymentFactory, ModelFactory, ProjectFactory

pytestmark = pytest.mark.django_db
MODEL = "/projects/image-ranking/models/ranker-v2"
SERVING = "/projects/image-ranking/deployments/ranker-prod"


# ---- models ----


def test_a_put_creates_a_model_and_a_retry_updates_the_same_one(member_api, project):
    first = member_api.put(MODEL, {"name": "ranker v2", "description": "Ranks images."})
    second = member_api.put(MODEL, {"name": "ranker v2", "description": "Ranks images."})
    model = Model.objects.get()
    assert (first.status, second.status) == (201, 200)
    assert first.body == {
        "id": model.pk,
        "url": f"http://testserver/models/{model.pk}/",
        "project": "image-ranking",
        "external_id": "ranker-v2",
        "name": "ranker v2",
        "description": "Ranks images.",
    }
    assert second.body == first.body


def test_a_model_name_taken_in_the_project_is_a_400(member_api, project):
    ModelFactory(project=project, name="ranker")
    answer = member_api.put(MODEL, {"name": "ranker"})
    assert answer.status == 400
    assert answer.body["errors"] == {
        "name": ["A model named “ranker” already exists in this project."]
    }
    assert Model.objects.count() == 1


def test_a_model_without_a_name_is_named_after_its_external_id(member_api, project):
    assert member_api.put(MODEL, {}).body["name"] == "ranker-v2"


def test_an_outsiders_token_gets_404_for_models(outsider_api, project):
    ModelFactory(project=project, external_id="ranker-v2", name="kept")
    assert outsider_api.put(MODEL, {"name": "taken"}).status == 404
    assert outsider_api.get(MODEL).status == 404
    assert Model.objects.get().name == "kept"


# ---- deployments ----


def test_a_put_creates_a_deployment_with_its_model_and_resources(member_api, project):
    model = ModelFactory(project=project, external_id="ranker-v2", name="ranker")
    answer = member_api.put(
        SERVING,
        {
            "name": "ranker (prod)",
            "model": {"external_id": "ranker-v2"},
            "serving_pattern": "realtime",
            "replicas": 3,
            "latency_objective_ms": 250,
            "cold_start_seconds": 90,
            "data_residency": True,
            "is_fine_tuned": False,
            "started_at": "2025-02-01T00:00:00Z",
            "instance_type": "g5.2xlarge",
            "gpu_type": "A10G",
            "gpu_count": 1,
            "region": "eu-west-1",
            "tags": {"team": "vision"},
            "resources": [{"resource_id": "arn:aws:sagemaker:eu-west-1:1:endpoint/ranker"}],
        },
    )
    assert answer.status == 201
    deployment = Deployment.objects.get()
    assert deployment.model == model
    assert answer.body == {
        "id": deployment.pk,
        "url": f"http://testserver/deployments/{deployment.pk}/",
        "project": "image-ranking",
        "external_id": "ranker-prod",
        "name": "ranker (prod)",
        "model": {"project": "image-ranking", "external_id": "ranker-v2", "name": "ranker"},
        "serving_pattern": "realtime",
        "replicas": 3,
        "latency_objective_ms": 250,
        "cold_start_seconds": 90,
        "data_residency": True,
        "is_fine_tuned": False,
        "started_at": "2025-02-01T00:00:00Z",
        "ended_at": None,
        "instance_type": "g5.2xlarge",
        "gpu_type": "A10G",
        "gpu_count": 1,
        "is_spot": False,
        "region": "eu-west-1",
        "tags": {"team": "vision"},
        "resources": [
            {
                "resource_id": "arn:aws:sagemaker:eu-west-1:1:endpoint/ranker",
                "started_at": None,
                "ended_at": None,
            }
        ],
    }


def test_a_retried_deployment_put_keeps_one_deployment(member_api, project):
    ModelFactory(project=project, external_id="ranker-v2")
    body = {"model": {"external_id": "ranker-v2"}, "resources": [{"resource_id": "i-9"}]}
    assert [member_api.put(SERVING, body).status for _ in range(3)] == [201, 200, 200]
    assert Deployment.objects.count() == 1
    assert DeploymentResource.objects.count() == 1


def test_a_new_deployment_needs_its_model(member_api, project):
    answer = member_api.put(SERVING, {"replicas": 2})
    assert answer.status == 400
    assert answer.body["errors"] == {"model": ["A new deployment needs the model it serves."]}
    assert not Deployment.objects.exists()


def test_an_update_scales_replicas_and_leaves_the_rest(member_api, project):
    DeploymentFactory(project=project, external_id="ranker-prod", replicas=2, name="kept")
    answer = member_api.put(SERVING, {"replicas": 0})
    assert answer.status == 200
    assert (answer.body["replicas"], answer.body["name"]) == (0, "kept")


def test_bad_deployment_fields_are_400s(member_api, project):
    answer = member_api.put(
        SERVING,
        {
            "serving_pattern": "streaming",
            "replicas": 2**40,
            "latency_objective_ms": 0,
            "gpu_type": "A10G",
            "gpu_count": 0,
        },
    )
    assert answer.status == 400
    assert answer.body["errors"] == {
        "serving_pattern": ["Input should be 'realtime' or 'batch'"],
        "replicas": ["Input should be less than or equal to 2147483647"],
        "latency_objective_ms": ["Input should be greater than or equal to 1"],
    }


def test_a_gpu_type_without_a_count_is_a_400(member_api, project):
    ModelFactory(project=project, external_id="ranker-v2")
    answer = member_api.put(
        SERVING, {"model": {"external_id": "ranker-v2"}, "gpu_type": "A10G", "gpu_count": 0}
    )
    assert answer.body["errors"] == {
        "gpu_count": ["Give the number of GPUs of this type (at least 1)."]
    }


def test_an_outsiders_token_gets_404_for_deployments(outsider_api, project):
    DeploymentFactory(project=project, external_id="ranker-prod", replicas=2)
    hours = {"hours": [{"hour": "2025-03-01T10:00:00Z", "requests": 1}]}
    answers = [
        outsider_api.put(SERVING, {"replicas": 9}),
        outsider_api.get(SERVING),
        outsider_api.post(SERVING + "/traffic", hours),
        outsider_api.get(SERVING + "/traffic"),
    ]
    assert [a.status for a in answers] == [404, 404, 404, 404]
    assert Deployment.objects.get().replicas == 2
    assert not TrafficHour.objects.exists()


def test_a_model_of_an_invisible_project_is_not_shown(member_api, project, other_team):
    hidden = ModelFactory(project=ProjectFactory(team=other_team), external_id="secret")
    DeploymentFactory(project=project, model=hidden, external_id="ranker-prod")
    assert member_api.get(SERVING).body["model"] is None


# ---- traffic ----


def _hour(hour: str, requests: int, **more) -> dict:
    return {"hour": hour, "requests": requests, **more}


def test_hourly_traffic_is_stored_in_batches_one_row_per_hour(member_api, project):
    deployment = DeploymentFactory(project=project, external_id="ranker-prod")
    answer = member_api.post(
        SERVING + "/traffic",
        {
            "hours": [
                _hour(
                    "2025-03-01T10:00:00Z",
                    1200,
                    duplicate_requests=300,
                    tokens_in=480000,
                    tokens_out=96000,
                    latency_p50_ms=120.5,
                    latency_p95_ms=310,
                    latency_p99_ms=720,
                ),
                _hour("2025-03-01T12:00:00+01:00", 900),
            ]
        },
    )
    assert (answer.status, answer.body) == (200, {"created": 2, "updated": 0})
    first, second = TrafficHour.objects.filter(deployment=deployment).order_by("hour")
    assert (first.hour, first.requests, first.duplicate_requests) == (
        datetime(2025, 3, 1, 10, tzinfo=UTC),
        1200,
        300,
    )
    assert (first.tokens_in, first.tokens_out) == (480000, 96000)
    assert (first.latency_p50_ms, first.latency_p95_ms, first.latency_p99_ms) == (
        120.5,
        310.0,
        720.0,
    )
    assert (second.hour, second.requests, second.latency_p95_ms) == (
        datetime(2025, 3, 1, 11, tzinfo=UTC),
        900,
        None,
    )


def test_an_hour_sent_again_replaces_its_figures(member_api, project):
    DeploymentFactory(project=project, external_id="ranker-prod")
    member_api.post(SERVING + "/traffic", {"hours": [_hour("2025-03-01T10:00:00Z", 100)]})
    answer = member_api.post(
        SERVING + "/traffic",
        {"hours": [_hour("2025-03-01T10:00:00Z", 150), _hour("2025-03-01T11:00:00Z", 80)]},
    )
    assert answer.body == {"created": 1, "updated": 1}
    assert list(TrafficHour.objects.order_by("hour").values_list("requests", flat=True)) == [
        150,
        80,
    ]


def test_bad_traffic_hours_are_400s_and_nothing_is_stored(member_api, project):
    DeploymentFactory(project=project, external_id="ranker-prod")
    answer = member_api.post(
        SERVING + "/traffic",
        {
            "hours": [
                _hour("2025-03-01T10:00:00Z", 100),
                _hour("2025-03-01T10:30:00Z", 100),
                _hour("2025-03-01T11:00:00Z", 100, duplicate_requests=101),
                _hour(
                    "2025-03-01T12:00:00Z",
                    100,
                    latency_p50_ms=200,
                    latency_p95_ms=150,
                ),
                _hour("2025-03-01T13:00:00Z", -5),
            ]
        },
    )
    assert answer.status == 400
    assert answer.body["errors"] == {
        "hours.1.hour": [
            "Give the start of an hour (minutes and seconds zero), e.g. 2025-03-01T10:00:00Z."
        ],
        "hours.2": ["duplicate_requests cannot be more than requests."],
        "hours.3": ["Latency percentiles cannot decrease: p50 ≤ p95 ≤ p99."],
        "hours.4.requests": ["Input should be greater than or equal to 0"],
    }
    assert not TrafficHour.objects.exists()


@time_machine.travel(datetime(2025, 3, 8, 9, 30, tzinfo=UTC), tick=False)
def test_reading_traffic_gives_the_last_seven_days_or_the_range_asked(member_api, project):
    DeploymentFactory(project=project, external_id="ranker-prod")
    member_api.post(
        SERVING + "/traffic",
        {
            "hours": [
                _hour("2025-03-01T09:00:00Z", 1),  # more than 7 days before 10:00 today
                _hour("2025-03-01T10:00:00Z", 2),
                _hour("2025-03-08T09:00:00Z", 3),
            ]
        },
    )
    recent = member_api.get(SERVING + "/traffic")
    assert [h["requests"] for h in recent.body["hours"]] == [2, 3]
    asked = member_api.get(
        SERVING + "/traffic", start="2025-03-01T00:00:00Z", end="2025-03-01T10:00:00Z"
    )
    assert [h["requests"] for h in asked.body["hours"]] == [1]
    too_long = member_api.get(
        SERVING + "/traffic", start="2025-01-01T00:00:00Z", end="2025-03-01T00:00:00Z"
    )
    assert (too_long.status, too_long.body["errors"]) == (
        400,
        {"end": ["Ask for at most 31 days at a time."]},
    )
    backwards = member_api.get(
        SERVING + "/traffic", start="2025-03-02T00:00:00Z", end="2025-03-01T00:00:00Z"
    )
    assert backwards.body["errors"] == {"end": ["The end must be after the start."]}


def test_changed_deployment_resources_are_attributed_again(member_api, project):
    DeploymentFactory(project=project, external_id="ranker-prod")
    member_api.put(SERVING, {"resources": [{"resource_id": "ep-1"}]})
    member_api.put(SERVING, {"resources": [{"resource_id": "ep-1"}]})
    scheduled = AttributionRun.objects.values_list("resource_ids", flat=True)
    assert list(scheduled) == [["ep-1"]]
