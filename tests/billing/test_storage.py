"""Storage and transfer lines: their class, ends and bytes, the data class and model dimensions,
in the storage rollup of FOCUS, CUR and GCP bills, hand-computed."""

from decimal import ROUND_DOWN, Decimal

import pytest
from django.db.models import Sum

from apps.billing.loader import storage_rebuild
from apps.billing.models import DailyStorageCost, Delivery
from apps.billing.services import attribution_refresh
from apps.billing.storage import classify, unit_factor
from apps.deployments.models import Model
from apps.projects.models import TagKeyAlias

from .conftest import run_import, storage_line, write_focus
from .formats.cur import LEGACY_COLUMNS, cur_line, write_cur
from .formats.test_gcp import gcp_row, write_gcp

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

GIB = 2**30
JANUARY_SECONDS = 31 * 86400


@pytest.mark.parametrize(
    ("unit", "provider", "factor"),
    [
        ("GB-Mo", "AWS", (GIB, None)),
        ("GB", "AWS", (GIB, 0)),
        ("TB", "AWS", (2**40, 0)),
        ("GB-Hrs", "AWS", (GIB, 3600)),
        ("byte-seconds", "Google Cloud", (1, 1)),
        ("bytes", "Google Cloud", (1, 0)),
        ("gibibyte month", "Google Cloud", (GIB, None)),
        ("gibibyte", "Google Cloud", (GIB, 0)),
        ("GB/Month", "Microsoft", (GIB, None)),
        ("1 GB/Month", "Microsoft", (GIB, None)),
        ("10 GB", "Microsoft", (10 * GIB, 0)),
        ("GB", "Acme Cloud", (10**9, 0)),  # FOCUS's own unit format: SI is decimal
        ("TB", "Acme Cloud", (10**12, 0)),
        ("GiB", "Acme Cloud", (GIB, 0)),
        ("GiB-Hours", "Acme Cloud", (GIB, 3600)),
        ("Hrs", "AWS", None),
        ("Requests", "AWS", None),
        ("", "AWS", None),
    ],
)
def test_each_unit_becomes_bytes_by_its_providers_documented_base(unit, provider, factor):
    assert unit_factor(unit, provider) == factor


@pytest.mark.parametrize(
    ("kind", "service", "description", "extra", "expected"),
    [
        ("storage", "Amazon S3", "", {"x_UsageType": "TimedStorage-ByteHrs"}, ("object", None, "")),
        ("storage", "Amazon EC2", "", {"x_UsageType": "EBS:VolumeUsage.gp3"}, ("block", None, "")),
        ("storage", "Amazon Elastic File System", "", {}, ("file", None, "")),
        ("storage", "Pinecone", "Serverless storage", {}, ("vector_db", None, "")),
        ("storage", "Cloud Storage", "Standard Storage US Multi-region", {}, ("object", None, "")),
        ("storage", "Compute Engine", "Storage PD Capacity", {}, ("block", None, "")),
        ("storage", "Filestore", "Filestore Basic HDD", {}, ("file", None, "")),
        ("storage", "Storage", "Hot LRS Data Stored", {}, ("object", None, "")),
        (
            "storage",
            "Storage",
            "P30 LRS Disk",
            {"x_MeterSubCategory": "Premium SSD Managed Disks"},
            ("block", None, ""),
        ),
        (
            "network",
            "Amazon EC2",
            "",
            {"x_UsageType": "DataTransfer-Out-Bytes"},
            ("internet_egress", None, "internet"),
        ),
        (
            "network",
            "Amazon EC2",
            "",
            {"x_UsageType": "USE1-USW2-AWS-Out-Bytes"},
            ("inter_region", "us-east-1", "us-west-2"),
        ),
        (
            "network",
            "Amazon EC2",
            "",
            {"x_UsageType": "USE1-EUW1-AWS-In-Bytes"},
            ("inter_region", "eu-west-1", "us-east-1"),
        ),
        (
            "network",
            "AWS Data Transfer",
            "",
            {
                "x_UsageType": "USE1-DataTransfer-Out-Bytes",
                "x_FromLocation": "US East (N. Virginia)",
                "x_ToLocation": "EU (Ireland)",
            },
            ("internet_egress", "us-east-1", "eu-west-1"),
        ),
        (
            "network",
            "Amazon EC2",
            "",
            {"x_UsageType": "DataTransfer-Regional-Bytes"},
            ("inter_zone", None, "unknown"),
        ),
        (
            "network",
            "Networking",
            "Network Inter Region Data Transfer Out from Americas to EMEA",
            {},
            ("inter_region", "americas", "emea"),
        ),
        (
            "network",
            "Networking",
            "Network Inter Zone Data Transfer Out",
            {},
            ("inter_zone", None, "unknown"),
        ),
        (
            "network",
            "Bandwidth",
            "Standard Data Transfer Out",
            {},
            ("internet_egress", None, "internet"),
        ),
        (
            "network",
            "Bandwidth",
            "Inter Continent Data Transfer Out - NAM or EU To Any",
            {},
            ("inter_region", None, "unknown"),
        ),
        (
            "network",
            "Amazon VPC",
            "NAT Gateway hours",
            {"x_UsageType": "NatGateway-Hours"},
            ("network_other", None, ""),
        ),
    ],
)
def test_storage_and_transfer_lines_are_classified_with_their_ends(
    kind, service, description, extra, expected
):
    assert (
        classify(cost_kind=kind, service_name=service, description=description, extra=extra)
        == expected
    )


