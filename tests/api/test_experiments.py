"""PUT/GET /api/v1/projects/<slug>/experiments/<external id> and its metrics."""

from datetime import UTC, datetime

import pytest
import time_machine

from apps.billing.models import AttributionRun
from apps.experiments.models import Experiment, ExperimentResource, MetricPoint
from tests.factories import ExperimentFactory, ModelFactory, ProjectFactory

pytestmark = pytest.mark.django_db
RUN = "/projects/image-ranking/experiments/run-42"
NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def test_a_put_creates_the_experiment_with_all_it_says(member_api, project, member):
    model = ModelFactory(project=project, name="ranker", external_id="ranker-v2")
    answer = member_api.put(
        RUN,
        {
            "name": "ranker pretrain",
            "kind": "fine_tuning",
            "status": "running",
            "started_at": "2025-03-01T08:00:00+01:00",
            "model": {"external_id": "ranker-v2"},
            "instance_type": "p4d.24xlarge",
            "gpu_type": "A100-40GB",
            "gpu_count": 8,
            "is_spot": True,
            "region": "us-east-1",
            "tags": {"dataset": "imagenet-21k"},
            "resources": [
                {"resource_id": "i-0a1b2c3d4e5f67890", "started_at": "2025-03-01T07:00:00Z"},
                {"resource_id": "vol-0123"},
            ],
        },
    )
    assert answer.status == 201
    experiment = Experiment.objects.get()
    assert answer.body == {
        "id": experiment.pk,
        "url": f"http://testserver/experiments/{experiment.pk}/",
        "project": "image-ranking",
        "external_id": "run-42",
        "name": "ranker pretrain",
        "kind": "fine_tuning",
        "status": "running",
        "started_at": "2025-03-01T07:00:00Z",
        "ended_at": None,
        "model": {"project": "image-ranking", "external_id": "ranker-v2", "name": "ranker"},
        "instance_type": "p4d.24xlarge",
        "gpu_type": "A100-40GB",
        "gpu_count": 8,
        "is_spot": True,
        "region": "us-east-1",
        "tags": {"dataset": "imagenet-21k"},
        "resources": [
            {
                "resource_id": "i-0a1b2c3d4e5f67890",
                "started_at": "2025-03-01T07:00:00Z",
                "ended_at": None,
            },
            {"resource_id": "vol-0123", "started_at": None, "ended_at": None},
        ],
    }
    assert experiment.created_by == member
    assert experiment.model == model
    assert experiment.started_at == datetime(2025, 3, 1, 7, tzinfo=UTC)


def test_a_retried_put_creates_one_experiment_and_answers_200(member_api, project):
    body = {"name": "retried", "status": "running", "resources": [{"resource_id": "i-1"}]}
    first = member_api.put(RUN, body)
    second = member_api.put(RUN, body)
    assert (first.status, second.status) == (201, 200)
    assert first.body == second.body
    assert Experiment.objects.count() == 1
    assert ExperimentResource.objects.count() == 1


def test_the_same_external_id_in_another_project_is_another_experiment(member_api, team):
    ProjectFactory(team=team, slug="image-ranking")
    ProjectFactory(team=team, slug="captioning")
    member_api.put(RUN, {})
    member_api.put("/projects/captioning/experiments/run-42", {})
    assert Experiment.objects.filter(external_id="run-42").count() == 2


def test_a_new_experiment_without_a_name_is_named_after_its_external_id(member_api, project):
    answer = member_api.put(RUN, {})
    assert answer.status == 201
    assert (answer.body["name"], answer.body["status"]) == ("run-42", "planned")


def test_an_update_changes_only_the_fields_it_sends(member_api, project):
    ExperimentFactory(
        project=project, external_id="run-42", name="kept", gpu_count=4, tags={"a": "1"}
    )
    answer = member_api.put(RUN, {"tags": {"b": "2"}})
    assert answer.status == 200
    assert (answer.body["name"], answer.body["gpu_count"], answer.body["tags"]) == (
        "kept",
        4,
        {"b": "2"},
    )


@time_machine.travel(NOW, tick=False)
def test_becoming_running_stamps_the_start_and_finishing_stamps_the_end(member_api, project):
    started = member_api.put(RUN, {"status": "running"})
    assert (started.body["started_at"], started.body["ended_at"]) == ("2025-03-01T12:00:00Z", None)
    with time_machine.travel(datetime(2025, 3, 1, 15, 30, tzinfo=UTC), tick=False):
        finished = member_api.put(RUN, {"status": "succeeded"})
    assert finished.status == 200
    assert (finished.body["started_at"], finished.body["ended_at"]) == (
        "2025-03-01T12:00:00Z",
        "2025-03-01T15:30:00Z",
    )


