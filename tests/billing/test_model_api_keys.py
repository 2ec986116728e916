"""Model API keys mapped to projects and deployments (issue 26, attribution): a key (the line's
resource id) or a sub-account (an OpenAI project, an Anthropic workspace, a LiteLLM team) maps
to a project and a deployment; a mapping, a change and a removal each re-attribute the history
through the ownership port, the model API rollup included; a tag still beats a mapping."""

from decimal import Decimal

import pytest
from django.urls import reverse

from apps.accounts.models import Membership, Team
from apps.billing.models import CostLineItem, DailyModelApiCost, ModelApiKey
from apps.billing.services_model_api_keys import (
    KeyMappingError,
    key_mapping_create,
    key_mapping_delete,
    key_mapping_update,
)
from apps.projects.ports import ownership_changed
from tests.factories import MembershipFactory, StaffFactory, UserFactory

from .conftest import run_import
from .formats import api_pages as pages

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

KEY = pages.KEY
D = Decimal


def untagged_rows():
    rows = pages.litellm_rows()
    for row in rows:
        row["request_tags"] = "[]"
    return rows


@pytest.fixture
def spend(acme, tmp_path):
    run = run_import(pages.write_litellm_csv(tmp_path / "spend.csv", untagged_rows()))
    assert run.status == "succeeded", run.error
    return acme


def owners() -> set[tuple]:
    return set(
        CostLineItem.objects.values_list("project_id", "deployment_id", "workload", "attributed_by")
    )


def rollup() -> list[tuple]:
    return list(
        DailyModelApiCost.objects.order_by("day").values_list(
            "day", "project_id", "deployment_id", "workload", "effective_cost", "tokens"
        )
    )


