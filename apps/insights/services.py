"""Writes of the insights app: recomputing findings (claimed, one at a time, idempotent) and
their workflow (acknowledge, snooze, resolve, reopen), each change kept as a history row."""

import logging
import time
from collections import defaultdict
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.db import connection, transaction
from django.db.models import Count, Max, Min, Q, Sum
from django.utils import timezone

from apps.accounts.models import Organization

from . import compute, compute_part3
from .models import (
    ONE_OFF_KINDS,
    Finding,
    FindingEvent,
    FindingHour,
    InsightsSettings,
    Kind,
    RecomputeLock,
    RecomputeRun,
    Status,
)
from .selectors import data_as_of

logger = logging.getLogger(__name__)

# A recompute whose heartbeat is older than this is taken to have died: its lock is taken over.
STALE_AFTER = timedelta(minutes=10)
MONEY_PLACES = Decimal("1e-15")
KIND_HOURS = {
    Kind.IDLE_GPU: compute.idle_gpu_hours,
    Kind.UNATTRIBUTED: compute.unattributed_hours,
    **compute_part3.KIND_HOURS,
}


def _exact(value: Decimal) -> Decimal:
    return value.quantize(MONEY_PLACES)


def _text(value: Decimal) -> str:
    """An exact decimal string without trailing zeros (12.500000 -> "12.5")."""
    text = format(value.normalize(), "f")
    return text if text != "-0" else "0"


# -- The workflow -------------------------------------------------------------------------------


