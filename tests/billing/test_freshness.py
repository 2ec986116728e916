"""Data freshness: per source (uploads and the command line as one group) and billing account,
the newest charge loaded and whether it lags; the overview's warning line."""

from datetime import UTC, datetime
from pathlib import Path

import pytest
import time_machine
from django.urls import reverse

from apps.billing import freshness, services_sources
from apps.billing.models import BillingSource, ImportRun
from apps.billing.services import import_run_create, import_run_execute
from apps.spend import selectors

from .conftest import focus_line, run_import, write_focus

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

NOW = datetime(2025, 2, 5, 12, 0, tzinfo=UTC)


def bill(path: Path, account: str, charge_start: str, charge_end: str) -> Path:
    billing_period = (
        {}
        if charge_start.startswith("2025-01")
        else {
            "BillingPeriodStart": "2025-02-01T00:00:00Z",
            "BillingPeriodEnd": "2025-03-01T00:00:00Z",
        }
    )
    line = focus_line(
        BillingAccountId=account,
        ChargePeriodStart=charge_start,
        ChargePeriodEnd=charge_end,
        **billing_period,
    )
    return write_focus(path, [line])


def load_from(source: BillingSource, path: Path) -> ImportRun:
    run = import_run_create(paths=[str(path)], origin=ImportRun.Origin.SOURCE, source=source)
    run = import_run_execute(import_run=run)
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    return run


@pytest.fixture
def loaded(acme, tmp_path, settings):
    settings.BILLING_FRESHNESS_LAG_DAYS = 2
    aws = services_sources.billing_source_create(
        name="aws", kind=BillingSource.Kind.FOLDER, path=str(tmp_path)
    )
    services_sources.billing_source_create(
        name="gcp", kind=BillingSource.Kind.FOLDER, path=str(tmp_path)
    )
    load_from(aws, bill(tmp_path / "a.csv", "111", "2025-01-02T10:00:00Z", "2025-01-02T11:00:00Z"))
    load_from(aws, bill(tmp_path / "b.csv", "444", "2025-02-04T10:00:00Z", "2025-02-04T11:00:00Z"))
    run_import(bill(tmp_path / "c.csv", "333", "2025-02-04T23:00:00Z", "2025-02-05T00:00:00Z"))
    return aws


def table(groups) -> list:
    return [
        (g.name, g.lag_days, [(a.billing_account_id, a.data_as_of, a.lagging) for a in g.accounts])
        for g in groups
    ]


def test_each_source_and_account_has_its_data_as_of_and_lag(loaded):
    with time_machine.travel(NOW, tick=False):
        groups = freshness.freshness()

    assert table(groups) == [
        (
            "aws",
            2,
            [
                ("111", datetime(2025, 1, 2, 11, tzinfo=UTC), True),
                ("444", datetime(2025, 2, 4, 11, tzinfo=UTC), False),
            ],
        ),
        ("gcp", 2, []),
        ("Uploads and command line", 2, [("333", datetime(2025, 2, 5, tzinfo=UTC), False)]),
    ]
    assert [(g.data_as_of, g.lagging) for g in groups] == [
        (datetime(2025, 2, 4, 11, tzinfo=UTC), True),
        (None, False),
        (datetime(2025, 2, 5, tzinfo=UTC), False),
    ]
    # The same moment the spend pages show as "bill loaded up to".
    assert freshness.overall_as_of(groups) == selectors.data_as_of()
    assert selectors.data_as_of() == datetime(2025, 2, 5, tzinfo=UTC)


def test_a_sources_own_lag_days_and_the_setting_for_uploads_decide_who_lags(loaded, settings):
    loaded.freshness_lag_days = 40
    loaded.save()
    settings.BILLING_FRESHNESS_LAG_DAYS = 0

    with time_machine.travel(NOW, tick=False):
        warnings = freshness.lag_warnings()

    assert [(w.group, w.billing_account_id, w.lag_days) for w in warnings] == [
        ("Uploads and command line", "333", 0)
    ]


