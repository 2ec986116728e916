"""A real Celery worker on Redis runs an import end to end; a worker killed mid-load leaves
nothing half loaded, and the run can be claimed again once its heartbeat is stale."""

import csv
import os
import signal
import time
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db.models import Sum
from django.utils import timezone

from apps.billing.models import CostLineItem, Delivery, ImportRun
from apps.billing.services import (
    STALE_AFTER,
    import_run_create,
    import_run_enqueue,
    import_run_execute,
)
from bench.focus_bill import focus_benchmark_write

from .conftest import focus_line, write_focus

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True, databases=["default", "progress"]),
]


def wait_for(predicate, timeout: float, worker):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"gave up after {timeout}s; worker log:\n{worker.log()}")


def test_a_worker_runs_an_import_end_to_end(acme, tmp_path, celery_worker_process):
    path = write_focus(
        tmp_path / "january.csv",
        [
            focus_line(
                Tags='{"project": "vision", "run-id": "run-17"}',
                EffectiveCost="32.7726",
                BilledCost="32.7726",
            ),
            focus_line(
                Tags='{"project": "nlp"}', EffectiveCost="0.000000000000001", BilledCost="0"
            ),
        ],
    )
    run = import_run_create(paths=[str(path)])

    import_run_enqueue(import_run=run)

    def done():
        run.refresh_from_db()
        return run.is_done

    wait_for(done, 60, celery_worker_process)
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.effective_cost == {"USD": "32.772600000000001"}
    assert CostLineItem.objects.get(source_row=2).experiment_id == acme.resnet.pk
    assert CostLineItem.objects.aggregate(total=Sum("billed_cost"))["total"] == Decimal("32.7726")


def source_totals(path) -> tuple[int, Decimal, Decimal]:
    """Rows and sums straight from the CSV, without the importer."""
    rows, billed, effective = 0, Decimal(0), Decimal(0)
    with path.open(newline="") as handle:
        for line in csv.DictReader(handle):
            rows += 1
            billed += Decimal(line["BilledCost"])
            effective += Decimal(line["EffectiveCost"])
    return rows, billed, effective


def test_a_killed_worker_leaves_nothing_loaded_and_the_run_is_claimed_again(
    acme, tmp_path, celery_worker_process
):
    path = focus_benchmark_write(tmp_path / "big.csv", rows=150_000)
    run = import_run_create(paths=[str(path)])
    import_run_enqueue(import_run=run)

    def loading():
        run.refresh_from_db()
        return run.rows_done > 0 and run.status == ImportRun.Status.RUNNING

    wait_for(loading, 60, celery_worker_process)
    os.kill(celery_worker_process.process.pid, signal.SIGKILL)
    celery_worker_process.process.wait(timeout=10)

    run.refresh_from_db()
    assert run.status == ImportRun.Status.RUNNING  # nobody is left to say otherwise
    assert 0 < run.rows_done < 150_000
    assert CostLineItem.objects.count() == 0
    assert Delivery.objects.count() == 0

    # A live heartbeat keeps others off; a stale one lets the run be claimed again.
    assert import_run_execute(import_run=run).status == ImportRun.Status.RUNNING
    ImportRun.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - STALE_AFTER - timedelta(seconds=1)
    )
    run = import_run_execute(import_run=run)

    rows, billed, effective = source_totals(path)
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.results[0]["rows"] == rows == 150_000
    assert CostLineItem.objects.count() == rows
    totals = CostLineItem.objects.aggregate(
        billed=Sum("billed_cost"), effective=Sum("effective_cost")
    )
    assert (totals["billed"], totals["effective"]) == (billed, effective)
