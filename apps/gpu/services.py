"""Writes for GPU metrics: imports, metric sources and their polling, host-to-resource mappings."""

import contextlib
import http.client
import json
import logging
import os
import re
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import BinaryIO

from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from apps.accounts.models import Organization
from apps.projects.ports import spend_data_changed
from costsite.polling import (
    STALE_AFTER,
    polled_source_failed,
    polled_source_succeeded,
    polled_sources_claim_due,
)

from . import daily
from .formats import FORMATS, GpuInfo, GpuMetricsError, ParseContext, detect_format, parse
from .models import Gpu, GpuHour, HostMapping, MetricImport, MetricSource
from .rollup import HourRow, RollupBuilder

logger = logging.getLogger(__name__)

# One PostgreSQL advisory lock for every write to the GPU rollup: an import reads the GPU-hours it
# merges into, so two imports touching the same hour at once would each miss the other's samples.
# Imports are short (a scrape is milliseconds, a week of 64 GPUs a few seconds), so one lock is
# simpler than locking per GPU and costs nothing a person would notice.
ROLLUP_LOCK = 0x67707531
# A loading import beats this often, well inside STALE_AFTER.
HEARTBEAT_EVERY_SECONDS = 5.0

# Metrics a Prometheus pull asks for, in order. Each response is one metric, as the importer
# reads it; the rollup prefers the engine-active ratio over GPU_UTIL wherever both exist.
PULL_METRICS = (
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_POWER_USAGE",
)
# Prometheus refuses a query_range of more than 11,000 points per series.
MAX_POINTS_PER_SERIES = 11_000
MAX_PULL_SECONDS = 86_400  # a day per request, as Prometheus' own docs advise
MAX_PULL_CHUNKS = 7  # a poll catches up at most a week; the next poll goes on from there
HTTP_TIMEOUT_SECONDS = 30
MAX_SCRAPE_BYTES = 64 * 1024 * 1024
SPOOL_IN_MEMORY_BYTES = 8 * 1024 * 1024


class MetricSourceError(Exception):
    """A poll failed: the target is down, refused, or answered with what is not metrics."""


@dataclass
class MetricInput:
    """One stream of metrics and what its parser needs to know about it."""

    name: str
    format: str
    open: Callable[[], contextlib.AbstractContextManager[BinaryIO]]
    host: str = ""
    time_zone: str = "UTC"
    taken_at: datetime | None = None


@dataclass
class ImportOutcome:
    samples: int = 0
    gpus: int = 0
    hours: int = 0
    formats: list[str] = field(default_factory=list)


def hour_start(hour: int) -> datetime:
    return datetime.fromtimestamp(hour * 3600, tz=UTC)


def mig_share(*, profile: str, model_name: str) -> float:
    """A MIG instance's compute slices over its GPU's: `3g.40gb` on an H100 is 3/7 of it."""
    match = re.match(r"(\d+)g\.", profile or "")
    if not match:
        return 1.0
    slices = 4 if "A30" in (model_name or "") else 7
    return min(1.0, int(match.group(1)) / slices)


