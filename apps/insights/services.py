"""Writes of the insights app: recomputing findings (claimed, one at a time, idempotent) and
their workflow (acknowledge, snooze, resolve, reopen), each change kept as a history row."""

import hashlib
import json
import logging
import time
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.db import DatabaseError, connection, transaction
from django.db.models import Count, Max, Min, Q, Sum
from django.forms.models import model_to_dict
from django.utils import timezone

from apps.accounts.models import Organization
from apps.billing.services import line_period_index_summarise
from apps.deployments.models import Deployment, DeploymentResource, TrafficHour
from apps.spend.figures import findings_version_bump

from . import (
    compute,
    compute_caching,
    compute_levers,
    compute_part2,
    compute_part3,
    compute_storage,
    findings_part2,
)
from .days import day_rollup_rebuild, day_rollup_used
from .models import (
    LEVER_KINDS,
    ONE_OFF_KINDS,
    SAVINGS_ONLY_KINDS,
    BuildOrCallInputs,
    BuildOrCallSettings,
    Finding,
    FindingDay,
    FindingDayHours,
    FindingDayOwner,
    FindingEvent,
    FindingHour,
    FindingMonth,
    FindingSharedHour,
    GpuInstancePrice,
    GpuTypeMemory,
    InsightsSettings,
    Kind,
    ModelApiPrice,
    RecomputeLock,
    RecomputeRun,
    Status,
    StorageEgressPrice,
)
from .selectors import data_as_of

logger = logging.getLogger(__name__)

# A recompute whose heartbeat is older than this is taken to have died: its lock is taken over.
STALE_AFTER = timedelta(minutes=10)
MONEY_PLACES = Decimal("1e-15")
# kind -> function(start=, end=) returning {subject_key: compute.SubjectHours}: every kind has one
# (the SQLite path, and the reference the SQL path is tested against).
KIND_HOURS = {
    Kind.IDLE_GPU: compute.idle_gpu_hours,
    Kind.UNATTRIBUTED: compute.unattributed_hours,
    # Part 2 (compute_part2.py). A notebook left running is stored before idle time between
    # runs, which leaves out the hours already counted as one.
    Kind.NOTEBOOK_LEFT_RUNNING: compute_part2.notebook_left_running_hours,
    Kind.IDLE_BETWEEN_RUNS: compute_part2.idle_between_runs_hours,
    Kind.DATA_STARVED: compute_part2.data_starved_hours,
    Kind.RIGHT_SIZE: compute_part2.right_size_hours,
    # Part 3 (compute_part3.py).
    **compute_part3.KIND_HOURS,
    # The inference levers (compute_levers.py).
    **compute_levers.KIND_HOURS,
    # Hosted model API spend's caching lever (compute_caching.py).
    Kind.MODEL_API_CACHING: compute_caching.model_api_caching_hours,
    # Storage and egress (compute_storage.py): the storage rollup.
    **compute_storage.KIND_HOURS,
}
# kind -> function(cursor, start=, end=) filling compute.HOURS_TABLE with the same hours and
# returning {subject_key: evidence to add}: used instead on PostgreSQL where a kind has one.
KIND_SQL = {
    Kind.IDLE_GPU: compute.idle_gpu_sql,
    Kind.UNATTRIBUTED: compute.unattributed_sql,
    Kind.FAILED_RUN: compute_part3.failed_run_sql,
}


def _exact(value: Decimal) -> Decimal:
    return value.quantize(MONEY_PLACES)


def _text(value: Decimal) -> str:
    """An exact decimal string without trailing zeros (12.500000 -> "12.5")."""
    text = format(value.normalize(), "f")
    return text if text != "-0" else "0"


# -- The workflow -------------------------------------------------------------------------------


def _change(
    *,
    finding: Finding,
    to: str,
    by=None,
    note: str = "",
    until: date | None = None,
    announce: bool = True,
) -> Finding:
    FindingEvent.objects.create(
        finding=finding,
        from_status=finding.status,
        to_status=to,
        snoozed_until=until,
        note=note,
        by=by,
    )
    finding.status = to
    finding.snoozed_until = until if to == Status.SNOOZED else None
    if to == Status.RESOLVED:
        finding.resolution_note = note
        finding.resolved_at = timezone.now()
    elif to == Status.OPEN:
        finding.resolved_at = None
    finding.save(update_fields=["status", "snoozed_until", "resolution_note", "resolved_at"])
    if announce:
        # Who sees it where (open, snoozed, resolved) changed. The version row is the last lock
        # every change of findings takes (the recompute's at its end, the admin's after its
        # rows), so none waits for it holding what another holding it waits for.
        findings_version_bump()
    return finding


class WorkflowError(ValueError):
    pass


@transaction.atomic
def finding_acknowledge(*, finding: Finding, by) -> Finding:
    if finding.status not in {Status.OPEN, Status.SNOOZED}:
        raise WorkflowError(
            f"A {finding.get_status_display().lower()} finding cannot be acknowledged."
        )
    return _change(finding=finding, to=Status.ACKNOWLEDGED, by=by)


@transaction.atomic
def finding_snooze(*, finding: Finding, by, until: date, today: date | None = None) -> Finding:
    today = today or timezone.now().date()
    if until <= today:
        raise WorkflowError("Snooze until a day after today.")
    if not finding.is_actionable:
        raise WorkflowError(f"A {finding.get_status_display().lower()} finding cannot be snoozed.")
    return _change(finding=finding, to=Status.SNOOZED, by=by, until=until)


@transaction.atomic
def finding_resolve(*, finding: Finding, by, note: str) -> Finding:
    if not note.strip():
        raise WorkflowError("Say how it was resolved.")
    if not finding.is_actionable:
        raise WorkflowError(f"A {finding.get_status_display().lower()} finding cannot be resolved.")
    return _change(finding=finding, to=Status.RESOLVED, by=by, note=note.strip())


@transaction.atomic
def finding_reopen(*, finding: Finding, by, note: str = "") -> Finding:
    if finding.status == Status.OPEN:
        raise WorkflowError("The finding is open already.")
    return _change(finding=finding, to=Status.OPEN, by=by, note=note)


def findings_wake(*, today: date) -> int:
    """Snoozes that ran out (their day has come) open again, with a history row each. Only
    within a recompute, whose own move of the findings version at its end announces them."""
    woken = 0
    for finding in Finding.objects.filter(status=Status.SNOOZED, snoozed_until__lte=today):
        _change(
            finding=finding,
            to=Status.OPEN,
            note=f"Snooze until {finding.snoozed_until} ended.",
            announce=False,
        )
        woken += 1
    return woken


# -- Recomputing --------------------------------------------------------------------------------


def findings_recompute(
    *, start: date | None = None, end: date | None = None, reason: str = "manual"
) -> RecomputeRun:
    """Queue a recompute of `[start, end)` (None: all the data) and run it here and now, unless
    another process holds the lock: then that process runs it before it lets go."""
    run = RecomputeRun.objects.create(start=start, end=end, reason=reason)
    return recompute_run_execute(recompute_run=run)


def _lock_claim(holder: str) -> bool:
    RecomputeLock.objects.get_or_create(pk=1)
    now = timezone.now()
    free = Q(holder="") | Q(heartbeat_at__lt=now - STALE_AFTER) | Q(heartbeat_at__isnull=True)
    return bool(RecomputeLock.objects.filter(free, pk=1).update(holder=holder, heartbeat_at=now))


def _lock_release(holder: str) -> None:
    RecomputeLock.objects.filter(pk=1, holder=holder).update(holder="", heartbeat_at=None)


