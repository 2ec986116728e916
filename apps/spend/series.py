"""Spend over time: the series of a chart, the month's summary and forecast, budgets."""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.db.models import (
    Min,
    Q,
    QuerySet,
    Sum,
    Value,
)

from apps.billing.models import (
    CostKind,
    MonthlyCost,
)
from apps.projects.models import Project, Workload
from costsite.months import month_start, next_month_start

from .figures import cached, cached_rows
from .filters import Period, days_in_month, previous_month_start
from .rollup import (
    CENT,
    ZERO,
    SpendScope,
    daily_shaped,
    last_day_with_data,
    rollup_rows,
)

# -- Spend over time -----------------------------------------------------------------------------

WORKLOAD_ORDER = list(Workload.values)
COST_KIND_ORDER = list(CostKind.values)
# A model's cost of ownership: its runs and deployments by workload, their storage apart.
COMPONENT_ORDER = [w for w in WORKLOAD_ORDER if w != "unattributed"]


@dataclass(frozen=True)
class SpendSeries:
    """Spend per bucket (a day or a month) and series key (a workload, a cost kind...)."""

    by: str
    bucket: str  # "day" or "month"
    buckets: list[date]
    keys: list[str]  # the series with any spend, in display order
    values: dict[str, list[Decimal]]  # key -> amount per bucket
    totals: dict[str, Decimal]
    total: Decimal
    other_currencies: dict[str, Decimal] = field(default_factory=dict)

    @property
    def is_empty(self) -> bool:
        return not self.keys

    @property
    def ranked(self) -> list[tuple[str, str, Decimal]]:
        """(key, label, total), costliest first."""
        labels = {**dict(Workload.choices), **dict(CostKind.choices)}
        items = sorted(self.totals.items(), key=lambda item: (-item[1], item[0]))
        return [(key, labels.get(key, key), amount) for key, amount in items]

    @property
    def unattributed(self) -> Decimal:
        return self.totals.get("unattributed", ZERO)

    @property
    def attributed(self) -> Decimal:
        return self.total - self.unattributed

    @property
    def attributed_share(self) -> Decimal | None:
        return self.attributed / self.total if self.total else None


def _month_buckets(first: date, last: date) -> list[date]:
    buckets, month = [], month_start(first)
    while month <= last:
        buckets.append(month)
        month = (month + timedelta(days=32)).replace(day=1)
    return buckets


def spend_series(*, scope: SpendScope, period: Period, by: str = "workload") -> SpendSeries:
    """Spend per day (per month past 92 days) by workload, cost kind or, for a model's cost of
    ownership, "component" (the owners' workload, with storage apart)."""
    dimensions = {
        "workload": ("workload",),
        "cost_kind": ("cost_kind",),
        "component": ("workload", "cost_kind"),
    }[by]
    if period.start is None:
        # All time: from the first day with spend, so that the chart's buckets are known.
        everything = daily_shaped(scope.q(), lambda rows: rows)
        first = cached(
            "first-day", everything, lambda: everything.aggregate(first=Min("day"))["first"]
        )
        period = Period(first or period.end, period.end, period.preset)
    rows = rollup_rows(
        scope.q(),
        period,
        lambda rows: (
            rows.values("day", *dimensions, "billing_currency")
            .annotate(amount=Sum("effective_cost"))
            .order_by()
        ),
        monthly=period.bucket() == "month",
    )
    per_day: dict[tuple[date, str], Decimal] = defaultdict(Decimal)
    others: dict[str, Decimal] = defaultdict(Decimal)
    for row in rows:
        if row["billing_currency"] != scope.currency:
            others[row["billing_currency"]] += row["amount"]
            continue
        if by == "component":
            key = "storage" if row["cost_kind"] == CostKind.STORAGE else row["workload"]
        else:
            key = row[by]
        per_day[(row["day"], key)] += row["amount"]
    first_day = min((day for day, _ in per_day), default=None)
    bucket = period.bucket(first_day)
    start = period.start or first_day
    if start is None:
        buckets = []
    elif bucket == "day":
        buckets = [start + timedelta(days=n) for n in range((period.end - start).days)]
    else:
        buckets = _month_buckets(start, period.last_day)
    position = {b: i for i, b in enumerate(buckets)}
    order = {"workload": WORKLOAD_ORDER, "cost_kind": COST_KIND_ORDER}.get(by, COMPONENT_ORDER)
    values: dict[str, list[Decimal]] = {}
    for (day, key), amount in per_day.items():
        slot = day if bucket == "day" else month_start(day)
        values.setdefault(key, [ZERO] * len(buckets))[position[slot]] += amount
    keys = sorted(values, key=lambda k: (order.index(k) if k in order else len(order), k))
    totals = {key: sum(values[key], ZERO) for key in keys}
    return SpendSeries(
        by=by,
        bucket=bucket,
        buckets=buckets,
        keys=keys,
        values={key: values[key] for key in keys},
        totals=totals,
        total=sum(totals.values(), ZERO),
        other_currencies=dict(sorted(others.items())),
    )