class _GpuResolver:
    """GpuInfo -> GPU id, creating GPUs (and the physical parent of a MIG instance) on first sight
    and keeping host, index, model and labels up to date with what the data says now."""

    FIELDS = ("host", "index", "model_name", "mig_profile", "resource_label", "workload")

    def __init__(self):
        self.ids: dict[tuple[str, str], int] = {}
        self.parents: dict[int, int] = {}
        # The stored GPUs of each host met, read at once when the host is first met: a host's
        # eight GPUs (and their MIG instances) cost one query, not one each.
        self.hosts_read: set[str] = set()
        self.stored: dict[tuple[str, str], Gpu] = {}
        self.seen: dict[int, list[int]] = {}  # gpu id -> [first hour, last hour] this import
        # A GPU appeared, or one's host, label, parent or model changed: how GPUs join the bill
        # (or group) moved, so the whole daily rollup is out of date, not only the days written.
        self.joins_changed = False

    def __call__(self, info: GpuInfo) -> int:
        key = (info.uuid, info.mig_instance)
        if key in self.ids:
            return self.ids[key]
        parent_id = None
        if info.mig_instance:
            parent_id = self(
                GpuInfo(
                    uuid=info.uuid,
                    host=info.host,
                    index=info.index,
                    model_name=info.model_name,
                    resource_label=info.resource_label,
                )
            )
        values = {name: getattr(info, name) for name in self.FIELDS}
        if info.mig_instance:
            values["share"] = mig_share(profile=info.mig_profile, model_name=info.model_name)
        gpu, created = self._stored(info), False
        if gpu is None:  # new, or last seen on another host
            gpu, created = Gpu.objects.get_or_create(
                uuid=info.uuid,
                mig_instance=info.mig_instance,
                defaults={**values, "parent_id": parent_id},
            )
        if created:
            self.joins_changed = True
        if not created:
            # What the data says now wins, except that a blank label never erases a known one.
            changed = {
                name: value
                for name, value in values.items()
                if value not in ("", None) and getattr(gpu, name) != value
            }
            if info.workload == "" and gpu.workload:
                changed["workload"] = ""  # no pod on it now: it is idle, say so
            if parent_id and gpu.parent_id != parent_id:
                changed["parent_id"] = parent_id
            if changed:
                Gpu.objects.filter(pk=gpu.pk).update(**changed)
                if {"host", "resource_label", "parent_id", "model_name"} & set(changed):
                    self.joins_changed = True
        self.ids[key] = gpu.pk
        self.parents[gpu.pk] = parent_id or gpu.pk
        return gpu.pk

    def _stored(self, info: GpuInfo) -> Gpu | None:
        if info.host and info.host not in self.hosts_read:
            self.hosts_read.add(info.host)
            for gpu in Gpu.objects.filter(host=info.host):
                self.stored[(gpu.uuid, gpu.mig_instance)] = gpu
        return self.stored.pop((info.uuid, info.mig_instance), None)

    def physical(self, gpu_id: int) -> int:
        return self.parents.get(gpu_id, gpu_id)

    def note_hours(self, rows: list[HourRow]) -> None:
        for row in rows:
            span = self.seen.setdefault(row.gpu_id, [row.hour, row.hour])
            span[0] = min(span[0], row.hour)
            span[1] = max(span[1], row.hour)

    def save_seen(self) -> None:
        for gpu in Gpu.objects.filter(pk__in=self.seen):
            first, last = self.seen[gpu.pk]
            first_at, last_at = hour_start(first), hour_start(last) + timedelta(hours=1)
            changed = {}
            if gpu.first_seen_at is None or first_at < gpu.first_seen_at:
                changed["first_seen_at"] = first_at
            if gpu.last_seen_at is None or last_at > gpu.last_seen_at:
                changed["last_seen_at"] = last_at
            if changed:
                Gpu.objects.filter(pk=gpu.pk).update(**changed)


