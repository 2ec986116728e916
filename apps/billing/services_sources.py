"""Writes for billing sources: create, edit, pause; claim the due ones; poll one.

A poll lists the source's files (`sources.py`), groups them into deliveries and starts one import
run per delivery that is new or changed:
- a CUR manifest (`*-Manifest.json`) and the parts it lists are one delivery (the importer takes
  the manifest and finds the parts beside it); two manifests listing the same parts (AWS writes
  one per assembly and one per period) are one delivery too. Any other file is one on its own;
- a file is new when the source never saw its key, changed when its signature (ETag, or size and
  modification time) differs from the one recorded when it was last imported (SourceObject).
  A delivery runs when any of its files is new or changed; its files are recorded with the run in
  the same transaction, so a file is recorded only when its run exists, and an unchanged file is
  never imported again. The importer's own fingerprint makes a changed file with the same content
  `unchanged`: both layers matter;
- runs are started oldest delivery first, so that where several deliveries of one account and
  period arrive together the newest is imported last and stays current;
- a folder's files are imported where they are; a bucket's objects are first streamed to a spool
  folder under COSTSITE_DATA_DIR/sources/<source>/<poll>/ (removed by a later poll once the runs
  are done).

A source that cannot be listed (folder missing, bucket unreachable, credentials refused) fails the
poll: the poll records the error, the source turns unhealthy and backs off (`retry_delay`), and
whatever was not imported yet is found again by the next good poll, since only imported files are
recorded.
"""

import json
import logging
import posixpath
import re
import shutil
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from costsite.polling import (
    polled_source_failed,
    polled_source_succeeded,
    polled_sources_claim_due,
)

from . import sources
from .models import BillingSource, ImportRun, SourceObject, SourcePoll
from .services import import_run_create, import_run_enqueue
from .sources import ListedFile, Listing, SourceUnavailable

logger = logging.getLogger(__name__)

SOURCE_FIELDS = (
    "name",
    "kind",
    "path",
    "bucket",
    "prefix",
    "endpoint_url",
    "region",
    "format",
    "interval_minutes",
    "freshness_lag_days",
    "api_key_env",
    "restate_days",
)
NEW, CHANGED, UNCHANGED = "new", "changed", "unchanged"
RUNS_BUSY = (ImportRun.Status.QUEUED, ImportRun.Status.RUNNING)


# -- sources ---------------------------------------------------------------------------------


@transaction.atomic
def billing_source_create(
    *,
    name: str,
    kind: str,
    path: str = "",
    bucket: str = "",
    prefix: str = "",
    endpoint_url: str = "",
    region: str = "",
    format: str = "auto",  # noqa: A002 - the model's field name
    interval_minutes: int = 60,
    freshness_lag_days: int | None = None,
    api_key_env: str = "",
    restate_days: int = 3,
    is_paused: bool = False,
) -> BillingSource:
    """A new source, due for its first poll at the next tick (unless paused)."""
    return BillingSource.objects.create(
        name=name,
        kind=kind,
        path=path,
        bucket=bucket,
        prefix=prefix,
        endpoint_url=endpoint_url,
        region=region,
        format=format,
        interval_minutes=interval_minutes,
        freshness_lag_days=freshness_lag_days,
        api_key_env=api_key_env,
        restate_days=restate_days,
        is_paused=is_paused,
        next_poll_at=timezone.now(),
    )


@transaction.atomic
def billing_source_update(*, source: BillingSource, **values) -> BillingSource:
    unknown = set(values) - set(SOURCE_FIELDS)
    if unknown:
        raise TypeError(f"billing_source_update() got unexpected fields {sorted(unknown)}")
    for name, value in values.items():
        setattr(source, name, value)
    source.save()
    return source


@transaction.atomic
def billing_source_pause(*, source: BillingSource, paused: bool) -> BillingSource:
    source.is_paused = paused
    if not paused:
        source.next_poll_at = timezone.now()  # resumed: poll at the next tick
    source.save(update_fields=["is_paused", "next_poll_at", "updated_at"])
    return source


