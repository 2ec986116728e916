"""A real browser at a desktop's width (1440 px) and a phone's (390 px): every chart of the
overview, a project, an experiment and the unattributed page is drawn, fits the page, and its
axes read right: no tick label twice in a row (the "0, 1, 1, 2, 2" of rounded half steps, or one
day under several ticks). A screenshot of each page at each width goes to test-artifacts/."""

from pathlib import Path

import pytest
from django.urls import reverse

from apps.experiments.models import Experiment
from tests.browser.test_attribution import bill  # noqa: F401 (the fixture)
from tests.factories import PASSWORD

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, databases=["default", "progress"]),
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
WIDTHS = (1440, 390)


def _repeated_ticks(page, chart_id: str) -> list[list[str]]:
    """Each axis's tick labels where one label follows itself."""
    axes = page.eval_on_selector_all(
        f"div.chart[data-figure='{chart_id}'] g.xaxislayer-above, "
        f"div.chart[data-figure='{chart_id}'] g.yaxislayer-above",
        "layers => layers.map(l => Array.from(l.querySelectorAll('text')).map(t => t.textContent))",
    )
    return [ticks for ticks in axes if any(a == b for a, b in zip(ticks, ticks[1:], strict=False))]


def test_every_chart_is_drawn_fits_and_reads_right_at_a_desktops_and_a_phones_width(
    live_server,
    bill,  # noqa: F811
    browser_page,
):
    page = browser_page
    page.goto(live_server.url + reverse("login"))
    page.fill("#id_username", "lena")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")
    resnet = Experiment.objects.get(name="resnet")
    pages = {
        "overview": reverse("home"),
        "overview-7d": reverse("home") + "?preset=7d",
        "project": reverse("project_detail", args=["image-ranking"]),
        "experiment": reverse("experiment_detail", args=[resnet.pk]) + "?preset=7d",
        "unattributed": reverse("unattributed"),
    }
    ARTIFACTS.mkdir(exist_ok=True)
    checked = 0
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        for name, url in pages.items():
            page.goto(live_server.url + url)
            page.wait_for_load_state("networkidle")
            charts = page.eval_on_selector_all(
                "div.chart[data-figure]", "charts => charts.map(c => c.dataset.figure)"
            )
            for chart_id in charts:
                selector = f"div.chart[data-figure='{chart_id}']"
                page.wait_for_selector(f"{selector}[data-drawn=true] .main-svg")
                box = page.locator(selector).bounding_box()
                assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1, (name, width)
                assert _repeated_ticks(page, chart_id) == [], (name, chart_id, width)
                checked += 1
            page.screenshot(path=str(ARTIFACTS / f"charts-{name}-{width}.png"), full_page=True)
    assert checked >= 2 * 5  # every page drew at least one chart at both widths
    assert page.problems == []
