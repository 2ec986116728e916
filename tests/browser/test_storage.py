"""A real browser on the storage and egress page: a lead opens it from the overview, every chart
draws (the stacked growth, the forecast with its band, the weekly transfer), the egress matrix
and the fastest bucket show, a project's view names its budget month. Not one console error.

The bill goes through the real import, dated back from today: 40 days up to yesterday of the
bucket s3://ranking-ckpt growing from 200 GiB by 5 GiB a day (0.001 USD per GiB-day), and
2 GiB a day from us-east-1 to eu-west-1 (0.04 USD a day).
"""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.urls import reverse

from apps.accounts.models import Membership, Organization
from apps.billing.services import import_run_create, import_run_execute
from tests.billing.conftest import focus_line, write_focus
from tests.factories import PASSWORD, MembershipFactory, ProjectFactory, TeamFactory, UserFactory

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, databases=["default", "progress"]),
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
DAYS = 40


def _period(day) -> dict:
    start = day.replace(day=1)
    end = (start + timedelta(days=32)).replace(day=1)
    return {
        "BillingPeriodStart": f"{start:%Y-%m-%d}T00:00:00Z",
        "BillingPeriodEnd": f"{end:%Y-%m-%d}T00:00:00Z",
        "ChargePeriodStart": f"{day:%Y-%m-%d}T00:00:00Z",
        "ChargePeriodEnd": f"{day + timedelta(days=1):%Y-%m-%d}T00:00:00Z",
    }


@pytest.fixture
def storage_bill(tmp_path):
    org = Organization.get()
    org.currency, org.time_zone = "USD", "UTC"
    org.save()
    team = TeamFactory(name="Vision", slug="vision")
    MembershipFactory(user=UserFactory(username="lena"), team=team, role=Membership.Role.LEAD)
    ProjectFactory(team=team, name="Ranking", slug="ranking", monthly_budget=Decimal("5000.00"))
    today = datetime.now(tz=UTC).date()
    lines = []
    for i in range(DAYS):
        day = today - timedelta(days=DAYS - i)
        gib = 200 + 5 * i
        lines.append(
            focus_line(
                **_period(day),
                ServiceName="Amazon Simple Storage Service",
                ServiceCategory="Storage",
                ResourceId="s3://ranking-ckpt",
                ConsumedQuantity=str(gib * 24),
                ConsumedUnit="GiB-Hours",
                EffectiveCost=f"{Decimal('0.001') * gib}",
                BilledCost=f"{Decimal('0.001') * gib}",
                x_UsageType="TimedStorage-ByteHrs",
                Tags='{"project": "ranking", "data_class": "checkpoints"}',
            )
        )
        lines.append(
            focus_line(
                **_period(day),
                ServiceName="AWS Data Transfer",
                ServiceCategory="Networking",
                ConsumedQuantity="2",
                ConsumedUnit="GB",
                EffectiveCost="0.04",
                BilledCost="0.04",
                x_UsageType="USE1-EUW1-AWS-Out-Bytes",
                Tags='{"project": "ranking"}',
            )
        )
    path = write_focus(tmp_path / "storage.csv", lines)
    run = import_run_execute(import_run=import_run_create(paths=[str(path)]))
    assert run.status == "succeeded", run.error


def test_a_lead_opens_the_storage_page_and_every_chart_draws(
    live_server, storage_bill, browser_page
):
    # statsmodels' first import (scipy, pandas) takes seconds on a busy machine: before the page.
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel  # noqa: F401

    page = browser_page
    page.set_default_timeout(90_000)
    page.goto(live_server.url + reverse("home"))
    page.fill("#id_username", "lena")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(live_server.url + reverse("home"))
    page.click("#storage-link")
    page.wait_for_url(live_server.url + reverse("storage"))
    for chart in ("storage-bytes", "storage-spend", "storage-forecast", "egress-weekly"):
        page.wait_for_selector(f"div.chart[data-figure='{chart}'][data-drawn=true] .main-svg")
    # The last day: 200 + 5 × 39 = 395 GiB, 35 GiB more than a week before.
    assert page.inner_text("#stored-now") == "395 GiB"
    assert page.inner_text("#stored-growth") == "+35.0 GiB in the last week"
    assert "$1.60" in page.inner_text("#egress-matrix")  # 40 days × 0.04
    assert "80.0 GiB" in page.inner_text("#egress-matrix")
    assert "s3://ranking-ckpt" in page.inner_text("#fastest-buckets")
    assert page.inner_text("#stored-in-90") != "–"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "storage-1280.png"), full_page=True)

    page.select_option("select[name=project]", "ranking")
    page.click("#storage-filters button[type=submit]")
    page.wait_for_selector("#budget-crossing")
    assert "project=ranking" in page.url
    assert page.inner_text("#budget-crossing") == "not crossed in 90 days"
    page.wait_for_selector("div.chart[data-figure='storage-forecast'][data-drawn=true] .main-svg")
    assert page.problems == []
