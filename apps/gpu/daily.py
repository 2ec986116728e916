"""The fleet page's daily rollup (GpuDay) and the segments it is built through (GpuSegment).

The fleet page groups GPU-hours by day, utilisation band, GPU model, project and GPU. Read from
the hourly rollup, a year of a fleet of 10,000 GPUs is a million rows, and each project's share
was a query of its own; GpuDay holds the same figures one row per GPU, UTC day and set of
projects, so every grouping is one query over a few rows per GPU-day. GpuMonth sums GpuDay per
calendar month for the GPU table over long ranges (whole months read there, the ends from days).

Which projects a GPU-hour counts for follows the rules of selectors.py (a registration's window,
the GPU's resolution to a billed resource): GpuSegment cuts each GPU's time into stretches covered
by the same projects' registrations, and each GPU-hour takes the set of the stretch it lies in.
A project's figures are then the sum over the sets that name it, a lead's the sum over the sets
that name one of their projects: each GPU-hour counted once, as the hourly selectors count it.

Kept current, never stale when read:
- a GPU metrics import marks the days it wrote (`days_mark`) and rebuilds them before it commits;
- a registration added, removed or moved (the `ownership_changed` port with the resource ids it
  moved) marks the GPUs those ids reach (`GpuRollupStaleGpu`) and rebuilds their rows before it
  commits (a task after the commit, when there are more than REBUILD_NOW_GPUS): a run
  registered on one instance rebuilds its eight GPUs, not the fleet;
- any other change of who used what (the port without ids: an alias, a rule, a project; a host
  mapping, a GPU's host or label, a new GPU, the idle threshold) marks everything, and a task
  rebuilds it after the commit;
- a read (`days_ensure`) first rebuilds whatever is still marked, so the first page after a
  change pays for the rebuild and shows the new figures.
"""

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta

from django.db import connection, transaction
from django.db.models import Exists, Max, Min
from django.utils import timezone

from apps.accounts.models import Organization
from apps.deployments.models import Deployment, DeploymentResource
from apps.experiments.models import Experiment, ExperimentResource
from apps.projects.models import tail_of
from costsite.celery import task_enqueue_on_commit
from costsite.months import month_start, next_month_start

from .models import (
    Gpu,
    GpuDay,
    GpuHour,
    GpuModelDay,
    GpuMonth,
    GpuRollupStaleGpu,
    GpuRollupState,
    GpuSegment,
)
from .resolution import (
    EARLIEST,
    LATEST,
    gpus_by_resource,
    gpus_named_by,
    registrations_naming,
)

BATCH = 5000  # segments written at a time
REBUILD_TASK = "apps.gpu.tasks.gpu_days_rebuild_task"
# A registration that reaches at most this many GPUs (two instances of eight) has their rows
# rebuilt by the writer. The rebuild reads each GPU's whole history: a year of sixteen GPUs is
# 140,000 GPU-hours, a quarter of a second or so; more is left to the task.
REBUILD_NOW_GPUS = 16


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


def days_mark_gpus(gpu_ids: Iterable[int]) -> None:
    """Mark these GPUs' rows out of date, and rebuild them after the commit (a page that comes
    first rebuilds them itself)."""
    marked = [GpuRollupStaleGpu(gpu_id=gpu_id) for gpu_id in sorted(set(gpu_ids))]
    if not marked:
        return
    if connection.in_atomic_block:
        # The state row is held until the commit, as days_mark's update holds it: a rebuild
        # that takes it first is done before these rows exist, and one that comes after waits
        # until the registration they follow from can be read.
        GpuRollupState.objects.select_for_update().filter(pk=_state().pk).exists()
    GpuRollupStaleGpu.objects.bulk_create(marked, ignore_conflicts=True)
    task_enqueue_on_commit(REBUILD_TASK)


