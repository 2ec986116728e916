"""Celery tasks: thin wrappers that load rows by id and call one service."""

from datetime import date

from celery import shared_task
from django.contrib.auth import get_user_model
from django.db import InterfaceError, OperationalError

from . import services, services_sources
from .models import AttributionRun, BillingSource, ImportRun
from .sources import SourceUnavailable


@shared_task(
    acks_late=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=5,
)
def import_run_execute_task(import_run_id: int) -> str:
    """Run an import. A lost database connection retries (the run is handed back as queued);
    a second delivery of the message finds the run claimed and does nothing."""
    import_run = ImportRun.objects.filter(pk=import_run_id).first()
    if import_run is None:
        return "missing"
    return services.import_run_execute(import_run=import_run).status


@shared_task(
    acks_late=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=5,
)
def attribution_refresh_task(attribution_run_id: int) -> str:
    """Run a re-attribution. A lost database connection retries (the run is handed back as
    queued); a second delivery of the message finds the run claimed and does nothing."""
    attribution_run = AttributionRun.objects.filter(pk=attribution_run_id).first()
    if attribution_run is None:
        return "missing"
    return services.attribution_run_execute(attribution_run=attribution_run).status


@shared_task
def billing_runs_reap_task() -> int:
    """Beat's tick (costsite/schedules.py): enqueue again the runs that nothing works on."""
    return len(services.billing_runs_reap())


# -- billing sources -------------------------------------------------------------------------

SOURCE_POLL_MAX_RETRIES = 4


@shared_task
def billing_sources_poll_due() -> list[int]:
    """Beat's tick (costsite/schedules.py): enqueue a poll for each billing source due."""
    source_ids = services_sources.billing_sources_claim_due()
    for source_id in source_ids:
        billing_source_poll_task.delay(source_id)
    return source_ids


@shared_task(bind=True, max_retries=SOURCE_POLL_MAX_RETRIES)
def billing_source_poll_task(
    self,
    source_id: int,
    period_start: str | None = None,
    period_end: str | None = None,
    requested_by_id: int | None = None,
    manual: bool = False,
) -> int:
    """Poll one source (a re-run when given a period, as ISO dates); the runs it starts.

    A scheduled poll skips a paused source; "Poll now" and a re-run (`manual`) are an operator's
    explicit ask and go ahead. When the source is down the poll retries with a doubling delay:
    the source already shows the error by then, and its next scheduled poll waits past the
    retries.
    """
    sources = BillingSource.objects.filter(pk=source_id)
    source = (sources if manual else sources.filter(is_paused=False)).first()
    if source is None:
        return 0
    users = get_user_model().objects
    requested_by = users.filter(pk=requested_by_id).first() if requested_by_id else None
    try:
        poll = services_sources.billing_source_poll(
            source=source,
            period_start=date.fromisoformat(period_start) if period_start else None,
            period_end=date.fromisoformat(period_end) if period_end else None,
            requested_by=requested_by,
        )
    except SourceUnavailable as exc:
        if self.request.is_eager:
            # Run in process (the demo, "Poll now" without a worker): there is no later to
            # retry at; the source and its poll already show the error.
            return 0
        raise self.retry(
            exc=exc,
            countdown=services_sources.retry_delay(failures=source.consecutive_failures),
        ) from exc
    return poll.runs_started
