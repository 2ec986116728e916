"""The storage and egress page on a bill with figures worked out by hand, and the forecast on a
series with a known trend.

Today is frozen at 20 March 2025 (UTC). The bill: 60 days up to 19 March of
- the checkpoint bucket s3://vision-ckpt (project vision, data class checkpoints): on day i
  (i = 0 on 19 January … 59 on 19 March) 100 + 10·i GiB, at 0.001 USD per GiB-day;
- 5 GiB a day from us-east-1 to eu-west-1, 0.10 USD a day, vision's too;
so the last day holds 690 GiB (70 GiB more than a week before), the last 30 days' storage cost
0.001 × Σ(100 + 10·i, i = 30…59) = 16.35, and the 60 days moved 300 GiB for 6.00.
"""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import numpy as np
import pytest
import time_machine
from django.urls import reverse

from apps.accounts.models import Organization
from apps.spend.storage import forecast
from tests.billing.conftest import focus_line, run_import, write_focus
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

NOW = datetime(2025, 3, 20, 12, 0, tzinfo=UTC)
FIRST = date(2025, 1, 19)


def _period(day: date) -> dict:
    start = day.replace(day=1)
    end = (start + timedelta(days=32)).replace(day=1)
    return {
        "BillingPeriodStart": f"{start}T00:00:00Z",
        "BillingPeriodEnd": f"{end}T00:00:00Z",
        "ChargePeriodStart": f"{day}T00:00:00Z",
        "ChargePeriodEnd": f"{day + timedelta(days=1)}T00:00:00Z",
    }


@pytest.fixture
def growing_bill(tmp_path):
    org = Organization.get()
    org.currency = "USD"
    org.save()
    project = ProjectFactory(name="Vision", slug="vision", monthly_budget=Decimal("30.00"))
    lines = []
    for i in range(60):
        day = FIRST + timedelta(days=i)
        gib = 100 + 10 * i
        cost = f"{Decimal('0.001') * gib}"
        lines.append(
            focus_line(
                **_period(day),
                ServiceName="Amazon Simple Storage Service",
                ServiceCategory="Storage",
                ResourceId="s3://vision-ckpt",
                ConsumedQuantity=str(gib * 24),
                ConsumedUnit="GiB-Hours",
                EffectiveCost=cost,
                BilledCost=cost,
                x_UsageType="TimedStorage-ByteHrs",
                Tags='{"project": "vision", "data_class": "checkpoints"}',
            )
        )
        lines.append(
            focus_line(
                **_period(day),
                ServiceName="AWS Data Transfer",
                ServiceCategory="Networking",
                ConsumedQuantity="5",
                ConsumedUnit="GB",
                EffectiveCost="0.10",
                BilledCost="0.10",
                x_UsageType="USE1-EUW1-AWS-Out-Bytes",
                Tags='{"project": "vision"}',
            )
        )
    run = run_import(write_focus(tmp_path / "growing.csv", lines))
    assert run.status == "succeeded", run.error
    return project


@time_machine.travel(NOW, tick=False)
def test_the_page_shows_hand_computed_bytes_spend_growth_and_egress(growing_bill, staff_client):
    response = staff_client.get(reverse("storage"))
    assert response.status_code == 200
    page = response.content.decode()
    assert '<p class="figure" id="stored-now">690 GiB</p>' in page
    assert "+70.0 GiB in the last week" in page
    assert '<p class="figure" id="storage-spend-30">$16.35</p>' in page
    assert '<p class="muted" id="egress-total">$6.00 for 300 GiB moved in the period.</p>' in page
    context = response.context
    cell = context["matrix"].cells[("us-east-1", "eu-west-1")]
    assert cell == {"bytes": Decimal(300 * 2**30), "spend": Decimal("6.00")}
    [bucket] = context["buckets"]
    assert bucket.resource_id == "s3://vision-ckpt"
    assert bucket.data_class == "checkpoints"
    # last week's average 660 GiB against 380 GiB four weeks before: 70 GiB a week
    assert bucket.growth_per_week == Decimal(70 * 2**30)
    assert bucket.spend == Decimal("4.620")  # 0.001 × (630 + 640 + … + 690)
    assert [p.project.slug for p in context["per_project"]] == ["vision"]
    assert context["per_project"][0].bytes_now == Decimal(690 * 2**30)
    # January and February come from the monthly rows, 1-19 March from the daily ones:
    # 0.001 × Σ(100 + 10·i, i = 0…59) = 23.70 stored, and the 300 GiB moved for 6.00.
    assert context["per_project"][0].storage_spend == Decimal("23.70")
    assert context["per_project"][0].moved_bytes == Decimal(300 * 2**30)
    assert context["per_project"][0].egress_spend == Decimal("6.00")
    # a straight line goes on: in 90 days, 690 + 900 GiB
    assert abs(context["bytes_in_90"] / 2**30 - 1590) < Decimal("1")
    assert context["bytes_in_90_low"] <= context["bytes_in_90"] <= context["bytes_in_90_high"]