def ownership_changed_handler(*, resource_ids=None, reason: str = "", created_by=None) -> None:
    """`ownership_changed` port: a registration, alias, rule or project changed. With the
    resource ids a registration added, removed or moved: the GPUs that resolve to one of them
    (as `_windows` matches them: the id itself or its tail), and those whose host one names
    (resolved through that registration until it went); without, everything."""
    if resource_ids is None:
        days_mark_all_later()
        return
    keys = {key for resource_id in resource_ids for key in (resource_id, tail_of(resource_id))}
    by_resource = gpus_by_resource()
    resolving = {gpu_id for key in keys for gpu_id in by_resource.get(key, ())}
    # A GPU whose host a removed registration named resolved to it, and no longer does.
    named = set(Gpu.objects.filter(host__in=keys).values_list("pk", flat=True))
    gpus = resolving | named
    days_mark_gpus(gpus)
    if gpus and len(gpus) <= REBUILD_NOW_GPUS:
        # A run's few instances are rebuilt now, in the writer's transaction, as an import's
        # days are: the first page after a registration does not pay for them (about 30 ms for
        # one instance's eight GPUs at the benchmark's fleet). More is left to the task.
        days_rebuild()


def _is_current(state: GpuRollupState, threshold) -> bool:
    return (
        not state.stale_all
        and state.stale_from is None
        and not state.stale_gpus
        and state.threshold is not None
        and state.threshold == threshold
    )


def _state_read(**lock):
    """The state row, with `stale_gpus`: whether any GPU is marked (one query)."""
    rows = GpuRollupState.objects.annotate(stale_gpus=Exists(GpuRollupStaleGpu.objects.all()))
    if lock:
        rows = rows.select_for_update(**lock)
    return rows.order_by("pk").first()


def days_ensure() -> int:
    """Rebuild whatever of the rollup is marked out of date (one query when nothing is); how
    many times it has been built, which a page cached as HTML is keyed by."""
    state = _state_read()
    threshold = Organization.get().idle_threshold_percent
    if state is not None and _is_current(state, threshold):
        return state.builds
    days_rebuild()
    return GpuRollupState.objects.order_by("pk").values_list("builds", flat=True).first()


@transaction.atomic
def days_rebuild() -> None:
    """Bring the rollup up to date, under a lock on its state row (two rebuilds never interleave:
    the second finds the work done)."""
    _state()
    state = _state_read(of=("self",))
    threshold = Organization.get().idle_threshold_percent
    if _is_current(state, threshold):
        return
    stale_gpus = list(GpuRollupStaleGpu.objects.values_list("gpu_id", flat=True))
    if state.stale_all or state.threshold != threshold:
        segments_rebuild()
        _days_write(start=None, end=None, threshold=float(threshold))
    else:
        if stale_gpus:
            segments_rebuild(gpu_ids=stale_gpus)
            _days_write(start=None, end=None, threshold=float(threshold), gpu_ids=stale_gpus)
        if state.stale_from is not None:
            _days_write(start=state.stale_from, end=state.stale_until, threshold=float(threshold))
    # Only those read: none can have been marked since (marking waits for this lock).
    GpuRollupStaleGpu.objects.filter(gpu_id__in=stale_gpus).delete()
    state.stale_all = False
    state.stale_from = state.stale_until = None
    state.threshold = threshold
    state.built_at = timezone.now()
    state.builds += 1
    state.save()


def _windows(gpu_ids: list[int] | None = None) -> dict[int, list[tuple[datetime, datetime, int]]]:
    """GPU id -> (start, end, project) of every registration that reaches it: the windows of
    selectors._hours_filter (an hour counts from the window's starting hour until its end).
    `gpu_ids`: of those GPUs only, reading only the registrations that can name them."""
    from .selectors import resource_uses

    experiments, deployments = Experiment.objects.all(), Deployment.objects.all()
    if gpu_ids is None:
        by_resource = gpus_by_resource()
    else:
        by_resource = gpus_by_resource(gpus=Gpu.objects.filter(pk__in=gpu_ids))
        named = set(by_resource)
        experiments = experiments.filter(
            pk__in=registrations_naming(ExperimentResource.objects.all(), named).values(
                "experiment_id"
            )
        )
        deployments = deployments.filter(
            pk__in=registrations_naming(DeploymentResource.objects.all(), named).values(
                "deployment_id"
            )
        )
    per_gpu: dict[int, list[tuple[datetime, datetime, int]]] = defaultdict(list)
    for window in resource_uses(experiments=experiments, deployments=deployments):
        gpu_ids = gpus_named_by(by_resource, window.resource_id)
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


