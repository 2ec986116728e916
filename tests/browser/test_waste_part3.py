"""A real browser on part 3's finding pages: the waste page lists the runs, levers and
commitment findings under the strict CSP; a stalled run's page draws its loss with the plateau,
a spot candidate's page shows its price comparison, a commitment's page draws its use; nothing
complains in the console."""

import pytest
from django.urls import reverse

from apps.insights.models import Finding, Kind
from tests.factories import PASSWORD
from tests.insights.test_part3 import delivery, part3  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser


def test_a_lead_reads_the_evidence_of_part3_findings(
    live_server,
    transactional_db,
    part3,  # noqa: F811
    lead,
    browser_page,
):
    page = browser_page
    page.goto(live_server.url + reverse("login"))
    page.fill("#id_username", lead.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")

    page.goto(live_server.url + reverse("waste") + "?start=2025-03-01&end=2025-03-11")
    assert page.inner_text("#total-failed") == "$50.50"
    page.select_option("#id_kind", "spot_candidate")
    page.locator("#findings tbody tr").nth(2).wait_for(state="detached")
    assert page.locator("#findings tbody tr").count() == 2

    stalled = Finding.objects.get(kind=Kind.STALLED_RUN)
    page.goto(live_server.url + reverse("finding_detail", args=[stalled.pk]))
    page.wait_for_selector("#evidence-chart + div.chart[data-drawn=true] .main-svg")
    assert "plateau from step 1500" in page.inner_text("#evidence-chart + div.chart")

    spot = Finding.objects.get(kind=Kind.SPOT_CANDIDATE, resource_id="i-r")
    page.goto(live_server.url + reverse("finding_detail", args=[spot.pk]))
    row = page.locator("#price-comparison tbody tr").first.inner_text()
    assert "p4d.24xlarge" in row and "$197.00" in row

    unused = Finding.objects.get(kind=Kind.UNUSED_COMMITMENT)
    page.goto(live_server.url + reverse("finding_detail", args=[unused.pk]))
    page.wait_for_selector("#evidence-chart + div.chart[data-drawn=true] .main-svg")
    assert page.problems == []
