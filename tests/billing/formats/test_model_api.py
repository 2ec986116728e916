"""Hosted-API spend: OpenAI, Anthropic, LiteLLM and OpenRouter files in their documented shapes,
loaded as model API lines with exact money, tokens, models and directions; deliveries per
provider account and month; requests never counted twice; errors that name the JSON path."""

import gzip
import json
from decimal import Decimal

import pytest

from apps.billing.models import CostLineItem, DailyModelApiCost, Delivery, ImportRun
from apps.insights.models import ModelApiPrice

from ..conftest import run_import
from . import api_pages as pages

pytestmark = pytest.mark.django_db(databases=["default", "progress"])


def api_lines(*fields):
    return list(
        CostLineItem.objects.filter(cost_kind="model_api")
        .order_by("source_row", "id")
        .values_list(*fields)
    )


def price(name, provider, *, input, output, cached=None):
    ModelApiPrice.objects.create(
        name=name,
        provider=provider,
        mode="chat",
        input_per_token=Decimal(input),
        output_per_token=Decimal(output),
        cached_input_per_token=None if cached is None else Decimal(cached),
        source="test",
        as_of="2025-01-01",
    )


def test_openai_costs_pages_load_dollars_with_model_and_direction_from_the_line_item(
    acme, tmp_path
):
    run = run_import(pages.write_json(tmp_path / "costs.json", pages.openai_costs_page()))
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.format == "openai_costs"
    assert run.billed_cost == {"USD": "3.91"}
    assert api_lines("model", "token_direction", "billed_cost", "resource_id", "workload") == [
        ("gpt-4o-2024-08-06", "input", Decimal("0.06"), "proj_abc", "unattributed"),
        ("gpt-4o-2024-08-06", "cached_input", Decimal("1.25"), "proj_abc", "unattributed"),
        ("gpt-4.1", "output", Decimal("2.5"), "proj_def", "unattributed"),
        ("unknown", "other", Decimal("0.1"), "", "unattributed"),
    ]
    delivery = Delivery.objects.get()
    assert (delivery.billing_account_id, f"{delivery.billing_period_start:%Y-%m-%d}") == (
        "openai",
        "2025-01-01",
    )
    starts = CostLineItem.objects.order_by("source_row").values_list(
        "charge_period_start", flat=True
    )
    assert [f"{s:%Y-%m-%d %H:%M}" for s in starts] == [
        "2025-01-02 00:00",
        "2025-01-02 00:00",
        "2025-01-03 00:00",
        "2025-01-03 00:00",
    ]


def test_openai_usage_pages_are_priced_from_the_catalogue_cached_tokens_apart(acme, tmp_path):
    price("gpt-4o-mini", "openai", input="0.00000015", output="0.0000006", cached="0.000000075")
    run = run_import(pages.write_json(tmp_path / "usage.json", pages.openai_usage_page()))
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.format == "openai_usage"
    # 200 uncached × $0.15/M + 800 cached × $0.075/M + 500 output × $0.60/M = $0.00039;
    # the fine-tuned model has no catalogue price: its 300 tokens count at $0.
    assert run.billed_cost == {"USD": "0.00039"}
    assert api_lines("model", "token_direction", "tokens", "requests", "billed_cost") == [
        ("gpt-4o-mini-2024-07-18", "input", Decimal(200), Decimal(5), Decimal("0.00003")),
        ("gpt-4o-mini-2024-07-18", "cached_input", Decimal(800), None, Decimal("0.00006")),
        ("gpt-4o-mini-2024-07-18", "output", Decimal(500), None, Decimal("0.0003")),
        ("ft:my-own-model", "input", Decimal(300), Decimal(2), Decimal(0)),
    ]
    assert run.results[0]["notes"] == [
        "no catalogue price for ft:my-own-model (input): its tokens are counted at $0"
    ]
    assert set(CostLineItem.objects.values_list("resource_id", "sub_account_id")) == {
        ("key_1", "proj_abc")
    }


def test_anthropic_cost_report_amounts_are_cents_in_strings(acme, tmp_path):
    run = run_import(pages.write_json(tmp_path / "cost.json", pages.anthropic_cost_page()))
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.format == "anthropic_cost"
    # "123.45" cents is $1.2345; "0.5" cents is $0.005.
    assert run.billed_cost == {"USD": "1.2395"}
    assert api_lines("model", "token_direction", "billed_cost", "resource_id") == [
        ("claude-sonnet-4-5-20250929", "output", Decimal("1.2345"), "wrkspc_1"),
        ("claude-sonnet-4-5-20250929", "cached_input", Decimal("0.005"), ""),
    ]


