"""Aliases and rules decide who owns past spend: an admin change queues the re-attribution of
all history (billing's run, through the `ownership_changed` port)."""

import pytest
from django.urls import reverse

from apps.billing.models import AttributionRun
from apps.projects.models import TagKeyAlias
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db(databases=["default", "progress"])


def queued() -> list[tuple]:
    return list(
        AttributionRun.objects.order_by("pk").values_list(
            "status", "resource_ids", "reason", "created_by__username"
        )
    )


@pytest.fixture
def staff_client(client, django_user_model):
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw-123456")
    client.force_login(admin)
    return client


def test_adding_a_tag_key_alias_in_the_admin_schedules_reattribution_of_all_history(
    staff_client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        response = staff_client.post(
            reverse("admin:projects_tagkeyalias_add"), {"dimension": "project", "key": "ml-project"}
        )
    assert response.status_code == 302
    assert TagKeyAlias.objects.filter(key="ml-project").count() == 1
    assert queued() == [
        ("queued", None, "Tag key alias “ml-project → project” added in the admin", "root")
    ]
    # Billing's re-attribution task and the GPU daily rollup's rebuild, sent once it commits.
    assert len(callbacks) == 2


def test_deleting_a_tag_key_alias_in_the_admin_schedules_reattribution(staff_client):
    alias = TagKeyAlias.objects.create(dimension="project", key="team-project")
    response = staff_client.post(
        reverse("admin:projects_tagkeyalias_delete", args=[alias.pk]), {"post": "yes"}
    )
    assert response.status_code == 302
    assert not TagKeyAlias.objects.filter(pk=alias.pk).exists()
    assert queued() == [
        ("queued", None, "Tag key alias “team-project → project” deleted in the admin", "root")
    ]


def test_adding_an_allocation_rule_in_the_admin_schedules_reattribution(staff_client):
    project = ProjectFactory()
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
    assert queued() == [
        (
            "queued",
            None,
            "Allocation rule “shared bucket: resource_id ~ arn:aws:s3:::shared-*” added in the "
            "admin",
            "root",
        )
    ]