@time_machine.travel(NOW, tick=False)
def test_times_the_script_sends_win_over_the_stamps(member_api, project):
    member_api.put(RUN, {"status": "running", "started_at": "2025-03-01T09:00:00Z"})
    answer = member_api.put(RUN, {"status": "failed", "ended_at": "2025-03-01T10:00:00Z"})
    assert (answer.body["started_at"], answer.body["ended_at"]) == (
        "2025-03-01T09:00:00Z",
        "2025-03-01T10:00:00Z",
    )


@time_machine.travel(NOW, tick=False)
def test_a_stopped_run_resumes_and_loses_its_end(member_api, project):
    ExperimentFactory(
        project=project,
        external_id="run-42",
        status=Experiment.Status.STOPPED,
        started_at=datetime(2025, 3, 1, 8, tzinfo=UTC),
        ended_at=datetime(2025, 3, 1, 9, tzinfo=UTC),
    )
    answer = member_api.put(RUN, {"status": "running"})
    assert answer.status == 200
    assert (answer.body["status"], answer.body["started_at"], answer.body["ended_at"]) == (
        "running",
        "2025-03-01T08:00:00Z",
        None,
    )


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "succeeded",
            "running",
            "Cannot change the status from succeeded to running: a succeeded run is finished. "
            "Register a retry as a new experiment with its own external_id.",
        ),
        (
            "failed",
            "succeeded",
            "Cannot change the status from failed to succeeded: a failed run is finished. "
            "Register a retry as a new experiment with its own external_id.",
        ),
        (
            "running",
            "planned",
            "Cannot change the status from running to planned: a running run can only become "
            "succeeded, failed or stopped.",
        ),
        (
            "stopped",
            "succeeded",
            "Cannot change the status from stopped to succeeded: a stopped run can only become "
            "running.",
        ),
    ],
)
def test_a_status_move_against_the_rules_is_a_400_that_changes_nothing(
    member_api, project, old, new, message
):
    experiment = ExperimentFactory(project=project, external_id="run-42", status=old, name="x")
    answer = member_api.put(RUN, {"status": new, "name": "renamed"})
    assert answer.status == 400
    assert answer.body == {"detail": "1 field is invalid.", "errors": {"status": [message]}}
    experiment.refresh_from_db()
    assert (experiment.status, experiment.name) == (old, "x")


def test_sending_the_status_it_already_has_is_no_move(member_api, project):
    ExperimentFactory(project=project, external_id="run-42", status="succeeded")
    assert member_api.put(RUN, {"status": "succeeded"}).status == 200


def test_a_running_experiment_cannot_be_given_an_end(member_api, project):
    answer = member_api.put(RUN, {"status": "running", "ended_at": "2025-03-01T10:00:00Z"})
    assert answer.status == 400
    assert answer.body["errors"] == {
        "ended_at": [
            "A running experiment has no end yet: leave out ended_at or change the status."
        ]
    }
    assert not Experiment.objects.exists()


def test_the_end_before_the_start_and_gpus_without_a_type_are_400s(member_api, project):
    answer = member_api.put(
        RUN,
        {
            "status": "succeeded",
            "started_at": "2025-03-01T10:00:00Z",
            "ended_at": "2025-03-01T09:00:00Z",
            "gpu_count": 8,
        },
    )
    assert answer.status == 400
    assert answer.body == {
        "detail": "2 problems in the input.",
        "errors": {
            "ended_at": ["The end must be after the start."],
            "gpu_type": ["Give the GPU type when the GPU count is above zero."],
        },
    }


def test_malformed_fields_are_400s_that_name_each_field(member_api, project):
    answer = member_api.put(
        RUN,
        {
            "stauts": "running",
            "kind": "pretraining",
            "started_at": "2025-03-01T08:00:00",
            "gpu_count": -1,
            "name": "",
            "tags": {"dataset": 5},
            "resources": [
                {"resource_id": "i-1 i-2"},
                {
                    "resource_id": "i-3",
                    "started_at": "2025-03-01T10:00:00Z",
                    "ended_at": "2025-03-01T09:00:00Z",
                },
            ],
        },
    )
    assert answer.status == 400
    assert answer.body["errors"] == {
        "stauts": ["Extra inputs are not permitted"],
        "kind": ["Input should be 'training', 'fine_tuning', 'evaluation' or 'notebook'"],
        "started_at": ["Input should have timezone info"],
        "gpu_count": ["Input should be greater than or equal to 0"],
        "name": ["String should have at least 1 character"],
        "tags.dataset": ["Input should be a valid string"],
        "resources.0.resource_id": ["A resource id has no spaces in it; send one id per entry."],
        "resources.1": ["The end must be after the start."],
    }
    assert not Experiment.objects.exists()


