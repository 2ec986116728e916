"""What the findings of part 2 count, hour by hour: notebooks left running, idle time between
runs, data-starved training and right-sized GPUs. Each function returns `{subject:
PartTwoSubject}` as compute.py's do; services.py stores them as it stores the others.

Everything is read in bulk: the lines grouped in SQL (spread over their hours here, as
compute.py spreads them, so the same line-hour has the same spend in every kind), the hourly GPU
rollup and the registrations once per recompute, never one query per subject.
"""

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_CEILING, ROUND_DOWN, Decimal

from django.db import connection
from django.db.models import Count, Exists, Max, OuterRef, Q, Sum, Value
from django.db.models.functions import Coalesce

# Spend reads, as in compute.py (the integrator points these at apps.spend).
from apps.billing.models import CostKind, CostLineItem, DailyResourceCost
from apps.deployments.models import DeploymentResource
from apps.experiments.models import Experiment, ExperimentResource
from apps.gpu.models import GpuHour
from apps.gpu.selectors import gpu_resolutions, gpus_by_resource, gpus_named_by
from apps.projects.models import Workload, tail_of

from .compute import HourFigure, SubjectHours, day_start, gpu_lines
from .models import (
    Finding,
    FindingHour,
    GpuInstancePrice,
    GpuTypeMemory,
    InsightsSettings,
    Kind,
)

HOUR = timedelta(hours=1)
PLACES = Decimal("1e-15")
NOTEBOOK_IDLE_SHARE = Decimal("0.9")  # every hour of a stretch at least this idle
MEMORY_SPARE = Decimal("1.2")  # a right-size candidate holds the peak memory with 20% to spare
MIB_IN_GB = Decimal("1.048576") / 1000  # metrics report MiB, data sheets GB
# An open end of a usage window, comparable with every stored moment.
FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)
RIGHT_SIZE_DAYS = 30
CANDIDATES_SHOWN = 5


@dataclass
class PartTwoSubject(SubjectHours):
    """A subject of part 2. `hours` may be keyed (hour, currency, line key) where a subject's
    hours fall on several resources (a run on many instances); `evidence` is what its page
    draws and `savings` (currency -> Decimal) is a lever's saving per month."""

    evidence: dict = field(default_factory=dict)
    savings: dict = field(default_factory=dict)


def _window(start: date | None, end: date | None) -> tuple[datetime | None, datetime | None]:
    return (
        day_start(start) if start is not None else None,
        day_start(end) if end is not None else None,
    )


def _spread(start: datetime, end: datetime, cost: Decimal) -> list[tuple[datetime, Decimal]]:
    """The line's cost over the UTC hours its charge period touches, as compute.py spreads it:
    even parts at the stored scale, the remainder on the last hour."""
    first = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    hours = [first]
    moment = first + HOUR
    while moment < end:
        hours.append(moment)
        moment += HOUR
    part = (cost / len(hours)).quantize(PLACES, rounding=ROUND_DOWN)
    last = cost - part * (len(hours) - 1)
    return [
        (hour, last if number == len(hours) else part) for number, hour in enumerate(hours, start=1)
    ]


