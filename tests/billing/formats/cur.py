"""CUR fixtures written from shared/reference/billing-formats.md §2: one line of each kind that
matters (on-demand, reserved, savings plan and its negation and fees, spot, tax, credit, tags),
with the exact billed cost and amortised spend each must come to."""

import csv
import gzip
import json
from decimal import Decimal
from pathlib import Path

from django.db.models import Sum

from apps.billing.models import CostLineItem, DailyCost

PAYER = "111111111111"
JANUARY = {
    "bill/BillingPeriodStartDate": "2025-01-01T00:00:00Z",
    "bill/BillingPeriodEndDate": "2025-02-01T00:00:00Z",
}
RI = "arn:aws:ec2:us-east-1:111111111111:reserved-instances/ri-1"
SP = "arn:aws:savingsplans::111111111111:savingsplan/sp-1"

LEGACY_COLUMNS = [
    "identity/LineItemId",
    "bill/InvoiceId",
    "bill/PayerAccountId",
    "bill/BillingPeriodStartDate",
    "bill/BillingPeriodEndDate",
    "lineItem/UsageAccountId",
    "lineItem/LineItemType",
    "lineItem/UsageStartDate",
    "lineItem/UsageEndDate",
    "lineItem/ProductCode",
    "lineItem/UsageType",
    "lineItem/Operation",
    "lineItem/AvailabilityZone",
    "lineItem/ResourceId",
    "lineItem/UsageAmount",
    "lineItem/CurrencyCode",
    "lineItem/UnblendedRate",
    "lineItem/UnblendedCost",
    "lineItem/LineItemDescription",
    "product/ProductName",
    "product/instanceType",
    "product/productFamily",
    "product/region",
    "product/gpu",
    "product/sku",
    "pricing/term",
    "pricing/unit",
    "pricing/publicOnDemandCost",
    "reservation/ReservationARN",
    "reservation/EffectiveCost",
    "reservation/UnusedAmortizedUpfrontFeeForBillingPeriod",
    "reservation/UnusedRecurringFee",
    "savingsPlan/SavingsPlanARN",
    "savingsPlan/SavingsPlanEffectiveCost",
    "savingsPlan/TotalCommitmentToDate",
    "savingsPlan/UsedCommitment",
    "resourceTags/user:project",
    "resourceTags/user:run-id",
    "resourceTags/aws:createdBy",
]


def cur_line(**values) -> dict:
    """A legacy CUR line (CSV spelling) of an ordinary EC2 hour; `values` name columns as written
    or with `/` and `:` as `__` and `_` (lineItem__UnblendedCost, resourceTags__user_project)."""
    line = {
        "bill/PayerAccountId": PAYER,
        **JANUARY,
        "lineItem/UsageAccountId": "222222222222",
        "lineItem/LineItemType": "Usage",
        "lineItem/UsageStartDate": "2025-01-02T10:00:00Z",
        "lineItem/UsageEndDate": "2025-01-02T11:00:00Z",
        "lineItem/ProductCode": "AmazonEC2",
        "lineItem/CurrencyCode": "USD",
        "product/ProductName": "Amazon Elastic Compute Cloud",
        "product/region": "us-east-1",
        "lineItem/UsageAmount": "1",
        "pricing/unit": "Hrs",
    }
    for key, value in values.items():
        if "/" in key:
            line[key] = value
            continue
        category, _, name = key.partition("__")
        line[f"{category}/{name.replace('_', ':', 1) if category == 'resourceTags' else name}"] = (
            value
        )
    return line


