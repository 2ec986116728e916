"""A gateway's per-request log (LiteLLM, OpenRouter generations) is loaded as one line per UTC
day and all else the requests share: exact sums, the first start and the last end, the group's
first row; each request counted once; a bad value named by its own row."""

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db.models import Sum

from apps.billing.models import CostLineItem, DailyModelApiCost, Delivery, ImportRun

from ..conftest import run_import
from . import api_pages as pages

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

OTHER_KEY = "sk-hash-other"


def request(number: int, spend: str, start: str, end: str, **changes) -> dict:
    row = {
        **pages.litellm_rows()[0],
        "request_id": f"chatcmpl-{number}",
        "spend": spend,
        "total_tokens": "",
        "prompt_tokens": "100",
        "completion_tokens": str(number),
        "startTime": start,
        "endTime": end,
        "request_tags": "[]",
    }
    return {**row, **changes}


def day_of_requests() -> list[dict]:
    return [
        request(1, "0.001", "2025-01-02T09:00:00Z", "2025-01-02T09:00:02Z"),
        request(2, "0.002", "2025-01-02T23:59:58Z", "2025-01-03T00:00:03Z"),
        request(3, "0.004", "2025-01-02T12:00:00Z", "2025-01-02T12:00:01Z", api_key=OTHER_KEY),
        request(4, "0.008", "2025-01-03T00:00:00Z", "2025-01-03T00:00:01Z"),
        request(5, "0.016", "2025-01-02T10:30:00Z", "2025-01-02T10:30:01Z"),
        request(6, "0.032", "2025-01-02T11:00:00Z", "2025-01-02T11:00:01Z", model="gpt-4.1"),
    ]


def lines():
    return list(
        CostLineItem.objects.order_by("source_row").values_list(
            "source_row",
            "resource_id",
            "model",
            "charge_period_start",
            "charge_period_end",
            "billed_cost",
            "tokens",
            "requests",
        )
    )


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_a_days_requests_of_one_key_and_model_are_one_line(acme, tmp_path):
    run = run_import(pages.write_litellm_csv(tmp_path / "spend.csv", day_of_requests()))
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.billed_cost == {"USD": "0.063"}
    key, model = pages.KEY, "gpt-4o-2024-08-06"
    assert lines() == [
        # Requests 1, 2 and 5 (rows 2, 3 and 6): the day's first start, its last end.
        (
            2,
            key,
            model,
            at("2025-01-02 09:00:00"),
            at("2025-01-03 00:00:03"),
            Decimal("0.019"),
            Decimal(308),
            Decimal(3),
        ),
        (
            4,
            OTHER_KEY,
            model,
            at("2025-01-02 12:00"),
            at("2025-01-02 12:00:01"),
            Decimal("0.004"),
            Decimal(103),
            Decimal(1),
        ),
        (
            5,
            key,
            model,
            at("2025-01-03 00:00"),
            at("2025-01-03 00:00:01"),
            Decimal("0.008"),
            Decimal(104),
            Decimal(1),
        ),
        (
            7,
            key,
            "gpt-4.1",
            at("2025-01-02 11:00"),
            at("2025-01-02 11:00:01"),
            Decimal("0.032"),
            Decimal(106),
            Decimal(1),
        ),
    ]
    delivery = Delivery.objects.get()
    assert (delivery.rows, delivery.line_items) == (6, 4)
    rollup = (
        DailyModelApiCost.objects.values("day", "model")
        .annotate(requests=Sum("requests"), billed=Sum("billed_cost"))
        .order_by("day", "model")
        .values_list("day", "model", "requests", "billed")
    )
    assert [(f"{d:%m-%d}", m, r, c) for d, m, r, c in rollup] == [
        ("01-02", "gpt-4.1", Decimal(1), Decimal("0.032")),
        ("01-02", model, Decimal(4), Decimal("0.023")),
        ("01-03", model, Decimal(1), Decimal("0.008")),
    ]


def test_a_request_listed_twice_is_summed_once_and_tags_keep_lines_apart(acme, tmp_path):
    rows = day_of_requests()[:2]
    rows[1]["request_tags"] = '["service:ranker"]'
    run = run_import(pages.write_litellm_csv(tmp_path / "spend.csv", [*rows, rows[0], rows[1]]))
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.billed_cost == {"USD": "0.003"}
    assert list(
        CostLineItem.objects.order_by("source_row").values_list(
            "source_row", "billed_cost", "requests", "deployment__name"
        )
    ) == [(2, Decimal("0.001"), Decimal(1), None), (3, Decimal("0.002"), Decimal(1), "ranker-prod")]
    assert Delivery.objects.values_list("rows", "line_items").get() == (2, 2)


