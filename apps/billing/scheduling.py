"""Queueing a re-attribution: the handler billing registers with the "ownership changed" port at
startup. It is a module of its own, light to import, so that every process's start (Django's
setup runs each app's `ready()`) does not load the billing engine and its parsers (pyarrow,
pandas), which only the runs themselves need."""

from django.contrib.auth.models import AbstractBaseUser

from costsite.celery import task_enqueue_on_commit

from .models import AttributionRun


def attribution_schedule(
    *,
    resource_ids: list[str] | None = None,
    reason: str = "",
    created_by: AbstractBaseUser | None = None,
) -> AttributionRun | None:
    """Re-attribute, after the current transaction commits, the history these resources touch,
    as a tracked run (queued now; a worker claims it and writes its progress as it goes).

    None means all history: call it after a tag key alias or an allocation rule changes. Call it
    with the resource ids (old and new) when an experiment's or deployment's resources, or their
    times, change. Returns the run, or None when there was nothing to re-attribute.
    """
    ids = None
    if resource_ids is not None:
        ids = sorted({r.strip() for r in resource_ids if r and r.strip()})
        if not ids:
            return None
    run = AttributionRun.objects.create(
        reason=reason[:500], resource_ids=ids, created_by=created_by
    )
    task_enqueue_on_commit("apps.billing.tasks.attribution_refresh_task", run.pk)
    return run
