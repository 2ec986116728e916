from django.apps import AppConfig


class GpuConfig(AppConfig):
    name = "apps.gpu"
    label = "gpu"
    verbose_name = "GPU metrics"

    def ready(self) -> None:
        from apps.projects.ports import ownership_changed

        from . import tasks  # noqa: F401  (registers the tasks the services enqueue by name)
        from .daily import ownership_changed_handler

        # Who used what changed: the daily rollup's sets of projects are out of date.
        ownership_changed.register(ownership_changed_handler)
