"""A real browser on part 2's findings: a lead filters the waste page by a new kind, opens a
notebook left running (its stretches shaded on the chart), a data-starved run (its utilisation
against the target) and a right-size lever (the candidates' prices); each chart draws under the
strict CSP and nothing complains in the console."""

import pytest
from django.urls import reverse

from apps.insights.models import Finding, Kind
from tests.factories import PASSWORD
from tests.insights.conftest import delivery, organization  # noqa: F401  (fixtures)
from tests.insights.test_part2 import (
    gpu,
    hourly_lines,
    measure,
    notebook_run,
    recompute,
    right_size_box,
    starved_run,
)

pytestmark = pytest.mark.browser

CHART_DRAWN = "#evidence-chart + div.chart[data-drawn=true] .main-svg"


def test_a_lead_opens_the_findings_of_part_two(
    live_server,
    transactional_db,
    organization,  # noqa: F811
    delivery,  # noqa: F811
    project,
    lead,
    browser_page,
):
    notebook_run(project, "nb-x", started=0, ended=1)
    hourly_lines(delivery, "nb-x", range(12), "1.00", project=project, workload="development")
    card = gpu("x", "nb-x")
    for number in range(12):
        measure(card, number, idle=60 if number < 10 else 0)
    run = starved_run(
        project,
        delivery,
        {"a": [(0, 60, 10.0), (1, 60, 30.0)], "c": [(0, 60, 20.0), (1, 60, 20.0)]},
    )
    right_size_box(delivery, project, [8000, 6000, 5000, 4000], [40.0, 20.0, 10.0, 10.0])
    recompute(delivery)
    notebook = Finding.objects.get(kind=Kind.NOTEBOOK_LEFT_RUNNING)
    starved = Finding.objects.get(kind=Kind.DATA_STARVED, subject_key=f"experiment:{run.pk}")
    lever = Finding.objects.get(kind=Kind.RIGHT_SIZE)

    page = browser_page
    page.goto(live_server.url + reverse("login"))
    page.fill("#id_username", lead.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")

    page.goto(live_server.url + reverse("waste") + "?status=&start=2025-03-01&end=2025-04-01")
    page.select_option("#id_kind", Kind.NOTEBOOK_LEFT_RUNNING)
    page.wait_for_selector(f"#findings tbody tr#finding-{starved.pk}", state="detached")
    assert page.locator("#findings tbody tr").count() == 1
    page.click(f"#finding-{notebook.pk} a")
    page.wait_for_selector(CHART_DRAWN)
    assert page.inner_text("#finding-reason") == (
        "GPU idle since Monday 10 Mar 00:00, 10 hours (USD 10.00)"
    )
    assert page.locator("#evidence-chart + div.chart .shapelayer path").count() >= 1
    assert "10 hours" in page.inner_text("#evidence-spans")

    page.goto(live_server.url + reverse("finding_detail", args=[starved.pk]))
    page.wait_for_selector(CHART_DRAWN)
    assert "against a target of 40%" in page.inner_text("#evidence-target")

    page.goto(live_server.url + reverse("finding_detail", args=[lever.pk]))
    page.wait_for_selector(CHART_DRAWN)
    rows = page.locator("#evidence-candidates tbody tr")
    assert rows.count() == 3
    assert "g4dn.12xlarge" in rows.nth(1).inner_text()
    assert page.problems == []
