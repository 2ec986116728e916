"""The admin of the core model: every page of it opens, and the inlines that matter are there."""

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.urls import reverse

from apps.accounts.models import Membership, Organization
from apps.accounts.services import api_token_create
from tests.factories import (
    AllocationRuleFactory,
    DeploymentFactory,
    DeploymentResourceFactory,
    ExperimentFactory,
    ExperimentResourceFactory,
    MembershipFactory,
    TagKeyAliasFactory,
)

pytestmark = pytest.mark.django_db
CORE_APPS = {"accounts", "projects", "experiments", "deployments"}


def _one_of_each(project):
    experiment = ExperimentFactory(project=project)
    ExperimentResourceFactory(experiment=experiment, resource_id="i-inline-shown")
    deployment = DeploymentFactory(project=project)
    DeploymentResourceFactory(deployment=deployment)
    TagKeyAliasFactory()
    AllocationRuleFactory(project=project)
    Organization.get()
    api_token_create(user=MembershipFactory(team=project.team).user, name="admin test")
    return experiment


def test_every_core_model_has_an_admin_whose_pages_open(staff_client, project, lead):
    _one_of_each(project)
    registered = [m for m in admin.site._registry if m._meta.app_label in CORE_APPS]
    assert {m.__name__ for m in registered} == {
        "Organization",
        "Team",
        "Membership",
        "Project",
        "TagKeyAlias",
        "AllocationRule",
        "Experiment",
        "ExperimentResource",
        "Model",
        "Deployment",
        "DeploymentResource",
        "ApiToken",
    }
    for model in registered:
        opts = model._meta
        changelist = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        assert staff_client.get(changelist).status_code == 200, changelist
        assert staff_client.get(changelist, {"q": "x"}).status_code == 200, changelist
        obj = model.objects.first()
        change = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
        assert staff_client.get(change).status_code == 200, change


def test_the_experiment_admin_edits_its_resource_ids_inline(staff_client, project):
    experiment = _one_of_each(project)
    page = staff_client.get(
        reverse("admin:experiments_experiment_change", args=[experiment.pk])
    ).content.decode()
    assert "i-inline-shown" in page


def test_the_team_admin_shows_leads_and_edits_memberships_inline(staff_client, team, lead, member):
    page = staff_client.get(reverse("admin:accounts_team_changelist")).content.decode()
    assert "lena-lead" in page
    change = staff_client.get(reverse("admin:accounts_team_change", args=[team.pk]))
    assert "memberships-TOTAL_FORMS" in change.content.decode()


def test_a_user_page_shows_the_users_teams(staff_client, lead):
    page = staff_client.get(reverse("admin:auth_user_change", args=[lead.pk])).content.decode()
    assert "memberships-TOTAL_FORMS" in page
    assert reverse("admin:auth_user_changelist") in page


def test_there_is_one_organisation_and_it_cannot_be_deleted(staff_client):
    org = Organization.get()
    assert staff_client.get(reverse("admin:accounts_organization_add")).status_code == 403
    response = staff_client.post(
        reverse("admin:accounts_organization_delete", args=[org.pk]), {"post": "yes"}
    )
    assert response.status_code == 403
    assert Organization.objects.count() == 1


def test_the_user_list_filters_by_team_role(staff_client, team, member):
    user = get_user_model().objects.create_user("newbie", password="x-very-long-password")
    MembershipFactory(user=user, team=team, role=Membership.Role.LEAD)
    page = staff_client.get(reverse("admin:auth_user_changelist"), {"memberships__role": "lead"})
    assert "newbie" in page.content.decode()
    assert "max-member" not in page.content.decode()