def rows(**filters) -> dict:
    return DailyStorageCost.objects.filter(**filters).aggregate(
        spend=Sum("effective_cost"),
        stored=Sum("stored_byte_seconds"),
        moved=Sum("moved_bytes"),
        lines=Sum("line_items"),
    )


def test_a_focus_bill_gives_stored_bytes_moved_bytes_and_spend_per_class(focus_bill):
    checkpoints = rows(data_class="checkpoints")
    assert checkpoints["spend"] == Decimal("0.015")
    # 0.516129032258065 GB-Mo × 2^30 bytes × 31 days × 86,400 s (to the micro-byte-second)
    assert checkpoints["stored"] == (Decimal("0.516129032258065") * GIB * JANUARY_SECONDS).quantize(
        Decimal("0.000001"), ROUND_DOWN
    )
    assert checkpoints["lines"] == 2
    assert rows(data_class="checkpoints", usage_class="object")["lines"] == 2
    dataset = rows(data_class="dataset")
    assert dataset["stored"] == 31 * 10**9 * JANUARY_SECONDS  # 10^9 bytes a day, all month
    assert dataset["spend"] == Decimal("0.70")
    transfer = DailyStorageCost.objects.get(usage_class="inter_region")
    assert (transfer.transfer_from, transfer.transfer_to) == ("us-east-1", "eu-west-1")
    assert transfer.moved_bytes == 10 * GIB
    assert transfer.stored_byte_seconds == 0
    assert transfer.data_class == "unclassified"
    assert transfer.resource_id == ""
    assert rows()["lines"] == 4  # the compute line has no row


def test_a_model_tag_puts_storage_on_the_model_by_external_id(focus_bill):
    resnet = Model.objects.get(name="resnet-50")
    assert rows(model=resnet)["spend"] == Decimal("0.01")
    assert rows(model__isnull=True)["spend"] == Decimal("0.905")


def test_importing_the_same_bill_twice_counts_no_byte_twice(focus_bill, tmp_path):
    before = rows()
    run = run_import(tmp_path / "storage.csv")
    assert run.status == "unchanged"
    assert rows() == before


def test_the_rebuild_and_the_backfill_agree_with_the_import(focus_bill):
    before = list(
        DailyStorageCost.objects.order_by(
            "usage_class", "data_class", "resource_id", "effective_cost"
        ).values_list(
            "usage_class",
            "data_class",
            "resource_id",
            "effective_cost",
            "stored_byte_seconds",
            "moved_bytes",
            "line_items",
            "model_id",
        )
    )
    delivery = Delivery.objects.get(status="current")
    storage_rebuild(delivery_id=delivery.pk)
    after = list(
        DailyStorageCost.objects.order_by(
            "usage_class", "data_class", "resource_id", "effective_cost"
        ).values_list(
            "usage_class",
            "data_class",
            "resource_id",
            "effective_cost",
            "stored_byte_seconds",
            "moved_bytes",
            "line_items",
            "model_id",
        )
    )
    assert after == before


def test_an_owner_classes_untagged_storage_and_reattribution_follows_an_alias(acme, tmp_path):
    lines = [
        # the training run's bucket: checkpoints (resnet, tagged by run id)
        storage_line(
            ResourceId="arn:aws:s3:::resnet-ckpt",
            ConsumedQuantity="1",
            ConsumedUnit="GB-Mo",
            EffectiveCost="0.023",
            BilledCost="0.023",
            Tags='{"run-id": "run-17"}',
        ),
        # the deployment's: artefacts, and the deployment's model
        storage_line(
            ResourceId="arn:aws:s3:::ranker-artefacts",
            ConsumedQuantity="2",
            ConsumedUnit="GB-Mo",
            EffectiveCost="0.046",
            BilledCost="0.046",
            Tags='{"service": "ranker", "kind": "logs"}',
        ),
    ]
    assert run_import(write_focus(tmp_path / "owners.csv", lines)).status == "succeeded"
    assert rows(data_class="checkpoints", experiment=acme.resnet)["spend"] == Decimal("0.023")
    assert rows(data_class="artefacts", model=acme.ranker.model)["spend"] == Decimal("0.046")

    TagKeyAlias.objects.create(dimension=TagKeyAlias.Dimension.DATA_CLASS, key="kind")
    attribution_refresh()
    assert rows(data_class="logs")["spend"] == Decimal("0.046")
    assert rows(data_class="artefacts")["spend"] is None


