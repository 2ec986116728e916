"""The insights app's schedules, created in this one place (on every migrate, by the post_migrate
handler in apps.py) and kept in the database by django-celery-beat, so an operator can change
them in the admin without a deploy."""

from django.db import DEFAULT_DB_ALIAS

DEFAULT_SCHEDULES = [
    {
        # Nightly at 03:30 UTC: recompute every finding over all the data. Imports already
        # recompute their own period (the "spend data changed" port); the nightly pass wakes
        # snoozes that ran out and catches what no import announced (a GPU mapping edited).
        "name": "insights: recompute findings nightly",
        "task": "apps.insights.tasks.findings_recompute_task",
        "minute": "30",
        "hour": "3",
    },
]


def schedules_ensure(*, periodic_task_model, crontab_model, using: str = DEFAULT_DB_ALIAS) -> None:
    """Create the default schedules that do not exist yet; never change one an operator edited."""
    tasks = periodic_task_model.objects.using(using)
    for default in DEFAULT_SCHEDULES:
        if tasks.filter(name=default["name"]).exists():
            continue
        crontab, _ = crontab_model.objects.using(using).get_or_create(
            minute=default["minute"],
            hour=default["hour"],
            day_of_week="*",
            day_of_month="*",
            month_of_year="*",
            timezone="UTC",
        )
        tasks.create(name=default["name"], task=default["task"], crontab=crontab, enabled=True)
