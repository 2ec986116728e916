"""Build or call, the other way (issue 26): a deployment served by a hosted API against
self-hosting its open model on the catalogue's cheapest instance that holds it, with compute's
own verdicts and break-even. One day worked out by hand:

- 1 March 2025: 48,000 requests billed (2,000 an hour, spread evenly), 24,000,000 input tokens
  for $72 and 4,800,000 output tokens for $48: $120, $0.0025 a request; a month at 2,000 an hour
  is 0.0025 × 2,000 × 730 = $3,650.
- The model needs 30 GB: with 20% to spare 36 GB, so not the $0.50 T4 (16 GB) but the $2.00 L40S
  (48 GB). At 2,000 requests a replica-hour and flat traffic (peak-to-mean 1): one replica,
  2.00 × 730 = $1,460 a month, + 73 engineering hours at $10 = $2,190. Self-host, by $1,460.
- Break-even: a = 730 × 0.0025 = 1.825; aC − K = 3,650 − 1,460 = 2,190; the last failing step
  ⌈(3,650 + 730) ÷ 2,190⌉ − 1 = 1; (1,460 + 730) ÷ 1.825 = 1,200 requests an hour.
"""

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.urls import reverse

from apps.accounts.models import Organization
from apps.billing.models import CostKind, DailyCost, DailyModelApiCost, Delivery
from apps.insights.models import BuildOrCallInputs, GpuInstancePrice, GpuTypeMemory
from apps.insights.selectors_build_or_call import build_or_call_result, result_json
from apps.insights.selectors_build_or_call_api import _spread
from tests.factories import DeploymentFactory, ModelFactory

pytestmark = pytest.mark.django_db
DAY = date(2025, 3, 1)
END = date(2025, 3, 2)


def called_day(project, *, open_weights=True, memory="30", capacity="2000"):
    org = Organization.get()
    org.currency = "USD"
    org.engineering_hourly_rate = Decimal("10")
    org.engineering_hours_per_month = Decimal("73")
    org.save()
    delivery = Delivery.objects.create(
        status=Delivery.Status.CURRENT,
        format="litellm_spend_logs",
        billing_account_id="litellm",
        billing_period_start=datetime(2025, 3, 1, tzinfo=UTC),
        billing_period_end=datetime(2025, 4, 1, tzinfo=UTC),
        fingerprint="c" * 64,
        max_charge_period_end=datetime(2025, 3, 2, tzinfo=UTC),
        max_usage_period_end=datetime(2025, 3, 2, tzinfo=UTC),
    )
    deployment = DeploymentFactory(
        project=project,
        model=ModelFactory(project=project, name="llama-3.1-8b", external_id="llama-8b"),
        name="assistant",
        external_id="assistant",
        replicas=1,
    )
    DailyCost.objects.create(
        delivery=delivery,
        day=DAY,
        project=project,
        deployment=deployment,
        workload="inference",
        cost_kind=CostKind.MODEL_API,
        billing_currency="USD",
        effective_cost=Decimal("120"),
        billed_cost=Decimal("120"),
        list_cost=Decimal("120"),
        line_items=2,
    )
    for direction, tokens, cost, requests in (
        ("input", 24_000_000, "72", 48_000),
        ("output", 4_800_000, "48", 0),
    ):
        DailyModelApiCost.objects.create(
            delivery=delivery,
            day=DAY,
            project=project,
            deployment=deployment,
            workload="inference",
            provider_name="together_ai",
            resource_id="sk-hash-1",
            model="meta-llama/Llama-3.1-8B-Instruct",
            token_direction=direction,
            billing_currency="USD",
            effective_cost=Decimal(cost),
            billed_cost=Decimal(cost),
            tokens=Decimal(tokens),
            requests=Decimal(requests),
            line_items=1,
        )
    for gpu, memory_gb in (("T4", "16"), ("L40S", "48")):
        GpuTypeMemory.objects.create(
            gpu_type=gpu, memory_gb=Decimal(memory_gb), vendor="NVIDIA", source="t", as_of=DAY
        )
    for itype, gpu, price in (("g.small", "T4", "0.50"), ("g.big", "L40S", "2.00")):
        GpuInstancePrice.objects.create(
            provider="testcloud",
            instance_type=itype,
            gpu_type=gpu,
            gpu_count=Decimal(1),
            region="r-1",
            on_demand_per_hour=Decimal(price),
            source="t",
            as_of=DAY,
        )
    BuildOrCallInputs.objects.create(
        deployment=deployment,
        open_weights=open_weights,
        model_memory_gb=Decimal(memory) if memory else None,
        capacity_per_replica_hour=Decimal(capacity) if capacity else None,
    )
    return deployment