def test_a_cur_bill_reads_transfer_ends_from_its_locations(acme, tmp_path):
    columns = [*LEGACY_COLUMNS, "product/fromLocation", "product/toLocation"]
    lines = [
        cur_line(
            lineItem__ProductCode="AmazonS3",
            lineItem__UsageType="TimedStorage-ByteHrs",
            lineItem__ResourceId="acme-datasets",
            lineItem__UsageAmount="62",
            lineItem__UnblendedCost="1.426",
            product__ProductName="Amazon Simple Storage Service",
            product__productFamily="Storage",
            pricing__unit="GB-Mo",
            resourceTags__user_project="vision",
        ),
        cur_line(
            lineItem__ProductCode="AWSDataTransfer",
            lineItem__UsageType="USE1-EUC1-AWS-Out-Bytes",
            lineItem__UsageAmount="500",
            lineItem__UnblendedCost="10.00",
            product__ProductName="AWS Data Transfer",
            product__productFamily="Data Transfer",
            pricing__unit="GB",
            **{
                "product/fromLocation": "US East (N. Virginia)",
                "product/toLocation": "EU (Frankfurt)",
            },
        ),
    ]
    run = run_import(write_cur(tmp_path / "cur.csv", lines, columns=columns))
    assert run.status == "succeeded", run.error
    stored = DailyStorageCost.objects.get(usage_class="object")
    assert stored.stored_byte_seconds == 62 * GIB * JANUARY_SECONDS
    assert stored.effective_cost == Decimal("1.426")
    assert stored.project == acme.vision
    moved = DailyStorageCost.objects.get(usage_class="inter_region")
    assert (moved.transfer_from, moved.transfer_to) == ("us-east-1", "eu-central-1")
    assert moved.moved_bytes == 500 * GIB


def test_a_gcp_bill_gives_bytes_from_its_base_units_and_ends_from_its_sku(acme, tmp_path):
    rows_ = [
        gcp_row(
            **{
                "service.description": "Cloud Storage",
                "sku.description": "Standard Storage US Multi-region",
                "usage.amount": str(5 * GIB * 86400),
                "usage.unit": "byte-seconds",
                "usage.amount_in_pricing_units": "0.16129",
                "usage.pricing_unit": "gibibyte month",
                "usage_start_time": "2025-01-02 00:00:00+00:00",
                "usage_end_time": "2025-01-03 00:00:00+00:00",
            },
            labels=(
                "[{'key': 'project', 'value': 'nlp'}, {'key': 'data_class', 'value': 'datasets'}]"
            ),
            cost="0.0032",
        ),
        gcp_row(
            **{
                "service.description": "Networking",
                "sku.description": "Network Inter Region Data Transfer Out from Americas to EMEA",
                "usage.amount": str(3 * GIB),
                "usage.unit": "bytes",
                "usage.amount_in_pricing_units": "3",
                "usage.pricing_unit": "gibibyte",
            },
            labels="[{'key': 'project', 'value': 'nlp'}]",
            cost="0.06",
        ),
    ]
    run = run_import(write_gcp(tmp_path / "gcp.csv", rows_))
    assert run.status == "succeeded", run.error
    dataset = DailyStorageCost.objects.get(data_class="dataset")
    assert dataset.usage_class == "object"
    assert dataset.stored_byte_seconds == 5 * GIB * 86400
    assert dataset.effective_cost == Decimal("0.0032")
    moved = DailyStorageCost.objects.get(usage_class="inter_region")
    assert (moved.transfer_from, moved.transfer_to) == ("americas", "emea")
    assert moved.moved_bytes == 3 * GIB
    assert moved.project == acme.nlp


def test_a_description_holding_the_key_separator_is_classified_not_a_crash(acme, tmp_path):
    """The rollup keys a line's wording by its parts joined with the unit separator (U+001F); a
    bill's text that holds one (a service name, as the GCP fuzz found) reads as a space, and the
    import loads."""
    lines = [
        storage_line(
            ServiceName="Amazon Simple\x1fStorage Service",
            ConsumedQuantity="31",
            ConsumedUnit="GB-Mo",
            EffectiveCost="0.70",
            BilledCost="0.70",
        )
    ]
    run = run_import(write_focus(tmp_path / "separator.csv", lines))
    assert run.status == "succeeded", run.error
    assert rows(usage_class="object")["spend"] == Decimal("0.70")