def _load_hours(keys: set[tuple[int, int]]) -> dict[tuple[int, int], dict]:
    hours = [hour for _, hour in keys]
    rows = GpuHour.objects.filter(
        gpu_id__in={gpu for gpu, _ in keys},
        hour__gte=hour_start(min(hours)),
        hour__lte=hour_start(max(hours)),
    ).values_list("gpu_id", "hour", "state")
    found = {}
    for gpu_id, hour, state in rows:
        key = (gpu_id, int(hour.timestamp()) // 3600)
        if key in keys:
            found[key] = state
    return found


WRITE_BATCH = 1000
WRITTEN_FIELDS = [
    "samples",
    "util_samples",
    "util_mean",
    "util_max",
    "idle_share",
    "memory_used_mib",
    "memory_used_max_mib",
    "memory_total_mib",
    "power_watts",
    "power_max_watts",
    "idle_threshold_percent",
    "state",
    "updated_at",
]


def _row_values(row: HourRow, threshold: Decimal, now: datetime) -> tuple:
    return (
        row.gpu_id,
        hour_start(row.hour),
        row.samples,
        row.util_samples,
        row.util_mean,
        row.util_max,
        row.idle_share,
        row.memory_used_mib,
        row.memory_used_max_mib,
        row.memory_total_mib,
        row.power_watts,
        row.power_max_watts,
        threshold,
        row.state,
        now,
    )


ROW_COLUMNS = ["gpu_id", "hour", *WRITTEN_FIELDS]


def _write_hours_orm(rows: list[HourRow], threshold: Decimal) -> None:
    """The portable path (SQLite for the demo): upserts through the ORM, a slice at a time, since
    model instances for every row at once would cost more memory than the whole parse."""
    now = timezone.now()
    for first in range(0, len(rows), WRITE_BATCH):
        GpuHour.objects.bulk_create(
            [
                GpuHour(**dict(zip(ROW_COLUMNS, _row_values(row, threshold, now), strict=True)))
                for row in rows[first : first + WRITE_BATCH]
            ],
            update_conflicts=True,
            unique_fields=["gpu", "hour"],
            update_fields=WRITTEN_FIELDS,
        )


def _write_hours_copy(rows: list[HourRow], threshold: Decimal) -> None:
    """PostgreSQL's fast path: COPY into a temporary table, then one INSERT ... ON CONFLICT."""
    now = timezone.now()
    columns = ", ".join(ROW_COLUMNS)
    updates = ", ".join(f"{name} = EXCLUDED.{name}" for name in ROW_COLUMNS[2:])
    table = GpuHour._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMPORARY TABLE IF NOT EXISTS gpu_hour_stage ON COMMIT DELETE ROWS AS "
            f"SELECT {columns} FROM {table} WITH NO DATA"
        )
        with cursor.cursor.copy(f"COPY gpu_hour_stage ({columns}) FROM STDIN") as copy:
            for row in rows:
                values = list(_row_values(row, threshold, now))
                values[13] = json.dumps(values[13])
                copy.write_row(values)
        cursor.execute(
            f"INSERT INTO {table} ({columns}) SELECT {columns} FROM gpu_hour_stage "
            f"ON CONFLICT (gpu_id, hour) DO UPDATE SET {updates}"
        )
        cursor.execute("TRUNCATE gpu_hour_stage")


# None: COPY on PostgreSQL, the ORM elsewhere. Tests set it to run either path on PostgreSQL.
USE_COPY: bool | None = None


def _hour_writer(threshold: Decimal, resolver: "_GpuResolver") -> Callable[[list[HourRow]], None]:
    use_copy = connection.vendor == "postgresql" if USE_COPY is None else USE_COPY
    write_rows = _write_hours_copy if use_copy else _write_hours_orm

    def write(rows: list[HourRow]) -> None:
        resolver.note_hours(rows)
        write_rows(sorted(rows, key=lambda row: (row.gpu_id, row.hour)), threshold)

    return write


def _lock_rollup() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ROLLUP_LOCK])