@time_machine.travel(NOW, tick=False)
def test_the_project_page_names_the_month_its_budget_is_crossed(growing_bill, staff_client):
    response = staff_client.get(reverse("storage"), {"project": "vision"})
    crossing = response.context["crossing"]
    # 16.35 storage and 3.00 transfer in the last 30 days: 19.35 of 30.00. Storage spend grows
    # 0.01 a day (0.70 on 20 March). March's forecast days (0.70 … 0.81, average 0.755) make
    # 30 × 0.755 + 3.00 = 25.65; April's (0.82 … 1.11, average 0.965) 28.95 + 3.00 = 31.95.
    assert crossing.other_spend == Decimal("3.00")
    assert not crossing.already_over
    assert crossing.month == date(2025, 4, 1)
    assert "crossed in April 2025" in response.content.decode()


@time_machine.travel(NOW, tick=False)
def test_an_outsider_sees_none_of_another_teams_storage(growing_bill, client):
    from tests.factories import PASSWORD, UserFactory

    UserFactory(username="outsider")
    client.login(username="outsider", password=PASSWORD)
    response = client.get(reverse("storage"))
    assert response.status_code == 200
    assert '<p class="figure" id="stored-now">0 B</p>' in response.content.decode()
    assert client.get(reverse("storage"), {"project": "vision"}).status_code == 404


def test_the_forecast_of_a_known_trend_lands_within_its_band():
    rng = np.random.default_rng(18)
    days = [date(2025, 1, 1) + timedelta(days=i) for i in range(210)]
    truth = [1000 + 20 * i for i in range(210)]
    noisy = [Decimal(str(round(v + rng.normal(0, 15), 3))) for v in truth[:120]]
    result = forecast(days[:120], noisy)
    assert result.days[0] == date(2025, 5, 1) and len(result.days) == 90
    inside = sum(
        low <= actual <= high
        for low, actual, high in zip(result.lower, truth[120:], result.upper, strict=True)
    )
    assert inside >= 85  # a 95% band: at most a few of the 90 days outside
    assert abs(result.mean[-1] - truth[-1]) / truth[-1] < 0.02
    assert all(
        low <= mean <= high
        for low, mean, high in zip(result.lower, result.mean, result.upper, strict=True)
    )


def test_a_flat_or_short_series_has_no_forecast():
    days = [date(2025, 1, 1) + timedelta(days=i) for i in range(30)]
    assert forecast(days, [Decimal(5)] * 30) is None
    assert forecast(days[:10], [Decimal(i) for i in range(10)]) is None