def retry_delay(*, failures: int) -> int:
    """Seconds before polling a failing source again: a minute, doubling, at most an hour (a
    bill arrives a few times a day, so an hour late costs nothing)."""
    return min(60 * 2 ** max(failures - 1, 0), 3600)


def billing_sources_claim_due(*, now: datetime | None = None) -> list[int]:
    """Ids of the sources due for a poll, each claimed (costsite/polling.py)."""
    return polled_sources_claim_due(model=BillingSource, now=now)


# -- polling ---------------------------------------------------------------------------------


@dataclass
class _Delivery:
    """Files imported together: a manifest (or a lone file) first, then the manifest's parts."""

    files: list[ListedFile]

    @property
    def main(self) -> ListedFile:
        return self.files[0]

    @property
    def newest(self) -> datetime | None:
        moments = [f.last_modified for f in self.files if f.last_modified]
        return max(moments) if moments else None


@dataclass
class _Tally:
    found: int = 0
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    runs: int = 0
    counted: set = field(default_factory=set)

    def count(self, key: str, state: str) -> None:
        if key in self.counted:
            return
        self.counted.add(key)
        self.found += 1
        setattr(self, state, getattr(self, state) + 1)


def billing_source_poll(
    *,
    source: BillingSource,
    now: datetime | None = None,
    period_start: date | None = None,
    period_end: date | None = None,
    requested_by: AbstractBaseUser | None = None,
) -> SourcePoll:
    """Look at the source once and start a run for each new or changed delivery.

    With a period (a re-run): only the deliveries of billing periods starting in
    [period_start, period_end), each imported again whatever was seen before (the importer still
    leaves a delivery it has loaded before `unchanged`). A file's period is the one its last run
    loaded (or found unchanged); a file no run ever got that far with is placed by the period in
    its key (`20250101-20250201/`, `year=2025/month=1/`, `BILLING_PERIOD=2025-01`, `2025-01`), and
    left out when its key has none.

    Raises SourceUnavailable when the source cannot be listed or read; the poll and the source
    record it first.
    """
    now = now or timezone.now()
    rerun = period_start is not None and period_end is not None
    poll = SourcePoll.objects.create(
        source=source,
        period_start=period_start if rerun else None,
        period_end=period_end if rerun else None,
        requested_by=requested_by,
    )
    BillingSource.objects.filter(pk=source.pk).update(last_attempt_at=now)
    _spool_sweep(source=source, keep=poll)
    tally = _Tally()
    try:
        listing = sources.listing_of(source, now=now)
        seen = {
            o.key: o
            for o in SourceObject.objects.filter(source=source).select_related("import_run")
        }
        for delivery in _deliveries(source, listing):
            if rerun and not _in_period(delivery, seen, period_start, period_end):
                continue
            states = {f.key: _state(f, seen.get(f.key)) for f in delivery.files}
            for key, state in states.items():
                tally.count(key, state)
            due = rerun or any(state != UNCHANGED for state in states.values())
            started = due and _run_start(
                source=source, poll=poll, delivery=delivery, force=rerun, now=now
            )
            if started:
                tally.runs += 1
    except SourceUnavailable as exc:
        _poll_failed(source=source, poll=poll, tally=tally, error=str(exc), now=now)
        raise
    except Exception as exc:
        logger.exception("billing source %s: poll %s failed", source.pk, poll.pk)
        error = f"Internal error ({exc.__class__.__name__}: {exc})."
        _poll_failed(source=source, poll=poll, tally=tally, error=error, now=now)
        raise
    _poll_succeeded(source=source, poll=poll, tally=tally, now=now)
    poll.refresh_from_db()
    return poll


def _state(listed: ListedFile, seen: SourceObject | None) -> str:
    if seen is None:
        return NEW
    if seen.signature != listed.signature or seen.size != listed.size:
        return CHANGED
    return UNCHANGED


def _report_keys(raw: bytes) -> list[str]:
    """The parts a manifest lists; none when it is no readable manifest (the importer then
    fails its run with what is wrong, naming the file)."""
    if len(raw) > sources.MAX_MANIFEST_BYTES:
        return []
    try:
        manifest = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return []
    keys = manifest.get("reportKeys") if isinstance(manifest, dict) else None
    if not isinstance(keys, list):
        return []
    return [key for key in keys if isinstance(key, str) and key]


