"""A small bill with figures worked out by hand, for the attribution pages.

Today is frozen at 20 March 2025 (UTC). The bill is loaded up to 19 March 00:00, so March has 18
days billed. The default range, the last 30 days, is 19 February to 20 March; the period before it
is 20 January to 18 February.

Two teams: Vision (the standing lead and member) with the project Image ranking, and Language
(the outsider leads it) with Translation. Rollup rows, in USD unless said:

#   day     project        owner              workload      kind     where                 amount
1   10 Mar  Image ranking  resnet             training      gpu      us-east-1 EC2 std      100.00
2   11 Mar  Image ranking  resnet             training      storage  us-east-1 S3 std        10.00
3   12 Mar  Image ranking  vit (failed)       training      gpu      us-west-2 EC2 spot      40.00
4   12 Mar  Image ranking  ranker-prod        inference     gpu      us-east-1 SageMaker c.  30.00
5   15 Mar  Translation    mt-big             fine_tuning   gpu      GCP us-central1 std    200.00
6   16 Mar  -              -                  unattributed  other    us-east-1 EC2 std       20.00
7   16 Mar  Image ranking  -                  storage       storage  us-east-1 S3 std         5.00
8   17 Mar  Image ranking  resnet             training      gpu      EUR 7.00, never added to USD
9   20 Feb  Image ranking  resnet             training      gpu      us-east-1 EC2 std       50.00
10  25 Feb  Translation    mt-big             fine_tuning   gpu      GCP us-central1 std     80.00
11   1 Feb  Image ranking  vit (failed)       training      gpu      us-west-2 EC2 spot      60.00
12  10 Feb  Translation    mt-big             fine_tuning   gpu      GCP us-central1 std     20.00
13   5 Feb  -              -                  unattributed  other    us-east-1 EC2 std        4.00

(std: on-demand, "Standard"; spot: "Dynamic"; c.: "Committed".)

Row 6 is two resources in the resource rollup: i-orphan 15.00 and a bucket whose name starts with
`=` (5.00); row 13 is i-old. resnet produces the model ranker, which ranker-prod serves; mt-big
produces mt.
"""

import csv
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
import time_machine

from apps.accounts.models import Organization
from apps.billing.loader import monthly_rebuild, resource_monthly_rebuild
from apps.billing.models import DailyCost, DailyResourceCost, Delivery
from apps.deployments.models import TrafficHour
from apps.experiments.models import Experiment
from apps.gpu.models import Gpu, GpuHour
from tests.factories import (
    DeploymentFactory,
    DeploymentResourceFactory,
    ExperimentFactory,
    ExperimentResourceFactory,
    ModelFactory,
    ProjectFactory,
)

NOW = datetime(2025, 3, 20, 12, 0, tzinfo=UTC)
BUCKET = "=cmd|' /C calc'!A0"
EC2 = "Amazon Elastic Compute Cloud"
S3 = "Amazon Simple Storage Service"
SAGEMAKER = "Amazon SageMaker"
GCE = "Compute Engine"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield NOW


@pytest.fixture
def organization(db) -> Organization:
    org = Organization.get()
    org.currency = "USD"
    org.time_zone = "UTC"
    org.save()
    return org


def delivery(*, account: str, month: date, as_of: datetime, provider: str = "AWS") -> Delivery:
    return Delivery.objects.create(
        status=Delivery.Status.CURRENT,
        format="focus",
        provider_name=provider,
        billing_account_id=account,
        billing_period_start=datetime(month.year, month.month, 1, tzinfo=UTC),
        billing_period_end=datetime(
            month.year + (month.month == 12), month.month % 12 + 1, 1, tzinfo=UTC
        ),
        fingerprint=f"{account}-{month}",
        max_charge_period_end=as_of,
        max_usage_period_end=as_of,
    )


def daily_cost(
    delivery: Delivery,
    day: date,
    amount: str | Decimal,
    *,
    project=None,
    experiment=None,
    deployment=None,
    workload: str = "other",
    cost_kind: str = "gpu_compute",
    provider: str = "AWS",
    region: str = "us-east-1",
    service: str = EC2,
    pricing: str = "Standard",
    currency: str = "USD",
    line_items: int = 1,
) -> DailyCost:
    """A row of the daily rollup, not yet saved (tests that need thousands bulk_create them),
    its billed and list cost its spend."""
    return DailyCost(
        delivery=delivery,
        day=day,
        project=project,
        experiment=experiment,
        deployment=deployment,
        workload=workload,
        cost_kind=cost_kind,
        provider_name=provider,
        region_id=region,
        service_name=service,
        pricing_category=pricing,
        billing_currency=currency,
        effective_cost=Decimal(amount),
        billed_cost=Decimal(amount),
        list_cost=Decimal(amount),
        line_items=line_items,
    )


