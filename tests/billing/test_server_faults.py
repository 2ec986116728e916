"""Fault tests: PostgreSQL and Redis restarted while a real Celery worker imports. On throwaway
servers of the test's own (tests/servers.py), never the shared ones.

- PostgreSQL restarted mid-load: the load's transaction is lost with its connection, the run is
  handed back, the task's retry loads it whole once the database answers again.
- Redis killed mid-load and started again empty: the running import does not need the broker
  and finishes; a run whose message was lost with Redis stays queued until the reaper enqueues it
  again, and the worker, reconnected, loads it. Nothing counted twice, nothing lost.
"""

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Sum
from django.utils import timezone

from apps.billing.models import CostLineItem, Delivery, ImportRun
from apps.billing.services import STALE_AFTER, import_run_create
from apps.billing.tasks import billing_runs_reap_task, import_run_execute_task
from bench.focus_bill import focus_benchmark_write
from costsite.celery import app

from .conftest import focus_line, write_focus
from .test_worker_faults import file_totals

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
        time.sleep(0.1)
    logs = "\n".join(f"--- {worker.name}\n{worker.log()}" for worker in workers)
    pytest.fail(f"gave up after {timeout}s; worker logs:\n{logs}")


def test_an_import_survives_postgresql_restarting_mid_load(
    tmp_path, throwaway_postgres, celery_worker_factory
):
    path = focus_benchmark_write(tmp_path / "january.csv", rows=ROWS)
    run = import_run_create(paths=[str(path)])
    throwaway_postgres.copy_test_database(connection.settings_dict)  # the queued run
    worker = celery_worker_factory(database_url=throwaway_postgres.url)
    import_run_execute_task.delay(run.pk)

    def run_row(columns: str):
        rows = throwaway_postgres.query(
            f"SELECT {columns} FROM billing_importrun WHERE id = %s", (run.pk,)
        )
        return rows[0] if rows else None

    wait_for(lambda: (row := run_row("rows_done")) and row[0] > 0, 60, worker)
    throwaway_postgres.restart(down_for=1.0)

    done = {"succeeded", "failed", "unchanged"}
    status, error = wait_for(
        lambda: (row := run_row("status, error")) and row[0] in done and row, 120, worker
    )
    assert status == "succeeded", error
    rows, billed, effective = file_totals(path)
    assert throwaway_postgres.query(
        "SELECT count(*), sum(billed_cost), sum(effective_cost) FROM billing_costlineitem"
    ) == [(rows, billed, effective)]
    assert throwaway_postgres.query("SELECT count(*) FROM billing_delivery") == [(1,)]
    assert "Retry in" in worker.log()  # the task's retry loaded it, not a second message


def test_an_import_survives_redis_restarting_empty_and_a_lost_message_is_sent_again(
    tmp_path, throwaway_redis, celery_worker_factory
):
    january = focus_benchmark_write(tmp_path / "january.csv", rows=ROWS)
    # Another payer account: a delivery of its own beside January's, not a restatement of it.
    february = write_focus(
        tmp_path / "other-payer.csv",
        [
            focus_line(BillingAccountId="333333333333", BilledCost=cost, EffectiveCost=cost)
            for cost in ("12.345678", "0.000001", "7.5")
        ],
    )
    worker = celery_worker_factory(broker_url=throwaway_redis.url)
    running = import_run_create(paths=[str(january)])
    waiting = import_run_create(paths=[str(february)])
    with app.connection_for_write(throwaway_redis.url) as broker:
        import_run_execute_task.apply_async((running.pk,), connection=broker)
        # Behind the running one on the solo worker: its message waits in Redis.
        import_run_execute_task.apply_async((waiting.pk,), connection=broker)

    def loading():
        running.refresh_from_db()
        return running.rows_done > 0

    wait_for(loading, 60, worker)
    throwaway_redis.restart(down_for=1.0)  # a crash: the waiting message is gone with it

    def done():
        running.refresh_from_db()
        return running.is_done

    wait_for(done, 120, worker)
    assert running.status == ImportRun.Status.SUCCEEDED, running.error
    waiting.refresh_from_db()
    assert waiting.status == ImportRun.Status.QUEUED  # its message was lost

    # Ten minutes later the reaper, through the reconnected worker, enqueues it again.
    ImportRun.objects.filter(pk=waiting.pk).update(
        created_at=timezone.now() - STALE_AFTER - timedelta(seconds=1)
    )
    with app.connection_for_write(throwaway_redis.url) as broker:
        billing_runs_reap_task.apply_async(connection=broker)

    def waiting_done():
        waiting.refresh_from_db()
        return waiting.is_done

    wait_for(waiting_done, 120, worker)
    assert waiting.status == ImportRun.Status.SUCCEEDED, waiting.error
    january_rows, january_billed, january_effective = file_totals(january)
    february_rows, february_billed, february_effective = file_totals(february)
    sums = CostLineItem.objects.aggregate(
        billed=Sum("billed_cost"), effective=Sum("effective_cost")
    )
    assert CostLineItem.objects.count() == january_rows + february_rows
    assert sums["billed"] == january_billed + february_billed
    assert sums["effective"] == january_effective + february_effective
    assert Delivery.objects.count() == 2
