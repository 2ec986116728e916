"""The role rules of DESIGN.md, through the one access module every page uses."""

import pytest
from django.http import Http404

from apps.accounts.models import Membership
from apps.accounts.selectors import teams_led_by
from apps.deployments.selectors import deployment_for_user, model_for_user
from apps.experiments.selectors import experiment_for_user
from apps.projects.selectors import (
    can_create_project,
    can_edit_project,
    project_for_user,
    projects_visible_to,
)
from tests.factories import (
    DeploymentFactory,
    ExperimentFactory,
    MembershipFactory,
    ModelFactory,
    ProjectFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


def test_staff_see_and_edit_every_project(staff, project, other_team):
    elsewhere = ProjectFactory(team=other_team)
    assert set(projects_visible_to(user=staff)) == {project, elsewhere}
    assert project_for_user(user=staff, slug=elsewhere.slug, edit=True) == elsewhere
    assert set(teams_led_by(user=staff)) == {project.team, other_team}


def test_a_lead_sees_and_edits_the_teams_projects(lead, project):
    assert project_for_user(user=lead, slug=project.slug) == project
    assert project_for_user(user=lead, slug=project.slug, edit=True) == project
    assert can_edit_project(user=lead, project=project) is True
    assert can_create_project(user=lead) is True


def test_a_member_sees_the_teams_projects_but_gets_404_on_editing_them(member, project):
    assert project_for_user(user=member, slug=project.slug) == project
    assert can_edit_project(user=member, project=project) is False
    assert can_create_project(user=member) is False
    with pytest.raises(Http404):
        project_for_user(user=member, slug=project.slug, edit=True)


def test_an_outsider_gets_404_for_everything_of_another_team(outsider, project):
    model = ModelFactory(project=project)
    experiment = ExperimentFactory(project=project, model=model)
    deployment = DeploymentFactory(project=project, model=model)
    assert list(projects_visible_to(user=outsider)) == []
    for fetch in (
        lambda: project_for_user(user=outsider, slug=project.slug),
        lambda: project_for_user(user=outsider, slug=project.slug, edit=True),
        lambda: experiment_for_user(user=outsider, pk=experiment.pk),
        lambda: model_for_user(user=outsider, pk=model.pk),
        lambda: deployment_for_user(user=outsider, pk=deployment.pk),
    ):
        with pytest.raises(Http404):
            fetch()


def test_a_member_may_fetch_the_teams_experiments_models_and_deployments(member, project):
    model = ModelFactory(project=project)
    experiment = ExperimentFactory(project=project, model=model)
    deployment = DeploymentFactory(project=project, model=model)
    assert experiment_for_user(user=member, pk=experiment.pk) == experiment
    assert model_for_user(user=member, pk=model.pk) == model
    assert deployment_for_user(user=member, pk=deployment.pk) == deployment


def test_leading_one_team_grants_no_edit_in_another_team_one_is_only_a_member_of(
    project, other_team
):
    """The lead role and the membership must be the same row, not any two rows."""
    user = UserFactory(username="two-hats")
    MembershipFactory(user=user, team=other_team, role=Membership.Role.LEAD)
    MembershipFactory(user=user, team=project.team, role=Membership.Role.MEMBER)
    led = ProjectFactory(team=other_team)
    assert set(projects_visible_to(user=user)) == {project, led}
    assert project_for_user(user=user, slug=led.slug, edit=True) == led
    with pytest.raises(Http404):
        project_for_user(user=user, slug=project.slug, edit=True)
    assert list(teams_led_by(user=user)) == [other_team]


def test_a_user_in_no_team_sees_nothing(project):
    loner = UserFactory(username="loner")
    assert list(projects_visible_to(user=loner)) == []
    assert can_create_project(user=loner) is False


def test_an_unknown_slug_is_404_even_for_staff(staff):
    with pytest.raises(Http404):
        project_for_user(user=staff, slug="no-such-project")
