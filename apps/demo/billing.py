"""Realistic FOCUS 1.2 data: a few months for the demo organisation (the benchmark's N rows,
bench/focus_bill.py, are made of the same resources and hours).

Both write what AWS's "FOCUS 1.2 with AWS columns" export looks like: hourly lines of GPU and CPU
instances (on-demand, spot and one savings plan), notebooks, storage buckets and volumes,
cross-region egress and a monitoring service, in CSV, with nulls as empty fields.
"""

import csv
import json
import os
import random
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from apps.billing.formats.focus import FOCUS_1_2_COLUMNS
from apps.billing.storage import AWS_PREFIX

from .findings import savings_plan_unused_rows

X_COLUMNS = ("x_Operation", "x_ServiceCode", "x_UsageType")
HEADER = (*FOCUS_1_2_COLUMNS, *X_COLUMNS)
_INDEX = {name: i for i, name in enumerate(HEADER)}
TEN = Decimal("0.0000000001")
COMMITTED_SHARE = Decimal("0.72")  # the savings plan's rate against on-demand

# (instance type, on-demand $/hour, GPUs, vCPUs); prices are us-east-1 Linux on-demand.
GPU_INSTANCES = (
    ("p4d.24xlarge", Decimal("32.7726"), 8, 96),
    ("p5.48xlarge", Decimal("98.32"), 8, 192),
    ("g5.xlarge", Decimal("1.006"), 1, 4),
    ("g5.12xlarge", Decimal("5.672"), 4, 48),
    ("g6e.xlarge", Decimal("1.861"), 1, 4),
    ("inf2.xlarge", Decimal("0.7582"), 1, 4),
)
CPU_INSTANCES = (
    ("m6i.xlarge", Decimal("0.192"), 0, 4),
    ("c6i.2xlarge", Decimal("0.34"), 0, 8),
    ("r6i.large", Decimal("0.126"), 0, 2),
    ("t3.medium", Decimal("0.0416"), 0, 2),
)
REGIONS = (("us-east-1", "US East (N. Virginia)"), ("us-west-2", "US West (Oregon)"))
ACCOUNT_ID = "123456789012"
ACCOUNT_NAME = "Acme ML payer"
SUB_ACCOUNTS = (("210987654321", "ml-research"), ("345678901234", "ml-serving"))
PROVIDER = "AWS"
ISSUER = "Amazon Web Services, Inc."
GCP = {
    "BillingAccountId": "01A2B3-C4D5E6-F7A8B9",
    "BillingAccountName": "Northwind ML (Google Cloud)",
    "ProviderName": "Google Cloud",
    "PublisherName": "Google Cloud",
    "InvoiceIssuerName": "Google LLC",
    "SubAccountId": "northwind-ml",
    "SubAccountName": "northwind-ml",
    "RegionName": "Iowa",
}
SAVINGS_PLAN = "arn:aws:savingsplans::123456789012:savingsplan/6f1b8c7e-1a2b-4c3d-9e8f-0a1b2c3d4e5f"


def _money(value: Decimal) -> str:
    return str(value.quantize(TEN))


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _month_start(day: date) -> datetime:
    return datetime(day.year, day.month, 1, tzinfo=UTC)


def _next_month(moment: datetime) -> datetime:
    return (moment + timedelta(days=32)).replace(day=1)


@dataclass
class Resource:
    """One billable thing that emits a line every hour it exists."""

    resource_id: str
    name: str
    kind: str  # gpu, cpu, notebook, bucket, volume, egress, monitoring
    hourly: Decimal
    instance_type: str = ""
    gpus: int = 0
    vcpus: int = 0
    region: tuple[str, str] = REGIONS[0]
    sub_account: tuple[str, str] = SUB_ACCOUNTS[0]
    tags: dict | None = None
    pricing: str = "Standard"  # Standard, Dynamic (spot) or Committed (savings plan)
    start: datetime | None = None
    end: datetime | None = None
    static: list[str] = field(default_factory=list)
    provider: str = "aws"
    spot_hourly: Decimal | None = None
    # The storage story (apps/demo/storage.py): one line a whole UTC day instead of one an hour,
    # its size (GB held, or GB moved that day) a function of the day rather than drawn, and a
    # transfer's two regions. Such resources draw nothing from the random stream, so the rest
    # of the bill is the same with or without them.
    daily: bool = False
    size: Callable[[datetime], Decimal] | None = None
    transfer: tuple[tuple[str, str], tuple[str, str]] | None = None