def test_mapping_a_key_to_a_deployment_re_attributes_its_history(
    spend, eager_celery, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        mapping = key_mapping_create(key=KEY.upper(), project=spend.vision, deployment=spend.ranker)
    assert mapping.key == KEY.upper()  # kept as typed, matched without case
    assert owners() == {(spend.vision.pk, spend.ranker.pk, "inference", "resource")}
    day2, day3 = rollup()
    assert day2[1:] == (spend.vision.pk, spend.ranker.pk, "inference", D("0.0125"), D(1500))
    assert day3[1:] == (spend.vision.pk, spend.ranker.pk, "inference", D("0.00375"), D(400))


def test_a_team_maps_by_its_sub_account_and_a_change_and_a_removal_move_the_history(
    spend, eager_celery, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        mapping = key_mapping_create(
            key="team-search", kind=ModelApiKey.Kind.LITELLM_TEAM, project=spend.search
        )
    assert owners() == {(spend.search.pk, None, "inference", "resource")}
    assert sum(row[4] for row in rollup() if row[1] == spend.search.pk) == D("0.01625")

    with django_capture_on_commit_callbacks(execute=True):
        key_mapping_update(
            mapping=mapping,
            key="team-search",
            kind=ModelApiKey.Kind.LITELLM_TEAM,
            project=spend.vision,
            deployment=spend.ranker,
        )
    assert owners() == {(spend.vision.pk, spend.ranker.pk, "inference", "resource")}
    assert [row[4] for row in rollup() if row[2] == spend.ranker.pk] == [D("0.0125"), D("0.00375")]

    with django_capture_on_commit_callbacks(execute=True):
        key_mapping_delete(mapping=mapping)
    assert owners() == {(None, None, "unattributed", "")}
    assert [row[1:4] for row in rollup()] == [(None, None, "unattributed")] * 2


def test_the_key_beats_its_team_and_a_tag_beats_both(
    acme, tmp_path, eager_celery, django_capture_on_commit_callbacks
):
    key_mapping_create(key="team-search", project=acme.search)
    key_mapping_create(key=KEY, project=acme.nlp)
    rows = pages.litellm_rows()  # the first request is tagged service:ranker, the second not
    run = run_import(pages.write_litellm_csv(tmp_path / "spend.csv", rows))
    assert run.status == "succeeded", run.error
    assert set(
        CostLineItem.objects.values_list("effective_cost", "project_id", "deployment_id")
    ) == {
        (D("0.0125"), acme.vision.pk, acme.ranker.pk),  # the tag
        (D("0.00375"), acme.nlp.pk, None),  # the key, before its team
    }


def test_a_mapping_announces_the_keys_it_touches(acme, monkeypatch):
    heard = []
    monkeypatch.setattr(ownership_changed, "_handlers", [lambda **kw: heard.append(kw)])
    mapping = key_mapping_create(key="wrkspc_1", project=acme.search)
    key_mapping_update(mapping=mapping, key="wrkspc_2", project=acme.search)
    key_mapping_update(mapping=mapping, key="wrkspc_2", project=acme.search, note="same owner")
    key_mapping_delete(mapping=mapping)
    assert [(h["resource_ids"], h["reason"]) for h in heard] == [
        (["wrkspc_1"], "Model API key “wrkspc_1” mapped to Search"),
        (["wrkspc_1", "wrkspc_2"], "Model API key “wrkspc_2” now maps to Search"),
        (["wrkspc_2"], "Model API key “wrkspc_2” no longer mapped"),
    ]


def test_a_deployment_of_another_project_and_a_second_mapping_are_refused(acme):
    with pytest.raises(KeyMappingError) as refused:
        key_mapping_create(key="proj_abc", project=acme.search, deployment=acme.ranker)
    assert str(refused.value) == "The deployment “ranker-prod” is not in the project “Search”."
    key_mapping_create(key="proj_abc", project=acme.search)
    assert key_mapping_create(key="PROJ_ABC", project=acme.nlp) is None
    assert list(ModelApiKey.objects.values_list("key", "project_id")) == [
        ("proj_abc", acme.search.pk)
    ]


def test_a_lead_maps_an_unmapped_key_on_the_page(
    spend, client, eager_celery, django_capture_on_commit_callbacks
):
    lead = UserFactory(username="ml-lead")
    MembershipFactory(team=spend.team, user=lead, role=Membership.Role.LEAD)
    client.force_login(lead)
    page = client.get(reverse("model_api_key_list"))
    assert [(r.key, r.sub_account_id, r.amount) for r in page.context["unmapped"]] == [
        (KEY, "team-search", D("0.01625"))
    ]
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(
            reverse("model_api_key_list"),
            {"key": KEY, "kind": "api_key", "target": f"deployment:{spend.ranker.pk}", "note": ""},
        )
    assert answer.status_code == 302
    assert owners() == {(spend.vision.pk, spend.ranker.pk, "inference", "resource")}
    page = client.get(reverse("model_api_key_list"))
    assert page.context["unmapped"] == []
    [row] = page.context["mappings"]
    assert (row.mapping.key, row.editable) == (KEY, True)


def test_a_member_gets_404_and_a_lead_cannot_map_to_another_teams_project(spend, client):
    member = UserFactory(username="ml-member")
    MembershipFactory(team=spend.team, user=member, role=Membership.Role.MEMBER)
    client.force_login(member)
    assert client.get(reverse("model_api_key_list")).status_code == 404

    staff = StaffFactory(username="root")
    mapping = key_mapping_create(key=KEY, project=spend.search, created_by=staff)
    other = Team.objects.create(name="Other", slug="other")
    outsider = UserFactory(username="other-lead")
    MembershipFactory(team=other, user=outsider, role=Membership.Role.LEAD)
    client.force_login(outsider)
    assert client.get(reverse("model_api_key_edit", args=[mapping.pk])).status_code == 404
    answer = client.post(
        reverse("model_api_key_list"),
        {"key": "sk-other", "kind": "api_key", "target": f"project:{spend.search.pk}"},
    )
    assert answer.context["form"].errors == {
        "target": ["Choose a project or deployment of a team you lead."]
    }
