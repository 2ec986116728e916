"""What each finding kind counts, hour by hour, read in bulk from the line items and the hourly
GPU rollup (grouped in SQL, spread over hours here). Each function returns the hours of every
subject it finds: `{subject: SubjectHours}`; services.py turns them into findings.

A line is spread evenly over the UTC hours its charge period touches (a daily line over 24,
an hourly line over its one hour), so every kind and every counted-once total speaks of the
same line-hours.
"""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import ROUND_DOWN, Decimal

from django.db.models import Q, Sum

# Spend reads: the one place this app reads the bill and the GPU rollup's resolution (the
# integrator points these at apps.spend when it exists).
from apps.billing.models import CostKind, CostLineItem
from apps.gpu.models import GpuHour
from apps.gpu.selectors import gpu_resolutions

HOUR = timedelta(hours=1)
PLACES = Decimal("1e-15")  # the scale money is stored with


def tail(resource_id: str) -> str:
    """`arn:aws:ec2:...:instance/i-0abc` and `i-0abc` name the same instance (as apps.gpu)."""
    return resource_id.rstrip("/").rsplit("/", 1)[-1]


def day_start(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def _window(start: date | None, end: date | None) -> tuple[datetime | None, datetime | None]:
    return (
        day_start(start) if start is not None else None,
        day_start(end) if end is not None else None,
    )


@dataclass
class HourFigure:
    currency: str
    spend: Decimal = Decimal("0")
    wasted: Decimal = Decimal("0")
    measured: bool = True
    idle_share: Decimal | None = None
    owner: tuple = (None, None, None)  # project, experiment, deployment of most of the spend
    owner_spend: Decimal = Decimal("0")
    line_key: str = ""  # empty: the subject's line key (a run's hours may span resources)


@dataclass
class SubjectHours:
    """One subject's hours: (hour, currency) -> figures, and what names the subject."""

    line_key: str
    resource_id: str = ""
    billing_account_id: str = ""
    service_name: str = ""
    hours: dict[tuple, HourFigure] = field(default_factory=dict)  # (hour, currency, ...)
    gpus: int = 0
    # Kinds that say their own figures (part 3): None takes them from the hours.
    savings_per_month: dict[str, Decimal] | None = None
    reason: str = ""
    evidence: dict = field(default_factory=dict)
    owner: tuple = (None, None, None)  # project, experiment, deployment when no hour says it


def _hours_of(start: datetime, end: datetime) -> list[datetime]:
    """The UTC hours a charge period touches (at least the hour it starts in)."""
    first = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    hours = [first]
    moment = first + HOUR
    while moment < end:
        hours.append(moment)
        moment += HOUR
    return hours


def _lines(period: tuple[date | None, date | None], condition: Q, key_fields: tuple[str, ...]):
    """The lines' EffectiveCost grouped by key, charge period, currency and owner, in SQL."""
    # Every line whose charge period overlaps the period (its hours outside it are dropped).
    lines = CostLineItem.objects.filter(condition)
    start, end = period
    if start is not None:
        lines = lines.filter(charge_period_end__gt=day_start(start))
    if end is not None:
        lines = lines.filter(charge_period_start__lt=day_start(end))
    return (
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


def _add(
    subject: SubjectHours,
    row: dict,
    share_of: dict[datetime, tuple[int, int]] | None,
    window: tuple[datetime | None, datetime | None],
) -> None:
    hours = _hours_of(row["charge_period_start"], row["charge_period_end"])
    # Even parts at the stored scale, the remainder on the last hour: the parts add up exactly.
    part = (row["cost"] / len(hours)).quantize(PLACES, rounding=ROUND_DOWN)
    last = row["cost"] - part * (len(hours) - 1)
    owner = (row["project_id"], row["experiment_id"], row["deployment_id"])
    low, high = window
    for number, hour in enumerate(hours, start=1):
        if (low is not None and hour < low) or (high is not None and hour >= high):
            continue
        per_hour = last if number == len(hours) else part
        figure = subject.hours.get((hour, row["billing_currency"]))
        if figure is None:
            figure = subject.hours[(hour, row["billing_currency"])] = HourFigure(
                row["billing_currency"]
            )
        figure.spend += per_hour
        if per_hour > figure.owner_spend:
            figure.owner, figure.owner_spend = owner, per_hour
        if share_of is None:  # unattributed: all of it is the finding's money
            figure.wasted += per_hour
            continue
        counts = share_of.get(hour)
        if counts is None:
            figure.measured = False
            continue
        idle, samples = counts
        figure.idle_share = Decimal(idle) / Decimal(samples)
        figure.wasted += per_hour * idle / samples


def idle_gpu_hours(*, start: date | None, end: date | None) -> dict[str, SubjectHours]:
    """Per billed resource whose GPUs report metrics: per UTC hour, its GPU-compute lines'
    EffectiveCost in the hour × (samples under the idle threshold ÷ utilisation samples) of its
    GPUs that reported that hour. Hours none of them reported are unmeasured (no waste)."""
    gpus_of: dict[str, set[int]] = defaultdict(set)
    for gpu_id, resolution in gpu_resolutions().items():
        gpus_of[resolution.resource_id].add(gpu_id)
        gpus_of[tail(resolution.resource_id)].add(gpu_id)
    if not gpus_of:
        return {}
    gpu_hours = GpuHour.objects.filter(
        gpu_id__in={gpu for gpus in gpus_of.values() for gpu in gpus}, util_samples__gt=0
    )
    window = _window(start, end)
    if window[0] is not None:
        gpu_hours = gpu_hours.filter(hour__gte=window[0])
    if window[1] is not None:
        gpu_hours = gpu_hours.filter(hour__lt=window[1])
    # Idle samples are idle_share × util_samples (the rollup keeps the share of a whole count).
    by_gpu: dict[int, dict[datetime, tuple[int, int]]] = defaultdict(dict)
    for gpu_id, hour, samples, share in gpu_hours.values_list(
        "gpu_id", "hour", "util_samples", "idle_share"
    ).iterator(chunk_size=20_000):
        by_gpu[gpu_id][hour] = (round((share or 0.0) * samples), samples)

    subjects: dict[str, SubjectHours] = {}
    shares: dict[str, dict[datetime, tuple[int, int]]] = {}
    condition = Q(cost_kind=CostKind.GPU_COMPUTE, resource_id__in=list(gpus_of))
    for row in _lines((start, end), condition, ("resource_id",)):
        resource = row["resource_id"]
        if resource not in shares:
            gpus = gpus_of.get(resource, set()) | gpus_of.get(tail(resource), set())
            merged: dict[datetime, list[int]] = {}
            for gpu in gpus:
                for hour, (idle, samples) in by_gpu.get(gpu, {}).items():
                    pair = merged.setdefault(hour, [0, 0])
                    pair[0] += idle
                    pair[1] += samples
            shares[resource] = {hour: (pair[0], pair[1]) for hour, pair in merged.items()}
            subjects[resource] = SubjectHours(
                line_key=resource, resource_id=resource, gpus=len(gpus)
            )
        _add(subjects[resource], row, shares[resource], window)
    return subjects


def unattributed_hours(*, start: date | None, end: date | None) -> dict[str, SubjectHours]:
    """Per resource (or per account and service, for lines without a resource id) the
    EffectiveCost of its lines with no project, hour by hour."""
    subjects: dict[str, SubjectHours] = {}
    window = _window(start, end)
    for row in _lines(
        (start, end),
        Q(project_id__isnull=True),
        ("resource_id", "billing_account_id", "service_name"),
    ):
        resource = row["resource_id"]
        key = resource or f"{row['billing_account_id']}/{row['service_name']}"
        subject = subjects.get(key)
        if subject is None:
            subject = subjects[key] = SubjectHours(
                line_key=key,
                resource_id=resource,
                billing_account_id=row["billing_account_id"] if not resource else "",
                service_name=row["service_name"] if not resource else "",
            )
        _add(subject, row, None, window)
    return subjects
