from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AccountsConfig(AppConfig):
    name = "apps.accounts"
    label = "accounts"

    def ready(self) -> None:
        from costsite.schedules import schedules_ensure_after_migrate

        # Every app's default schedules, from costsite/schedules.py, after every migrate.
        post_migrate.connect(
            schedules_ensure_after_migrate, sender=self, dispatch_uid="schedules_ensure"
        )
