"""Every default schedule of the site, created in this one place and kept in the database by
django-celery-beat, so an operator can change one in the admin without a deploy.

`schedules_ensure` runs after every migrate (the post_migrate handler that apps.accounts, the
ground floor, connects in its `ready()`): it creates the schedules that do not exist yet and
never changes one an operator edited. A schedule names its task by its registered name, so this
module imports no app.
"""

import json

from django.db import DEFAULT_DB_ALIAS

DEFAULT_SCHEDULES = [
    {
        # Every minute: find the billing sources whose next poll is due and enqueue one poll
        # each. Each source keeps its own interval (an hour by default: clouds deliver a few
        # times a day) and its back-off after failures in its row; this tick only decides who
        # is due, so a source is polled at most a minute after it is due.
        "name": "billing: poll due sources",
        "task": "apps.billing.tasks.billing_sources_poll_due",
        "every_seconds": 60,
    },
    {
        # Every 15 seconds: find the metric sources whose next poll is due and enqueue one poll
        # each. Every source keeps its own interval (and its back-off after failures) in its
        # row; this tick only decides who is due, so a source is polled at most 15 s after it
        # is due, which is finer than dcgm-exporter's own 30-second refresh.
        "name": "gpu: poll due metric sources",
        "task": "apps.gpu.tasks.metric_sources_poll_due",
        "every_seconds": 15,
    },
    {
        # Every minute: find the MLflow servers whose next poll is due and enqueue one poll
        # each. Each source keeps its own interval (5 minutes by default: a run's status and
        # loss are not needed faster) and its back-off after failures in its row.
        "name": "trackers: poll due MLflow sources",
        "task": "apps.trackers.tasks.tracker_sources_poll_due",
        "every_seconds": 60,
    },
    {
        # Every minute: the reapers. A run whose worker was killed (SIGKILL, out of memory, a
        # host lost) keeps its status, and its message comes back only after the broker's
        # visibility timeout (an hour): a run that stopped beating for ten minutes
        # (STALE_AFTER, costsite/polling.py), or a queued one that waited as long (its message
        # lost with a broker that restarted empty), is handed back and enqueued again. Each
        # tick is one query when nothing is stuck.
        "name": "billing: hand back stuck import and re-attribution runs",
        "task": "apps.billing.tasks.billing_runs_reap_task",
        "every_seconds": 60,
    },
    {
        # Every minute, as above: a findings recompute left stuck is run again.
        "name": "insights: run stuck recomputes again",
        "task": "apps.insights.tasks.recompute_runs_reap_task",
        "every_seconds": 60,
    },
    {
        # Every minute, as above: a digest delivery left sending is marked unknown (it may have
        # gone out, so it is never sent twice by itself) and its run sends the rest.
        "name": "digests: settle deliveries left sending",
        "task": "apps.digests.tasks.deliveries_reap_task",
        "every_seconds": 60,
    },
    {
        # Nightly at 03:30 UTC: recompute every finding over all the data. Imports already
        # recompute their own period (the "spend data changed" port); the nightly pass wakes
        # snoozes that ran out and catches what no import announced (a GPU mapping edited).
        "name": "insights: recompute findings nightly",
        "task": "apps.insights.tasks.findings_recompute_task",
        "crontab": {"minute": "30", "hour": "3"},
    },
    {
        # Mondays at 08:00 in the organisation's time zone: the weekly digests, each covering
        # the seven UTC days before the day it is sent. Every delivery is claimed before it is
        # sent, so a second run (or a retry) mails nobody twice.
        "name": "digests: send weekly digests",
        "task": "apps.digests.tasks.digests_send_task",
        "crontab": {"minute": "0", "hour": "8", "day_of_week": "1"},
        "organization_time_zone": True,
        "kwargs": {"frequency": "weekly"},
    },
    {
        # Daily at 08:00 in the organisation's time zone, the weekly digests' hour: the daily
        # digests, each covering the UTC day before.
        "name": "digests: send daily digests",
        "task": "apps.digests.tasks.digests_send_task",
        "crontab": {"minute": "0", "hour": "8"},
        "organization_time_zone": True,
        "kwargs": {"frequency": "daily"},
    },
    {
        # Daily at 06:00 UTC: check the budget and spike alerts. Imports check them too (the
        # "spend data changed" port); the daily pass catches a month's forecast moving with the
        # calendar alone.
        "name": "digests: check alerts daily",
        "task": "apps.digests.tasks.alerts_check_task",
        "crontab": {"minute": "0", "hour": "6"},
    },
]


def schedules_ensure(
    *,
    periodic_task_model,
    interval_model,
    crontab_model,
    using: str = DEFAULT_DB_ALIAS,
    time_zone: str = "UTC",
) -> None:
    """Create the default schedules that do not exist yet; never change one an operator edited.

    Takes the model classes so that post_migrate (or a migration) can pass its historical ones.
    """
    tasks = periodic_task_model.objects.using(using)
    for default in DEFAULT_SCHEDULES:
        if tasks.filter(name=default["name"]).exists():
            continue
        when = {}
        if "every_seconds" in default:
            when["interval"], _ = interval_model.objects.using(using).get_or_create(
                every=default["every_seconds"], period="seconds"
            )
        else:
            when["crontab"], _ = crontab_model.objects.using(using).get_or_create(
                **{"day_of_week": "*", **default["crontab"]},
                day_of_month="*",
                month_of_year="*",
                timezone=time_zone if default.get("organization_time_zone") else "UTC",
            )
        if "kwargs" in default:
            when["kwargs"] = json.dumps(default["kwargs"])
        tasks.create(name=default["name"], task=default["task"], enabled=True, **when)


def schedules_ensure_after_migrate(sender, *, using: str, apps=None, **kwargs) -> None:
    """post_migrate's handler: the schedules are data, so they get no migration of their own."""
    if apps is None:
        return
    try:
        models = {
            "periodic_task_model": apps.get_model("django_celery_beat", "PeriodicTask"),
            "interval_model": apps.get_model("django_celery_beat", "IntervalSchedule"),
            "crontab_model": apps.get_model("django_celery_beat", "CrontabSchedule"),
        }
    except LookupError:  # django-celery-beat's tables are not migrated (yet)
        return
    # Schedules "in the organisation's time zone" take the one it has when they are created; an
    # operator who moves the organisation changes their time zone in the admin.
    organization = apps.get_model("accounts", "Organization").objects.using(using).first()
    time_zone = organization.time_zone if organization is not None else "UTC"
    schedules_ensure(**models, using=using, time_zone=time_zone)
