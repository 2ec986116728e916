"""The fleet page's daily rollup (GpuDay) and the segments it is built through (GpuSegment).

The fleet page groups GPU-hours by day, utilisation band, GPU model, project and GPU. Read from
the hourly rollup, a year of a fleet of 10,000 GPUs is a million rows, and each project's share
was a query of its own; GpuDay holds the same figures one row per GPU, UTC day and set of
projects, so every grouping is one query over a few rows per GPU-day.

Which projects a GPU-hour counts for follows the rules of selectors.py (a registration's window,
the GPU's resolution to a billed resource): GpuSegment cuts each GPU's time into stretches covered
by the same projects' registrations, and each GPU-hour takes the set of the stretch it lies in.
A project's figures are then the sum over the sets that name it, a lead's the sum over the sets
that name one of their projects: each GPU-hour counted once, as the hourly selectors count it.

Kept current, never stale when read:
- a GPU metrics import marks the days it wrote (`days_mark`) and rebuilds them before it commits;
- a change of who used what (the `ownership_changed` port, a host mapping, a GPU's host or label,
  a new GPU, the idle threshold) marks everything, and a task rebuilds it after the commit;
- a read (`days_ensure`) first rebuilds whatever is still marked, so the first page after a
  change pays for the rebuild and shows the new figures.
"""

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta

from django.db import transaction
from django.db.models import Case, F, FloatField, OuterRef, Q, Subquery, Sum, Value, When
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from apps.accounts.models import Organization
from apps.deployments.models import Deployment
from apps.experiments.models import Experiment
from costsite.celery import task_enqueue_on_commit

from .models import GpuDay, GpuHour, GpuRollupState, GpuSegment
from .resolution import EARLIEST, LATEST, _gpus_by_resource, _tail

BANDS = ("idle", "low", "moderate", "busy")
BATCH = 5000
REBUILD_TASK = "apps.gpu.tasks.gpu_days_rebuild_task"


def projects_key(project_ids) -> str:
    return "".join(f",{pk}" for pk in sorted(set(project_ids))) + "," if project_ids else ""


def key_projects(key: str) -> list[int]:
    return [int(part) for part in key.split(",") if part]


def _state() -> GpuRollupState:
    state = GpuRollupState.objects.order_by("pk").first()
    return state if state is not None else GpuRollupState.objects.create(stale_all=True)


def days_mark(*, start: date | None = None, end: date | None = None) -> None:
    """Mark the UTC days [start, end) out of date; no days: everything."""
    state = _state()
    if start is None or end is None:
        GpuRollupState.objects.filter(pk=state.pk).update(stale_all=True)
    elif not state.stale_all:
        GpuRollupState.objects.filter(pk=state.pk).update(
            stale_from=min(start, state.stale_from or start),
            stale_until=max(end, state.stale_until or end),
        )


def days_mark_all_later() -> None:
    """Everything is out of date: mark it and rebuild after the commit (a page that comes first
    rebuilds it itself)."""
    days_mark()
    task_enqueue_on_commit(REBUILD_TASK)


def ownership_changed_handler(*, resource_ids=None, reason: str = "", created_by=None) -> None:
    """`ownership_changed` port: a registration, alias, rule or project changed."""
    days_mark_all_later()


def _is_current(state: GpuRollupState, threshold) -> bool:
    return (
        not state.stale_all
        and state.stale_from is None
        and state.threshold is not None
        and state.threshold == threshold
    )


def days_ensure() -> None:
    """Rebuild whatever of the rollup is marked out of date (one query when nothing is)."""
    state = GpuRollupState.objects.order_by("pk").first()
    threshold = Organization.get().idle_threshold_percent
    if state is not None and _is_current(state, threshold):
        return
    days_rebuild()


@transaction.atomic
def days_rebuild() -> None:
    """Bring the rollup up to date, under a lock on its state row (two rebuilds never interleave:
    the second finds the work done)."""
    state = _state()
    state = GpuRollupState.objects.select_for_update().get(pk=state.pk)
    threshold = Organization.get().idle_threshold_percent
    if _is_current(state, threshold):
        return
    if state.stale_all or state.threshold != threshold:
        segments_rebuild()
        _days_write(start=None, end=None, threshold=float(threshold))
    else:
        _days_write(start=state.stale_from, end=state.stale_until, threshold=float(threshold))
    state.stale_all = False
    state.stale_from = state.stale_until = None
    state.threshold = threshold
    state.built_at = timezone.now()
    state.save()


