"""GET /api/v1/findings, GET /api/v1/findings/<id> and the status actions, with the waste
page's permissions."""

import pytest

from apps.insights.models import Finding, FindingEvent, Status
from apps.insights.services import findings_recompute
from tests.insights.conftest import bill, delivery, organization  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db


@pytest.fixture
def found(bill):  # noqa: F811
    findings_recompute()
    return {f"{f.kind}:{f.subject_key}": f for f in Finding.objects.all()}


def test_a_lead_lists_the_findings_ranked_with_exact_money(found, lead_api):
    answer = lead_api.get("/findings", kind="idle_gpu")
    assert answer.status == 200
    assert [(row["resource_id"], row["wasted"], row["project"]) for row in answer.body] == [
        ("i-u", {"USD": "10"}, None),
        ("i-a", {"USD": "5"}, "image-ranking"),
        ("i-b", {"USD": "3.25"}, "image-ranking"),
    ]


def test_a_member_sees_the_teams_findings_only(found, member_api):
    answer = member_api.get("/findings")
    assert sorted(row["resource_id"] for row in answer.body) == ["i-a", "i-b"]


def test_an_outsider_gets_404_for_another_teams_finding(found, outsider_api):
    finding = found["idle_gpu:i-a"]
    assert outsider_api.get(f"/findings/{finding.pk}").status == 404
    answer = outsider_api.post(f"/findings/{finding.pk}/status", {"action": "acknowledge"})
    assert answer.status == 404


def test_a_lead_resolves_a_finding_with_a_note(found, lead_api, lead):
    finding = found["idle_gpu:i-a"]
    answer = lead_api.post(
        f"/findings/{finding.pk}/status", {"action": "resolve", "note": "Shut down at night."}
    )
    assert answer.status == 200
    assert answer.body["status"] == "resolved"
    event = FindingEvent.objects.get(finding=finding)
    assert (event.to_status, event.note, event.by) == (Status.RESOLVED, "Shut down at night.", lead)


def test_a_member_may_read_but_not_act(found, member_api):
    finding = found["idle_gpu:i-a"]
    assert member_api.get(f"/findings/{finding.pk}").body["reason"] == (
        "GPU idle 62% of 3 billed hours (1 unmeasured)"
    )
    assert (
        member_api.post(f"/findings/{finding.pk}/status", {"action": "acknowledge"}).status == 404
    )


def test_a_snooze_without_a_date_is_a_400_naming_the_field(found, lead_api):
    finding = found["idle_gpu:i-a"]
    answer = lead_api.post(f"/findings/{finding.pk}/status", {"action": "snooze"})
    assert (answer.status, answer.body["errors"]) == (400, {"until": ["Say until when."]})
