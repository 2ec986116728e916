"""Fault test: a real Celery worker SIGKILLed mid-recompute. Its transaction rolls back, the run
and the lock are left behind with a heartbeat that stops; once it is stale the reaper, on a
second worker, runs the recompute again and the findings are exactly a clean recompute's."""

import os
import signal
import time
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.db.models import Count, Sum
from django.utils import timezone

from apps.insights.models import Finding, FindingHour, RecomputeLock, RecomputeRun
from apps.insights.services import STALE_AFTER, findings_recompute, recompute_runs_reap
from apps.insights.tasks import findings_recompute_task, recompute_runs_reap_task

pytestmark = [
    pytest.mark.worker,
    pytest.mark.faults,
    pytest.mark.django_db(transaction=True, databases=["default", "progress"]),
]


def wait_for(predicate, timeout: float, *workers):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    logs = "\n".join(f"--- {worker.name}\n{worker.log()}" for worker in workers)
    pytest.fail(f"gave up after {timeout}s; worker logs:\n{logs}")


def findings_state() -> tuple[list, list]:
    """Every finding, and its hours counted and summed per finding: exact decimals."""
    findings = sorted(
        Finding.objects.values_list("kind", "subject_key", "status", "wasted", "savings_per_month")
    )
    hours = sorted(
        FindingHour.objects.values_list("finding__kind", "finding__subject_key")
        .annotate(count=Count("id"), wasted=Sum("wasted"), spend=Sum("spend"))
        .values_list("finding__kind", "finding__subject_key", "count", "wasted", "spend")
    )
    return findings, hours


def waiting_on_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def test_a_recompute_whose_worker_is_killed_is_reaped_and_run_again_exactly(
    bill, celery_worker_factory
):
    findings_recompute()  # the reference: the same data, recomputed cleanly in process
    reference = findings_state()
    assert reference[1]  # the bill has wasted hours to lose

    first = celery_worker_factory()
    # Hold the findings' hours: the worker's recompute stops mid-way, its first kind computed
    # and about to replace that kind's hours, inside its transaction.
    with transaction.atomic(using="progress"):
        connections["progress"].cursor().execute(
            f"LOCK TABLE {FindingHour._meta.db_table} IN ACCESS EXCLUSIVE MODE"
        )
        findings_recompute_task.delay(reason="killed")
        wait_for(waiting_on_a_lock, 60, first)
        os.kill(first.process.pid, signal.SIGKILL)
        first.process.wait(timeout=10)

    run = RecomputeRun.objects.get(reason="killed")
    assert run.status == RecomputeRun.Status.RUNNING  # nobody is left to say otherwise
    assert RecomputeLock.objects.get(pk=1).holder.startswith(f"recompute-{run.pk}-")
    # Its transaction rolled back once PostgreSQL saw the client gone: nothing half written.
    wait_for(lambda: waiting_on_a_lock() == 0, 30)
    assert findings_state() == reference
    # A live heartbeat keeps the reaper off.
    assert recompute_runs_reap() == 0

    stale = timezone.now() - STALE_AFTER - timedelta(seconds=1)
    RecomputeRun.objects.filter(pk=run.pk).update(heartbeat_at=stale)
    RecomputeLock.objects.filter(pk=1).update(heartbeat_at=stale)
    second = celery_worker_factory()
    recompute_runs_reap_task.delay()

    def done():
        run.refresh_from_db()
        return run.status != RecomputeRun.Status.RUNNING and run.finished_at

    wait_for(done, 60, second)
    assert run.status == RecomputeRun.Status.SUCCEEDED, run.error
    assert findings_state() == reference
    assert RecomputeLock.objects.get(pk=1).holder == ""
    assert "findings recompute(s) stuck: draining the queue" in second.log()