def _change(
    *, finding: Finding, to: str, by=None, note: str = "", until: date | None = None
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
    """Snoozes that ran out (their day has come) open again, with a history row each."""
    woken = 0
    for finding in Finding.objects.filter(status=Status.SNOOZED, snoozed_until__lte=today):
        _change(
            finding=finding, to=Status.OPEN, note=f"Snooze until {finding.snoozed_until} ended."
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


def _beat(holder: str, run: RecomputeRun) -> None:
    now = timezone.now()
    RecomputeLock.objects.filter(pk=1, holder=holder).update(heartbeat_at=now)
    RecomputeRun.objects.filter(pk=run.pk).update(heartbeat_at=now)


def recompute_run_execute(*, recompute_run: RecomputeRun) -> RecomputeRun:
    """Claim the lock and run every queued recompute, oldest first; a run found running with a
    stale heartbeat (its process died) is queued again first. Without the lock, return: the
    holder drains the queue, this run included, before it lets go (and looks again after)."""
    holder = f"recompute-{recompute_run.pk}-{timezone.now().timestamp()}"
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
    recompute_run.refresh_from_db()
    return recompute_run


def _execute(run: RecomputeRun, holder: str) -> None:
    try:
        with transaction.atomic():
            summary = _recompute(start=run.start, end=run.end, beat=lambda: _beat(holder, run))
    except Exception as error:
        logger.exception("Findings recompute #%s failed", run.pk)
        RecomputeRun.objects.filter(pk=run.pk).update(
            status=RecomputeRun.Status.FAILED, error=str(error), finished_at=timezone.now()
        )
        return
    RecomputeRun.objects.filter(pk=run.pk).update(
        status=RecomputeRun.Status.SUCCEEDED, summary=summary, finished_at=timezone.now()
    )


def _recompute(*, start: date | None, end: date | None, beat) -> dict:
    today = timezone.now().date()
    summary: dict = {"start": start and start.isoformat(), "end": end and end.isoformat()}
    summary["woken"] = findings_wake(today=today)
    org = Organization.get()
    settings = InsightsSettings.get()
    as_of = data_as_of()
    kinds = {}
    for kind, hours_of in KIND_HOURS.items():
        beat()
        clock = time.perf_counter()
        subjects = hours_of(start=start, end=end)
        kinds[kind] = _kind_store(
            kind=kind,
            subjects=subjects,
            start=start,
            end=end,
            org=org,
            settings=settings,
            as_of=as_of,
        )
        kinds[kind]["seconds"] = round(time.perf_counter() - clock, 3)
    summary["kinds"] = kinds
    summary["findings"] = {
        status: Finding.objects.filter(status=status).count() for status in Status.values
    }
    return summary


def _kind_store(
    *,
    kind: str,
    subjects: dict[str, compute.SubjectHours],
    start: date | None,
    end: date | None,
    org: Organization,
    settings: InsightsSettings,
    as_of: datetime | None,
) -> dict:
    existing = {finding.subject_key: finding for finding in Finding.objects.filter(kind=kind)}
    old_hours = FindingHour.objects.filter(finding__kind=kind)
    if start is not None:
        old_hours = old_hours.filter(hour__gte=compute.day_start(start))
    if end is not None:
        old_hours = old_hours.filter(hour__lt=compute.day_start(end))
    old_hours.delete()

    created = []
    rows = []
    for key, subject in subjects.items():
        if key not in existing:
            if not subject.savings_per_month and not any(
                figure.wasted > 0 for figure in subject.hours.values()
            ):
                continue  # a busy GPU, or nothing unattributed: no finding
            finding = Finding.objects.create(
                kind=kind,
                subject_key=key,
                resource_id=subject.resource_id,
                billing_account_id=subject.billing_account_id,
                service_name=subject.service_name,
                reason="",
            )
            existing[key] = finding
            created.append(finding.pk)
        finding = existing[key]
        for key, figure in subject.hours.items():
            hour, currency = key[0], key[1]
            rows.append(
                (
                    finding.pk,
                    figure.line_key or subject.line_key,
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
        elif subject.evidence:
            finding.evidence = dict(subject.evidence)
    _hours_write(rows)
    counts = {"subjects": len(subjects), "created": 0, "gone": 0, "reopened": 0, "hours": len(rows)}
    _refresh(
        kind=kind,
        findings=list(existing.values()),
        subjects=subjects,
        created=set(created),
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


def _hours_write(rows: list[tuple]) -> None:
    """Rows of HOUR_COLUMNS' values: COPY on PostgreSQL (bulk_create's model instances and
    per-value preparation were 40% of a million-line recompute, bench/findings_recompute.py);
    bulk_create elsewhere (SQLite)."""
    if connection.vendor != "postgresql":
        FindingHour.objects.bulk_create(
            [FindingHour(**dict(zip(HOUR_COLUMNS, row, strict=True))) for row in rows],
            batch_size=5000,
        )
        return
    sql = f"COPY {FindingHour._meta.db_table} ({', '.join(HOUR_COLUMNS)}) FROM STDIN"
    with connection.cursor() as cursor, cursor.copy(sql) as copy:
        for row in rows:
            copy.write_row(row)


def _money(amount: Decimal, currency: str) -> str:
    return f"{currency} {amount.quantize(Decimal('0.01')):,}"


def _refresh(
    *,
    kind: str,
    findings: list[Finding],
    subjects: dict[str, compute.SubjectHours],
    created: set[int],
    org: Organization,
    settings: InsightsSettings,
    as_of: datetime | None,
    counts: dict,
) -> None:
    """Each finding's figures from all its hours; a finding with nothing left is gone (an
    unattributed one: resolved by its claim), and one that comes back after gone reopens."""
    ids = [finding.pk for finding in findings]
    totals: dict[int, dict] = defaultdict(dict)
    seen: dict[int, dict] = {}
    recent: dict[int, dict] = defaultdict(dict)
    hours_of: dict[int, dict] = {}
    owners: dict[int, tuple] = {}
    hours = FindingHour.objects.filter(finding_id__in=ids)
    for row in hours.values("finding_id", "currency").annotate(wasted=Sum("wasted")).order_by():
        totals[row["finding_id"]][row["currency"]] = row["wasted"]
    for row in (
        hours.filter(wasted__gt=0)
        .values("finding_id")
        .annotate(first=Min("hour"), last=Max("hour"))
        .order_by()
    ):
        seen[row["finding_id"]] = row
    if as_of is not None:
        for row in (
            hours.filter(hour__gte=as_of - timedelta(days=30), hour__lt=as_of)
            .values("finding_id", "currency")
            .annotate(wasted=Sum("wasted"))
            .order_by()
        ):
            recent[row["finding_id"]][row["currency"]] = row["wasted"]
    for row in (
        hours.values("finding_id", "measured", "currency")
        .annotate(hours=Count("hour", distinct=True), spend=Sum("spend"), wasted=Sum("wasted"))
        .order_by()
    ):
        hours_of.setdefault(row["finding_id"], {})[(row["measured"], row["currency"])] = row
    for row in (
        hours.values("finding_id", "project_id", "experiment_id", "deployment_id")
        .annotate(spend=Sum("spend"))
        .order_by("finding_id", "-spend")
    ):
        owners.setdefault(row["finding_id"], row)

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
        if not live:
            if finding.pk in created:
                finding.delete()
                continue
            if finding.status not in {Status.GONE, Status.RESOLVED}:
                if kind == Kind.UNATTRIBUTED:
                    _change(finding=finding, to=Status.RESOLVED, note="Claimed: now attributed.")
                else:
                    _change(finding=finding, to=Status.GONE, note="Its cause disappeared.")
                counts["gone"] += 1
            Finding.objects.filter(pk=finding.pk).update(
                wasted={}, savings_per_month={}, rank_amount=0
            )
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
        elif kind == Kind.IDLE_GPU:
            spend = measured.get("spend") or Decimal("0")
            share = (wasted[currency] / spend * 100) if spend else Decimal("0")
            reason = f"GPU idle {share.quantize(Decimal('1'))}% of {billed} billed hours"
            if evidence["unmeasured_hours"]:
                reason += f" ({evidence['unmeasured_hours']} unmeasured)"
        else:
            reason = (
                f"{_money(wasted[currency], currency)} with no project over {billed} billed hours"
            )
        finding.reason = reason[:500]
        finding.save(
            update_fields=[
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
        )