def _part_candidates(source: BillingSource, manifest_key: str, report_key: str) -> list[str]:
    """Where a part may be, as keys of the listing: the importer looks beside the manifest under
    the part's key or its file name; in a bucket the report key is the object's own key."""
    folder = posixpath.dirname(manifest_key)
    name = PurePosixPath(report_key).name
    candidates = []
    if source.kind == BillingSource.Kind.S3:
        candidates.append(report_key)
    else:
        candidates.append(posixpath.normpath(posixpath.join(folder, report_key)))
    candidates.append(posixpath.join(folder, name) if folder else name)
    return candidates


def _deliveries(source: BillingSource, listing: Listing) -> list[_Delivery]:
    """The listing grouped into deliveries, oldest first."""
    by_key = {f.key: f for f in listing.files}
    arriving = set(listing.arriving)
    claimed: set[str] = set()
    by_parts: dict[tuple[str, ...], _Delivery] = {}
    deliveries = []
    for listed in listing.files:
        if not sources.is_manifest(listed.key):
            continue
        parts: list[ListedFile] = []
        waiting = False
        for report_key in _report_keys(sources.read_manifest(source, listed.key)):
            candidates = _part_candidates(source, listed.key, report_key)
            found = next((by_key[c] for c in candidates if c in by_key), None)
            if found is not None and found not in parts:
                parts.append(found)
            elif found is None and any(c in arriving for c in candidates):
                waiting = True  # a part is still being written: the next poll takes it all
        claimed.update(p.key for p in parts)
        if waiting:
            continue
        part_keys = tuple(sorted(p.key for p in parts))
        twin = by_parts.get(part_keys) if part_keys else None
        if twin is not None:
            twin.files.append(listed)  # the same parts again: recorded, not imported twice
            continue
        delivery = _Delivery(files=[listed, *parts])
        by_parts[part_keys] = delivery
        deliveries.append(delivery)
    for listed in listing.files:
        if listed.key in claimed or sources.is_manifest(listed.key):
            continue
        deliveries.append(_Delivery(files=[listed]))
    return sorted(deliveries, key=lambda d: (d.newest is None, d.newest or 0, d.main.key))


# A billing period told by a key: CUR's 20250101-20250201/, Athena's year=2025/month=1/, CUR 2.0's
# BILLING_PERIOD=2025-01/, or a 2025-01 / 202501 in a file name.
KEY_PERIODS = [
    re.compile(r"(?<!\d)(20\d{2})(0[1-9]|1[0-2])01-20\d{6}(?!\d)"),
    re.compile(r"year=(20\d{2})/month=(0?[1-9]|1[0-2])(?!\d)"),
    re.compile(r"(?<!\d)(20\d{2})-(0[1-9]|1[0-2])(?!\d)"),
    re.compile(r"(?<!\d)(20\d{2})(0[1-9]|1[0-2])(?!\d)"),
]


def key_period(key: str) -> date | None:
    for pattern in KEY_PERIODS:
        match = pattern.search(key)
        if match:
            return date(int(match.group(1)), int(match.group(2)), 1)
    return None


def _in_period(delivery: _Delivery, seen: dict[str, SourceObject], start: date, end: date) -> bool:
    periods: set[date] = set()
    for listed in delivery.files:
        record = seen.get(listed.key)
        run = record.import_run if record else None
        for result in run.results if run else []:
            moment = result.get("billing_period_start")
            if moment:
                periods.add(datetime.fromisoformat(moment).date())
    if not periods:
        periods = {p for p in (key_period(f.key) for f in delivery.files) if p}
    return any(start <= period < end for period in periods)


def _spool_dir(source: BillingSource) -> Path:
    return Path(settings.COSTSITE_DATA_DIR) / "sources" / str(source.pk)