def _beat(holder: str, run: RecomputeRun, alias: str) -> None:
    """The recompute's sign of life. The recompute runs in one transaction, and a heartbeat
    written inside it would be seen by nobody until the end (a recompute of a long history
    outlasts STALE_AFTER): on PostgreSQL it goes through the `progress` connection, which
    commits at once, unless the caller holds a transaction of its own (its claim's row lock
    would block that connection). Advice there: a beat that fails never fails the recompute."""
    now = timezone.now()
    try:
        RecomputeLock.objects.using(alias).filter(pk=1, holder=holder).update(heartbeat_at=now)
        RecomputeRun.objects.using(alias).filter(pk=run.pk).update(heartbeat_at=now)
    except Exception:
        if alias == "default":
            raise
        logger.warning("Findings recompute #%s: heartbeat not written", run.pk, exc_info=True)


def recompute_run_execute(*, recompute_run: RecomputeRun) -> RecomputeRun:
    """Claim the lock and run every queued recompute, oldest first; a run found running with a
    stale heartbeat (its process died) is queued again first. Without the lock, return: the
    holder drains the queue, this run included, before it lets go (and looks again after)."""
    recompute_queue_drain(holder=f"recompute-{recompute_run.pk}-{timezone.now().timestamp()}")
    recompute_run.refresh_from_db()
    return recompute_run


def recompute_runs_reap(*, now: datetime | None = None) -> int:
    """Beat's tick: when a recompute is stuck (running with a heartbeat older than STALE_AFTER,
    its process killed; or queued as long, its message lost), take the lock and drain the queue,
    that run first. Returns how many runs were stuck. Nothing to do when none is: the tick
    costs one query. A live holder keeps the lock, and drains the queue itself."""
    cutoff = (now or timezone.now()) - STALE_AFTER
    stuck = RecomputeRun.objects.filter(
        Q(status=RecomputeRun.Status.RUNNING)
        & (Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True))
        | Q(status=RecomputeRun.Status.QUEUED, created_at__lt=cutoff)
    ).count()
    if stuck:
        logger.warning("%s findings recompute(s) stuck: draining the queue", stuck)
        recompute_queue_drain(holder=f"reaper-{timezone.now().timestamp()}")
    return stuck


def recompute_queue_drain(*, holder: str) -> None:
    """Run every queued recompute under the lock, as `holder`; see recompute_run_execute."""
    while _lock_claim(holder):
        try:
            RecomputeRun.objects.filter(
                Q(heartbeat_at__lt=timezone.now() - STALE_AFTER) | Q(heartbeat_at__isnull=True),
                status=RecomputeRun.Status.RUNNING,
            ).update(status=RecomputeRun.Status.QUEUED)
            while True:
                run = (
                    RecomputeRun.objects.filter(status=RecomputeRun.Status.QUEUED)
                    .order_by("pk")
                    .first()
                )
                if run is None:
                    break
                claimed = RecomputeRun.objects.filter(
                    pk=run.pk, status=RecomputeRun.Status.QUEUED
                ).update(
                    status=RecomputeRun.Status.RUNNING,
                    started_at=timezone.now(),
                    heartbeat_at=timezone.now(),
                )
                if claimed:
                    _execute(run, holder)
        finally:
            _lock_release(holder)
        if not RecomputeRun.objects.filter(status=RecomputeRun.Status.QUEUED).exists():
            break


def _execute(run: RecomputeRun, holder: str) -> None:
    alias = "default"
    if connection.vendor == "postgresql" and not connection.in_atomic_block:
        alias = "progress"
    # Where the run's time went besides its kinds' own seconds (the summary's `seconds`).
    clock, seconds = time.perf_counter(), {}
    try:
        # Before the recompute's transaction: the summarising holds a lock on the line table
        # until its transaction ends, and would otherwise hold it for the whole recompute.
        line_period_index_summarise()
        _temporary_buffers()
        seconds["index_summary"] = round(time.perf_counter() - clock, 3)
        # The lever kinds share one read of their period (compute_levers.facts_shared).
        with transaction.atomic(), compute_levers.facts_shared():
            _planner_settings()
            # One read of the GPU-compute, unattributed and failed runs' lines for the kinds
            # that read them, notebook_left_running's reach either side of the period included.
            reach = timedelta(hours=InsightsSettings.get().notebook_idle_hours)
            copied = time.perf_counter()
            with compute.lines_shared(start=run.start, end=run.end, reach=reach):
                seconds["shared_lines"] = round(time.perf_counter() - copied, 3)
                summary = _recompute(
                    start=run.start, end=run.end, beat=lambda: _beat(holder, run, alias)
                )
            # The findings and their hours changed in bulk (no model signal): the pages' cached
            # findings figures are read afresh from the commit on, never before it.
            findings_version_bump()
        seconds["whole"] = round(time.perf_counter() - clock, 3)  # the commit included
        vacuumed = time.perf_counter()
        findings_table_vacuum()
        seconds["findings_vacuum"] = round(time.perf_counter() - vacuumed, 3)
        summary["seconds"] = seconds
    except Exception as error:
        logger.exception("Findings recompute #%s failed", run.pk)
        RecomputeRun.objects.filter(pk=run.pk).update(
            status=RecomputeRun.Status.FAILED, error=str(error), finished_at=timezone.now()
        )
        return
    RecomputeRun.objects.filter(pk=run.pk).update(
        status=RecomputeRun.Status.SUCCEEDED, summary=summary, finished_at=timezone.now()
    )


def findings_table_vacuum() -> None:
    """After a recompute's commit (PostgreSQL, outside a transaction): vacuum the findings table,
    which the recompute rewrote row by row, so that its visibility map is set again and the
    pages read who sees which findings from `finding_visible_idx` alone, not from the table
    (autovacuum would get there a minute later, or never where it is off): 50 ms after a
    rewrite of the benchmark's 3,349 findings. Elsewhere, or inside a caller's transaction,
    nothing is done."""
    if (
        connection.vendor != "postgresql"
        or connection.in_atomic_block
        or not connection.get_autocommit()
    ):
        return
    try:
        with connection.cursor() as cursor:
            # SKIP_LOCKED: a lock held elsewhere (a migration, an index being built) skips the
            # vacuum at once rather than leaving the finished recompute waiting on it.
            cursor.execute(f"VACUUM (ANALYZE, SKIP_LOCKED) {Finding._meta.db_table}")
    except DatabaseError:
        logger.warning("The findings table was not vacuumed", exc_info=True)


TEMPORARY_BUFFERS = "1GB"  # the recompute's session: room for its temporary tables in memory


