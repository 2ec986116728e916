"""Azure cost exports, EA (PascalCase) and MCA (camelCase), amortised and actual: byte-order
mark, US dates, EA tags without braces, pack sizes, spot meters, the billing profile as the
MCA's billing account."""

import csv
import json
from decimal import Decimal

import pytest

from apps.billing.models import CostLineItem, Delivery, ImportRun

from ..conftest import run_import
from .cur import by_project, by_workload

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

EA_COLUMNS = [
    "BillingAccountId",
    "BillingAccountName",
    "BillingPeriodStartDate",
    "BillingPeriodEndDate",
    "BillingProfileId",
    "SubscriptionId",
    "SubscriptionName",
    "Date",
    "MeterId",
    "MeterCategory",
    "MeterSubCategory",
    "MeterName",
    "Quantity",
    "Cost",
    "BillingCurrency",
    "ResourceLocation",
    "ResourceId",
    "ResourceName",
    "AdditionalInfo",
    "Tags",
    "UnitOfMeasure",
    "ResourceGroup",
    "ReservationId",
    "ReservationName",
    "ChargeType",
    "Frequency",
    "PricingModel",
]
VM = "/subscriptions/sub-1/resourceGroups/ML/providers/Microsoft.Compute/virtualMachines/train-1"


def ea_row(**values) -> dict:
    row = {
        "BillingAccountId": "8611537",
        "BillingAccountName": "Acme EA",
        "BillingPeriodStartDate": "01/01/2025",
        "BillingPeriodEndDate": "01/31/2025",
        "BillingProfileId": "8611537",
        "SubscriptionId": "sub-1",
        "SubscriptionName": "ml-prod",
        "Date": "01/02/2025",
        "MeterId": "meter-1",
        "MeterCategory": "Virtual Machines",
        "MeterSubCategory": "NC A100 v4 Series",
        "MeterName": "NC24ads A100 v4",
        "Quantity": "10",
        "BillingCurrency": "USD",
        "ResourceLocation": "eastus",
        "UnitOfMeasure": "1 Hour",
        "ResourceGroup": "ML",
        "ChargeType": "Usage",
        "Frequency": "UsageBased",
        "PricingModel": "OnDemand",
    }
    row.update(values)
    return row


def ea_rows() -> list[dict]:
    """An amortised export."""
    return [
        # 2: A100 training hours, tagged the EA way (no braces)
        ea_row(
            Cost="36.73",
            ResourceId=VM,
            AdditionalInfo='{"ServiceType": "Standard_NC24ads_A100_v4", "VCPUs": 24}',
            Tags='"project": "vision","run-id": "run-17"',
        ),
        # 3: a spot VM, known by its meter name
        ea_row(
            Cost="0.25",
            MeterSubCategory="NCasT4_v3 Series",
            MeterName="NC4as T4 v3 Spot",
            PricingModel="Spot",
            Tags='"project": "nlp"',
        ),
        # 4: reservation-covered usage, its share of the reservation amortised in
        ea_row(
            Cost="12.00",
            PricingModel="Reservation",
            ReservationId="res-1",
            ReservationName="a100-1y",
            ResourceId=VM.replace("resourceGroups", "resourcegroups").upper(),
            Tags='"project": "vision"',
        ),
        # 5: the part of the reservation nobody used
        ea_row(
            Cost="3.00",
            ChargeType="UnusedReservation",
            PricingModel="Reservation",
            ReservationId="res-1",
        ),
        # 6: storage transactions, priced per 10,000
        ea_row(
            Cost="0.004",
            MeterCategory="Storage",
            MeterSubCategory="Tables",
            MeterName="Write Operations",
            Quantity="25000",
            UnitOfMeasure="10K",
            Tags='"project": "search"',
        ),
        # 7: a refund
        ea_row(Cost="-1.50", ChargeType="Refund", Frequency="OneTime", Tags='"project": "vision"'),
    ]


MCA_NAMES = {
    "Cost": "costInBillingCurrency",
    "ResourceId": "InstanceName",
    "ResourceGroup": "resourceGroupName",
}


def mca_rows(rows: list[dict]) -> list[dict]:
    out = []
    for row in rows:
        mca = {}
        for name, value in row.items():
            if name == "PricingModel":
                continue  # MCA's cost details have no PricingModel
            if name == "Tags":
                value = "{" + value + "}"
            mca[MCA_NAMES.get(name, name[0].lower() + name[1:])] = value
        mca["billingProfileId"] = "BP-42"
        out.append(mca)
    return out


def write_azure(path, rows, *, columns=None):
    columns = columns or list(dict.fromkeys(name for row in rows for name in row))
    # Azure writes a byte-order mark.
    with open(path, "w", newline="", encoding="utf-8-sig") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({name: row.get(name, "") for name in columns})
    return path


BY_PROJECT = {
    "vision": (Decimal("47.23"), Decimal("47.23")),
    "nlp": (Decimal("0.25"), Decimal("0.25")),
    "search": (Decimal("0.004"), Decimal("0.004")),
    None: (Decimal("3.00"), Decimal("3.00")),
}


def test_an_amortised_ea_export_loads_to_exact_totals(acme, tmp_path):
    run = run_import(write_azure(tmp_path / "ea.csv", ea_rows(), columns=EA_COLUMNS))

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.format == "azure-ea"
    assert run.billed_cost == {"USD": "50.484"}
    assert run.effective_cost == {"USD": "50.484"}
    assert by_project() == BY_PROJECT
    assert by_workload() == {
        "training": Decimal("36.73"),
        "other": Decimal("10.75"),
        "storage": Decimal("0.004"),
        "unattributed": Decimal("3.00"),
    }
    delivery = Delivery.objects.get()
    assert delivery.billing_account_id == "8611537"
    assert delivery.provider_name == "Microsoft"
    assert delivery.billing_period_start.isoformat() == "2025-01-01T00:00:00+00:00"
    assert delivery.billing_period_end.isoformat() == "2025-02-01T00:00:00+00:00"