def test_the_overview_warns_when_an_account_lags_and_says_nothing_when_none_does(
    loaded, staff_client
):
    with time_machine.travel(NOW, tick=False):
        page = staff_client.get(reverse("home")).content.decode()
    assert (
        '<p class="freshness-warning" role="status"><mark>The bill lags:</mark> account '
        "<code>111</code> (aws) has data up to 2 Jan 2025 11:00, more than 2 days ago."
    ) in page

    BillingSource.objects.filter(name="aws").update(freshness_lag_days=60)
    with time_machine.travel(NOW, tick=False):
        page = staff_client.get(reverse("home")).content.decode()
    assert "freshness-warning" not in page
    # The overview always says how far the bill has got: the account furthest behind, of three.
    assert (
        'bill loaded up to <span class="data-as-of">2 Jan 2025 11:00</span> <small>(account '
        "<code>111</code>, the furthest behind of 3: "
        f'<a href="{reverse("data_freshness")}">every account</a>)</small>'
    ) in page


def test_days_behind_count_from_the_moment_the_lag_is_judged(loaded):
    [aws] = freshness.freshness(now=NOW, source=loaded)

    assert [(a.billing_account_id, a.lagging, a.days_behind) for a in aws.accounts] == [
        ("111", True, 34),  # 2 Jan 11:00 to 5 Feb 12:00
        ("444", False, 1),
    ]


def test_a_monthly_purchase_line_does_not_move_data_as_of_and_it_is_never_in_the_future(
    acme, tmp_path
):
    usage = focus_line(
        BillingPeriodStart="2025-02-01T00:00:00Z",
        BillingPeriodEnd="2025-03-01T00:00:00Z",
        ChargePeriodStart="2025-02-01T00:00:00Z",
        ChargePeriodEnd="2025-02-01T01:00:00Z",
    )
    # A savings plan's monthly fee, billed on the 1st for the whole month.
    fee = focus_line(
        BillingPeriodStart="2025-02-01T00:00:00Z",
        BillingPeriodEnd="2025-03-01T00:00:00Z",
        ChargePeriodStart="2025-02-01T00:00:00Z",
        ChargePeriodEnd="2025-03-01T00:00:00Z",
        ChargeCategory="Purchase",
        ChargeFrequency="Recurring",
        PricingCategory="",
    )
    # Usage with no ChargeFrequency (formats without it) counts; a recurring usage line does not.
    recurring = dict(usage, ChargeFrequency="Recurring", ChargePeriodEnd="2025-02-20T00:00:00Z")
    run_import(write_focus(tmp_path / "feb.csv", [usage, fee, recurring]))

    with time_machine.travel(datetime(2025, 2, 1, 6, tzinfo=UTC), tick=False):
        [uploads] = freshness.freshness()
        assert [(a.billing_account_id, a.data_as_of) for a in uploads.accounts] == [
            ("111111111111", datetime(2025, 2, 1, 1, tzinfo=UTC))
        ]
        assert selectors.data_as_of() == datetime(2025, 2, 1, 1, tzinfo=UTC)

    # Usage stamped past now (a clock ahead) reads as now, never as a moment still to come.
    ahead = dict(
        usage,
        BillingAccountId="999",
        ChargePeriodStart="2025-02-01T08:00:00Z",
        ChargePeriodEnd="2025-02-01T09:00:00Z",
    )
    run_import(write_focus(tmp_path / "ahead.csv", [ahead]))
    with time_machine.travel(datetime(2025, 2, 1, 6, tzinfo=UTC), tick=False):
        fresh = selectors.bill_freshness()
    assert (fresh.newest, fresh.oldest, fresh.oldest_account, fresh.accounts) == (
        datetime(2025, 2, 1, 6, tzinfo=UTC),
        datetime(2025, 2, 1, 1, tzinfo=UTC),
        "111111111111",
        2,
    )


def test_a_lead_reads_freshness_and_source_health_and_a_member_gets_404(
    loaded, lead_client, member_client
):
    with time_machine.travel(NOW, tick=False):
        page = lead_client.get(reverse("data_freshness")).content.decode()
        assert member_client.get(reverse("data_freshness")).status_code == 404
    assert "<code>111</code>" in page and "<code>444</code>" in page and "<code>333</code>" in page
    assert '<span class="badge badge-failed">Lagging</span>' in page
    assert '<table class="striped" id="source-health">' in page
    assert "Not polled yet" in page
    # Read only: no link to the staff-only source pages, no action.
    assert reverse("billing_source_detail", args=[loaded.pk]) not in page
    assert "Poll now" not in page and '<form method="post"' not in page.split("<main")[-1]