def _line_hours(
    condition: Q,
    window: tuple[datetime | None, datetime | None],
    key_fields: tuple[str, ...] = ("resource_id",),
    skip=None,
) -> dict[tuple, dict[tuple[datetime, str], HourFigure]]:
    """GPU-compute lines matching `condition`, per key: (hour, currency) -> spend and owner,
    grouped in SQL by key, charge period, currency and owner (as compute.py groups them).
    `skip(key, start, end)` true: a grouped line none of whose hours matters, not spread."""
    low, high = window
    lines = gpu_lines(window).filter(condition)
    if low is not None:
        lines = lines.filter(charge_period_end__gt=low)
    if high is not None:
        lines = lines.filter(charge_period_start__lt=high)
    grouped = (
        lines.values(
            *key_fields,
            "charge_period_start",
            "charge_period_end",
            "billing_currency",
            "project_id",
            "experiment_id",
            "deployment_id",
        )
        .annotate(cost=Sum("effective_cost"))
        .order_by()
        .iterator(chunk_size=20_000)
    )
    out: dict[tuple, dict[tuple[datetime, str], HourFigure]] = defaultdict(dict)
    for row in grouped:
        key = tuple(row[name] for name in key_fields)
        if skip is not None and skip(key, row["charge_period_start"], row["charge_period_end"]):
            continue
        owner = (row["project_id"], row["experiment_id"], row["deployment_id"])
        currency = row["billing_currency"]
        hours = out[key]
        for hour, amount in _spread(
            row["charge_period_start"], row["charge_period_end"], row["cost"]
        ):
            if (low is not None and hour < low) or (high is not None and hour >= high):
                continue
            figure = hours.get((hour, currency))
            if figure is None:
                figure = hours[(hour, currency)] = HourFigure(currency)
            figure.spend += amount
            if figure.owner_spend is None or amount > figure.owner_spend:
                figure.owner, figure.owner_spend = owner, amount
    return out


def _idle_by_hour(
    resources, gpus_of: dict[str, set[int]], window: tuple[datetime | None, datetime | None]
) -> dict[str, dict[datetime, tuple[int, int]]]:
    """Per resource, per hour its GPUs reported: (idle samples, utilisation samples), summed
    over its GPUs (the idle share of idle_gpu)."""
    wanted = {resource: gpus_named_by(gpus_of, resource) for resource in resources}
    every = {gpu for gpus in wanted.values() for gpu in gpus}
    if not every:
        return {}
    rows = GpuHour.objects.filter(gpu_id__in=every, util_samples__gt=0)
    low, high = window
    if low is not None:
        rows = rows.filter(hour__gte=low)
    if high is not None:
        rows = rows.filter(hour__lt=high)
    by_gpu: dict[int, dict[datetime, tuple[int, int]]] = defaultdict(dict)
    for gpu_id, hour, samples, share in rows.values_list(
        "gpu_id", "hour", "util_samples", "idle_share"
    ).iterator(chunk_size=20_000):
        by_gpu[gpu_id][hour] = (round((share or 0.0) * samples), samples)
    out = {}
    for resource, gpus in wanted.items():
        merged: dict[datetime, list[int]] = {}
        for gpu in gpus:
            for hour, (idle, samples) in by_gpu.get(gpu, {}).items():
                pair = merged.setdefault(hour, [0, 0])
                pair[0] += idle
                pair[1] += samples
        out[resource] = {hour: (pair[0], pair[1]) for hour, pair in merged.items()}
    return out


# -- notebook_left_running ----------------------------------------------------------------------


def _development_resources(window: tuple[datetime | None, datetime | None]) -> set[str]:
    """Resources with GPU-compute spend of the development workload or of a notebook run (the
    daily resource rollup, not the lines)."""
    rows = DailyResourceCost.objects.filter(
        Q(workload=Workload.DEVELOPMENT) | Q(experiment__kind=Experiment.Kind.NOTEBOOK),
        cost_kind=CostKind.GPU_COMPUTE,
    ).exclude(resource_id="")
    low, high = window
    if low is not None:
        rows = rows.filter(day__gte=low.date())
    if high is not None:
        rows = rows.filter(day__lte=high.date())
    return set(rows.values_list("resource_id", flat=True).distinct())


