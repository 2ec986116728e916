"""A real browser on the GPU pages: the charts draw under the strict CSP (with the vendored
Plotly partial bundle), the spend pages' range presets and the table's sort swap in place, and
nothing complains in the console (a CSP violation would)."""

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from apps.gpu.models import Gpu
from tests.factories import PASSWORD, StaffFactory

pytestmark = pytest.mark.browser


def test_staff_read_the_fleet_switch_the_period_and_open_a_gpu(
    live_server, transactional_db, load, browser_page
):
    StaffFactory(username="ada")
    start = datetime.now(tz=UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=30)
    rows = "".join(
        f"{start + timedelta(minutes=20 * n):%Y/%m/%d %H:%M:%S}.000, GPU-b{g}, "
        f"{(n * 7 + g * 40) % 101} %\n"
        for n in range(90)
        for g in range(2)
    )
    load("timestamp, uuid, utilization.gpu [%]\n" + rows, "nvidia-smi", host="browser-box")
    page = browser_page

    page.goto(live_server.url + reverse("login"))
    page.fill("#id_username", "ada")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.goto(live_server.url + reverse("gpu_fleet"))
    page.wait_for_selector("#fleet-bands + div.chart[data-drawn=true] .main-svg")
    # charts.js draws one chart a frame, in page order: the page's three, the last in time.
    page.wait_for_function("document.querySelectorAll('div.chart[data-drawn=true]').length >= 3")
    assert page.locator("div.chart[data-drawn=true]").count() == 3

    page.evaluate("window.__stillHere = true")
    # The spend pages' range presets, swapped in place by htmx.
    page.click("text=Last 7 days")
    page.wait_for_selector("a[aria-current=true]:has-text('Last 7 days')")
    page.wait_for_selector("#fleet-bands + div.chart[data-drawn=true] .main-svg")
    assert page.evaluate("window.__stillHere") is True
    assert page.url.endswith("?preset=7d")
    # Sorting the GPU table keeps the range.
    page.click("a.sort-link:has-text('Mean utilisation')")
    page.wait_for_selector("th[aria-sort=ascending]:has-text('Mean utilisation')")
    assert page.url.endswith("?preset=7d&sort=util")
    assert page.evaluate("window.__stillHere") is True

    page.click(f"text={Gpu.objects.get(uuid='GPU-b0')}")
    page.wait_for_selector("#gpu-hourly + div.chart[data-drawn=true] .main-svg")
    assert "browser-box" in page.inner_text("main")
    assert page.problems == []
