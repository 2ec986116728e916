"""What the storage and egress page reads: billing's storage rollups, each at the grain a figure
needs. The growth and the egress matrix read DailyStorageTotal (day × data class × usage class ×
transfer ends: a few rows a day) for the whole organisation, DailyStorageSummary (the same per
project) for some projects; the per-project figures read DailyStorageSummary, and
MonthlyStorageSummary for a long range's whole months; the fastest-growing buckets
DailyBucketStorage. A model's storage reads DailyStorageCost, which keeps the model.

Stored bytes of a day are its byte-seconds over 86,400 (the average held that day); a period's
"now" is its last day, the bill's last whole UTC day (`period_end`). Every figure is one grouped
query over a rollup (the listed buckets' project names one more), in the organisation's currency,
limited to the projects the user sees (staff also see what no project claims).
"""

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from functools import cached_property

from django.core.cache import cache
from django.db.models import DecimalField, F, Max, Q, QuerySet, Sum, Value

from apps.billing.models import (
    DailyBucketStorage,
    DailyStorageCost,
    DailyStorageSummary,
    DailyStorageTotal,
    MonthlyStorageSummary,
)
from apps.billing.storage import ByteSum, DataClass, UsageClass
from apps.projects.models import Project
from costsite.months import rollup_plan

from .figures import cached, cached_rows
from .rollup import data_as_of

DAY_SECONDS = Decimal(86400)
FORECAST_DAYS = 90
FORECAST_CACHE_SECONDS = 24 * 3600
BYTES = DecimalField(max_digits=38, decimal_places=6)
STORAGE = Q(usage_class__in=UsageClass.STORAGE)
TRANSFER = Q(usage_class__in=UsageClass.TRANSFER)


@dataclass(frozen=True)
class StorageScope:
    """Whose storage: one project, or every project the user sees (and, for staff, nobody's)."""

    currency: str
    # The ids of the projects the user sees, sorted (None: everything, attributed or not): a list
    # rather than a subquery naming the user, so that a team shares its cached figures and the
    # planner reads each project's days from the (project, day) indexes.
    project_ids: tuple[int, ...] | None = None
    project: Project | None = None

    @property
    def everything(self) -> bool:
        return self.project is None and self.project_ids is None

    def totals(self) -> QuerySet[DailyStorageTotal] | QuerySet[DailyStorageSummary]:
        """At the page's grain, without the project (its rows have no project column)."""
        if self.everything:
            return DailyStorageTotal.objects.filter(billing_currency=self.currency)
        return self.by_project()

    def by_project(self) -> QuerySet[DailyStorageSummary]:
        """At the page's grain, per project."""
        return self._scoped(DailyStorageSummary.objects.all())

    def by_project_monthly(self) -> QuerySet[MonthlyStorageSummary]:
        """At the page's grain, per project and month."""
        return self._scoped(MonthlyStorageSummary.objects.all())

    def buckets(self) -> QuerySet[DailyBucketStorage]:
        """Per bucket or volume."""
        return self._scoped(DailyBucketStorage.objects.all())

    def _scoped(self, rows: QuerySet) -> QuerySet:
        rows = rows.filter(billing_currency=self.currency)
        if self.project is not None:
            return rows.filter(project=self.project)
        if self.project_ids is not None:
            return rows.filter(project_id__in=self.project_ids)
        return rows


def storage_scope(
    *, user, currency: str, project: Project | None, visible: list[Project] | None = None
) -> StorageScope:
    """`visible`: the projects the user sees, when the caller has them already (the page lists
    them in its menu); else they are read here."""
    if project is not None:
        return StorageScope(currency=currency, project=project)
    if user.is_staff:
        return StorageScope(currency=currency)
    if visible is None:
        visible = list(Project.objects.visible_to(user))
    return StorageScope(currency=currency, project_ids=tuple(sorted(p.pk for p in visible)))