@transaction.atomic
def gpu_metrics_load(
    *, inputs: list[MetricInput], beat: Callable[[], None] | None = None
) -> ImportOutcome:
    """Parse `inputs` and merge them into the hourly rollup as one unit: all or nothing.

    Raises GpuMetricsError (naming the file, and the line where it can) on bad input; nothing of
    the unit is then written. `beat` is called after every parsed batch (an import's heartbeat).
    """
    _lock_rollup()
    threshold = Organization.get().idle_threshold_percent
    resolver = _GpuResolver()
    builder = RollupBuilder(
        idle_threshold=float(threshold),
        load=_load_hours,
        write=_hour_writer(threshold, resolver),
        physical=resolver.physical,
    )
    outcome = ImportOutcome()
    for item in inputs:
        context = ParseContext(
            name=item.name,
            gpu_id=resolver,
            host=item.host,
            time_zone=item.time_zone,
            taken_at=item.taken_at,
        )
        with item.open() as stream:
            for batch in parse(item.format, stream, context=context):
                builder.add(batch)
                if beat is not None:
                    beat()
        outcome.formats.append(item.format)
    builder.flush()
    resolver.save_seen()
    packed = builder.physical_hours()
    outcome.samples = builder.samples
    outcome.hours = len(packed)
    outcome.gpus = len(set((packed >> 32).tolist()))
    if len(packed):
        hours = packed & 0xFFFFFFFF
        start = hour_start(int(hours.min())).date()
        end = hour_start(int(hours.max())).date() + timedelta(days=1)
        if resolver.joins_changed:
            daily.days_mark_all_later()
        else:
            # The days written are rebuilt now, in this transaction: the fleet page never reads
            # them stale, and the first request after an import does not pay for them.
            daily.days_mark(start=start, end=end)
            daily.days_rebuild()
        spend_data_changed.announce(start=start, end=end, reason="gpu_import")
    return outcome


# Imports of files (the command, a task) ------------------------------------------------------


def metric_import_create(
    *,
    path: str,
    requested_format: str = "auto",
    host: str = "",
    time_zone: str = "",
    taken_at: datetime | None = None,
    created_by=None,
) -> MetricImport:
    if requested_format != "auto" and requested_format not in FORMATS:
        raise ValueError(f"Unknown format {requested_format!r}; one of auto, {', '.join(FORMATS)}.")
    return MetricImport.objects.create(
        path=str(path),
        requested_format=requested_format,
        host=host,
        time_zone=time_zone,
        taken_at=taken_at,
        created_by=created_by,
    )


def _detect_file_format(path: str) -> str:
    with open(path, "rb") as handle:
        head = handle.read(4096)
    fmt = detect_format(head)
    if fmt is None:
        raise GpuMetricsError(
            f"{path}: cannot tell the format from its start (not dcgm-exporter text, Prometheus "
            "JSON or an nvidia-smi CSV header); pass --format."
        )
    return fmt


class _MetricImportBeat:
    """An import's sign of life while it loads, at most every HEARTBEAT_EVERY_SECONDS.

    Through the `progress` connection on PostgreSQL, which commits at once: the load runs in one
    transaction, and a heartbeat written inside it would not be seen by another worker until the
    end. Advice only: a beat that fails never fails the import."""

    def __init__(self, metric_import: MetricImport):
        self.pk = metric_import.pk
        self.last = time.monotonic()  # the claim has just beaten

    def __call__(self) -> None:
        moment = time.monotonic()
        if moment - self.last < HEARTBEAT_EVERY_SECONDS:
            return
        self.last = moment
        alias = "progress" if connection.vendor == "postgresql" else "default"
        try:
            MetricImport.objects.using(alias).filter(pk=self.pk).update(heartbeat_at=timezone.now())
        except Exception:
            logger.warning("GPU metrics import %s: heartbeat not written", self.pk, exc_info=True)


