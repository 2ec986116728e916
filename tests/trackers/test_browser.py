"""A real browser on the tracker pages: staff add an MLflow server, pause it in place, and import
a W&B export, seeing a bad file's faults in place first."""

import pytest
from django.urls import reverse

from apps.accounts.models import Team
from apps.experiments.models import Experiment
from apps.projects.models import Project
from apps.trackers.models import TrackerSource
from tests.factories import PASSWORD, StaffFactory

pytestmark = pytest.mark.browser

GOOD = (
    "Name,ID,State,Created,Runtime,project\n"
    "vit-b,r1,finished,2025-01-02T10:00:00Z,60,shelf\n"
    "vit-l,r2,crashed,2025-01-02T10:00:00Z,60,shelf\n"
)


def test_staff_add_an_mlflow_server_pause_it_and_import_a_wandb_export(
    live_server, transactional_db, browser_page, tmp_path
):
    StaffFactory(username="ada")
    team = Team.objects.create(name="Vision", slug="vision")
    shelf = Project.objects.create(team=team, name="Shelf", slug="shelf")
    page = browser_page
    page.goto(live_server.url + reverse("login"))
    page.fill("#id_username", "ada")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")

    page.click(".nav-wide >> text=Trackers")
    page.click("text=New MLflow server")
    page.fill("#id_name", "research")
    page.fill("#id_url", "http://mlflow.internal:5000")
    page.click("button:has-text('Add server')")
    page.wait_for_url(live_server.url + reverse("tracker_source_list"))
    assert "research" in page.inner_text("#source-rows")
    assert "Not polled yet" in page.inner_text("#source-rows")

    page.evaluate("window.__stillHere = true")
    page.click("#source-rows button:has-text('Pause')")
    page.wait_for_selector("#source-rows button:has-text('Resume')")
    assert page.evaluate("window.__stillHere") is True
    assert TrackerSource.objects.get().is_paused is True

    page.click("text=an uploaded export")
    bad = tmp_path / "runs.csv"
    bad.write_text(GOOD.replace("crashed", "melted"))
    page.set_input_files("#id_file", str(bad))
    page.click("button:has-text('Import runs')")
    page.wait_for_selector("text=Nothing was imported")
    assert "runs.csv, row 3, column State: unknown state “melted”" in page.inner_text("main")
    assert not Experiment.objects.exists()

    good = tmp_path / "runs-fixed.csv"
    good.write_text(GOOD)
    page.set_input_files("#id_file", str(good))
    page.click("button:has-text('Import runs')")
    page.wait_for_selector("text=runs-fixed.csv: 2 run(s) added")
    assert sorted(Experiment.objects.filter(project=shelf).values_list("name", "status")) == [
        ("vit-b", "succeeded"),
        ("vit-l", "failed"),
    ]
    assert page.problems == []