@dataclass
class Growth:
    """Daily stored bytes and storage spend per data class, and the totals per day."""

    days: list[date]
    bytes_by_class: dict[str, list[Decimal]]
    spend_by_class: dict[str, list[Decimal]]

    @cached_property
    def total_bytes(self) -> list[Decimal]:
        return _day_totals(self.bytes_by_class, len(self.days))

    @cached_property
    def total_spend(self) -> list[Decimal]:
        return _day_totals(self.spend_by_class, len(self.days))

    @property
    def is_empty(self) -> bool:
        return not any(self.total_bytes) and not any(self.total_spend)


def period_end(today: date) -> date:
    """Where the page's days end (excluded): the day of the bill's "data as of", so that its last
    day is the bill's last whole UTC day (a day's bytes are its byte-seconds over 86,400: a day the
    bill has not reached, or only begun, would read as storage deleted), never after today."""
    as_of = data_as_of()
    if as_of is None:
        return today
    return min(today, as_of.date())


def _day_totals(by_class: dict[str, list[Decimal]], days: int) -> list[Decimal]:
    totals = [Decimal(0)] * days
    for values in by_class.values():
        totals = [a + b for a, b in zip(totals, values, strict=True)]
    return totals


def growth_rows(*, scope: StorageScope, start: date, end: date) -> QuerySet:
    """The stored bytes and storage spend per day and data class in [start, end)."""
    return (
        scope.totals()
        .filter(STORAGE, day__gte=start, day__lt=end)
        .values("day", "data_class")
        .annotate(stored=ByteSum("stored_byte_seconds"), spend=Sum("effective_cost"))
        .order_by()
    )


def growth_from_rows(rows, *, start: date, end: date) -> Growth:
    """Days in [start, end), every day present (a day with no line stores nothing)."""
    days = [start + timedelta(days=i) for i in range((end - start).days)]
    position = {d: i for i, d in enumerate(days)}
    by_bytes: dict[str, list[Decimal]] = {}
    by_spend: dict[str, list[Decimal]] = {}
    for row in rows:
        name = row["data_class"]
        if name not in by_bytes:
            by_bytes[name] = [Decimal(0)] * len(days)
            by_spend[name] = [Decimal(0)] * len(days)
        by_bytes[name][position[row["day"]]] += row["stored"] / DAY_SECONDS
        by_spend[name][position[row["day"]]] += row["spend"]
    order = [c for c in DataClass.ALL if c in by_bytes]
    return Growth(
        days=days,
        bytes_by_class={c: by_bytes[c] for c in order},
        spend_by_class={c: by_spend[c] for c in order},
    )


@dataclass
class Forecast:
    """A series' next FORECAST_DAYS days: the expected values and a 95% band."""

    days: list[date]
    mean: list[float]
    lower: list[float]
    upper: list[float]


def forecast(days: list[date], values: list[Decimal], *, horizon: int = FORECAST_DAYS):
    """Exponential smoothing with an additive trend (statsmodels' ETS model), its prediction
    interval from the fitted state space model. None for fewer than 14 days of history or a
    series that never moves (there is nothing to extrapolate).

    A fit costs about 0.2 s of CPU: it is a pure function of the series, so it is kept in the
    cache under the series' digest (a new bill changes the series, hence the key)."""
    if not days:
        return None
    digest = hashlib.sha256(
        repr((days[0], days[-1], horizon, [str(v) for v in values])).encode()
    ).hexdigest()
    key = f"storage-forecast:{digest}"
    found = cache.get(key)
    if found is not None:
        return found or None
    result = _fit(days, values, horizon=horizon)
    cache.set(key, result or False, timeout=FORECAST_CACHE_SECONDS)
    return result


