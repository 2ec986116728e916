"""GCP's BigQuery billing export as CSV: dotted columns, nested fields as Python literals or
JSON, each credit its own line so that net cost adds up, spot from the SKU description."""

import csv
import gzip
import json
from decimal import Decimal

import pytest

from apps.billing.models import CostLineItem, Delivery, ImportRun

from ..conftest import run_import
from .cur import by_project, by_workload

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

COLUMNS = [
    "billing_account_id",
    "service.id",
    "service.description",
    "sku.id",
    "sku.description",
    "usage_start_time",
    "usage_end_time",
    "project.id",
    "project.name",
    "project.labels",
    "labels",
    "system_labels",
    "location.region",
    "location.zone",
    "cost",
    "currency",
    "usage.amount",
    "usage.unit",
    "usage.amount_in_pricing_units",
    "usage.pricing_unit",
    "credits",
    "invoice.month",
    "cost_type",
    "cost_at_list",
]
ACCOUNT = "01A2B3-C4D5E6-F7A8B9"


def gcp_row(**values) -> dict:
    row = {
        "billing_account_id": ACCOUNT,
        "service.id": "6F81-5844-456A",
        "service.description": "Compute Engine",
        "sku.id": "039F-D0DA-4055",
        "sku.description": "Nvidia Tesla A100 GPU running in Americas",
        "usage_start_time": "2025-01-02 10:00:00+00:00",
        "usage_end_time": "2025-01-02 11:00:00+00:00",
        "project.id": "acme-ml",
        "project.name": "acme-ml",
        "project.labels": "[]",
        "labels": "[]",
        "system_labels": "[]",
        "location.region": "us-central1",
        "location.zone": "us-central1-a",
        "currency": "USD",
        "usage.amount": "3600.0",
        "usage.unit": "seconds",
        "usage.amount_in_pricing_units": "1.0",
        "usage.pricing_unit": "hour",
        "credits": "[]",
        "invoice.month": "202501",
        "cost_type": "regular",
    }
    row.update(values)
    return row


def gcp_rows() -> list[dict]:
    return [
        # 2: A100 training hours with a committed-use and a sustained-use credit (Python repr)
        gcp_row(
            labels="[{'key': 'project', 'value': 'vision'}, {'key': 'run-id', 'value': 'run-17'}]",
            system_labels=(
                "[{'key': 'compute.googleapis.com/machine_spec', 'value': 'a2-highgpu-1g'}]"
            ),
            cost="29.38",
            credits=(
                "[{'name': 'Committed use discount', 'amount': -8.8, 'full_name': None, "
                "'id': 'cud-1', 'type': 'COMMITTED_USAGE_DISCOUNT'}, "
                "{'name': 'Sustained use discount', 'amount': -1.5, 'full_name': None, "
                "'id': 'sud-1', 'type': 'SUSTAINED_USAGE_DISCOUNT'}]"
            ),
        ),
        # 3: a spot GPU, labels written as JSON
        gcp_row(
            **{"sku.description": "Nvidia Tesla T4 GPU attached to Spot Preemptible VMs"},
            labels='[{"key": "project", "value": "nlp"}]',
            cost="0.11",
        ),
        # 4: storage labelled through its project, wholly covered by the free tier
        gcp_row(
            **{
                "service.description": "Cloud Storage",
                "sku.description": "Standard Storage US Multi-region",
                "project.labels": "[{'key': 'project', 'value': 'search'}]",
            },
            cost="2.5e-05",
            credits="[{'name': 'FreeTier', 'amount': -2.5e-05, 'type': 'FREE_TIER'}]",
        ),
        # 5: tax
        gcp_row(cost_type="tax", cost="3.10", **{"sku.description": "Tax"}),
    ]


def write_gcp(path, rows, *, columns=COLUMNS):
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({name: row.get(name, "") for name in columns})
    return path


def test_a_gcp_csv_export_loads_to_net_cost_with_a_line_per_credit(acme, tmp_path):
    run = run_import(write_gcp(tmp_path / "gcp.csv", gcp_rows()))

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.format == "gcp"
    assert run.billed_cost == {"USD": "22.29"}
    assert run.effective_cost == {"USD": "22.29"}
    assert CostLineItem.objects.count() == 7
    assert by_project() == {
        "vision": (Decimal("19.08"), Decimal("19.08")),
        "nlp": (Decimal("0.11"), Decimal("0.11")),
        "search": (Decimal("0"), Decimal("0")),
        None: (Decimal("3.10"), Decimal("3.10")),
    }
    assert by_workload() == {
        "training": Decimal("19.08"),
        "other": Decimal("0.11"),
        "storage": Decimal("0"),
        "unattributed": Decimal("3.10"),
    }
    delivery = Delivery.objects.get()
    assert delivery.billing_account_id == ACCOUNT
    assert delivery.provider_name == "Google Cloud"
    assert delivery.billing_period_start.isoformat() == "2025-01-01T00:00:00+00:00"
    assert delivery.billing_period_end.isoformat() == "2025-02-01T00:00:00+00:00"


