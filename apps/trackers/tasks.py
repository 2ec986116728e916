"""Celery tasks: thin wrappers that take ids, load the rows and call one service."""

from celery import shared_task

from . import services
from .mlflow import TrackerError
from .models import TrackerSource

POLL_MAX_RETRIES = 4


@shared_task
def tracker_sources_poll_due() -> list[int]:
    """Beat's tick (costsite/schedules.py): enqueue a poll for every tracker source that is due."""
    source_ids = services.tracker_sources_claim_due()
    for source_id in source_ids:
        tracker_source_poll_task.delay(source_id)
    return source_ids


@shared_task(bind=True, max_retries=POLL_MAX_RETRIES)
def tracker_source_poll_task(self, source_id: int, full: bool = False) -> int:
    """Poll one MLflow server (every run when `full`); when it is down, retry with a doubling
    delay. The source already shows the error by then, and nothing is lost: the next poll
    starts where the last good one did."""
    source = TrackerSource.objects.filter(pk=source_id, is_paused=False).first()
    if source is None:
        return 0
    try:
        return services.tracker_source_poll(source=source, full=full).tally.runs
    except TrackerError as exc:
        if self.request.is_eager:
            return 0
        raise self.retry(
            exc=exc, countdown=services.retry_delay(failures=source.consecutive_failures)
        ) from exc