def _temporary_buffers() -> None:
    """The recompute's temporary tables (the shared copy of the lines: 360 MB at 10M
    lines; each kind's hours) held in the session's memory, not in files (PostgreSQL's default
    gives them 8 MB). Every kind reading the copy read it back from those files, and a busy
    disk made each read as slow as the disk (bench/findings_recompute.py). Memory is taken only
    as the tables fill. PostgreSQL takes the setting only before a session's first temporary
    table: a session that already used one (a worker's connection, after its first recompute)
    keeps the value it has. Outside a transaction only, where a refused SET aborts nothing."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"SET temp_buffers = '{TEMPORARY_BUFFERS}'")
    except DatabaseError:
        logger.info("Findings recompute: this session keeps its temp_buffers")


def _planner_settings() -> None:
    """For the recompute's transaction only (PostgreSQL). No JIT: the kinds' statements are
    compiled once each and run once, and compiling them cost 0.5-1.2 s apiece at 10M lines, more
    than it saved. random_page_cost as for pages read from memory: the period reads of the line
    table then take its BRIN index of charge periods (a month's lines read, not the whole
    table), which the default cost of 4 for a random page keeps the planner from choosing. Hashes
    of a million rows in memory (the kinds' hours, their diffs against the stored ones): with
    the default 4 MB the diff of a kind's million hours went to disk in 32 batches."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit = off")
        cursor.execute("SET LOCAL random_page_cost = 1.1")
        cursor.execute("SET LOCAL work_mem = '256MB'")


class HoursChanged:
    """Which days a recompute wrote or deleted hours of, per finding, or everywhere in its period
    (a first recompute's plain writes, SQLite's), so that only those days of the day rollup are
    rebuilt. Hours of a finding deleted before the end (stillborn: it came to nothing) leave no
    trace and are forgotten."""

    # Days apart, the rollup is rebuilt a day at a time; past this many stretches, over the whole
    # span at once (one pass over it costs less than as many index reads).
    STRETCHES = 30

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.whole = False
        self.days_of: dict[int, set[date]] = defaultdict(set)
        self.touched: set[int] = set()
        self.kind_begin()

    def kind_begin(self) -> None:
        """A kind's store begins: whether its changed findings are known starts over."""
        self.kind_unknown = False

    def everywhere(self, *, findings=None) -> None:
        """Hours changed anywhere in the period. `findings`: the ids of the findings whose hours
        were written, where known; without them, which of the kind's findings changed is not."""
        self.whole = True
        if findings is None:
            self.kind_unknown = True
        else:
            self.touched.update(findings)

    def day(self, finding_id: int, day: date) -> None:
        self.days_of[finding_id].add(day)
        self.touched.add(finding_id)

    def forget(self, finding_ids) -> None:
        for finding_id in finding_ids:
            self.days_of.pop(finding_id, None)
            self.touched.discard(finding_id)

    def stretches(self, *, start: date | None, end: date | None) -> list[tuple]:
        """The UTC days `[from, until)` to rebuild within the period (None ends: unbounded),
        as few stretches of consecutive days; none when no hour changed."""
        if self.whole:
            return [(start, end)]
        days = sorted(
            {
                day
                for days in self.days_of.values()
                for day in days
                if (start is None or day >= start) and (end is None or day < end)
            }
        )
        stretches: list[list[date]] = []
        for day in days:
            if stretches and stretches[-1][1] == day:
                stretches[-1][1] = day + timedelta(days=1)
            else:
                stretches.append([day, day + timedelta(days=1)])
        if len(stretches) > self.STRETCHES:
            return [(stretches[0][0], stretches[-1][1])]
        return [tuple(stretch) for stretch in stretches]


hours_changed = HoursChanged()  # one recompute at a time per process (the recompute lock)


def _recompute(*, start: date | None, end: date | None, beat) -> dict:
    today = timezone.now().date()
    hours_changed.reset()
    summary: dict = {"start": start and start.isoformat(), "end": end and end.isoformat()}
    summary["woken"] = findings_wake(today=today)
    org = Organization.get()
    settings = InsightsSettings.get()
    as_of = data_as_of()
    kinds = {}
    on_postgresql = connection.vendor == "postgresql"
    # Within a period (an import's, a re-attribution's), with every input but the hours as the
    # last recompute had them, only what the period's data reaches is done again (_narrowed).
    summary["inputs"] = _inputs(org=org, settings=settings, as_of=as_of)
    narrow = start is not None and end is not None and summary["inputs"] == _inputs_before()
    summary["narrowed"] = narrow
    with compute.narrowed(narrow):
        for kind, hours_of in KIND_HOURS.items():
            beat()
            clock = time.perf_counter()
            hours_changed.kind_begin()
            if narrow and kind in LEVER_KINDS and not _meets_lever_window(start, end, as_of):
                kinds[kind] = {**LEVER_SKIPPED, "seconds": round(time.perf_counter() - clock, 3)}
                continue
            context = {
                "start": start,
                "end": end,
                "org": org,
                "settings": settings,
                "as_of": as_of,
                "narrow": narrow,
            }
            if on_postgresql and kind in KIND_SQL:
                kinds[kind] = _kind_store_sql(kind=kind, fill=KIND_SQL[kind], **context)
            else:
                subjects = hours_of(start=start, end=end)
                kinds[kind] = _kind_store(kind=kind, subjects=subjects, **context)
            kinds[kind]["seconds"] = round(time.perf_counter() - clock, 3)
    summary["kinds"] = kinds
    written = sum(counts.get("hours_written", 0) + counts.get("hours_deleted", 0)
                  for counts in kinds.values())  # fmt: skip
    if on_postgresql and written > ANALYZE_AFTER_HOURS:
        # The next recompute's diffs and the pages plan by these statistics; autovacuum may
        # be off or behind, and a first recompute's 2.4M hours read as an empty table made the
        # next one's anti-joins loop (bench/findings_recompute.py: 113 s against 75).
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {FindingHour._meta.db_table}")
    # The pages' day rollup of the hours, in this transaction, for the days whose hours changed
    # (the nightly recompute finds most as they were).
    beat()
    clock = time.perf_counter()
    stretches = hours_changed.stretches(start=start, end=end)
    rebuilt: dict = defaultdict(int)
    for first, until in stretches:
        for table, rows in day_rollup_rebuild(start=first, end=until).items():
            rebuilt[table] += rows
    rebuilt["stretches"] = [
        [first and first.isoformat(), until and until.isoformat()] for first, until in stretches
    ]
    rebuilt["seconds"] = round(time.perf_counter() - clock, 3)
    summary["day_rollup"] = dict(rebuilt)
    if on_postgresql and written > ANALYZE_AFTER_HOURS:
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {FindingDay._meta.db_table}")
            cursor.execute(f"ANALYZE {FindingMonth._meta.db_table}")
            cursor.execute(f"ANALYZE {FindingSharedHour._meta.db_table}")
    summary["findings"] = {
        status: Finding.objects.filter(status=status).count() for status in Status.values
    }
    return summary


# What a lever kind's summary says when its window lies outside a narrowed recompute's period.
LEVER_SKIPPED = {
    "skipped": "its 30 days ending at the bill's data as of lie outside the period",
    "subjects": 0,
    "created": 0,
    "gone": 0,
    "reopened": 0,
    "hours": 0,
    "hours_written": 0,
    "hours_deleted": 0,
}
# What the figures of findings read besides their own hours and lines, and whose changes
# announce no changed days: the price catalogue, and what the inference levers read of the
# deployments (compute_levers.deployment_facts: a deployment, its resources and traffic, the
# build-or-call page's inputs and settings). A run that ends is not among them: its finding waits
# for a recompute that reaches its days, or the nightly one.
UNANNOUNCED = (
    GpuInstancePrice,
    GpuTypeMemory,
    ModelApiPrice,
    StorageEgressPrice,
    Deployment,
    DeploymentResource,
    TrafficHour,
    BuildOrCallInputs,
    BuildOrCallSettings,
)


def _inputs(*, org: Organization, settings: InsightsSettings, as_of: datetime | None) -> str:
    """A digest of what a finding's figures depend on besides its hours: the bill's data as of
    (a finding's last 30 days, the levers' window), the organisation's currency and time zone,
    the insights settings (thresholds) and the tables in UNANNOUNCED (prices, deployments and
    their traffic). Two recomputes with the same digest read the same prices, rules and
    deployments. The traffic's figures cost one pass over its table (80 ms at 262,800 hours)."""
    tables = {}
    for model in UNANNOUNCED:
        if any(field.name == "updated_at" for field in model._meta.concrete_fields):
            tables[model._meta.label] = model.objects.aggregate(
                rows=Count("pk"), last=Max("pk"), updated=Max("updated_at")
            )
        else:  # a settings row, a deployment's resources: few rows, whose edits keep their ids
            tables[model._meta.label] = list(model.objects.order_by("pk").values_list())
    document = {
        "as_of": as_of,
        "currency": org.currency,
        "time_zone": org.time_zone,
        "settings": model_to_dict(settings),
        "tables": tables,
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True, default=str).encode()).hexdigest()


