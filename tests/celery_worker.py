"""A real Celery worker for end-to-end tests: a pytest plugin, registered in the root conftest.

`celery_worker_process` starts `celery -A costsite worker --pool=solo` as a subprocess pointed at
the PostgreSQL test database pytest-django created and at the Redis broker the tests' Celery app
uses (run the tests with `CELERY_BROKER_URL=redis://127.0.0.1:6379/<your db>` to keep to a
database of your own; its queues, and the messages killed workers left unacknowledged there, are
purged first). It consumes every queue of the routing. It waits until the worker answers a
ping, yields, then stops the worker, and prints the worker's log when the test failed.
`celery_worker_factory` starts as many as a test needs, each when it asks (a second worker after
the first was killed), with environment variables, a database and a broker of its own (the
throwaway servers of tests/servers.py).

The test must be transactional (the fixture brings `transactional_db`): the worker is another
process and sees only committed rows.
"""

import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT = 60


@dataclass
class WorkerProcess:
    name: str
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def _database_url(settings_dict: dict) -> str:
    user = settings_dict.get("USER") or ""
    password = settings_dict.get("PASSWORD") or ""
    credentials = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    return f"postgresql://{credentials}{host}:{port}/{settings_dict['NAME']}"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"celery_worker_report_{report.when}", report)
    return report


def _worker_start(
    *, tmp_path: Path, env: dict[str, str], database_url: str, broker_url: str
) -> WorkerProcess:
    """Start a worker and wait until it answers a ping (a failure names why, with its log)."""
    from django.conf import settings

    from costsite.celery import app

    name = f"test-{uuid.uuid4().hex[:8]}@localhost"
    log_path = tmp_path / f"celery-worker-{name.partition('@')[0]}.log"
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": broker_url,
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "DJANGO_SETTINGS_MODULE": "costsite.settings",
        "PYTHONUNBUFFERED": "1",
        **env,
    }
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "costsite",
                "worker",
                "--pool=solo",
                "--loglevel=INFO",
                "--without-gossip",
                "--without-mingle",
                # Every queue of the routing (costsite/settings.py), and Celery's default one.
                "--queues",
                ",".join([*settings.CELERY_TASK_QUEUES_BY_KIND, "celery"]),
                "-n",
                name,
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    worker = WorkerProcess(name=name, process=process, log_path=log_path)
    deadline = time.monotonic() + START_TIMEOUT

    def ready() -> bool:
        if broker_url == app.conf.broker_url:
            return bool(app.control.ping(destination=[name], timeout=0.5))
        # A broker of its own: Celery's ping answers only through the app's broker, so the
        # worker's own word is taken (it logs this once it consumes).
        time.sleep(0.1)
        return f"{name} ready." in worker.log()

    while not ready():
        if process.poll() is not None:
            pytest.fail(f"the Celery worker exited with {process.returncode}:\n{worker.log()}")
        if time.monotonic() > deadline:
            _worker_stop(worker)
            pytest.fail(
                f"the Celery worker did not answer within {START_TIMEOUT}s:\n{worker.log()}"
            )
    return worker


def _worker_stop(worker: WorkerProcess) -> None:
    process = worker.process
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


def broker_leftovers_purge(app, queues: list[str]) -> None:
    """Drop what an earlier run left on the tests' broker: the messages on `queues`, and the
    messages a worker took and never acknowledged (killed mid-task, as the fault tests do). A
    worker that starts puts those back on their queues once they are older than the visibility
    timeout (kombu's Redis transport), so a suite run an hour after another would see its worker
    run the earlier run's tasks besides its own."""
    with app.connection_for_write() as broker:
        channel = broker.default_channel
        for queue in queues:
            channel.queue_purge(queue)
        channel.client.delete(channel.unacked_key, channel.unacked_index_key)


@pytest.fixture
def celery_worker_factory(request, transactional_db, tmp_path):
    """Start Celery worker subprocesses on the test database: `start(env={...})` returns a
    WorkerProcess (extra environment variables for it in `env`). Every one still running is
    stopped at the end, and their logs printed if the test failed."""
    from django.conf import settings
    from django.db import connection

    from costsite.celery import app

    if connection.vendor != "postgresql":
        pytest.skip("the worker needs the PostgreSQL test database (another process shares it)")
    database_url = _database_url(connection.settings_dict)
    broker_leftovers_purge(app, [*settings.CELERY_TASK_QUEUES_BY_KIND, "celery"])
    workers: list[WorkerProcess] = []

    def start(
        env: dict[str, str] | None = None,
        database_url: str = database_url,
        broker_url: str = app.conf.broker_url,
    ) -> WorkerProcess:
        worker = _worker_start(
            tmp_path=tmp_path, env=env or {}, database_url=database_url, broker_url=broker_url
        )
        workers.append(worker)
        return worker

    try:
        yield start
    finally:
        for worker in workers:
            _worker_stop(worker)
        report = getattr(request.node, "celery_worker_report_call", None)
        if report is None or report.failed:
            for worker in workers:
                print(f"--- Celery worker log ({worker.name}) ---\n{worker.log()}")


@pytest.fixture
def celery_worker_process(celery_worker_factory):
    """A Celery worker subprocess on the test database; yields a WorkerProcess."""
    return celery_worker_factory()