def _fit(days: list[date], values: list[Decimal], *, horizon: int):
    history = [float(v) for v in values]
    while history and history[0] == 0:  # before the first byte: not part of the trend
        history.pop(0)
    if len(history) < 14 or max(history) == min(history):
        return None
    import warnings

    import numpy as np
    import pandas as pd
    from statsmodels.tools.sm_exceptions import ConvergenceWarning
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    scale = max(abs(v) for v in history) or 1.0
    series = pd.Series(np.array(history) / scale)  # well-conditioned numbers for the optimiser
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        model = ETSModel(series, error="add", trend="add", damped_trend=False)
        fitted = model.fit(disp=False, maxiter=200)
        prediction = fitted.get_prediction(start=len(series), end=len(series) + horizon - 1)
        frame = prediction.summary_frame(alpha=0.05)  # mean, pi_lower, pi_upper
    last = days[-1]
    return Forecast(
        days=[last + timedelta(days=i + 1) for i in range(horizon)],
        mean=[max(0.0, v * scale) for v in frame["mean"]],
        lower=[max(0.0, v * scale) for v in frame["pi_lower"]],
        upper=[max(0.0, v * scale) for v in frame["pi_upper"]],
    )


@dataclass
class BudgetCrossing:
    budget: Decimal
    month: date | None  # the first month over budget, if storage keeps growing so
    already_over: bool
    other_spend: Decimal  # the project's other spend in the last 30 days, held constant


def budget_crossing(
    *, project: Project, spend_forecast: Forecast | None, recent_storage: Decimal, end: date
) -> BudgetCrossing | None:
    """The month the project's monthly budget is crossed if storage keeps growing as forecast
    and its other spend stays at the last 30 days' level."""
    if project.monthly_budget is None:
        return None
    from apps.billing.models import DailyCost

    total = DailyCost.objects.filter(
        project=project, day__gte=end - timedelta(days=30), day__lt=end
    ).aggregate(total=Sum("effective_cost"))["total"] or Decimal(0)
    other = total - recent_storage
    budget = project.monthly_budget
    if total > budget:
        return BudgetCrossing(budget, None, True, other)
    if spend_forecast is None:
        return BudgetCrossing(budget, None, False, other)
    by_month: dict[date, list[float]] = defaultdict(list)
    for day, value in zip(spend_forecast.days, spend_forecast.mean, strict=True):
        by_month[day.replace(day=1)].append(value)
    for month, values in sorted(by_month.items()):
        monthly_storage = Decimal(str(sum(values) / len(values) * 30))
        if other + monthly_storage > budget:
            return BudgetCrossing(budget, month, False, other)
    return BudgetCrossing(budget, None, False, other)


@dataclass
class Bucket:
    resource_id: str
    project: str
    data_class: str
    bytes_now: Decimal
    bytes_before: Decimal
    spend: Decimal

    @property
    def data_class_label(self) -> str:
        return DataClass.LABELS.get(self.data_class, self.data_class)

    @property
    def growth_per_week(self) -> Decimal:
        return (self.bytes_now - self.bytes_before) / 4


def fastest_buckets(*, scope: StorageScope, end: date, limit: int = 10) -> list[Bucket]:
    """Buckets and volumes by bytes added per week over the last four weeks (last week's average
    against the week four weeks before), summed per bucket and ranked in the database from those
    two weeks' rows alone. A bucket of several data classes or projects shows the last of them
    (the project by id: the few listed are named afterwards, not every row joined to its project).
    """
    now = end - timedelta(days=7)
    before = (end - timedelta(days=35), end - timedelta(days=28))
    week = DAY_SECONDS * 7
    rows = (
        scope.buckets()
        .filter(Q(day__gte=before[0], day__lt=before[1]) | Q(day__gte=now, day__lt=end))
        .values("resource_id")
        .annotate(
            now=ByteSum("stored_byte_seconds", filter=Q(day__gte=now), default=0),
            before=ByteSum("stored_byte_seconds", filter=Q(day__lt=before[1]), default=0),
            added=F("now") - F("before"),
            spend=Sum("effective_cost", filter=Q(day__gte=now), default=0),
            project_id=Max("project"),
            data_class=Max("data_class"),
        )
        .filter(added__gt=0)
        .order_by("-added", "resource_id")[:limit]
    )

    def fastest() -> list[Bucket]:
        found = list(rows)
        names = dict(
            Project.objects.filter(pk__in={row["project_id"] for row in found}).values_list(
                "pk", "name"
            )
        )
        return [
            Bucket(
                resource_id=row["resource_id"],
                project=names.get(row["project_id"], ""),
                data_class=row["data_class"],
                bytes_now=row["now"] / week,
                bytes_before=row["before"] / week,
                spend=row["spend"],
            )
            for row in found
        ]

    return cached(f"fastest-buckets:{limit}", rows, fastest)