def _windows() -> dict[int, list[tuple[datetime, datetime, int]]]:
    """GPU id -> (start, end, project) of every registration that reaches it: the windows of
    selectors._hours_filter (an hour counts from the window's starting hour until its end)."""
    by_resource = _gpus_by_resource()
    per_gpu: dict[int, list[tuple[datetime, datetime, int]]] = defaultdict(list)
    from .selectors import resource_uses

    for window in resource_uses(
        experiments=Experiment.objects.all(), deployments=Deployment.objects.all()
    ):
        gpu_ids = set(by_resource.get(window.resource_id, ())) | set(
            by_resource.get(_tail(window.resource_id), ())
        )
        if not gpu_ids:
            continue
        start = (
            window.start.replace(minute=0, second=0, microsecond=0) if window.start else EARLIEST
        )
        end = window.end or LATEST
        if end <= start:
            continue
        for gpu_id in gpu_ids:
            per_gpu[gpu_id].append((start, end, window.project_id))
    return per_gpu


def segments_of(
    windows: list[tuple[datetime, datetime, int]],
) -> list[tuple[datetime, datetime, str]]:
    """Cut one GPU's time at every window's start and end; each piece with the projects whose
    windows cover it (adjacent pieces of the same projects joined)."""
    cuts = sorted({moment for start, end, _ in windows for moment in (start, end)})
    pieces: list[tuple[datetime, datetime, str]] = []
    for start, end in zip(cuts, cuts[1:], strict=False):
        key = projects_key([p for s, e, p in windows if s <= start and e >= end])
        if not key:
            continue
        if pieces and pieces[-1][1] == start and pieces[-1][2] == key:
            pieces[-1] = (pieces[-1][0], end, key)
        else:
            pieces.append((start, end, key))
    return pieces


def segments_rebuild() -> int:
    GpuSegment.objects.all().delete()
    rows = [
        GpuSegment(gpu_id=gpu_id, start=start, end=end, projects=key)
        for gpu_id, windows in _windows().items()
        for start, end, key in segments_of(windows)
    ]
    GpuSegment.objects.bulk_create(rows, batch_size=BATCH)
    return len(rows)


def _band_sums(threshold: float) -> dict:
    low_until = max(threshold, 40.0)
    from .selectors import BAND_MODERATE_UNTIL

    def band(condition):
        return Sum(
            Case(When(condition, then=F("gpu__share")), default=Value(0.0)),
            output_field=FloatField(),
        )

    return {
        "band_idle": band(Q(util_mean__lt=threshold)),
        "band_low": band(Q(util_mean__gte=threshold, util_mean__lt=low_until)),
        "band_moderate": band(Q(util_mean__gte=low_until, util_mean__lt=BAND_MODERATE_UNTIL)),
        # The selectors' default band: 70% and over (and no mean at all, which a counted hour
        # never lacks).
        "band_busy": band(~Q(util_mean__lt=max(low_until, BAND_MODERATE_UNTIL))),
    }


def _days_write(*, start: date | None, end: date | None, threshold: float) -> int:
    """Rewrite the GpuDay rows of the UTC days [start, end) (None: all) from the hourly rollup."""
    days = GpuDay.objects.all()
    hours = GpuHour.objects.filter(util_samples__gt=0)
    if start is not None:
        days = days.filter(day__gte=start, day__lt=end)
        hours = hours.filter(
            hour__gte=datetime.combine(start, datetime.min.time(), tzinfo=UTC),
            hour__lt=datetime.combine(end, datetime.min.time(), tzinfo=UTC),
        )
    days.delete()
    segment = GpuSegment.objects.filter(
        gpu_id=OuterRef("gpu_id"), start__lte=OuterRef("hour"), end__gt=OuterRef("hour")
    ).values("projects")[:1]
    rows = (
        hours.annotate(
            day=TruncDate("hour", tzinfo=UTC),
            key=Coalesce(Subquery(segment), Value("")),
        )
        .values("day", "gpu_id", "key")
        .annotate(
            total=Sum("gpu__share"),
            weighted=Sum(F("util_mean") * F("gpu__share")),
            idle=Sum(F("idle_share") * F("gpu__share")),
            **_band_sums(threshold),
        )
        .order_by()
    )
    batch, written = [], 0
    for row in rows.iterator(chunk_size=BATCH):
        batch.append(
            GpuDay(
                day=row["day"],
                gpu_id=row["gpu_id"],
                projects=row["key"],
                gpu_hours=row["total"],
                weighted_util=row["weighted"] or 0.0,
                idle_gpu_hours=row["idle"] or 0.0,
                band_idle=row["band_idle"],
                band_low=row["band_low"],
                band_moderate=row["band_moderate"],
                band_busy=row["band_busy"],
            )
        )
        if len(batch) >= BATCH:
            GpuDay.objects.bulk_create(batch)
            written += len(batch)
            batch = []
    GpuDay.objects.bulk_create(batch)
    return written + len(batch)


def day_after(moment: datetime) -> date:
    return (moment.astimezone(UTC) + timedelta(days=1)).date()