def _service(resource: Resource) -> dict[str, str]:
    """The columns that depend on what the resource is, not on the hour."""
    region_id, region_name = resource.region
    if resource.kind in {"gpu", "cpu"}:
        usage_type = f"{'SpotUsage' if resource.pricing == 'Dynamic' else 'BoxUsage'}:" + (
            resource.instance_type
        )
        details = {"InstanceType": resource.instance_type, "CoreCount": resource.vcpus}
        if resource.gpus:
            details["GpuCount"] = resource.gpus
        if resource.provider == "gcp":
            spot = "Spot Preemptible " if resource.pricing == "Dynamic" else ""
            return {
                "ServiceName": "Compute Engine",
                "ServiceCategory": "Compute",
                "ServiceSubcategory": "Virtual Machines",
                "ResourceType": "VM Instance",
                "ConsumedUnit": "Hours",
                "PricingUnit": "Hours",
                "SkuId": f"{zlib.crc32(resource.instance_type.encode()):08X}",
                "SkuMeter": f"{spot}{resource.instance_type} running in Americas",
                "SkuPriceDetails": json.dumps(details),
                "ChargeDescription": f"{spot}{resource.instance_type} instance running in Americas",
            }
        return {
            "ServiceName": "Amazon Elastic Compute Cloud",
            "ServiceCategory": "Compute",
            "ServiceSubcategory": "Virtual Machines",
            "ResourceType": "Instance",
            "ConsumedUnit": "Hours",
            "PricingUnit": "Hours",
            "SkuId": f"SKU{zlib.crc32(resource.instance_type.encode()):010d}",
            "SkuMeter": "BoxUsage",
            "SkuPriceDetails": json.dumps(details),
            "x_ServiceCode": "AmazonEC2",
            "x_Operation": "RunInstances",
            "x_UsageType": usage_type,
            "ChargeDescription": f"${resource.hourly} per On Demand Linux "
            f"{resource.instance_type} Instance Hour",
        }
    if resource.kind == "notebook":
        return {
            "ServiceName": "Amazon SageMaker",
            "ServiceCategory": "AI and Machine Learning",
            "ServiceSubcategory": "Machine Learning",
            "ResourceType": "Notebook Instance",
            "ConsumedUnit": "Hours",
            "PricingUnit": "Hours",
            "SkuId": "SMNB" + resource.instance_type.replace(".", "").upper(),
            "SkuMeter": "Notebk",
            "SkuPriceDetails": json.dumps(
                {"InstanceType": resource.instance_type, "GpuCount": resource.gpus}
            ),
            "x_ServiceCode": "AmazonSageMaker",
            "x_Operation": "RunInstance",
            "x_UsageType": f"Notebk:{resource.instance_type}",
            "ChargeDescription": f"${resource.hourly} per hour for {resource.instance_type} "
            "notebook instance",
        }
    if resource.kind == "bucket":
        return {
            "ServiceName": "Amazon Simple Storage Service",
            "ServiceCategory": "Storage",
            "ServiceSubcategory": "Object Storage",
            "ResourceType": "Bucket",
            "ConsumedUnit": "GB-Hours",
            "PricingUnit": "GB-Month",
            "SkuId": "WP9ANXZGBYYSGJEA",
            "SkuMeter": "TimedStorage-ByteHrs",
            "x_ServiceCode": "AmazonS3",
            "x_Operation": "StandardStorage",
            "x_UsageType": "TimedStorage-ByteHrs",
            "ChargeDescription": "$0.023 per GB - first 50 TB / month of storage used",
        }
    if resource.kind == "volume":
        return {
            "ServiceName": "Amazon Elastic Compute Cloud",
            "ServiceCategory": "Storage",
            "ServiceSubcategory": "Block Storage",
            "ResourceType": "Volume",
            "ConsumedUnit": "GB-Hours",
            "PricingUnit": "GB-Month",
            "SkuId": "7WRQZ3BMHP2BN2UM",
            "SkuMeter": "EBS:VolumeUsage.gp3",
            "x_ServiceCode": "AmazonEC2",
            "x_Operation": "CreateVolume-Gp3",
            "x_UsageType": "EBS:VolumeUsage.gp3",
            "ChargeDescription": "$0.08 per GB-month of General Purpose (gp3) provisioned storage",
        }
    if resource.kind == "egress" and resource.transfer is not None:
        (source, source_name), (target, target_name) = resource.transfer
        codes = {region: code for code, region in AWS_PREFIX.items()}
        return {
            "ServiceName": "AWS Data Transfer",
            "ServiceCategory": "Networking",
            "ServiceSubcategory": "Network Connectivity",
            "ResourceType": "",
            "ConsumedUnit": "GB",
            "PricingUnit": "GB",
            "SkuId": f"DT{zlib.crc32(f'{source}>{target}'.encode()):010d}",
            "SkuMeter": "DataTransfer-Regional-Bytes",
            "x_ServiceCode": "AWSDataTransfer",
            "x_Operation": "InterRegion Outbound",
            "x_UsageType": f"{codes[source]}-{codes[target]}-AWS-Out-Bytes",
            "ChargeDescription": f"$0.02 per GB - {source_name} data transfer to {target_name}",
        }
    if resource.kind == "egress":
        return {
            "ServiceName": "AWS Data Transfer",
            "ServiceCategory": "Networking",
            "ServiceSubcategory": "Network Connectivity",
            "ResourceType": "",
            "ConsumedUnit": "GB",
            "PricingUnit": "GB",
            "SkuId": "HQEH3ZWJVT46JHRG",
            "SkuMeter": "DataTransfer-Out-Bytes",
            "x_ServiceCode": "AWSDataTransfer",
            "x_Operation": "InterRegion Outbound",
            "x_UsageType": "USE1-USW2-AWS-Out-Bytes",
            "ChargeDescription": "$0.02 per GB - US East (N. Virginia) data transfer to US West",
        }
    return {
        "ServiceName": "Amazon CloudWatch",
        "ServiceCategory": "Management and Governance",
        "ServiceSubcategory": "Observability",
        "ResourceType": "Metric",
        "ConsumedUnit": "Metrics",
        "PricingUnit": "Metrics",
        "SkuId": "8KBSD2XRQ9JF3VVT",
        "SkuMeter": "CW:MetricMonitorUsage",
        "x_ServiceCode": "AmazonCloudWatch",
        "x_Operation": "MetricStorage",
        "x_UsageType": "CW:MetricMonitorUsage",
        "ChargeDescription": "$0.30 per metric-month for the first 10,000 metrics",
    }


