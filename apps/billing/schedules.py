"""The billing app's schedules, created in this one place (on every migrate, by the post_migrate
handler in apps.py) and kept in the database by django-celery-beat, so an operator can change
them in the admin without a deploy."""

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
]


def schedules_ensure(*, periodic_task_model, interval_model, using: str = DEFAULT_DB_ALIAS) -> None:
    """Create the default schedules that do not exist yet; never change one an operator edited.

    Takes the model classes so that a migration or post_migrate can pass its historical ones.
    """
    tasks = periodic_task_model.objects.using(using)
    for default in DEFAULT_SCHEDULES:
        if tasks.filter(name=default["name"]).exists():
            continue
        interval, _ = interval_model.objects.using(using).get_or_create(
            every=default["every_seconds"], period="seconds"
        )
        tasks.create(name=default["name"], task=default["task"], interval=interval, enabled=True)