def test_a_resource_twice_with_the_same_start_is_a_400(member_api, project):
    answer = member_api.put(RUN, {"resources": [{"resource_id": "i-1"}, {"resource_id": "i-1"}]})
    assert answer.status == 400
    assert answer.body["errors"] == {
        "resources": ["The resource “i-1” is given twice with the same start."]
    }


def test_text_with_a_nul_character_and_absurd_times_are_400s(member_api, project):
    answer = member_api.put(RUN, {"name": "a\x00b", "started_at": "0001-01-01T00:00:00+05:00"})
    assert answer.status == 400
    assert answer.body["errors"] == {
        "name": ["Must not contain the NUL character."],
        "started_at": ["Give a time between the years 2000 and 2100."],
    }


def test_a_body_that_is_not_json_is_a_400(member_api, project):
    response = member_api.client.put(
        "/api/v1" + RUN, "{not json", content_type="application/json", headers=member_api.headers
    )
    assert response.status_code == 400
    assert response.json() == {"detail": "Cannot parse request body"}


def test_resources_sent_again_replace_the_list_and_keep_what_stays(member_api, project):
    member_api.put(
        RUN,
        {
            "resources": [
                {"resource_id": "i-1", "started_at": "2025-03-01T08:00:00Z"},
                {"resource_id": "i-2"},
            ]
        },
    )
    kept = ExperimentResource.objects.get(resource_id="i-1")
    answer = member_api.put(
        RUN,
        {
            "resources": [
                {
                    "resource_id": "i-1",
                    "started_at": "2025-03-01T08:00:00Z",
                    "ended_at": "2025-03-01T09:00:00Z",
                },
                {"resource_id": "i-3"},
            ]
        },
    )
    assert [use["resource_id"] for use in answer.body["resources"]] == ["i-1", "i-3"]
    assert ExperimentResource.objects.get(resource_id="i-1").pk == kept.pk
    assert answer.body["resources"][0]["ended_at"] == "2025-03-01T09:00:00Z"
    assert (
        member_api.put(RUN, {"name": "no resources sent"}).body["resources"]
        == (answer.body["resources"])
    )


def test_the_model_may_be_in_another_visible_project_and_null_unlinks_it(member_api, team, project):
    other = ProjectFactory(team=team, slug="shared-models")
    ModelFactory(project=other, external_id="base-7b")
    linked = member_api.put(RUN, {"model": {"external_id": "base-7b", "project": "shared-models"}})
    assert linked.body["model"]["project"] == "shared-models"
    assert member_api.put(RUN, {"model": None}).body["model"] is None


def test_a_model_the_user_cannot_see_is_a_400_on_model(member_api, project, other_team):
    ModelFactory(project=ProjectFactory(team=other_team, slug="secret"), external_id="m")
    answer = member_api.put(RUN, {"model": {"external_id": "m", "project": "secret"}})
    assert answer.status == 400
    assert answer.body["errors"] == {
        "model": [
            "No model with the external id “m” in a project “secret” that you can see; register "
            "it first (PUT /api/v1/projects/{slug}/models/{external_id})."
        ]
    }


def test_get_reads_the_experiment_and_404s_an_unknown_one(member_api, project):
    member_api.put(RUN, {"name": "read me"})
    assert member_api.get(RUN).body["name"] == "read me"
    missing = member_api.get("/projects/image-ranking/experiments/nope")
    assert (missing.status, missing.body) == (
        404,
        {"detail": "No experiment with the external id “nope” in the project “image-ranking”."},
    )


def test_an_outsiders_token_gets_404_for_every_experiment_call(outsider_api, project):
    ExperimentFactory(project=project, external_id="run-42")
    metrics = {"points": [{"step": 1, "values": {"loss": 1.0}}]}
    answers = [
        outsider_api.put(RUN, {"name": "taken over"}),
        outsider_api.get(RUN),
        outsider_api.post(RUN + "/metrics", metrics),
        outsider_api.get(RUN + "/metrics"),
    ]
    assert [a.status for a in answers] == [404, 404, 404, 404]
    assert answers[0].body == {"detail": "No such project."}
    assert not MetricPoint.objects.exists()
    assert Experiment.objects.get().name != "taken over"