def _static_fields(resource: Resource, period_start: datetime) -> list[str]:
    values = dict.fromkeys(HEADER, "")
    values.update(_service(resource))
    region_id, region_name = resource.region
    sub_id, sub_name = resource.sub_account
    values.update(
        {
            "AvailabilityZone": f"{region_id}a" if resource.kind in {"gpu", "cpu"} else "",
            "BillingAccountId": ACCOUNT_ID,
            "BillingAccountName": ACCOUNT_NAME,
            "BillingCurrency": "USD",
            "BillingPeriodStart": _stamp(period_start),
            "BillingPeriodEnd": _stamp(_next_month(period_start)),
            "ChargeCategory": "Usage",
            "ChargeFrequency": "Usage-Based",
            "InvoiceIssuerName": ISSUER,
            "PricingCategory": resource.pricing,
            "PricingCurrency": "USD",
            "ProviderName": PROVIDER,
            "PublisherName": ISSUER,
            "RegionId": region_id if resource.kind != "monitoring" else "",
            "RegionName": region_name if resource.kind != "monitoring" else "",
            "ResourceId": resource.resource_id,
            "ResourceName": resource.name,
            "SkuPriceId": f"{values.get('SkuId', '')}.JRTCKXETXF",
            "SubAccountId": sub_id,
            "SubAccountName": sub_name,
            "Tags": json.dumps(resource.tags) if resource.tags else "",
        }
    )
    if resource.provider == "gcp":
        values.update(GCP)
        values["SkuPriceId"] = f"{values['SkuId']}-{region_id}"
        values["AvailabilityZone"] = f"{region_id}-a" if resource.kind in {"gpu", "cpu"} else ""
    if resource.pricing == "Committed":
        values.update(
            {
                "CommitmentDiscountCategory": "Spend",
                "CommitmentDiscountId": SAVINGS_PLAN,
                "CommitmentDiscountName": "Compute savings plan (1 year, no upfront)",
                "CommitmentDiscountStatus": "Used",
                "CommitmentDiscountType": "Savings Plan",
                "CommitmentDiscountUnit": "USD",
            }
        )
    return [values[name] for name in HEADER]


