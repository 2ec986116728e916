from django.apps import AppConfig


class DigestsConfig(AppConfig):
    name = "apps.digests"
    label = "digests"

    def ready(self) -> None:
        from apps.projects.ports import spend_data_changed

        from .tasks import on_spend_data_changed

        spend_data_changed.register(on_spend_data_changed)
