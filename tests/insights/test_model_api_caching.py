"""The caching lever of hosted model API spend (issue 26, kind model_api_caching), from a small
model API rollup worked out by hand (USD; the bill's data as of 11 March 2025, so the lever reads
the days from 9 February):

- sk-a, gpt-4o (OpenAI), mapped to the deployment "chat-api": 8,000,000 uncached input tokens for
  $20.00 ($2.50 a million) and 2,000,000 cached for $2.50 ($1.25 a million): 20% cached. Caching
  50% moves 0.5 × 10,000,000 − 2,000,000 = 3,000,000 tokens: 3 × (2.50 − 1.25) = $3.75.
- sk-b, claude-x (Anthropic): 1,000,000 uncached for $3.00, nothing cached; the catalogue's
  cached price $0.30 a million: 500,000 tokens × (3.00 − 0.30) / 1,000,000 = $1.35.
- sk-c: a model nobody prices cached (no catalogue row): no lever. sk-d: 60% cached: none.
Savings total: 3.75 + 1.35 = $5.10.
"""

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from apps.accounts.models import Organization
from apps.billing.models import DailyModelApiCost, Delivery
from apps.insights.compute_caching import ModelTokens, model_saving
from apps.insights.models import Finding, Kind, ModelApiPrice
from apps.insights.selectors import waste_totals
from apps.insights.services import findings_recompute
from tests.factories import DeploymentFactory, ModelFactory

pytestmark = pytest.mark.django_db
DAY = date(2025, 3, 10)
D = Decimal


def tokens(**values) -> ModelTokens:
    base = {
        "provider": "OpenAI",
        "model": "m",
        "currency": "USD",
        "uncached_tokens": D(0),
        "cached_tokens": D(0),
        "write_tokens": D(0),
        "uncached_cost": D(0),
        "cached_cost": D(0),
    }
    return ModelTokens(**{**base, **values})


def test_the_saving_moves_input_to_the_cached_price_up_to_the_target():
    row = tokens(
        uncached_tokens=D(8_000_000),
        cached_tokens=D(2_000_000),
        uncached_cost=D("20"),
        cached_cost=D("2.5"),
    )
    found = model_saving(row)
    assert row.cached_share == D("0.2")
    assert (found.moved_tokens, found.saving) == (D(3_000_000), D("3.75"))


def test_only_uncached_tokens_move_never_the_cache_writes():
    row = tokens(
        uncached_tokens=D(100),
        write_tokens=D(900),
        uncached_cost=D("0.001"),
        catalogue_cached=D("0.000001"),
    )
    # 50% of 1,000 is 500, but only the 100 uncached tokens can move: 100 × (0.00001 − 0.000001).
    assert model_saving(row).saving == D("0.0009")


@pytest.mark.parametrize(
    "values",
    [
        {"uncached_tokens": D(1000), "uncached_cost": D("1")},  # no cached price anywhere
        {  # the cached price is not below the input price
            "uncached_tokens": D(1000),
            "uncached_cost": D("1"),
            "catalogue_cached": D("0.001"),
        },
        {  # at the target already
            "uncached_tokens": D(500),
            "cached_tokens": D(500),
            "uncached_cost": D("1"),
            "cached_cost": D("0.1"),
        },
        {},  # no input tokens
    ],
)
def test_no_lever_without_a_cheaper_cached_price_or_below_the_target(values):
    assert model_saving(tokens(**values)) is None


@pytest.fixture
def bill(project):
    org = Organization.get()
    org.currency = "USD"
    org.save()
    delivery = Delivery.objects.create(
        status=Delivery.Status.CURRENT,
        format="openai_usage",
        billing_account_id="org-1",
        billing_period_start=datetime(2025, 3, 1, tzinfo=UTC),
        billing_period_end=datetime(2025, 4, 1, tzinfo=UTC),
        fingerprint="e" * 64,
        max_charge_period_end=datetime(2025, 3, 11, tzinfo=UTC),
        max_usage_period_end=datetime(2025, 3, 11, tzinfo=UTC),
    )
    deployment = DeploymentFactory(
        project=project, model=ModelFactory(project=project, name="chat"), name="chat-api"
    )
    rows = [
        ("sk-a", "OpenAI", "gpt-4o", "input", 8_000_000, "20", deployment),
        ("sk-a", "OpenAI", "gpt-4o", "cached_input", 2_000_000, "2.5", deployment),
        ("sk-a", "OpenAI", "gpt-4o", "output", 1_000_000, "10", deployment),
        ("sk-b", "Anthropic", "claude-x", "input", 1_000_000, "3", None),
        ("sk-c", "OpenAI", "no-cache-model", "input", 1_000_000, "1", None),
        ("sk-d", "OpenAI", "gpt-4o", "input", 400_000, "1", None),
        ("sk-d", "OpenAI", "gpt-4o", "cached_input", 600_000, "0.75", None),
    ]
    for key, provider, model, direction, count, cost, owner in rows:
        DailyModelApiCost.objects.create(
            delivery=delivery,
            day=DAY,
            project=project if owner else None,
            deployment=owner,
            workload="inference" if owner else "unattributed",
            provider_name=provider,
            resource_id=key,
            model=model,
            token_direction=direction,
            billing_currency="USD",
            effective_cost=D(cost),
            billed_cost=D(cost),
            tokens=D(count),
            line_items=1,
        )
    ModelApiPrice.objects.create(
        name="anthropic/claude-x",
        provider="anthropic",
        currency="USD",
        input_per_token=D("0.000003"),
        output_per_token=D("0.000015"),
        cached_input_per_token=D("0.0000003"),
        source="test",
        as_of=DAY,
    )
    return deployment


def test_the_recompute_finds_the_caching_lever_per_key(bill, project):
    findings_recompute()
    found = {
        f.resource_id: f for f in Finding.objects.filter(kind=Kind.MODEL_API_CACHING).order_by()
    }
    assert {key: f.savings_per_month for key, f in found.items()} == {
        "sk-a": {"USD": "3.75"},
        "sk-b": {"USD": "1.35"},
    }
    assert (found["sk-a"].project, found["sk-a"].deployment) == (project, bill)
    assert (found["sk-b"].project, found["sk-b"].deployment) == (None, None)
    assert found["sk-a"].wasted == {} and not found["sk-a"].hours.exists()
    assert found["sk-a"].reason == (
        "20.0% of gpt-4o's input tokens were read from the cache: caching 50% would save "
        "USD 3.75 a month"
    )
    [model] = found["sk-b"].evidence["models"]
    assert model == {
        "provider": "Anthropic",
        "model": "claude-x",
        "input_tokens": "1000000",
        "cached_tokens": "0",
        "cached_percent": "0.0",
        "input_per_million": "3",
        "cached_per_million": "0.3",
        "moved_tokens": "500000",
        "saving": "1.35",
    }
    totals = waste_totals(
        findings=Finding.objects.filter(kind=Kind.MODEL_API_CACHING),
        start=None,
        end=None,
        today=DAY,
    )
    assert totals.savings_per_month == {"USD": D("5.10")}
    assert totals.wasted == {}
