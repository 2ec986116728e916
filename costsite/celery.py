import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")

app = Celery("costsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def task_enqueue_on_commit(name: str, *args) -> None:
    """Send the task registered under `name` once the current transaction commits.

    For a services module that enqueues a task of its own app: the tasks module imports the
    services at the top, so the services name the task instead of importing it back (no import
    circle; the import-linter contracts in pyproject.toml keep it so). Each app imports its
    tasks in `AppConfig.ready()`, so the name is registered in every process, not only in a
    worker."""
    app.tasks[name].delay_on_commit(*args)