def metric_import_execute(*, metric_import: MetricImport) -> MetricImport:
    """Run a queued import. Claimed with a conditional UPDATE, so a retried task never runs it
    twice; ends succeeded, unchanged (every sample was counted already) or failed.

    As billing's runs: a running import whose process stopped beating (a worker killed mid-run,
    its message redelivered) is claimed again. Its samples, if any were stored, are counted once
    (the rollup keeps what each hour has seen), so the second run ends unchanged or adds the
    rest."""
    now = timezone.now()
    claimed = (
        MetricImport.objects.filter(pk=metric_import.pk)
        .filter(
            Q(status=MetricImport.Status.QUEUED)
            | Q(status=MetricImport.Status.RUNNING, heartbeat_at__lt=now - STALE_AFTER)
            # Running since before imports had a heartbeat: judged by when it started.
            | Q(
                status=MetricImport.Status.RUNNING,
                heartbeat_at__isnull=True,
                started_at__lt=now - STALE_AFTER,
            )
        )
        .update(
            status=MetricImport.Status.RUNNING,
            started_at=now,
            heartbeat_at=now,
            finished_at=None,
            error="",
        )
    )
    metric_import.refresh_from_db()
    if not claimed:
        return metric_import
    path = metric_import.path
    try:
        if not os.path.isfile(path):
            raise GpuMetricsError(f"{path}: no such file.")
        fmt = metric_import.requested_format
        if fmt == "auto":
            fmt = _detect_file_format(path)
        metric_import.format = fmt
        taken_at = metric_import.taken_at or datetime.fromtimestamp(os.path.getmtime(path), tz=UTC)
        outcome = gpu_metrics_load(
            inputs=[
                MetricInput(
                    name=path,
                    format=fmt,
                    open=lambda: open(path, "rb"),  # noqa: SIM115 - closed by the loader
                    host=metric_import.host,
                    time_zone=metric_import.time_zone or Organization.get().time_zone,
                    taken_at=taken_at,
                )
            ],
            beat=_MetricImportBeat(metric_import),
        )
    except (GpuMetricsError, OSError) as exc:
        metric_import.status = MetricImport.Status.FAILED
        metric_import.error = str(exc)
    else:
        metric_import.samples = outcome.samples
        metric_import.gpus = outcome.gpus
        metric_import.hours = outcome.hours
        metric_import.status = (
            MetricImport.Status.SUCCEEDED if outcome.samples else MetricImport.Status.UNCHANGED
        )
    metric_import.finished_at = timezone.now()
    metric_import.save()
    return metric_import


# Metric sources ---------------------------------------------------------------------------------

SOURCE_FIELDS = (
    "name",
    "kind",
    "url",
    "host",
    "series_selector",
    "interval_seconds",
    "step_seconds",
    "query_window_minutes",
)


@transaction.atomic
def metric_source_create(
    *,
    name: str,
    kind: str,
    url: str,
    host: str = "",
    series_selector: str = "",
    interval_seconds: int = 60,
    step_seconds: int = 60,
    query_window_minutes: int = 60,
) -> MetricSource:
    return MetricSource.objects.create(
        name=name,
        kind=kind,
        url=url,
        host=host,
        series_selector=series_selector,
        interval_seconds=interval_seconds,
        step_seconds=step_seconds,
        query_window_minutes=query_window_minutes,
        next_poll_at=timezone.now(),
    )


@transaction.atomic
def metric_source_update(*, source: MetricSource, **values) -> MetricSource:
    unknown = set(values) - set(SOURCE_FIELDS)
    if unknown:
        raise TypeError(f"metric_source_update() got unexpected fields {sorted(unknown)}")
    for name, value in values.items():
        setattr(source, name, value)
    source.save()
    return source


@transaction.atomic
def metric_source_pause(*, source: MetricSource, paused: bool) -> MetricSource:
    source.is_paused = paused
    if not paused:
        source.next_poll_at = timezone.now()  # resumed: poll at the next tick
    source.save(update_fields=["is_paused", "next_poll_at", "updated_at"])
    return source


def retry_delay(*, failures: int) -> int:
    """Seconds before polling a failing source again: 30 s, doubling, at most 15 minutes."""
    return min(30 * 2 ** max(failures - 1, 0), 900)


def metric_sources_claim_due(*, now: datetime | None = None) -> list[int]:
    """Ids of the sources due for a poll, each claimed (costsite/polling.py)."""
    return polled_sources_claim_due(model=MetricSource, now=now)