@dataclass
class EgressMatrix:
    sources: list[str]
    destinations: list[str]
    cells: dict[tuple[str, str], dict] = field(default_factory=dict)
    total_bytes: Decimal = Decimal(0)
    total_spend: Decimal = Decimal(0)

    @property
    def rows(self) -> list[dict]:
        """One row per source, one cell per destination, shaded by its share of the largest."""
        largest = max((c["spend"] for c in self.cells.values()), default=Decimal(0))
        out = []
        for source in self.sources:
            cells = []
            for destination in self.destinations:
                cell = self.cells.get((source, destination))
                share = (cell["spend"] / largest) if cell and largest else Decimal(0)
                # Shaded up to 0.6 opacity, so that the text stays readable.
                alpha = (share * Decimal("0.6")).quantize(Decimal("0.01"))
                cells.append({"destination": destination, "cell": cell, "alpha": f"{alpha}"})
            out.append({"source": source, "cells": cells})
        return out


def egress_matrix(*, scope: StorageScope, start: date, end: date) -> EgressMatrix:
    """Bytes moved and their spend per (source region, destination), all transfer kinds."""
    rows = (
        scope.totals()
        .filter(TRANSFER, day__gte=start, day__lt=end)
        .values("transfer_from", "transfer_to")
        .annotate(moved=ByteSum("moved_bytes"), spend=Sum("effective_cost"))
        .order_by()
    )
    matrix = EgressMatrix(sources=[], destinations=[])
    by_source: dict[str, Decimal] = defaultdict(Decimal)
    by_destination: dict[str, Decimal] = defaultdict(Decimal)
    for row in cached_rows(rows):
        key = (row["transfer_from"] or "unknown", row["transfer_to"] or "unknown")
        cell = matrix.cells.setdefault(key, {"bytes": Decimal(0), "spend": Decimal(0)})
        cell["bytes"] += row["moved"]
        cell["spend"] += row["spend"]
        by_source[key[0]] += row["spend"]
        by_destination[key[1]] += row["spend"]
        matrix.total_bytes += row["moved"]
        matrix.total_spend += row["spend"]
    matrix.sources = sorted(by_source, key=lambda k: (-by_source[k], k))
    matrix.destinations = sorted(by_destination, key=lambda k: (-by_destination[k], k))
    return matrix


@dataclass
class ProjectStorage:
    project: Project | None
    bytes_now: Decimal
    storage_spend: Decimal
    moved_bytes: Decimal
    egress_spend: Decimal


