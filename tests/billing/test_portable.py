"""The portable path: plain INSERTs where there is no COPY. On PostgreSQL it must store exactly
what COPY stores; on SQLite (the demo's database) the command must load, total and refuse alike."""

import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from apps.billing import importing, loader
from apps.billing.models import CostLineItem, DailyCost, DailyResourceCost, Delivery
from apps.experiments.models import ExperimentResource

from .conftest import focus_line, run_import, write_focus

ROOT = Path(__file__).resolve().parents[2]


def lines():
    return [
        focus_line(
            Tags='{"project": "vision", "run-id": "run-17"}',
            EffectiveCost="32.7726",
            BilledCost="32.7726",
            x_UsageType="BoxUsage:p4d.24xlarge",
        ),
        focus_line(
            ResourceId="i-shared", EffectiveCost="1.000000000000001", BilledCost="1.000000000000001"
        ),
        focus_line(
            Tags='{"project": "nlp"}',
            ServiceCategory="Storage",
            ResourceId="bucket",
            EffectiveCost="0.123456789012345",
            BilledCost="0.123456789012345",
            ChargePeriodStart="2025-01-03 04:00:00",
            ChargePeriodEnd="2025-01-03 05:00:00",
        ),
        focus_line(BillingCurrency="EUR", EffectiveCost="2.5", BilledCost="2.5"),
    ]


def stored() -> list:
    fields = [
        f.column
        for f in CostLineItem._meta.concrete_fields
        if f.column not in ("id", "delivery_id")
    ]
    return sorted(CostLineItem.objects.values_list(*fields), key=lambda row: str(row))


def rollups() -> list:
    return sorted(
        (
            str(row)
            for row in DailyCost.objects.values_list(
                "day",
                "project_id",
                "experiment_id",
                "workload",
                "cost_kind",
                "billing_currency",
                "effective_cost",
                "billed_cost",
                "list_cost",
                "consumed_hours",
                "line_items",
            )
        ),
    ) + sorted(
        str(row)
        for row in DailyResourceCost.objects.values_list(
            "day", "resource_id", "experiment_id", "effective_cost", "line_items"
        )
    )


@pytest.mark.django_db(databases=["default", "progress"])
def test_inserts_store_exactly_what_copy_stores(acme, tmp_path, monkeypatch):
    ExperimentResource.objects.create(experiment=acme.resnet, resource_id="i-shared")
    ExperimentResource.objects.create(experiment=acme.evaluation, resource_id="i-shared")
    path = write_focus(tmp_path / "january.csv", lines())
    run_import(path)
    by_copy = stored(), rollups()
    for model in (CostLineItem, DailyCost, DailyResourceCost, Delivery):
        model.objects.all().delete()
    monkeypatch.setattr(loader.LineSink, "for_connection", staticmethod(loader.InsertLineSink))
    monkeypatch.setattr(loader.connection, "vendor", "sqlite", raising=False)
    # The vendor is faked for the line sink alone: the storage page's rollups are summed in SQL
    # written for the real one (SQLite's TOTAL() is no PostgreSQL function).
    monkeypatch.setattr(importing, "storage_summary_rebuild", lambda **_: None)

    run = run_import(path)

    monkeypatch.undo()
    assert run.status == "succeeded"
    assert (stored(), rollups()) == by_copy
    assert len(by_copy[0]) == 5


def manage(*args, database: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{database}",
        "CELERY_TASK_ALWAYS_EAGER": "true",
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_command_loads_totals_and_refuses_alike_on_sqlite(tmp_path, sqlite_database):
    database = sqlite_database
    good = write_focus(tmp_path / "january.csv", lines())
    bad = write_focus(tmp_path / "bad.csv", [focus_line(EffectiveCost="1,5")])

    first = manage("import_billing", str(good), "--json", database=database)
    again = manage("import_billing", str(good), "--json", database=database)
    refused = manage("import_billing", str(bad), "--json", database=database)

    assert first.returncode == 0, first.stderr
    loaded = json.loads(first.stdout)
    assert (loaded["status"], loaded["rows"], loaded["line_items"]) == ("succeeded", 4, 4)
    assert loaded["effective_cost"] == {"EUR": "2.50", "USD": "33.896056789012346"}
    assert loaded["billed_cost"] == {"EUR": "2.50", "USD": "33.896056789012346"}
    assert json.loads(again.stdout)["status"] == "unchanged"
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["error"] == (
        "bad.csv: row 2, column EffectiveCost: '1,5' is not a decimal number"
    )
    totals = manage(
        "shell",
        "--verbosity",
        "0",
        "-c",
        "from django.db.models import Sum; from apps.billing.models import DailyCost as D; "
        "print(D.objects.filter(billing_currency='USD').aggregate(s=Sum('effective_cost'))['s'],"
        " D.objects.aggregate(n=Sum('line_items'))['n'])",
        database=database,
    )
    # SQLite keeps decimals as floats (about 15 significant digits): exact to far below a cent.
    total, count = totals.stdout.split()
    assert (Decimal(total).quantize(Decimal("0.000000001")), count) == (
        Decimal("33.896056789"),
        "4",
    )