def metric_source_poll(*, source: MetricSource, now: datetime | None = None) -> int:
    """Scrape or pull `source` once and import what it returns; record its health either way.

    Returns the samples counted. Raises MetricSourceError when the target is down or answers with
    something that is not metrics: the source is then marked unhealthy with the error, its next
    poll is put off by `retry_delay`, and nothing imported before is touched.
    """
    now = now or timezone.now()
    MetricSource.objects.filter(pk=source.pk).update(last_attempt_at=now)
    try:
        if source.kind == MetricSource.Kind.DCGM:
            samples = _scrape(source=source, now=now)
        else:
            samples = _pull(source=source, now=now)
    except (MetricSourceError, GpuMetricsError) as exc:
        polled_source_failed(
            source=source,
            error=str(exc),
            now=now,
            retry_seconds=retry_delay(failures=source.consecutive_failures + 1),
        )
        raise MetricSourceError(str(exc)) from exc
    polled_source_succeeded(source=source, now=now, last_samples=samples)
    return samples


def _describe_url_error(url: str, exc: Exception) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        body = b""
        with contextlib.suppress(OSError):
            body = exc.read(4096)
        detail = ""
        with contextlib.suppress(ValueError, AttributeError):
            answer = json.loads(body)
            detail = f": {answer.get('errorType', 'error')}: {answer.get('error', '')}"
        if not detail and body:
            detail = f": {body.decode('utf-8', 'replace').strip()[:200]}"
        return f"{url} answered HTTP {exc.code} {exc.reason}{detail}"
    if isinstance(exc, urllib.error.URLError):
        return f"{url} cannot be reached: {exc.reason}"
    return f"{url} cannot be reached: {exc}"


def _fetch(url: str, spool) -> None:
    """GET `url` into the file `spool`; MetricSourceError when it cannot."""
    # Only http(s) reaches here: the model's validator and _scrape/_pull refuse the rest.
    request = urllib.request.Request(url, headers={"Accept": "application/json, text/plain"})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_SECONDS) as response:  # noqa: S310
            copied = 0
            while chunk := response.read(1 << 20):
                copied += len(chunk)
                if copied > MAX_SCRAPE_BYTES and "/metrics" in url:
                    raise MetricSourceError(f"{url} sent more than {MAX_SCRAPE_BYTES:,} bytes.")
                spool.write(chunk)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise MetricSourceError(_describe_url_error(url, exc)) from exc
    except http.client.HTTPException as exc:
        # No valid HTTP, or a connection closed in the middle of the body.
        raise MetricSourceError(
            f"{url} answered a broken HTTP response ({exc.__class__.__name__})."
        ) from exc
    spool.seek(0)


@contextlib.contextmanager
def _reopen(spool) -> Iterator[BinaryIO]:
    spool.seek(0)
    yield spool


def _scrape(*, source: MetricSource, now: datetime) -> int:
    if urllib.parse.urlsplit(source.url).scheme not in ("http", "https"):
        raise MetricSourceError(f"{source.url}: only http and https URLs can be scraped.")
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY_BYTES) as spool:
        _fetch(source.url, spool)
        outcome = gpu_metrics_load(
            inputs=[
                MetricInput(
                    name=source.url,
                    format="dcgm",
                    open=lambda: _reopen(spool),
                    host=source.fallback_host,
                    taken_at=now,
                )
            ]
        )
    return outcome.samples


def pull_windows(
    *, start: datetime, end: datetime, step_seconds: int
) -> list[tuple[datetime, datetime]]:
    """[start, end] cut into query_range windows under Prometheus' 11,000 points per series (and
    a day at most); each window's last point is a step before the next window's first."""
    span = min(MAX_PULL_SECONDS, step_seconds * (MAX_POINTS_PER_SERIES - 1))
    step = timedelta(seconds=step_seconds)
    windows = []
    cursor = start
    while cursor <= end and len(windows) < MAX_PULL_CHUNKS:
        last = min(end, cursor + timedelta(seconds=span))
        windows.append((cursor, last))
        cursor = last + step
    return windows


def _query_url(source: MetricSource, metric: str, start: datetime, end: datetime) -> str:
    selector = f"{metric}{{{source.series_selector}}}" if source.series_selector else metric
    query = urllib.parse.urlencode(
        {
            "query": selector,
            "start": f"{start.timestamp():.3f}",
            "end": f"{end.timestamp():.3f}",
            "step": str(source.step_seconds),
        }
    )
    return f"{source.url.rstrip('/')}/api/v1/query_range?{query}"


