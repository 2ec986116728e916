"""A real browser on the waste page: a lead filters by kind (htmx swaps the list in place), opens
a finding (its evidence chart draws under the strict CSP), snoozes it, and it leaves the open
list; nothing complains in the console."""

import pytest
from django.urls import reverse

from apps.insights.models import Finding, Status
from apps.insights.services import findings_recompute
from tests.factories import PASSWORD
from tests.insights.conftest import bill, delivery, organization  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser


def test_a_lead_filters_opens_and_snoozes_a_finding(
    live_server,
    transactional_db,
    bill,  # noqa: F811
    lead,
    browser_page,
):
    findings_recompute()
    finding = Finding.objects.get(kind="idle_gpu", subject_key="i-a")
    page = browser_page
    page.goto(live_server.url + reverse("login"))
    page.fill("#id_username", lead.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")

    page.goto(live_server.url + reverse("waste"))
    assert page.locator("#findings tbody tr").count() == 5
    page.evaluate("window.__stillHere = true")
    page.select_option("#id_kind", "idle_gpu")
    # (No wait_for_function: the strict CSP forbids the eval it needs.)
    page.locator("#findings tbody tr").nth(3).wait_for(state="detached")
    assert page.locator("#findings tbody tr").count() == 3
    assert page.evaluate("window.__stillHere") is True  # swapped in place, not reloaded
    assert "kind=idle_gpu" in page.url

    page.click(f"#finding-{finding.pk} a")
    page.wait_for_selector("#evidence-chart + div.chart[data-drawn=true] .main-svg")
    assert page.inner_text("#finding-reason") == "GPU idle 62% of 3 billed hours (1 unmeasured)"
    page.select_option("select[name=action]", "snooze")
    page.fill("input[name=until]", "2099-01-15")
    page.click("#finding-actions button[type=submit]")
    page.wait_for_selector("text=Finding snoozed.")
    assert "until 15 Jan 2099" in page.inner_text("#finding-status")

    page.goto(live_server.url + reverse("waste"))
    assert page.locator(f"#finding-{finding.pk}").count() == 0
    assert page.locator("#findings tbody tr").count() == 4
    finding.refresh_from_db()
    assert finding.status == Status.SNOOZED
    assert page.problems == []