def notebook_left_running_hours(
    *, start: date | None, end: date | None
) -> dict[str, PartTwoSubject]:
    """Per development resource: its GPU-compute hours; wasted = the full cost of the hours in
    stretches of at least N consecutive billed hours (InsightsSettings.notebook_idle_hours),
    each measured and at least 90% idle. An unmeasured or unbilled hour ends a stretch.

    Whether an hour is in such a stretch depends only on the N hours either side of it, so the
    lines and metrics are read that much beyond the period."""
    needed = InsightsSettings.get().notebook_idle_hours
    window = _window(start, end)
    reach = (
        window[0] - needed * HOUR if window[0] is not None else None,
        window[1] + needed * HOUR if window[1] is not None else None,
    )
    resources = _development_resources(reach)
    if not resources:
        return {}
    gpus_of = gpus_by_resource()
    lines = _line_hours(Q(resource_id__in=sorted(resources)), reach)
    shares = _idle_by_hour([key[0] for key in lines], gpus_of, reach)
    low, high = window
    subjects: dict[str, PartTwoSubject] = {}
    for (resource,), hours in lines.items():
        idle_of = shares.get(resource, {})
        subject = PartTwoSubject(
            line_key=resource,
            resource_id=resource,
            gpus=len(gpus_named_by(gpus_of, resource)),
            evidence={"min_hours": needed},
        )
        stretched: set[tuple[datetime, str]] = set()
        for currency in {currency for _hour, currency in hours}:
            run: list[datetime] = []
            for hour in sorted(hour for hour, cur in hours if cur == currency) + [None]:
                counts = idle_of.get(hour) if hour is not None else None
                idle = (
                    counts is not None
                    and hours[(hour, currency)].spend > 0
                    and Decimal(counts[0]) >= NOTEBOOK_IDLE_SHARE * counts[1]
                )
                if idle and run and hour - run[-1] == HOUR:
                    run.append(hour)
                    continue
                if len(run) >= needed:
                    stretched.update((moment, currency) for moment in run)
                run = [hour] if idle else []
        for (hour, currency), figure in hours.items():
            if (low is not None and hour < low) or (high is not None and hour >= high):
                continue
            counts = idle_of.get(hour)
            if counts is None:
                figure.measured = False
            else:
                figure.idle_share = Decimal(counts[0]) / Decimal(counts[1])
            if (hour, currency) in stretched:
                figure.wasted = figure.spend
            subject.hours[(hour, currency)] = figure
        subjects[resource] = subject
    return subjects


# -- idle_between_runs --------------------------------------------------------------------------


@dataclass(frozen=True)
class Use:
    """A registered use of a resource: who, and the window [start, end) (end None: open)."""

    start: datetime
    end: datetime | None
    owner: tuple  # project, experiment, deployment
    name: str
    what: str  # experiment or deployment


def registered_uses() -> dict[str, list[Use]]:
    """Resource id (and its tail) -> the uses registered on it, by start. A use without a window
    of its own takes its run's or deployment's; one that never started used nothing."""
    uses: dict[str, list[Use]] = defaultdict(list)
    for row in ExperimentResource.objects.values(
        "resource_id",
        "started_at",
        "ended_at",
        "experiment_id",
        "experiment__name",
        "experiment__project_id",
        "experiment__started_at",
        "experiment__ended_at",
    ):
        begin = row["started_at"] or row["experiment__started_at"]
        if begin is None:
            continue
        use = Use(
            begin,
            row["ended_at"] or row["experiment__ended_at"],
            (row["experiment__project_id"], row["experiment_id"], None),
            row["experiment__name"],
            "experiment",
        )
        uses[row["resource_id"]].append(use)
        if tail_of(row["resource_id"]) != row["resource_id"]:
            uses[tail_of(row["resource_id"])].append(use)
    for row in DeploymentResource.objects.values(
        "resource_id",
        "started_at",
        "ended_at",
        "deployment_id",
        "deployment__name",
        "deployment__project_id",
        "deployment__started_at",
        "deployment__ended_at",
    ):
        begin = row["started_at"] or row["deployment__started_at"]
        if begin is None:
            continue
        use = Use(
            begin,
            row["ended_at"] or row["deployment__ended_at"],
            (row["deployment__project_id"], None, row["deployment_id"]),
            row["deployment__name"],
            "deployment",
        )
        uses[row["resource_id"]].append(use)
        if tail_of(row["resource_id"]) != row["resource_id"]:
            uses[tail_of(row["resource_id"])].append(use)
    return {key: sorted(set(found), key=lambda use: use.start) for key, found in uses.items()}


