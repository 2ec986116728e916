"""Celery tasks: thin wrappers over the services, and the "spend data changed" port's handler."""

from datetime import date, datetime

from celery import shared_task
from django.db import InterfaceError, OperationalError, transaction

from . import services

MAX_RETRIES = 5


@shared_task(bind=True, acks_late=True, max_retries=MAX_RETRIES)
def digests_send_task(self, frequency: str | None = None, now: str | None = None) -> dict:
    """Send the digests due (beat: weekly on Mondays, daily). Safe to run again and at once on
    two workers: every delivery is claimed before it is sent. Failures that certainly sent
    nothing are tried again with backoff (the rerun skips everything already done)."""
    try:
        results = services.digests_send(
            now=datetime.fromisoformat(now) if now else None, frequency=frequency or None
        )
    except (OperationalError, InterfaceError) as error:
        raise self.retry(exc=error, countdown=60 * 2**self.request.retries) from error
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
    if any(result.retry for result in results) and self.request.retries < MAX_RETRIES:
        raise self.retry(
            countdown=60 * 2**self.request.retries, kwargs={"frequency": frequency, "now": now}
        )
    return counts


@shared_task(acks_late=True, autoretry_for=(OperationalError, InterfaceError), retry_backoff=True)
def alerts_check_task() -> int:
    """Check the budget and spike alerts (daily, and when spend data changed)."""
    return len(services.alerts_check())


@shared_task(acks_late=True, autoretry_for=(OperationalError, InterfaceError), retry_backoff=True)
def deliveries_reap_task() -> int:
    """Beat's tick (costsite/schedules.py): settle what a dead worker left sending."""
    return len(services.deliveries_reap())


def on_spend_data_changed(*, start: date, end: date, reason: str) -> None:
    """The "spend data changed" port's handler: check the alerts once the change commits."""
    transaction.on_commit(alerts_check_task.delay)