def _hour_costs(
    resource: Resource, rng: random.Random, hour: datetime | None = None
) -> dict[str, str]:
    """Quantities and the four costs of one hour of the resource (of its day, if daily)."""
    if resource.size is not None:
        quantity = resource.size(hour)
        if resource.kind == "egress":
            effective = quantity * Decimal("0.02")
        else:
            quantity *= 24 if resource.daily else 1  # GB-hours
            per_gb_hour = Decimal("0.023" if resource.kind == "bucket" else "0.08") / 730
            effective = quantity * per_gb_hour
        billed = list_cost = effective
    elif resource.kind in {"gpu", "cpu", "notebook"}:
        quantity = Decimal(1)
        list_price = resource.hourly
        if resource.pricing == "Dynamic":
            # Spot moves every hour: around its listed price, else 30-40% of on-demand.
            if resource.spot_hourly is not None:
                effective = resource.spot_hourly * Decimal(rng.randint(90000, 110000)) / 100000
            else:
                effective = list_price * Decimal(rng.randint(30000, 40000)) / Decimal(100000)
            billed = effective
        elif resource.pricing == "Committed":
            effective = list_price * COMMITTED_SHARE
            billed = Decimal(0)
        else:
            effective = billed = list_price
        list_cost = list_price
    elif resource.kind in {"bucket", "volume"}:
        # GB-hours: the bucket grows a little over the month.
        quantity = resource.hourly * Decimal(rng.randint(98000, 102000)) / Decimal(100000)
        per_gb_hour = Decimal("0.023") / 730 if resource.kind == "bucket" else Decimal("0.08") / 730
        effective = billed = list_cost = quantity * per_gb_hour
    elif resource.kind == "egress":
        quantity = Decimal(rng.randint(0, 400000)) / Decimal(1000)
        effective = billed = list_cost = quantity * Decimal("0.02")
    else:
        quantity = Decimal(rng.randint(100, 120))
        effective = billed = list_cost = quantity * Decimal("0.30") / 730
    quantity_s = _money(quantity)
    out = {
        "BilledCost": _money(billed),
        "EffectiveCost": _money(effective),
        "ListCost": _money(list_cost),
        "ContractedCost": _money(effective if resource.pricing == "Committed" else list_cost),
        "ConsumedQuantity": quantity_s,
        "PricingQuantity": quantity_s,
        "PricingCurrencyEffectiveCost": _money(effective),
    }
    if resource.pricing == "Committed":
        out["CommitmentDiscountQuantity"] = _money(effective)
    return out


_VARYING = (
    "BilledCost",
    "EffectiveCost",
    "ListCost",
    "ContractedCost",
    "ConsumedQuantity",
    "PricingQuantity",
    "PricingCurrencyEffectiveCost",
    "CommitmentDiscountQuantity",
)


def hour_rows(
    resources: list[Resource], hours: list[datetime], rng: random.Random, limit: int | None = None
) -> Iterator[list[str]]:
    """Rows hour by hour, each resource that exists in that hour once."""
    written = 0
    period = None
    for hour in hours:
        month = _month_start(hour.date())
        if month != period:
            period = month
            for resource in resources:
                resource.static = _static_fields(resource, period)
        start_s, end_s = _stamp(hour), _stamp(hour + timedelta(hours=1))
        for resource in resources:
            if (resource.start and hour < resource.start) or (
                resource.end and hour >= resource.end
            ):
                continue
            row = resource.static.copy()
            row[_INDEX["ChargePeriodStart"]] = start_s
            row[_INDEX["ChargePeriodEnd"]] = end_s
            if resource.daily:
                # Whole days only: a day not over yet is not billed (nor moves "data as of").
                day_end = hour + timedelta(days=1)
                if hour.hour or (resource.end and day_end > resource.end):
                    continue
                row[_INDEX["ChargePeriodEnd"]] = _stamp(day_end)
            for name, value in _hour_costs(resource, rng, hour).items():
                row[_INDEX[name]] = value
            yield row
            written += 1
            if limit is not None and written >= limit:
                return