def cur_lines() -> list[dict]:
    return [
        # 2: on-demand training hours on a p4d, tagged to a run
        cur_line(
            lineItem__UsageType="BoxUsage:p4d.24xlarge",
            lineItem__ResourceId="i-train",
            lineItem__UnblendedCost="32.7726",
            product__instanceType="p4d.24xlarge",
            product__productFamily="Compute Instance",
            product__gpu="8",
            pricing__term="OnDemand",
            resourceTags__user_project="vision",
            **{"resourceTags/user:run-id": "run-17"},
        ),
        # 3: reserved-instance usage: nothing billed, the amortised cost in reservation/
        cur_line(
            lineItem__LineItemType="DiscountedUsage",
            lineItem__UsageType="BoxUsage:g5.xlarge",
            lineItem__UnblendedCost="0",
            product__instanceType="g5.xlarge",
            product__productFamily="Compute Instance",
            pricing__term="Reserved",
            reservation__ReservationARN=RI,
            reservation__EffectiveCost="0.9",
            resourceTags__user_project="nlp",
        ),
        # 4: savings-plan covered usage
        cur_line(
            lineItem__LineItemType="SavingsPlanCoveredUsage",
            lineItem__UsageType="BoxUsage:m5.xlarge",
            lineItem__UnblendedCost="10.00",
            product__productFamily="Compute Instance",
            pricing__term="OnDemand",
            savingsPlan__SavingsPlanARN=SP,
            savingsPlan__SavingsPlanEffectiveCost="6.50",
            resourceTags__user_project="vision",
        ),
        # 5: its negation: billed, but no spend
        cur_line(
            lineItem__LineItemType="SavingsPlanNegation",
            lineItem__UsageType="BoxUsage:m5.xlarge",
            lineItem__UnblendedCost="-3.50",
            savingsPlan__SavingsPlanARN=SP,
            resourceTags__user_project="vision",
        ),
        # 6: the plan's monthly fee: spend is what went unused
        cur_line(
            lineItem__LineItemType="SavingsPlanRecurringFee",
            lineItem__ProductCode="ComputeSavingsPlans",
            lineItem__UnblendedCost="100.00",
            savingsPlan__SavingsPlanARN=SP,
            savingsPlan__TotalCommitmentToDate="100.00",
            savingsPlan__UsedCommitment="80.00",
        ),
        # 7: the reservation's monthly fee: unused upfront plus unused recurring
        cur_line(
            lineItem__LineItemType="RIFee",
            lineItem__UnblendedCost="50.00",
            reservation__ReservationARN=RI,
            reservation__UnusedAmortizedUpfrontFeeForBillingPeriod="4.00",
            reservation__UnusedRecurringFee="6.00",
        ),
        # 8: the reservation's upfront fee: billed once, amortised into usage
        cur_line(
            lineItem__LineItemType="Fee",
            lineItem__UnblendedCost="1200.00",
            reservation__ReservationARN=RI,
        ),
        # 9: spot with pricing/term blank, as in real 2018 reports
        cur_line(
            lineItem__UsageType="USE2-SpotUsage:g5.xlarge",
            lineItem__UnblendedCost="0.5",
            product__productFamily="Compute Instance",
            resourceTags__user_project="nlp",
        ),
        # 10: tax
        cur_line(lineItem__LineItemType="Tax", lineItem__UnblendedCost="7.25"),
        # 11: a credit on tagged usage
        cur_line(
            lineItem__LineItemType="Credit",
            lineItem__UnblendedCost="-5.00",
            resourceTags__user_project="vision",
        ),
        # 12: S3 storage with an exponent, tagged by someone else's tool too
        cur_line(
            lineItem__ProductCode="AmazonS3",
            lineItem__UsageType="TimedStorage-ByteHrs",
            lineItem__ResourceId="search-index",
            lineItem__UnblendedCost="1.2E-5",
            product__ProductName="Amazon Simple Storage Service",
            product__productFamily="Storage",
            pricing__term="OnDemand",
            resourceTags__user_project="search",
            resourceTags__aws_createdBy="IAMUser:AIDA:ci",
        ),
    ]


BILLED = Decimal("1392.022612")
EFFECTIVE = Decimal("72.922612")
# project slug (None: unattributed) → (spend, billed)
BY_PROJECT = {
    "vision": (Decimal("34.2726"), Decimal("34.2726")),
    "nlp": (Decimal("1.4"), Decimal("0.5")),
    "search": (Decimal("0.000012"), Decimal("0.000012")),
    None: (Decimal("37.25"), Decimal("1357.25")),
}

# workload → spend: the run's training hours, the untagged tax and commitments, the rest
WORKLOADS = {
    "training": Decimal("32.7726"),
    "other": Decimal("2.9"),
    "storage": Decimal("0.000012"),
    "unattributed": Decimal("37.25"),
}


def write_cur(
    path: Path, lines: list[dict], *, columns: list[str] | None = None, compress: bool = False
) -> Path:
    columns = columns or LEGACY_COLUMNS
    opener = gzip.open if compress else open
    with opener(path, "wt", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="raise")
        writer.writeheader()
        for line in lines:
            writer.writerow({name: line.get(name, "") for name in columns})
    return path


