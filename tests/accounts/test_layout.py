"""The base layout: navigation, the organisation's time zone, pages a strict CSP allows."""

import re
import zoneinfo
from datetime import UTC, datetime

import pytest
from django.urls import reverse

from apps.accounts.models import Organization
from tests.factories import DeploymentFactory, ExperimentFactory, ModelFactory

pytestmark = pytest.mark.django_db

SCRIPT_TAG = re.compile(r"<script\b([^>]*)>", re.IGNORECASE)


def test_home_is_the_spend_overview(member_client):
    # Issue 7: the first thing a lead opens is where the money goes (tests/attribution/).
    response = member_client.get(reverse("home"))
    assert response.status_code == 200
    assert "<h1>Where the money goes</h1>" in response.content.decode()


def test_the_navigation_offers_projects_and_log_out_and_admin_only_to_staff(
    member_client, staff_client
):
    page = member_client.get(reverse("project_list")).content.decode()
    assert f'href="{reverse("project_list")}"' in page
    assert "Log out max-member" in page
    assert reverse("admin:index") not in page
    assert reverse("admin:index") in staff_client.get(reverse("project_list")).content.decode()


def test_pages_have_no_inline_script_and_send_a_strict_content_security_policy(
    member_client, project
):
    model = ModelFactory(project=project)
    experiment = ExperimentFactory(project=project, model=model)
    deployment = DeploymentFactory(project=project, model=model)
    urls = [
        reverse("project_list"),
        reverse("project_detail", args=[project.slug]),
        reverse("experiment_detail", args=[experiment.pk]),
        reverse("experiment_edit", args=[experiment.pk]),
        reverse("model_detail", args=[model.pk]),
        reverse("deployment_detail", args=[deployment.pk]),
        reverse("deployment_create", args=[project.slug]),
    ]
    for url in urls:
        response = member_client.get(url)
        assert response.status_code == 200, url
        policy = response["Content-Security-Policy"]
        assert "script-src 'self'" in policy, url
        assert "unsafe-eval" not in policy and "script-src 'self' 'unsafe-inline'" not in policy
        for attrs in SCRIPT_TAG.findall(response.content.decode()):
            # Every script is a file of ours, or data (json_script) that is never executed.
            assert "src=" in attrs or 'type="application/json"' in attrs, (url, attrs)


def test_times_show_in_the_organisations_time_zone(member_client, project):
    org = Organization.get()
    org.time_zone = "Asia/Tokyo"
    org.save()
    experiment = ExperimentFactory(
        project=project, started_at=datetime(2025, 3, 1, 22, 30, tzinfo=UTC), ended_at=None
    )
    page = member_client.get(reverse("experiment_detail", args=[experiment.pk])).content.decode()
    assert "2 Mar 2025 07:30" in page  # UTC+9
    assert "times in Asia/Tokyo" in page


def test_a_mistyped_time_zone_falls_back_to_utc_instead_of_failing(member_client, project):
    org = Organization.get()
    org.time_zone = "Mars/Olympus_Mons"
    org.save()
    experiment = ExperimentFactory(
        project=project, started_at=datetime(2025, 3, 1, 22, 30, tzinfo=UTC), ended_at=None
    )
    response = member_client.get(reverse("experiment_detail", args=[experiment.pk]))
    assert response.status_code == 200
    assert "1 Mar 2025 22:30" in response.content.decode()
    with pytest.raises(zoneinfo.ZoneInfoNotFoundError):
        zoneinfo.ZoneInfo(org.time_zone)


def test_an_unknown_page_says_not_found_in_the_layout(member_client):
    response = member_client.get("/projects/no-such-project/")
    assert response.status_code == 404
    assert "There is nothing here, or nothing you may see." in response.content.decode()