# -- This month against the last, and budgets ----------------------------------------------------


# Until this many days of the month are loaded the run rate is one noisy day times 31: the
# forecast is last month's total instead, and the pages say so.
RUN_RATE_MIN_DAYS = 7


def run_rate_forecast(*, month_to_date: Decimal, elapsed_days: int, month_days: int):
    """The month's end at the run rate so far; None before the month has a day of data."""
    if elapsed_days <= 0:
        return None
    return (month_to_date * month_days / elapsed_days).quantize(CENT, ROUND_HALF_UP)


@dataclass(frozen=True)
class MonthSummary:
    month: date
    last_day: date | None  # the last day of this month the bill covers so far
    elapsed_days: int
    month_days: int
    month_to_date: Decimal
    last_month_same_days: Decimal  # last month's first `elapsed_days` days: like for like
    last_month_total: Decimal
    forecast: Decimal | None
    by_project: dict[int, Decimal]
    last_month_by_project: dict[int, Decimal]

    @property
    def forecast_is_last_month(self) -> bool:
        """Fewer than RUN_RATE_MIN_DAYS days loaded: the forecast is last month's total."""
        return self.elapsed_days < RUN_RATE_MIN_DAYS

    @property
    def change(self) -> Decimal | None:
        """Month to date against the same days of last month, as a fraction."""
        if not self.last_month_same_days:
            return None
        return (self.month_to_date - self.last_month_same_days) / self.last_month_same_days

    def project_forecast(self, project_id: int) -> Decimal | None:
        if self.forecast_is_last_month:
            last = self.last_month_by_project.get(project_id)
            return None if last is None else last.quantize(CENT, ROUND_HALF_UP)
        return run_rate_forecast(
            month_to_date=self.by_project.get(project_id, ZERO),
            elapsed_days=self.elapsed_days,
            month_days=self.month_days,
        )


