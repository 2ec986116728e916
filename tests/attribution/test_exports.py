"""CSV exports of every table: the same figures as the page, exact, safe in a spreadsheet."""

import csv
import io
from datetime import date
from decimal import Decimal

import pytest
from django.urls import reverse

from apps.spend.csv_export import safe_cell

from .conftest import BUCKET, resource_rollup

pytestmark = pytest.mark.django_db


def rows(response) -> list[list[str]]:
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith("attachment; filename=")
    text = b"".join(response.streaming_content).decode()
    return list(csv.reader(io.StringIO(text)))


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("=SUM(A1:A9)", "'=SUM(A1:A9)"),
        ("+1 555 0100", "'+1 555 0100"),
        ("-rm -rf", "'-rm -rf"),
        ("@import", "'@import"),
        ("\tindent", "'\tindent"),
        ("i-0abc", "i-0abc"),
        (Decimal("-12.5"), "-12.50"),
        (Decimal("0.000000352000000"), "0.000000352"),
        (Decimal("8760.000000000000000"), "8760.00"),
        (3, 3),
        (None, ""),
    ],
)
def test_text_that_a_spreadsheet_would_run_is_made_text_and_numbers_stay_numbers(value, cell):
    assert safe_cell(value) == cell


def test_the_unattributed_export_defuses_a_resource_named_like_a_formula(staff_client, bill):
    table = rows(staff_client.get(reverse("unattributed_export")))
    assert table[0] == [
        "resource_id",
        "resource_name",
        "provider",
        "billing_account",
        "sub_account",
        "service",
        "region",
        "currency",
        "spend",
        "days",
        "first_day",
        "last_day",
    ]
    assert table[1] == [
        "i-orphan",
        "orphan box",
        "AWS",
        "111111111111",
        "222222222222",
        "Amazon Elastic Compute Cloud",
        "us-east-1",
        "USD",
        "15.00",
        "2",
        "2025-03-14",
        "2025-03-16",
    ]
    assert table[2][0] == "'" + BUCKET
    assert table[2][8] == "5.00"


def test_the_overview_exports_spend_by_day_and_workload_with_other_currencies_apart(
    staff_client, bill
):
    table = rows(staff_client.get(reverse("overview_export"), {"table": "spend", "preset": "7d"}))
    assert table[0] == ["day", "workload", "currency", "spend"]
    nonzero = [row for row in table[1:] if row[3] not in ("0", "0.00")]
    assert nonzero == [
        ["2025-03-15", "fine_tuning", "USD", "200.00"],
        ["2025-03-16", "storage", "USD", "5.00"],
        ["2025-03-16", "unattributed", "USD", "20.00"],
        ["", "", "EUR", "7.00"],
    ]
    assert len(table) == 1 + 7 * 3 + 1  # a row per day and workload with spend, and EUR


def test_the_overview_exports_projects_models_movers_and_budgets(staff_client, bill):
    url = reverse("overview_export")
    assert rows(staff_client.get(url, {"table": "projects"})) == [
        ["project", "team", "currency", "spend", "share", "cumulative_share"],
        [
            "Translation",
            "Language",
            "USD",
            "280.00",
            "0.5436893203883495145631067961",
            "0.5436893203883495145631067961",
        ],
        ["Image ranking", "Vision", "USD", "235.00", "0.4563106796116504854368932039", "1.00"],
    ]
    assert [row[:4] for row in rows(staff_client.get(url, {"table": "models"}))] == [
        ["model", "project", "currency", "spend"],
        ["mt", "Translation", "USD", "280.00"],
        ["ranker", "Image ranking", "USD", "190.00"],
    ]
    assert rows(staff_client.get(url, {"table": "movers"})) == [
        ["kind", "name", "of", "previous_period", "this_period", "change", "change_share"],
        ["project", "Translation", "Language", "20.00", "280.00", "260.00", "13.00"],
        [
            "project",
            "Image ranking",
            "Vision",
            "60.00",
            "235.00",
            "175.00",
            "2.916666666666666666666666667",
        ],
        ["experiment", "mt-big", "Translation", "20.00", "280.00", "260.00", "13.00"],
        ["experiment", "resnet", "Image ranking", "0.00", "160.00", "160.00", ""],
        # A negative number stays a number: no apostrophe.
        [
            "experiment",
            "vit",
            "Image ranking",
            "60.00",
            "40.00",
            "-20.00",
            "-0.3333333333333333333333333333",
        ],
        ["deployment", "ranker-prod", "ranker", "0.00", "30.00", "30.00", ""],
    ]
    assert rows(staff_client.get(url, {"table": "budgets"})) == [
        ["project", "team", "currency", "budget", "month_to_date", "forecast", "status"],
        ["Translation", "Language", "USD", "300.00", "200.00", "344.44", "heading over"],
        ["Image ranking", "Vision", "USD", "10000.00", "185.00", "318.61", "on track"],
    ]


