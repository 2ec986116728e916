"""The tests' worker runs only its own test's tasks. A worker killed mid-task (the fault tests)
leaves its message taken and unacknowledged on the broker; kombu's Redis transport puts such a
message back on its queue when a worker starts after the visibility timeout has passed. A suite
run an hour after another had its worker run a killed recompute of the earlier run besides its
own (two recomputes where the fault test expects one): the worker fixture drops them first."""

import json
import time

import pytest
from django.conf import settings

from apps.insights.models import RecomputeRun
from apps.insights.tasks import findings_recompute_task
from costsite.celery import app
from tests.celery_worker import broker_leftovers_purge

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

QUEUES = [*settings.CELERY_TASK_QUEUES_BY_KIND, "celery"]


def left_by_a_worker_killed_long_ago(reason: str) -> None:
    """Send a recompute and leave its message as a killed worker does: off its queue, in the
    broker's unacknowledged messages, taken longer ago than the visibility timeout."""
    findings_recompute_task.delay(reason=reason)
    with app.connection_for_write() as broker:
        channel = broker.default_channel
        client = channel.client
        taken = [(queue, client.rpop(queue)) for queue in QUEUES]
        [(queue, raw)] = [(queue, raw) for queue, raw in taken if raw is not None]
        payload = json.loads(raw)
        tag = payload["properties"]["delivery_tag"]
        client.hset(channel.unacked_key, tag, json.dumps([payload, "", queue]))
        taken_at = time.time() - channel.visibility_timeout - 60
        client.zadd(channel.unacked_index_key, {tag: taken_at})


def reasons_once_this_one_ran(reason: str) -> list[str]:
    """Send a recompute of `reason` to the worker, wait until it ran, and return the reasons of
    every recompute run so far (the worker runs one task at a time, in the order it took them)."""
    findings_recompute_task.delay(reason=reason)
    deadline = time.monotonic() + 60
    while not RecomputeRun.objects.filter(reason=reason, finished_at__isnull=False).exists():
        assert time.monotonic() < deadline, f"the worker did not run the recompute {reason!r}"
        time.sleep(0.05)
    return sorted(RecomputeRun.objects.values_list("reason", flat=True))


def test_a_worker_starting_after_the_visibility_timeout_runs_what_a_killed_one_left(
    celery_worker_factory,
):
    """Why the purge is needed: without it, the left message runs."""
    left_by_a_worker_killed_long_ago("left over")
    celery_worker_factory()
    assert reasons_once_this_one_ran("own") == ["left over", "own"]


def test_the_purge_drops_what_a_killed_worker_left_and_the_worker_runs_only_its_own(
    celery_worker_factory,
):
    left_by_a_worker_killed_long_ago("left over")
    broker_leftovers_purge(app, QUEUES)
    celery_worker_factory()
    assert reasons_once_this_one_ran("own") == ["own"]