def _inputs_before() -> str | None:
    """The inputs' digest of the last recompute that succeeded (none before this was kept)."""
    return (
        RecomputeRun.objects.filter(status=RecomputeRun.Status.SUCCEEDED)
        .order_by("-finished_at", "-pk")
        .values_list("summary__inputs", flat=True)
        .first()
    )


def _meets_lever_window(start: date, end: date, as_of: datetime | None) -> bool:
    """Whether `[start, end)` (UTC days) meets the levers' window: the 30 days ending at the
    bill's data as of, which they read whatever the period (compute_part3._lever_window)."""
    if as_of is None:
        return False  # no bill: no lever to find
    days = max(compute_part3.LEVER_DAYS, compute_part2.RIGHT_SIZE_DAYS)
    return compute.day_start(start) < as_of and compute.day_start(end) > as_of - timedelta(
        days=days
    )


def _narrowed(findings: list[Finding], *, kind: str, narrow: bool, created, keys) -> list[Finding]:
    """The findings of `kind` a recompute refreshes. All of them, unless it is narrowed to a
    period (with the inputs as the last one had them, _inputs): then only those whose hours it
    wrote or deleted, the new ones and those of a subject it found in the period (`keys`: its
    reason, evidence or savings may have changed). The others' figures come from the same
    hours, facts and inputs as when they were last refreshed, and would come out the same.
    A lever kind's findings are refreshed whole: one not found again saves nothing."""
    if not narrow or hours_changed.kind_unknown or kind in LEVER_KINDS:
        return findings
    touched = hours_changed.touched | set(created)
    return [f for f in findings if f.pk in touched or f.subject_key in keys]


def _old_hours_delete(*, kind: str, start: date | None, end: date | None) -> int:
    old_hours = FindingHour.objects.filter(finding__kind=kind)
    if start is not None:
        old_hours = old_hours.filter(hour__gte=compute.day_start(start))
    if end is not None:
        old_hours = old_hours.filter(hour__lt=compute.day_start(end))
    return old_hours.delete()[0]


def _kind_store_sql(
    *,
    kind: str,
    fill,
    start: date | None,
    end: date | None,
    org: Organization,
    settings: InsightsSettings,
    as_of: datetime | None,
    narrow: bool = False,
) -> dict:
    """_kind_store in SQL: the kind's hours computed into a temporary table, new findings and
    their hours written with INSERT ... SELECT (nothing per hour passes through Python)."""
    table = Finding._meta.db_table
    # A row's subject: its line key, unless it names another (a run's subject_key).
    subject = "coalesce(subject_key, line_key)"
    subject_of_hour = "coalesce(hours.subject_key, hours.line_key)"
    with connection.cursor() as cursor:
        # (_planner_settings: hashes in memory, no JIT.) The planner takes each generate_series
        # to give 1000 hours (not the one of an hourly line) and would sort the grouped hours on
        # disk: hash them instead.
        compute.hours_table_create(cursor)
        cursor.execute("SET LOCAL enable_sort = off")
        evidence = fill(cursor, start=start, end=end)
        cursor.execute("SET LOCAL enable_sort = on")
        cursor.execute(f"ANALYZE {compute.HOURS_TABLE}")
        now = timezone.now()
        # A subject with no finding yet becomes one only if some hour of it is wasted.
        cursor.execute(
            f"""
            INSERT INTO {table} (kind, subject_key, resource_id, billing_account_id,
                service_name, wasted, savings_per_month, rank_amount, reason, evidence, status,
                resolution_note, created_at, updated_at)
            SELECT %s, {subject}, min(resource_id), min(billing_account_id), min(service_name),
                   '{{}}', '{{}}', 0, '', '{{}}', %s, '', %s, %s
            FROM {compute.HOURS_TABLE}
            GROUP BY {subject}
            HAVING bool_or(wasted > 0)
            ON CONFLICT (kind, subject_key) DO NOTHING
            RETURNING id
            """,
            [kind, Status.OPEN, now, now],
        )
        created = {pk for (pk,) in cursor.fetchall()}
        if created:
            # The joins below go by the findings' statistics: on the first recompute they say
            # the table is empty, and the planner looped over every finding for each of a
            # million hours (idle_gpu: 42 s instead of 14, bench/findings_recompute.py).
            cursor.execute(f"ANALYZE {table}")
        # The kind's computed hours with the finding they belong to (a subject with no finding
        # stays out: under the threshold, or nothing wasted).
        computed = f"""(
            SELECT finding.id AS finding_id, {", ".join(f"hours.{c}" for c in HOUR_COLUMNS[1:])}
            FROM {compute.HOURS_TABLE} AS hours
            JOIN {table} AS finding
              ON finding.kind = %s AND finding.subject_key = {subject_of_hour}
        )"""
        inserted, deleted = _hours_diff_write(
            cursor, kind=kind, computed=computed, computed_params=[kind], start=start, end=end
        )
        cursor.execute(
            f"""SELECT count(*) FROM {compute.HOURS_TABLE} AS hours
                WHERE EXISTS (SELECT 1 FROM {table} AS finding
                              WHERE finding.kind = %s
                                AND finding.subject_key = {subject_of_hour})""",
            [kind],
        )
        (written,) = cursor.fetchone()
        # Grouped, not count(DISTINCT ...): a hash of the keys, not a sort of them.
        cursor.execute(
            f"SELECT count(*) FROM (SELECT {subject} FROM {compute.HOURS_TABLE} GROUP BY 1) AS k"
        )
        (subjects,) = cursor.fetchone()
        cursor.execute(f"DROP TABLE {compute.HOURS_TABLE}")
    findings = _narrowed(
        list(Finding.objects.filter(kind=kind)),
        kind=kind,
        narrow=narrow,
        created=created,
        keys=evidence,
    )
    loaded = _loaded(findings)
    for finding in findings:
        if finding.subject_key in evidence:
            finding.evidence = evidence[finding.subject_key]
    counts = {
        "subjects": subjects,
        "created": 0,
        "gone": 0,
        "reopened": 0,
        "hours": written,
        "hours_written": inserted,
        "hours_deleted": deleted,
    }
    _refresh(
        kind=kind,
        findings=findings,
        loaded=loaded,
        subjects={},
        created=created,
        start=start,
        end=end,
        org=org,
        settings=settings,
        as_of=as_of,
        counts=counts,
    )
    return counts