def test_a_bad_spend_is_named_by_its_own_row(acme, tmp_path):
    rows = day_of_requests()
    rows[4]["spend"] = "0.0x1"
    run = run_import(pages.write_litellm_csv(tmp_path / "spend.csv", rows))
    assert run.status == ImportRun.Status.FAILED
    assert run.results[0]["error"] == (
        "spend.csv: row 6, column spend: '0.0x1' is not a decimal number"
    )
    assert CostLineItem.objects.count() == 0


def test_an_end_before_its_start_is_named_by_its_own_row(acme, tmp_path):
    rows = day_of_requests()
    rows[4]["endTime"] = "2025-01-02T10:29:00Z"
    run = run_import(pages.write_litellm_csv(tmp_path / "spend.csv", rows))
    assert run.status == ImportRun.Status.FAILED
    assert run.results[0]["error"] == (
        "spend.csv: row 6, column endTime: '2025-01-02T10:29:00Z' is before the charge's start "
        "(ChargePeriodStart): the charge ends before it starts"
    )


def test_a_bad_value_shared_by_a_group_is_named_by_the_first_row_holding_it(acme, tmp_path):
    rows = day_of_requests()
    team = "t" * 201  # the line's team (SubAccountId) holds 200 characters
    for row in (rows[1], rows[4]):  # rows 3 and 6, one group
        row["team_id"] = team
    run = run_import(pages.write_litellm_csv(tmp_path / "spend.csv", rows))
    assert run.status == ImportRun.Status.FAILED
    assert run.results[0]["error"] == (
        f"spend.csv: row 3, column team_id: '{team[:79]}…' is not text of at most 200 characters"
    )


def test_a_missing_spend_is_refused_by_its_own_row_not_summed_away(acme, tmp_path):
    rows = day_of_requests()
    rows[4]["spend"] = ""  # row 6, in the group of rows 2 and 3
    run = run_import(pages.write_litellm_csv(tmp_path / "spend.csv", rows))
    assert run.status == ImportRun.Status.FAILED
    assert run.results[0]["error"] == (
        "spend.csv: row 6, column spend: empty, but a decimal number is required"
    )
    assert CostLineItem.objects.count() == 0


def test_a_hexadecimal_token_count_is_refused(acme, tmp_path):
    rows = day_of_requests()
    rows[2]["total_tokens"] = "0x1A"
    run = run_import(pages.write_litellm_csv(tmp_path / "spend.csv", rows))
    assert run.status == ImportRun.Status.FAILED
    assert run.results[0]["error"] == (
        "spend.csv: row 4, column total_tokens: '0x1A' is not a whole number"
    )


def test_batches_read_ahead_name_a_bad_record_by_its_json_path(acme, tmp_path, settings):
    settings.BILLING_IMPORT_BATCH_ROWS = 2
    rows = [{**row, "total_tokens": None} for row in day_of_requests()]
    rows[4]["spend"] = "n/a"  # the third batch's first record
    path = tmp_path / "spend.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    run = run_import(path)
    assert run.status == ImportRun.Status.FAILED
    assert run.results[0]["error"] == (
        "spend.json: [4].spend (record 5): 'n/a' is not a decimal number"
    )


def test_a_batch_of_requests_all_listed_before_is_skipped(acme, tmp_path, settings):
    settings.BILLING_IMPORT_BATCH_ROWS = 2
    rows = [{**row, "total_tokens": None} for row in day_of_requests()[:2]]
    path = tmp_path / "spend.json"
    path.write_text(json.dumps([*rows, *rows, rows[0]]), encoding="utf-8")
    run = run_import(path)
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.billed_cost == {"USD": "0.003"}
    assert run.results[0]["notes"] == ["requests listed more than once are counted once"]
    assert Delivery.objects.values_list("rows", "line_items").get() == (2, 1)


def test_requests_of_two_months_are_two_deliveries_each_counting_its_rows(acme, tmp_path):
    rows = [
        request(1, "0.001", "2025-01-31T10:00:00Z", "2025-01-31T10:00:01Z"),
        request(2, "0.002", "2025-01-31T11:00:00Z", "2025-01-31T11:00:01Z"),
        request(3, "0.004", "2025-02-01T09:00:00Z", "2025-02-01T09:00:01Z"),
    ]
    run = run_import(pages.write_litellm_csv(tmp_path / "spend.csv", rows))
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    deliveries = Delivery.objects.order_by("billing_period_start").values_list(
        "billing_period_start__month", "rows", "line_items", "billed_cost"
    )
    assert list(deliveries) == [(1, 2, 1, {"USD": "0.003"}), (2, 1, 1, {"USD": "0.004"})]
