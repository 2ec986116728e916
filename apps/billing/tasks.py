"""Celery tasks: thin wrappers that load rows by id and call one service."""

from celery import shared_task
from django.db import InterfaceError, OperationalError

from . import services
from .models import ImportRun


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
def attribution_refresh_task(resource_ids: list[str] | None = None) -> int:
    """Attribute again the history these resource ids touch (all of it when None)."""
    return services.attribution_refresh(resource_ids=resource_ids)
