"""Billing fixtures: a small organisation built with the ORM, and FOCUS files written on the fly.

Lines are dicts of FOCUS columns; `focus_line()` fills the mandatory ones with an ordinary hour
of January 2025 for billing account 111111111111 in USD, so each test states only what matters.
"""

import csv
import gzip
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace

import pytest

from apps.accounts.models import Organization, Team
from apps.billing.models import ImportRun
from apps.billing.services import import_run_create, import_run_execute
from apps.deployments.models import Deployment, Model
from apps.experiments.models import Experiment
from apps.projects.models import Project, TagKeyAlias

# Copied from shared/reference/focus-spec-examples: FOCUS_Spec v1.2, CC BY 4.0 (see LICENSE.md).
SPEC_EXAMPLES = Path(__file__).parent / "data" / "focus_spec_examples"

COLUMNS = [
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodStart",
    "BillingPeriodEnd",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ChargeCategory",
    "ChargeClass",
    "ChargeFrequency",
    "PricingCategory",
    "BilledCost",
    "EffectiveCost",
    "ListCost",
    "ContractedCost",
    "ProviderName",
    "ServiceName",
    "ServiceCategory",
    "RegionId",
    "ResourceId",
    "ResourceName",
    "SkuId",
    "SkuPriceDetails",
    "ConsumedQuantity",
    "ConsumedUnit",
    "PricingQuantity",
    "PricingUnit",
    "SubAccountId",
    "Tags",
    "x_UsageType",
]


def focus_line(**values) -> dict:
    line = {
        "BillingAccountId": "111111111111",
        "BillingAccountName": "Acme payer",
        "BillingCurrency": "USD",
        "BillingPeriodStart": "2025-01-01T00:00:00Z",
        "BillingPeriodEnd": "2025-02-01T00:00:00Z",
        "ChargePeriodStart": "2025-01-02T10:00:00Z",
        "ChargePeriodEnd": "2025-01-02T11:00:00Z",
        "ChargeCategory": "Usage",
        "ChargeFrequency": "Usage-Based",
        "PricingCategory": "Standard",
        "BilledCost": "1.00",
        "EffectiveCost": "1.00",
        "ListCost": "1.00",
        "ContractedCost": "1.00",
        "ProviderName": "AWS",
        "ServiceName": "Amazon Elastic Compute Cloud",
        "ServiceCategory": "Compute",
        "RegionId": "us-east-1",
        "SubAccountId": "222222222222",
    }
    line.update(values)
    return line


def write_focus(
    path: Path, lines: list[dict], *, columns: list[str] | None = None, compress: bool = False
) -> Path:
    """A FOCUS CSV (gzip when `compress`) of these lines; absent values are empty fields."""
    columns = columns or COLUMNS
    opener = gzip.open if compress else open
    with opener(path, "wt", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="raise")
        writer.writeheader()
        for line in lines:
            writer.writerow({name: line.get(name, "") for name in columns})
    return path


def run_import(*paths, requested_format: str = "auto") -> ImportRun:
    run = import_run_create(paths=[str(p) for p in paths], requested_format=requested_format)
    return import_run_execute(import_run=run)


