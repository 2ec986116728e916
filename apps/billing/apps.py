from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _schedules_ensure(sender, *, using: str, apps=None, **kwargs) -> None:
    """Create the billing schedules after every migrate (no migration of its own: the schedule
    is data, and this keeps it in the one place, schedules.py)."""
    from .schedules import schedules_ensure

    if apps is None:
        return
    try:
        periodic_task = apps.get_model("django_celery_beat", "PeriodicTask")
        interval = apps.get_model("django_celery_beat", "IntervalSchedule")
    except LookupError:  # django-celery-beat's tables are not migrated (yet)
        return
    schedules_ensure(periodic_task_model=periodic_task, interval_model=interval, using=using)


class BillingConfig(AppConfig):
    name = "apps.billing"
    label = "billing"

    def ready(self) -> None:
        from apps.projects.ports import ownership_changed

        from . import tasks  # noqa: F401  (registers the tasks the services enqueue by name)
        from .services import attribution_schedule

        # Who used what changed (a resource id, an alias, a rule): re-attribute that history.
        ownership_changed.register(attribution_schedule)
        post_migrate.connect(
            _schedules_ensure, sender=self, dispatch_uid="billing_schedules_ensure"
        )