def test_an_api_served_open_model_is_weighed_against_self_hosting_it(project):
    deployment = called_day(project)
    result = build_or_call_result(deployment=deployment, start=DAY, end=END)
    assert result.inputs.api_served is True
    assert result.requests == 48_000
    assert set(result.inputs.hourly_requests) == {2000}
    assert (result.inputs.tokens_in, result.inputs.tokens_out) == (24_000_000, 4_800_000)
    assert result.api_per_request == Decimal("0.0025")
    assert result.api_monthly == Decimal("3650")
    assert (result.inputs.replicas, result.inputs.spend) == (1, Decimal("48.00"))
    assert result.replica_monthly_cost == Decimal("1460")
    assert result.self_hosted_monthly == Decimal("2190")
    assert result.monthly_cost == Decimal("3650")  # as it is served today: the API
    assert result.break_even_requests_per_hour == Decimal("1200")
    assert result.verdict == "self_host"
    assert result.monthly_margin == Decimal("1460")
    assert result.reasons == [
        "self-hosting costs USD 1,460.00 a month less at 2,000 requests an hour",
        "the API would be cheaper under 1,200 requests an hour",
        "high and steady: 2,000 requests an hour, peak 1.0x the mean, so replicas stay busy",
    ]
    assert result.notes == [
        "Requests and their shape: the bill's requests per day.",
        "Called today: together_ai · meta-llama/Llama-3.1-8B-Instruct.",
        "Self-hosted on testcloud g.big in r-1 (1 × L40S, 48 GB) at USD 2.00 an hour on demand: "
        "1 replica of 2000 requests an hour for the real volume's peak hour.",
    ]
    row = result_json(deployment=deployment, result=result)
    assert {k: row[k] for k in ("served_by_api", "api_monthly", "self_hosted_monthly")} == {
        "served_by_api": True,
        "api_monthly": "3650.00",
        "self_hosted_monthly": "2190.00",
    }


def test_a_smaller_capacity_needs_more_replicas_and_the_api_wins(project):
    deployment = called_day(project, capacity="900")
    result = build_or_call_result(deployment=deployment, start=DAY, end=END)
    # ⌈2,000 ÷ 900⌉ = 3 replicas: 3 × 1,460 + 730 = 5,110 against the API's 3,650.
    assert (result.inputs.replicas, result.self_hosted_monthly) == (3, Decimal("5110"))
    assert result.verdict == "call_api"
    assert result.monthly_margin == Decimal("1460")
    # aC − K = 1.825 × 900 − 1,460 = 182.5 > 0: ⌈(1,642.5 + 730) ÷ 182.5⌉ − 1 = 13 − 1 = 12
    # failing steps; (12 × 1,460 + 730) ÷ 1.825 = 10,000 requests an hour.
    assert result.break_even_requests_per_hour == Decimal("10000")


@pytest.mark.parametrize(
    ("options", "note"),
    [
        (
            {"open_weights": False},
            "llama-3.1-8b is not marked as an open model: there is no self-hosted alternative "
            "to price (tick the box if its weights can be served).",
        ),
        (
            {"memory": ""},
            "Enter the GPU memory one replica needs to price a self-hosted alternative.",
        ),
        (
            {"capacity": ""},
            "Enter the requests one replica serves an hour to size the self-hosted option.",
        ),
        (
            {"memory": "41"},
            "No GPU instance in the catalogue priced in USD holds 41.00 GB with 20% to spare.",
        ),
    ],
)
def test_without_a_self_hosted_alternative_there_is_no_verdict(project, options, note):
    deployment = called_day(project, **options)
    result = build_or_call_result(deployment=deployment, start=DAY, end=END)
    assert (result.verdict, result.monthly_margin, result.reasons) == (None, None, [])
    assert result.break_even_requests_per_hour is None
    assert result.api_monthly == Decimal("3650")
    assert result.notes[-1] == note


def test_a_day_s_requests_spread_over_its_hours_keep_their_sum():
    hours = [datetime(2025, 3, 1, hour, tzinfo=UTC) for hour in range(24)]
    spread = _spread({DAY: 50}, hours)
    assert spread[:3] == [3, 3, 2] and sum(spread) == 50


def test_the_page_says_the_deployment_is_served_by_an_api(project, member_client):
    deployment = called_day(project)
    page = member_client.get(
        reverse("build_or_call_detail", args=[deployment.pk]),
        {"start": "2025-03-01", "end": "2025-03-02"},
    )
    body = page.content.decode()
    assert 'id="served-by-api"' in body
    assert 'data-verdict="self_host"' in body


def test_the_models_page_marks_it_served_by_an_api_with_its_bill(project, member_client):
    called_day(project)
    body = member_client.get(
        reverse("build_or_call_list"), {"start": "2025-03-01", "end": "2025-03-02"}
    ).content.decode()
    assert "served by an API: $3,650.00 a month" in body
