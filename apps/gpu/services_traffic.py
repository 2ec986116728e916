"""Deployments' hourly traffic pulled from a Prometheus request counter (TrafficSource), through
the GPU app's Prometheus client (services._fetch, pull_windows) and written by the deployments
app's service: this app imports the deployments app, never the other way round.

A pull asks query_range for the source's PromQL with a step of one hour, each point on a whole
UTC hour: the point at T is the requests of the hour [T − 1 h, T) (what `increase(...[1h])`
says), written as that hour's requests (rounded to whole requests: increase() extrapolates to
the window's edges). Series of one answer are summed; NaN and ±Inf points are no figure. Only
whole hours are pulled (the hour still running waits), and a pull after an outage starts after
the last hour written, so nothing is lost and an hour pulled again replaces its figures.
"""

import json
import math
import tempfile
import urllib.parse
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.utils import timezone

from apps.deployments.services import TrafficFigures, deployment_traffic_record
from costsite.polling import polled_source_failed, polled_source_succeeded, polled_sources_claim_due

from .models import TrafficSource
from .services import (
    SPOOL_IN_MEMORY_BYTES,
    MetricSourceError,
    _fetch,
    pull_windows,
    retry_delay,
)

HOUR = timedelta(hours=1)
STEP_SECONDS = 3600


def _hour_floor(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def traffic_query_url(source: TrafficSource, start: datetime, end: datetime) -> str:
    query = urllib.parse.urlencode(
        {
            "query": source.requests_query,
            "start": f"{start.timestamp():.3f}",
            "end": f"{end.timestamp():.3f}",
            "step": str(STEP_SECONDS),
        }
    )
    return f"{source.url.rstrip('/')}/api/v1/query_range?{query}"


def requests_by_hour(stream, *, name: str) -> dict[datetime, int]:
    """A query_range answer's points summed over its series, by the hour before each point."""
    try:
        answer = json.load(stream)
    except (ValueError, UnicodeDecodeError) as error:
        raise MetricSourceError(f"{name}: not a Prometheus JSON answer ({error}).") from error
    if not isinstance(answer, dict) or answer.get("status") != "success":
        detail = answer.get("error", "") if isinstance(answer, dict) else ""
        raise MetricSourceError(f"{name}: Prometheus answered an error: {detail}".rstrip(": "))
    data = answer.get("data") or {}
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        got = data.get("resultType") if isinstance(data, dict) else type(data).__name__
        raise MetricSourceError(f"{name}: expected a matrix (query_range), got {got!r}.")
    result = data.get("result") or []
    if not isinstance(result, list) or not all(isinstance(series, dict) for series in result):
        raise MetricSourceError(f"{name}: the matrix's result is not a list of series.")
    totals: dict[datetime, float] = {}
    for series in result:
        values = series.get("values") or []
        if not isinstance(values, list):
            raise MetricSourceError(f"{name}: a series' values are not a list of points.")
        for point in values:
            if not isinstance(point, list) or len(point) != 2:
                raise MetricSourceError(f"{name}: the point {point!r} is not a [time, value] pair.")
            stamp, value = point
            try:
                number = float(value)
            except (TypeError, ValueError) as error:
                raise MetricSourceError(f"{name}: the value {value!r} is not a number.") from error
            if not math.isfinite(number):
                continue
            if number < 0:
                raise MetricSourceError(
                    f"{name}: {number} requests at {stamp}: a request count is never negative."
                )
            try:
                hour = datetime.fromtimestamp(float(stamp), tz=UTC) - HOUR
            except (TypeError, ValueError, OverflowError, OSError) as error:
                raise MetricSourceError(f"{name}: the time {stamp!r} is not a time.") from error
            totals[hour] = totals.get(hour, 0.0) + number
    return {
        hour: int(math.floor(total + 0.5))
        for hour, total in totals.items()
        if hour == _hour_floor(hour)
    }


def traffic_source_poll(*, source: TrafficSource, now: datetime | None = None) -> int:
    """Pull the whole hours since the last one written and store them; returns the hours written.
    Raises MetricSourceError (the source then shows the error and backs off) when Prometheus
    cannot be reached or answers something else; the hours of earlier windows stay written."""
    now = now or timezone.now()
    TrafficSource.objects.filter(pk=source.pk).update(last_attempt_at=now)
    try:
        written = _pull(source=source, now=now)
    except MetricSourceError as error:
        polled_source_failed(
            source=source,
            error=str(error),
            now=now,
            retry_seconds=retry_delay(failures=source.consecutive_failures + 1),
        )
        raise
    polled_source_succeeded(source=source, now=now, last_samples=written)
    return written


def _pull(*, source: TrafficSource, now: datetime) -> int:
    if urllib.parse.urlsplit(source.url).scheme not in ("http", "https"):
        raise MetricSourceError(f"{source.url}: only http and https URLs can be pulled.")
    current = _hour_floor(now)  # the hour still running: its point comes at its end
    first = (
        source.pulled_until + HOUR
        if source.pulled_until
        else current - timedelta(hours=source.query_window_hours)
    )
    # Points at the end of each hour, from the first hour wanted to the last whole one.
    start, latest = first + HOUR, current
    written = 0
    for window_start, window_end in pull_windows(
        start=start, end=latest, step_seconds=STEP_SECONDS
    ):
        url = traffic_query_url(source, window_start, window_end)
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY_BYTES) as spool:
            _fetch(url, spool)
            hours = requests_by_hour(spool, name=url)
        with transaction.atomic():
            stored = deployment_traffic_record(
                deployment=source.deployment,
                hours=[
                    TrafficFigures(hour=hour, requests=requests)
                    for hour, requests in sorted(hours.items())
                ],
            )
            # In the same transaction as the hours: the next poll starts after this window.
            TrafficSource.objects.filter(pk=source.pk).update(pulled_until=window_end - HOUR)
        source.pulled_until = window_end - HOUR
        written += stored.created + stored.updated
    return written


TRAFFIC_SOURCE_FIELDS = ("url", "requests_query", "interval_seconds", "query_window_hours")


def traffic_source_create(*, deployment, paused: bool = False, **values) -> TrafficSource:
    """A deployment's new traffic source, due for its first poll now (unless paused)."""
    unknown = set(values) - set(TRAFFIC_SOURCE_FIELDS)
    if unknown:
        raise TypeError(f"traffic_source_create() got unexpected fields {sorted(unknown)}")
    return TrafficSource.objects.create(
        deployment=deployment, is_paused=paused, next_poll_at=timezone.now(), **values
    )


@transaction.atomic
def traffic_source_update(
    *, source: TrafficSource, paused: bool | None = None, **values
) -> TrafficSource:
    """Change its settings; the next pull still starts after the last hour written (an hour
    pulled again replaces its figures). Resumed: due at the next tick."""
    unknown = set(values) - set(TRAFFIC_SOURCE_FIELDS)
    if unknown:
        raise TypeError(f"traffic_source_update() got unexpected fields {sorted(unknown)}")
    for name, value in values.items():
        setattr(source, name, value)
    if paused is not None and paused != source.is_paused:
        source.is_paused = paused
        if not paused:
            source.next_poll_at = timezone.now()
    source.save()
    return source


def traffic_sources_claim_due(*, now: datetime | None = None) -> list[int]:
    return polled_sources_claim_due(model=TrafficSource, now=now)