def segments_rebuild(*, gpu_ids: list[int] | None = None) -> int:
    """Rewrite the segments of every GPU, or of `gpu_ids`."""
    segments = GpuSegment.objects.all()
    windows = _windows(gpu_ids)
    if gpu_ids is not None:
        segments = segments.filter(gpu_id__in=gpu_ids)
    segments.delete()
    rows = [
        GpuSegment(gpu_id=gpu_id, start=start, end=end, projects=key)
        for gpu_id, gpu_windows in windows.items()
        for start, end, key in segments_of(gpu_windows)
    ]
    GpuSegment.objects.bulk_create(rows, batch_size=BATCH)
    return len(rows)


def _days_write(
    *, start: date | None, end: date | None, threshold: float, gpu_ids: list[int] | None = None
) -> int:
    """Rewrite the GpuDay rows of the UTC days [start, end) (None: all), of every GPU or of
    `gpu_ids`, from the hourly rollup: one INSERT ... SELECT joining each GPU-hour to the
    segment it lies in (a correlated look-up per GPU-hour took 30 s for a year of 10,000 GPUs;
    the join, a few). Rows are written in the order of their day (and month), so that a range's
    rows lie together on disk: written in the order the grouping left them, a month's 4,700
    GPU-days lay on 774 pages of the table. The model-days of the days written and the months
    of the GPUs written follow."""
    from .selectors import BAND_LOW_UNTIL, BAND_MODERATE_UNTIL

    days = GpuDay.objects.all()
    where, params = "", []
    if start is not None:
        days = days.filter(day__gte=start, day__lt=end)
        adapt = connection.ops.adapt_datetimefield_value
        where = "AND h.hour >= %s AND h.hour < %s"
        params = [
            adapt(datetime.combine(start, datetime.min.time(), tzinfo=UTC)),
            adapt(datetime.combine(end, datetime.min.time(), tzinfo=UTC)),
        ]
    if gpu_ids is not None:
        if not gpu_ids:
            return 0
        days = days.filter(gpu_id__in=gpu_ids)
        where += f" AND h.gpu_id IN ({', '.join(['%s'] * len(gpu_ids))})"
        params += list(gpu_ids)
        # Their days: those of their GPU-hours, which a change of registrations leaves as they
        # were; the model-days of every GPU on those days are summed again.
        hours = GpuHour.objects.filter(gpu_id__in=gpu_ids, util_samples__gt=0).aggregate(
            first=Min("hour"), last=Max("hour")
        )
        if hours["first"] is None:
            days.delete()
            _months_write(start=None, end=None, gpu_ids=gpu_ids)
            return 0
        start, end = hours["first"].astimezone(UTC).date(), day_after(hours["last"])
    days.delete()
    low_until = max(threshold, BAND_LOW_UNTIL)
    busy_from = max(low_until, BAND_MODERATE_UNTIL)
    # The bands of selectors._band_expression: under the threshold, under low_until, under
    # 70%, and the rest (a counted hour always has a mean).
    day = (
        "(h.hour AT TIME ZONE 'UTC')::date" if connection.vendor == "postgresql" else "date(h.hour)"
    )
    sql = f"""
        INSERT INTO {GpuDay._meta.db_table} (day, gpu_id, projects, gpu_hours, weighted_util,
            idle_gpu_hours, band_idle, band_low, band_moderate, band_busy)
        SELECT {day}, h.gpu_id, COALESCE(s.projects, ''), SUM(g.share),
            COALESCE(SUM(h.util_mean * g.share), 0), COALESCE(SUM(h.idle_share * g.share), 0),
            SUM(CASE WHEN h.util_mean < %s THEN g.share ELSE 0 END),
            SUM(CASE WHEN h.util_mean >= %s AND h.util_mean < %s THEN g.share ELSE 0 END),
            SUM(CASE WHEN h.util_mean >= %s AND h.util_mean < %s THEN g.share ELSE 0 END),
            SUM(CASE WHEN h.util_mean < %s THEN 0 ELSE g.share END)
        FROM {GpuHour._meta.db_table} h
        JOIN {Gpu._meta.db_table} g ON g.id = h.gpu_id
        LEFT JOIN {GpuSegment._meta.db_table} s ON s.gpu_id = h.gpu_id
            AND h.hour >= s."start" AND h.hour < s."end"
        WHERE h.util_samples > 0 {where}
        GROUP BY {day}, h.gpu_id, COALESCE(s.projects, '')
        ORDER BY {day}, h.gpu_id
    """
    bands = [threshold, threshold, low_until, low_until, BAND_MODERATE_UNTIL, busy_from]
    sums = "gpu_hours, weighted_util, idle_gpu_hours, band_idle, band_low, band_moderate, band_busy"
    models = GpuModelDay.objects.all()
    model_where, model_params = "", []
    if start is not None:
        models = models.filter(day__gte=start, day__lt=end)
        model_where = "WHERE d.day >= %s AND d.day < %s"
        model_params = [start, end]
    models.delete()
    summed = ", ".join(f"SUM(d.{name})" for name in sums.split(", "))
    by_model = f"""
        INSERT INTO {GpuModelDay._meta.db_table} (day, model_name, projects, {sums})
        SELECT d.day, g.model_name, d.projects, {summed}
        FROM {GpuDay._meta.db_table} d JOIN {Gpu._meta.db_table} g ON g.id = d.gpu_id
        {model_where}
        GROUP BY d.day, g.model_name, d.projects
        ORDER BY d.day
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [*bands, *params])
        written = cursor.rowcount
        cursor.execute(by_model, model_params)
    if gpu_ids is not None:
        _months_write(start=None, end=None, gpu_ids=gpu_ids)
    else:
        _months_write(start=start, end=end)
    return written


def _months_write(
    *, start: date | None, end: date | None, gpu_ids: list[int] | None = None
) -> None:
    """Rewrite the GpuMonth rows of every month that [start, end) reaches (None: all), of every
    GPU or of `gpu_ids`, from GpuDay: a day rebuilt rebuilds its whole month (at most 31 days
    of GpuDay rows)."""
    months = GpuMonth.objects.all()
    conditions, params = [], []
    if start is not None:
        first, stop = month_start(start), next_month_start(end - timedelta(days=1))
        months = months.filter(month__gte=first, month__lt=stop)
        conditions.append("d.day >= %s AND d.day < %s")
        params += [first, stop]
    if gpu_ids is not None:
        months = months.filter(gpu_id__in=gpu_ids)
        conditions.append(f"d.gpu_id IN ({', '.join(['%s'] * len(gpu_ids))})")
        params += list(gpu_ids)
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    months.delete()
    month = (
        "date_trunc('month', d.day)::date"
        if connection.vendor == "postgresql"
        else "date(d.day, 'start of month')"
    )
    sql = f"""
        INSERT INTO {GpuMonth._meta.db_table} (month, gpu_id, projects, gpu_hours, weighted_util,
            idle_gpu_hours)
        SELECT {month}, d.gpu_id, d.projects, SUM(d.gpu_hours), SUM(d.weighted_util),
            SUM(d.idle_gpu_hours)
        FROM {GpuDay._meta.db_table} d
        {where}
        GROUP BY {month}, d.gpu_id, d.projects
        ORDER BY {month}, d.gpu_id
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def day_after(moment: datetime) -> date:
    return (moment.astimezone(UTC) + timedelta(days=1)).date()