def test_credits_are_lines_of_their_own_on_the_row_they_came_from(acme, tmp_path):
    run_import(write_gcp(tmp_path / "gcp.csv", gcp_rows()))

    lines = [
        (line.source_row, line.charge_category, str(line.billed_cost.normalize()), line.cost_kind)
        for line in CostLineItem.objects.order_by("source_row", "-billed_cost")
    ]
    assert lines == [
        (2, "Usage", "29.38", "gpu_compute"),
        (2, "Credit", "-1.5", "gpu_compute"),
        (2, "Credit", "-8.8", "gpu_compute"),
        (3, "Usage", "0.11", "cpu_compute"),
        (4, "Usage", "0.000025", "storage"),
        (4, "Credit", "-0.000025", "storage"),
        (5, "Tax", "3.1", "cpu_compute"),
    ]
    spot = CostLineItem.objects.get(source_row=3)
    assert spot.pricing_category == "Dynamic"
    assert spot.tags == {"project": "nlp"}
    credit = CostLineItem.objects.get(source_row=2, billed_cost=Decimal("-8.8"))
    assert credit.charge_description == "Committed use discount"


def test_the_same_gcp_export_again_is_unchanged_and_a_newer_one_restates(acme, tmp_path):
    first = write_gcp(tmp_path / "v1.csv", gcp_rows())
    run_import(first)
    assert run_import(first).status == ImportRun.Status.UNCHANGED

    run = run_import(write_gcp(tmp_path / "v2.csv", gcp_rows()[1:]))

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.billed_cost == {"USD": "3.21"}
    assert Delivery.objects.filter(status="current").count() == 1
    assert CostLineItem.objects.count() == 4


def test_a_credits_field_that_is_neither_json_nor_a_literal_is_named(acme, tmp_path):
    rows = gcp_rows()
    rows[2]["credits"] = "[{'name': 'FreeTier', 'amount': -2.5e-05"

    run = run_import(write_gcp(tmp_path / "gcp.csv", rows))

    assert run.status == ImportRun.Status.FAILED
    assert run.error == (
        "gcp.csv: row 4, column credits: \"[{'name': 'FreeTier', 'amount': -2.5e-05\" is not "
        "a list of records written as JSON or as a Python literal"
    )
    assert CostLineItem.objects.count() == 0


def test_labels_that_are_no_list_are_named(acme, tmp_path):
    rows = gcp_rows()
    rows[1]["labels"] = "1"  # found by tests/billing/test_import_fuzz.py: it crashed the import

    run = run_import(write_gcp(tmp_path / "gcp.csv", rows))

    assert run.status == ImportRun.Status.FAILED
    assert run.error == (
        "gcp.csv: row 3, column labels: '1' is not a list of labels, each with a key and a value"
    )
    assert CostLineItem.objects.count() == 0


def test_labels_written_as_an_object_are_read_as_keys_and_values(acme, tmp_path):
    rows = gcp_rows()
    rows[1]["labels"] = '{"project": "nlp", "stage": null}'

    run = run_import(write_gcp(tmp_path / "gcp.csv", rows))

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    tags = CostLineItem.objects.filter(source_row=3).values_list("tags", flat=True).get()
    assert tags == {"project": "nlp", "stage": ""}


def test_a_bad_invoice_month_and_a_bad_cost_are_named_by_row_and_column(acme, tmp_path):
    rows = gcp_rows()
    rows[3]["invoice.month"] = "2025-01"
    assert run_import(write_gcp(tmp_path / "a.csv", rows)).error == (
        "a.csv: row 5, column invoice.month: '2025-01' is not a month such as 202501"
    )
    rows = gcp_rows()
    rows[1]["cost"] = "0,11"
    assert run_import(write_gcp(tmp_path / "b.csv", rows)).error == (
        "b.csv: row 3, column cost: '0,11' is not a decimal number"
    )


def test_a_gcp_export_without_invoice_month_names_it(acme, tmp_path):
    columns = [c for c in COLUMNS if c != "invoice.month"]

    run = run_import(write_gcp(tmp_path / "gcp.csv", gcp_rows(), columns=columns))

    assert run.error == "gcp.csv: missing mandatory GCP billing export column invoice.month"


def ndjson_record(row: dict) -> dict:
    """A CSV fixture row as BigQuery writes it to newline-delimited JSON: nested records,
    repeated fields as lists, numbers as numbers."""
    import ast

    record: dict = {}
    for name, value in row.items():
        if name in ("labels", "system_labels", "credits", "project.labels"):
            value = ast.literal_eval(value) if value.startswith("[{'") else json.loads(value)
        elif name in ("cost", "usage.amount", "usage.amount_in_pricing_units"):
            value = float(value)
        parent, _, child = name.partition(".")
        if child:
            record.setdefault(parent, {})[child] = value
        else:
            record[name] = value
    return record


def test_a_gcp_ndjson_export_loads_to_the_same_totals_as_its_csv(acme, tmp_path):
    path = tmp_path / "gcp.json"
    path.write_text("".join(json.dumps(ndjson_record(row)) + "\n" for row in gcp_rows()))

    run = run_import(path)

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.format == "gcp"
    assert run.billed_cost == {"USD": "22.29"}
    assert CostLineItem.objects.count() == 7
    assert by_project()["vision"] == (Decimal("19.08"), Decimal("19.08"))
    assert CostLineItem.objects.get(source_row=2, charge_category="Usage").tags == {
        "project": "nlp"
    }


def test_a_gzip_ndjson_row_with_a_bad_cost_is_named_by_its_line(acme, tmp_path):
    rows = [ndjson_record(row) for row in gcp_rows()]
    rows[2]["cost"] = "lots"
    path = tmp_path / "gcp.json.gz"
    with gzip.open(path, "wt") as handle:
        handle.write("".join(json.dumps(row) + "\n" for row in rows))

    run = run_import(path)

    assert run.status == ImportRun.Status.FAILED
    assert run.error == "gcp.json.gz: row 3, column cost: 'lots' is not a decimal number"
