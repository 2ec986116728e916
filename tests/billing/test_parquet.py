"""Parquet input: typed columns (timestamps, decimals, floats, a map of tags) or all text, loaded
exactly like the same lines in CSV."""

import json
from datetime import datetime
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from apps.billing.models import CostLineItem, DailyCost, DailyResourceCost, Delivery
from apps.spend.selectors import spend_totals

from .conftest import COLUMNS, focus_line, run_import, write_focus

pytestmark = pytest.mark.django_db(databases=["default", "progress"])

LINES = [
    focus_line(
        Tags='{"project": "vision", "run-id": "run-17"}',
        EffectiveCost="32.7726",
        BilledCost="32.7726",
        ConsumedQuantity="1",
        ConsumedUnit="Hours",
    ),
    focus_line(
        Tags='{"project": "nlp"}',
        ServiceCategory="Storage",
        EffectiveCost="0.000000123456789",
        BilledCost="0.000000123456789",
        ConsumedQuantity="12.5",
        ConsumedUnit="GB-Hours",
        ChargePeriodStart="2025-01-03T04:00:00Z",
        ChargePeriodEnd="2025-01-03T05:00:00Z",
    ),
    focus_line(
        EffectiveCost="-1.25",
        BilledCost="-1.25",
        ChargeCategory="Credit",
        ConsumedQuantity="0.1",
        ConsumedUnit="Hours",
    ),
]
MONEY = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost")
TIMES = ("BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd")


def typed_table() -> pa.Table:
    """What a Parquet exporter writes: real timestamps and decimals, floats, tags as a map."""
    arrays = {}
    for name in COLUMNS:
        values = [line.get(name) or None for line in LINES]
        if name in MONEY:
            arrays[name] = pa.array([Decimal(v) for v in values], pa.decimal128(38, 18))
        elif name in TIMES:
            arrays[name] = pa.array(
                [datetime.fromisoformat(v.replace("Z", "+00:00")) for v in values],
                pa.timestamp("ms", tz="UTC"),
            )
        elif name == "ConsumedQuantity":
            arrays[name] = pa.array([float(v) for v in values], pa.float64())
        elif name == "Tags":
            arrays[name] = pa.array(
                [list(json.loads(v).items()) if v else None for v in values],
                pa.map_(pa.string(), pa.string()),
            )
        else:
            arrays[name] = pa.array(values, pa.string())
    return pa.table(arrays)


def totals():
    return {
        t.key: (t.effective_cost, t.billed_cost)
        for t in spend_totals(by=("project_id", "workload"))
    }


def line_values():
    return list(
        CostLineItem.objects.order_by("source_row").values_list(
            "source_row",
            "charge_period_start",
            "effective_cost",
            "billed_cost",
            "consumed_quantity",
            "project_id",
            "experiment_id",
            "workload",
            "tags",
        )
    )


def test_a_typed_parquet_file_loads_the_same_as_its_csv(acme, tmp_path):
    run_import(write_focus(tmp_path / "lines.csv", LINES))
    from_csv = (totals(), line_values())
    for model in (CostLineItem, DailyCost, DailyResourceCost, Delivery):
        model.objects.all().delete()
    path = tmp_path / "lines.parquet"
    pq.write_table(typed_table(), path)

    run = run_import(path)

    assert run.status == "succeeded", run.error
    assert (totals(), line_values()) == from_csv
    assert run.effective_cost == {"USD": "31.522600123456789"}
    assert run.rows_total == 3


def test_a_parquet_file_of_text_columns_loads(acme, tmp_path):
    table = pa.table(
        {
            name: pa.array([line.get(name) or None for line in LINES], pa.string())
            for name in COLUMNS
        }
    )
    path = tmp_path / "text.parquet"
    pq.write_table(table, path)

    run = run_import(path)

    assert run.status == "succeeded", run.error
    assert run.billed_cost == {"USD": "31.522600123456789"}
    assert CostLineItem.objects.get(source_row=2).experiment_id == acme.resnet.pk


def test_a_parquet_value_that_is_no_date_names_its_row(acme, tmp_path):
    table = pa.table(
        {
            name: pa.array([line.get(name) or None for line in LINES], pa.string())
            for name in COLUMNS
        }
    )
    table = table.set_column(
        COLUMNS.index("ChargePeriodEnd"),
        "ChargePeriodEnd",
        pa.array(["2025-01-02T11:00:00Z", "soon", "2025-01-02T11:00:00Z"]),
    )
    path = tmp_path / "bad.parquet"
    pq.write_table(table, path)

    run = run_import(path)

    assert run.error == (
        "bad.parquet: row 3, column ChargePeriodEnd: 'soon' is not a date and time such as "
        "2025-01-31T00:00:00Z"
    )
    assert CostLineItem.objects.count() == 0
