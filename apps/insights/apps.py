from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _schedules_ensure(sender, *, using: str, apps=None, **kwargs) -> None:
    """Create the insights schedules after every migrate (as billing does: the schedule is data,
    kept in the one place, schedules.py)."""
    from .schedules import schedules_ensure

    if apps is None:
        return
    try:
        periodic_task = apps.get_model("django_celery_beat", "PeriodicTask")
        crontab = apps.get_model("django_celery_beat", "CrontabSchedule")
    except LookupError:
        return
    schedules_ensure(periodic_task_model=periodic_task, crontab_model=crontab, using=using)


class InsightsConfig(AppConfig):
    name = "apps.insights"
    label = "insights"

    def ready(self) -> None:
        from apps.projects.ports import spend_data_changed

        from .tasks import on_spend_data_changed

        spend_data_changed.register(on_spend_data_changed)
        post_migrate.connect(
            _schedules_ensure, sender=self, dispatch_uid="insights_schedules_ensure"
        )
