"""Celery tasks: thin wrappers over services.findings_recompute, and the handler registered with
the "spend data changed" port."""

from datetime import date

from celery import shared_task
from django.db import InterfaceError, OperationalError, transaction

from . import services


@shared_task(
    acks_late=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=5,
)
def findings_recompute_task(
    start: str | None = None, end: str | None = None, reason: str = "nightly"
) -> str:
    """Recompute the findings of `[start, end)` (ISO dates; none: all the data). Safe twice:
    the recompute is claimed, and a second one only repeats the same result."""
    run = services.findings_recompute(
        start=date.fromisoformat(start) if start else None,
        end=date.fromisoformat(end) if end else None,
        reason=reason,
    )
    return run.status


@shared_task(acks_late=True, autoretry_for=(OperationalError, InterfaceError), retry_backoff=True)
def recompute_runs_reap_task() -> int:
    """Beat's tick (costsite/schedules.py): run the recomputes a killed worker left stuck."""
    return services.recompute_runs_reap()


def on_spend_data_changed(*, start: date, end: date, reason: str) -> None:
    """The "spend data changed" port's handler: recompute the period once the change commits."""
    transaction.on_commit(
        lambda: findings_recompute_task.delay(start.isoformat(), end.isoformat(), reason)
    )