def per_project(
    *, scope: StorageScope, start: date, end: date, known: list[Project] | None = None
) -> list[ProjectStorage]:
    """Per project: bytes held on the last day, storage and transfer spend in the period.
    `known`: projects the caller has read already (the page's menu); others are read here."""
    last = end - timedelta(days=1)
    sums: dict[int | None, dict] = defaultdict(
        lambda: {
            "bytes": Decimal(0),
            "storage": Decimal(0),
            "moved": Decimal(0),
            "egress": Decimal(0),
        }
    )
    # Per project and usage class: a few hundred rows, whatever the period's length. Whole months
    # are read from the monthly rows; the ragged ends and the last day (the bytes it holds) from
    # the daily ones, in one query.
    plan = rollup_plan(start, last)
    days = Q(day__gte=last, day__lt=end)
    for day_range in plan.day_ranges:
        days |= Q(day__gte=day_range[0], day__lt=day_range[1])
    rows = (
        scope.by_project()
        .filter(days)
        .exclude(usage_class=UsageClass.NETWORK_OTHER)
        .values("project_id", "usage_class")
        .annotate(
            stored=ByteSum("stored_byte_seconds", filter=Q(day=last), default=0),
            moved=ByteSum("moved_bytes"),
            spend=Sum("effective_cost"),
        )
        .order_by()
    )
    if plan.months:
        months = (
            scope.by_project_monthly()
            .filter(month__in=plan.months)
            .exclude(usage_class=UsageClass.NETWORK_OTHER)
            .values("project_id", "usage_class")
            .annotate(
                stored=Value(Decimal(0), output_field=BYTES),
                moved=ByteSum("moved_bytes"),
                spend=Sum("effective_cost"),
            )
            .order_by()
        )
        rows = rows.union(months, all=True)
    for row in cached_rows(rows):
        entry = sums[row["project_id"]]
        if row["usage_class"] in UsageClass.STORAGE:
            entry["storage"] += row["spend"]
            entry["bytes"] += row["stored"] / DAY_SECONDS
        else:
            entry["moved"] += row["moved"]
            entry["egress"] += row["spend"]
    projects = {p.pk: p for p in known or ()}
    missing = [pk for pk in sums if pk is not None and pk not in projects]
    if missing:
        projects.update(Project.objects.in_bulk(missing))
    out = [
        ProjectStorage(
            projects.get(pk) if pk else None, v["bytes"], v["storage"], v["moved"], v["egress"]
        )
        for pk, v in sums.items()
    ]
    out.sort(
        key=lambda p: (-(p.storage_spend + p.egress_spend), p.project.name if p.project else "")
    )
    return out


def egress_by_project_weekly(*, scope: StorageScope, start: date, end: date) -> dict:
    """Transfer spend per week (weeks starting on `start`) and project name."""
    weeks = [start + timedelta(days=7 * i) for i in range(((end - start).days + 6) // 7)]
    series: dict[str, list[Decimal]] = {}
    rows = (
        scope.by_project()
        .filter(TRANSFER, day__gte=start, day__lt=end)
        .values("project__name", "day")
        .annotate(spend=Sum("effective_cost"))
        .order_by()
    )
    for row in cached_rows(rows):
        name = row["project__name"] or "Unattributed"
        series.setdefault(name, [Decimal(0)] * len(weeks))
        series[name][(row["day"] - start).days // 7] += row["spend"]
    return {"weeks": weeks, "series": dict(sorted(series.items()))}


def model_storage(*, model, currency: str, start: date, end: date) -> dict:
    """A model's storage and transfer: bytes held on the last day, spend per data class."""
    rows = DailyStorageCost.objects.filter(
        model=model, billing_currency=currency, day__gte=start, day__lt=end
    )
    last = end - timedelta(days=1)
    by_class: dict[str, Decimal] = defaultdict(Decimal)
    held = Decimal(0)
    for row in (
        rows.values("data_class", "usage_class", "day")
        .annotate(stored=ByteSum("stored_byte_seconds"), spend=Sum("effective_cost"))
        .order_by()
    ):
        by_class[row["data_class"] if row["usage_class"] in UsageClass.STORAGE else "transfer"] += (
            row["spend"]
        )
        if row["day"] == last and row["usage_class"] in UsageClass.STORAGE:
            held += row["stored"] / DAY_SECONDS
    return {
        "bytes_now": held,
        "spend": sum(by_class.values(), Decimal(0)),
        "by_class": [
            (DataClass.LABELS.get(name, "Transfer"), amount)
            for name, amount in sorted(by_class.items(), key=lambda kv: -kv[1])
        ],
    }
