from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from tests.factories import (
    DeploymentFactory,
    DeploymentResourceFactory,
    ExperimentFactory,
    ModelFactory,
    ProjectFactory,
)
from tests.pages import table_rows

pytestmark = pytest.mark.django_db


def names(page: str, table: str) -> list[str]:
    """The first column of a table of the page: its runs' or deployments' names, as shown."""
    return [row[0] for row in table_rows(page, table)[1:]]


def test_the_model_page_lists_the_runs_that_produce_it_and_the_deployments_that_serve_it(
    member_client, project
):
    model = ModelFactory(project=project, name="ranker-v2")
    ExperimentFactory(project=project, model=model, name="ranker-v2-train")
    ExperimentFactory(project=project, name="unrelated-run")
    DeploymentFactory(project=project, model=model, name="ranker-prod")
    response = member_client.get(reverse("model_detail", args=[model.pk]))
    page = response.content.decode()
    assert names(page, "produced-runs") == ["ranker-v2-train"]
    assert names(page, "served-by") == ["ranker-prod"]
    assert "ranker-v2-train" in page and "ranker-prod" in page and "unrelated-run" not in page


def test_the_model_page_lists_its_runs_a_page_at_a_time_newest_first(member_client, project):
    model = ModelFactory(project=project, name="ranker-v2")
    for n in range(27):
        ExperimentFactory(
            project=project,
            model=model,
            name=f"train-{n:02d}",
            started_at=datetime(2025, 1, 1, tzinfo=UTC) + timedelta(days=n),
        )
    url = reverse("model_detail", args=[model.pk])
    first = member_client.get(url)
    page = first.content.decode()
    assert names(page, "produced-runs")[:2] == ["train-26", "train-25"]
    assert len(names(page, "produced-runs")) == 25
    assert 'Produced by <small class="muted">27</small>' in page
    assert "Page 1 of 2" in page and 'href="?runs=2#produced"' in page
    second = member_client.get(url, {"runs": 2})
    assert names(second.content.decode(), "produced-runs") == ["train-01", "train-00"]


def test_the_model_page_hides_runs_and_deployments_of_projects_the_viewer_cannot_see(
    member_client, project, other_team
):
    model = ModelFactory(project=project)
    hidden_project = ProjectFactory(team=other_team)
    ExperimentFactory(project=hidden_project, model=model, name="their-finetune")
    DeploymentFactory(project=hidden_project, model=model, name="their-serving")
    page = member_client.get(reverse("model_detail", args=[model.pk])).content.decode()
    assert "their-finetune" not in page and "their-serving" not in page
    assert "No experiments produce this model yet:" in page
    assert "Nothing serves this model yet:" in page


def test_the_deployment_page_shows_serving_hardware_and_resources(member_client, project):
    deployment = DeploymentFactory(
        project=project,
        name="ranker-prod",
        replicas=0,
        latency_objective_ms=250,
        data_residency=True,
        gpu_count=1,
        gpu_type="L4",
    )
    DeploymentResourceFactory(deployment=deployment, resource_id="ep-ranker")
    page = member_client.get(reverse("deployment_detail", args=[deployment.pk])).content.decode()
    assert "(scaled to zero)" in page
    assert "p95 ≤ 250 ms" in page
    assert "applies: data stays on our own infrastructure" in page
    assert "1 × L4" in page
    assert "<code>ep-ranker</code>" in page
    assert f'<a href="{reverse("model_detail", args=[deployment.model.pk])}">' in page