def focus_csv_write(
    path: Path, rows: Iterator[list[str]], extra_rows: list[list[str]] = ()
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(HEADER)
        writer.writerows(rows)
        writer.writerows(extra_rows)
    return path


# --- The demo organisation's months ----------------------------------------------------------

# (on-demand $/hour, spot $/hour, GPUs, vCPUs): us-east-1 and us-central1 list prices from
# shared/data/gpu_instance_prices.csv; a3-highgpu-8g and c6i.4xlarge (absent there) from the
# providers' price pages.
INSTANCE_PRICES = {
    "p5.48xlarge": (Decimal("55.04"), Decimal("17.6289"), 8, 192),
    "p4de.24xlarge": (Decimal("27.44705"), Decimal("8.6505"), 8, 96),
    "p4d.24xlarge": (Decimal("21.957642"), Decimal("6.5873"), 8, 96),
    "g5.12xlarge": (Decimal("5.672"), Decimal("2.0796"), 4, 48),
    "g5.2xlarge": (Decimal("1.212"), Decimal("0.4738"), 1, 8),
    "g5.xlarge": (Decimal("1.006"), Decimal("0.4246"), 1, 4),
    "g6.xlarge": (Decimal("0.8048"), Decimal("0.349"), 1, 4),
    "g4dn.xlarge": (Decimal("0.526"), Decimal("0.2"), 1, 4),
    "c6i.4xlarge": (Decimal("0.68"), Decimal("0.27"), 0, 16),
    "a3-highgpu-8g": (Decimal("88.25"), Decimal("26.47"), 8, 208),
    "a2-highgpu-1g": (Decimal("3.67339"), Decimal("1.80385"), 1, 12),
}
DEFAULT_BY_GPUS = {8: "p4d.24xlarge", 4: "g5.12xlarge", 1: "g5.xlarge", 0: "c6i.4xlarge"}


def _hour_floor(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _hour_ceil(moment: datetime) -> datetime:
    floor = _hour_floor(moment)
    return floor if floor == moment else floor + timedelta(hours=1)


def _instance(hardware) -> tuple[str, Decimal, Decimal, int, int]:
    """What a run or a deployment ran on, priced: its own type, else a type with its GPUs."""
    itype = hardware.instance_type
    if itype not in INSTANCE_PRICES:
        itype = DEFAULT_BY_GPUS.get(hardware.gpu_count, "g5.xlarge")
    price, spot, gpus, vcpus = INSTANCE_PRICES[itype]
    return itype, price, spot, gpus, vcpus


def _instance_resource(
    resource_id: str,
    name: str,
    hardware,
    region: str,
    tags: dict | None,
    pricing: str,
    start: datetime,
    end: datetime,
    sub_account=SUB_ACCOUNTS[0],
) -> Resource:
    itype, price, spot, gpus, vcpus = _instance(hardware)
    provider = "gcp" if resource_id.startswith("//compute.googleapis.com") else "aws"
    region_name = dict(REGIONS).get(region, GCP["RegionName"] if provider == "gcp" else region)
    return Resource(
        resource_id,
        name,
        "gpu" if gpus else "cpu",
        price,
        itype,
        gpus,
        vcpus,
        (region or REGIONS[0][0], region_name),
        sub_account,
        tags,
        pricing,
        start=start,
        end=end,
        provider=provider,
        spot_hourly=spot,
    )


def _purchase_row(period_start: datetime, period_end: datetime, amount: Decimal) -> list[str]:
    """The monthly fee of the savings plan: billed here, amortised onto the usage it covers and
    onto its unused part (the fee equals its Committed lines' EffectiveCost)."""
    values = dict.fromkeys(HEADER, "")
    fee = _money(amount)
    values.update(
        {
            "BilledCost": fee,
            "EffectiveCost": _money(Decimal(0)),
            "ListCost": fee,
            "ContractedCost": fee,
            "BillingAccountId": ACCOUNT_ID,
            "BillingAccountName": ACCOUNT_NAME,
            "BillingCurrency": "USD",
            "BillingPeriodStart": _stamp(period_start),
            "BillingPeriodEnd": _stamp(period_end),
            "ChargePeriodStart": _stamp(period_start),
            "ChargePeriodEnd": _stamp(period_end),
            "ChargeCategory": "Purchase",
            "ChargeFrequency": "Recurring",
            "ChargeDescription": "Savings plan monthly commitment",
            "PricingCategory": "Standard",
            "PricingQuantity": "1",
            "PricingUnit": "Month",
            "CommitmentDiscountCategory": "Spend",
            "CommitmentDiscountId": SAVINGS_PLAN,
            "CommitmentDiscountName": "Compute savings plan (1 year, no upfront)",
            "CommitmentDiscountType": "Savings Plan",
            "ProviderName": PROVIDER,
            "PublisherName": ISSUER,
            "InvoiceIssuerName": ISSUER,
            "ResourceId": SAVINGS_PLAN,
            "ServiceCategory": "Compute",
            "ServiceName": "Savings Plans for AWS Compute usage",
            "ServiceSubcategory": "Other (Compute)",
            "SubAccountId": SUB_ACCOUNTS[1][0],
            "SubAccountName": SUB_ACCOUNTS[1][1],
            "x_ServiceCode": "ComputeSavingsPlans",
            "x_UsageType": "ComputeSP:1yrNoUpfront",
        }
    )
    return [values[name] for name in HEADER]


def _unused_row(day: date, amount: Decimal) -> list[str]:
    """A day of the savings plan's commitment nobody used (amortised, FOCUS: Unused)."""
    start = datetime.combine(day, datetime.min.time(), tzinfo=UTC)
    values = dict.fromkeys(HEADER, "")
    values.update(
        {
            "BilledCost": _money(Decimal(0)),
            "EffectiveCost": _money(amount),
            "ListCost": _money(Decimal(0)),
            "ContractedCost": _money(amount),
            "BillingAccountId": ACCOUNT_ID,
            "BillingAccountName": ACCOUNT_NAME,
            "BillingCurrency": "USD",
            "BillingPeriodStart": _stamp(_month_start(day)),
            "BillingPeriodEnd": _stamp(_next_month(_month_start(day))),
            "ChargePeriodStart": _stamp(start),
            "ChargePeriodEnd": _stamp(start + timedelta(days=1)),
            "ChargeCategory": "Usage",
            "ChargeFrequency": "Usage-Based",
            "ChargeDescription": "Savings plan commitment not used",
            "PricingCategory": "Committed",
            "CommitmentDiscountCategory": "Spend",
            "CommitmentDiscountId": SAVINGS_PLAN,
            "CommitmentDiscountName": "Compute savings plan (1 year, no upfront)",
            "CommitmentDiscountStatus": "Unused",
            "CommitmentDiscountType": "Savings Plan",
            "CommitmentDiscountUnit": "USD",
            "ProviderName": PROVIDER,
            "PublisherName": ISSUER,
            "InvoiceIssuerName": ISSUER,
            "ResourceId": SAVINGS_PLAN,
            "ServiceCategory": "Compute",
            "ServiceName": "Savings Plans for AWS Compute usage",
            "ServiceSubcategory": "Other (Compute)",
            "SubAccountId": SUB_ACCOUNTS[1][0],
            "SubAccountName": SUB_ACCOUNTS[1][1],
            "x_ServiceCode": "ComputeSavingsPlans",
            "x_UsageType": "ComputeSP:1yrNoUpfront",
        }
    )
    return [values[name] for name in HEADER]


def _experiment_resources(window_start: datetime, now: datetime) -> list[Resource]:
    """An instance for every machine a run registered, billed while it was used.

    A box several runs shared one after another is billed from the first start to the last
    end, idle hours between runs included, tagged with the project alone. Other instances carry
    the project and the run id (`run-id`, an alias) except every fourth, left untagged:
    its spend reaches its run through the registered resource.
    """
    from apps.experiments.models import Experiment, ExperimentResource

    uses: dict[str, list] = {}
    for experiment in Experiment.objects.exclude(started_at=None).order_by("pk"):
        rows = list(experiment.resources.all())
        if not rows:
            # A run registered without machines: give it one, as its script would have.
            rows = [
                ExperimentResource.objects.get_or_create(
                    experiment=experiment,
                    resource_id=f"i-0demo{experiment.pk:012x}",
                    started_at=None,
                )[0]
            ]
        for row in rows:
            start = row.started_at or experiment.started_at
            end = row.ended_at or experiment.ended_at or now
            uses.setdefault(row.resource_id, []).append((experiment, start, end))
    resources = []
    for number, (resource_id, runs) in enumerate(sorted(uses.items())):
        experiment = runs[0][0]
        start = max(_hour_floor(min(u[1] for u in runs)), window_start)
        end = min(_hour_ceil(max(u[2] for u in runs)), now)
        if end <= start:
            continue
        if len(runs) > 1:
            tags = {"project": experiment.project.slug}
        elif number % 4 == 3:
            tags = None
        else:
            tags = {
                "project": experiment.project.slug,
                "run-id": experiment.external_id or experiment.name,
                **{k: v for k, v in experiment.tags.items() if k in {"owner", "framework"}},
            }
        resources.append(
            _instance_resource(
                resource_id,
                f"{experiment.project.slug}-{experiment.kind}-{number}",
                experiment,
                experiment.region,
                tags,
                "Dynamic" if experiment.is_spot else "Standard",
                start,
                end,
            )
        )
    return resources


def _deployment_resources(window_start: datetime, now: datetime) -> list[Resource]:
    """Serving instances, from the deployment's start until now. The first deployment runs on
    the savings plan; the second is untagged (registered resources attribute it)."""
    from apps.deployments.models import Deployment, DeploymentResource

    resources = []
    for number, deployment in enumerate(Deployment.objects.order_by("pk")):
        rows = list(deployment.resources.all())
        if not rows:
            # A deployment registered without machines: one per replica, as its operator would.
            rows = [
                DeploymentResource.objects.get_or_create(
                    deployment=deployment,
                    resource_id=f"i-0serve{deployment.pk:06x}{n:04x}",
                    started_at=None,
                )[0]
                for n in range(max(deployment.replicas, 1))
            ]
        for row in rows:
            start = max(
                _hour_ceil(row.started_at or deployment.started_at or window_start), window_start
            )
            end = min(_hour_floor(row.ended_at or deployment.ended_at or now), now)
            if end <= start:
                continue
            tags = (
                None
                if number == 1
                else (
                    deployment.tags
                    or {
                        "project": deployment.project.slug,
                        "service": deployment.name,
                    }
                )
            )
            resources.append(
                _instance_resource(
                    row.resource_id,
                    f"{deployment.name}-{row.pk}",
                    deployment,
                    deployment.region,
                    tags,
                    "Committed" if number == 0 else "Standard",
                    start,
                    end,
                    sub_account=SUB_ACCOUNTS[1],
                )
            )
    return resources


def _shared_resources(window_start: datetime, now: datetime, rng: random.Random) -> list[Resource]:
    """Buckets and checkpoint volumes per project, egress, monitoring, and a GPU box nobody
    tagged or registered: spend to claim."""
    from apps.projects.models import Project

    resources = []
    for project in Project.objects.order_by("pk"):
        tags = {" Project": project.slug}  # a key with a stray space, as real exports have
        resources.append(
            Resource(
                f"arn:aws:s3:::northwind-{project.slug}-datasets",
                f"northwind-{project.slug}-datasets",
                "bucket",
                Decimal(rng.randint(2000, 40000)),
                region=REGIONS[0],
                sub_account=SUB_ACCOUNTS[0],
                tags=tags,
                start=window_start,
                end=now,
            )
        )
        resources.append(
            Resource(
                f"arn:aws:ec2:us-east-1:{SUB_ACCOUNTS[0][0]}:volume/vol-0ckpt{project.pk:010x}",
                f"{project.slug}-checkpoints",
                "volume",
                Decimal(rng.randint(500, 4000)),
                region=REGIONS[0],
                sub_account=SUB_ACCOUNTS[0],
                tags=tags,
                start=window_start,
                end=now,
            )
        )
    resources.append(
        Resource(
            "",
            "",
            "egress",
            Decimal(0),
            region=REGIONS[0],
            sub_account=SUB_ACCOUNTS[0],
            start=window_start,
            end=now,
        )
    )
    price, _spot, gpus, vcpus = INSTANCE_PRICES["g5.12xlarge"]
    resources.append(
        Resource(
            f"arn:aws:ec2:us-west-2:{SUB_ACCOUNTS[0][0]}:instance/i-0forgotten0gpu0box",
            "gpu-box-do-not-delete",
            "gpu",
            price,
            "g5.12xlarge",
            gpus,
            vcpus,
            REGIONS[1],
            SUB_ACCOUNTS[0],
            None,
            start=window_start,
            end=now,
        )
    )
    resources.append(
        Resource(
            f"arn:aws:cloudwatch:us-east-1:{SUB_ACCOUNTS[0][0]}:metrics",
            "",
            "monitoring",
            Decimal(0),
            region=REGIONS[0],
            sub_account=SUB_ACCOUNTS[0],
            start=window_start,
            end=now,
        )
    )
    return resources


def demo_storage_resources(window_start: datetime, now: datetime) -> list[Resource]:
    from .storage import demo_storage_resources as resources

    return resources(window_start, now)


def demo_billing_write(*, directory: Path, small: bool, now: datetime | None = None) -> list[Path]:
    """Write the demo organisation's FOCUS files: one per provider and month.

    Months: the last three full months and the current one to date (`small`: the last full
    month and the current one). Lines come from the experiments, deployments (and the machines
    they registered) and projects in the database; import the files with the billing pipeline
    (seed_demo does). A run registered without machines gets one, registered here.
    """
    now = _hour_floor(now or datetime.now(UTC))
    first = _month_start(now.date())
    for _ in range(1 if small else 3):
        first = _month_start((first - timedelta(days=1)).date())
    rng = random.Random(42)
    resources = [
        *_experiment_resources(first, now),
        *_deployment_resources(first, now),
        *_shared_resources(first, now, rng),
        *demo_storage_resources(first, now),
    ]
    paths = []
    month = first
    while month < now:
        month_end = _next_month(month)
        last = min(month_end, now)
        hours = [
            month + timedelta(hours=h) for h in range(int((last - month) / timedelta(hours=1)))
        ]
        for provider in ("aws", "gcp"):
            mine = [
                r for r in resources if r.provider == provider and r.start < last and r.end > month
            ]
            if not mine:
                continue  # nothing ran there that month: no export
            extra = []
            if provider == "aws":
                covered_by_day: dict[date, Decimal] = {}
                for r in mine:
                    if r.pricing != "Committed":
                        continue
                    for hour in hours:
                        if r.start <= hour < r.end:
                            covered_by_day[hour.date()] = covered_by_day.get(
                                hour.date(), Decimal(0)
                            ) + (r.hourly * COMMITTED_SHARE).quantize(TEN)
                covered = sum(covered_by_day.values(), Decimal(0))
                if covered:
                    # Half used (apps/demo/findings.py): the fee is twice what it covered.
                    unused = savings_plan_unused_rows(
                        covered_by_day=covered_by_day, row=_unused_row
                    )
                    extra.append(_purchase_row(month, month_end, covered * 2))
                    extra.extend(unused)
            path = directory / f"focus-{provider}-{month:%Y-%m}.csv"
            paths.append(focus_csv_write(path, hour_rows(mine, hours, rng), extra))
        month = month_end
    return paths


DEMO_SOURCE = "Demo exports (FOCUS folder)"


def demo_billing_load(*, directory: Path, small: bool, log: Callable[[str], None]) -> None:
    """The seed_demo step: write the exports into a folder, register the folder as a billing
    source and poll it once, so the files go through the real pipeline (poll, import runs,
    import) and the sources and imports pages have a history to show."""
    from apps.billing import services, services_sources
    from apps.billing.models import BillingSource, ImportRun

    paths = demo_billing_write(directory=directory, small=small)
    # The cloud dropped these an hour ago: a poll leaves files still being written (modified in
    # the last minute) for the next one.
    delivered = time.time() - 3600
    for path in paths:
        os.utime(path, (delivered, delivered))
    source = BillingSource.objects.filter(name=DEMO_SOURCE).first()
    if source is None:
        source = services_sources.billing_source_create(
            name=DEMO_SOURCE, kind=BillingSource.Kind.FOLDER, path=str(directory.resolve())
        )
    poll = services_sources.billing_source_poll(source=source)
    # The poll hands its runs to Celery; seed_demo waits for none: it runs in this process those
    # no worker has claimed (eager Celery, as in the demo, has run them already).
    runs = [
        services.import_run_execute(import_run=run)
        for run in ImportRun.objects.filter(poll=poll).order_by("pk")
    ]
    failed = [run for run in runs if run.status == ImportRun.Status.FAILED]
    if failed:
        raise RuntimeError(f"Billing demo import failed: {failed[0].error}")
    for run in runs:
        for result in run.results:
            log(
                f"{Path(result['file']).name}: {result['line_items']:,} line items, "
                f"spend {', '.join(f'{v} {k}' for k, v in result['effective_cost'].items())}"
            )
