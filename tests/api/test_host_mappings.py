"""/api/v1/host-mappings: staff and team leads map GPU hosts to billed resource ids."""

import pytest

from apps.gpu.models import HostMapping
from tests.factories import ExperimentFactory, ExperimentResourceFactory

pytestmark = pytest.mark.django_db
NODE = "/host-mappings/gpu-node-7"


def test_a_lead_maps_a_host_and_a_retry_updates_the_same_mapping(lead_api, lead, project):
    first = lead_api.put(NODE, {"resource_id": "i-0a1b2c3d4e5f67890", "note": "rack 3"})
    second = lead_api.put(NODE, {"resource_id": "i-0a1b2c3d4e5f67890", "note": "rack 3"})
    assert (first.status, second.status) == (201, 200)
    assert first.body == {
        "host": "gpu-node-7",
        "resource_id": "i-0a1b2c3d4e5f67890",
        "note": "rack 3",
        "editable": True,
    }
    mapping = HostMapping.objects.get()
    assert (mapping.host, mapping.created_by) == ("gpu-node-7", lead)


def test_mappings_are_listed_read_changed_and_deleted(lead_api, project):
    lead_api.put(NODE, {"resource_id": "i-1"})
    lead_api.put("/host-mappings/gpu-node-8", {"resource_id": "i-2"})
    assert [m["host"] for m in lead_api.get("/host-mappings").body] == ["gpu-node-7", "gpu-node-8"]
    assert lead_api.put(NODE, {"resource_id": "i-9"}).body["resource_id"] == "i-9"
    assert lead_api.get(NODE).body["resource_id"] == "i-9"
    deleted = lead_api.client.delete("/api/v1" + NODE, headers=lead_api.headers)
    assert deleted.status_code == 204
    missing = lead_api.get(NODE)
    assert (missing.status, missing.body) == (404, {"detail": "No mapping of “gpu-node-7”."})
    assert list(HostMapping.objects.values_list("host", flat=True)) == ["gpu-node-8"]


def test_a_member_who_leads_no_team_gets_404_everywhere(member_api, lead_api, project):
    lead_api.put(NODE, {"resource_id": "i-1"})
    answers = [
        member_api.get("/host-mappings"),
        member_api.get(NODE),
        member_api.put(NODE, {"resource_id": "i-2"}),
    ]
    assert [a.status for a in answers] == [404, 404, 404]
    assert answers[0].body == {"detail": "Only staff and team leads maintain host mappings."}
    assert HostMapping.objects.get().resource_id == "i-1"


def test_a_lead_of_another_team_sees_but_cannot_change_a_mapping_it_did_not_make(
    lead_api, outsider_api, project
):
    lead_api.put(NODE, {"resource_id": "i-1"})
    assert outsider_api.get(NODE).body["editable"] is False
    changed = outsider_api.put(NODE, {"resource_id": "i-2"})
    deleted = outsider_api.client.delete("/api/v1" + NODE, headers=outsider_api.headers)
    assert (changed.status, changed.body) == (
        404,
        {"detail": "No mapping of “gpu-node-7” that you may change."},
    )
    assert deleted.status_code == 404
    assert HostMapping.objects.get().resource_id == "i-1"


def test_a_lead_changes_a_mapping_to_a_resource_of_its_project_and_staff_any(
    lead_api, outsider_api, staff_api, project
):
    ExperimentResourceFactory(experiment=ExperimentFactory(project=project), resource_id="i-ours")
    outsider_api.put(NODE, {"resource_id": "i-ours"})
    assert lead_api.put(NODE, {"resource_id": "i-ours", "note": "ours"}).status == 200
    assert staff_api.put(NODE, {"resource_id": "i-other"}).status == 200
    assert HostMapping.objects.get().resource_id == "i-other"


def test_bad_hosts_and_resource_ids_are_400s(lead_api, project):
    answer = lead_api.put("/host-mappings/gpu%20node", {"resource_id": "i-1 i-2", "extra": 1})
    assert answer.status == 400
    assert answer.body["errors"] == {
        "host": ["A host name has no spaces in it."],
        "resource_id": ["A resource id has no spaces in it; send one id per entry."],
        "extra": ["Extra inputs are not permitted"],
    }
    assert not HostMapping.objects.exists()