def _hours_diff_write(
    cursor, *, kind: str, computed: str, computed_params: list, start: date | None, end: date | None
) -> tuple[int, int]:
    """Writes only the kind's finding-hours that changed (PostgreSQL), from `computed`: a table or
    a parenthesised SELECT of finding_id and the other HOUR_COLUMNS. The stored hours of the
    period with no equal computed one go, and the computed ones with no equal stored one come.
    The nightly recompute finds nearly all of them as they were: deleting and writing them all
    again made it slower than the first (bench/findings_recompute.py). Returns (inserted, deleted).
    """
    table, hours_table = Finding._meta.db_table, FindingHour._meta.db_table
    period, period_params = "", []
    if start is not None:
        period += " AND stored.hour >= %s"
        period_params.append(compute.day_start(start))
    if end is not None:
        period += " AND stored.hour < %s"
        period_params.append(compute.day_start(end))
    columns = ", ".join(HOUR_COLUMNS)
    # Per finding of the kind, through the finding and hour index (a join let the planner scan
    # every kind's hours for the first one of this kind: half a second at 10M lines).
    cursor.execute(
        f"""SELECT EXISTS (SELECT 1 FROM {table} AS finding
                           WHERE finding.kind = %s AND EXISTS (
                               SELECT 1 FROM {hours_table} AS stored
                               WHERE stored.finding_id = finding.id{period}))""",
        [kind, *period_params],
    )
    if not cursor.fetchone()[0]:
        # Nothing stored to diff against (a first recompute): the anti-join would read, for
        # each hour it writes, the hours this same statement wrote before it (invisible to it,
        # but in the table): 25 s for idle_gpu's 65,000 hours, bench/findings_recompute.py.
        # Which findings were written, for their refresh (_narrowed), on the way out.
        cursor.execute(
            f"""WITH came AS (
                    INSERT INTO {hours_table} ({columns})
                    SELECT {columns} FROM {computed} AS hours ORDER BY finding_id, hour
                    RETURNING finding_id
                )
                SELECT finding_id, count(*) FROM came GROUP BY 1""",
            computed_params,
        )
        written = dict(cursor.fetchall())
        if written:
            hours_changed.everywhere(findings=written)
        return sum(written.values()), 0

    # One pass: the stored hours of the period joined to the computed ones on every column (an
    # hour with no equal on the other side changed), then those deleted and these written. Two
    # anti-joins (a DELETE, then an INSERT) hashed a million rows each: about a third more time.
    # Nulls are equal here (coalesced, so that the join hashes: ids are positive, shares 0-1).
    def value(alias: str, column: str) -> str:
        if column in NULLABLE_HOUR_COLUMNS:
            return f"coalesce({alias}.{column}, -1)"
        return f"{alias}.{column}"

    join = " AND ".join(f"{value('hours', c)} = {value('stored', c)}" for c in HOUR_COLUMNS)
    # Hashed, not merged: the planner chose a merge join, which sorted both sides on their text
    # keys first (unattributed's 728,000 hours: 5.5 s, where the hash join takes 2.7).
    cursor.execute("SET LOCAL enable_mergejoin = off")
    cursor.execute(
        f"""
        WITH stored AS (
            SELECT stored.ctid AS old_row, {", ".join(f"stored.{c}" for c in HOUR_COLUMNS)}
            FROM {hours_table} AS stored
            JOIN {table} AS finding ON finding.id = stored.finding_id
            WHERE finding.kind = %s{period}
        ), changed AS MATERIALIZED (
            SELECT stored.old_row, {", ".join(f"hours.{c}" for c in HOUR_COLUMNS)}
            FROM stored FULL JOIN {computed} AS hours ON {join}
            WHERE stored.old_row IS NULL OR hours.finding_id IS NULL
        ), gone AS (
            DELETE FROM {hours_table}
            WHERE ctid IN (SELECT old_row FROM changed WHERE old_row IS NOT NULL)
            RETURNING finding_id, hour, 0 AS came
        ), came AS (
            INSERT INTO {hours_table} ({columns})
            SELECT {columns} FROM changed WHERE old_row IS NULL
            RETURNING finding_id, hour, 1 AS came
        )
        SELECT finding_id, (hour AT TIME ZONE 'UTC')::date, sum(came), count(*) - sum(came)
        FROM (SELECT * FROM came UNION ALL SELECT * FROM gone) AS moved
        GROUP BY 1, 2
        """,
        [kind, *period_params, *computed_params],
    )
    inserted = deleted = 0
    for finding_id, day, came, went in cursor.fetchall():
        hours_changed.day(finding_id, day)
        inserted, deleted = inserted + came, deleted + went
    cursor.execute("SET LOCAL enable_mergejoin TO DEFAULT")
    return inserted, deleted


def _kind_store(
    *,
    kind: str,
    subjects: dict[str, compute.SubjectHours],
    start: date | None,
    end: date | None,
    org: Organization,
    settings: InsightsSettings,
    as_of: datetime | None,
    narrow: bool = False,
) -> dict:
    existing = {finding.subject_key: finding for finding in Finding.objects.filter(kind=kind)}
    loaded = _loaded(existing.values())

    created = []
    rows = []
    day_rows = []  # where the hours are stored in SQL (PostgreSQL): the days to spread
    spread_days_here = connection.vendor != "postgresql"
    if kind in SAVINGS_ONLY_KINDS:
        for finding in existing.values():
            finding.savings_per_month = {}  # a lever not found again saves nothing
    # A subject with no finding yet becomes one only if it has something to show (a busy GPU,
    # or nothing unattributed: no finding); one INSERT per batch, not one per finding.
    new = [
        Finding(
            kind=kind,
            subject_key=key,
            resource_id=subject.resource_id,
            billing_account_id=subject.billing_account_id,
            service_name=subject.service_name,
            reason="",
        )
        for key, subject in subjects.items()
        if key not in existing
        and (
            subject.savings_per_month
            or getattr(subject, "savings", None)
            or any(figure.wasted > 0 for figure in subject.hours.values())
            or _days_waste(subject)
        )
    ]
    for finding in Finding.objects.bulk_create(new, batch_size=500):
        if finding.pk is None:
            raise RuntimeError(f"The database did not return the id of new finding {finding}")
        existing[finding.subject_key] = finding
        created.append(finding.pk)
    for key, subject in subjects.items():
        if key not in existing:
            continue
        finding = existing[key]
        if subject.days and subject.hours:
            raise ValueError(f"{kind} {key}: a subject has hours or days, not both")
        for (day, currency, line_key), parts in subject.days.items():
            # A day of several parts (rare) is spread here: each part on its own, then added.
            if spread_days_here or len(parts) > 1:
                rows.extend(_day_rows(finding.pk, day, currency, line_key, parts))
                continue
            (part,) = parts
            day_rows.append(
                (finding.pk, line_key, compute.day_start(day), currency, part.spend, part.wasted,
                 *part.owner)
            )  # fmt: skip
        for hour_key, figure in subject.hours.items():
            # (hour, currency), or (hour, currency, line key) for a subject on several resources
            hour, currency = hour_key[0], hour_key[1]
            rows.append(
                (
                    finding.pk,
                    figure.line_key or (hour_key[2] if len(hour_key) > 2 else subject.line_key),
                    hour,
                    currency,
                    _exact(figure.wasted),
                    _exact(figure.spend),
                    figure.measured,
                    figure.idle_share,
                    *figure.owner,
                )
            )
        if kind == Kind.IDLE_GPU:
            finding.evidence = {"gpus": subject.gpus}
        if isinstance(subject, compute_part2.PartTwoSubject):
            finding.evidence = {"gpus": subject.gpus, **subject.evidence}
            if kind in SAVINGS_ONLY_KINDS:
                finding.savings_per_month = {
                    c: _text(a) for c, a in sorted(subject.savings.items()) if a > 0
                }
        elif subject.evidence:
            finding.evidence = dict(subject.evidence)
    inserted, deleted = _hours_store(
        kind=kind, rows=rows, day_rows=day_rows, start=start, end=end, stored=bool(loaded)
    )
    counts = {
        "subjects": len(subjects),
        "created": 0,
        "gone": 0,
        "reopened": 0,
        "hours": len(rows) + 24 * len(day_rows),
        "hours_written": inserted,
        "hours_deleted": deleted,
    }
    _refresh(
        kind=kind,
        findings=_narrowed(
            list(existing.values()), kind=kind, narrow=narrow, created=created, keys=subjects
        ),
        loaded=loaded,
        subjects=subjects,
        created=set(created),
        start=start,
        end=end,
        org=org,
        settings=settings,
        as_of=as_of,
        counts=counts,
    )
    return counts


