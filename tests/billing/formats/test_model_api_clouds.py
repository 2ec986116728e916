"""The clouds' model services inside the bills already imported: Bedrock usage types in CUR,
Azure OpenAI meters, Vertex AI SKUs, and LiteLLM's FOCUS export, recognised as model API spend
with the model and token direction parsed (or `unknown` where they cannot be)."""

from decimal import Decimal

import pytest

from apps.billing.model_api import azure_parse, bedrock_parse, vertex_parse
from apps.billing.models import CostLineItem, ImportRun

from ..conftest import focus_line, run_import, write_focus
from .cur import cur_line, write_cur
from .test_azure import ea_row, write_azure
from .test_gcp import gcp_row, write_gcp

pytestmark = pytest.mark.django_db(databases=["default", "progress"])


@pytest.mark.parametrize(
    ("usage_type", "product", "expected"),
    [
        ("USE1-Claude4.6Sonnet-input-tokens", "Amazon Bedrock", ("Claude4.6Sonnet", "input")),
        ("USW2-Llama3-3-70B-output-tokens", "Amazon Bedrock", ("Llama3-3-70B", "output")),
        (
            "USE1-NovaPro-cache-read-input-token-count",
            "Amazon Bedrock",
            ("NovaPro", "cached_input"),
        ),
        (
            "EUC1-NovaPro-cache-write-input-token-count",
            "Amazon Bedrock",
            ("NovaPro", "cache_write"),
        ),
        ("USE1-gpt-oss-120b-mantle-input-tokens-flex", "Amazon Bedrock", ("gpt-oss-120b", "input")),
        (
            "USE1-MP:USE1_InputTokenCount-Units",
            "Claude Sonnet 4.5 (Amazon Bedrock Edition)",
            ("Claude Sonnet 4.5", "input"),
        ),
        (
            "USE1-MP:USE1_OutputTokenCount_Global-Units",
            "Claude Sonnet 4.5 (Amazon Bedrock Edition)",
            ("Claude Sonnet 4.5", "output"),
        ),
        (
            "USE1-MP:USE1_CacheReadInputTokenCount-Units",
            "Claude Haiku 4.5 (Amazon Bedrock Edition)",
            ("Claude Haiku 4.5", "cached_input"),
        ),
        (
            "USE1-MP:USE1_CacheWriteInputTokenCount-Units",
            "Claude Haiku 4.5 (Amazon Bedrock Edition)",
            ("Claude Haiku 4.5", "cache_write"),
        ),
        (
            "USE1-MP:USE1_input_tokens_standard-Units",
            "Claude Opus 4.1 (Amazon Bedrock Edition)",
            ("Claude Opus 4.1", "input"),
        ),
        ("USE1-ProvisionedThroughput-ModelUnits", "Amazon Bedrock", ("unknown", "other")),
    ],
)
def test_bedrock_usage_types_give_model_and_direction(usage_type, product, expected):
    assert bedrock_parse(usage_type, product) == expected


@pytest.mark.parametrize(
    ("meter", "expected"),
    [
        ("gpt-4o-mini-0718-Inp-glbl Tokens", ("gpt-4o-mini-0718", "input")),
        ("gpt 4o 0513 Input global Tokens", ("gpt-4o-0513", "input")),
        ("gpt 4.5 0227 cached Inp glbl", ("gpt-4.5-0227", "cached_input")),
        ("gpt 4.5 0227 Outp regnl", ("gpt-4.5-0227", "output")),
        ("gpt-4o 1120 cached Inp DZone", ("gpt-4o-1120", "cached_input")),
        ("gpt-4-8K-Batch-Inp-glbl", ("gpt-4-8k", "input")),
        ("GPT 5 Inpt Glbl", ("gpt-5", "input")),
        ("gpt-4o PTU Provisioned Managed", ("unknown", "other")),
    ],
)
def test_azure_openai_meters_give_model_and_direction(meter, expected):
    assert azure_parse(meter) == expected


@pytest.mark.parametrize(
    ("sku", "expected"),
    [
        ("Gemini 2.5 Flash GA Text Input - Predictions", ("gemini-2.5-flash", "input")),
        ("Gemini 2.5 Flash GA Text Output - Predictions", ("gemini-2.5-flash", "output")),
        ("Gemini 2.5 Pro Thinking Text Output - Predictions", ("gemini-2.5-pro", "output")),
        ("Gemini 2.5 Flash Input Text Caching", ("gemini-2.5-flash", "cached_input")),
        ("Gemini 2.5 Flash Text Input Caching Storage", ("gemini-2.5-flash", "other")),
        ("Gemini 3.7 Flash Global Text Input - Predictions", ("gemini-3.7-flash", "input")),
        ("Gemini 2.5 Flash Batch Text Input - Predictions", ("gemini-2.5-flash", "input")),
    ],
)
def test_vertex_skus_give_model_and_direction(sku, expected):
    assert vertex_parse(sku) == expected


