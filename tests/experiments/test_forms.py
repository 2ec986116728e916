from datetime import UTC, datetime

import pytest
from django.urls import reverse

from apps.accounts.models import Organization
from apps.experiments.models import Experiment
from tests.factories import (
    ExperimentFactory,
    ExperimentResourceFactory,
    ModelFactory,
    ProjectFactory,
)

pytestmark = pytest.mark.django_db


def _data(**overrides):
    return {
        "name": "vit-l-pretrain",
        "kind": "training",
        "status": "succeeded",
        "started_at": "2025-03-01T08:00",
        "ended_at": "2025-03-02T20:30",
        "model": "",
        "external_id": "wandb-3kq9",
        "instance_type": "p4d.24xlarge",
        "gpu_type": "A100-40GB",
        "gpu_count": "8",
        "is_spot": "on",
        "region": "us-east-1",
        "resource_ids": "i-0a1b2c3d4e5f67890\n\n  i-0fedcba987654321 \ni-0a1b2c3d4e5f67890\n",
        "tags": "dataset=imagenet-21k\nowner = ana\n",
        **overrides,
    }


def _create(client, project, **overrides):
    return client.post(reverse("experiment_create", args=[project.slug]), _data(**overrides))


def _errors(response, field):
    return response.context["form"].errors.get(field)


def test_a_member_registers_an_experiment_with_its_resources_and_tags(
    member_client, member, project
):
    model = ModelFactory(project=project, name="vit-l")
    response = _create(member_client, project, model=model.pk)
    experiment = Experiment.objects.get()
    assert response["Location"] == reverse("experiment_detail", args=[experiment.pk])
    assert experiment.project == project
    assert experiment.model == model
    assert experiment.created_by == member
    assert (experiment.started_at, experiment.ended_at) == (
        datetime(2025, 3, 1, 8, 0, tzinfo=UTC),
        datetime(2025, 3, 2, 20, 30, tzinfo=UTC),
    )
    assert (experiment.gpu_count, experiment.gpu_type, experiment.is_spot) == (8, "A100-40GB", True)
    assert experiment.tags == {"dataset": "imagenet-21k", "owner": "ana"}
    assert sorted(experiment.resources.values_list("resource_id", flat=True)) == [
        "i-0a1b2c3d4e5f67890",
        "i-0fedcba987654321",
    ]


def test_times_typed_in_the_form_are_the_organisations_and_stored_in_utc(member_client, project):
    org = Organization.get()
    org.time_zone = "Europe/Berlin"
    org.save()
    _create(member_client, project)
    experiment = Experiment.objects.get()
    assert experiment.started_at == datetime(2025, 3, 1, 7, 0, tzinfo=UTC)  # CET is UTC+1
    edit = member_client.get(reverse("experiment_edit", args=[experiment.pk])).content.decode()
    assert 'value="2025-03-01T08:00"' in edit
    assert "Started (Europe/Berlin)" in edit


def test_with_htmx_the_registered_experiment_opens_its_page(member_client, project):
    response = member_client.post(
        reverse("experiment_create", args=[project.slug]), _data(), HTTP_HX_REQUEST="true"
    )
    experiment = Experiment.objects.get()
    assert response["HX-Redirect"] == reverse("experiment_detail", args=[experiment.pk])


@pytest.mark.parametrize(
    ("overrides", "field", "messages"),
    [
        ({"ended_at": "2025-03-01T07:59"}, "ended_at", ["The end must be after the start."]),
        ({"gpu_type": ""}, "gpu_type", ["Give the GPU type when the GPU count is above zero."]),
        ({"gpu_count": "0"}, "gpu_count", ["Give the number of GPUs of this type (at least 1)."]),
        (
            {"status": "running"},
            "ended_at",
            ["A running experiment has no end yet: clear the end or change the status."],
        ),
        (
            {"resource_ids": "i-1\ni-2 i-3\n" + "x" * 1001},
            "resource_ids",
            [
                "Line 2: “i-2 i-3” has a space in it; put one resource id per line.",
                "Line 3: a resource id has at most 1000 characters.",
            ],
        ),
        (
            {"tags": "dataset\n=x\nteam=a\nteam=b"},
            "tags",
            [
                "Line 1: write each tag as key=value.",
                "Line 2: write each tag as key=value.",
                "Line 4: the tag “team” is given twice.",
            ],
        ),
        ({"started_at": "yesterday"}, "started_at", ["Enter a valid date/time."]),
        ({"gpu_count": "-1"}, "gpu_count", ["Ensure this value is greater than or equal to 0."]),
    ],
)
def test_an_experiment_form_with_bad_input_says_what_is_wrong_and_saves_nothing(
    member_client, project, overrides, field, messages
):
    response = _create(member_client, project, **overrides)
    assert _errors(response, field) == messages
    assert not Experiment.objects.exists()