def rollup(delivery: Delivery, day: date, amount: str, **fields) -> DailyCost:
    """A saved row of the daily rollup (daily_cost's fields), its month rebuilt."""
    row = daily_cost(delivery, day, amount, **fields)
    row.save()
    # The import keeps the monthly rollup in step with the daily one; so must a hand-made bill.
    monthly_rebuild(delivery_id=delivery.pk)
    return row


def resource_rollup(
    delivery: Delivery,
    day: date,
    resource_id: str,
    amount: str,
    *,
    service: str = EC2,
    project=None,
    currency: str = "USD",
    name: str = "",
) -> DailyResourceCost:
    """A resource's day, and its delivery's resource months rebuilt (as an import rebuilds
    them), which long ranges read."""
    row = DailyResourceCost.objects.create(
        delivery=delivery,
        day=day,
        resource_id=resource_id,
        resource_name=name,
        billing_account_id="111111111111",
        sub_account_id="222222222222",
        provider_name="AWS",
        service_name=service,
        region_id="us-east-1",
        project=project,
        workload="unattributed" if project is None else "other",
        cost_kind="other",
        billing_currency=currency,
        effective_cost=Decimal(amount),
        billed_cost=Decimal(amount),
        line_items=1,
    )
    resource_monthly_rebuild(delivery_id=delivery.pk)
    return row


@dataclass
class Bill:
    vision_project: object
    translation: object
    resnet: object
    vit: object
    mt: object
    ranker: object
    mt_model: object
    ranker_prod: object
    march: Delivery
    february: Delivery


