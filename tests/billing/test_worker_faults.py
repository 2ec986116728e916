"""Fault tests: a real Celery worker SIGKILLed mid-import. The run is left running with a
heartbeat that stops; once the heartbeat is stale the reaper hands it back, a second worker
loads it whole, and a copy of the first message (acks_late brings it back) adds nothing."""

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
from apps.billing.services import STALE_AFTER, billing_runs_reap, import_run_create
from apps.billing.tasks import billing_runs_reap_task, import_run_execute_task
from bench.focus_bill import focus_benchmark_write

pytestmark = [
    pytest.mark.worker,
    pytest.mark.faults,
    pytest.mark.django_db(transaction=True, databases=["default", "progress"]),
]

ROWS = 60_000


def wait_for(predicate, timeout: float, *workers):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    logs = "\n".join(f"--- {worker.name}\n{worker.log()}" for worker in workers)
    pytest.fail(f"gave up after {timeout}s; worker logs:\n{logs}")


def file_totals(path) -> tuple[int, Decimal, Decimal]:
    """Rows and sums straight from the CSV, without the importer."""
    rows, billed, effective = 0, Decimal(0), Decimal(0)
    with path.open(newline="") as handle:
        for line in csv.DictReader(handle):
            rows += 1
            billed += Decimal(line["BilledCost"])
            effective += Decimal(line["EffectiveCost"])
    return rows, billed, effective


def stored_totals() -> tuple[int, Decimal, Decimal]:
    sums = CostLineItem.objects.aggregate(
        billed=Sum("billed_cost"), effective=Sum("effective_cost")
    )
    return CostLineItem.objects.count(), sums["billed"], sums["effective"]


def test_an_import_whose_worker_is_killed_is_reaped_and_loaded_whole_by_another(
    tmp_path, celery_worker_factory
):
    path = focus_benchmark_write(tmp_path / "january.csv", rows=ROWS)
    first = celery_worker_factory()
    run = import_run_create(paths=[str(path)])
    import_run_execute_task.delay(run.pk)

    def loading():
        run.refresh_from_db()
        return run.status == ImportRun.Status.RUNNING and run.rows_done > 0

    wait_for(loading, 60, first)
    os.kill(first.process.pid, signal.SIGKILL)
    first.process.wait(timeout=10)

    # Killed mid-load: nothing of it is stored, and nobody is left to say it stopped.
    run.refresh_from_db()
    assert run.status == ImportRun.Status.RUNNING
    assert 0 < run.rows_done < ROWS
    assert (CostLineItem.objects.count(), Delivery.objects.count()) == (0, 0)
    # While the heartbeat is fresh the reaper leaves the run alone (it may be alive).
    assert billing_runs_reap() == []

    # Ten minutes without a sign of life: the reaper, on a second worker, hands it back.
    ImportRun.objects.filter(pk=run.pk).update(
        heartbeat_at=timezone.now() - STALE_AFTER - timedelta(seconds=1)
    )
    second = celery_worker_factory()
    billing_runs_reap_task.delay()

    def done():
        run.refresh_from_db()
        return run.is_done

    wait_for(done, 90, first, second)
    rows, billed, effective = file_totals(path)
    assert run.status == ImportRun.Status.SUCCEEDED, run.error
    assert run.results[0]["rows"] == rows == ROWS
    assert stored_totals() == (ROWS, billed, effective)
    assert "was stuck: handed back and enqueued again" in second.log()

    # The first worker's message, never acknowledged, comes back: it finds the run done.
    again = import_run_execute_task.delay(run.pk)
    wait_for(lambda: f"[{again.id}] succeeded" in second.log(), 60, second)
    assert stored_totals() == (ROWS, billed, effective)
    assert Delivery.objects.count() == 1
    assert ImportRun.objects.get(pk=run.pk).status == ImportRun.Status.SUCCEEDED
