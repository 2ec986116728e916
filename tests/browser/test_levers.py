"""A real browser on the inference levers: the scale-to-zero finding draws its traffic timeline
(the hours without traffic shaded) under the strict CSP, and the model's build-or-call page lists
the levers with the largest saving."""

import pytest
from django.urls import reverse

from apps.insights.models import Finding, Kind
from apps.insights.services import findings_recompute
from tests.factories import PASSWORD
from tests.insights.test_levers_findings import chat  # noqa: F401 - the fixture

pytestmark = pytest.mark.browser


def test_a_lead_reads_a_levers_evidence_and_the_deployments_levers(
    live_server,
    transactional_db,
    chat,  # noqa: F811
    lead,
    browser_page,
):
    findings_recompute()
    page = browser_page
    page.goto(live_server.url + reverse("login"))
    page.fill("#id_username", lead.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")

    idle = Finding.objects.get(kind=Kind.SCALE_TO_ZERO)
    page.goto(live_server.url + reverse("finding_detail", args=[idle.pk]))
    page.wait_for_selector("#evidence-chart + div.chart[data-drawn=true] .main-svg")
    # The four hours without traffic: one shaded stretch.
    assert page.locator("#evidence-chart + div.chart .shapelayer path").count() == 1
    assert "4 of 10 billed hours served no request" in page.inner_text("#lever-facts")

    page.goto(live_server.url + reverse("build_or_call_detail", args=[chat.pk]))
    rows = page.locator("#lever-list tbody tr")
    assert rows.count() == 3
    assert "Scale to zero" in rows.first.inner_text() and "$12.00" in rows.first.inner_text()
    assert page.inner_text("#levers-largest") == "$12.00"
    assert page.problems == []