def _spool_sweep(*, source: BillingSource, keep: SourcePoll) -> None:
    """Remove the spool folders of earlier polls whose runs are all done."""
    root = _spool_dir(source)
    if not root.is_dir():
        return
    for folder in root.iterdir():
        if not folder.name.isdigit() or int(folder.name) == keep.pk:
            continue
        busy = SourcePoll.objects.filter(
            Q(status=SourcePoll.Status.RUNNING) | Q(import_runs__status__in=RUNS_BUSY),
            pk=int(folder.name),
        )
        if not busy.exists():
            shutil.rmtree(folder, ignore_errors=True)


def _paths(
    *, source: BillingSource, poll: SourcePoll, delivery: _Delivery, number: int
) -> tuple[list[str], Path | None]:
    """The delivery's server-side paths for the importer (its main file only: the importer
    finds a manifest's parts itself), and the spool folder they were downloaded to, if any."""
    if source.kind != BillingSource.Kind.S3:
        return [str(Path(sources.root_of(source)) / delivery.main.key)], None
    folder = _spool_dir(source) / str(poll.pk) / str(number)
    client = sources.s3_client(source)
    # Each file under its own name, side by side: the importer looks for a manifest's parts
    # beside it. A listed key always ends in an export's extension (sources.is_billing_export),
    # so its name is never empty, "." or "..": nothing lands outside the folder.
    try:
        for listed in delivery.files:
            sources.s3_download(source, listed.key, folder / _spool_name(listed), client=client)
    except SourceUnavailable:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return [str(folder / _spool_name(delivery.main))], folder


def _spool_name(listed: ListedFile) -> str:
    return PurePosixPath(listed.key).name


def _run_start(
    *,
    source: BillingSource,
    poll: SourcePoll,
    delivery: _Delivery,
    force: bool,
    now: datetime,
) -> ImportRun | None:
    """One run for the delivery, its files recorded with it; None when another poll of the same
    source started it meanwhile."""
    number = poll.import_runs.count() + 1
    paths, spooled = _paths(source=source, poll=poll, delivery=delivery, number=number)
    with transaction.atomic():
        # One poll of a source at a time past this point: a "Poll now" racing the schedule
        # waits here, then finds the files recorded and starts nothing.
        BillingSource.objects.select_for_update().filter(pk=source.pk).first()
        keys = [f.key for f in delivery.files]
        recorded = {o.key: o for o in SourceObject.objects.filter(source=source, key__in=keys)}
        if not force and all(_state(f, recorded.get(f.key)) == UNCHANGED for f in delivery.files):
            if spooled:
                shutil.rmtree(spooled, ignore_errors=True)
            return None
        run = import_run_create(
            paths=paths,
            requested_format=source.format,
            display_name=delivery.main.key,
            origin=ImportRun.Origin.SOURCE,
            source=source,
            poll=poll,
        )
        for listed in delivery.files:
            SourceObject.objects.update_or_create(
                source=source,
                key=listed.key,
                defaults={
                    "size": listed.size,
                    "signature": listed.signature,
                    "last_modified": listed.last_modified,
                    "import_run": run,
                    "imported_at": now,
                },
            )
        import_run_enqueue(import_run=run)
    return run


def _poll_counts(tally: _Tally) -> dict:
    return {
        "files_found": tally.found,
        "files_new": tally.new,
        "files_changed": tally.changed,
        "files_unchanged": tally.unchanged,
        "runs_started": tally.runs,
    }


def _poll_failed(
    *, source: BillingSource, poll: SourcePoll, tally: _Tally, error: str, now: datetime
) -> None:
    SourcePoll.objects.filter(pk=poll.pk).update(
        status=SourcePoll.Status.FAILED,
        error=error,
        finished_at=timezone.now(),
        **_poll_counts(tally),
    )
    polled_source_failed(
        source=source,
        error=error,
        now=now,
        retry_seconds=retry_delay(failures=source.consecutive_failures + 1),
    )


def _poll_succeeded(
    *, source: BillingSource, poll: SourcePoll, tally: _Tally, now: datetime
) -> None:
    SourcePoll.objects.filter(pk=poll.pk).update(
        status=SourcePoll.Status.SUCCEEDED, finished_at=timezone.now(), **_poll_counts(tally)
    )
    # A re-run is extra: it does not move the schedule.
    polled_source_succeeded(source=source, now=now, reschedule=not poll.period_start)
