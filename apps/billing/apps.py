from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "apps.billing"
    label = "billing"

    def ready(self) -> None:
        from apps.projects.ports import ownership_changed

        from . import tasks  # noqa: F401  (registers the tasks the services enqueue by name)
        from .services import attribution_schedule

        # Who used what changed (a resource id, an alias, a rule): re-attribute that history.
        ownership_changed.register(attribution_schedule)
