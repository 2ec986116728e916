"""A real Celery worker for end-to-end tests: a pytest plugin, registered in the root conftest.

`celery_worker_process` starts `celery -A costsite worker --pool=solo` as a subprocess pointed at
the PostgreSQL test database pytest-django created and at the Redis broker the tests' Celery app
uses (run the tests with `CELERY_BROKER_URL=redis://127.0.0.1:6379/<your db>` to keep to a
database of your own; its queue is purged first). It waits until the worker answers a ping,
yields, then stops the worker, and prints the worker's log when the test failed.

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


@pytest.fixture
def celery_worker_process(request, transactional_db, tmp_path):
    """A Celery worker subprocess on the test database; yields a WorkerProcess."""
    from django.db import connection

    from costsite.celery import app

    if connection.vendor != "postgresql":
        pytest.skip("the worker needs the PostgreSQL test database (another process shares it)")
    broker = app.conf.broker_url
    name = f"test-{uuid.uuid4().hex[:8]}@localhost"
    log_path = tmp_path / "celery-worker.log"
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(connection.settings_dict),
        "CELERY_BROKER_URL": broker,
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "DJANGO_SETTINGS_MODULE": "costsite.settings",
        "PYTHONUNBUFFERED": "1",
    }
    app.control.purge()  # messages an earlier, interrupted run may have left
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
                "-n",
                name,
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    worker = WorkerProcess(name=name, process=process, log_path=log_path)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not app.control.ping(destination=[name], timeout=0.5):
            if process.poll() is not None:
                pytest.fail(f"the Celery worker exited with {process.returncode}:\n{worker.log()}")
            if time.monotonic() > deadline:
                pytest.fail(
                    f"the Celery worker did not answer within {START_TIMEOUT}s:\n{worker.log()}"
                )
        yield worker
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)
        report = getattr(request.node, "celery_worker_report_call", None)
        if report is None or report.failed:
            print(f"--- Celery worker log ({name}) ---\n{worker.log()}")
