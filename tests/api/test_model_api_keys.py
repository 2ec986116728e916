"""/api/v1/model-api-keys: staff and team leads map hosted model API keys (an API key, an
OpenAI project, an Anthropic workspace, a LiteLLM team, a Bedrock inference profile) to a
project and a deployment, as on the mapping page."""

import pytest

from apps.billing.models import ModelApiKey
from apps.projects.ports import ownership_changed
from tests.factories import DeploymentFactory

pytestmark = pytest.mark.django_db
PROFILE = "arn:aws:bedrock:us-east-1:555555555555:application-inference-profile/captions"


@pytest.fixture
def heard(monkeypatch):
    calls = []
    monkeypatch.setattr(ownership_changed, "_handlers", [lambda **kw: calls.append(kw)])
    return calls


def test_a_lead_maps_a_profile_to_a_deployment_and_a_retry_changes_nothing(
    lead_api, project, heard
):
    deployment = DeploymentFactory(project=project, name="captions", external_id="captions")
    body = {"project": project.slug, "deployment": "captions", "kind": "bedrock_profile"}
    first = lead_api.put(f"/model-api-keys/{PROFILE}", body)
    second = lead_api.put(f"/model-api-keys/{PROFILE}", body)
    assert (first.status, second.status) == (201, 200)
    assert first.body == {
        "key": PROFILE,
        "kind": "bedrock_profile",
        "project": project.slug,
        "deployment": "captions",
        "note": "",
        "editable": True,
    }
    mapping = ModelApiKey.objects.get()
    assert (mapping.deployment, mapping.project) == (deployment, project)
    assert [call["resource_ids"] for call in heard] == [[PROFILE]]  # the retry moved nothing
    assert lead_api.get(f"/model-api-keys/{PROFILE}").body["deployment"] == "captions"
    assert [row["key"] for row in lead_api.get("/model-api-keys").body] == [PROFILE]


def test_a_change_and_a_removal_re_attribute_the_old_and_new_keys(lead_api, project, heard):
    lead_api.put("/model-api-keys/proj_abc", {"project": project.slug, "kind": "openai_project"})
    moved = lead_api.put(
        "/model-api-keys/PROJ_ABC", {"project": project.slug, "note": "renamed in the console"}
    )
    assert (moved.status, moved.body["key"], moved.body["kind"]) == (200, "PROJ_ABC", "api_key")
    deleted = lead_api.client.delete("/api/v1/model-api-keys/PROJ_ABC", headers=lead_api.headers)
    assert deleted.status_code == 204
    # Keys match without case and the owner stayed: the change moved nothing to re-attribute.
    assert [call["resource_ids"] for call in heard] == [["proj_abc"], ["PROJ_ABC"]]
    missing = lead_api.get("/model-api-keys/proj_abc")
    assert (missing.status, missing.body) == (404, {"detail": "No mapping of “proj_abc”."})


def test_a_deployment_outside_the_project_and_another_teams_project_are_400(
    lead_api, project, other_team
):
    from tests.factories import ProjectFactory

    other = ProjectFactory(team=other_team, slug="elsewhere")
    DeploymentFactory(project=other, name="far", external_id="far")
    wrong = lead_api.put("/model-api-keys/sk-1", {"project": project.slug, "deployment": "far"})
    assert (wrong.status, wrong.body["errors"]) == (
        400,
        {"deployment": ["No deployment “far” in the project “image-ranking”."]},
    )
    foreign = lead_api.put("/model-api-keys/sk-1", {"project": "elsewhere"})
    assert (foreign.status, foreign.body["errors"]) == (
        400,
        {"project": ["No project “elsewhere” of a team you lead."]},
    )
    assert not ModelApiKey.objects.exists()


def test_a_member_gets_404_and_another_lead_may_read_but_not_change(
    member_api, outsider_api, lead_api, project
):
    lead_api.put("/model-api-keys/wrkspc_1", {"project": project.slug})
    answer = member_api.get("/model-api-keys")
    assert (answer.status, answer.body) == (
        404,
        {"detail": "Only staff and team leads maintain model API keys."},
    )
    assert outsider_api.get("/model-api-keys/wrkspc_1").body["editable"] is False
    changed = outsider_api.put("/model-api-keys/wrkspc_1", {"project": project.slug})
    assert (changed.status, changed.body) == (
        404,
        {"detail": "No mapping of “wrkspc_1” that you may change."},
    )
