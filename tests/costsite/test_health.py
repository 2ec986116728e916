"""/health/ answers 200 when the database and the broker answer, 503 naming the one that failed."""

import json
import time
from unittest import mock

import pytest
from django.db import OperationalError
from kombu import Connection

from costsite.celery import app
from costsite.views import CHECK_TIMEOUT_SECONDS


@pytest.mark.django_db
def test_health_is_ok_when_the_database_and_the_broker_answer(client):
    response = client.get("/health/")

    assert response.status_code == 200
    assert json.loads(response.content) == {"status": "ok", "database": "ok", "broker": "ok"}


@pytest.mark.django_db
def test_health_is_503_naming_the_broker_when_redis_does_not_answer(client, monkeypatch):
    # A port nothing listens on: the broker check must fail fast, not hang.
    monkeypatch.setattr(
        app,
        "connection_for_write",
        lambda **options: Connection("redis://127.0.0.1:1/0", **options),
    )
    started = time.monotonic()
    response = client.get("/health/")

    assert time.monotonic() - started < CHECK_TIMEOUT_SECONDS + 1
    assert response.status_code == 503
    assert json.loads(response.content) == {
        "status": "failed",
        "database": "ok",
        "broker": "failed",
        "errors": {"broker": "The broker does not answer."},
    }


@pytest.mark.django_db
def test_health_is_503_naming_the_database_when_it_does_not_answer(client):
    # The view's own connection only: the middleware before it keeps a working one.
    broken = mock.Mock(**{"cursor.side_effect": OperationalError("connection refused")})
    with mock.patch("costsite.views.connection", broken):
        response = client.get("/health/")

    assert response.status_code == 503
    assert json.loads(response.content) == {
        "status": "failed",
        "database": "failed",
        "broker": "ok",
        "errors": {"database": "The database does not answer."},
    }


@pytest.mark.django_db
def test_health_asks_no_broker_when_tasks_run_in_process(client, monkeypatch, settings):
    """The demo runs tasks in process and has no Redis: its health is the database's."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    monkeypatch.setattr(
        app,
        "connection_for_write",
        lambda **options: Connection("redis://127.0.0.1:1/0", **options),
    )

    response = client.get("/health/")

    assert response.status_code == 200
    assert json.loads(response.content) == {"status": "ok", "database": "ok", "broker": "not used"}