def _merged(uses: list[Use]) -> tuple[list[datetime], list[datetime]]:
    """The uses' windows merged into disjoint [start, end) spans: (starts, ends)."""
    starts: list[datetime] = []
    ends: list[datetime] = []
    for use in uses:
        finish = use.end or FAR_FUTURE
        if starts and use.start <= ends[-1]:
            ends[-1] = max(ends[-1], finish)
        else:
            starts.append(use.start)
            ends.append(finish)
    return starts, ends


def _in_use(hour: datetime, starts: list[datetime], ends: list[datetime]) -> bool:
    """Whether a use overlaps the hour [hour, hour + 1h) (part of an hour used is used)."""
    index = bisect_right(starts, hour + HOUR - timedelta(microseconds=1)) - 1
    return index >= 0 and ends[index] > hour


def _nearest_owner(hour: datetime, uses: list[Use]) -> tuple:
    """The use that last ended before the hour (the run that left the GPU idle), else the next."""
    before = [use for use in uses if use.end is not None and use.end <= hour]
    if before:
        return max(before, key=lambda use: use.end).owner
    return min(uses, key=lambda use: abs(use.start - hour)).owner


def _inside_a_use(model, owner: str) -> Exists:
    """The line lies wholly inside one use registered under its own resource id: none of its
    hours is between runs, so the database leaves it out (a line across two uses, or matched
    by the tail of its id, is left to `inside` and the hour-by-hour test)."""
    uses = (
        model.objects.filter(resource_id=OuterRef("resource_id"))
        .annotate(
            use_start=Coalesce("started_at", f"{owner}__started_at"),
            use_end=Coalesce("ended_at", f"{owner}__ended_at", Value(FAR_FUTURE)),
        )
        .filter(
            use_start__isnull=False,
            use_start__lte=OuterRef("charge_period_start"),
            use_end__gte=OuterRef("charge_period_end"),
        )
    )
    return Exists(uses)


def idle_between_runs_hours(*, start: date | None, end: date | None) -> dict[str, PartTwoSubject]:
    """Per GPU resource that registered runs or deployments use: its GPU-compute hours; wasted =
    the cost of the hours no registered use overlaps. Hours already in a notebook left running
    are not counted again (its findings are stored first in a recompute)."""
    uses_of = registered_uses()
    if not uses_of:
        return {}
    window = _window(start, end)
    days = DailyResourceCost.objects.filter(cost_kind=CostKind.GPU_COMPUTE).exclude(resource_id="")
    if window[0] is not None:
        days = days.filter(day__gte=window[0].date())
    if window[1] is not None:
        days = days.filter(day__lt=window[1].date())
    resources = sorted(
        resource
        for resource in days.values_list("resource_id", flat=True).distinct()
        if resource in uses_of or tail_of(resource) in uses_of
    )
    if not resources:
        return {}
    notebook = FindingHour.objects.filter(
        finding__kind=Kind.NOTEBOOK_LEFT_RUNNING, wasted__gt=0, line_key__in=resources
    )
    if window[0] is not None:
        notebook = notebook.filter(hour__gte=window[0])
    if window[1] is not None:
        notebook = notebook.filter(hour__lt=window[1])
    counted = set(notebook.values_list("line_key", "hour", "currency"))
    uses_on: dict[str, list[Use]] = {}
    spans_on: dict[str, tuple[list[datetime], list[datetime]]] = {}
    for resource in resources:
        uses = uses_of.get(resource) or uses_of.get(tail_of(resource), [])
        if tail_of(resource) != resource and tail_of(resource) in uses_of:
            both = set(uses_of.get(resource, [])) | set(uses_of[tail_of(resource)])
            uses = sorted(both, key=lambda use: use.start)
        uses_on[resource] = uses
        spans_on[resource] = _merged(uses)

    def inside(key: tuple, first: datetime, last: datetime) -> bool:
        """A line wholly inside one use: every hour of it is used (most lines), not spread."""
        starts, ends = spans_on[key[0]]
        index = bisect_right(starts, first) - 1
        return index >= 0 and ends[index] >= last

    subjects: dict[str, PartTwoSubject] = {}
    condition = Q(resource_id__in=resources) & ~Q(_inside_a_use(ExperimentResource, "experiment"))
    condition &= ~Q(_inside_a_use(DeploymentResource, "deployment"))
    lines = _line_hours(condition, window, skip=inside)
    for (resource,), hours in lines.items():
        uses = uses_on[resource]
        starts, ends = spans_on[resource]
        subject = PartTwoSubject(
            line_key=resource,
            resource_id=resource,
            evidence={
                "runs": [
                    {
                        "name": use.name,
                        "what": use.what,
                        "start": use.start.isoformat(),
                        "end": use.end.isoformat() if use.end else None,
                    }
                    for use in uses[-100:]
                ]
            },
        )
        for (hour, currency), figure in hours.items():
            # Only the hours between runs are stored (the used ones are most of the hours).
            if not _in_use(hour, starts, ends) and (resource, hour, currency) not in counted:
                figure.wasted = figure.spend
                if figure.owner[1] is None and figure.owner[2] is None:
                    figure.owner = _nearest_owner(hour, uses)
                subject.hours[(hour, currency)] = figure
        subjects[resource] = subject
    return subjects


