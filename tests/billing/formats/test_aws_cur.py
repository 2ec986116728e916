"""Legacy AWS CUR as CSV: plain, gzip and a manifest's multi-part delivery, through the same
pipeline as FOCUS, with the CUDOS amortised cost, spot, tags and the payer as billing account."""

import json
from decimal import Decimal

import pytest

from apps.billing.models import CostLineItem, Delivery, ImportRun
from apps.projects.models import TagKeyAlias

from ..conftest import run_import
from .cur import (
    BILLED,
    BY_PROJECT,
    EFFECTIVE,
    LEGACY_COLUMNS,
    PAYER,
    WORKLOADS,
    by_project,
    by_workload,
    cur_line,
    cur_lines,
    write_cur,
    write_manifest,
)

pytestmark = pytest.mark.django_db(databases=["default", "progress"])


@pytest.fixture(autouse=True)
def cur_run_key(acme):
    """CUR spells user tags `user:<key>`; Acme names its run tag so for AWS."""
    TagKeyAlias.objects.create(dimension=TagKeyAlias.Dimension.EXPERIMENT, key="user:run-id")


def test_a_legacy_cur_csv_loads_to_exact_billed_and_amortised_totals(acme, tmp_path):
    run = run_import(write_cur(tmp_path / "cur.csv", cur_lines()))

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.format == "aws-cur"
    assert run.results[0]["format"] == "aws-cur"
    assert run.billed_cost == {"USD": str(BILLED)}
    assert run.effective_cost == {"USD": str(EFFECTIVE)}
    assert CostLineItem.objects.count() == 11
    assert by_project() == BY_PROJECT
    assert by_workload() == WORKLOADS


def test_each_cur_line_type_gets_its_cudos_spend_and_focus_category(acme, tmp_path):
    run_import(write_cur(tmp_path / "cur.csv", cur_lines()))

    lines = {line.source_row: line for line in CostLineItem.objects.order_by("source_row")}
    got = {
        row: (
            format(line.effective_cost.normalize(), "f"),
            line.charge_category,
            line.pricing_category,
        )
        for row, line in lines.items()
    }
    assert got == {
        2: ("32.7726", "Usage", "Standard"),
        3: ("0.9", "Usage", "Committed"),
        4: ("6.5", "Usage", "Committed"),
        5: ("0", "Usage", ""),
        6: ("20", "Purchase", ""),
        7: ("10", "Purchase", ""),
        8: ("0", "Purchase", ""),
        9: ("0.5", "Usage", "Dynamic"),
        10: ("7.25", "Tax", ""),
        11: ("-5", "Credit", ""),
        12: ("0.000012", "Usage", "Standard"),
    }
    assert lines[3].commitment_discount_id.endswith("ri-1")
    assert lines[2].cost_kind == "gpu_compute"
    assert lines[9].cost_kind == "gpu_compute"
    assert lines[12].cost_kind == "storage"
    assert lines[2].experiment == acme.resnet
    assert lines[12].tags == {"user:project": "search", "aws:createdBy": "IAMUser:AIDA:ci"}
    assert lines[9].extra == {
        "x_UsageType": "USE2-SpotUsage:g5.xlarge",
        "x_LineItemType": "Usage",
    }
    delivery = Delivery.objects.get()
    assert delivery.billing_account_id == PAYER
    assert delivery.provider_name == "AWS"
    assert delivery.format == "aws-cur"


def test_a_manifest_and_its_gzip_parts_load_as_one_delivery(acme, tmp_path):
    lines = cur_lines()
    manifest = write_manifest(tmp_path, [lines[:6], lines[6:]])

    run = run_import(manifest)

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert len(run.results) == 1
    assert run.results[0]["file"] == str(manifest)
    assert run.results[0]["rows"] == 11
    assert run.billed_cost == {"USD": str(BILLED)}
    assert run.effective_cost == {"USD": str(EFFECTIVE)}
    assert Delivery.objects.count() == 1
    assert by_project() == BY_PROJECT
    # Rows are numbered within their part.
    assert sorted(CostLineItem.objects.values_list("source_row", flat=True)) == sorted(
        [*range(2, 8), *range(2, 7)]
    )


