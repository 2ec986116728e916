"""A real browser (Debian's chromium, driven by Playwright) through issue 7: a lead logs in, opens
the overview, changes the date range and a filter (the chart and the figures change in place, the
URL keeps the state), exports a CSV, and assigns an unattributed resource to a run, whose history
a real Celery worker then moves off the unattributed page. Not one console error on the way
(CSP violations count).

The bill goes through the real import, dated back from today: it must land in "the last 7 days".
"""

import csv
import json
import re
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.urls import reverse

from apps.accounts.models import Membership, Organization
from apps.billing.models import AttributionRun
from apps.billing.services import import_run_create, import_run_execute
from tests.factories import (
    PASSWORD,
    ExperimentFactory,
    MembershipFactory,
    ProjectFactory,
    TeamFactory,
    UserFactory,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, databases=["default", "progress"]),
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
COLUMNS = [
    "BillingAccountId",
    "BillingCurrency",
    "BillingPeriodStart",
    "BillingPeriodEnd",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ChargeCategory",
    "BilledCost",
    "EffectiveCost",
    "ProviderName",
    "ServiceName",
    "ServiceCategory",
    "RegionId",
    "ResourceId",
    "Tags",
]


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _month(moment: datetime) -> tuple[datetime, datetime]:
    start = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return start, (start + timedelta(days=32)).replace(day=1)


@pytest.fixture
def bill(tmp_path):
    """34 days up to yesterday: resnet (Image ranking) 10.00 a day, Captioning 4.00 a day, and
    i-stray, tagged by nobody, 2.50 a day for the last 3 days."""
    org = Organization.get()
    org.currency, org.time_zone = "USD", "UTC"
    org.save()
    team = TeamFactory(name="Vision", slug="vision")
    MembershipFactory(user=UserFactory(username="lena"), team=team, role=Membership.Role.LEAD)
    ranking = ProjectFactory(team=team, name="Image ranking", slug="image-ranking")
    ProjectFactory(team=team, name="Captioning", slug="captioning")
    ExperimentFactory(project=ranking, name="resnet", external_id="resnet", started_at=None)
    ExperimentFactory(project=ranking, name="stray-run", started_at=None)
    today = datetime.now(tz=UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    lines = []
    for back in range(1, 35):
        day = today - timedelta(days=back)
        start, end = _month(day)
        common = {
            "BillingAccountId": "111111111111",
            "BillingCurrency": "USD",
            "BillingPeriodStart": _stamp(start),
            "BillingPeriodEnd": _stamp(end),
            "ChargePeriodStart": _stamp(day + timedelta(hours=9)),
            "ChargePeriodEnd": _stamp(day + timedelta(hours=10)),
            "ChargeCategory": "Usage",
            "ProviderName": "AWS",
            "ServiceName": "Amazon Elastic Compute Cloud",
            "ServiceCategory": "Compute",
            "RegionId": "us-east-1",
        }
        lines.append(
            {
                **common,
                "ResourceId": "i-resnet",
                "BilledCost": "10.00",
                "EffectiveCost": "10.00",
                "Tags": json.dumps({"project": "image-ranking", "experiment": "resnet"}),
            }
        )
        lines.append(
            {
                **common,
                "ResourceId": "i-caption",
                "BilledCost": "4.00",
                "EffectiveCost": "4.00",
                "Tags": json.dumps({"project": "captioning"}),
            }
        )
        if back <= 3:
            lines.append(
                {**common, "ResourceId": "i-stray", "BilledCost": "2.50", "EffectiveCost": "2.50"}
            )
    path = tmp_path / "bill.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows({name: line.get(name, "") for name in COLUMNS} for line in lines)
    run = import_run_execute(import_run=import_run_create(paths=[str(path)]))
    assert run.status == "succeeded", run.error
    return ranking


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / name), full_page=True)


def expect(locator):
    # Playwright's assertions poll without evaluating strings in the page (the CSP forbids it).
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def _figure(page) -> dict:
    return json.loads(page.text_content("#spend-over-time"))


