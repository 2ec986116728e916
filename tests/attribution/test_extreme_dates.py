"""Every spend page, partial and export survives any date: asked for in the URL, or stored in
the bill at the very ends of what a date holds (rows put straight into the database: the
importers refuse such dates)."""

import csv
import io
from datetime import UTC, date, datetime

import pytest
from django.http import QueryDict
from django.urls import reverse

from apps.billing.freshness import freshness
from apps.spend.filters import preset_period, spend_filters_from
from apps.spend.selectors import data_as_of

from .conftest import NOW, delivery, resource_rollup, rollup

pytestmark = pytest.mark.django_db

TODAY = date(2025, 3, 20)
OUTSIDE = "Choose a date between 1 Jan 2000 and 31 Dec 2099."
INVALID = "Enter a valid date."
# (query, the error it must get)
EXTREME_QUERIES = [
    ("start=0001-01-01&end=0001-01-01", OUTSIDE),
    ("start=0001-01-01&end=0001-12-31", OUTSIDE),
    ("start=9999-12-31&end=9999-12-31", OUTSIDE),
    ("start=9999-01-01&end=9999-12-31", OUTSIDE),
    ("start=0001-01-01&end=9999-12-31", OUTSIDE),
    ("start=1999-12-31&end=2000-01-05", OUTSIDE),
    ("start=2099-12-25&end=2100-01-01", OUTSIDE),
    ("start=10000-01-01&end=10000-01-02", INVALID),
    ("start=2025-01-01&end=99999-12-31", INVALID),
    ("start=-1-01-01&end=2025-01-01", INVALID),
    ("start=2025-02-30&end=2025-03-01", INVALID),
    ("start=%00&end=%ff", INVALID),
    ("preset=all&start=0001-01-01&end=9999-12-31", OUTSIDE),
]
HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "spend"}


def pages(bill) -> list[str]:
    return [
        reverse("home"),
        reverse("unattributed"),
        reverse("project_detail", args=[bill.vision_project.slug]),
        reverse("model_detail", args=[bill.ranker.pk]),
        reverse("experiment_detail", args=[bill.resnet.pk]),
        reverse("deployment_detail", args=[bill.ranker_prod.pk]),
    ]


def exports(bill) -> list[str]:
    """Every table of every spend export."""
    tables = {
        reverse("overview_export"): (
            "spend",
            "projects",
            "models",
            "movers",
            "budgets",
            "unattributed",
        ),
        reverse("unattributed_export"): ("spend",),
        reverse("project_spend_export", args=[bill.vision_project.slug]): (
            "spend",
            "experiments",
            "deployments",
            "breakdown",
            "movers",
        ),
        reverse("model_spend_export", args=[bill.ranker.pk]): (
            "spend",
            "experiments",
            "deployments",
        ),
        reverse("experiment_spend_export", args=[bill.resnet.pk]): ("spend", "services"),
        reverse("deployment_spend_export", args=[bill.ranker_prod.pk]): ("spend", "services"),
    }
    return [f"{url}?table={table}" for url, names in tables.items() for table in names]


@pytest.mark.parametrize(("query", "message"), EXTREME_QUERIES)
def test_a_date_at_the_ends_of_the_calendar_is_refused_and_the_default_range_shown(query, message):
    state = spend_filters_from(QueryDict(query), today=TODAY, dimensions=())
    assert message in state.range_errors
    assert state.period == preset_period("30d", today=TODAY)


def test_the_first_and_last_days_of_the_window_are_accepted():
    state = spend_filters_from(
        QueryDict("start=2000-01-01&end=2000-01-31"), today=TODAY, dimensions=()
    )
    assert (state.range_errors, state.period.start) == ([], date(2000, 1, 1))
    state = spend_filters_from(
        QueryDict("start=2099-12-01&end=2099-12-31"), today=TODAY, dimensions=()
    )
    assert (state.range_errors, state.period.last_day) == ([], date(2099, 12, 31))


@pytest.mark.parametrize(("query", "message"), EXTREME_QUERIES)
def test_every_spend_page_and_partial_says_why_an_extreme_date_was_refused(
    staff_client, bill, query, message
):
    for url in pages(bill):
        for headers in ({}, HTMX):
            response = staff_client.get(f"{url}?{query}", **headers)
            assert response.status_code == 200, (url, headers)
            assert message in response.content.decode(), (url, headers)


@pytest.mark.parametrize(("query", "message"), EXTREME_QUERIES)
def test_every_export_answers_400_naming_the_refused_date(staff_client, bill, query, message):
    for url in exports(bill):
        response = staff_client.get(f"{url}&{query}")
        assert response.status_code == 400, url
        assert response["Content-Type"] == "text/plain; charset=utf-8"
        assert response.content.decode().startswith("The date range was refused: "), url
        assert message in response.content.decode(), url


@pytest.fixture
def bill_at_the_ends_of_time(bill, organization):
    """Charges on the first and the last day a date holds, one of them in the far future."""
    first = delivery(account="x-first", month=date(1, 1, 1), as_of=datetime(1, 1, 1, tzinfo=UTC))
    last = delivery(
        account="x-last",
        month=date(9999, 11, 1),
        as_of=datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    )
    rollup(first, date(1, 1, 1), "1.00", project=bill.vision_project, workload="training")
    rollup(last, date(9999, 12, 31), "2.00", project=bill.vision_project, workload="training")
    resource_rollup(first, date(1, 1, 1), "i-first", "1.00")
    resource_rollup(last, date(9999, 12, 31), "i-last", "2.00")
    return bill


@pytest.mark.parametrize("time_zone", ["UTC", "Asia/Tokyo", "America/Los_Angeles"])
def test_charges_at_the_ends_of_time_break_no_page_in_any_time_zone(
    staff_client, bill_at_the_ends_of_time, organization, time_zone
):
    organization.time_zone = time_zone
    organization.save()
    bill = bill_at_the_ends_of_time
    urls = [*pages(bill), reverse("billing_source_list"), reverse("import_list")]
    for url in urls:
        for query in ("", "preset=all", "preset=ytd"):
            response = staff_client.get(f"{url}?{query}")
            assert response.status_code == 200, (url, query)
    for url in exports(bill):
        for query in ("", "preset=all"):
            response = staff_client.get(f"{url}&{query}")
            assert response.status_code == 200, (url, query)
            list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_a_charge_in_the_future_does_not_make_the_bill_read_as_loaded_up_to_it(
    staff_client, bill_at_the_ends_of_time
):
    assert data_as_of() == NOW
    page = staff_client.get(reverse("home")).content.decode()
    # The page says the account furthest behind (here one at the first days a date holds); the
    # account in the far future reads as now on the freshness page, never as 9999.
    assert "(account <code>x-first</code>, the furthest behind of 4" in page
    assert "9999" not in page
    assert "9999" not in staff_client.get(reverse("data_freshness")).content.decode()
    accounts = {
        account.billing_account_id: account for group in freshness() for account in group.accounts
    }
    assert (accounts["x-last"].data_as_of, accounts["x-last"].lagging) == (NOW, False)
    assert accounts["x-last"].days_behind == 0
    assert accounts["x-first"].data_as_of == datetime(1, 1, 3, tzinfo=UTC)
    assert accounts["x-first"].lagging is True
