"""One deployment's day worked out by hand (tests/insights/test_build_or_call.py has the sums):
1 March 2025, one replica, $48 of spend (and 5 EUR left out), 1,000 requests in each of the 24
hours at 500 input and 100 output tokens, 73 engineering hours a month at $10, and a catalogue API
at $10 / $30 per million tokens."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from apps.accounts.models import Organization
from apps.billing.models import CostKind, DailyCost, Delivery
from apps.deployments.models import TrafficHour
from apps.insights.models import BuildOrCallInputs, ModelApiPrice
from tests.factories import DeploymentFactory, ModelFactory

DAY = date(2025, 3, 1)
PERIOD = {"start": "2025-03-01", "end": "2025-03-02"}


def build_day(project, *, requests_per_hour: int = 1000, pick_api: bool = True):
    org = Organization.get()
    org.currency = "USD"
    org.engineering_hourly_rate = Decimal("10")
    org.engineering_hours_per_month = Decimal("73")
    org.save()
    delivery = Delivery.objects.create(
        status=Delivery.Status.CURRENT,
        format="focus",
        billing_account_id="111122223333",
        billing_period_start=datetime(2025, 3, 1, tzinfo=UTC),
        billing_period_end=datetime(2025, 4, 1, tzinfo=UTC),
        fingerprint="b" * 64,
        max_charge_period_end=datetime(2025, 3, 2, tzinfo=UTC),
        max_usage_period_end=datetime(2025, 3, 2, tzinfo=UTC),
    )
    deployment = DeploymentFactory(
        model=ModelFactory(project=project, name="support-chat", external_id="support-chat"),
        name="support-chat-prod",
        external_id="support-chat-prod",
        replicas=1,
        latency_objective_ms=300,
    )
    for currency, amount in (("USD", "48"), ("EUR", "5")):
        DailyCost.objects.create(
            delivery=delivery,
            day=DAY,
            project=project,
            deployment=deployment,
            workload="inference",
            cost_kind=CostKind.GPU_COMPUTE,
            billing_currency=currency,
            effective_cost=Decimal(amount),
            billed_cost=Decimal(amount),
            list_cost=Decimal(amount),
            line_items=1,
        )
    first = datetime(2025, 3, 1, tzinfo=UTC)
    TrafficHour.objects.bulk_create(
        TrafficHour(
            deployment=deployment,
            hour=first + timedelta(hours=index),
            requests=requests_per_hour,
            tokens_in=500 * requests_per_hour,
            tokens_out=100 * requests_per_hour,
            latency_p95_ms=200,
            updated_at=first,
        )
        for index in range(24)
    )
    ModelApiPrice.objects.create(
        name="hosted/support-chat-large",
        provider="hosted",
        mode="chat",
        currency="USD",
        input_per_token=Decimal("0.00001"),
        output_per_token=Decimal("0.00003"),
        source="test",
        as_of=DAY,
    )
    ModelApiPrice.objects.create(
        name="elsewhere/unrelated-image-model",
        currency="USD",
        input_per_token=Decimal("0.001"),
        output_per_token=Decimal("0.001"),
        source="test",
        as_of=DAY,
    )
    if pick_api:
        BuildOrCallInputs.objects.create(
            deployment=deployment, api_model="hosted/support-chat-large"
        )
    return deployment