def test_a_lead_and_staff_register_too(lead_api, staff_api, project):
    assert lead_api.put(RUN, {}).status == 201
    assert staff_api.put(RUN, {}).status == 200


# ---- metrics ----


def test_metric_points_are_stored_in_batches(member_api, project):
    member_api.put(RUN, {})
    answer = member_api.post(
        RUN + "/metrics",
        {
            "points": [
                {"step": step, "values": {"train/loss": 2.5 - step / 100, "lr": 0.001}}
                for step in range(0, 1000, 10)
            ]
        },
    )
    assert (answer.status, answer.body) == (200, {"created": 200, "updated": 0})
    loss = MetricPoint.objects.filter(name="train/loss").order_by("step")
    assert loss.count() == 100
    assert (loss.first().step, loss.first().value, loss.last().step, loss.last().value) == (
        0,
        2.5,
        990,
        2.5 - 990 / 100,
    )


def test_a_step_sent_again_overwrites_its_value_and_never_duplicates(member_api, project):
    member_api.put(RUN, {})
    member_api.post(RUN + "/metrics", {"points": [{"step": 100, "values": {"loss": 2.0}}]})
    answer = member_api.post(
        RUN + "/metrics",
        {
            "points": [
                {"step": 100, "values": {"loss": 1.9}},
                {"step": 200, "values": {"loss": 1.7}},
                {"step": 200, "values": {"loss": 1.6}},
            ]
        },
    )
    assert answer.body == {"created": 1, "updated": 1}
    assert list(MetricPoint.objects.order_by("step").values_list("step", "value")) == [
        (100, 1.9),
        (200, 1.6),
    ]


def test_the_metrics_summary_gives_each_metrics_range_and_last_value(member_api, project):
    member_api.put(RUN, {})
    member_api.post(
        RUN + "/metrics",
        {
            "points": [
                {"step": 1, "values": {"loss": 3.0, "acc": 0.1}},
                {"step": 2, "values": {"loss": 1.5}},
                {"step": 3, "values": {"loss": 2.0, "acc": 0.4}},
            ]
        },
    )
    assert member_api.get(RUN + "/metrics").body == {
        "metrics": [
            {
                "name": "acc",
                "points": 2,
                "first_step": 1,
                "last_step": 3,
                "last_value": 0.4,
                "min_value": 0.1,
                "max_value": 0.4,
            },
            {
                "name": "loss",
                "points": 3,
                "first_step": 1,
                "last_step": 3,
                "last_value": 2.0,
                "min_value": 1.5,
                "max_value": 3.0,
            },
        ]
    }


def test_bad_metric_points_are_400s_and_nothing_of_the_batch_is_stored(member_api, project):
    member_api.put(RUN, {})
    response = member_api.client.post(
        "/api/v1" + RUN + "/metrics",
        '{"points": [{"step": 1, "values": {"loss": 1.0}}, {"step": 2, "values": {"loss": NaN}},'
        ' {"step": -1, "values": {"bad name": 1}}, {"step": 4, "values": {}}]}',
        content_type="application/json",
        headers=member_api.headers,
    )
    assert response.status_code == 400
    assert response.json()["errors"] == {
        "points.1.values.loss": ["Input should be a finite number"],
        "points.2.step": ["Input should be greater than or equal to 0"],
        "points.2.values.bad name.[key]": [
            "A metric name uses letters, digits and _ . : / @ - only (e.g. train/loss)."
        ],
        "points.3.values": ["Dictionary should have at least 1 item after validation, not 0"],
    }
    assert not MetricPoint.objects.exists()


def test_metrics_for_an_unregistered_run_are_a_404(member_api, project):
    answer = member_api.post(RUN + "/metrics", {"points": [{"step": 1, "values": {"loss": 1}}]})
    assert answer.status == 404


def test_changed_resources_have_their_billed_history_attributed_again(member_api, project):
    member_api.put(RUN, {"resources": [{"resource_id": "i-1"}, {"resource_id": "i-2"}]})
    member_api.put(RUN, {"resources": [{"resource_id": "i-2"}, {"resource_id": "i-3"}]})
    member_api.put(RUN, {"name": "no resources sent"})
    member_api.put(RUN, {"resources": [{"resource_id": "i-2"}, {"resource_id": "i-3"}]})
    member_api.put(RUN, {"resources": [{"resource_id": "i-2", "ended_at": "2025-03-01T10:00:00Z"}]})
    scheduled = AttributionRun.objects.order_by("pk").values_list("resource_ids", flat=True)
    assert list(scheduled) == [["i-1", "i-2"], ["i-1", "i-3"], ["i-2", "i-3"]]
