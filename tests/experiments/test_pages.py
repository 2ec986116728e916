from datetime import UTC, datetime

import pytest
from django.urls import reverse

from tests.factories import (
    ExperimentFactory,
    ExperimentResourceFactory,
    ModelFactory,
    ProjectFactory,
)

pytestmark = pytest.mark.django_db


def test_the_experiment_page_shows_its_run_hardware_resources_and_tags(member_client, project):
    model = ModelFactory(project=project, name="vit-l")
    experiment = ExperimentFactory(
        project=project,
        name="vit-l-pretrain",
        model=model,
        external_id="wandb-3kq9",
        gpu_count=8,
        gpu_type="H100",
        is_spot=True,
        tags={"dataset": "imagenet"},
        started_at=datetime(2025, 3, 1, 8, tzinfo=UTC),
        ended_at=datetime(2025, 3, 1, 18, tzinfo=UTC),
    )
    ExperimentResourceFactory(experiment=experiment, resource_id="i-0a1b2c3d4e5f67890")
    page = member_client.get(reverse("experiment_detail", args=[experiment.pk])).content.decode()
    assert '<span class="badge badge-succeeded">Succeeded</span>' in page
    assert "8 × H100" in page
    assert "spot / preemptible" in page
    assert "after 10\xa0hours" in page
    assert f'<a href="{reverse("model_detail", args=[model.pk])}">vit-l</a>' in page
    assert "<code>i-0a1b2c3d4e5f67890</code>" in page
    assert "<dt>dataset</dt><dd>imagenet</dd>" in page
    assert "<code>wandb-3kq9</code>" in page


def test_an_experiment_without_resources_says_how_to_add_them(member_client, project):
    experiment = ExperimentFactory(project=project)
    page = member_client.get(reverse("experiment_detail", args=[experiment.pk])).content.decode()
    assert "No resource ids registered:" in page
    assert reverse("experiment_edit", args=[experiment.pk]) in page


def test_a_model_of_a_project_the_viewer_cannot_see_is_not_named(
    member_client, project, other_team
):
    hidden = ModelFactory(project=ProjectFactory(team=other_team), name="secret-model")
    experiment = ExperimentFactory(project=project, model=hidden)
    page = member_client.get(reverse("experiment_detail", args=[experiment.pk])).content.decode()
    assert "secret-model" not in page
    assert "a model of another team's project" in page
