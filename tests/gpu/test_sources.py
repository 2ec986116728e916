"""Polling metric sources: real HTTP servers on loopback, a down target, Prometheus' limits."""

import json
from datetime import timedelta

import pytest
import redis
from celery.exceptions import Retry
from django.conf import settings
from django_celery_beat.models import PeriodicTask

from apps.gpu import services, tasks
from apps.gpu.models import GpuHour, MetricSource
from costsite.celery import app as celery_app

from .helpers import at, hour_values
from .servers import LoopbackServer, closed_port_url, dcgm_text, prometheus_route

NOW = at("2026-07-14 10:30")


def source(**values) -> MetricSource:
    defaults = {"name": "exporter", "kind": MetricSource.Kind.DCGM, "interval_seconds": 30}
    return services.metric_source_create(**{**defaults, **values})


@pytest.fixture
def exporter():
    state = {"util": 40.0, "status": 200, "body": None}

    def route(path, query):
        if path != "/metrics":
            return 404, "text/plain", "404 page not found\n"
        body = state["body"] if state["body"] is not None else dcgm_text(util=state["util"])
        return state["status"], "text/plain; version=0.0.4", body

    with LoopbackServer(route) as server:
        server.state = state
        yield server


@pytest.fixture
def broker():
    """The Redis list of the imports queue (polls are routed there), emptied before and after."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.delete("imports")
    yield client
    client.delete("imports")


def test_a_scrape_of_a_live_exporter_is_rolled_up_and_the_source_is_healthy(organization, exporter):
    live = source(url=f"{exporter.url}/metrics")

    samples = services.metric_source_poll(source=live, now=NOW)
    exporter.state["util"] = 80.0
    services.metric_source_poll(source=live, now=NOW + timedelta(seconds=30))

    assert samples == 1
    row = hour_values("GPU-live-0", "2026-07-14 10:00")
    assert (row["samples"], row["util_mean"], row["memory_used_mib"]) == (2, 60.0, 2048.0)
    live.refresh_from_db()
    assert live.health == MetricSource.Health.HEALTHY
    assert (live.last_success_at, live.last_samples, live.last_error) == (
        NOW + timedelta(seconds=30),
        1,
        "",
    )
    assert live.next_poll_at == NOW + timedelta(seconds=60)
    assert exporter.requests == [("/metrics", {}), ("/metrics", {})]


def test_a_down_target_is_unhealthy_with_its_error_a_retry_is_queued_and_nothing_is_lost(
    organization, exporter, broker
):
    target = source(url=f"{exporter.url}/metrics")
    services.metric_source_poll(source=target, now=NOW)
    kept = list(GpuHour.objects.values("gpu_id", "hour", "samples", "util_mean", "state"))
    target.url = closed_port_url()
    target.save()

    # Run the task as a worker runs it, so that its retry goes to the broker.
    task = tasks.metric_source_poll_task
    task.push_request(
        id="poll-1", args=[target.pk], kwargs={}, retries=0, called_directly=False, is_eager=False
    )
    try:
        with pytest.raises(Retry) as retry:
            task.run(target.pk)
    finally:
        task.pop_request()

    target.refresh_from_db()
    assert target.health == MetricSource.Health.UNHEALTHY
    assert target.last_error.startswith(f"{target.url} cannot be reached: ")
    assert "Connection refused" in target.last_error
    assert target.consecutive_failures == 1
    assert retry.value.when == 30
    queued = [json.loads(message) for message in broker.lrange("imports", 0, -1)]
    assert [(m["headers"]["task"], m["headers"]["retries"]) for m in queued] == [
        ("apps.gpu.tasks.metric_source_poll_task", 1)
    ]
    assert queued[0]["headers"]["eta"] is not None
    # The next scheduled poll waits for the retry, and what was imported stays as it was.
    assert target.next_poll_at >= target.last_failure_at + timedelta(seconds=30 + 30)
    assert list(GpuHour.objects.values("gpu_id", "hour", "samples", "util_mean", "state")) == kept


def test_retries_back_off_doubling_up_to_fifteen_minutes():
    assert [services.retry_delay(failures=n) for n in (1, 2, 3, 4, 5, 6, 10)] == [
        30,
        60,
        120,
        240,
        480,
        900,
        900,
    ]


def test_an_exporter_answering_an_error_page_or_garbage_is_unhealthy_with_what_it_said(
    organization, exporter
):
    target = source(url=f"{exporter.url}/metrics")
    exporter.state.update(status=500, body="collector crashed")
    with pytest.raises(services.MetricSourceError):
        services.metric_source_poll(source=target, now=NOW)
    target.refresh_from_db()
    assert target.last_error == (
        f"{exporter.url}/metrics answered HTTP 500 Internal Server Error: collector crashed"
    )

    exporter.state.update(status=200, body="<html>login</html>\n")
    with pytest.raises(services.MetricSourceError):
        services.metric_source_poll(source=target, now=NOW)
    target.refresh_from_db()
    assert target.last_error.startswith(
        f"{exporter.url}/metrics: line 1: not Prometheus text format"
    )
    assert (target.health, target.consecutive_failures) == (MetricSource.Health.UNHEALTHY, 2)
    assert GpuHour.objects.count() == 0


def test_a_source_that_recovers_is_healthy_again_and_its_failures_reset(organization, exporter):
    target = source(url=f"{exporter.url}/metrics")
    exporter.state.update(status=503, body="busy")
    with pytest.raises(services.MetricSourceError):
        services.metric_source_poll(source=target, now=NOW)

    exporter.state.update(status=200, body=None)
    services.metric_source_poll(source=target, now=NOW + timedelta(minutes=1))

    target.refresh_from_db()
    assert (target.health, target.consecutive_failures, target.last_error) == (
        MetricSource.Health.HEALTHY,
        0,
        "",
    )


def pull_source(server, **values) -> MetricSource:
    return source(
        name="prometheus",
        kind=MetricSource.Kind.PROMETHEUS,
        url=server.url,
        step_seconds=values.pop("step_seconds", 60),
        **values,
    )


def test_a_prometheus_pull_is_cut_into_requests_under_eleven_thousand_points(organization):
    with LoopbackServer(prometheus_route()) as server:
        prom = pull_source(server, step_seconds=5)
        prom.pulled_until = at("2026-07-13 09:59:55")  # the next point is 2026-07-13 10:00:00
        prom.save()

        samples = services.metric_source_poll(source=prom, now=at("2026-07-14 10:00:07"))

    points = [
        (float(q["end"]) - float(q["start"])) / float(q["step"]) + 1 for _, q in server.requests
    ]
    assert max(points) <= 11_000
    metrics = {q["query"] for _, q in server.requests}
    assert metrics == set(services.PULL_METRICS)
    # A day at 5 s is 17,280 points: two requests per metric.
    assert len(server.requests) == 2 * len(services.PULL_METRICS)
    # From 10:00:00 yesterday to 10:00:00 today, the newest step still being in flight.
    assert samples == 17_280 + 1
    prom.refresh_from_db()
    assert prom.pulled_until == at("2026-07-14 10:00")
    assert prom.health == MetricSource.Health.HEALTHY
    assert hour_values("GPU-prom-0", "2026-07-13 10:00")["samples"] == 720
    assert hour_values("GPU-prom-0", "2026-07-13 10:00")["memory_total_mib"] == 23000.0


def test_a_pull_after_an_outage_starts_where_the_last_good_one_stopped(organization):
    down = {"now": False}
    with LoopbackServer(prometheus_route(fail=lambda query: down["now"])) as server:
        prom = pull_source(server, query_window_minutes=30)
        services.metric_source_poll(source=prom, now=at("2026-07-14 10:00:30"))
        prom.refresh_from_db()
        assert prom.pulled_until == at("2026-07-14 09:59")

        down["now"] = True
        with pytest.raises(services.MetricSourceError):
            services.metric_source_poll(source=prom, now=at("2026-07-14 10:30:30"))
        prom.refresh_from_db()
        assert prom.last_error.startswith(f"{server.url}/api/v1/query_range?query=")
        assert prom.last_error.endswith(
            "answered HTTP 503 Service Unavailable: unavailable: TSDB is not ready"
        )
        assert prom.pulled_until == at("2026-07-14 09:59")

        down["now"] = False
        services.metric_source_poll(source=prom, now=at("2026-07-14 11:00:30"))

    prom.refresh_from_db()
    assert prom.pulled_until == at("2026-07-14 10:59")
    # Every minute from 09:30 to 10:59 is there once: the outage lost nothing.
    assert hour_values("GPU-prom-0", "2026-07-14 09:00")["samples"] == 30
    assert hour_values("GPU-prom-0", "2026-07-14 10:00")["samples"] == 60


def test_a_pull_that_fails_halfway_keeps_the_windows_before_it(organization):
    def fail(query):
        return float(query["start"]) >= at("2026-07-13 00:00").timestamp()

    with LoopbackServer(prometheus_route(fail=fail)) as server:
        prom = pull_source(server, step_seconds=60)
        prom.pulled_until = at("2026-07-11 23:59")
        prom.save()
        with pytest.raises(services.MetricSourceError):
            services.metric_source_poll(source=prom, now=at("2026-07-14 00:00:30"))

    prom.refresh_from_db()
    # The first day (2026-07-12, one request per metric) is in; the second failed.
    assert prom.pulled_until == at("2026-07-13 00:00")
    assert GpuHour.objects.filter(hour__lt=at("2026-07-13 00:00")).count() == 24
    assert prom.health == MetricSource.Health.UNHEALTHY


def test_due_sources_are_claimed_once_and_paused_ones_not_at_all(organization):
    due = source(name="due", url="http://127.0.0.1:9/metrics")
    later = source(name="later", url="http://127.0.0.1:9/metrics")
    paused = source(name="paused", url="http://127.0.0.1:9/metrics")
    services.metric_source_pause(source=paused, paused=True)
    MetricSource.objects.filter(pk__in=[due.pk, paused.pk]).update(next_poll_at=NOW)
    MetricSource.objects.filter(pk=later.pk).update(next_poll_at=NOW + timedelta(minutes=5))

    assert services.metric_sources_claim_due(now=NOW + timedelta(seconds=1)) == [due.pk]
    assert services.metric_sources_claim_due(now=NOW + timedelta(seconds=1)) == []
    due.refresh_from_db()
    assert due.next_poll_at == NOW + timedelta(seconds=31)


def test_the_beat_tick_polls_every_due_source(organization, exporter):
    live = source(url=f"{exporter.url}/metrics")
    celery_app.conf.task_always_eager = True
    try:
        polled = tasks.metric_sources_poll_due.apply().get()
    finally:
        celery_app.conf.task_always_eager = settings.CELERY_TASK_ALWAYS_EAGER

    assert polled == [live.pk]
    live.refresh_from_db()
    assert (live.health, live.last_samples) == (MetricSource.Health.HEALTHY, 1)
    assert GpuHour.objects.get().samples == 1


def test_the_default_schedule_ticks_every_fifteen_seconds(db):
    tick = PeriodicTask.objects.get(name="gpu: poll due metric sources")

    assert tick.task == "apps.gpu.tasks.metric_sources_poll_due"
    assert (tick.interval.every, tick.interval.period, tick.enabled) == (15, "seconds", True)