def test_the_same_manifest_again_is_unchanged(acme, tmp_path):
    manifest = write_manifest(tmp_path, [cur_lines()[:6], cur_lines()[6:]])
    run_import(manifest)
    before = list(CostLineItem.objects.values_list("id", flat=True))

    again = run_import(manifest)

    assert again.status == ImportRun.Status.UNCHANGED
    assert again.results[0]["status"] == "unchanged"
    assert list(CostLineItem.objects.values_list("id", flat=True)) == before
    assert by_project() == BY_PROJECT


def test_a_restated_delivery_replaces_the_month_exactly(acme, tmp_path):
    (tmp_path / "v1").mkdir()
    first = write_manifest(tmp_path / "v1", [cur_lines()[:6], cur_lines()[6:]])
    run_import(first)
    restated = cur_lines()[:6] + [
        cur_line(lineItem__UnblendedCost="3.00", resourceTags__user_project="search")
    ]
    (tmp_path / "v2").mkdir()
    second = write_manifest(tmp_path / "v2", [restated[:3], restated[3:]])

    run = run_import(second)

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.results[0]["replaced"] == Delivery.objects.get(status="replaced").pk
    assert Delivery.objects.filter(status="current").count() == 1
    assert CostLineItem.objects.count() == 7
    assert by_project() == {
        "vision": (Decimal("39.2726"), Decimal("39.2726")),
        "nlp": (Decimal("0.9"), Decimal("0")),
        "search": (Decimal("3.00"), Decimal("3.00")),
        None: (Decimal("30.00"), Decimal("150.00")),
    }


def test_a_gzip_cur_without_a_manifest_is_one_delivery(acme, tmp_path):
    run = run_import(write_cur(tmp_path / "cur.csv.gz", cur_lines(), compress=True))

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.format == "aws-cur"
    assert run.billed_cost == {"USD": str(BILLED)}


def test_a_bad_cost_is_named_by_part_row_and_column_and_nothing_is_kept(acme, tmp_path):
    lines = cur_lines()
    lines[8]["lineItem/UnblendedCost"] = "7,25"
    manifest = write_manifest(tmp_path, [lines[:6], lines[6:]])

    run = run_import(manifest)

    assert run.status == ImportRun.Status.FAILED
    assert run.error == (
        "cur-00002.csv.gz: row 4, column lineItem/UnblendedCost: '7,25' is not a decimal number"
    )
    assert CostLineItem.objects.count() == 0
    assert Delivery.objects.count() == 0


def test_reserved_usage_without_its_amortised_cost_is_named_by_row_and_column(acme, tmp_path):
    lines = cur_lines()
    lines[1]["reservation/EffectiveCost"] = ""

    run = run_import(write_cur(tmp_path / "cur.csv", lines))

    assert run.status == ImportRun.Status.FAILED
    assert run.error == (
        "cur.csv: row 3, column reservation/EffectiveCost: empty, but a decimal number is required"
    )


def test_an_unused_commitment_fee_that_is_no_number_is_named(acme, tmp_path):
    lines = cur_lines()
    lines[4]["savingsPlan/UsedCommitment"] = "eighty"

    run = run_import(write_cur(tmp_path / "cur.csv", lines))

    assert run.error == (
        "cur.csv: row 6, column savingsPlan/UsedCommitment: 'eighty' is not a decimal number"
    )


def test_a_cur_without_the_payer_column_names_it(acme, tmp_path):
    columns = [c for c in LEGACY_COLUMNS if c != "bill/PayerAccountId"]

    run = run_import(write_cur(tmp_path / "cur.csv", cur_lines(), columns=columns))

    assert run.error == "cur.csv: missing mandatory AWS CUR column bill/PayerAccountId"


def test_a_manifest_whose_part_is_missing_names_it(acme, tmp_path):
    manifest = write_manifest(tmp_path, [cur_lines()[:6], cur_lines()[6:]])
    key = json.loads(manifest.read_text())["reportKeys"][1]
    (tmp_path / key).unlink()

    run = run_import(manifest)

    assert run.status == ImportRun.Status.FAILED
    assert run.error == (
        f"cur-Manifest.json: lists part {key!r}, which is not beside it (cur-00002.csv.gz)"
    )