def test_anthropic_usage_report_counts_cache_reads_and_writes_apart(acme, tmp_path):
    price("claude-sonnet-4-5", "anthropic", input="0.000003", output="0.000015", cached="0.0000003")
    run = run_import(pages.write_json(tmp_path / "usage.json", pages.anthropic_usage_page()))
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    # 1000 × $3/M + 2000 × $0.30/M + 400 × $15/M = $0.0096; cache writes have no price.
    assert run.billed_cost == {"USD": "0.0096"}
    assert api_lines("token_direction", "tokens", "billed_cost", "resource_id") == [
        ("input", Decimal(1000), Decimal("0.003"), "apikey_9"),
        ("cached_input", Decimal(2000), Decimal("0.0006"), "apikey_9"),
        ("cache_write", Decimal(100), Decimal(0), "apikey_9"),
        ("output", Decimal(400), Decimal("0.006"), "apikey_9"),
    ]
    assert run.results[0]["notes"] == [
        "no catalogue price for claude-sonnet-4-5-20250929 (cache write): its tokens are "
        "counted at $0"
    ]


def test_litellm_spend_logs_load_per_request_from_csv_and_json_alike(acme, tmp_path):
    rows = pages.litellm_rows()
    run = run_import(pages.write_litellm_csv(tmp_path / "spend.csv", rows))
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.format == "litellm_spend_logs"
    assert run.billed_cost == {"USD": "0.01625"}
    expected = [
        ("gpt-4o-2024-08-06", "openai", Decimal(1500), Decimal(1), "team-search", "inference"),
        ("gpt-4o-2024-08-06", "openai", Decimal(400), Decimal(1), "team-search", "unattributed"),
    ]
    fields = ("model", "provider_name", "tokens", "requests", "sub_account_id", "workload")
    # The first request's tag service:ranker names the ranker deployment (alias "service").
    assert api_lines(*fields) == expected
    assert CostLineItem.objects.filter(deployment=acme.ranker).count() == 1
    listed = [{**row, "total_tokens": row["total_tokens"] or None} for row in rows]
    for row in listed:
        row["request_tags"] = json.loads(row["request_tags"])
    path = tmp_path / "spend.json"
    path.write_text(json.dumps(listed), encoding="utf-8")
    again = run_import(path)
    assert again.status == ImportRun.Status.SUCCEEDED, again.error
    assert again.format == "litellm_spend_logs"
    assert again.results[0]["replaced"] == run.results[0]["delivery"]
    assert again.billed_cost == {"USD": "0.01625"}
    assert api_lines(*fields) == expected


def test_a_request_listed_twice_counts_once_and_the_same_file_again_changes_nothing(acme, tmp_path):
    rows = pages.litellm_rows()
    path = pages.write_litellm_csv(tmp_path / "spend.csv", [*rows, rows[0]])
    run = run_import(path)
    assert run.billed_cost == {"USD": "0.01625"}
    assert run.results[0]["notes"] == ["requests listed more than once are counted once"]
    assert run_import(path).status == ImportRun.Status.UNCHANGED
    assert CostLineItem.objects.count() == 2
    newer = pages.write_litellm_csv(tmp_path / "spend-newer.csv", rows[:1])
    restated = run_import(newer)
    assert restated.billed_cost == {"USD": "0.0125"}
    assert list(
        Delivery.objects.filter(status="current").values_list("billed_cost", flat=True)
    ) == [{"USD": "0.0125"}]
    assert CostLineItem.objects.count() == 1


def test_openrouter_generations_appended_pages_count_each_generation_once(acme, tmp_path):
    path = pages.write_json(
        tmp_path / "generations.json",
        pages.openrouter_generation("gen-1", 0.0105, "2025-01-02T10:00:00Z"),
        pages.openrouter_generation("gen-2", 0.02, "2025-01-02T11:00:00Z"),
        pages.openrouter_generation("gen-1", 0.0105, "2025-01-02T10:00:00Z"),
    )
    run = run_import(path)
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.format == "openrouter_generation"
    assert run.billed_cost == {"USD": "0.0305"}
    # Both generations are the same day's, key and model: one line holds them.
    assert api_lines("model", "provider_name", "tokens", "requests", "billed_cost") == [
        ("anthropic/claude-sonnet-4.5", "Anthropic", Decimal(2240), Decimal(2), Decimal("0.0305")),
    ]
    assert Delivery.objects.values_list("rows", "line_items").get() == (2, 1)


