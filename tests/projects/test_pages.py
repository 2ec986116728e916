from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.experiments.models import Experiment
from apps.projects.selectors import MonthStatusCount, project_experiments_by_month
from tests.factories import (
    DeploymentFactory,
    ExperimentFactory,
    ModelFactory,
    ProjectFactory,
)

pytestmark = pytest.mark.django_db
S = Experiment.Status


def test_the_project_list_shows_team_budget_and_counts(member_client, project):
    model = ModelFactory(project=project)
    ExperimentFactory.create_batch(2, project=project, status=S.SUCCEEDED)
    ExperimentFactory(project=project, status=S.RUNNING, ended_at=None)
    ModelFactory(project=project)
    DeploymentFactory(project=project, model=model)
    response = member_client.get(reverse("project_list"))
    [row] = response.context["projects"]
    assert (row.experiment_count, row.running_count, row.model_count, row.deployment_count) == (
        3,
        1,
        2,
        1,
    )
    page = response.content.decode()
    assert "Image ranking" in page and "Vision" in page
    assert "$10,000.00" in page


def test_the_project_list_shows_only_projects_the_user_may_see(member_client, project, other_team):
    ProjectFactory(team=other_team, name="Secret project")
    response = member_client.get(reverse("project_list"))
    assert [p.name for p in response.context["projects"]] == ["Image ranking"]
    assert "Secret project" not in response.content.decode()


def test_the_project_list_sorts_by_a_column_and_ignores_unknown_ones(staff_client, team):
    ProjectFactory(team=team, name="Cheap", monthly_budget=Decimal("10"))
    ProjectFactory(team=team, name="Dear", monthly_budget=Decimal("900"))
    ProjectFactory(team=team, name="Middling", monthly_budget=Decimal("50"))

    def names(sort):
        response = staff_client.get(reverse("project_list"), {"sort": sort})
        return [p.name for p in response.context["projects"]]

    assert names("-budget") == ["Dear", "Middling", "Cheap"]
    assert names("budget") == ["Cheap", "Middling", "Dear"]
    assert names("password") == ["Cheap", "Dear", "Middling"]


def test_a_lead_is_offered_a_new_project_and_a_member_is_not(lead_client, member_client, team):
    assert "New project" in lead_client.get(reverse("project_list")).content.decode()
    assert "New project" not in member_client.get(reverse("project_list")).content.decode()


def test_someone_in_no_team_is_told_how_to_get_projects(client, db):
    from tests.factories import UserFactory

    client.force_login(UserFactory(username="newcomer"))
    page = client.get(reverse("project_list")).content.decode()
    assert (
        "you are not in a team that has one. Ask your team's lead or an admin to add you." in page
    )


def test_an_empty_project_page_says_what_to_do_next(member_client, project):
    page = member_client.get(reverse("project_detail", args=[project.slug])).content.decode()
    assert "No experiments yet:" in page
    assert "register one here</a> or from a training script" in page
    assert "No models yet:" in page
    assert "a deployment serves a model, so" in page
    assert "No experiments with a start time yet: the chart fills as runs are registered." in page
    assert "Edit project" not in page  # a member may not


def test_the_project_page_lists_experiments_with_status_badges_models_and_deployments(
    lead_client, project
):
    model = ModelFactory(project=project, name="ranker-v2")
    ExperimentFactory(project=project, name="sweep-lr", status=S.FAILED, model=model)
    ExperimentFactory(project=project, name="baseline", status=S.RUNNING, ended_at=None)
    DeploymentFactory(project=project, model=model, name="ranker-prod")
    page = lead_client.get(reverse("project_detail", args=[project.slug])).content.decode()
    assert '<span class="badge badge-failed">Failed</span>' in page
    assert '<span class="badge badge-running">Running</span>' in page
    for name in ("sweep-lr", "baseline", "ranker-v2", "ranker-prod", "Edit project"):
        assert name in page
    assert 'id="experiments-by-month"' in page  # the chart's data, for charts.js
    assert 'data-figure="experiments-by-month"' in page


def test_experiments_page_through_and_htmx_gets_only_the_table(member_client, project):
    for day in range(1, 28):
        ExperimentFactory(
            project=project, name=f"run-{day:02}", started_at=datetime(2025, 3, day, tzinfo=UTC)
        )
    url = reverse("project_detail", args=[project.slug])
    first = member_client.get(url).content.decode()
    assert "run-27" in first and "run-03" in first and "run-02" not in first
    assert "Page 1 of 2" in first
    second = member_client.get(url, {"page": 2}, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in second
    assert second.lstrip().startswith('<div id="experiment-table">')
    assert "run-02" in second and "run-01" in second and "run-03" not in second


def test_experiments_by_month_counts_runs_by_status_in_the_organisations_months(project):
    ExperimentFactory(
        project=project, status=S.SUCCEEDED, started_at=datetime(2025, 3, 2, tzinfo=UTC)
    )
    ExperimentFactory(
        project=project, status=S.SUCCEEDED, started_at=datetime(2025, 3, 20, tzinfo=UTC)
    )
    ExperimentFactory(
        project=project, status=S.FAILED, started_at=datetime(2025, 3, 31, 23, 30, tzinfo=UTC)
    )
    ExperimentFactory(project=project, status=S.PLANNED, started_at=None)
    ExperimentFactory(status=S.FAILED, started_at=datetime(2025, 3, 5, tzinfo=UTC))  # elsewhere
    with timezone.override("UTC"):
        assert project_experiments_by_month(project=project) == [
            MonthStatusCount(month=datetime(2025, 3, 1).date(), status="failed", count=1),
            MonthStatusCount(month=datetime(2025, 3, 1).date(), status="succeeded", count=2),
        ]
    # 23:30 UTC on 31 March is already April in Berlin.
    with timezone.override("Europe/Berlin"):
        assert project_experiments_by_month(project=project) == [
            MonthStatusCount(month=datetime(2025, 3, 1).date(), status="succeeded", count=2),
            MonthStatusCount(month=datetime(2025, 4, 1).date(), status="failed", count=1),
        ]


def test_the_chart_stacks_one_bar_trace_per_status_with_exact_counts(member_client, project):
    ExperimentFactory.create_batch(
        2, project=project, status=S.SUCCEEDED, started_at=datetime(2025, 2, 3, tzinfo=UTC)
    )
    ExperimentFactory(project=project, status=S.FAILED, started_at=datetime(2025, 3, 3, tzinfo=UTC))
    response = member_client.get(reverse("project_detail", args=[project.slug]))
    figure = response.context["experiments_chart"].figure
    traces = {trace["name"]: trace for trace in figure["data"]}
    assert set(traces) == {"Succeeded", "Failed"}
    assert traces["Succeeded"]["x"] == ["Feb 2025", "Mar 2025"]
    assert traces["Succeeded"]["y"] == [2, 0]
    assert traces["Failed"]["y"] == [0, 1]
    assert figure["layout"]["barmode"] == "stack"
