"""A real browser (Debian's chromium, driven by Playwright) through the journey of issue 2: log in,
open the project list and a project page, register an experiment through the htmx form (with a
validation error shown in place), and not one console error on the way (CSP violations count)."""

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.urls import reverse

from apps.accounts.models import Membership
from apps.experiments.models import Experiment
from tests.factories import (
    PASSWORD,
    DeploymentFactory,
    ExperimentFactory,
    MembershipFactory,
    ModelFactory,
    ProjectFactory,
    TeamFactory,
    UserFactory,
)

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
S = Experiment.Status


@pytest.fixture
def demo(transactional_db):
    team = TeamFactory(name="Vision", slug="vision")
    lead = UserFactory(username="lena")
    MembershipFactory(user=lead, team=team, role=Membership.Role.LEAD)
    project = ProjectFactory(
        team=team,
        name="Image ranking",
        slug="image-ranking",
        description="Ranks product images for the storefront.",
    )
    ProjectFactory(team=team, name="Captioning", slug="captioning")
    model = ModelFactory(project=project, name="ranker-v2")
    for month, day, status in [
        (1, 10, S.SUCCEEDED),
        (1, 20, S.FAILED),
        (2, 3, S.SUCCEEDED),
        (2, 14, S.STOPPED),
        (3, 1, S.SUCCEEDED),
        (3, 9, S.FAILED),
        (3, 20, S.SUCCEEDED),
    ]:
        ExperimentFactory(
            project=project,
            model=model,
            status=status,
            name=f"ranker-sweep-{month}-{day}",
            started_at=datetime(2025, month, day, 8, tzinfo=UTC),
        )
    ExperimentFactory(
        project=project,
        status=S.RUNNING,
        name="ranker-v3-pretrain",
        started_at=datetime(2025, 3, 28, tzinfo=UTC),
        ended_at=None,
        is_spot=True,
    )
    DeploymentFactory(project=project, model=model, name="ranker-prod")
    return project


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def test_a_lead_logs_in_opens_a_project_and_registers_an_experiment(
    live_server, demo, browser_page
):
    page = browser_page
    page.goto(live_server.url + reverse("project_list"))
    assert page.url.startswith(live_server.url + reverse("login"))
    page.fill("#id_username", "lena")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")

    page.wait_for_url(live_server.url + reverse("project_list"))
    assert page.locator("tbody tr").count() == 2
    _shot(page, "project-list-1280.png")
    page.click("text=Image ranking")

    page.wait_for_url(live_server.url + reverse("project_detail", args=["image-ranking"]))
    page.wait_for_selector("div.chart[data-drawn=true] .main-svg")
    assert page.locator("#experiment-table tbody tr").count() == 8
    _shot(page, "project-page-1280.png")
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    page.wait_for_selector("div.chart[data-drawn=true] .main-svg")
    _shot(page, "project-page-390.png")
    # On a phone the links fold into one menu.
    assert not page.is_visible(".nav-wide")
    page.click(".nav-menu summary")
    assert page.is_visible(".nav-menu >> text=Projects")
    page.screenshot(path=str(ARTIFACTS / "menu-open-390.png"))
    page.set_viewport_size({"width": 1280, "height": 900})
    assert page.is_visible(".nav-wide") and not page.is_visible(".nav-menu")

    page.click("text=Register experiment")
    page.wait_for_url("**/experiments/new/")
    page.fill("#id_name", "ranker-v3-finetune")
    page.select_option("#id_kind", "fine_tuning")
    page.select_option("#id_status", "succeeded")
    page.fill("#id_started_at", "2025-03-10T09:00")
    page.fill("#id_ended_at", "2025-03-09T09:00")
    page.fill("#id_gpu_type", "H100")
    page.fill("#id_gpu_count", "8")
    page.fill("#id_resource_ids", "i-0a1b2c3d4e5f67890\ni-0fedcba9876543210")
    # A mark on the window survives an htmx swap and would not survive a page load.
    page.evaluate("window.__stillHere = true")
    page.click("text=Register experiment")

    error = page.wait_for_selector("#id_ended_at-errors")
    assert error.inner_text() == "The end must be after the start."
    assert page.evaluate("window.__stillHere") is True
    assert page.get_attribute("#id_ended_at", "aria-invalid") == "true"
    assert page.input_value("#id_resource_ids") == "i-0a1b2c3d4e5f67890\ni-0fedcba9876543210"
    _shot(page, "experiment-form-error-1280.png")
    page.set_viewport_size({"width": 390, "height": 844})
    _shot(page, "experiment-form-error-390.png")
    page.set_viewport_size({"width": 1280, "height": 900})

    page.fill("#id_ended_at", "2025-03-11T21:00")
    page.click("text=Register experiment")
    page.wait_for_url(re.compile(r"/experiments/\d+/$"))
    assert "Experiment “ranker-v3-finetune” registered." in page.inner_text("main")
    assert "8 × H100" in page.inner_text("main")
    _shot(page, "experiment-page-1280.png")

    experiment = Experiment.objects.get(name="ranker-v3-finetune")
    assert experiment.kind == Experiment.Kind.FINE_TUNING
    assert sorted(experiment.resources.values_list("resource_id", flat=True)) == [
        "i-0a1b2c3d4e5f67890",
        "i-0fedcba9876543210",
    ]
    assert page.problems == []