@time_machine.travel(NOW, tick=False)
def test_buckets_are_ranked_by_bytes_added_and_a_shrinking_one_is_left_out(
    growing_bill, staff_client, tmp_path
):
    # Another account's bill of the same days: a bucket growing 20 GiB a day (twice vision's
    # pace) and one shrinking 5 GiB a day.
    lines = []
    for i in range(60):
        day = FIRST + timedelta(days=i)
        for bucket, gib in (("s3://fast", 50 + 20 * i), ("s3://shrinking", 400 - 5 * i)):
            lines.append(
                focus_line(
                    **_period(day),
                    BillingAccountId="222222222222",
                    ServiceName="Amazon Simple Storage Service",
                    ServiceCategory="Storage",
                    ResourceId=bucket,
                    ConsumedQuantity=str(gib * 24),
                    ConsumedUnit="GiB-Hours",
                    EffectiveCost="0.01",
                    BilledCost="0.01",
                    x_UsageType="TimedStorage-ByteHrs",
                )
            )
    run = run_import(write_focus(tmp_path / "more-buckets.csv", lines))
    assert run.status == "succeeded", run.error
    buckets = staff_client.get(reverse("storage")).context["buckets"]
    # 20 GiB a day over the 28 days between the two weeks: 560 GiB, 140 GiB a week.
    assert [(b.resource_id, b.growth_per_week) for b in buckets] == [
        ("s3://fast", Decimal(140 * 2**30)),
        ("s3://vision-ckpt", Decimal(70 * 2**30)),
    ]
    assert buckets[0].spend == Decimal("0.07")
    assert [b.project for b in buckets] == ["", "Vision"]


@time_machine.travel(NOW, tick=False)
def test_a_team_shares_its_cached_figures(growing_bill, team, lead_client, member_client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    growing_bill.team = team
    growing_bill.save()
    first = lead_client.get(reverse("storage"))
    with CaptureQueriesContext(connection) as queries:
        second = member_client.get(reverse("storage"))
    # The member sees what the lead sees, from the figures the lead's visit computed.
    read = [q["sql"] for q in queries.captured_queries if "storage" in q["sql"]]
    assert read == []
    assert '<p class="figure" id="stored-now">690 GiB</p>' in second.content.decode()
    assert first.context["per_project"][0].storage_spend == Decimal("23.70")
    assert second.context["per_project"][0].storage_spend == Decimal("23.70")


@time_machine.travel(datetime(2025, 3, 22, 9, 0, tzinfo=UTC), tick=False)
def test_a_bill_two_days_behind_ends_the_page_at_its_last_whole_day(growing_bill, staff_client):
    # The bill's usage ends at midnight on 20 March: its last whole day is the 19th, as when it
    # was fresh, so nothing reads as deleted.
    page = staff_client.get(reverse("storage")).content.decode()
    assert '<p class="figure" id="stored-now">690 GiB</p>' in page
    assert "+70.0 GiB in the last week" in page
    assert '<p class="figure" id="storage-spend-30">$16.35</p>' in page
    assert (
        '<p class="muted" id="storage-period">20 Dec 2024 – 20 Mar 2025 (UTC days, the last one '
        "excluded): the bill's last whole day, so that a day it has not reached does not read as "
        "storage deleted</p>"
    ) in page


@time_machine.travel(datetime(2025, 3, 22, 9, 0, tzinfo=UTC), tick=False)
def test_a_models_page_shows_what_it_held_on_the_bills_last_whole_day(
    growing_bill, staff_client, tmp_path
):
    from apps.deployments.models import Model

    model = Model.objects.create(project=growing_bill, name="ranker-v2")
    line = focus_line(
        **_period(FIRST + timedelta(days=59)),  # 19 March
        BillingAccountId="333333333333",
        ServiceName="Amazon Simple Storage Service",
        ServiceCategory="Storage",
        ResourceId="s3://ranker-artefacts",
        ConsumedQuantity=str(40 * 24),
        ConsumedUnit="GiB-Hours",
        EffectiveCost="0.04",
        BilledCost="0.04",
        x_UsageType="TimedStorage-ByteHrs",
        Tags='{"project": "vision", "model": "ranker-v2"}',
    )
    assert run_import(write_focus(tmp_path / "model.csv", [line])).status == "succeeded"
    page = staff_client.get(reverse("model_detail", args=[model.pk])).content.decode()
    assert '<strong id="model-storage-spend">$0.04</strong>' in page
    assert '<span id="model-storage-bytes">40.0 GiB</span> stored on the last day' in page