@pytest.mark.worker
def test_a_lead_filters_the_overview_exports_a_csv_and_assigns_a_stray_resource(
    live_server, bill, browser_page, celery_worker_process, tmp_path
):
    page = browser_page
    page.goto(live_server.url + reverse("home"))
    page.fill("#id_username", "lena")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(live_server.url + reverse("home"))
    page.wait_for_selector("#spend div.chart[data-drawn=true] .main-svg")
    # The last 30 days: 29 days of the bill (yesterday back), 14.00 a day: the team's spend; the
    # lead sees i-stray's unattributed 7.50 beside it, as what the lead may claim.
    assert page.inner_text("#period-total") == "$406.00"
    assert "$7.50 unattributed" in page.inner_text("#team-spend-note")
    assert len(_figure(page)["data"][0]["x"]) == 30
    _shot(page, "overview-1280.png")

    # A preset swaps the spend section in place and puts the state in the URL.
    page.evaluate("window.__stillHere = true")
    page.click("a[data-preset='7d']")
    expect(page.locator("#period-total")).to_have_text("$84.00")
    assert re.search(r"\?preset=7d$", page.url)
    page.wait_for_selector("#spend div.chart[data-drawn=true] .main-svg")
    assert len(_figure(page)["data"][0]["x"]) == 7
    assert page.evaluate("window.__stillHere") is True

    # A filter does the same, keeping the range.
    page.select_option("select[name=project]", "captioning")
    expect(page.locator("#period-total")).to_have_text("$24.00")
    assert "preset=7d" in page.url and "project=captioning" in page.url
    page.wait_for_selector("#spend div.chart[data-drawn=true] .main-svg")
    assert [trace["name"] for trace in _figure(page)["data"]] == ["Other"]
    assert page.evaluate("window.__stillHere") is True

    # The CSV holds what the chart shows.
    with page.expect_download() as download:
        page.click("section:has(#over-time-title) a.csv-link")
    saved = tmp_path / "spend.csv"
    download.value.save_as(saved)
    with saved.open() as handle:
        exported = list(csv.DictReader(handle))
    assert sum(Decimal(row["spend"]) for row in exported) == Decimal("24.00")
    assert {row["workload"] for row in exported} == {"other"}

    # Reloading the URL gives the same page: the state lives in it.
    page.reload()
    assert page.inner_text("#period-total") == "$24.00"

    # The stray resource: assign it to a run of the lead's team.
    page.goto(live_server.url + reverse("unattributed"))
    row = page.locator("#unattributed-resources tbody tr", has_text="i-stray")
    assert "$7.50" in row.inner_text()
    row.locator("a.claim-link").click()
    page.wait_for_selector("#claim-panel #claim-form")
    assert page.input_value("#id_resource_id") == "i-stray"
    page.select_option("#id_target", label="experiment stray-run")
    _shot(page, "unattributed-claim-1280.png")
    page.click("#claim-form button[type=submit]")
    page.wait_for_selector(".flash")
    assert (
        "Assigned i-stray to the experiment “stray-run”: $7.50 of unattributed spend moves "
        "there, all history included." in page.inner_text(".flash")
    )
    # The re-attribution runs in the real Celery worker (another process), queued after the
    # claim's commit; once it is done, nothing is unattributed any more and the run carries it.
    run = AttributionRun.objects.get()
    deadline = time.monotonic() + 90
    while run.status not in ("succeeded", "failed") and time.monotonic() < deadline:
        time.sleep(0.2)
        run.refresh_from_db()
    assert run.status == "succeeded", celery_worker_process.log()
    page.reload()
    assert page.inner_text("#unattributed-total") == "$0.00"
    assert "Nothing unattributed in this period" in page.inner_text("#spend")
    _shot(page, "unattributed-after-1280.png")
    page.goto(live_server.url + reverse("project_detail", args=["image-ranking"]))
    stray = page.locator("#experiment-costs tbody tr", has_text="stray-run")
    assert "$7.50" in stray.inner_text()
    page.wait_for_selector("#spend div.chart[data-drawn=true] .main-svg")
    _shot(page, "project-spend-1280.png")
    assert page.problems == []
