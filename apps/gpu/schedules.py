"""The GPU app's schedules, created in this one place (by migration 0002) and kept in the
database by django-celery-beat, so an operator can change them in the admin without a deploy."""

DEFAULT_SCHEDULES = [
    {
        # Every 15 seconds: find the metric sources whose next poll is due and enqueue one poll
        # each. Every source keeps its own interval (and its back-off after failures) in its row;
        # this tick only decides who is due, so a source is polled at most 15 s after it is due,
        # which is finer than dcgm-exporter's own 30-second refresh.
        "name": "gpu: poll due metric sources",
        "task": "apps.gpu.tasks.metric_sources_poll_due",
        "every_seconds": 15,
    },
]


def schedules_ensure(*, periodic_task_model, interval_model) -> None:
    """Create the default schedules that do not exist yet; never change one an operator edited.

    Takes the model classes so that a migration can pass its historical ones.
    """
    for default in DEFAULT_SCHEDULES:
        if periodic_task_model.objects.filter(name=default["name"]).exists():
            continue
        interval, _ = interval_model.objects.get_or_create(
            every=default["every_seconds"], period="seconds"
        )
        periodic_task_model.objects.create(
            name=default["name"], task=default["task"], interval=interval, enabled=True
        )
