from datetime import UTC, datetime

import pytest
from django.urls import reverse

from apps.deployments.models import Deployment, Model
from tests.factories import DeploymentFactory, ModelFactory, ProjectFactory

pytestmark = pytest.mark.django_db


def _deployment(serving, **overrides):
    return {
        "model": serving.pk,
        "name": "ranker-prod",
        "serving_pattern": "realtime",
        "replicas": "3",
        "latency_objective_ms": "250",
        "started_at": "2025-02-01T00:00",
        "ended_at": "",
        "external_id": "",
        "data_residency": "on",
        "instance_type": "g5.2xlarge",
        "gpu_type": "A10G",
        "gpu_count": "1",
        "region": "eu-west-1",
        "resource_ids": "arn:aws:sagemaker:eu-west-1:123456789012:endpoint/ranker-prod",
        "tags": "",
        **overrides,
    }


def _errors(response, field):
    return response.context["form"].errors.get(field)


def test_a_member_adds_a_model(member_client, project):
    response = member_client.post(
        reverse("model_create", args=[project.slug]),
        {"name": "ranker-v2", "external_id": "mlflow:ranker/2", "description": "Two towers."},
    )
    model = Model.objects.get()
    assert response["Location"] == reverse("model_detail", args=[model.pk])
    assert (model.project, model.name, model.external_id) == (
        project,
        "ranker-v2",
        "mlflow:ranker/2",
    )


def test_a_model_name_and_external_id_are_unique_in_the_project(member_client, project):
    ModelFactory(project=project, name="ranker-v2", external_id="mlflow:ranker/2")
    response = member_client.post(
        reverse("model_create", args=[project.slug]),
        {"name": "ranker-v2", "external_id": "mlflow:ranker/2", "description": ""},
    )
    assert _errors(response, "name") == [
        "A model named “ranker-v2” already exists in this project."
    ]
    assert _errors(response, "external_id") == [
        "A model with the external id “mlflow:ranker/2” already exists in this project."
    ]
    assert Model.objects.count() == 1


def test_renaming_a_model_to_its_own_name_is_fine(member_client, project):
    model = ModelFactory(project=project, name="ranker-v2")
    response = member_client.post(
        reverse("model_edit", args=[model.pk]),
        {"name": "ranker-v2", "external_id": "", "description": "now documented"},
    )
    assert response.status_code == 302
    model.refresh_from_db()
    assert model.description == "now documented"


def test_a_member_registers_a_deployment_with_its_resources(member_client, project):
    model = ModelFactory(project=project)
    response = member_client.post(
        reverse("deployment_create", args=[project.slug]), _deployment(model)
    )
    deployment = Deployment.objects.get()
    assert response["Location"] == reverse("deployment_detail", args=[deployment.pk])
    assert (deployment.project, deployment.model, deployment.replicas) == (project, model, 3)
    assert (deployment.latency_objective_ms, deployment.data_residency) == (250, True)
    assert deployment.is_fine_tuned is False
    assert deployment.started_at == datetime(2025, 2, 1, tzinfo=UTC)
    assert list(deployment.resources.values_list("resource_id", flat=True)) == [
        "arn:aws:sagemaker:eu-west-1:123456789012:endpoint/ranker-prod"
    ]


def test_the_model_is_preselected_when_coming_from_its_page(member_client, project):
    model = ModelFactory(project=project)
    url = reverse("deployment_create", args=[project.slug]) + f"?model={model.pk}"
    page = member_client.get(url).content.decode()
    assert f'<option value="{model.pk}" selected>' in page


@pytest.mark.parametrize(
    ("overrides", "field", "messages"),
    [
        ({"model": ""}, "model", ["This field is required."]),
        ({"ended_at": "2025-01-31T23:59"}, "ended_at", ["The end must be after the start."]),
        ({"gpu_type": ""}, "gpu_type", ["Give the GPU type when the GPU count is above zero."]),
        ({"replicas": "-1"}, "replicas", ["Ensure this value is greater than or equal to 0."]),
        (
            {"resource_ids": "ep-1, ep-2"},
            "resource_ids",
            ["Line 1: “ep-1, ep-2” has a space in it; put one resource id per line."],
        ),
    ],
)
def test_a_deployment_form_with_bad_input_says_what_is_wrong_and_saves_nothing(
    member_client, project, overrides, field, messages
):
    model = ModelFactory(project=project)
    response = member_client.post(
        reverse("deployment_create", args=[project.slug]), _deployment(model, **overrides)
    )
    assert _errors(response, field) == messages
    assert not Deployment.objects.exists()


def test_a_deployment_external_id_is_unique_in_the_project(member_client, project):
    model = ModelFactory(project=project)
    DeploymentFactory(project=project, model=model, external_id="svc-42")
    response = member_client.post(
        reverse("deployment_create", args=[project.slug]),
        _deployment(model, external_id="svc-42"),
    )
    assert _errors(response, "external_id") == [
        "A deployment with the external id “svc-42” already exists in this project."
    ]


def test_a_deployment_cannot_serve_a_model_the_user_cannot_see(member_client, project, other_team):
    hidden = ModelFactory(project=ProjectFactory(team=other_team))
    response = member_client.post(
        reverse("deployment_create", args=[project.slug]), _deployment(hidden)
    )
    assert _errors(response, "model") == ["Choose a model from a project you can see."]
    assert not Deployment.objects.exists()


def test_a_deployment_may_serve_a_model_of_another_project_of_the_team(
    member_client, project, team
):
    sibling_model = ModelFactory(project=ProjectFactory(team=team))
    response = member_client.post(
        reverse("deployment_create", args=[project.slug]), _deployment(sibling_model)
    )
    assert response.status_code == 302
    assert Deployment.objects.get().model == sibling_model


def test_editing_a_deployment_replaces_its_resources(member_client, project):
    deployment = DeploymentFactory(project=project)
    deployment.resources.create(resource_id="ep-old")
    response = member_client.post(
        reverse("deployment_edit", args=[deployment.pk]),
        _deployment(deployment.model, replicas="0", resource_ids="ep-new"),
    )
    assert response.status_code == 302
    deployment.refresh_from_db()
    assert deployment.replicas == 0
    assert list(deployment.resources.values_list("resource_id", flat=True)) == ["ep-new"]


def test_an_outsider_gets_404_on_models_and_deployments_and_nothing_changes(
    outsider_client, project
):
    model = ModelFactory(project=project, name="ranker")
    deployment = DeploymentFactory(project=project, model=model, replicas=2)
    assert (
        outsider_client.post(
            reverse("model_create", args=[project.slug]), {"name": "x"}
        ).status_code
        == 404
    )
    assert (
        outsider_client.post(
            reverse("model_edit", args=[model.pk]), {"name": "hijacked"}
        ).status_code
        == 404
    )
    assert (
        outsider_client.post(
            reverse("deployment_edit", args=[deployment.pk]), _deployment(model, replicas="99")
        ).status_code
        == 404
    )
    model.refresh_from_db()
    deployment.refresh_from_db()
    assert (model.name, deployment.replicas, Model.objects.count()) == ("ranker", 2, 1)
