"""Aliases and rules decide who owns past spend: an admin change re-attributes history."""

from unittest import mock

import pytest
from django.urls import reverse

from apps.projects.models import TagKeyAlias
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client, django_user_model):
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw-123456")
    client.force_login(admin)
    return client


def test_adding_a_tag_key_alias_in_the_admin_schedules_reattribution_of_all_history(staff_client):
    with mock.patch("apps.projects.admin.attribution_schedule") as schedule:
        response = staff_client.post(
            reverse("admin:projects_tagkeyalias_add"), {"dimension": "project", "key": "ml-project"}
        )
    assert response.status_code == 302
    assert TagKeyAlias.objects.filter(key="ml-project").count() == 1
    schedule.assert_called_once_with()


def test_deleting_a_tag_key_alias_in_the_admin_schedules_reattribution(staff_client):
    alias = TagKeyAlias.objects.create(dimension="project", key="team-project")
    with mock.patch("apps.projects.admin.attribution_schedule") as schedule:
        response = staff_client.post(
            reverse("admin:projects_tagkeyalias_delete", args=[alias.pk]), {"post": "yes"}
        )
    assert response.status_code == 302
    assert not TagKeyAlias.objects.filter(pk=alias.pk).exists()
    schedule.assert_called_once_with()


def test_adding_an_allocation_rule_in_the_admin_schedules_reattribution(staff_client):
    project = ProjectFactory()
    with mock.patch("apps.projects.admin.attribution_schedule") as schedule:
        response = staff_client.post(
            reverse("admin:projects_allocationrule_add"),
            {
                "name": "shared bucket",
                "field": "resource_id",
                "pattern": "arn:aws:s3:::shared-*",
                "priority": 10,
                "project": project.pk,
                "workload": "",
            },
        )
    assert response.status_code == 302, response.content.decode()[:2000]
    schedule.assert_called_once_with()
