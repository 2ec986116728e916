"""Registering a resource id grants no sight of another team's GPUs: an id a run or deployment
of a project the user cannot see has registered is refused, on the forms and over the API."""

import pytest
from django.urls import reverse

from apps.accounts.models import Membership
from apps.deployments.models import Deployment
from apps.experiments.models import Experiment, ExperimentResource
from apps.gpu.models import Gpu
from tests.api.conftest import api_for
from tests.deployments.test_forms import _deployment
from tests.experiments.test_forms import _data
from tests.factories import (
    DeploymentFactory,
    DeploymentResourceFactory,
    ExperimentFactory,
    ExperimentResourceFactory,
    MembershipFactory,
    ModelFactory,
    ProjectFactory,
)

pytestmark = pytest.mark.django_db


def refused(resource_id: str) -> str:
    return (
        f"“{resource_id}” is registered by a run or deployment of a project you cannot see; "
        "registering it here would show you that project's GPUs. Ask staff to sort out who "
        "runs on it."
    )


@pytest.fixture
def hidden(other_team):
    """Another team's run on i-0hidden, whose GPU reports metrics under that host name, and
    its deployment on a SageMaker endpoint given by ARN."""
    project = ProjectFactory(team=other_team, slug="hidden-project")
    run = ExperimentFactory(project=project)
    ExperimentResourceFactory(experiment=run, resource_id="i-0hidden")
    DeploymentResourceFactory(
        deployment=DeploymentFactory(project=project),
        resource_id="arn:aws:sagemaker:eu-west-1:1:endpoint/hidden-endpoint",
    )
    return Gpu.objects.create(uuid="GPU-hidden", host="i-0hidden")


def test_the_experiment_form_refuses_another_teams_resource_and_the_gpu_stays_hidden(
    member_client, project, hidden
):
    # Today's code took it, and the member then read the other team's GPU page.
    response = member_client.post(
        reverse("experiment_create", args=[project.slug]),
        _data(resource_ids="i-0mine\ni-0hidden\nhidden-endpoint"),
    )
    assert response.status_code == 200
    assert response.context["form"].errors["resource_ids"] == [
        refused("i-0hidden"),
        refused("hidden-endpoint"),
    ]
    assert not Experiment.objects.filter(project=project).exists()
    assert member_client.get(reverse("gpu_detail", args=[hidden.pk])).status_code == 404


def test_an_id_ending_in_a_slash_is_refused_by_its_last_part_too(
    member_client, project, other_team
):
    # Registered by the other team with a slash after it, i-0slash still names their GPU.
    theirs = ExperimentFactory(project=ProjectFactory(team=other_team, slug="slashed"))
    ExperimentResourceFactory(experiment=theirs, resource_id="instance/i-0slash/")
    gpu = Gpu.objects.create(uuid="GPU-slash", host="i-0slash")

    response = member_client.post(
        reverse("experiment_create", args=[project.slug]), _data(resource_ids="i-0slash")
    )

    assert response.context["form"].errors["resource_ids"] == [refused("i-0slash")]
    assert not Experiment.objects.filter(project=project).exists()
    assert member_client.get(reverse("gpu_detail", args=[gpu.pk])).status_code == 404


def test_the_deployment_form_refuses_it_by_the_last_part_of_an_arn_too(
    member_client, project, hidden
):
    serving = ModelFactory(project=project)
    response = member_client.post(
        reverse("deployment_create", args=[project.slug]),
        _deployment(serving, resource_ids="arn:aws:ec2:eu-west-1:1:instance/i-0hidden"),
    )
    assert response.context["form"].errors["resource_ids"] == [
        refused("arn:aws:ec2:eu-west-1:1:instance/i-0hidden")
    ]
    assert not Deployment.objects.filter(project=project).exists()


def test_the_api_refuses_it_naming_the_entry(member, project, hidden):
    api = api_for(member)
    answer = api.put(
        "/projects/image-ranking/experiments/run-1",
        {"resources": [{"resource_id": "i-0mine"}, {"resource_id": "i-0hidden"}]},
    )
    assert (answer.status, answer.body) == (
        400,
        {
            "detail": "1 field is invalid.",
            "errors": {"resources.1.resource_id": [refused("i-0hidden")]},
        },
    )
    serving = ModelFactory(project=project, external_id="ranker")
    answer = api.put(
        "/projects/image-ranking/deployments/prod",
        {
            "model": {"external_id": serving.external_id},
            "resources": [{"resource_id": "hidden-endpoint"}],
        },
    )
    assert answer.status == 400
    assert answer.body["errors"] == {"resources.0.resource_id": [refused("hidden-endpoint")]}
    assert not ExperimentResource.objects.filter(experiment__project=project).exists()
    assert api.get("/host-mappings").status == 404


def test_whoever_already_sees_the_other_project_may_register_it(
    member, staff, project, hidden, other_team
):
    assert (
        api_for(staff)
        .put(
            "/projects/image-ranking/experiments/run-1",
            {"resources": [{"resource_id": "i-0hidden"}]},
        )
        .status
        == 201
    )
    MembershipFactory(team=other_team, user=member, role=Membership.Role.MEMBER)
    assert (
        api_for(member)
        .put(
            "/projects/image-ranking/experiments/run-2",
            {"resources": [{"resource_id": "i-0hidden"}]},
        )
        .status
        == 201
    )


def test_an_id_the_run_already_has_is_kept_when_it_is_saved_again(member, project, hidden):
    """Registered before the rule, or by staff: keeping it grants nothing new."""
    run = ExperimentFactory(project=project, external_id="run-1")
    ExperimentResourceFactory(experiment=run, resource_id="i-0hidden")
    answer = api_for(member).put(
        "/projects/image-ranking/experiments/run-1",
        {"resources": [{"resource_id": "i-0hidden"}, {"resource_id": "i-0mine"}]},
    )
    assert answer.status == 200
    assert sorted(run.resources.values_list("resource_id", flat=True)) == ["i-0hidden", "i-0mine"]
