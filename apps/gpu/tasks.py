"""Celery tasks: thin wrappers that take ids, load the rows and call one service."""

from celery import shared_task

from . import services, services_traffic
from .models import MetricImport, MetricSource, TrafficSource

POLL_MAX_RETRIES = 4


@shared_task
def metric_sources_poll_due() -> list[int]:
    """Beat's tick (costsite/schedules.py): enqueue a poll for every source that is due, the
    deployments' Prometheus traffic sources too (same client, same tick)."""
    source_ids = services.metric_sources_claim_due()
    for source_id in source_ids:
        metric_source_poll_task.delay(source_id)
    for source_id in services_traffic.traffic_sources_claim_due():
        traffic_source_poll_task.delay(source_id)
    return source_ids


@shared_task(bind=True, max_retries=POLL_MAX_RETRIES)
def metric_source_poll_task(self, source_id: int) -> int:
    """Poll one source; when the target is down, retry with a doubling delay. The source is
    already marked unhealthy with the error by then, and its next scheduled poll waits past the
    retries, so a down target is not polled twice at once."""
    source = MetricSource.objects.filter(pk=source_id, is_paused=False).first()
    if source is None:
        return 0
    try:
        return services.metric_source_poll(source=source)
    except services.MetricSourceError as exc:
        if self.request.is_eager:
            # Run in process (the demo, "Poll now" without a worker): there is no later to retry
            # at; the source already shows the error.
            return 0
        raise self.retry(
            exc=exc, countdown=services.retry_delay(failures=source.consecutive_failures)
        ) from exc


@shared_task
def metric_import_execute_task(metric_import_id: int) -> str:
    metric_import = MetricImport.objects.get(pk=metric_import_id)
    return services.metric_import_execute(metric_import=metric_import).status


@shared_task
def gpu_days_rebuild_task() -> None:
    """After a change of who used what: rebuild the fleet page's daily rollup."""
    services.gpu_days_rebuild()


@shared_task(bind=True, max_retries=POLL_MAX_RETRIES)
def traffic_source_poll_task(self, source_id: int) -> int:
    """Poll one deployment's Prometheus traffic source, retrying as a metric source does."""
    source = (
        TrafficSource.objects.select_related("deployment")
        .filter(pk=source_id, is_paused=False)
        .first()
    )
    if source is None:
        return 0
    try:
        return services_traffic.traffic_source_poll(source=source)
    except services.MetricSourceError as exc:
        if self.request.is_eager:
            return 0
        raise self.retry(
            exc=exc, countdown=services.retry_delay(failures=source.consecutive_failures)
        ) from exc
