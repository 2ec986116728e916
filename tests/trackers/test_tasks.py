"""Beat's tick claims each due MLflow source once; the poll task records a down server."""

import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.trackers import tasks
from apps.trackers.models import TrackerSource
from apps.trackers.services import (
    tracker_source_create,
    tracker_source_pause,
    tracker_sources_claim_due,
)

pytestmark = pytest.mark.django_db


def dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_a_due_source_is_claimed_once_and_a_paused_one_not_at_all():
    due = tracker_source_create(name="due", url=dead_url())
    paused = tracker_source_create(name="paused", url=dead_url())
    tracker_source_pause(source=paused, paused=True)

    assert tracker_sources_claim_due() == [due.pk]
    assert tracker_sources_claim_due() == []
    due.refresh_from_db()
    assert due.next_poll_at > timezone.now() + timedelta(minutes=4)


def test_the_poll_task_marks_a_down_server_unhealthy_and_backs_off():
    source = tracker_source_create(name="down", url=dead_url())

    assert tasks.tracker_source_poll_task.apply(args=[source.pk]).get() == 0

    source.refresh_from_db()
    assert source.health == TrackerSource.Health.UNHEALTHY
    assert "cannot be reached" in source.last_error
    # The retry delay (60 s after a first failure) and an interval past it.
    assert source.next_poll_at == source.last_failure_at + timedelta(seconds=60 + 5 * 60)