HOUR_COLUMNS = (
    "finding_id",
    "line_key",
    "hour",
    "currency",
    "wasted",
    "spend",
    "measured",
    "idle_share",
    "project_id",
    "experiment_id",
    "deployment_id",
)


NULLABLE_HOUR_COLUMNS = ("idle_share", "project_id", "experiment_id", "deployment_id")


COMPUTED_TABLE = "insights_finding_hours_tmp"
ANALYZE_AFTER_HOURS = 10_000  # hours written or deleted by a recompute that renew the statistics
DAYS_TABLE = "insights_finding_days_tmp"
DAY_COLUMNS = (
    "finding_id",
    "line_key",
    "day",
    "currency",
    "spend",
    "wasted",
    "project_id",
    "experiment_id",
    "deployment_id",
)


def _days_waste(subject: compute.SubjectHours) -> bool:
    """Whether some hour of the subject's days is wasted (as its hours would say)."""
    for (day, _currency, _line_key), parts in subject.days.items():
        if len(parts) == 1:
            if parts[0].wasted > 0:  # then its last hour is, and no hour of it otherwise
                return True
        elif any(row[4] > 0 for row in _day_rows(0, day, "", "", parts)):
            return True
    return False


def _day_rows(finding_id: int, day: date, currency: str, line_key: str, parts: list) -> list:
    """A day's parts as the rows of its 24 hours (HOUR_COLUMNS), each part spread on its own
    and the parts of an hour added up; the owner is the first part's."""
    spend: dict[datetime, Decimal] = defaultdict(Decimal)
    wasted: dict[datetime, Decimal] = defaultdict(Decimal)
    for part in parts:
        for hour, spend_part, wasted_part in compute.day_hours(day, part):
            spend[hour] += spend_part
            wasted[hour] += wasted_part
    return [
        (finding_id, line_key, hour, currency, _exact(wasted[hour]), _exact(spend[hour]), True,
         None, *parts[0].owner)
        for hour in spend
    ]  # fmt: skip


def _days_spread_sql(cursor, day_rows: list[tuple], *, into: str = COMPUTED_TABLE) -> None:
    """Days of one part each (DAY_COLUMNS) spread over their hours into `into`, as
    _day_rows does: even parts truncated at the stored scale (whole numbers of its smallest
    unit, as compute._spread_sql), the remainder on the last hour."""
    cursor.execute(f"DROP TABLE IF EXISTS {DAYS_TABLE}")
    cursor.execute(
        f"""CREATE TEMPORARY TABLE {DAYS_TABLE} (
            finding_id bigint, line_key varchar(1500), day timestamptz, currency varchar(10),
            spend numeric(38, 15), wasted numeric(38, 15), project_id bigint,
            experiment_id bigint, deployment_id bigint)"""
    )
    with cursor.copy(f"COPY {DAYS_TABLE} ({', '.join(DAY_COLUMNS)}) FROM STDIN") as copy:
        for row in day_rows:
            copy.write_row(row)
    scale = compute.SCALE
    cursor.execute(
        f"""
        INSERT INTO {into} ({", ".join(HOUR_COLUMNS)})
        SELECT days.finding_id, days.line_key, days.day + days.k * interval '1 hour',
               days.currency,
               CASE WHEN days.k = 23 THEN days.wasted - 23 * days.wasted_part
                    ELSE days.wasted_part END,
               CASE WHEN days.k = 23 THEN days.spend - 23 * days.spend_part
                    ELSE days.spend_part END,
               TRUE, NULL, days.project_id, days.experiment_id, days.deployment_id
        FROM (
            -- In finding and hour order, as the finding and hour index stores them: the days
            -- sorted, each day's 24 hours in a row (the series in the select list). A join
            -- with the series gave hour 0 of every day, then hour 1 ...: storage's 1.1M hours
            -- went into the index out of order, 9.3 s where in order they take 6.2
            -- (bench/findings_recompute.py).
            SELECT sorted.*, generate_series(0, 23) AS k
            FROM (
                SELECT *, div(spend * 1e{scale}, 24) * 1e-{scale} AS spend_part,
                       div(wasted * 1e{scale}, 24) * 1e-{scale} AS wasted_part
                FROM {DAYS_TABLE}
                ORDER BY finding_id, day
            ) AS sorted
        ) AS days
        """
    )
    cursor.execute(f"DROP TABLE {DAYS_TABLE}")


def _hours_store(
    *,
    kind: str,
    rows: list[tuple],
    day_rows: list[tuple],
    start: date | None,
    end: date | None,
    stored: bool,
) -> tuple[int, int]:
    """A Python kind's computed hours (rows of HOUR_COLUMNS' values) stored in place of those of
    the period. On PostgreSQL only what changed is written: the rows are COPYed into a temporary
    table and diffed against the stored ones as the SQL kinds do (_hours_diff_write); deleting
    all the kind's hours and COPYing them all again was most of the nightly case's time
    (bench/findings_recompute.py). Elsewhere (SQLite) they are all deleted and written again.
    `day_rows`: days of one part each (DAY_COLUMNS), spread over their hours in SQL on the way
    (_days_spread_sql; none on SQLite, where `rows` has them spread). `stored`: whether the kind
    had findings before (none: no hour to diff against, the rows and days go straight into the
    table). Returns (inserted, deleted)."""
    if connection.vendor != "postgresql":
        deleted = _old_hours_delete(kind=kind, start=start, end=end)
        FindingHour.objects.bulk_create(
            [FindingHour(**dict(zip(HOUR_COLUMNS, row, strict=True))) for row in rows],
            batch_size=5000,
        )
        if rows or deleted:
            hours_changed.everywhere()
        return len(rows), deleted
    columns = ", ".join(HOUR_COLUMNS)
    if not stored:
        # Nothing to diff against: the hours and the days' hours go straight into the table
        # (through the temporary table, a first recompute wrote storage's 1.1M hours twice).
        if rows or day_rows:
            hours_changed.everywhere(findings={row[0] for part in (rows, day_rows) for row in part})
        table = FindingHour._meta.db_table
        with connection.cursor() as cursor:
            if rows:
                with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
            if day_rows:
                _days_spread_sql(cursor, day_rows, into=table)
        return len(rows) + 24 * len(day_rows), 0
    with connection.cursor() as cursor:
        _temporary_fill(
            cursor, name=COMPUTED_TABLE, like=FindingHour._meta.db_table, columns=columns, rows=rows
        )
        if day_rows:
            _days_spread_sql(cursor, day_rows)
        cursor.execute(f"ANALYZE {COMPUTED_TABLE}")
        # With nothing stored, this is a plain INSERT of the computed hours.
        result = _hours_diff_write(
            cursor, kind=kind, computed=COMPUTED_TABLE, computed_params=[], start=start, end=end
        )
        cursor.execute(f"DROP TABLE {COMPUTED_TABLE}")
    return result