def test_the_project_exports_experiments_deployments_and_the_breakdown(member_client, bill):
    url = reverse("project_spend_export", args=["image-ranking"])
    assert rows(member_client.get(url, {"table": "experiments"})) == [
        [
            "experiment",
            "project",
            "kind",
            "status",
            "currency",
            "spend",
            "gpu_hours",
            "cost_per_gpu_hour",
            "cumulative_share",
        ],
        [
            "resnet",
            "Image ranking",
            "training",
            "succeeded",
            "USD",
            "160.00",
            "2.5",
            "64.00",
            "0.80",
        ],
        ["vit", "Image ranking", "training", "failed", "USD", "40.00", "", "", "1.00"],
    ]
    assert rows(member_client.get(url, {"table": "deployments"})) == [
        [
            "deployment",
            "model",
            "project",
            "currency",
            "spend",
            "requests",
            "cost_per_1000_requests",
            "gpu_hours",
        ],
        ["ranker-prod", "ranker", "Image ranking", "USD", "30.00", "6000", "5.00", ""],
    ]
    breakdown = rows(member_client.get(url, {"table": "breakdown"}))
    assert [
        "pricing_category",
        "Spot",
        "USD",
        "40.00",
        "0.1702127659574468085106382979",
    ] in breakdown
    assert len(breakdown) == 1 + 1 + 2 + 3 + 3


def test_an_export_follows_the_filters_in_its_url(member_client, bill):
    url = reverse("project_spend_export", args=["image-ranking"])
    table = rows(member_client.get(url, {"table": "experiments", "workload": "inference"}))
    assert table[1:] == []


def test_an_unknown_table_is_a_404(staff_client, bill):
    assert staff_client.get(reverse("overview_export"), {"table": "nope"}).status_code == 404


def test_the_overview_exports_no_unattributed_table_to_a_member(member_client, bill):
    response = member_client.get(reverse("overview_export"), {"table": "unattributed"})
    assert response.status_code == 404


def test_the_budget_export_follows_the_team_filter(staff_client, bill):
    table = rows(
        staff_client.get(reverse("overview_export"), {"table": "budgets", "team": "vision"})
    )
    assert [row[0] for row in table[1:]] == ["Image ranking"]


def test_the_unattributed_export_defuses_formulas_behind_blanks_and_fullwidth_signs(
    staff_client, bill
):
    """Names a spreadsheet would run after skipping blanks, or reading `＝` as `=`; a credit
    (a negative amount) stays a number."""
    names = {
        "i-space": " =cmd|' /C calc'!A0",
        "i-newline": '\n=HYPERLINK("http://evil.example")',
        "i-pipe": "|cmd",
        "i-semicolon": " ;x",
        "i-fullwidth": "＝1+1",
    }
    for resource_id, name in names.items():
        resource_rollup(bill.march, date(2025, 3, 16), resource_id, "1.00", name=name)
    resource_rollup(bill.march, date(2025, 3, 16), "i-credit", "-12.50", name="credit")
    table = rows(staff_client.get(reverse("unattributed_export")))
    by_id = {row[0]: row for row in table[1:]}
    for resource_id, name in names.items():
        assert by_id[resource_id][1] == "'" + name
    assert (by_id["i-credit"][1], by_id["i-credit"][8]) == ("credit", "-12.50")