def test_an_external_id_is_unique_in_its_project_only(member_client, project, team):
    ExperimentFactory(project=project, external_id="wandb-3kq9")
    response = _create(member_client, project)
    assert _errors(response, "external_id") == [
        "An experiment with the external id “wandb-3kq9” already exists in this project."
    ]
    sibling = ProjectFactory(team=team)
    assert _create(member_client, sibling).status_code == 302
    assert Experiment.objects.filter(project=sibling, external_id="wandb-3kq9").exists()


def test_an_experiment_cannot_produce_a_model_of_a_project_the_user_cannot_see(
    member_client, project, other_team
):
    hidden = ModelFactory(project=ProjectFactory(team=other_team))
    response = _create(member_client, project, model=hidden.pk)
    assert _errors(response, "model") == ["Choose a model from a project you can see."]
    assert not Experiment.objects.exists()
    # and it is not offered either
    form_page = member_client.get(reverse("experiment_create", args=[project.slug]))
    assert hidden.name not in form_page.content.decode()


def test_with_htmx_errors_are_shown_in_place(member_client, project):
    response = member_client.post(
        reverse("experiment_create", args=[project.slug]),
        _data(ended_at="2025-02-01T00:00"),
        HTTP_HX_REQUEST="true",
    )
    page = response.content.decode()
    assert page.lstrip().startswith("<form")
    assert (
        '<ul class="errorlist" id="id_ended_at-errors"><li>The end must be after the start.' in page
    )
    assert 'aria-describedby="id_ended_at-errors"' in page


def test_editing_replaces_the_resource_ids_and_keeps_the_window_of_those_that_stay(
    member_client, project
):
    experiment = ExperimentFactory(project=project, external_id="wandb-3kq9")
    window = datetime(2025, 3, 1, 9, tzinfo=UTC)
    ExperimentResourceFactory(experiment=experiment, resource_id="i-keep", started_at=window)
    ExperimentResourceFactory(experiment=experiment, resource_id="i-drop")
    response = member_client.post(
        reverse("experiment_edit", args=[experiment.pk]),
        _data(resource_ids="i-keep\ni-new", name="renamed"),
    )
    assert response.status_code == 302
    experiment.refresh_from_db()
    assert experiment.name == "renamed"
    assert dict(experiment.resources.values_list("resource_id", "started_at")) == {
        "i-keep": window,
        "i-new": None,
    }


def test_the_edit_form_shows_the_current_resource_ids_and_tags(member_client, project):
    experiment = ExperimentFactory(project=project, tags={"dataset": "c4"})
    ExperimentResourceFactory(experiment=experiment, resource_id="i-aaa")
    ExperimentResourceFactory(experiment=experiment, resource_id="i-bbb")
    page = member_client.get(reverse("experiment_edit", args=[experiment.pk])).content.decode()
    assert "i-aaa\ni-bbb</textarea>" in page
    assert "dataset=c4</textarea>" in page


def test_an_edit_may_keep_a_model_the_editor_cannot_see(member_client, project, other_team):
    hidden = ModelFactory(project=ProjectFactory(team=other_team))
    experiment = ExperimentFactory(project=project, model=hidden)
    response = member_client.post(
        reverse("experiment_edit", args=[experiment.pk]), _data(model=hidden.pk)
    )
    assert response.status_code == 302
    experiment.refresh_from_db()
    assert experiment.model == hidden


def test_an_outsider_gets_404_on_registering_and_editing_and_nothing_changes(
    outsider_client, project
):
    experiment = ExperimentFactory(project=project, name="original")
    assert _create(outsider_client, project).status_code == 404
    response = outsider_client.post(
        reverse("experiment_edit", args=[experiment.pk]), _data(name="hijacked")
    )
    assert response.status_code == 404
    experiment.refresh_from_db()
    assert experiment.name == "original"
    assert Experiment.objects.count() == 1