def test_bedrock_lines_in_a_cur_are_model_api_spend_with_tokens(acme, tmp_path):
    lines = [
        cur_line(
            lineItem__ProductCode="AmazonBedrock",
            product__ProductName="Amazon Bedrock",
            lineItem__UsageType="USE1-Claude4.6Sonnet-input-tokens",
            lineItem__UsageAmount="120000",
            pricing__unit="tokens",
            lineItem__UnblendedCost="0.36",
        ),
        cur_line(
            lineItem__ProductCode="AmazonBedrock",
            product__ProductName="Claude Sonnet 4.5 (Amazon Bedrock Edition)",
            lineItem__UsageType="USE1-MP:USE1_OutputTokenCount-Units",
            lineItem__UsageAmount="3",
            pricing__unit="1K tokens",
            lineItem__UnblendedCost="0.045",
        ),
        cur_line(
            lineItem__ProductCode="AmazonEC2",
            lineItem__UsageType="BoxUsage:g5.xlarge",
            lineItem__UnblendedCost="1.006",
            product__instanceType="g5.xlarge",
        ),
    ]
    run = run_import(write_cur(tmp_path / "cur.csv", lines))
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    rows = CostLineItem.objects.order_by("source_row").values_list(
        "cost_kind", "model", "token_direction", "tokens", "billed_cost", "workload"
    )
    assert list(rows) == [
        ("model_api", "Claude4.6Sonnet", "input", Decimal(120000), Decimal("0.36"), "unattributed"),
        (
            "model_api",
            "Claude Sonnet 4.5",
            "output",
            Decimal(3000),
            Decimal("0.045"),
            "unattributed",
        ),
        ("gpu_compute", "", "", None, Decimal("1.006"), "unattributed"),
    ]


def test_azure_openai_meters_in_an_ea_export_are_model_api_spend(acme, tmp_path):
    rows = [
        ea_row(
            MeterCategory="Foundry Models",
            MeterSubCategory="Azure OpenAI",
            MeterName="gpt-4o-mini-0718-Inp-glbl Tokens",
            # Quantity is in the unit itself; `1K` is the pack it is priced by (as for hours).
            Quantity="2500",
            UnitOfMeasure="1K",
            Cost="0.000375",
        ),
        ea_row(
            MeterCategory="Cognitive Services",
            MeterSubCategory="Azure OpenAI",
            MeterName="gpt 4.5 0227 cached Inp glbl",
            Quantity="1000000",
            UnitOfMeasure="1M",
            Cost="37.5",
        ),
    ]
    run = run_import(write_azure(tmp_path / "azure.csv", rows))
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    lines = CostLineItem.objects.order_by("source_row").values_list(
        "cost_kind", "model", "token_direction", "tokens", "billed_cost"
    )
    assert list(lines) == [
        ("model_api", "gpt-4o-mini-0718", "input", Decimal(2500), Decimal("0.000375")),
        ("model_api", "gpt-4.5-0227", "cached_input", Decimal(1_000_000), Decimal("37.5")),
    ]


def test_vertex_ai_skus_in_a_gcp_export_are_model_api_spend(acme, tmp_path):
    rows = [
        gcp_row(
            **{
                "service.id": "C7E2-9256-1C43",
                "service.description": "Vertex AI",
                "sku.description": "Gemini 2.5 Flash GA Text Input - Predictions",
                "usage.amount": "40000",
                "usage.unit": "count",
                "cost": "0.012",
            }
        ),
        gcp_row(
            **{
                "service.id": "C7E2-9256-1C43",
                "service.description": "Vertex AI",
                "sku.description": "Gemini 2.5 Flash Text Input Caching Storage",
                "usage.amount": "7200",
                "usage.unit": "seconds",
                "cost": "0.002",
            }
        ),
    ]
    run = run_import(write_gcp(tmp_path / "gcp.csv", rows))
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    lines = CostLineItem.objects.order_by("source_row").values_list(
        "cost_kind", "model", "token_direction", "tokens", "billed_cost"
    )
    assert list(lines) == [
        ("model_api", "gemini-2.5-flash", "input", Decimal(40000), Decimal("0.012")),
        ("model_api", "gemini-2.5-flash", "other", None, Decimal("0.002")),
    ]


def test_litellm_focus_export_imports_as_focus_with_model_and_team(acme, tmp_path):
    columns = [
        "BillingAccountId",
        "BillingAccountName",
        "BillingCurrency",
        "BillingPeriodStart",
        "BillingPeriodEnd",
        "ChargePeriodStart",
        "ChargePeriodEnd",
        "ChargeCategory",
        "BilledCost",
        "EffectiveCost",
        "ListCost",
        "ContractedCost",
        "ProviderName",
        "PublisherName",
        "InvoiceIssuerName",
        "ServiceName",
        "ServiceCategory",
        "ChargeDescription",
        "ResourceId",
        "ResourceName",
        "ResourceType",
        "SubAccountId",
        "SubAccountName",
        "ConsumedQuantity",
        "ConsumedUnit",
    ]
    line = focus_line(
        BillingAccountId="88dc28d0f030c55e",
        BillingAccountName="search-prod-key",
        ChargePeriodStart="2025-01-02T00:00:00Z",
        ChargePeriodEnd="2025-01-03T00:00:00Z",
        BilledCost="4.2",
        EffectiveCost="4.2",
        ListCost="4.2",
        ContractedCost="4.2",
        ProviderName="openai",
        PublisherName="openai",
        InvoiceIssuerName="openai",
        ServiceName="gpt-4o",
        ServiceCategory="AI and Machine Learning",
        ChargeDescription="gpt-4o-2024-08-06",
        ResourceId="gpt-4o-2024-08-06",
        ResourceName="gpt-4o-2024-08-06",
        ResourceType="gpt-4o-2024-08-06",
        SubAccountId="team-search",
        SubAccountName="Search",
        ConsumedQuantity="1",
        ConsumedUnit="Requests",
    )
    run = run_import(write_focus(tmp_path / "focus.csv", [line], columns=columns))
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.format == "focus"
    assert list(
        CostLineItem.objects.values_list(
            "cost_kind", "model", "provider_name", "sub_account_id", "billed_cost", "workload"
        )
    ) == [
        ("model_api", "gpt-4o-2024-08-06", "openai", "team-search", Decimal("4.2"), "unattributed")
    ]