@pytest.fixture
def bill(organization, frozen, project, other_team) -> Bill:
    translation = ProjectFactory(
        team=other_team, name="Translation", slug="translation", monthly_budget=Decimal("300")
    )
    ranker = ModelFactory(project=project, name="ranker")
    mt_model = ModelFactory(project=translation, name="mt")
    resnet = ExperimentFactory(
        project=project,
        name="resnet",
        model=ranker,
        status=Experiment.Status.SUCCEEDED,
        started_at=at("2025-03-10T00:00:00"),
        ended_at=at("2025-03-12T00:00:00"),
    )
    vit = ExperimentFactory(
        project=project,
        name="vit",
        status=Experiment.Status.FAILED,
        started_at=at("2025-02-01T00:00:00"),
        ended_at=at("2025-03-13T00:00:00"),
    )
    mt = ExperimentFactory(
        project=translation,
        name="mt-big",
        kind=Experiment.Kind.FINE_TUNING,
        model=mt_model,
        started_at=at("2025-02-01T00:00:00"),
        ended_at=at("2025-03-16T00:00:00"),
    )
    ranker_prod = DeploymentFactory(
        project=project, model=ranker, name="ranker-prod", started_at=at("2025-01-01T00:00:00")
    )
    march = delivery(account="111111111111", month=date(2025, 3, 1), as_of=at("2025-03-19"))
    february = delivery(account="111111111111", month=date(2025, 2, 1), as_of=at("2025-03-01"))
    gcp_march = delivery(
        account="gcp-1", month=date(2025, 3, 1), as_of=at("2025-03-16"), provider="Google Cloud"
    )
    gcp_february = delivery(
        account="gcp-1", month=date(2025, 2, 1), as_of=at("2025-03-01"), provider="Google Cloud"
    )
    d = date
    rollup(march, d(2025, 3, 10), "100.00", project=project, experiment=resnet, workload="training")
    rollup(
        march,
        d(2025, 3, 11),
        "10.00",
        project=project,
        experiment=resnet,
        workload="training",
        cost_kind="storage",
        service=S3,
    )
    rollup(
        march,
        d(2025, 3, 12),
        "40.00",
        project=project,
        experiment=vit,
        workload="training",
        region="us-west-2",
        pricing="Dynamic",
    )
    rollup(
        march,
        d(2025, 3, 12),
        "30.00",
        project=project,
        deployment=ranker_prod,
        workload="inference",
        service=SAGEMAKER,
        pricing="Committed",
    )
    google = {"provider": "Google Cloud", "region": "us-central1", "service": GCE}
    rollup(
        gcp_march,
        d(2025, 3, 15),
        "200.00",
        project=translation,
        experiment=mt,
        workload="fine_tuning",
        **google,
    )
    rollup(march, d(2025, 3, 16), "20.00", workload="unattributed", cost_kind="other")
    rollup(
        march,
        d(2025, 3, 16),
        "5.00",
        project=project,
        workload="storage",
        cost_kind="storage",
        service=S3,
    )
    rollup(
        march,
        d(2025, 3, 17),
        "7.00",
        project=project,
        experiment=resnet,
        workload="training",
        currency="EUR",
    )
    rollup(
        february, d(2025, 2, 20), "50.00", project=project, experiment=resnet, workload="training"
    )
    rollup(
        gcp_february,
        d(2025, 2, 25),
        "80.00",
        project=translation,
        experiment=mt,
        workload="fine_tuning",
        **google,
    )
    rollup(
        february,
        d(2025, 2, 1),
        "60.00",
        project=project,
        experiment=vit,
        workload="training",
        region="us-west-2",
        pricing="Dynamic",
    )
    rollup(
        gcp_february,
        d(2025, 2, 10),
        "20.00",
        project=translation,
        experiment=mt,
        workload="fine_tuning",
        **google,
    )
    rollup(february, d(2025, 2, 5), "4.00", workload="unattributed", cost_kind="other")
    resource_rollup(march, d(2025, 3, 16), "i-orphan", "12.00", name="orphan box")
    resource_rollup(march, d(2025, 3, 14), "i-orphan", "3.00", name="orphan box")
    resource_rollup(march, d(2025, 3, 16), BUCKET, "5.00", service=S3)
    resource_rollup(february, d(2025, 2, 5), "i-old", "4.00")
    resource_rollup(march, d(2025, 3, 10), "i-resnet", "100.00", project=project)

    # GPU-hours: resnet ran on i-resnet from 10 to 12 March; its GPU and a half-GPU MIG slice.
    ExperimentResourceFactory(experiment=resnet, resource_id="i-resnet")
    gpu = Gpu.objects.create(uuid="GPU-1", host="i-resnet", model_name="A100")
    slice_ = Gpu.objects.create(
        uuid="GPU-1", mig_instance="1", parent=gpu, host="i-resnet", share=0.5
    )
    for unit, hour in [
        (gpu, "2025-03-10T10:00:00"),
        (gpu, "2025-03-10T11:00:00"),
        (slice_, "2025-03-10T12:00:00"),
        (gpu, "2025-03-12T05:00:00"),  # after the run ended: another run's
    ]:
        GpuHour.objects.create(gpu=unit, hour=at(hour), samples=60, util_samples=60, util_mean=50)
    GpuHour.objects.create(gpu=gpu, hour=at("2025-03-10T13:00:00"), samples=5, util_samples=0)
    DeploymentResourceFactory(deployment=ranker_prod, resource_id="ep-ranker")
    for hour, requests in [
        ("2025-03-12T10:00:00", 4000),
        ("2025-03-13T10:00:00", 2000),
        ("2025-01-01T10:00:00", 999),  # before the range
    ]:
        TrafficHour.objects.create(
            deployment=ranker_prod, hour=at(hour), requests=requests, updated_at=NOW
        )
    return Bill(
        vision_project=project,
        translation=translation,
        resnet=resnet,
        vit=vit,
        mt=mt,
        ranker=ranker,
        mt_model=mt_model,
        ranker_prod=ranker_prod,
        march=march,
        february=february,
    )


# -- A FOCUS file for the tests that go through the real import ----------------------------------


FOCUS = [
    "BillingAccountId",
    "BillingCurrency",
    "BillingPeriodStart",
    "BillingPeriodEnd",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ChargeCategory",
    "BilledCost",
    "EffectiveCost",
    "ProviderName",
    "ServiceName",
    "ServiceCategory",
    "RegionId",
    "ResourceId",
    "ResourceName",
    "Tags",
]


def write_bill(path, lines: list[dict]):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FOCUS)
        writer.writeheader()
        for line in lines:
            writer.writerow(
                {
                    "BillingAccountId": "111111111111",
                    "BillingCurrency": "USD",
                    "BillingPeriodStart": "2025-03-01T00:00:00Z",
                    "BillingPeriodEnd": "2025-04-01T00:00:00Z",
                    "ChargeCategory": "Usage",
                    "ProviderName": "AWS",
                    "ServiceName": "Amazon Elastic Compute Cloud",
                    "ServiceCategory": "Compute",
                    "RegionId": "us-east-1",
                    **line,
                }
            )
    return path