def when(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def acme(db):
    """Three projects, their runs and one deployment, and the tag key aliases Acme uses."""
    Organization.get()
    team = Team.objects.create(name="Machine learning", slug="ml")
    vision = Project.objects.create(team=team, name="Vision", slug="vision")
    nlp = Project.objects.create(team=team, name="Language", slug="nlp")
    search = Project.objects.create(team=team, name="Search", slug="search")
    resnet = Experiment.objects.create(
        project=vision,
        name="resnet-baseline",
        external_id="run-17",
        kind=Experiment.Kind.TRAINING,
        gpu_count=8,
        started_at=when("2025-01-01T00:00:00"),
        ended_at=when("2025-01-20T00:00:00"),
    )
    notebook = Experiment.objects.create(
        project=vision,
        name="ana-notebook",
        kind=Experiment.Kind.NOTEBOOK,
        gpu_count=1,
        started_at=when("2025-01-01T00:00:00"),
    )
    finetune = Experiment.objects.create(
        project=nlp,
        name="bert-finetune",
        external_id="ft-3",
        kind=Experiment.Kind.FINE_TUNING,
        gpu_count=4,
        started_at=when("2025-01-01T00:00:00"),
        ended_at=when("2025-01-31T00:00:00"),
    )
    evaluation = Experiment.objects.create(
        project=nlp,
        name="bert-eval",
        external_id="ev-1",
        kind=Experiment.Kind.EVALUATION,
        gpu_count=2,
        started_at=when("2025-01-01T00:00:00"),
        ended_at=when("2025-01-31T00:00:00"),
    )
    ranker_model = Model.objects.create(project=vision, name="ranker")
    ranker = Deployment.objects.create(
        project=vision,
        model=ranker_model,
        name="ranker-prod",
        external_id="ranker",
        gpu_count=1,
        started_at=when("2024-12-01T00:00:00"),
    )
    for dimension, key in (
        (TagKeyAlias.Dimension.PROJECT, "ml-project"),
        (TagKeyAlias.Dimension.PROJECT, "user:project"),
        (TagKeyAlias.Dimension.EXPERIMENT, "run-id"),
        (TagKeyAlias.Dimension.DEPLOYMENT, "service"),
    ):
        TagKeyAlias.objects.create(dimension=dimension, key=key)
    return SimpleNamespace(
        team=team,
        vision=vision,
        nlp=nlp,
        search=search,
        resnet=resnet,
        notebook=notebook,
        finetune=finetune,
        evaluation=evaluation,
        ranker=ranker,
    )


def money(text: str) -> Decimal:
    return Decimal(text)


# -- a storage bill (tests/billing/test_storage*.py) ---------------------------------------------


def storage_line(**values) -> dict:
    line = {
        "ServiceName": "Amazon Simple Storage Service",
        "ServiceCategory": "Storage",
        "ResourceId": "arn:aws:s3:::acme-checkpoints",
        "ChargePeriodStart": "2025-01-02T00:00:00Z",
        "ChargePeriodEnd": "2025-01-03T00:00:00Z",
        "x_UsageType": "TimedStorage-ByteHrs",
    }
    line.update(values)
    return focus_line(**line)


@pytest.fixture
def focus_bill(acme, tmp_path):
    Model.objects.create(project=acme.vision, name="resnet-50", external_id="m-resnet")
    TagKeyAlias.objects.create(dimension=TagKeyAlias.Dimension.DATA_CLASS, key="user:data-class")
    TagKeyAlias.objects.create(dimension=TagKeyAlias.Dimension.MODEL, key="user:model")
    lines = [
        # 16 GiB of checkpoints for a day: 16/31 GB-Mo, tagged by class and model
        storage_line(
            ConsumedQuantity="0.516129032258065",
            ConsumedUnit="GB-Mo",
            EffectiveCost="0.01",
            BilledCost="0.01",
            Tags='{"user:project": "vision", "user:data-class": "Checkpoints", '
            '"user:model": "m-resnet"}',
        ),
        # the same bucket's requests: object storage, no bytes
        storage_line(
            ConsumedQuantity="1000",
            ConsumedUnit="Requests",
            EffectiveCost="0.005",
            BilledCost="0.005",
            x_UsageType="Requests-Tier1",
            Tags='{"user:project": "vision", "user:data-class": "checkpoints"}',
        ),
        # a dataset bucket of another provider whose GB is decimal
        storage_line(
            ProviderName="Acme Cloud",
            ResourceId="acme://datasets",
            ConsumedQuantity="31",
            ConsumedUnit="GB-Mo",
            EffectiveCost="0.70",
            BilledCost="0.70",
            x_UsageType="",
            Tags='{"project": "nlp", "data_class": "dataset"}',
        ),
        # 10 GiB from us-east-1 to eu-west-1, no resource id, no tags
        focus_line(
            ServiceName="AWS Data Transfer",
            ServiceCategory="Networking",
            ConsumedQuantity="10",
            ConsumedUnit="GB",
            EffectiveCost="0.20",
            BilledCost="0.20",
            x_UsageType="USE1-EUW1-AWS-Out-Bytes",
        ),
        # compute is no storage
        focus_line(EffectiveCost="5.00", BilledCost="5.00"),
    ]
    run = run_import(write_focus(tmp_path / "storage.csv", lines))
    assert run.status == "succeeded", run.error
    return acme
