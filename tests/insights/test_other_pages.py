"""The findings other pages show: idle dollars on the GPU fleet page and a GPU's findings."""

from datetime import UTC, datetime

import pytest
import time_machine
from django.test import Client

from apps.insights.models import Finding, Kind, Status
from apps.insights.services import findings_recompute

pytestmark = pytest.mark.django_db
NOW = datetime(2025, 3, 11, 9, tzinfo=UTC)


@pytest.fixture
def found(bill):
    with time_machine.travel(NOW, tick=False):
        findings_recompute()
    return bill


def get(user, url: str) -> str:
    client = Client()
    client.force_login(user)
    with time_machine.travel(NOW, tick=False):
        response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def idle_dollars(body: str) -> str:
    start = body.index('<p id="idle-dollars">')
    return body[start : body.index("</p>", start)]


def test_the_fleet_page_shows_the_idle_gpu_findings_dollars_beside_idle_gpu_hours(found, staff):
    # i-a 5.00 + i-b 3.25 + i-u 10.00 (conftest.py's hand-computed idle dollars).
    assert "<strong>$18.25</strong>" in idle_dollars(get(staff, "/gpus/?preset=7d"))


def test_the_idle_dollars_of_all_time_are_the_same_findings_dollars(found, staff):
    assert "<strong>$18.25</strong>" in idle_dollars(get(staff, "/gpus/?preset=all"))


def test_a_member_sees_the_idle_dollars_of_the_teams_projects_only(found, member):
    # i-u has no project: its finding is for staff and leads.
    assert "<strong>$8.25</strong>" in idle_dollars(get(member, "/gpus/?preset=7d"))


def test_idle_dollars_outside_the_period_are_not_counted(found, staff):
    with time_machine.travel(datetime(2025, 3, 20, 9, tzinfo=UTC), tick=False):
        client = Client()
        client.force_login(staff)
        body = client.get("/gpus/?preset=7d").content.decode()
    assert "<strong>$0.00</strong>" in idle_dollars(body)


def test_a_gpus_page_lists_the_findings_on_its_resource(found, staff):
    finding = Finding.objects.get(kind=Kind.IDLE_GPU, resource_id="i-a")
    body = get(staff, f"/gpus/{found['gpus']['g1'].pk}/?preset=7d")
    section = body[body.index('id="findings-section"') :]
    assert '<strong id="findings-wasted">$5.00</strong>' in section
    assert f'href="/waste/{finding.pk}/"' in section
    assert "· 1 open finding</span>" in section


def test_a_resolved_finding_leaves_the_gpus_open_list_but_its_money_stays_wasted(found, staff):
    Finding.objects.filter(resource_id="i-a").update(status=Status.RESOLVED)
    body = get(staff, f"/gpus/{found['gpus']['g1'].pk}/?preset=7d")
    section = body[body.index('id="findings-section"') :]
    assert '<strong id="findings-wasted">$5.00</strong>' in section
    assert "· 0 open findings</span>" in section
    assert "No open findings on this GPU" in section


def section_of(body: str) -> str:
    return body[body.index('id="findings-section"') :]


DAY = "start=2025-03-10&end=2025-03-10"  # the spend pages' end is included


def test_a_projects_page_shows_its_waste_in_the_period_and_its_top_findings(found, lead, project):
    section = section_of(get(lead, f"/projects/{project.slug}/?{DAY}"))
    # i-a 5.00 + i-b 3.25; i-u has no project.
    assert '<strong id="findings-wasted">$8.25</strong>' in section
    assert "· 2 open findings</span>" in section
    first, second = (
        Finding.objects.get(kind=Kind.IDLE_GPU, resource_id=resource) for resource in ("i-a", "i-b")
    )
    assert section.index(f"/waste/{first.pk}/") < section.index(f"/waste/{second.pk}/")


def test_the_spend_partial_brings_the_findings_of_its_new_period(found, lead, project):
    client = Client()
    client.force_login(lead)
    with time_machine.travel(NOW, tick=False):
        response = client.get(
            f"/projects/{project.slug}/?start=2025-03-01&end=2025-03-05",
            headers={"HX-Request": "true", "HX-Target": "spend"},
        )
    assert '<strong id="findings-wasted">$0.00</strong>' in section_of(response.content.decode())


def test_a_runs_page_shows_the_findings_of_its_resources(found, lead):
    section = section_of(get(lead, f"/experiments/{found['run'].pk}/?{DAY}"))
    assert '<strong id="findings-wasted">$5.00</strong>' in section
    assert "· 1 open finding</span>" in section


def test_the_overview_shows_the_waste_of_everything_the_user_sees(found, staff):
    section = section_of(get(staff, f"/?{DAY}"))
    # Idle i-a 5.00 + i-b 3.25 + i-u 10.00; unattributed spend is not waste.
    assert '<strong id="findings-wasted">$18.25</strong>' in section
    assert "· 5 open findings</span>" in section
