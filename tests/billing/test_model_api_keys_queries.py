"""The model API keys' mapping page and /api/v1/model-api-keys read as many queries for 20
mappings as for 2 (each mapping with its project, deployment and author), and another team's
lead can neither change nor delete a mapping through the page."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from apps.billing.models import ModelApiKey
from tests.api.conftest import api_for
from tests.factories import DeploymentFactory, ProjectFactory, UserFactory

pytestmark = pytest.mark.django_db


def mappings(count: int, *, project) -> None:
    """`count` mappings, half to another project (of another team), each with a deployment
    and an author."""
    ModelApiKey.objects.all().delete()
    elsewhere = ProjectFactory(name=f"Elsewhere {count}", slug=f"elsewhere-{count}")
    for n in range(count):
        target = project if n % 2 else elsewhere
        ModelApiKey.objects.create(
            key=f"sk-{count}-{n:02}",
            project=target,
            deployment=DeploymentFactory(project=target, name=f"dep-{count}-{n}"),
            created_by=UserFactory(username=f"author-{count}-{n}"),
            note=f"note {n}",
        )


def page_queries(client, count: int, *, project) -> int:
    mappings(count, project=project)
    client.get(reverse("model_api_key_list"))  # what a process reads once (the organisation)
    with CaptureQueriesContext(connection) as captured:
        page = client.get(reverse("model_api_key_list"))
    assert page.status_code == 200
    assert len(page.context["mappings"]) == count
    assert page.content.decode().count("author-") == count
    return len(captured)


@pytest.mark.parametrize("who", ["staff_client", "lead_client"])
def test_the_page_reads_the_same_queries_for_2_and_20_mappings(request, project, who):
    client = request.getfixturevalue(who)
    assert page_queries(client, 2, project=project) == page_queries(client, 20, project=project)


def test_the_api_list_reads_the_same_queries_for_2_and_20_mappings(lead, project):
    api = api_for(lead)

    def queries(count: int) -> int:
        mappings(count, project=project)
        api.get("/model-api-keys")  # what a process reads once
        with CaptureQueriesContext(connection) as captured:
            answer = api.get("/model-api-keys")
        assert answer.status == 200
        assert len(answer.body) == count
        assert sum(row["editable"] for row in answer.body) == count // 2
        return len(captured)

    assert queries(2) == queries(20)


def test_another_teams_lead_cannot_change_or_delete_a_mapping(outsider_client, project):
    mapping = ModelApiKey.objects.create(key="sk-vision", project=project)
    edit = reverse("model_api_key_edit", args=[mapping.pk])
    delete = reverse("model_api_key_delete", args=[mapping.pk])
    assert outsider_client.get(edit).status_code == 404
    assert outsider_client.post(edit, {"key": "sk-mine", "kind": "api_key"}).status_code == 404
    assert outsider_client.post(delete).status_code == 404
    mapping.refresh_from_db()
    assert (mapping.key, mapping.project) == ("sk-vision", project)
    # The list shows it (spend is no secret) but offers no edit or delete.
    page = outsider_client.get(reverse("model_api_key_list"))
    assert [(row.mapping.key, row.editable) for row in page.context["mappings"]] == [
        ("sk-vision", False)
    ]
    assert edit not in page.content.decode()