def _temporary_fill(cursor, *, name: str, like: str, columns: str, rows) -> None:
    """A fresh, empty temporary table `name` of `like`'s `columns`, the rows COPYed into it."""
    cursor.execute(f"DROP TABLE IF EXISTS {name}")
    cursor.execute(f"CREATE TEMPORARY TABLE {name} AS SELECT {columns} FROM {like} WITH NO DATA")
    with cursor.copy(f"COPY {name} ({columns}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _money(amount: Decimal, currency: str) -> str:
    return f"{currency} {amount.quantize(Decimal('0.01')):,}"


def _loaded(findings) -> dict[int, tuple]:
    """The refreshed fields of findings as loaded (before a recompute changes them), which
    _refresh compares against: a finding whose figures did not change is not written."""
    return {finding.pk: _refreshed(finding) for finding in findings}


def _refreshed(finding: Finding) -> tuple:
    # JSON fields compared as the JSON stored (a tuple and a list are the same document).
    return tuple(
        json.dumps(value, sort_keys=True, default=str) if field in JSON_FIELDS else value
        for field in REFRESHED_FIELDS
        if field != "updated_at"
        for value in [getattr(finding, REFRESHED_ATTRIBUTES.get(field, field))]
    )


def _refresh(
    *,
    kind: str,
    findings: list[Finding],
    loaded: dict[int, tuple],
    subjects: dict[str, compute.SubjectHours],
    created: set[int],
    start: date | None,
    end: date | None,
    org: Organization,
    settings: InsightsSettings,
    as_of: datetime | None,
    counts: dict,
) -> None:
    """Each finding's figures from its whole life (_life_figures); a finding with nothing left
    is gone (an unattributed one: resolved by its claim), and one that comes back after gone
    reopens.
    Only the findings whose figures changed are written (their updated_at too): the nightly
    recompute finds nearly all of them as they were."""
    ids = [finding.pk for finding in findings]
    totals: dict[int, dict] = defaultdict(dict)
    seen: dict[int, dict] = {}
    recent: dict[int, dict] = defaultdict(dict)
    hours_of, owners = _life_figures(ids=ids, start=start, end=end, as_of=as_of)
    for pk, (_measured, currency), row in (
        (pk, key, row) for pk, rows in hours_of.items() for key, row in rows.items()
    ):
        totals[pk][currency] = totals[pk].get(currency, Decimal("0")) + row["wasted_total"]
        if row.get("wasted_recent") is not None:
            recent[pk][currency] = recent[pk].get(currency, Decimal("0")) + row["wasted_recent"]
        if row["first"] is not None:
            was = seen.get(pk)
            seen[pk] = {
                "first": row["first"] if was is None else min(was["first"], row["first"]),
                "last": row["last"] if was is None else max(was["last"], row["last"]),
            }
    facts = findings_part2.facts(kind=kind, ids=ids)

    stillborn: list[int] = []
    emptied: list[int] = []
    changed: list[Finding] = []
    for finding in findings:
        wasted = {c: a for c, a in totals.get(finding.pk, {}).items() if a > 0}
        org_wasted = wasted.get(org.currency, Decimal("0"))
        subject = subjects.get(finding.subject_key)
        says = subject is not None and subject.savings_per_month is not None
        live = bool(wasted) or bool(says and subject.savings_per_month)
        figures = hours_of.get(finding.pk, {})
        if kind == Kind.IDLE_GPU and live:
            currency = org.currency if org.currency in wasted else sorted(wasted)[0]
            spend = figures.get((True, currency), {}).get("spend") or Decimal("0")
            live = (
                bool(spend)
                and wasted[currency] * 100 >= spend * settings.idle_gpu_min_share_percent
            )
        if kind == Kind.UNATTRIBUTED:
            live = org_wasted > settings.unattributed_threshold or any(
                a > settings.unattributed_threshold for c, a in wasted.items() if c != org.currency
            )
        if kind in SAVINGS_ONLY_KINDS:
            live = bool(finding.savings_per_month)
        if not live:
            if finding.pk in created:
                stillborn.append(finding.pk)  # deleted together below, not one by one
                continue
            if finding.status not in {Status.GONE, Status.RESOLVED}:
                if kind == Kind.UNATTRIBUTED:
                    _change(finding=finding, to=Status.RESOLVED, note="Claimed: now attributed.")
                else:
                    _change(finding=finding, to=Status.GONE, note="Its cause disappeared.")
                counts["gone"] += 1
            # (As loaded: a lever's savings are already cleared in memory by _kind_store.)
            if loaded.get(finding.pk, ())[:3] != ("{}", "{}", 0):
                emptied.append(finding.pk)
            continue
        if finding.pk in created:
            counts["created"] += 1
        elif finding.status == Status.GONE:
            _change(finding=finding, to=Status.OPEN, note="Came back.")
            counts["reopened"] += 1
        finding.wasted = {c: _text(a) for c, a in sorted(wasted.items())}
        if says:
            finding.savings_per_month = {
                c: _text(_exact(a)) for c, a in sorted(subject.savings_per_month.items()) if a > 0
            }
        elif kind in ONE_OFF_KINDS or kind == Kind.UNATTRIBUTED:
            finding.savings_per_month = {}
        elif kind in SAVINGS_ONLY_KINDS:
            pass  # the lever's own estimate, set by _kind_store
        else:
            finding.savings_per_month = {
                c: _text(a) for c, a in sorted(recent.get(finding.pk, {}).items()) if a > 0
            }
        finding.rank_amount = org_wasted
        finding.first_seen = seen.get(finding.pk, {}).get("first")
        finding.last_seen = seen.get(finding.pk, {}).get("last")
        owner = owners.get(finding.pk)
        if owner is None and subject is not None and any(subject.owner):
            owner = dict(
                zip(("project_id", "experiment_id", "deployment_id"), subject.owner, strict=True)
            )
        if owner:
            finding.project_id = owner["project_id"]
            finding.experiment_id = owner["experiment_id"]
            finding.deployment_id = owner["deployment_id"]
        money = wasted or finding.savings_per_month
        currency = org.currency if org.currency in money else sorted(money)[0]
        measured = figures.get((True, currency), {})
        unmeasured = figures.get((False, currency), {})
        billed = (measured.get("hours") or 0) + (unmeasured.get("hours") or 0)
        evidence = dict(finding.evidence or {})
        evidence.update(
            {
                "currency": currency,
                "billed_hours": billed,
                "measured_hours": measured.get("hours") or 0,
                "unmeasured_hours": unmeasured.get("hours") or 0,
                "measured_spend": _text(measured.get("spend") or Decimal("0")),
                "unmeasured_spend": _text(unmeasured.get("spend") or Decimal("0")),
            }
        )
        evidence.update(facts.get(finding.pk, {}))
        finding.evidence = evidence
        if subject is not None and subject.reason:
            reason = subject.reason
        elif kind in compute_part3.REASONS:
            reason = compute_part3.REASONS[kind](
                finding=finding,
                currency=currency,
                wasted=wasted.get(currency, Decimal("0")),
                billed=billed,
            )
        elif kind in findings_part2.REASONS:
            reason = findings_part2.REASONS[kind](
                evidence=evidence, wasted=wasted.get(currency, Decimal("0")), currency=currency
            )
        elif kind == Kind.IDLE_GPU:
            spend = measured.get("spend") or Decimal("0")
            share = (wasted[currency] / spend * 100) if spend else Decimal("0")
            reason = f"GPU idle {share.quantize(Decimal('1'))}% of {billed:,} billed hours"
            if evidence["unmeasured_hours"]:
                reason += f" ({evidence['unmeasured_hours']:,} unmeasured)"
        else:
            reason = (
                f"{_money(wasted[currency], currency)} with no project over {billed:,} billed hours"
            )
        finding.reason = reason[:500]
        if finding.pk in created or _refreshed(finding) != loaded.get(finding.pk):
            finding.updated_at = timezone.now()
            changed.append(finding)
    if emptied:
        Finding.objects.filter(pk__in=emptied).update(
            wasted={}, savings_per_month={}, rank_amount=0
        )
    _findings_write(changed)
    if stillborn:
        Finding.objects.filter(pk__in=stillborn).delete()
        hours_changed.forget(stillborn)


def _life_figures(
    *, ids: list[int], start: date | None, end: date | None, as_of: datetime | None
) -> tuple[dict[int, dict], dict[int, dict]]:
    """The figures of findings `ids` over their whole lives: per finding, per (measured,
    currency), the distinct hours, spend, wasted, first and last wasted hour and the wasted of
    the 30 days before `as_of`; and per finding the attribution of most of its spend.

    The hours of the recomputed period `[start, end)` and of the last 30 days are read; on
    PostgreSQL the other days come from their rollup (FindingDayHours, FindingDayOwner), which
    this recompute did not change: a failed run's storage is a row per hour for as long as it
    is kept, and summing every finding's whole life again made a month's recompute grow with the
    history (storage_of_finished_runs: 4.3 s at three years against 1.8 s at one)."""
    recent_from = None if as_of is None else as_of - timedelta(days=30)
    hours = FindingHour.objects.filter(finding_id__in=ids)
    outside = None  # the days read from the rollup
    if day_rollup_used() and (start is not None or end is not None):
        # Read as hours: the period's days, and the days from the 30 days' first (whole UTC
        # days); every other day from the rollup.
        as_hours, period_days = Q(), Q()
        if start is not None:
            as_hours &= Q(hour__gte=compute.day_start(start))
            period_days &= Q(day__gte=start)
        if end is not None:
            as_hours &= Q(hour__lt=compute.day_start(end))
            period_days &= Q(day__lt=end)
        outside = ~period_days
        if recent_from is not None:
            first_recent = recent_from.astimezone(UTC).date()
            as_hours |= Q(hour__gte=compute.day_start(first_recent))
            outside &= Q(day__lt=first_recent)
        hours = hours.filter(as_hours)
    wasted_hours = Q(wasted__gt=0)
    figures_of = {
        "hours": Count("hour", distinct=True),
        "spend": Sum("spend"),
        "wasted_total": Sum("wasted"),
        "first": Min("hour", filter=wasted_hours),
        "last": Max("hour", filter=wasted_hours),
    }
    if recent_from is not None:
        figures_of["wasted_recent"] = Sum("wasted", filter=Q(hour__gte=recent_from, hour__lt=as_of))
    hours_of: dict[int, dict] = {}
    for row in hours.values("finding_id", "measured", "currency").annotate(**figures_of).order_by():
        hours_of.setdefault(row["finding_id"], {})[(row["measured"], row["currency"])] = {
            "wasted_recent": None,
            **{name: row[name] for name in figures_of},
        }
    spend_of: dict[int, dict] = defaultdict(lambda: defaultdict(Decimal))
    owner_fields = ("project_id", "experiment_id", "deployment_id")
    for row in hours.values("finding_id", *owner_fields).annotate(spend=Sum("spend")).order_by():
        spend_of[row["finding_id"]][tuple(row[f] for f in owner_fields)] += row["spend"]
    if outside is not None:
        days = FindingDayHours.objects.filter(outside, finding_id__in=ids)
        for row in (
            days.values("finding_id", "measured", "currency")
            .annotate(
                days_hours=Sum("hours"),
                days_spend=Sum("spend"),
                days_wasted=Sum("wasted"),
                days_first=Min("first_wasted"),
                days_last=Max("last_wasted"),
            )
            .order_by()
        ):
            rows = hours_of.setdefault(row["finding_id"], {})
            key = (row["measured"], row["currency"])
            was = rows.get(key)
            if was is None:
                rows[key] = {
                    "hours": row["days_hours"],
                    "spend": row["days_spend"],
                    "wasted_total": row["days_wasted"],
                    "first": row["days_first"],
                    "last": row["days_last"],
                    # (The 30 days are read as hours: none of them is here.)
                    "wasted_recent": None,
                }
                continue
            was["hours"] += row["days_hours"]
            was["spend"] += row["days_spend"]
            was["wasted_total"] += row["days_wasted"]
            firsts = [t for t in (was["first"], row["days_first"]) if t is not None]
            lasts = [t for t in (was["last"], row["days_last"]) if t is not None]
            was["first"] = min(firsts, default=None)
            was["last"] = max(lasts, default=None)
        for row in (
            FindingDayOwner.objects.filter(outside, finding_id__in=ids)
            .values("finding_id", *owner_fields)
            .annotate(days_spend=Sum("spend"))
            .order_by()
        ):
            spend_of[row["finding_id"]][tuple(row[f] for f in owner_fields)] += row["days_spend"]
    # Most of its spend; between equals, the attribution that sorts first (unset ids last).
    owners = {
        pk: dict(
            zip(
                owner_fields,
                min(spent, key=lambda o: (-spent[o], [(i is None, i or 0) for i in o])),
                strict=True,
            )
        )
        for pk, spent in spend_of.items()
    }
    return hours_of, owners


def _findings_write(changed: list[Finding]) -> None:
    """The REFRESHED_FIELDS of `changed` written. On PostgreSQL, COPYed into a temporary table
    and written with one UPDATE: bulk_update's CASE of a branch per field and finding took
    Django seconds to build for a first recompute's thousands of findings (idle_between_runs:
    1,935 findings, about 3 s). Elsewhere (SQLite) bulk_update, one statement per batch; small
    batches, since the CASE of each field has a branch per finding of the batch (500 made each
    statement a second)."""
    if not changed:
        return
    if connection.vendor != "postgresql":
        Finding.objects.bulk_update(changed, fields=REFRESHED_FIELDS, batch_size=UPDATE_BATCH)
        return
    fields = [Finding._meta.get_field(name) for name in REFRESHED_FIELDS]
    columns = ", ".join(field.column for field in fields)
    rows = (
        [finding.pk]
        + [
            json.dumps(value) if field.name in JSON_FIELDS else value
            for field in fields
            for value in [getattr(finding, field.attname)]
        ]
        for finding in changed
    )
    with connection.cursor() as cursor:
        _temporary_fill(
            cursor,
            name=FINDINGS_TABLE,
            like=Finding._meta.db_table,
            columns=f"id, {columns}",
            rows=rows,
        )
        assignments = ", ".join(f"{field.column} = new.{field.column}" for field in fields)
        cursor.execute(
            f"UPDATE {Finding._meta.db_table} AS finding SET {assignments}"
            f" FROM {FINDINGS_TABLE} AS new WHERE finding.id = new.id"
        )
        cursor.execute(f"DROP TABLE {FINDINGS_TABLE}")


REFRESHED_FIELDS = [
    "wasted",
    "savings_per_month",
    "rank_amount",
    "first_seen",
    "last_seen",
    "project",
    "experiment",
    "deployment",
    "evidence",
    "reason",
    "updated_at",
]
# The foreign keys compared by their ids (not the rows they would load).
REFRESHED_ATTRIBUTES = {
    "project": "project_id",
    "experiment": "experiment_id",
    "deployment": "deployment_id",
}
JSON_FIELDS = {"wasted", "savings_per_month", "evidence"}
UPDATE_BATCH = 50
FINDINGS_TABLE = "insights_findings_tmp"
