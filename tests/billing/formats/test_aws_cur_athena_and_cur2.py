"""The Athena/Parquet flavour of CUR (columns come and go: a missing one is null) and CUR 2.0
(map columns for tags and product), as Parquet and as CSV, to the same totals as legacy CUR."""

from decimal import Decimal

import pytest

from apps.billing.models import CostLineItem, Delivery, ImportRun
from apps.projects.models import TagKeyAlias

from ..conftest import run_import
from .cur import (
    BILLED,
    BY_PROJECT,
    EFFECTIVE,
    WORKLOADS,
    athena_lines,
    by_project,
    by_workload,
    cur2_lines,
    cur_line,
    cur_lines,
    write_cur2_csv,
    write_parquet,
)

pytestmark = pytest.mark.django_db(databases=["default", "progress"])


@pytest.fixture(autouse=True)
def cur_run_key(acme):
    TagKeyAlias.objects.create(dimension=TagKeyAlias.Dimension.EXPERIMENT, key="user:run-id")


def test_an_athena_parquet_cur_loads_to_exact_totals(acme, tmp_path):
    run = run_import(write_parquet(tmp_path / "cur.parquet", athena_lines(cur_lines())))

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.format == "aws-cur-parquet"
    assert run.billed_cost == {"USD": str(BILLED)}
    assert run.effective_cost == {"USD": str(EFFECTIVE)}
    assert by_project() == BY_PROJECT
    assert by_workload() == WORKLOADS
    spot = CostLineItem.objects.get(source_row=9)
    assert spot.pricing_category == "Dynamic"
    assert spot.cost_kind == "gpu_compute"
    assert CostLineItem.objects.get(source_row=2).tags == {
        "user:project": "vision",
        "user:run-id": "run-17",
    }


def test_a_month_without_savings_plan_columns_reads_them_as_null(acme, tmp_path):
    lines = [cur_lines()[i] for i in (0, 1, 6, 7, 8)]  # no savings-plan lines that month
    path = write_parquet(
        tmp_path / "cur.parquet",
        athena_lines(lines),
        drop=(
            "savings_plan_savings_plan_a_r_n",
            "savings_plan_savings_plan_effective_cost",
            "savings_plan_total_commitment_to_date",
            "savings_plan_used_commitment",
            "resource_tags_aws_createdby",
            "product_gpu",
        ),
    )

    run = run_import(path)

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.billed_cost == {"USD": "1240.5226"}
    assert run.effective_cost == {"USD": "41.4226"}


def test_savings_plan_usage_in_a_month_without_its_column_is_named(acme, tmp_path):
    path = write_parquet(
        tmp_path / "cur.parquet",
        athena_lines(cur_lines()),
        drop=("savings_plan_savings_plan_effective_cost",),
    )

    run = run_import(path)

    assert run.status == ImportRun.Status.FAILED
    assert run.error == (
        "cur.parquet: row 4, column savings_plan_savings_plan_effective_cost: "
        "empty, but a decimal number is required"
    )
    assert CostLineItem.objects.count() == 0


def test_the_same_parquet_again_is_unchanged_and_a_restatement_replaces_it(acme, tmp_path):
    first = write_parquet(tmp_path / "v1.parquet", athena_lines(cur_lines()))
    run_import(first)
    assert run_import(first).status == ImportRun.Status.UNCHANGED

    restated = athena_lines(
        [cur_line(lineItem__UnblendedCost="2.50", resourceTags__user_project="nlp")]
    )
    run = run_import(write_parquet(tmp_path / "v2.parquet", restated))

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert by_project() == {"nlp": (Decimal("2.5"), Decimal("2.5"))}
    assert Delivery.objects.filter(status="replaced").count() == 1


@pytest.mark.parametrize("flavour", ["parquet", "csv"])
def test_a_cur2_export_reads_tags_and_product_from_its_maps(acme, tmp_path, flavour):
    lines = cur2_lines(cur_lines())
    if flavour == "parquet":
        path = write_parquet(tmp_path / "cur2.parquet", lines)
    else:
        path = write_cur2_csv(tmp_path / "cur2.csv", lines)

    run = run_import(path)

    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.format == "aws-cur2"
    assert run.results[0]["format_version"] == "2.0"
    assert run.billed_cost == {"USD": str(BILLED)}
    assert run.effective_cost == {"USD": str(EFFECTIVE)}
    assert by_project() == BY_PROJECT
    assert by_workload() == WORKLOADS
    training = CostLineItem.objects.get(source_row=2)
    assert training.gpu_count == 8
    assert training.service_name == "Amazon Elastic Compute Cloud"
    assert CostLineItem.objects.get(source_row=12).tags == {
        "user:project": "search",
        "aws:createdby": "IAMUser:AIDA:ci",
    }


def test_a_cur2_csv_whose_tag_map_is_not_json_names_row_and_column(acme, tmp_path):
    path = write_cur2_csv(tmp_path / "cur2.csv", cur2_lines(cur_lines()))
    text = path.read_text().replace('"{""user_project"": ""nlp""}"', '"{user_project: nlp}"', 1)
    path.write_text(text)

    run = run_import(path)

    assert run.status == ImportRun.Status.FAILED
    assert run.error == (
        "cur2.csv: row 3, column resource_tags: '{user_project: nlp}' is not a JSON object "
        "(Expecting property name enclosed in double quotes at character 2)"
    )
