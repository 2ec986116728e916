"""A real browser under the strict CSP: every chart page bench/browser_pages.py measures (the
overview, a project, the waste page, the GPU fleet, a GPU's page) draws its Plotly charts with
the vendored partial bundle, and the browser reports no CSP violation on the way: neither a
`securitypolicyviolation` event (collected by a script installed before the page's own) nor a
console message. The collector is shown to catch a violation: an inline script is refused."""

import pytest
from django.urls import reverse

from apps.billing.loader import rollups_rebuild
from apps.insights.services import findings_recompute
from tests.factories import PASSWORD
from tests.insights.conftest import bill, delivery, organization  # noqa: F401  (fixtures)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, databases=["default", "progress"]),
]
MARCH = "?start=2025-03-01&end=2025-04-01"
COLLECT = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push(`${event.violatedDirective} ${event.blockedURI}`);
});
"""


def _log_in(page, base: str, username: str) -> None:
    page.goto(base + reverse("login"))
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(base + reverse("home"))


def test_every_chart_page_draws_its_charts_without_a_csp_violation(
    live_server,
    bill,  # noqa: F811
    delivery,  # noqa: F811
    staff,
    project,
    browser_page,
):
    rollups_rebuild(delivery_id=delivery.pk)  # the bill's lines were written directly
    findings_recompute()
    page = browser_page
    page.add_init_script(COLLECT)
    _log_in(page, live_server.url, staff.username)  # staff: the fleet shows every GPU
    gpu = bill["gpus"]["g1"]
    pages = {
        "overview": reverse("home") + MARCH,
        "project": reverse("project_detail", args=[project.slug]) + MARCH,
        "waste": reverse("waste") + "?status=" + MARCH.replace("?", "&"),
        "GPU fleet": reverse("gpu_fleet") + MARCH,
        "a GPU": reverse("gpu_detail", args=[gpu.pk]) + MARCH,
    }
    for name, url in pages.items():
        response = page.goto(live_server.url + url)
        assert response.status == 200, name
        # The page's own policy: script-src 'self', no 'unsafe-eval', no 'unsafe-inline'.
        policy = response.header_value("content-security-policy")
        assert "script-src 'self'" in policy and "unsafe-eval" not in policy, (name, policy)
        charts = page.eval_on_selector_all(
            "div.chart[data-figure]", "charts => charts.map(c => c.dataset.figure)"
        )
        assert charts, f"the {name} page has no chart to draw"
        for chart in charts:
            page.wait_for_selector(f"div.chart[data-figure='{chart}'][data-drawn=true] .main-svg")
        assert page.evaluate("window.__violations") == [], name
        assert page.problems == [], name


def test_the_collector_catches_a_violation(live_server, lead, browser_page):
    """An inline script, which the policy refuses: the violation event and the console see it."""
    page = browser_page
    page.add_init_script(COLLECT)
    _log_in(page, live_server.url, lead.username)
    page.evaluate(
        """() => {
            const script = document.createElement("script");
            script.textContent = "window.__ran = true";
            document.body.appendChild(script);
        }"""
    )
    page.wait_for_timeout(200)  # the violation event is queued as a task
    assert page.evaluate("window.__ran === undefined")
    violations = page.evaluate("window.__violations")
    assert len(violations) == 1 and violations[0].startswith("script-src"), violations
    assert any("Content Security Policy" in problem for problem in page.problems)