def write_manifest(folder: Path, parts: list[list[dict]], *, name: str = "cur") -> Path:
    """A legacy delivery: gzip parts under their S3 key's folders and the manifest naming them."""
    keys = []
    for number, lines in enumerate(parts, start=1):
        key = f"reports/{name}/20250101-20250201/assembly-1/{name}-{number:05d}.csv.gz"
        (folder / key).parent.mkdir(parents=True, exist_ok=True)
        write_cur(folder / key, lines, compress=True)
        keys.append(key)
    manifest = folder / f"{name}-Manifest.json"
    manifest.write_text(
        json.dumps(
            {
                "assemblyId": "assembly-1",
                "account": PAYER,
                "compression": "GZIP",
                "contentType": "text/csv",
                "billingPeriod": {"start": "20250101T000000.000Z", "end": "20250201T000000.000Z"},
                "reportKeys": keys,
            }
        )
    )
    return manifest


def by_project() -> dict:
    """Spend and billed cost per project slug, from the line items; the daily rollup must
    say the same."""
    totals = {}
    for model in (CostLineItem, DailyCost):
        rows = model.objects.values("project__slug").annotate(
            spend=Sum("effective_cost"), billed=Sum("billed_cost")
        )
        totals[model] = {row["project__slug"]: (row["spend"], row["billed"]) for row in rows}
    assert totals[CostLineItem] == totals[DailyCost]
    return totals[CostLineItem]


def by_workload() -> dict:
    rows = CostLineItem.objects.values("workload").annotate(spend=Sum("effective_cost"))
    return {row["workload"]: row["spend"] for row in rows}


def athena_lines(lines: list[dict]) -> list[dict]:
    """The same lines in the Athena flavour's snake_case names."""
    from apps.billing.formats.aws_cur import athena_name

    return [{athena_name(key): value for key, value in line.items()} for line in lines]


def cur2_lines(lines: list[dict]) -> list[dict]:
    """The same lines as CUR 2.0 holds them: tags and the product's long tail in maps."""
    out = []
    for line in athena_lines(lines):
        tags = {
            key.removeprefix("resource_tags_"): value
            for key, value in line.items()
            if key.startswith("resource_tags_") and value
        }
        product = {
            "product_name": line.pop("product_product_name", None),
            "gpu": line.pop("product_gpu", None),
        }
        line = {k: v for k, v in line.items() if not k.startswith("resource_tags_")}
        line["resource_tags"] = tags
        line["product"] = {k: v for k, v in product.items() if v}
        out.append(line)
    return out


TIMESTAMPS = (
    "bill_billing_period_start_date",
    "bill_billing_period_end_date",
    "line_item_usage_start_date",
    "line_item_usage_end_date",
)
NUMBERS = (
    "line_item_unblended_cost",
    "line_item_usage_amount",
    "pricing_public_on_demand_cost",
    "reservation_effective_cost",
    "reservation_unused_amortized_upfront_fee_for_billing_period",
    "reservation_unused_recurring_fee",
    "savings_plan_savings_plan_effective_cost",
    "savings_plan_total_commitment_to_date",
    "savings_plan_used_commitment",
)


def write_parquet(path: Path, lines: list[dict], *, drop: tuple[str, ...] = ()) -> Path:
    """Lines (Athena names) as Parquet the way AWS writes it: real timestamps and doubles,
    maps as map<string,string>, every other column a string; `drop` leaves columns out."""
    from datetime import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    names = [n for n in dict.fromkeys(k for line in lines for k in line) if n not in drop]
    arrays = {}
    for name in names:
        values = [line.get(name) for line in lines]
        if name in TIMESTAMPS:
            arrays[name] = pa.array(
                [datetime.fromisoformat(v) for v in values], pa.timestamp("ms", tz="UTC")
            )
        elif name in NUMBERS:
            arrays[name] = pa.array([float(v) if v else None for v in values], pa.float64())
        elif name in ("resource_tags", "product"):
            arrays[name] = pa.array(
                [list((v or {}).items()) for v in values], pa.map_(pa.string(), pa.string())
            )
        else:
            arrays[name] = pa.array([v if v else None for v in values], pa.string())
    pq.write_table(pa.table(arrays), path)
    return path


def write_cur2_csv(path: Path, lines: list[dict]) -> Path:
    """CUR 2.0 as gzip-less CSV: map columns serialised as JSON."""
    names = list(dict.fromkeys(k for line in lines for k in line))
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=names)
        writer.writeheader()
        for line in lines:
            writer.writerow(
                {
                    name: json.dumps(line[name])
                    if isinstance(line.get(name), dict)
                    else line.get(name, "")
                    for name in names
                }
            )
    return path