def test_ea_lines_read_dates_packs_spot_and_vm_sizes(acme, tmp_path):
    run_import(write_azure(tmp_path / "ea.csv", ea_rows(), columns=EA_COLUMNS))

    lines = {line.source_row: line for line in CostLineItem.objects.all()}
    training = lines[2]
    assert training.charge_period_start.isoformat() == "2025-01-02T00:00:00+00:00"
    assert training.charge_period_end.isoformat() == "2025-01-03T00:00:00+00:00"
    assert training.cost_kind == "gpu_compute"
    assert training.instance_type == "Standard_NC24ads_A100_v4"
    assert training.consumed_unit == "Hour"
    assert training.tags == {"project": "vision", "run-id": "run-17"}
    assert training.experiment == acme.resnet
    assert lines[4].resource_id == VM.lower()
    assert [lines[n].pricing_category for n in (2, 3, 4, 5)] == [
        "Standard",
        "Dynamic",
        "Committed",
        "Committed",
    ]
    # The unused part of the reservation is FOCUS's Unused commitment (the others say nothing).
    assert [lines[n].commitment_discount_status for n in (2, 4, 5)] == ["", "", "Unused"]
    assert lines[5].commitment_discount_id == "res-1"
    assert lines[6].pricing_quantity == Decimal("2.5")
    assert lines[6].consumed_quantity == Decimal("25000")
    assert lines[6].pricing_unit == "Units"
    assert lines[7].charge_category == "Credit"


def test_an_actual_ea_export_shows_the_reservation_purchase_in_full(acme, tmp_path):
    rows = ea_rows()
    rows[2]["Cost"] = "0"  # covered usage costs nothing in an actual export
    rows[3] = ea_row(
        Cost="365.00",
        ChargeType="Purchase",
        Frequency="OneTime",
        PricingModel="Reservation",
        ReservationId="res-1",
        MeterCategory="Virtual Machines",
    )

    run = run_import(write_azure(tmp_path / "ea-actual.csv", rows, columns=EA_COLUMNS))

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.billed_cost == {"USD": "400.484"}
    assert CostLineItem.objects.get(source_row=5).charge_category == "Purchase"


def test_an_mca_export_is_keyed_by_its_billing_profile(acme, tmp_path):
    run = run_import(write_azure(tmp_path / "mca.csv", mca_rows(ea_rows())))

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.format == "azure-mca"
    assert run.billed_cost == {"USD": "50.484"}
    assert by_project() == BY_PROJECT
    assert Delivery.objects.get().billing_account_id == "BP-42"
    assert CostLineItem.objects.get(source_row=3).pricing_category == "Dynamic"
    assert CostLineItem.objects.get(source_row=2).tags == {"project": "vision", "run-id": "run-17"}


@pytest.mark.parametrize("dialect", ["ea", "mca"])
def test_the_same_azure_export_again_is_unchanged_and_a_newer_one_restates(acme, tmp_path, dialect):
    def write(name, rows):
        if dialect == "mca":
            return write_azure(tmp_path / name, mca_rows(rows))
        return write_azure(tmp_path / name, rows, columns=EA_COLUMNS)

    first = write("v1.csv", ea_rows())
    run_import(first)
    assert run_import(first).status == ImportRun.Status.UNCHANGED

    run = run_import(write("v2.csv", ea_rows()[:2]))

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.billed_cost == {"USD": "36.98"}
    assert Delivery.objects.filter(status="current").count() == 1
    assert CostLineItem.objects.count() == 2


def test_a_day_month_date_is_named_by_row_and_column(acme, tmp_path):
    rows = ea_rows()
    rows[3]["Date"] = "31/01/2025"

    run = run_import(write_azure(tmp_path / "ea.csv", rows, columns=EA_COLUMNS))

    assert run.status == ImportRun.Status.FAILED
    assert run.error == "ea.csv: row 5, column Date: '31/01/2025' is not a date such as 01/31/2025"
    assert CostLineItem.objects.count() == 0


def test_broken_ea_tags_and_an_unknown_charge_type_are_named(acme, tmp_path):
    rows = ea_rows()
    rows[1]["Tags"] = '"project": nlp'
    error = run_import(write_azure(tmp_path / "a.csv", rows, columns=EA_COLUMNS)).error
    assert error.startswith("a.csv: row 3, column Tags: '{\"project\": nlp}' is not a JSON object")

    rows = ea_rows()
    rows[4]["ChargeType"] = "Gift"
    error = run_import(write_azure(tmp_path / "b.csv", rows, columns=EA_COLUMNS)).error
    assert error == (
        "b.csv: row 6, column ChargeType: 'Gift' is not a charge type "
        "(Adjustment, Credit, Purchase, Tax, Usage)"
    )


def test_an_mca_export_without_its_cost_column_names_it(acme, tmp_path):
    rows = [
        {k: v for k, v in row.items() if k != "costInBillingCurrency"}
        for row in mca_rows(ea_rows())
    ]
    rows[0]["costInUsd"] = "1"
    path = write_azure(tmp_path / "mca.csv", rows)

    run = run_import(path, requested_format="azure-mca")

    assert (
        run.error == "mca.csv: missing mandatory Azure MCA cost export column costInBillingCurrency"
    )
    assert json.loads(json.dumps(run.results))[0]["format"] == "azure-mca"
