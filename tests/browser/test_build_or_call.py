"""A real browser on a model's build-or-call page: the lead changes the expected volume, the verdict
flips live (htmx, nothing saved), the chart draws under the strict CSP, and saving keeps it."""

from decimal import Decimal

import pytest
from django.urls import reverse

from apps.insights.models import BuildOrCallInputs
from tests.factories import PASSWORD
from tests.insights.build_or_call_fixtures import build_day

pytestmark = pytest.mark.browser


def test_changing_the_expected_volume_flips_the_verdict(
    live_server, transactional_db, project, lead, browser_page
):
    deployment = build_day(project)
    page = browser_page
    page.goto(live_server.url + reverse("login"))
    page.fill("#id_username", lead.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")

    url = reverse("build_or_call_detail", args=[deployment.pk])
    page.goto(f"{live_server.url}{url}?start=2025-03-01&end=2025-03-02")
    page.wait_for_selector("#build-or-call-chart + div.chart[data-drawn=true] .main-svg")
    assert page.get_attribute("#verdict", "data-verdict") == "self_host"
    assert page.inner_text("#break-even") == "375"
    page.evaluate("window.__stillHere = true")

    # 300 requests an hour: under the break-even, the API is cheaper.
    page.fill("#id_expected_requests_per_hour", "300")
    page.wait_for_selector("#verdict[data-verdict=call_api]")
    assert "The API costs USD 438.00 a month less at 300 requests an hour" in page.inner_text(
        "#verdict-reasons"
    )
    assert page.is_visible("#unsaved-note")
    assert page.evaluate("window.__stillHere") is True  # recomputed in place, not reloaded
    page.wait_for_selector("#build-or-call-chart + div.chart[data-drawn=true] .main-svg")
    assert BuildOrCallInputs.objects.get(deployment=deployment).expected_requests_per_hour is None

    # 1,500 an hour: two replicas, still far cheaper than the API.
    page.fill("#id_expected_requests_per_hour", "1500")
    page.wait_for_selector("#verdict[data-verdict=self_host]")
    page.fill("#id_expected_requests_per_hour", "300")
    page.wait_for_selector("#verdict[data-verdict=call_api]")

    page.click("#save-inputs")
    page.wait_for_selector("text=Build-or-call inputs saved.")
    assert page.get_attribute("#verdict", "data-verdict") == "call_api"
    assert page.input_value("#id_expected_requests_per_hour") == "300.00"
    saved = BuildOrCallInputs.objects.get(deployment=deployment)
    assert saved.expected_requests_per_hour == Decimal("300")
    assert page.problems == []