def test_openrouter_activity_is_a_day_per_model(acme, tmp_path):
    run = run_import(pages.write_json(tmp_path / "activity.json", pages.openrouter_activity_page()))
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.format == "openrouter_activity"
    assert run.billed_cost == {"USD": "1.75"}
    assert api_lines("model", "tokens", "requests", "billed_cost") == [
        ("openai/gpt-4o", Decimal(50000), Decimal(30), Decimal("1.5")),
        ("meta-llama/llama-3.1-70b-instruct", Decimal(6000), Decimal(10), Decimal("0.25")),
    ]
    ends = CostLineItem.objects.order_by("source_row").values_list("charge_period_end", flat=True)
    assert [f"{e:%Y-%m-%d %H:%M}" for e in ends] == ["2025-01-03 00:00", "2025-01-04 00:00"]


def test_the_model_api_rollup_holds_spend_tokens_and_requests_by_model(acme, tmp_path):
    price("gpt-4o-mini", "openai", input="0.00000015", output="0.0000006", cached="0.000000075")
    run_import(pages.write_json(tmp_path / "usage.json", pages.openai_usage_page()))
    rows = DailyModelApiCost.objects.order_by("model", "token_direction").values_list(
        "model", "token_direction", "tokens", "requests", "billed_cost", "line_items"
    )
    assert list(rows) == [
        ("ft:my-own-model", "input", Decimal(300), Decimal(2), Decimal(0), 1),
        ("gpt-4o-mini-2024-07-18", "cached_input", Decimal(800), Decimal(0), Decimal("0.00006"), 1),
        ("gpt-4o-mini-2024-07-18", "input", Decimal(200), Decimal(5), Decimal("0.00003"), 1),
        ("gpt-4o-mini-2024-07-18", "output", Decimal(500), Decimal(0), Decimal("0.0003"), 1),
    ]


# -- errors ------------------------------------------------------------------------------------


def test_a_bad_openai_amount_is_named_by_its_json_path(acme, tmp_path):
    page = pages.openai_costs_page()
    page["data"][1]["results"][0]["amount"]["value"] = "about two"
    run = run_import(pages.write_json(tmp_path / "costs.json", page))
    assert run.status == ImportRun.Status.FAILED
    assert run.results[0]["error"] == (
        "costs.json: data[1].results[0].amount.value (record 3): 'about two' is not a decimal "
        "number"
    )
    assert CostLineItem.objects.count() == 0


def test_a_bad_anthropic_amount_in_a_second_page_names_the_page(acme, tmp_path):
    second = pages.anthropic_cost_page()
    second["data"][0]["results"][1]["amount"] = "12,5"
    run = run_import(pages.write_json(tmp_path / "cost.json", pages.anthropic_cost_page(), second))
    assert run.status == ImportRun.Status.FAILED
    assert run.results[0]["error"] == (
        "cost.json: page 2: data[0].results[1].amount (record 4): '12,5' is not a decimal "
        "number of cents"
    )


def test_a_bad_litellm_spend_names_row_and_column(acme, tmp_path):
    rows = pages.litellm_rows()
    rows[1]["spend"] = "n/a"
    run = run_import(pages.write_litellm_csv(tmp_path / "spend.csv", rows))
    assert run.status == ImportRun.Status.FAILED
    assert (
        run.results[0]["error"] == "spend.csv: row 3, column spend: 'n/a' is not a decimal number"
    )


def test_truncated_json_pages_are_refused_whole(acme, tmp_path):
    path = tmp_path / "costs.json"
    path.write_text(json.dumps(pages.openai_costs_page())[:-40], encoding="utf-8")
    run = run_import(path)
    assert run.status == ImportRun.Status.FAILED
    assert run.results[0]["error"].startswith("costs.json: is not a readable page of JSON: ")
    assert CostLineItem.objects.count() == 0


def test_gzipped_pages_read_as_the_plain_ones(acme, tmp_path):
    plain = pages.write_json(tmp_path / "costs.json", pages.openai_costs_page())
    zipped = tmp_path / "costs.json.gz"
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    run = run_import(zipped)
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert (run.format, run.billed_cost) == ("openai_costs", {"USD": "3.91"})