def month_summary(*, scope: SpendScope, today: date, as_of: datetime | None) -> MonthSummary:
    """This month so far against last month, and the run-rate forecast of the month's end.

    The run rate counts the days the bill covers (up to "data as of"), not the calendar's: a bill
    that lags two days must not read as a cheaper month.
    """
    this_month = month_start(today)
    last_month = previous_month_start(today)
    last_day = last_day_with_data(as_of, today=today)
    elapsed = last_day.day if last_day and last_day >= this_month else 0
    same_days_end = last_month + timedelta(days=min(elapsed, days_in_month(last_month)))
    # Whole months are read from the monthly rollup, days only where a month is cut: last month
    # is its monthly rows plus the shorter of its two sides of `same_days_end` (the other side is
    # the difference), this month its monthly rows once today is its last day. (Two months of
    # daily rows were a quarter of the overview's SQL time on the benchmark.)
    q = scope.q() & Q(billing_currency=scope.currency)
    monthly = MonthlyCost.objects.filter(q)

    def part(rows: QuerySet, name: str) -> QuerySet:
        return (
            rows.annotate(part=Value(name))
            .values("part", "project_id")
            .annotate(amount=Sum("effective_cost"))
            .order_by()
        )

    tomorrow = today + timedelta(days=1)

    def days(start: date, end: date, name: str) -> QuerySet:
        return daily_shaped(q & Q(day__gte=start, day__lt=end), lambda rows: part(rows, name))

    parts = [
        part(monthly.filter(month=this_month), "this")
        if tomorrow >= next_month_start(this_month)
        else days(this_month, tomorrow, "this"),
        part(monthly.filter(month=last_month), "last"),
    ]
    same_days, rest_days = (same_days_end - last_month).days, (this_month - same_days_end).days
    cut = same_days > 0 and rest_days > 0
    if cut and same_days <= rest_days:
        parts.append(days(last_month, same_days_end, "same"))
    elif cut:
        parts.append(days(same_days_end, this_month, "rest"))
    sums: dict[str, Decimal] = defaultdict(Decimal)
    by_project: dict[int, Decimal] = defaultdict(Decimal)
    last_by_project: dict[int, Decimal] = defaultdict(Decimal)
    for row in cached_rows(parts[0].union(*parts[1:], all=True)):
        sums[row["part"]] += row["amount"]
        if row["part"] == "this" and row["project_id"] is not None:
            by_project[row["project_id"]] += row["amount"]
        if row["part"] == "last" and row["project_id"] is not None:
            last_by_project[row["project_id"]] += row["amount"]
    last_total = sums["last"]
    if cut:
        same = sums["same"] if same_days <= rest_days else last_total - sums["rest"]
    else:  # no day billed this month yet, or the days billed cover all of last month
        same = last_total if same_days else ZERO
    month_days = days_in_month(today)
    return MonthSummary(
        month=this_month,
        last_day=last_day if elapsed else None,
        elapsed_days=elapsed,
        month_days=month_days,
        month_to_date=sums["this"],
        last_month_same_days=same,
        last_month_total=last_total,
        forecast=(
            (last_total.quantize(CENT, ROUND_HALF_UP) if "last" in sums else None)
            if elapsed < RUN_RATE_MIN_DAYS
            else run_rate_forecast(
                month_to_date=sums["this"], elapsed_days=elapsed, month_days=month_days
            )
        ),
        by_project=dict(by_project),
        last_month_by_project=dict(last_by_project),
    )


@dataclass(frozen=True)
class BudgetLine:
    project: Project
    budget: Decimal
    month_to_date: Decimal
    forecast: Decimal | None

    @property
    def status(self) -> str:
        if self.month_to_date > self.budget:
            return "over"
        if self.forecast is not None and self.forecast > self.budget:
            return "heading over"
        return "on track"

    @property
    def forecast_share(self) -> Decimal | None:
        """The forecast as a fraction of the budget."""
        if self.forecast is None or not self.budget:
            return None
        return self.forecast / self.budget


def budget_lines(*, projects: QuerySet[Project], summary: MonthSummary) -> list[BudgetLine]:
    """Projects with a monthly budget, the ones furthest over (by forecast) first."""
    lines = [
        BudgetLine(
            project=project,
            budget=project.monthly_budget,
            month_to_date=summary.by_project.get(project.pk, ZERO),
            forecast=summary.project_forecast(project.pk),
        )
        for project in projects.filter(monthly_budget__isnull=False).select_related("team")
    ]
    lines.sort(
        key=lambda line: (
            -(line.forecast_share or (line.month_to_date / line.budget if line.budget else 0)),
            line.project.name,
        )
    )
    return lines


# -- Who drives the spend: Pareto and movers -----------------------------------------------------
