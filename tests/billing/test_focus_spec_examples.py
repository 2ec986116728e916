"""The FOCUS specification's own worked examples (FOCUS_Spec v1.2, CC BY 4.0), imported as given
and with the two Mandatory columns they leave out for brevity (BillingAccountId and
BillingCurrency, FOCUS 1.2 §BillingAccountId and §BillingCurrency) added back."""

import csv
from decimal import Decimal

import pytest

from apps.billing.models import CostLineItem, DailyCost, Delivery, ImportRun

from .conftest import SPEC_EXAMPLES, run_import, when

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

# file: (rows, billed cost, effective cost), summed by hand from the files.
EXAMPLES = {
    "commitment_discount_purchase_scenario_1.csv": (1, "8760.00", "0.00"),
    "commitment_discount_usage_scenario_1.csv": (1, "0.00", "1.00"),
    "commitment_discount_usage_scenario_2.csv": (1, "0.00", "1.00"),
    "commitment_discount_usage_scenario_3.csv": (2, "0.00", "1.00"),
    "commitment_discount_usage_scenario_4.csv": (2, "0.50", "1.50"),
    "one_hundred_percent_utilization_with_commitment_discount_flexibility_with_1_resource.csv": (
        3,
        "2.75",
        "2.75",
    ),
    "one_hundred_percent_utilization_with_commitment_discount_flexibility_with_2_resources.csv": (
        3,
        "2.00",
        "2.00",
    ),
    "one_hundred_percent_utilization_without_commitment_discount_flexibility.csv": (
        2,
        "1.50",
        "1.50",
    ),
    "zero_percent_utilization_without_commitment_discount_flexibility.csv": (3, "3.50", "3.50"),
}


def with_account_and_currency(source, target):
    """The example with BillingAccountId and BillingCurrency added, blank lines kept."""
    with source.open(newline="") as handle, target.open("w", newline="") as out:
        reader = csv.reader(handle)
        writer = csv.writer(out, lineterminator="\n")
        for number, row in enumerate(reader):
            if not row:
                writer.writerow([])
            elif number == 0:
                writer.writerow(["BillingAccountId", "BillingCurrency", *row])
            else:
                writer.writerow(["example-account", "USD", *row])
    return target


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_a_spec_example_as_published_is_rejected_for_its_missing_mandatory_columns(name):
    run = run_import(SPEC_EXAMPLES / name)

    assert run.status == ImportRun.Status.FAILED
    assert run.error == (
        f"{name}: missing mandatory FOCUS columns BillingAccountId, BillingCurrency"
    )
    assert CostLineItem.objects.count() == 0


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_a_spec_example_with_account_and_currency_loads_to_the_cent(name, tmp_path):
    rows, billed, effective = EXAMPLES[name]

    run = run_import(with_account_and_currency(SPEC_EXAMPLES / name, tmp_path / name))

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.results[0]["rows"] == rows
    assert run.billed_cost == {"USD": billed}
    assert run.effective_cost == {"USD": effective}
    assert CostLineItem.objects.count() == rows
    totals = [
        (row.billed_cost, row.effective_cost) for row in DailyCost.objects.filter(day="2023-01-01")
    ]
    assert sum(t[0] for t in totals) == Decimal(billed)
    assert sum(t[1] for t in totals) == Decimal(effective)
    delivery = Delivery.objects.get()
    assert delivery.billing_account_id == "example-account"
    assert delivery.billing_period_start == when("2023-01-01T00:00:00")
    assert delivery.billing_period_end == when("2023-02-01T00:00:00")
    assert delivery.format_version == "1.1"  # CommitmentDiscountQuantity came in 1.1


def test_a_spec_example_keeps_its_commitment_columns_and_reads_null_as_null(tmp_path):
    name = "commitment_discount_usage_scenario_3.csv"
    run_import(with_account_and_currency(SPEC_EXAMPLES / name, tmp_path / name))

    used, unused = CostLineItem.objects.order_by("source_row")
    assert (used.source_row, unused.source_row) == (2, 3)
    assert used.commitment_discount_id == "<my-commitment-discount-id>"
    assert used.commitment_discount_status == "Used"
    assert unused.commitment_discount_status == "Unused"
    assert used.pricing_category == "Committed"
    assert used.consumed_quantity == Decimal("1.00")
    assert unused.consumed_quantity is None  # the file says `null`
    assert unused.consumed_unit == ""
    assert used.commitment_discount_quantity == Decimal("0.75")


def test_a_spec_example_header_is_matched_without_case(tmp_path):
    # The examples spell `SkuPriceid`; FOCUS's column is SkuPriceId.
    name = (
        "one_hundred_percent_utilization_with_commitment_discount_flexibility_with_1_resource.csv"
    )
    run_import(with_account_and_currency(SPEC_EXAMPLES / name, tmp_path / name))

    assert list(
        CostLineItem.objects.order_by("source_row").values_list("sku_price_id", flat=True)
    ) == [
        "VM_SMALL_COMMITTED_PURCHASE_NO_UPFRONT",
        "VM_LARGE_COMMITTED_HOUR",
        "VM_LARGE_ON_DEMAND_HOUR",
    ]
    # Its rows are separated by blank lines: rows are records, so they are rows 2, 3 and 4.
    assert list(
        CostLineItem.objects.values_list("source_row", flat=True).order_by("source_row")
    ) == [
        2,
        3,
        4,
    ]
    # x_CommitmentDiscountUnitPrice is not among the provider columns costsite keeps.
    assert CostLineItem.objects.get(source_row=2).extra == {}


@pytest.mark.parametrize(
    ("name", "row"),
    [
        ("commitment_discount_purchase_scenario_2.csv", 4),
        ("commitment_discount_purchase_scenario_3.csv", 5),
    ],
)
def test_a_spec_example_with_an_impossible_hour_names_the_row_and_value(name, row, tmp_path):
    # The spec's example ends a charge period at hour 30: no importer can know what was meant.
    run = run_import(with_account_and_currency(SPEC_EXAMPLES / name, tmp_path / name))

    assert run.status == ImportRun.Status.FAILED
    assert run.error == (
        f"{name}: row {row}, column ChargePeriodEnd: '2023-02-01T30:00:00Z' is not a date and "
        "time such as 2025-01-31T00:00:00Z"
    )
    assert CostLineItem.objects.count() == 0
    assert Delivery.objects.count() == 0
