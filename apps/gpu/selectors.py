"""Reads for GPU metrics: who may see which GPU, GPU-hours and utilisation per project, experiment,
model, deployment and GPU model, the fleet page's figures, and the hosts nobody has mapped yet.

How a GPU joins the bill: its host maps to a billed resource id through, in order, a label on its
series (`Gpu.resource_label`: instance_id, a node name), a HostMapping people maintain, or a
resource id registered on an experiment or a deployment that names the host itself (an EC2
instance's host name is often its instance id). A GPU-hour belongs to an experiment or deployment
when that resource was registered on it and the hour lies in the registration's window (its own, or
else the run's). A GPU-hour counts as one GPU-hour times the GPU's share (a MIG instance is a
fraction of a GPU), and only when it has utilisation samples: an hour with only memory readings
says nothing about use.
"""

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta

from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import (
    Avg,
    Case,
    CharField,
    Count,
    F,
    FloatField,
    Max,
    Min,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models import Window as SqlWindow
from django.db.models.functions import Coalesce, TruncDate
from django.http import Http404

from apps.accounts.guards import is_staff_or_lead
from apps.accounts.models import Organization
from apps.deployments.models import Deployment, DeploymentResource, Model
from apps.experiments.models import Experiment, ExperimentResource
from apps.projects.models import Project, tail_of
from apps.projects.selectors import projects_editable_by, projects_visible_to
from costsite.months import any_of, rollup_plan
from costsite.paging import Window, page_window
from costsite.plans import serial_plans

from .daily import days_ensure, key_projects
from .models import Gpu, GpuDay, GpuHour, GpuModelDay, GpuMonth, HostMapping, MetricSource
from .resolution import (
    Resolution,
    gpu_hours_by_owner,  # noqa: F401 (a selector of this module's: spend reads it from here)
    gpu_resolutions,
    gpus_by_resource,
    gpus_named_by,
    host_resolved,
    registrations_naming,
)

# Utilisation bands of the fleet page: (key, upper bound in percent or None). The idle band's
# bound is the organisation's idle threshold.
BAND_LOW_UNTIL = 40.0
BAND_MODERATE_UNTIL = 70.0
BANDS = ("idle", "low", "moderate", "busy")
BAND_COLOURS = {"idle": "#d62728", "low": "#ff7f0e", "moderate": "#bcbd22", "busy": "#2ca02c"}


def band_labels(*, threshold: float) -> dict[str, str]:
    low_until = max(threshold, BAND_LOW_UNTIL)
    return {
        "idle": f"Idle (under {threshold:g}%)",
        "low": f"Low ({threshold:g}–{low_until:g}%)",
        "moderate": f"Moderate ({low_until:g}–{BAND_MODERATE_UNTIL:g}%)",
        "busy": f"Busy ({BAND_MODERATE_UNTIL:g}% and over)",
    }


@dataclass(frozen=True)
class Usage:
    gpu_hours: float = 0.0
    util_mean: float | None = None  # percent, each GPU-hour weighted by its share
    idle_gpu_hours: float = 0.0  # GPU-hours times the share of samples under the idle threshold
    bands: dict[str, float] = field(default_factory=dict)  # band -> GPU-hours

    @property
    def idle_share(self) -> float | None:
        return self.idle_gpu_hours / self.gpu_hours if self.gpu_hours else None

    @property
    def util_share(self) -> float | None:
        """Mean utilisation as a fraction, for the `percent` filter."""
        return None if self.util_mean is None else self.util_mean / 100


@dataclass(frozen=True)
class ResourceUseWindow:
    resource_id: str
    start: datetime | None
    end: datetime | None
    project_id: int
    experiment_id: int | None = None
    deployment_id: int | None = None


def resource_uses(
    *,
    experiments: QuerySet[Experiment] | None = None,
    deployments: QuerySet[Deployment] | None = None,
) -> list[ResourceUseWindow]:
    """Registered resource ids with their windows (the registration's own, else the owner's)."""
    windows = []
    if experiments is not None:
        for use in ExperimentResource.objects.filter(experiment__in=experiments).select_related(
            "experiment"
        ):
            windows.append(
                ResourceUseWindow(
                    resource_id=use.resource_id,
                    start=use.started_at or use.experiment.started_at,
                    end=use.ended_at or use.experiment.ended_at,
                    project_id=use.experiment.project_id,
                    experiment_id=use.experiment_id,
                )
            )
    if deployments is not None:
        for use in DeploymentResource.objects.filter(deployment__in=deployments).select_related(
            "deployment"
        ):
            windows.append(
                ResourceUseWindow(
                    resource_id=use.resource_id,
                    start=use.started_at or use.deployment.started_at,
                    end=use.ended_at or use.deployment.ended_at,
                    project_id=use.deployment.project_id,
                    deployment_id=use.deployment_id,
                )
            )
    return windows


def _hours_filter(
    windows: Iterable[ResourceUseWindow], by_resource: dict[str, set[int]]
) -> Q | None:
    """One Q matching the GPU-hours of these registrations (None when they reach no GPU)."""
    combined = None
    for window in windows:
        gpu_ids = gpus_named_by(by_resource, window.resource_id)
        if not gpu_ids:
            continue
        condition = Q(gpu_id__in=sorted(gpu_ids))
        if window.start:
            condition &= Q(hour__gte=window.start.replace(minute=0, second=0, microsecond=0))
        if window.end:
            condition &= Q(hour__lt=window.end)
        combined = condition if combined is None else combined | condition
    return combined


def _band_expression(threshold: float) -> Case:
    return Case(
        When(util_mean__lt=threshold, then=Value("idle")),
        When(util_mean__lt=max(threshold, BAND_LOW_UNTIL), then=Value("low")),
        When(util_mean__lt=BAND_MODERATE_UNTIL, then=Value("moderate")),
        default=Value("busy"),
        output_field=CharField(),
    )


def _counted(hours: QuerySet[GpuHour]) -> QuerySet[GpuHour]:
    return hours.filter(util_samples__gt=0)


def usage_of(hours: QuerySet[GpuHour], *, threshold: float | None = None) -> Usage:
    """GPU-hours, mean utilisation, idle GPU-hours and GPU-hours per band of these rows."""
    hours = _counted(hours)
    totals = hours.aggregate(
        gpu_hours=Sum("gpu__share"),
        weighted_util=Sum(F("util_mean") * F("gpu__share")),
        idle=Sum(F("idle_share") * F("gpu__share")),
    )
    gpu_hours = totals["gpu_hours"] or 0.0
    bands = {}
    if threshold is not None and gpu_hours:
        bands = dict(
            hours.annotate(band=_band_expression(threshold))
            .values("band")
            .annotate(total=Sum("gpu__share"))
            .values_list("band", "total")
        )
    return Usage(
        gpu_hours=gpu_hours,
        util_mean=totals["weighted_util"] / gpu_hours if gpu_hours else None,
        idle_gpu_hours=totals["idle"] or 0.0,
        bands=bands,
    )


def _usage_for(windows: list[ResourceUseWindow]) -> Usage:
    condition = _hours_filter(windows, gpus_by_resource())
    if condition is None:
        return Usage()
    return usage_of(GpuHour.objects.filter(condition))


# For the project, experiment, model and deployment pages -----------------------------------------


def project_gpu_usage(*, project: Project) -> Usage:
    return _usage_for(
        resource_uses(
            experiments=Experiment.objects.filter(project=project),
            deployments=Deployment.objects.filter(project=project),
        )
    )


def experiment_gpu_usage(*, experiment: Experiment) -> Usage:
    return _usage_for(resource_uses(experiments=Experiment.objects.filter(pk=experiment.pk)))


def deployment_gpu_usage(*, deployment: Deployment) -> Usage:
    return _usage_for(resource_uses(deployments=Deployment.objects.filter(pk=deployment.pk)))


def model_gpu_usage(*, model: Model) -> Usage:
    """The runs that produced the model and the deployments that serve it."""
    return _usage_for(
        resource_uses(
            experiments=Experiment.objects.filter(model=model),
            deployments=Deployment.objects.filter(model=model),
        )
    )


# Who sees what --------------------------------------------------------------------------------


def visible_hours_filter(*, user) -> Q | None:
    """For a user who is not staff: the GPU-hours of their projects' registrations (None: none).
    Staff see every GPU-hour; callers check is_staff first."""
    projects = projects_visible_to(user=user)
    windows = resource_uses(
        experiments=Experiment.objects.filter(project__in=projects),
        deployments=Deployment.objects.filter(project__in=projects),
    )
    return _hours_filter(windows, gpus_by_resource())


def hours_visible_to(*, user) -> QuerySet[GpuHour]:
    if user.is_staff:
        return GpuHour.objects.all()
    condition = visible_hours_filter(user=user)
    return GpuHour.objects.filter(condition) if condition is not None else GpuHour.objects.none()


def gpus_visible_to(*, user) -> QuerySet[Gpu]:
    """Staff: every GPU. Others: the GPUs whose resource is registered on a project they see."""
    if user.is_staff:
        return Gpu.objects.all()
    by_resource = gpus_by_resource()
    projects = projects_visible_to(user=user)
    gpu_ids: set[int] = set()
    for window in resource_uses(
        experiments=Experiment.objects.filter(project__in=projects),
        deployments=Deployment.objects.filter(project__in=projects),
    ):
        gpu_ids |= gpus_named_by(by_resource, window.resource_id)
    return Gpu.objects.filter(pk__in=gpu_ids)


def gpu_resolved_for_user(*, user, pk: int) -> tuple[Gpu, Resolution | None]:
    """The GPU, when `user` may see it (the rule of gpus_visible_to, checked for this GPU
    alone: its resource, registered on a project the user sees), and the billed resource it
    resolves to (as a MIG instance, its physical GPU's): resolved once for the check and for
    the page, which did it twice."""
    gpu = Gpu.objects.select_related("parent").filter(pk=pk).first()
    if gpu is None:
        raise Http404("No such GPU.")
    physical = gpu.parent or gpu
    physical_resolution = gpu_resolutions(gpus=[physical]).get(physical.pk)
    if user.is_staff:
        return gpu, physical_resolution
    resolution = physical_resolution if physical is gpu else gpu_resolutions(gpus=[gpu]).get(gpu.pk)
    if resolution is not None:
        keys = {resolution.resource_id, tail_of(resolution.resource_id)}
        projects = projects_visible_to(user=user)
        # registrations_naming matches the id or its stored tail, which equals tail_of().
        if (
            registrations_naming(
                ExperimentResource.objects.filter(experiment__project__in=projects), keys
            ).exists()
            or registrations_naming(
                DeploymentResource.objects.filter(deployment__project__in=projects), keys
            ).exists()
        ):
            return gpu, physical_resolution
    raise Http404("No such GPU.")


def can_map_hosts(*, user) -> bool:
    """Staff and team leads maintain the host-to-resource mapping."""
    return is_staff_or_lead(user=user)


def host_mappings_editable_by(*, user) -> QuerySet[HostMapping]:
    """Staff: all. A lead: the mappings they made, and those to a resource registered on a
    project they lead."""
    if user.is_staff:
        return HostMapping.objects.all()
    if not can_map_hosts(user=user):
        return HostMapping.objects.none()
    projects = projects_editable_by(user=user)
    # Subqueries: a lead's projects register a thousand resources and more, which as a list
    # were read out and sent back as as many parameters (8 ms of the hosts page).
    registered = Q(
        resource_id__in=ExperimentResource.objects.filter(experiment__project__in=projects).values(
            "resource_id"
        )
    ) | Q(
        resource_id__in=DeploymentResource.objects.filter(deployment__project__in=projects).values(
            "resource_id"
        )
    )
    return HostMapping.objects.filter(Q(created_by=user) | registered)


def host_mapping_for_user(*, user, pk: int) -> HostMapping:
    try:
        return host_mappings_editable_by(user=user).get(pk=pk)
    except HostMapping.DoesNotExist:
        raise Http404("No such mapping.") from None


def can_see_sources(*, user) -> bool:
    return is_staff_or_lead(user=user)


def metric_sources() -> QuerySet[MetricSource]:
    return MetricSource.objects.all()


# The fleet page -------------------------------------------------------------------------------


@dataclass(frozen=True)
class BandDay:
    day: date
    band: str
    gpu_hours: float


@dataclass(frozen=True)
class GroupUsage:
    label: str
    usage: Usage
    gpus: int = 0
    url: str = ""


@dataclass
class Fleet:
    start: date | None  # the first UTC day; None: from the first day with GPU-hours
    end: date  # the day after the last
    threshold: float
    days: list[BandDay]
    total: Usage
    models: list[GroupUsage]
    projects: list[GroupUsage]
    unattributed: Usage | None  # staff, over the whole fleet only


def period(*, days: int, now: datetime | None = None) -> tuple[datetime, datetime]:
    """The last `days` UTC days up to the current hour."""
    now = (now or datetime.now(tz=UTC)).astimezone(UTC)
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    return end - timedelta(days=days), end


def _as_day(value: date | datetime | None) -> date | None:
    """A period's bound as a UTC day: the fleet page reads whole UTC days (GpuDay)."""
    if value is None or not isinstance(value, datetime):
        return value
    value = value.astimezone(UTC)
    if value.time() != datetime.min.time():
        raise ValueError(f"The fleet reads whole UTC days; {value} is not a midnight.")
    return value.date()


@dataclass(frozen=True)
class FleetScope:
    """The rollup rows a user sees for a period and filters, and the projects they count for.
    Per GPU model: GpuModelDay, every day of the period. Per GPU: the period's whole calendar
    months from GpuMonth and its ragged ends from GpuDay (`gpu_parts`), so a year reads about a
    quarter of the rows its days would be."""

    day_rows: QuerySet | None  # GpuDay of the days outside whole months (None: no such day)
    month_rows: QuerySet | None  # GpuMonth of the whole months (None: no whole month)
    model_rows: QuerySet  # GpuModelDay
    project_ids: set[int] | None  # None: every project, and the unattributed hours too

    def gpu_parts(self) -> list[QuerySet]:
        """The per-GPU rows of the period, each with gpu_id and the three sums: add them up."""
        return [rows for rows in (self.day_rows, self.month_rows) if rows is not None]

    def copy(self) -> "FleetScope":
        """The same rows as querysets of their own, for another thread to read."""
        return replace(
            self,
            day_rows=None if self.day_rows is None else self.day_rows.all(),
            month_rows=None if self.month_rows is None else self.month_rows.all(),
            model_rows=self.model_rows.all(),
            project_ids=None if self.project_ids is None else set(self.project_ids),
        )


def fleet_scope(
    *,
    user,
    start: date | datetime | None,
    end: date | datetime,
    team=None,
    project: Project | None = None,
) -> FleetScope:
    """Staff with no filter: every row. Otherwise the rows whose set of projects names a
    project the user sees (of the team, or the project, filtered on): each GPU-hour once."""
    days_ensure()
    start, end = _as_day(start), _as_day(end)
    model_rows = GpuModelDay.objects.filter(day__lt=end)
    if start is not None:
        model_rows = model_rows.filter(day__gte=start)
    plan = rollup_plan(start, end)
    days, months = plan.days(), plan.whole_months()
    day_rows = GpuDay.objects.filter(days) if days is not None else None
    month_rows = GpuMonth.objects.filter(months) if months is not None else None
    if user.is_staff and team is None and project is None:
        return FleetScope(
            day_rows=day_rows, month_rows=month_rows, model_rows=model_rows, project_ids=None
        )
    projects = projects_visible_to(user=user)
    if team is not None:
        projects = projects.filter(team=team)
    if project is not None:
        projects = projects.filter(pk=project.pk)
    project_ids = set(projects.values_list("pk", flat=True))
    keys = [
        key
        for key in model_rows.order_by().values_list("projects", flat=True).distinct()
        if key and project_ids.intersection(key_projects(key))
    ]
    return FleetScope(
        day_rows=day_rows.filter(projects__in=keys) if day_rows is not None else None,
        month_rows=month_rows.filter(projects__in=keys) if month_rows is not None else None,
        model_rows=model_rows.filter(projects__in=keys),
        project_ids=project_ids,
    )


USAGE_SUMS = {
    "total": Sum("gpu_hours"),
    "weighted": Sum("weighted_util"),
    "idle": Sum("idle_gpu_hours"),
    **{band: Sum(f"band_{band}") for band in BANDS},
}


def _usage(row: dict) -> Usage:
    hours = row["total"] or 0.0
    return Usage(
        gpu_hours=hours,
        util_mean=row["weighted"] / hours if hours else None,
        idle_gpu_hours=row["idle"] or 0.0,
        bands={band: row[band] for band in BANDS if row.get(band)},
    )


# The model-day columns USAGE_SUMS adds up, in its order (the total first).
_SUMMED_COLUMNS = tuple(sum_.get_source_expressions()[0].name for sum_ in USAGE_SUMS.values())
# GROUPING(day, model_name, projects) of each grouping: a bit set for each column not grouped by.
_BY_DAY, _BY_MODEL, _BY_PROJECTS = 0b011, 0b101, 0b110


def _model_day_sums(rows: QuerySet) -> tuple[list[dict], list[dict], list[dict]]:
    """The model-day rows summed per day (in day order), per GPU model (most GPU-hours first)
    and per set of projects, each row a dict of USAGE_SUMS and its key, in one statement: on
    PostgreSQL one scan with three groupings (GROUPING SETS: 3.6 ms over a year against 6.1 for
    three statements), elsewhere three groupings joined by UNION ALL."""
    try:
        inner, params = (
            rows.order_by()
            .values("day", "model_name", "projects", *_SUMMED_COLUMNS)
            .query.sql_with_params()
        )
    except EmptyResultSet:  # filtered on no set of projects
        return [], [], []
    sums = ", ".join(f"SUM({column})" for column in _SUMMED_COLUMNS)
    total_column = 5  # grouping, day, model_name, projects, then the sums: gpu_hours first
    order = f"ORDER BY 1, 2, {total_column} DESC, 3"
    if connection.vendor == "postgresql":
        sql = f"""
            SELECT GROUPING(day, model_name, projects), day, model_name, projects, {sums}
            FROM ({inner}) model_days
            GROUP BY GROUPING SETS ((day), (model_name), (projects))
            {order}"""
    else:
        sql = (
            " UNION ALL ".join(
                f"SELECT {grouping}, {columns}, {sums} FROM ({inner}) model_days GROUP BY {key}"
                for grouping, columns, key in (
                    (_BY_DAY, "day, NULL, NULL", "day"),
                    (_BY_MODEL, "NULL, model_name, NULL", "model_name"),
                    (_BY_PROJECTS, "NULL, NULL, projects", "projects"),
                )
            )
            + f" {order}"
        )
        params = params * 3
    groups: dict[int, list[dict]] = {_BY_DAY: [], _BY_MODEL: [], _BY_PROJECTS: []}
    names = list(USAGE_SUMS)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for grouping, day, model_name, projects, *values in cursor.fetchall():
            row = dict(zip(names, values, strict=True))
            if grouping == _BY_DAY:
                # SQLite hands a date column back as its text.
                row["day"] = day if isinstance(day, date) else date.fromisoformat(day)
            elif grouping == _BY_MODEL:
                row["model_name"] = model_name
            else:
                row["projects"] = projects
            groups[grouping].append(row)
    return groups[_BY_DAY], groups[_BY_MODEL], groups[_BY_PROJECTS]


def _add(totals: dict, row: dict) -> None:
    for name in USAGE_SUMS:
        totals[name] = (totals.get(name) or 0.0) + (row[name] or 0.0)


def fleet(
    *,
    user,
    start: date | datetime | None,
    end: date | datetime,
    team=None,
    project: Project | None = None,
    scope: FleetScope | None = None,
    model_gpus: Callable[[], dict[str | None, int]] | None = None,
) -> Fleet:
    """The fleet page's figures for the UTC days [start, end), from the daily rollup: GPU-hours
    per day and band, per GPU model and per project, in a constant number of queries.
    `scope`: what fleet_scope found for the same arguments, when the caller has it;
    `model_gpus`: what gives `fleet_model_gpus(scope=scope)`, when the caller computes it
    elsewhere (the page, on the figures thread); it is asked for last."""
    threshold = float(Organization.get().idle_threshold_percent)
    if scope is None:
        scope = fleet_scope(user=user, start=start, end=end, team=team, project=project)
    by_day, by_model, by_projects = _model_day_sums(scope.model_rows)
    days = []
    for row in by_day:
        for band in BANDS:
            if row[band]:
                days.append(BandDay(day=row["day"], band=band, gpu_hours=row[band]))
    total: dict = {}
    per_project: dict[int, dict] = defaultdict(dict)
    unattributed: dict | None = {} if scope.project_ids is None else None
    for row in by_projects:
        _add(total, row)
        if not row["projects"] and unattributed is not None:
            _add(unattributed, row)
        for project_id in key_projects(row["projects"]):
            if scope.project_ids is None or project_id in scope.project_ids:
                _add(per_project[project_id], row)
    names = {
        pk: (name, slug)
        for pk, name, slug in Project.objects.filter(pk__in=per_project).values_list(
            "pk", "name", "slug"
        )
    }
    groups = [
        GroupUsage(label=names[pk][0], url=names[pk][1], usage=_usage(sums))
        for pk, sums in per_project.items()
        if pk in names and sums.get("total")
    ]
    groups.sort(key=lambda group: (-group.usage.gpu_hours, group.label))
    # Asked last: the caller may be computing them on the figures thread meanwhile.
    gpus = model_gpus() if model_gpus is not None else fleet_model_gpus(scope=scope)
    models = [
        GroupUsage(
            label=row["model_name"] or "Unknown model",
            gpus=gpus.get(row["model_name"], 0),
            usage=_usage(row),
        )
        for row in by_model
    ]
    return Fleet(
        start=_as_day(start),
        end=_as_day(end),
        threshold=threshold,
        days=days,
        total=_usage(total) if total else Usage(),
        models=models,
        projects=groups,
        unattributed=(_usage(unattributed) if unattributed else Usage())
        if unattributed is not None
        else None,
    )


def fleet_model_gpus(*, scope: FleetScope) -> dict[str | None, int]:
    """Distinct physical GPUs per GPU model in the scope's period, which only the per-GPU rows
    can count. The GPUs with rows in the period first (one per GPU), then their models: joined
    first, every row of the period (50,000 GPU-days over a year) would fetch its GPU."""
    in_period = [Q(pk__in=rows.order_by().values("gpu_id")) for rows in scope.gpu_parts()]
    if not in_period:
        return {}
    return dict(
        Gpu.objects.filter(any_of(in_period))
        .values("model_name")
        .annotate(gpus=Count(Coalesce("parent_id", "id"), distinct=True))
        .values_list("model_name", "gpus")
        .order_by()
    )


@dataclass(frozen=True)
class GpuRow:
    gpu: Gpu
    resolution: Resolution | None
    usage: Usage


# Sort key -> the ORDER BY of the GPU table, in terms of the ranking's columns (`_ranked_sql`:
# `per_gpu` the period's sums per GPU, `gpu` the GPU): the GPU's own order breaks ties, then its id.
GPU_SORT_COLUMNS = {
    "host": "gpu.host",
    "index": 'COALESCE(gpu."index", 0)',
    "mig_instance": "gpu.mig_instance",
    "uuid": "gpu.uuid",
    "model": "gpu.model_name",
    "total": "per_gpu.total",
    "util": "COALESCE(per_gpu.weighted / NULLIF(per_gpu.total, 0), 0.0)",
    "idle_ratio": "COALESCE(per_gpu.idle / NULLIF(per_gpu.total, 0), 0.0)",
    "gpu_id": "per_gpu.gpu_id",
}
GPU_SORTS = {
    "gpu": ("host", "index", "mig_instance", "uuid"),
    "model": ("model", "host", "index"),
    "hours": ("total", "host"),
    "util": ("util", "host"),
    "idle": ("idle_ratio", "host"),
}
GPU_TIES = ("host", "index", "uuid", "mig_instance", "gpu_id")
# The sort keys that are the period's sums, which need no column of the GPU.
PER_GPU_SORTS = ("total", "util", "idle_ratio")
GPUS_PER_PAGE = 50


@dataclass(frozen=True)
class GpuPage(Window):
    """A page of the fleet's GPU table: its rows, and where they stand (costsite.paging)."""

    rows: list[GpuRow] = field(default_factory=list)


def _ranked_sql(parts: list[QuerySet], *, sort: str) -> tuple[str, list]:
    """One page of the period's sums per GPU of `parts` (FleetScope.gpu_parts: GpuDay and
    GpuMonth rows), sorted, each row with how many GPUs there are; the page's size and number
    are the last two parameters, and a page past the last is the last. The rows are summed per
    GPU first and only the sums are joined to their GPUs: joined first, a year's rows would
    each fetch their GPU and be sorted by its columns before being added up. EmptyResultSet
    when no part can hold a row."""
    selects, params = [], []
    for rows in parts:
        try:
            sql, part_params = (
                rows.order_by()
                .values("gpu_id", "gpu_hours", "weighted_util", "idle_gpu_hours")
                .query.sql_with_params()
            )
        except EmptyResultSet:  # filtered on no set of projects
            continue
        selects.append(sql)
        params += part_params
    if not selects:
        raise EmptyResultSet
    # No parentheses around the parts: SQLite (the embedded default) refuses them.
    per_gpu = f"""
        SELECT gpu_id, SUM(gpu_hours) AS total, SUM(weighted_util) AS weighted,
               SUM(idle_gpu_hours) AS idle
        FROM ({" UNION ALL ".join(selects)}) parts
        GROUP BY gpu_id"""
    key = sort.removeprefix("-")
    direction = " DESC" if sort.startswith("-") else ""
    order = [GPU_SORT_COLUMNS[name] + direction for name in GPU_SORTS.get(key, GPU_SORTS["hours"])]
    order += [GPU_SORT_COLUMNS[name] for name in GPU_TIES]
    # The page is a LIMIT and OFFSET worked out from the count, so the database keeps only the
    # rows up to the page's end while it sorts (a top-N sort) rather than sorting and numbering
    # every GPU: 10,000 GPUs sorted by text columns took a third of the statement.
    last = "(counted.gpus + asked.size - 1) / asked.size"
    # Sorted first by one of the sums, only the GPUs that reach the page's last value of it (the
    # value at its end, ties included) are joined to their GPUs and sorted whole: every GPU up
    # to the page's end is among them. Over 12 months, 10,701 GPUs joined became 50 (the
    # statement 9.4 ms -> 6.2). On PostgreSQL, whose CTE is computed once (MATERIALIZED), so
    # that the value compared is the very sum ranked; SQLite (the demo) sorts all of them.
    first = GPU_SORTS.get(key, GPU_SORTS["hours"])[0]
    reach = reaches = materialized = ""
    if first in PER_GPU_SORTS and connection.vendor == "postgresql":
        materialized = "MATERIALIZED "
        column = GPU_SORT_COLUMNS[first]
        reach = f""",
        reach AS (
            SELECT {column} AS value FROM per_gpu ORDER BY 1{direction}
            LIMIT 1 OFFSET (SELECT size * number - 1 FROM shown)
        )"""
        reaches = f"""
        WHERE (SELECT value FROM reach) IS NULL
           OR {column} {">=" if direction else "<="} (SELECT value FROM reach)"""
    sql = f"""
        WITH per_gpu AS {materialized}({per_gpu}),
        counted AS (SELECT count(*) AS gpus FROM per_gpu),
        asked AS (SELECT %s AS size, %s AS number),
        shown AS (
            SELECT asked.size,
                   CASE WHEN asked.number < {last} THEN asked.number
                        WHEN {last} > 1 THEN {last} ELSE 1 END AS number
            FROM asked, counted
        ){reach}
        SELECT per_gpu.gpu_id, per_gpu.total, per_gpu.weighted, per_gpu.idle,
               (SELECT gpus FROM counted)
        FROM per_gpu
        INNER JOIN {Gpu._meta.db_table} gpu ON gpu.id = per_gpu.gpu_id{reaches}
        ORDER BY {", ".join(order)}
        LIMIT (SELECT size FROM shown) OFFSET (SELECT size * (number - 1) FROM shown)"""
    return sql, list(params)


def fleet_gpus(
    *,
    user,
    start: date | datetime | None,
    end: date | datetime,
    sort: str = "-hours",
    page: int = 1,
    team=None,
    project: Project | None = None,
    per_page: int = GPUS_PER_PAGE,
    scope: FleetScope | None = None,
) -> GpuPage:
    """One page of the GPUs with counted hours in the period (MIG instances as themselves),
    sorted in the database by one of GPU_SORTS, `-` first for descending: the same queries for
    a fleet of ten GPUs or ten thousand. `scope`: as for `fleet`."""
    if scope is None:
        scope = fleet_scope(user=user, start=start, end=end, team=team, project=project)
    try:
        sql, params = _ranked_sql(scope.gpu_parts(), sort=sort)
    except EmptyResultSet:  # a lead whose projects never used a GPU: no query to run
        return GpuPage(rows=[], count=0, number=1, per_page=per_page)
    # Planned without parallel workers: with them, the statement over 12 months took 15-17 ms
    # instead of 10-11, and took a core from the request beside it (costsite/plans.py).
    with serial_plans(), connection.cursor() as cursor:
        cursor.execute(sql, [*params, per_page, max(1, page)])
        totals = cursor.fetchall()
    place = page_window(count=totals[0][4] if totals else 0, asked=page, per_page=per_page)
    gpus = Gpu.objects.select_related("parent").in_bulk([row[0] for row in totals])
    resolutions = gpu_resolutions(gpus=[gpu.parent or gpu for gpu in gpus.values()])
    rows = []
    for gpu_id, total, weighted, idle, _ in totals:
        gpu = gpus[gpu_id]
        rows.append(
            GpuRow(
                gpu=gpu,
                resolution=resolutions.get((gpu.parent or gpu).pk),
                usage=Usage(
                    gpu_hours=total,
                    util_mean=weighted / total if total else None,
                    idle_gpu_hours=idle or 0.0,
                ),
            )
        )
    return GpuPage(rows=rows, count=place.count, number=place.number, per_page=per_page)


@dataclass(frozen=True)
class UsagePoint:
    """One point of a GPU's usage chart: an hour, or a UTC day's hours taken together (the
    mean of their mean utilisation, the highest peak, the mean share of memory used)."""

    at: datetime | date
    util_mean: float | None
    util_max: float | None
    memory_percent: float | None


# Up to this many days a GPU's page charts its hours; past it, its days. A year of hours is 8,760
# points a line, more than a chart's width shows, and reading them as rows and writing them as
# JSON made the page over 12 months 130-160 ms warm against 20-25 over a week.
HOURLY_UP_TO_DAYS = 31


def gpu_usage_points(*, gpu: Gpu, start: datetime, end: datetime, by_day: bool) -> list[UsagePoint]:
    """The GPU's usage in [start, end) by hour, or by UTC day (summed in the database)."""
    memory = Case(
        When(memory_total_mib__gt=0, then=100.0 * F("memory_used_mib") / F("memory_total_mib")),
        default=None,
        output_field=FloatField(),
    )
    hours = GpuHour.objects.filter(gpu=gpu, hour__gte=start, hour__lt=end)
    if by_day:
        rows = (
            hours.annotate(day=TruncDate("hour", tzinfo=UTC))
            .values("day")
            .annotate(mean=Avg("util_mean"), peak=Max("util_max"), memory=Avg(memory))
            .order_by("day")
            .values_list("day", "mean", "peak", "memory")
        )
    else:
        rows = (
            hours.annotate(memory=memory)
            .order_by("hour")
            .values_list("hour", "util_mean", "util_max", "memory")
        )
    return [UsagePoint(*row) for row in rows]


@dataclass(frozen=True)
class Owner:
    kind: str  # "experiment" or "deployment"
    pk: int
    name: str
    project: str
    start: datetime | None
    end: datetime | None


@dataclass(frozen=True)
class Owners:
    """The runs and deployments on a GPU in a period: the latest `shown`, of `total`."""

    shown: list[Owner]
    total: int

    @property
    def more(self) -> int:
        return self.total - len(self.shown)


OWNERS_SHOWN = 10


def gpu_owners(
    *,
    gpu: Gpu,
    user,
    start: datetime,
    end: datetime,
    resolution: Resolution | None | bool = False,
    limit: int = OWNERS_SHOWN,
) -> Owners:
    """The runs and deployments (of projects the user sees) that registered the resource this
    GPU's host maps to, with a window that meets [start, end): the latest `limit` by their
    start, and how many there are. `resolution`: the GPU's, when the caller has it.

    An instance that has served for years carries hundreds of runs; they are chosen, counted
    and cut to `limit` in the database (two queries whatever their number), where listing
    every one made the page grow with them (90-160 ms with a few hundred)."""
    if resolution is False:
        resolution = gpu_resolutions(gpus=[gpu.parent or gpu]).get((gpu.parent or gpu).pk)
    if resolution is None:
        return Owners(shown=[], total=0)
    keys = {resolution.resource_id, tail_of(resolution.resource_id)}
    # The registrations naming this resource: its id, or an id whose tail is one of these (an
    # ARN ending in it, with or without slashes after it).
    naming = Q(resource_id__in=keys) | Q(tail__in=keys)
    projects = projects_visible_to(user=user)
    listed, total = [], 0
    for kind, registrations in (
        ("experiment", ExperimentResource.objects),
        ("deployment", DeploymentResource.objects),
    ):
        uses = (
            registrations.filter(naming, **{f"{kind}__project__in": projects})
            .annotate(
                window_start=Coalesce("started_at", f"{kind}__started_at"),
                window_end=Coalesce("ended_at", f"{kind}__ended_at"),
            )
            .filter(Q(window_start__isnull=True) | Q(window_start__lt=end))
            .filter(Q(window_end__isnull=True) | Q(window_end__gt=start))
        )
        # One row per run or deployment (registered under an id and its ARN, or in several
        # windows): from its first window's start to its last one's end, an open end staying
        # open; each row carries how many there are, counted over the rows before the limit.
        rows = list(
            uses.values(f"{kind}_id", f"{kind}__name", f"{kind}__project__name")
            .annotate(
                first=Min("window_start"),
                latest=Max("window_start"),
                last=Max("window_end"),
                open_start=Count("pk", filter=Q(window_start__isnull=True)),
                open_end=Count("pk", filter=Q(window_end__isnull=True)),
                count=SqlWindow(Count("*")),
            )
            .order_by(F("latest").desc(nulls_last=True), f"-{kind}_id")
            .values_list(
                f"{kind}_id",
                f"{kind}__name",
                f"{kind}__project__name",
                "first",
                "latest",
                "last",
                "open_start",
                "open_end",
                "count",
            )[:limit]
        )
        total += rows[0][-1] if rows else 0
        listed += [
            (
                latest,
                Owner(
                    kind=kind,
                    pk=pk,
                    name=name,
                    project=project,
                    start=None if open_start else first,
                    end=None if open_end else last,
                ),
            )
            for pk, name, project, first, latest, last, open_start, open_end, _ in rows
        ]
    # The two kinds together, the latest start first (as each was cut), an open start last.
    earliest = datetime.min.replace(tzinfo=UTC)
    listed.sort(key=lambda pair: pair[0] or earliest, reverse=True)
    owners = [owner for _, owner in listed]
    return Owners(shown=owners[:limit], total=total)


# For findings: GPU use per billed resource and UTC day -------------------------------------------


@dataclass(frozen=True)
class ResourceDay:
    resource_id: str
    day: date
    gpu_hours: float
    idle_gpu_hours: float
    util_mean: float | None

    @property
    def idle_share(self) -> float | None:
        """The share of this resource's GPU time that day spent idle: times the day's billed
        cost of the resource (DailyResourceCost), the money idle GPUs cost."""
        return self.idle_gpu_hours / self.gpu_hours if self.gpu_hours else None


def resource_gpu_days(*, start: date, end: date) -> list[ResourceDay]:
    """GPU-hours, idle GPU-hours and mean utilisation per resolved resource id and UTC day in
    [start, end). GPUs whose host maps to no resource are left out (see unmapped_hosts)."""
    resolutions = gpu_resolutions()
    physical = dict(Gpu.objects.filter(parent__isnull=False).values_list("pk", "parent_id"))
    totals: dict[tuple[str, date], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    rows = (
        _counted(
            GpuHour.objects.filter(
                hour__gte=datetime.combine(start, datetime.min.time(), tzinfo=UTC),
                hour__lt=datetime.combine(end, datetime.min.time(), tzinfo=UTC),
            )
        )
        .annotate(day=TruncDate("hour", tzinfo=UTC))
        .values("gpu_id", "day")
        .annotate(
            total=Sum("gpu__share"),
            weighted_util=Sum(F("util_mean") * F("gpu__share")),
            idle=Sum(F("idle_share") * F("gpu__share")),
        )
    )
    for row in rows:
        resolution = resolutions.get(physical.get(row["gpu_id"], row["gpu_id"]))
        if resolution is None:
            continue
        total = totals[(resolution.resource_id, row["day"])]
        total[0] += row["total"]
        total[1] += row["idle"] or 0.0
        total[2] += row["weighted_util"] or 0.0
    return [
        ResourceDay(
            resource_id=resource_id,
            day=day,
            gpu_hours=hours,
            idle_gpu_hours=idle,
            util_mean=weighted / hours if hours else None,
        )
        for (resource_id, day), (hours, idle, weighted) in sorted(totals.items())
    ]


# The mapping page -----------------------------------------------------------------------------


@dataclass(frozen=True)
class UnmappedHost:
    host: str
    gpus: int
    models: list[str]
    gpu_hours: float
    last_seen_at: datetime | None
    workloads: list[str]


def unmapped_hosts(*, since: datetime) -> list[UnmappedHost]:
    """Hosts with GPUs that resolve to no resource, with their GPU-hours from the UTC day of
    `since` on, most GPU-hours first: the ones worth mapping first. A GPU labelled with its
    resource resolves whatever its host; the others resolve by their host, so the database
    leaves out the hosts that resolve (`host_resolved`) and groups the GPUs of the rest by
    host: only the unmapped hosts' GPUs are read, not those of a fleet's 2,000 hosts."""
    unlabelled = (
        Gpu.objects.filter(parent__isnull=True, resource_label="")
        .exclude(host_resolved())
        .values("host", "model_name", "workload")
        .annotate(gpus=Count("pk"), last=Max("last_seen_at"))
        .order_by()
    )
    hosts: dict[str, list[dict]] = defaultdict(list)
    for row in unlabelled:
        hosts[row["host"]].append(row)
    if not hosts:
        return []
    # From the daily rollup (whole UTC days since `since`), summed per host in the database. An
    # unmapped GPU is reached by no registration, so all its rows have no projects; a MIG
    # instance's rows count for its physical GPU, by that GPU's host and label.
    days_ensure()
    hours_by_host = dict(
        GpuDay.objects.filter(day__gte=since.astimezone(UTC).date(), projects="")
        .filter(
            Q(gpu__parent__isnull=True, gpu__resource_label="") | Q(gpu__parent__resource_label="")
        )
        .annotate(physical_host=Coalesce("gpu__parent__host", "gpu__host"))
        .values("physical_host")
        .annotate(total=Sum("gpu_hours"))
        .values_list("physical_host", "total")
        .order_by()
    )
    result = []
    for host, rows in hosts.items():
        seen = [row["last"] for row in rows if row["last"]]
        result.append(
            UnmappedHost(
                host=host,
                gpus=sum(row["gpus"] for row in rows),
                models=sorted({row["model_name"] for row in rows if row["model_name"]}),
                gpu_hours=hours_by_host.get(host, 0.0),
                last_seen_at=max(seen) if seen else None,
                workloads=sorted({row["workload"] for row in rows if row["workload"]}),
            )
        )
    result.sort(key=lambda item: (-item.gpu_hours, item.host))
    return result


UNMAPPED_HOSTS_PER_PAGE = 50


@dataclass(frozen=True)
class UnmappedHostPage(Window):
    """A page of the unmapped hosts, most GPU-hours first (costsite.paging)."""

    rows: list[UnmappedHost] = field(default_factory=list)


def unmapped_hosts_page(
    *, since: datetime, page: int = 1, per_page: int = UNMAPPED_HOSTS_PER_PAGE
) -> UnmappedHostPage:
    """Page `page` of unmapped_hosts, sliced from its whole list (every unmapped host and its
    GPU-hours, a few hundred at most in a fleet of 10,000 GPUs, sorted by them): only the
    rendering is cut to a page."""
    hosts = unmapped_hosts(since=since)
    place = page_window(count=len(hosts), asked=page, per_page=per_page)
    return UnmappedHostPage(
        rows=hosts[place.offset : place.stop],
        count=place.count,
        number=place.number,
        per_page=per_page,
    )


@dataclass(frozen=True)
class MappingRow:
    mapping: HostMapping
    gpus: int
    last_seen_at: datetime | None
    editable: bool


def host_mapping_rows(*, user) -> list[MappingRow]:
    """Every mapping, with how many GPUs its host has and when one was last seen."""
    per_host = {
        row["host"]: row
        for row in Gpu.objects.filter(
            parent__isnull=True, host__in=HostMapping.objects.values("host")
        )
        .values("host")
        .annotate(gpus=Count("pk"), last=Max("last_seen_at"))
    }
    editable = set(host_mappings_editable_by(user=user).values_list("pk", flat=True))
    return [
        MappingRow(
            mapping=mapping,
            gpus=per_host.get(mapping.host, {}).get("gpus", 0),
            last_seen_at=per_host.get(mapping.host, {}).get("last"),
            editable=mapping.pk in editable,
        )
        for mapping in HostMapping.objects.select_related("created_by")
    ]