def _pull(*, source: MetricSource, now: datetime) -> int:
    if urllib.parse.urlsplit(source.url).scheme not in ("http", "https"):
        raise MetricSourceError(f"{source.url}: only http and https URLs can be pulled.")
    step = source.step_seconds
    # Points sit on multiples of the step; the newest step may still be arriving, so it waits.
    latest = datetime.fromtimestamp((int(now.timestamp()) // step - 1) * step, tz=UTC)
    if source.pulled_until:
        start = source.pulled_until + timedelta(seconds=step)
    else:
        first = int((now - timedelta(minutes=source.query_window_minutes)).timestamp())
        start = datetime.fromtimestamp(first // step * step, tz=UTC)
    samples = 0
    for window_start, window_end in pull_windows(start=start, end=latest, step_seconds=step):
        with contextlib.ExitStack() as stack:
            inputs = []
            for metric in PULL_METRICS:
                spool = stack.enter_context(
                    tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY_BYTES)
                )
                url = _query_url(source, metric, window_start, window_end)
                _fetch(url, spool)
                inputs.append(
                    MetricInput(
                        name=f"{source.name} {metric} {window_start:%Y-%m-%d %H:%M}",
                        format="prometheus-json",
                        open=lambda spool=spool: _reopen(spool),
                        # Not the Prometheus server's own host: the series' labels name theirs.
                        host=source.host,
                    )
                )
            with transaction.atomic():
                outcome = gpu_metrics_load(inputs=inputs)
                # Moved on in the same transaction as the samples: a failure later in this poll
                # keeps every window before it, and the next poll starts after the last good one.
                MetricSource.objects.filter(pk=source.pk).update(pulled_until=window_end)
        samples += outcome.samples
    return samples


# Host-to-resource mappings ----------------------------------------------------------------------


@transaction.atomic
def host_mapping_set(
    *, host: str, resource_id: str, note: str = "", created_by=None
) -> HostMapping:
    """Map `host` to the billed resource `resource_id`, replacing any mapping it had."""
    mapping, created = HostMapping.objects.get_or_create(
        host=host.strip(),
        defaults={"resource_id": resource_id.strip(), "note": note, "created_by": created_by},
    )
    if not created:
        mapping.resource_id = resource_id.strip()
        mapping.note = note
        mapping.save(update_fields=["resource_id", "note", "updated_at"])
    daily.days_mark_all_later()
    return mapping


def host_mapping_create(
    *, host: str, resource_id: str, note: str = "", created_by=None
) -> HostMapping | None:
    """Map `host`, which has no mapping yet, to `resource_id`. None when the host turns out to be
    mapped already (a request that lost a race to map it: its look-up saw no mapping); the caller
    then treats the call as a change of that mapping, with the rules of a change."""
    try:
        with transaction.atomic():
            mapping = HostMapping.objects.create(
                host=host.strip(), resource_id=resource_id.strip(), note=note, created_by=created_by
            )
            daily.days_mark_all_later()
            return mapping
    except IntegrityError:
        return None


@transaction.atomic
def host_mapping_update(
    *, mapping: HostMapping, host: str, resource_id: str, note: str = ""
) -> HostMapping:
    mapping.host = host.strip()
    mapping.resource_id = resource_id.strip()
    mapping.note = note
    mapping.save(update_fields=["host", "resource_id", "note", "updated_at"])
    daily.days_mark_all_later()
    return mapping


@transaction.atomic
def host_mapping_delete(*, mapping: HostMapping) -> None:
    mapping.delete()
    daily.days_mark_all_later()


def gpu_days_rebuild() -> None:
    """Bring the fleet page's daily rollup up to date (apps/gpu/daily.py)."""
    daily.days_rebuild()