# -- data_starved -------------------------------------------------------------------------------


def _adapt(moment: datetime):
    return connection.ops.adapt_datetimefield_value(moment)


WINDOWS_PER_STATEMENT = 2000  # 8,000 parameters: under every database's limit


def _run_utilisation(
    windows: list[tuple[int, int, datetime, datetime]], *, by_hour: bool
) -> list[tuple]:
    """Σ util_mean × util_samples and Σ util_samples of the GPU hours in each (run, GPU, from,
    to) window, per run (and hour): one SQL statement over the hourly GPU rollup per 2,000
    windows, the sums of a run split between statements added here."""
    sums: dict[tuple, list[float]] = {}
    for first in range(0, len(windows), WINDOWS_PER_STATEMENT):
        for row in _run_utilisation_sql(
            windows[first : first + WINDOWS_PER_STATEMENT], by_hour=by_hour
        ):
            key, weighted, samples = tuple(row[:-2]), row[-2] or 0.0, row[-1] or 0
            pair = sums.setdefault(key, [0.0, 0])
            pair[0] += weighted
            pair[1] += samples
    return [(*key, weighted, samples) for key, (weighted, samples) in sums.items()]


def _run_utilisation_sql(
    windows: list[tuple[int, int, datetime, datetime]], *, by_hour: bool
) -> list[tuple]:
    if not windows:
        return []
    values = ", ".join(["(%s, %s, %s, %s)"] * len(windows))
    params: list = []
    for run, gpu, low, high in windows:
        params += [run, gpu, _adapt(low), _adapt(high)]
    table = GpuHour._meta.db_table
    hour = ", h.hour" if by_hour else ""
    sql = (
        f"WITH w(run_id, gpu_id, low, high) AS (VALUES {values}) "
        f"SELECT w.run_id{hour}, SUM(h.util_mean * h.util_samples), SUM(h.util_samples) "
        f"FROM {table} h JOIN w ON h.gpu_id = w.gpu_id AND h.hour >= w.low AND h.hour < w.high "
        "WHERE h.util_samples > 0 AND h.util_mean IS NOT NULL "
        f"GROUP BY w.run_id{hour}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def data_starved_hours(*, start: date | None, end: date | None) -> dict[str, PartTwoSubject]:
    """Per training or fine-tuning run overlapping the period: its GPUs' mean utilisation while
    it ran (samples-weighted, over the GPUs of its resources); under the target
    (InsightsSettings.data_starved_target_percent), wasted = each hour's GPU-compute cost of
    the run × (1 − mean ÷ target)."""
    target = InsightsSettings.get().data_starved_target_percent
    low, high = _window(start, end)
    runs = Experiment.objects.filter(
        kind__in=[Experiment.Kind.TRAINING, Experiment.Kind.FINE_TUNING], started_at__isnull=False
    )
    if high is not None:
        runs = runs.filter(started_at__lt=high)
    if low is not None:
        runs = runs.filter(Q(ended_at__isnull=True) | Q(ended_at__gt=low))
    runs_of = {row["pk"]: row for row in runs.values("pk", "name", "started_at", "ended_at")}
    if not runs_of:
        return {}
    resources: dict[int, set[str]] = defaultdict(set)
    for run, resource in ExperimentResource.objects.filter(
        experiment_id__in=list(runs_of)
    ).values_list("experiment_id", "resource_id"):
        resources[run].add(resource)
    for run, resource in (
        DailyResourceCost.objects.filter(
            experiment_id__in=list(runs_of), cost_kind=CostKind.GPU_COMPUTE
        )
        .exclude(resource_id="")
        .values_list("experiment_id", "resource_id")
        .distinct()
    ):
        resources[run].add(resource)
    gpus_of = gpus_by_resource()
    windows = []
    gpus_of_run: dict[int, set[int]] = {}
    for run, row in runs_of.items():
        gpus: set[int] = set()
        for resource in resources.get(run, ()):
            gpus |= gpus_named_by(gpus_of, resource)
        gpus_of_run[run] = gpus
        first = row["started_at"].replace(minute=0, second=0, microsecond=0)
        for gpu in sorted(gpus):
            windows.append((run, gpu, first, row["ended_at"] or FAR_FUTURE))
    means: dict[int, Decimal] = {}
    for run, weighted, samples in _run_utilisation(windows, by_hour=False):
        if samples:
            means[run] = (Decimal(str(weighted)) / Decimal(samples)).quantize(Decimal("0.0001"))
    starved = {run: mean for run, mean in means.items() if mean < target}
    known = {
        int(key.split(":", 1)[1])
        for key in Finding.objects.filter(kind=Kind.DATA_STARVED).values_list(
            "subject_key", flat=True
        )
    }
    counted = sorted((set(starved) | known) & set(runs_of))
    if not counted:
        return {}
    series: dict[int, list] = defaultdict(list)
    starved_windows = [window for window in windows if window[0] in starved]
    for run, hour, weighted, samples in sorted(
        _run_utilisation(starved_windows, by_hour=True), key=lambda row: (row[0], str(row[1]))
    ):
        if samples:
            moment = hour if isinstance(hour, datetime) else datetime.fromisoformat(str(hour))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            series[run].append([moment.isoformat(), round(float(weighted) / samples, 2)])
    lines = _line_hours(
        Q(experiment_id__in=counted), (low, high), key_fields=("experiment_id", "resource_id")
    )
    subjects: dict[str, PartTwoSubject] = {}
    for run in counted:
        mean = starved.get(run)
        factor = (1 - mean / target) if mean is not None else Decimal("0")
        run_resources = sorted(resources.get(run, ()))
        key = f"experiment:{run}"
        subject = PartTwoSubject(
            line_key=run_resources[0] if run_resources else key,
            resource_id=run_resources[0] if run_resources else "",
            gpus=len(gpus_of_run.get(run, ())),
            evidence={
                "run": runs_of[run]["name"],
                "resources": run_resources[:50],
                "target_percent": format(target.normalize(), "f"),
                "mean_utilisation_percent": (
                    format(means[run].normalize(), "f") if run in means else None
                ),
                "utilisation": series.get(run, [])[-2000:],
            },
        )
        for (experiment, resource), hours in lines.items():
            if experiment != run:
                continue
            for (hour, currency), figure in hours.items():
                figure.wasted = (figure.spend * factor).quantize(PLACES) if factor > 0 else 0
                subject.hours[(hour, currency, resource)] = figure
        subjects[key] = subject
    return subjects


# -- right_size ---------------------------------------------------------------------------------


def catalogue_provider(provider_name: str) -> str:
    """The bill's ProviderName as the catalogue names providers (aws, gcp, lambda, runpod)."""
    name = provider_name.strip().lower()
    if name in {"aws", "amazon web services"} or name.startswith("amazon"):
        return "aws"
    if name in {"gcp", "google cloud", "google cloud platform"} or name.startswith("google"):
        return "gcp"
    if name.startswith("lambda"):
        return "lambda"
    if name.startswith("runpod"):
        return "runpod"
    return name


def _offer_json(offer, *, current, hours: int, memory: dict) -> dict:
    """An instance of the catalogue as the right-size evidence shows it."""
    saving = (current.on_demand_per_hour - offer.on_demand_per_hour) * hours
    return {
        "instance_type": offer.instance_type,
        "gpu_type": offer.gpu_type,
        "gpu_count": format(offer.gpu_count.normalize(), "f"),
        "memory_gb": format(memory.get(offer.gpu_type, Decimal("0")).normalize(), "f"),
        "on_demand_per_hour": format(offer.on_demand_per_hour.normalize(), "f"),
        "saving_per_month": format(saving.normalize(), "f"),
    }


def right_size_hours(*, start: date | None, end: date | None) -> dict[str, PartTwoSubject]:
    """Per resource whose GPUs report memory over the 30 days ending at the bill's "data as
    of" (whatever the period asked for): the cheapest instance of the catalogue in the same
    provider and region whose GPUs hold the peak memory with 20% to spare (each GPU the
    largest GPU's peak, all of them the sum of the peaks) and that has at least ⌈GPUs × peak
    utilisation ÷ 100⌉ GPUs (the peak: the highest hourly mean any of its GPUs reached).
    Savings per month = (current − candidate on-demand hourly) × its billed hours in the 30
    days. No wasted: a lever."""
    from .selectors import data_as_of  # the bill's freshness (selectors reads apps.spend)

    as_of = data_as_of()
    if as_of is None:
        return {}
    high = as_of
    low = high - timedelta(days=RIGHT_SIZE_DAYS)
    peaks: dict[int, tuple[float, float]] = {}
    for row in (
        GpuHour.objects.filter(hour__gte=low, hour__lt=high)
        .filter(Q(memory_used_max_mib__isnull=False) | Q(memory_used_mib__isnull=False))
        .values("gpu_id")
        .annotate(
            peak=Max("memory_used_max_mib"), used=Max("memory_used_mib"), util=Max("util_mean")
        )
        .order_by()
    ):
        peaks[row["gpu_id"]] = (max(row["peak"] or 0.0, row["used"] or 0.0), row["util"] or 0.0)
    if not peaks:
        return {}
    by_key: dict[str, dict[int, tuple[float, float]]] = defaultdict(dict)
    for gpu_id, resolution in gpu_resolutions().items():
        if gpu_id in peaks:
            by_key[resolution.resource_id][gpu_id] = peaks[gpu_id]
            by_key[tail_of(resolution.resource_id)][gpu_id] = peaks[gpu_id]
    days = DailyResourceCost.objects.filter(
        cost_kind=CostKind.GPU_COMPUTE, day__gte=low.date(), day__lte=high.date()
    ).exclude(resource_id="")
    resources = sorted(
        resource
        for resource in days.values_list("resource_id", flat=True).distinct()
        if resource in by_key or tail_of(resource) in by_key
    )
    # A deployment's resources are right_size_serving's (compute_levers.py): one finding each.
    from .compute_levers import right_sized_elsewhere

    serving = right_sized_elsewhere()
    resources = [resource for resource in resources if resource not in serving]
    if not resources:
        return {}
    in_days = CostLineItem.objects.filter(
        cost_kind=CostKind.GPU_COMPUTE, charge_period_end__gt=low, charge_period_start__lt=high
    )
    # What each resource runs on, grouped in SQL (the hours are counted later, for the few
    # resources a cheaper instance fits).
    instance: dict[str, dict[tuple, int]] = defaultdict(dict)
    for row in (
        in_days.filter(resource_id__in=resources)
        .values("resource_id", "instance_type", "provider_name", "region_id", "billing_currency")
        .annotate(lines=Count("id"))
        .order_by()
    ):
        what = (
            row["instance_type"],
            catalogue_provider(row["provider_name"]),
            row["region_id"],
            row["billing_currency"],
        )
        instance[row["resource_id"]][what] = (
            instance[row["resource_id"]].get(what, 0) + row["lines"]
        )
    memory = {row.gpu_type: row.memory_gb for row in GpuTypeMemory.objects.all()}
    offers: dict[tuple[str, str], list[GpuInstancePrice]] = defaultdict(list)
    for price in GpuInstancePrice.objects.filter(on_demand_per_hour__isnull=False).exclude(
        instance_type=""
    ):
        offers[(price.provider, price.region)].append(price)
    fits: dict[str, tuple] = {}
    for resource in resources:
        if not instance.get(resource):
            continue
        itype, provider, region, currency = max(
            instance[resource].items(), key=lambda item: item[1]
        )[0]
        current = next(
            (offer for offer in offers.get((provider, region), []) if offer.instance_type == itype),
            None,
        )
        if current is None or current.currency != currency:
            continue  # no price for what it runs on (or not in the bill's currency)
        gpus = by_key.get(resource) or by_key.get(tail_of(resource), {})
        peak_gb = Decimal(str(max(mem for mem, _util in gpus.values()))) * MIB_IN_GB
        total_gb = sum(Decimal(str(mem)) for mem, _util in gpus.values()) * MIB_IN_GB
        peak_util = Decimal(str(round(max(util for _mem, util in gpus.values()), 4)))
        needed = max(
            Decimal("1"),
            (current.gpu_count * peak_util / 100).to_integral_value(rounding=ROUND_CEILING),
        )
        fitting = []
        for offer in offers[(provider, region)]:
            per_gpu = memory.get(offer.gpu_type)
            if (
                per_gpu is None
                or offer.currency != currency
                or offer.on_demand_per_hour >= current.on_demand_per_hour
                or offer.gpu_count < needed
                or per_gpu < peak_gb * MEMORY_SPARE
                or per_gpu * offer.gpu_count < total_gb * MEMORY_SPARE
            ):
                continue
            fitting.append(offer)
        if not fitting:
            continue
        fitting.sort(key=lambda offer: (offer.on_demand_per_hour, offer.instance_type))
        fits[resource] = (current, fitting, gpus, peak_gb, total_gb, peak_util, needed, currency)
    billed: dict[str, set[datetime]] = defaultdict(set)
    for row in (
        in_days.filter(resource_id__in=sorted(fits))
        .values("resource_id", "charge_period_start", "charge_period_end")
        .distinct()
        .order_by()
        .iterator(chunk_size=20_000)
    ):
        billed[row["resource_id"]].update(
            hour
            for hour, _amount in _spread(
                row["charge_period_start"], row["charge_period_end"], Decimal("0")
            )
            if low <= hour < high
        )
    subjects: dict[str, PartTwoSubject] = {}
    for resource, (
        current,
        fitting,
        gpus,
        peak_gb,
        total_gb,
        peak_util,
        needed,
        currency,
    ) in fits.items():
        provider, region = current.provider, current.region
        hours = len(billed[resource])
        best = fitting[0]
        saving = (current.on_demand_per_hour - best.on_demand_per_hour) * hours

        def offer_json(offer: GpuInstancePrice, *, over=current, hours=hours) -> dict:
            return _offer_json(offer, current=over, hours=hours, memory=memory)

        subjects[resource] = PartTwoSubject(
            line_key=resource,
            resource_id=resource,
            gpus=len(gpus),
            savings={currency: saving},
            evidence={
                "provider": provider,
                "region": region,
                "current": offer_json(current),
                "candidates": [offer_json(offer) for offer in fitting[:CANDIDATES_SHOWN]],
                "peak_memory_gb": format(peak_gb.quantize(Decimal("0.01")).normalize(), "f"),
                "total_memory_gb": format(total_gb.quantize(Decimal("0.01")).normalize(), "f"),
                "peak_utilisation_percent": format(peak_util.normalize(), "f"),
                "gpus_needed": int(needed),
                "billed_hours_30d": hours,
                "currency": currency,
            },
        )
    return subjects
