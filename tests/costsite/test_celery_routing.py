"""Each kind of work has its own queue (CELERY_TASK_ROUTES), and a task sent lands on it."""

import pytest
from django.conf import settings

from costsite.celery import app

EXPECTED = {
    "apps.billing.tasks.import_run_execute_task": "imports",
    "apps.billing.tasks.billing_sources_poll_due": "imports",
    "apps.billing.tasks.billing_source_poll_task": "imports",
    "apps.billing.tasks.billing_runs_reap_task": "imports",
    "apps.gpu.tasks.metric_sources_poll_due": "imports",
    "apps.gpu.tasks.metric_source_poll_task": "imports",
    "apps.gpu.tasks.traffic_source_poll_task": "imports",
    "apps.gpu.tasks.metric_import_execute_task": "imports",
    "apps.trackers.tasks.tracker_sources_poll_due": "imports",
    "apps.trackers.tasks.tracker_source_poll_task": "imports",
    "apps.billing.tasks.attribution_refresh_task": "attribution",
    "apps.gpu.tasks.gpu_days_rebuild_task": "attribution",
    "apps.insights.tasks.findings_recompute_task": "insights",
    "apps.insights.tasks.recompute_runs_reap_task": "insights",
    "apps.digests.tasks.digests_send_task": "digests",
    "apps.digests.tasks.alerts_check_task": "digests",
    "apps.digests.tasks.deliveries_reap_task": "digests",
}


def test_every_task_of_the_apps_is_routed_to_a_queue_of_its_kind():
    app.loader.import_default_modules()  # every app's tasks module, as a worker loads them
    ours = sorted(name for name in app.tasks if name.startswith("apps."))

    assert ours == sorted(EXPECTED)
    assert sorted(set(EXPECTED.values())) == ["attribution", "digests", "imports", "insights"]


@pytest.mark.parametrize(("task", "queue"), sorted(EXPECTED.items()))
def test_a_task_sent_lands_on_its_queue(task, queue):
    """Through Celery's own router, as `delay` uses it: the message's routing key and queue."""
    route = app.amqp.router.route({}, task, args=(), kwargs={})

    assert route["queue"].name == queue
    assert settings.CELERY_TASK_ROUTES[task] == {"queue": queue}


def test_every_default_schedule_names_a_routed_task():
    from costsite.schedules import DEFAULT_SCHEDULES

    for schedule in DEFAULT_SCHEDULES:
        assert schedule["task"] in settings.CELERY_TASK_ROUTES, schedule["name"]


QUEUES = sorted({*EXPECTED.values(), "celery"})


def _queue_lengths(channel) -> dict[str, int]:
    return {queue: channel.client.llen(queue) for queue in QUEUES}


def test_each_task_sent_to_redis_waits_on_its_own_queue():
    """No worker runs: each message stays in Redis on the list of its queue, and nowhere else."""
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        for queue in QUEUES:
            channel.client.delete(queue)
        try:
            for task, queue in sorted(EXPECTED.items()):
                before = _queue_lengths(channel)
                app.send_task(task, connection=connection)
                after = _queue_lengths(channel)
                grown = {name: after[name] - before[name] for name in QUEUES}
                assert grown == {name: int(name == queue) for name in QUEUES}, task
        finally:
            for queue in QUEUES:
                channel.client.delete(queue)
