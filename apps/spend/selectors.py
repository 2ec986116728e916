"""Reads of spend (billing writes what they read): import runs, deliveries, spend totals, and
every figure of the attribution pages (the overview, a project's, a model's, an experiment's and a
deployment's spend, unattributed spend).

Pages read the rollups only: DailyCost (MonthlyCost for the whole months of a long range),
DailyResourceCost, the hourly GPU rollup and the hourly traffic. Each selector is one grouped
query (two at most), and whatever a page lists is cut to a fixed length in the database, so a page
costs the same number of queries whatever the size of the bill. Spend is FOCUS EffectiveCost in
the organisation's currency; amounts in other currencies are totalled apart and never added in.
"""

import functools
import operator
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.db import connection
from django.db.models import (
    Case,
    Count,
    DecimalField,
    F,
    Max,
    Min,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from apps.accounts.models import Team
from apps.accounts.selectors import teams_led_by
from apps.billing.models import (
    CostKind,
    DailyCost,
    DailyResourceCost,
    Delivery,
    ImportRun,
    MonthlyCost,
)
from apps.deployments.models import Deployment, DeploymentResource, Model, TrafficHour
from apps.experiments.models import Experiment, ExperimentResource
from apps.gpu.models import Gpu, GpuHour, HostMapping
from apps.projects.models import Project, Workload
from apps.projects.selectors import projects_visible_to
from costsite.dates import as_of_shown

from .filters import Period, days_in_month, month_start, previous_month_start

ZERO = Decimal(0)
CENT = Decimal("0.01")
MONEY = DecimalField(max_digits=38, decimal_places=15)
ZERO_MONEY = Value(ZERO, output_field=MONEY)
PARETO_SHARE = Decimal("0.8")
# FOCUS PricingCategory values as people say them.
PRICING_LABELS = {
    "Standard": "On-demand",
    "Dynamic": "Spot",
    "Committed": "Committed",
    "Other": "Other",
    "": "None (purchases, fees, credits)",
}


def import_runs_recent(*, limit: int = 20) -> QuerySet[ImportRun]:
    return ImportRun.objects.select_related("created_by")[:limit]


def deliveries_current() -> QuerySet[Delivery]:
    return Delivery.objects.filter(status=Delivery.Status.CURRENT)


@dataclass(frozen=True)
class SpendTotal:
    """Spend (EffectiveCost) and billed cost of one group, in one currency."""

    key: tuple
    currency: str
    effective_cost: Decimal
    billed_cost: Decimal


def spend_totals(
    *, by: tuple[str, ...], start: date | None = None, end: date | None = None
) -> list[SpendTotal]:
    """Totals from the daily rollup grouped by rollup fields (e.g. ("project_id",),
    ("experiment_id", "deployment_id"), ("workload",)); days in [start, end). Each currency
    stays apart."""
    rows = DailyCost.objects.all()
    if start is not None:
        rows = rows.filter(day__gte=start)
    if end is not None:
        rows = rows.filter(day__lt=end)
    grouped = (
        rows.values(*by, "billing_currency")
        .annotate(effective=Sum("effective_cost"), billed=Sum("billed_cost"))
        .order_by(*by, "billing_currency")
    )
    return [
        SpendTotal(
            key=tuple(row[name] for name in by),
            currency=row["billing_currency"],
            effective_cost=row["effective"],
            billed_cost=row["billed"],
        )
        for row in grouped
    ]


# -- Scope: which rollup rows a page adds up ---------------------------------------------------


@dataclass(frozen=True)
class SpendScope:
    """The rollup rows a page adds up: those the user may see, narrowed by the page's filters.

    `projects` None means every project (staff, or a page that checked access to its one object
    already); `unattributed` says whether rows without a project count (staff and team leads see
    unattributed spend; a team or project filter leaves it out, as it belongs to neither).
    DailyCost and DailyResourceCost share the field names used here, so one Q serves both.
    """

    currency: str
    projects: QuerySet[Project] | None = None
    unattributed: bool = False
    team: Team | None = None
    project: Project | None = None
    experiment_ids: tuple[int, ...] | None = None
    deployment_ids: tuple[int, ...] | None = None
    # The owners' projects: lets the planner use the (project, day) index for a model's owners.
    owner_project_ids: tuple[int, ...] | None = None
    provider: str = ""
    workload: str = ""

    def q(self) -> Q:
        q = Q()
        if self.projects is not None:
            seen = Q(project_id__in=self.projects.values("pk"))
            q &= (seen | Q(project__isnull=True)) if self.unattributed else seen
        elif not self.unattributed:
            q &= Q(project__isnull=False)
        if self.team is not None:
            q &= Q(project__team_id=self.team.pk)
        if self.project is not None:
            q &= Q(project_id=self.project.pk)
        if self.experiment_ids is not None or self.deployment_ids is not None:
            owners = Q(pk__in=[])
            if self.experiment_ids:
                owners |= Q(experiment_id__in=self.experiment_ids)
            if self.deployment_ids:
                owners |= Q(deployment_id__in=self.deployment_ids)
            q &= owners
            if self.owner_project_ids is not None:
                q &= Q(project_id__in=self.owner_project_ids)
        if self.provider:
            q &= Q(provider_name=self.provider)
        if self.workload:
            q &= Q(workload=self.workload)
        return q

    def daily(self, period: Period | None = None) -> QuerySet[DailyCost]:
        rows = DailyCost.objects.filter(self.q())
        return _in_period(rows, period)

    def resources(self, period: Period | None = None) -> QuerySet[DailyResourceCost]:
        rows = DailyResourceCost.objects.filter(self.q())
        return _in_period(rows, period)


def _next_month(month: date) -> date:
    return (month + timedelta(days=32)).replace(day=1)


@dataclass(frozen=True)
class RollupPlan:
    """Which part of a range a selector reads from the monthly rollup and which from the daily.

    Whole calendar months inside the range are read as months, unless a cut (a day the selector
    compares on both sides of, such as the start of the period against the one before) falls
    inside one; the ragged ends are read as days. `months_before` stands for "every month before
    this one" (a range without a start).
    """

    months: tuple[date, ...] = ()
    months_before: date | None = None
    day_ranges: tuple[tuple[date | None, date], ...] = ()


def rollup_plan(start: date | None, end: date, cuts: tuple[date, ...] = ()) -> RollupPlan:
    months: list[date] = []
    ranges: list[tuple[date | None, date]] = []
    months_before = None
    day = start
    if start is None:
        cut_months = [month_start(cut) for cut in cuts if cut < end]
        months_before = min([month_start(end), *cut_months])
        day = months_before
    while day < end:
        month = month_start(day)
        following = _next_month(month)
        if day == month and following <= end and not any(month < c < following for c in cuts):
            months.append(month)
            day = following
            continue
        stop = min(following, end)
        if ranges and ranges[-1][1] == day:
            ranges[-1] = (ranges[-1][0], stop)
        else:
            ranges.append((day, stop))
        day = stop
    return RollupPlan(tuple(months), months_before, tuple(ranges))


def rollup_rows(
    q: Q,
    period: Period,
    shape: Callable[[QuerySet], QuerySet],
    *,
    cuts: tuple[date, ...] = (),
    monthly: bool = True,
) -> list[dict]:
    """The rows `shape` makes of the spend of `q` in the period, whole months read from the
    monthly rollup (about a thirtieth of the daily rows) and the rest from the daily, in one
    query (UNION ALL). `shape` gets a queryset with a `day` (a month's first day for monthly rows)
    and must return values() with aggregates; callers add up the parts (a key may come twice).
    Without `monthly`, or for a short range, it is the daily rollup alone."""
    query = rollup_query(q, period, shape, cuts=cuts, monthly=monthly)
    return [] if query is None else list(query)


def rollup_query(
    q: Q,
    period: Period,
    shape: Callable[[QuerySet], QuerySet],
    *,
    cuts: tuple[date, ...] = (),
    monthly: bool = True,
) -> QuerySet | None:
    """rollup_rows' query, not yet run (None: nothing to read)."""
    if not monthly or (period.start is not None and period.days <= 31):
        return shape(_in_period(DailyCost.objects.filter(q), period))
    plan = rollup_plan(period.start, period.end, cuts)
    parts = []
    if plan.day_ranges:
        days = [Q(day__gte=a, day__lt=b) for a, b in plan.day_ranges]
        parts.append(shape(DailyCost.objects.filter(q).filter(_any(days))))
    if plan.months or plan.months_before:
        months = MonthlyCost.objects.filter(q)
        wanted = [Q(month__in=plan.months)] if plan.months else []
        if plan.months_before:
            wanted.append(Q(month__lt=plan.months_before))
        parts.append(shape(months.filter(_any(wanted)).annotate(day=F("month"))))
    if not parts:
        return None
    return parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]


def _with_owner_models(query: QuerySet) -> list[dict]:
    """The rows of a grouped values() query that has `experiment_id` and `deployment_id`, each
    with the model its run produced (`experiment__model_id`) and its deployment serves
    (`deployment__model_id`), joined after the grouping: to the few hundred groups rather than
    to every rollup row (joining before was a third of the query's time on the benchmark).
    Amounts come back as the ORM would return them (its converters, e.g. SQLite's decimals)."""
    compiler = query.query.get_compiler(using=query.db)
    sql, params = compiler.as_sql()
    converters = compiler.get_converters([expression for expression, *_ in compiler.select])
    inner = query.query
    names = [*inner.extra_select, *inner.values_select, *inner.annotation_select]
    quote = connection.ops.quote_name
    sql = (
        f"SELECT grouped.*, runs.model_id, deployments.model_id FROM ({sql}) grouped "
        f"LEFT JOIN {quote(Experiment._meta.db_table)} runs "
        "ON runs.id = grouped.experiment_id "
        f"LEFT JOIN {quote(Deployment._meta.db_table)} deployments "
        "ON deployments.id = grouped.deployment_id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if converters:
        rows = compiler.apply_converters(rows, converters)
    keys = [*names, "experiment__model_id", "deployment__model_id"]
    return [dict(zip(keys, row, strict=True)) for row in rows]


def _any(conditions: list[Q]) -> Q:
    return functools.reduce(operator.or_, conditions)


def _in_period(rows: QuerySet, period: Period | None) -> QuerySet:
    if period is None:
        return rows
    if period.start is not None:
        rows = rows.filter(day__gte=period.start)
    return rows.filter(day__lt=period.end)


def sees_unattributed(*, user) -> bool:
    """Unattributed spend is for staff and team leads (DESIGN.md, Roles)."""
    return user.is_staff or teams_led_by(user=user).exists()


def overview_scope(
    *,
    user,
    currency: str,
    team: Team | None = None,
    project: Project | None = None,
    provider: str = "",
    workload: str = "",
) -> SpendScope:
    """The overview's rows: staff every row; a lead the team's projects and unattributed spend;
    a member the team's projects."""
    return SpendScope(
        currency=currency,
        projects=None if user.is_staff else projects_visible_to(user=user),
        unattributed=team is None and project is None and sees_unattributed(user=user),
        team=team,
        project=project,
        provider=provider,
        workload=workload,
    )


def project_scope(
    *, project: Project, currency: str, provider: str = "", workload: str = ""
) -> SpendScope:
    return SpendScope(currency=currency, project=project, provider=provider, workload=workload)


def experiment_scope(*, experiment: Experiment, currency: str, provider: str = "") -> SpendScope:
    return SpendScope(
        currency=currency,
        experiment_ids=(experiment.pk,),
        owner_project_ids=(experiment.project_id,),
        provider=provider,
    )


def deployment_scope(*, deployment: Deployment, currency: str, provider: str = "") -> SpendScope:
    return SpendScope(
        currency=currency,
        deployment_ids=(deployment.pk,),
        owner_project_ids=(deployment.project_id,),
        provider=provider,
    )


def model_scope(*, model: Model, user, currency: str, provider: str = "") -> SpendScope:
    """The runs that produced the model and the deployments serving it, among those the user may
    see (a run of another team's project may have produced it: its cost is not ours to show)."""
    visible = None if user.is_staff else projects_visible_to(user=user).values("pk")
    experiments = Experiment.objects.filter(model=model)
    deployments = Deployment.objects.filter(model=model)
    if visible is not None:
        experiments = experiments.filter(project_id__in=visible)
        deployments = deployments.filter(project_id__in=visible)
    owners = list(
        experiments.annotate(owner_kind=Value("experiment"))
        .values_list("owner_kind", "pk", "project_id")
        .order_by()  # SQLite takes no ORDER BY inside a UNION
        .union(
            deployments.annotate(owner_kind=Value("deployment"))
            .values_list("owner_kind", "pk", "project_id")
            .order_by()
        )
    )
    return SpendScope(
        currency=currency,
        experiment_ids=tuple(sorted(pk for kind, pk, _ in owners if kind == "experiment")),
        deployment_ids=tuple(sorted(pk for kind, pk, _ in owners if kind == "deployment")),
        owner_project_ids=tuple(sorted({project_id for *_, project_id in owners})),
        provider=provider,
    )


# -- When the data is from -----------------------------------------------------------------------


def data_as_of() -> datetime | None:
    """The end of the newest charge period loaded: the bill is complete up to this moment."""
    # A charge stored in the future (or at the end of time) must not read as the bill's date.
    newest = deliveries_current().aggregate(newest=Max("max_charge_period_end"))["newest"]
    return as_of_shown(newest)


def last_day_with_data(as_of: datetime | None, *, today: date) -> date | None:
    """The last UTC day the bill covers (a period ending at midnight covers the day before)."""
    if as_of is None:
        return None
    return min((as_of.astimezone(UTC) - timedelta(microseconds=1)).date(), today)


def providers_billed() -> list[str]:
    """The providers of the bills loaded, for the provider filter."""
    return list(
        deliveries_current()
        .exclude(provider_name="")
        .order_by("provider_name")
        .values_list("provider_name", flat=True)
        .distinct()
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
        first = scope.daily().aggregate(first=Min("day"))["first"]
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

    @property
    def change(self) -> Decimal | None:
        """Month to date against the same days of last month, as a fraction."""
        if not self.last_month_same_days:
            return None
        return (self.month_to_date - self.last_month_same_days) / self.last_month_same_days

    def project_forecast(self, project_id: int) -> Decimal | None:
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
    daily, monthly = DailyCost.objects.filter(q), MonthlyCost.objects.filter(q)

    def part(rows: QuerySet, name: str) -> QuerySet:
        return (
            rows.annotate(part=Value(name))
            .values("part", "project_id")
            .annotate(amount=Sum("effective_cost"))
            .order_by()
        )

    tomorrow = today + timedelta(days=1)
    parts = [
        part(monthly.filter(month=this_month), "this")
        if tomorrow >= _next_month(this_month)
        else part(daily.filter(day__gte=this_month, day__lt=tomorrow), "this"),
        part(monthly.filter(month=last_month), "last"),
    ]
    same_days, rest_days = (same_days_end - last_month).days, (this_month - same_days_end).days
    cut = same_days > 0 and rest_days > 0
    if cut and same_days <= rest_days:
        parts.append(part(daily.filter(day__gte=last_month, day__lt=same_days_end), "same"))
    elif cut:
        parts.append(part(daily.filter(day__gte=same_days_end, day__lt=this_month), "rest"))
    sums: dict[str, Decimal] = defaultdict(Decimal)
    by_project: dict[int, Decimal] = defaultdict(Decimal)
    for row in parts[0].union(*parts[1:], all=True):
        sums[row["part"]] += row["amount"]
        if row["part"] == "this" and row["project_id"] is not None:
            by_project[row["project_id"]] += row["amount"]
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
        forecast=run_rate_forecast(
            month_to_date=sums["this"], elapsed_days=elapsed, month_days=month_days
        ),
        by_project=dict(by_project),
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


@dataclass(frozen=True)
class Change:
    """One project, experiment or deployment's spend in a period and in the one before."""

    kind: str
    pk: int
    name: str
    current: Decimal
    previous: Decimal
    parent: str = ""  # a project's team, an experiment's project, a deployment's model
    slug: str = ""  # a project's

    @property
    def change(self) -> Decimal:
        return self.current - self.previous

    @property
    def change_share(self) -> Decimal | None:
        return self.change / self.previous if self.previous else None


def _current_and_previous(period: Period) -> dict:
    current = Case(When(day__gte=period.start, then=F("effective_cost")), default=Value(ZERO))
    previous = Case(When(day__lt=period.start, then=F("effective_cost")), default=Value(ZERO))
    return {
        "current": Sum(current, output_field=MONEY),
        "previous": Sum(previous, output_field=MONEY),
    }


def movers(changes: list["Change"], *, limit: int | None = 10) -> list["Change"]:
    """The largest changes either way, largest first."""
    moved = [change for change in changes if change.change]
    moved.sort(key=lambda change: (-abs(change.change), change.name, change.pk))
    return moved[:limit]


@dataclass(frozen=True)
class SpendChanges:
    """Who drives the spend of a period and what changed against the period before: every
    project, experiment and deployment with spend in either (bounded by how many there are, not
    by the bill's size), and the models' spend in the period."""

    projects: list[Change]  # costliest now first
    experiments: list[Change]  # largest change first
    deployments: list[Change]
    models: "Pareto"

    def project_pareto(self) -> "Pareto":
        return pareto(
            noun="projects",
            amounts=[(c.pk, c.name, c.current, c.parent, c.slug) for c in self.projects],
        )

    def project_movers(self, limit: int | None) -> list[Change]:
        return movers(self.projects, limit=limit)

    def experiment_movers(self, limit: int) -> list[Change]:
        return movers(self.experiments, limit=limit)

    def deployment_movers(self, limit: int) -> list[Change]:
        return movers(self.deployments, limit=limit)


def spend_changes(
    *, scope: SpendScope, period: Period, names_for: int | None = 10, models: bool = True
) -> SpendChanges:
    """One grouped pass over the period and the one before it, by project, owner and the owner's
    model; names are looked up after, for what a page shows.

    (Four queries, one per table of the overview, cost 3.5 times as much on the benchmark's
    year: each scanned the rollup and joined runs, deployments, models and projects.)
    `names_for` is how many of the largest changes get a name (None: all, for the CSV);
    without `models` the models' spend is left empty (a project page shows none).
    """
    previous = period.previous
    sums = (
        _current_and_previous(period)
        if previous
        else {
            "current": Sum("effective_cost"),
            "previous": Value(ZERO, output_field=MONEY),
        }
    )
    query = rollup_query(
        scope.q() & Q(billing_currency=scope.currency),
        Period(previous.start, period.end) if previous else period,
        lambda rows: (
            rows.values("project_id", "experiment_id", "deployment_id").annotate(**sums).order_by()
        ),
        cuts=(period.start,) if previous else (),
    )
    if query is None:
        grouped = []
    elif models:
        grouped = _with_owner_models(query)
    else:
        grouped = list(query)
    by_project: dict[int, list[Decimal]] = defaultdict(lambda: [ZERO, ZERO])
    by_experiment: dict[int, list[Decimal]] = defaultdict(lambda: [ZERO, ZERO])
    by_deployment: dict[int, list[Decimal]] = defaultdict(lambda: [ZERO, ZERO])
    # Which model each run produced and each deployment serves comes joined in the same query:
    # that is cheaper than looking up thousands of owners by id after.
    owner_models: dict[tuple[str, int], int] = {}
    for row in grouped:
        if models and row["experiment__model_id"] is not None:
            owner_models[("experiment", row["experiment_id"])] = row["experiment__model_id"]
        if models and row["deployment__model_id"] is not None:
            owner_models[("deployment", row["deployment_id"])] = row["deployment__model_id"]
        current, before = row["current"], row["previous"]
        for key, totals in (
            (row["project_id"], by_project),
            (row["experiment_id"], by_experiment),
            (row["deployment_id"], by_deployment),
        ):
            if key is not None:
                totals[key][0] += current
                totals[key][1] += before
    # A model's spend is its runs' and its deployments'.
    by_model: dict[int, Decimal] = defaultdict(Decimal)
    for kind, owners in (("experiment", by_experiment), ("deployment", by_deployment)):
        for pk, (current, _) in owners.items() if models else ():
            model = owner_models.get((kind, pk))
            if current and model is not None:
                by_model[model] += current
    projects = {
        project["pk"]: project
        for project in Project.objects.filter(pk__in=list(by_project)).values(
            "pk", "name", "slug", "team__name"
        )
    }
    project_changes = [
        Change(
            kind="project",
            pk=pk,
            name=projects[pk]["name"],
            current=current,
            previous=before,
            parent=projects[pk]["team__name"],
            slug=projects[pk]["slug"],
        )
        for pk, (current, before) in by_project.items()
        if pk in projects
    ]
    project_changes.sort(key=lambda change: (-change.current, change.name))
    models = {
        model["pk"]: model
        for model in Model.objects.filter(pk__in=list(by_model)).values(
            "pk", "name", "project__name"
        )
    }
    return SpendChanges(
        projects=project_changes,
        experiments=_named_changes(
            "experiment", by_experiment, Experiment.objects, "project__name", names_for
        ),
        deployments=_named_changes(
            "deployment", by_deployment, Deployment.objects, "model__name", names_for
        ),
        models=pareto(
            noun="models",
            amounts=[
                (pk, models[pk]["name"], amount, models[pk]["project__name"])
                for pk, amount in by_model.items()
                if pk in models
            ],
        ),
    )


def _named_changes(
    kind: str, totals: dict, objects, parent: str, limit: int | None
) -> list[Change]:
    """The largest changes of one kind (all with `limit` None), with their names."""
    ranked = sorted(
        ((pk, current, before) for pk, (current, before) in totals.items() if current != before),
        key=lambda item: (-abs(item[1] - item[2]), item[0]),
    )
    if limit is not None:
        ranked = ranked[:limit]
    names = {
        row["pk"]: row
        for row in objects.filter(pk__in=[pk for pk, *_ in ranked]).values("pk", "name", parent)
    }
    changes = [
        Change(
            kind=kind,
            pk=pk,
            name=names[pk]["name"],
            current=current,
            previous=before,
            parent=names[pk][parent] or "",
        )
        for pk, current, before in ranked
        if pk in names
    ]
    return movers(changes, limit=len(changes))


@dataclass(frozen=True)
class ParetoItem:
    pk: int | None
    name: str
    amount: Decimal
    share: Decimal
    cumulative_share: Decimal
    parent: str = ""
    slug: str = ""


@dataclass(frozen=True)
class Pareto:
    """Things by spend, costliest first, with each one's share and the running share."""

    noun: str  # plural: "projects"
    items: list[ParetoItem]
    total: Decimal

    @property
    def head(self) -> int:
        """How many of the costliest make up 80% of the spend."""
        for position, item in enumerate(self.items, start=1):
            if item.cumulative_share >= PARETO_SHARE:
                return position
        return len(self.items)

    @property
    def head_share(self) -> Decimal | None:
        return self.items[self.head - 1].cumulative_share if self.items else None

    @property
    def headline(self) -> str:
        if not self.items:
            return ""
        share = int((self.head_share * 100).to_integral_value(rounding="ROUND_FLOOR"))
        return f"{self.head} of {len(self.items)} {self.noun} are {share}% of the spend"


def pareto(*, noun: str, amounts: list[tuple]) -> Pareto:
    """(pk, name, amount, parent[, slug]) in, a Pareto out. Credits (a negative net) have no
    share."""
    positive = [item for item in amounts if item[2] > 0]
    positive.sort(key=lambda item: (-item[2], item[1]))
    total = sum((item[2] for item in positive), ZERO)
    items, running = [], ZERO
    for pk, name, amount, parent, *slug in positive:
        running += amount
        items.append(
            ParetoItem(
                pk=pk,
                name=name,
                amount=amount,
                share=amount / total,
                cumulative_share=running / total,
                parent=parent,
                slug=slug[0] if slug else "",
            )
        )
    return Pareto(noun=noun, items=items, total=total)


# -- Unattributed spend --------------------------------------------------------------------------


@dataclass(frozen=True)
class UnattributedResource:
    resource_id: str
    resource_name: str
    provider_name: str
    billing_account_id: str
    sub_account_id: str
    service_name: str
    region_id: str
    amount: Decimal
    days: int | None = None
    first_day: date | None = None
    last_day: date | None = None


def unattributed_rows(
    *, period: Period, currency: str, provider: str = "", detail: bool = True
) -> QuerySet:
    """Resources with spend nobody claimed in the period, grouped, costliest first. Without
    `detail` (the overview's short list) the days each was billed are not counted: counting
    distinct days was half the query's time over a year."""
    rows = _in_period(
        DailyResourceCost.objects.filter(project__isnull=True, billing_currency=currency), period
    )
    if provider:
        rows = rows.filter(provider_name=provider)
    days = (
        {"days": Count("day", distinct=True), "first_day": Min("day"), "last_day": Max("day")}
        if detail
        else {}
    )
    return (
        rows.values("resource_id")
        .annotate(
            amount=Sum("effective_cost"),
            resource_name=Max("resource_name"),
            provider_name=Max("provider_name"),
            billing_account_id=Max("billing_account_id"),
            sub_account_id=Max("sub_account_id"),
            service_name=Max("service_name"),
            region_id=Max("region_id"),
            **days,
        )
        .exclude(amount=0)  # a resource whose charges net to nothing claims no attention
        .order_by("-amount", "resource_id")
    )


def unattributed_resources(
    *,
    period: Period,
    currency: str,
    provider: str = "",
    limit: int | None = 10,
    offset: int = 0,
    detail: bool = True,
) -> list[UnattributedResource]:
    rows = unattributed_rows(period=period, currency=currency, provider=provider, detail=detail)
    rows = rows[offset : offset + limit] if limit is not None else rows[offset:]
    return [UnattributedResource(**row) for row in rows]


@dataclass(frozen=True)
class UnattributedSummary:
    amount: Decimal  # all unattributed spend, lines without a resource id included
    resources: int
    without_resource_id: Decimal  # transfer, fees, taxes: nothing to assign by resource id
    total: Decimal  # all spend in the same period and currency
    other_currencies: dict[str, Decimal]

    @property
    def share(self) -> Decimal | None:
        return self.amount / self.total if self.total else None

    @property
    def attributed_share(self) -> Decimal | None:
        return None if self.share is None else 1 - self.share


def unattributed_summary(
    *, period: Period, currency: str, provider: str = ""
) -> UnattributedSummary:
    resources = _in_period(DailyResourceCost.objects.filter(project__isnull=True), period)
    if provider:
        resources = resources.filter(provider_name=provider)
    rows = rollup_rows(
        Q(provider_name=provider) if provider else Q(),
        period,
        lambda rows: (
            rows.values("billing_currency")
            .annotate(
                amount=Coalesce(Sum("effective_cost", filter=Q(project__isnull=True)), ZERO_MONEY),
                total=Sum("effective_cost"),
            )
            .order_by()
        ),
    )
    amounts: dict[str, Decimal] = defaultdict(Decimal)
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for row in rows:
        amounts[row["billing_currency"]] += row["amount"]
        totals[row["billing_currency"]] += row["total"]
    amount, total = amounts.pop(currency, ZERO), totals.get(currency, ZERO)
    others = {code: value for code, value in sorted(amounts.items()) if value}
    by_resource = resources.filter(billing_currency=currency).aggregate(
        count=Count("resource_id", distinct=True), amount=Sum("effective_cost")
    )
    return UnattributedSummary(
        amount=amount,
        resources=by_resource["count"],
        without_resource_id=amount - (by_resource["amount"] or ZERO),
        total=total,
        other_currencies=others,
    )


# -- Experiments and deployments with their cost -------------------------------------------------


@dataclass(frozen=True)
class ExperimentCost:
    pk: int
    name: str
    kind: str
    status: str
    project_name: str
    started_at: datetime | None
    ended_at: datetime | None
    amount: Decimal
    cumulative_share: Decimal | None = None
    gpu_hours: float | None = None

    @property
    def failed(self) -> bool:
        return self.status == Experiment.Status.FAILED

    @property
    def cost_per_gpu_hour(self) -> Decimal | None:
        if not self.gpu_hours:
            return None
        return self.amount / Decimal(str(self.gpu_hours))

    def get_kind_display(self) -> str:
        return Experiment.Kind(self.kind).label

    def get_status_display(self) -> str:
        return Experiment.Status(self.status).label


@dataclass(frozen=True)
class ExperimentCosts:
    rows: list[ExperimentCost]  # the costliest, cut to the limit
    runs: int  # experiments with spend in the period
    total: Decimal
    failed_runs: int
    failed_total: Decimal

    @property
    def per_run(self) -> Decimal | None:
        return self.total / self.runs if self.runs else None

    @property
    def failed_share(self) -> Decimal | None:
        return self.failed_total / self.total if self.total else None

    @property
    def hidden(self) -> int:
        return self.runs - len(self.rows)


def experiment_costs(
    *, scope: SpendScope, period: Period, limit: int | None = 50, gpu_hours: bool = True
) -> ExperimentCosts:
    """The experiments with spend in the period, costliest first, with GPU-hours (measured, from
    the GPU rollup) for those listed; and the totals by status (a failed run's cost is waste)."""
    rows = scope.daily(period).filter(billing_currency=scope.currency, experiment__isnull=False)
    by_status = {
        row["experiment__status"]: row
        for row in rows.values("experiment__status")
        .annotate(amount=Sum("effective_cost"), runs=Count("experiment_id", distinct=True))
        .order_by()
    }
    total = sum((row["amount"] for row in by_status.values()), ZERO)
    listed = (
        rows.values(
            "experiment_id",
            "experiment__name",
            "experiment__kind",
            "experiment__status",
            "experiment__project__name",
            "experiment__started_at",
            "experiment__ended_at",
        )
        .annotate(amount=Sum("effective_cost"))
        .order_by("-amount", "experiment__name", "experiment_id")
    )
    listed = list(listed[:limit] if limit is not None else listed)
    hours = (
        gpu_hours_by_owner(experiment_ids=[row["experiment_id"] for row in listed], period=period)
        if gpu_hours
        else {}
    )
    out, running = [], ZERO
    for row in listed:
        running += row["amount"]
        out.append(
            ExperimentCost(
                pk=row["experiment_id"],
                name=row["experiment__name"],
                kind=row["experiment__kind"],
                status=row["experiment__status"],
                project_name=row["experiment__project__name"],
                started_at=row["experiment__started_at"],
                ended_at=row["experiment__ended_at"],
                amount=row["amount"],
                cumulative_share=running / total if total > 0 else None,
                gpu_hours=hours.get(("experiment", row["experiment_id"])) if gpu_hours else None,
            )
        )
    failed = by_status.get(Experiment.Status.FAILED, {"amount": ZERO, "runs": 0})
    return ExperimentCosts(
        rows=out,
        runs=sum(row["runs"] for row in by_status.values()),
        total=total,
        failed_runs=failed["runs"],
        failed_total=failed["amount"],
    )


@dataclass(frozen=True)
class DeploymentCost:
    pk: int
    name: str
    model_name: str
    project_name: str
    amount: Decimal
    requests: int | None  # None: no traffic reported in the period
    gpu_hours: float | None = None

    @property
    def cost_per_thousand_requests(self) -> Decimal | None:
        if not self.requests:
            return None
        return self.amount * 1000 / self.requests


def deployment_costs(
    *, scope: SpendScope, period: Period, limit: int | None = 50, gpu_hours: bool = True
) -> list[DeploymentCost]:
    """Deployments with spend in the period, costliest first, with the requests they served in
    it (where their serving stack reports traffic) and their measured GPU-hours."""
    rows = (
        scope.daily(period)
        .filter(billing_currency=scope.currency, deployment__isnull=False)
        .values(
            "deployment_id",
            "deployment__name",
            "deployment__model__name",
            "deployment__project__name",
        )
        .annotate(amount=Sum("effective_cost"))
        .order_by("-amount", "deployment__name", "deployment_id")
    )
    rows = list(rows[:limit] if limit is not None else rows)
    ids = [row["deployment_id"] for row in rows]
    traffic = {}
    if ids:
        start, end = _moments(period)
        hours = TrafficHour.objects.filter(deployment_id__in=ids, hour__lt=end)
        if start is not None:
            hours = hours.filter(hour__gte=start)
        traffic = dict(
            hours.values("deployment_id")
            .annotate(requests=Sum("requests"))
            .order_by()
            .values_list("deployment_id", "requests")
        )
    hours_by_owner = gpu_hours_by_owner(deployment_ids=ids, period=period) if gpu_hours else {}
    return [
        DeploymentCost(
            pk=row["deployment_id"],
            name=row["deployment__name"],
            model_name=row["deployment__model__name"],
            project_name=row["deployment__project__name"],
            amount=row["amount"],
            requests=traffic.get(row["deployment_id"]),
            gpu_hours=hours_by_owner.get(("deployment", row["deployment_id"])),
        )
        for row in rows
    ]


def _moments(period: Period) -> tuple[datetime | None, datetime]:
    """The period as UTC moments [start, end) (start None: from the beginning)."""
    start = (
        datetime.combine(period.start, time.min, tzinfo=UTC) if period.start is not None else None
    )
    return start, datetime.combine(period.end, time.min, tzinfo=UTC)


# -- GPU-hours of runs and deployments -----------------------------------------------------------


def _tail(resource_id: str) -> str:
    """`arn:aws:ec2:...:instance/i-0abc` and `i-0abc` name the same instance (as apps.gpu)."""
    return resource_id.rstrip("/").rsplit("/", 1)[-1]


# Open ends of a window, as moments every database compares.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 1, 1, tzinfo=UTC)
USE_COLUMNS = (
    "owner_kind",
    "owner",
    "resource_id",
    "started_at",
    "ended_at",
    "owner_start",
    "owner_end",
)


def gpu_hours_by_owner(
    *,
    experiment_ids: list[int] = (),
    deployment_ids: list[int] = (),
    period: Period | None = None,
) -> dict[tuple[str, int], float]:
    """GPU-hours measured on the resources these runs and deployments registered, in the period,
    in four queries whatever their number and the GPU rollup's size.

    The same rules as apps.gpu.selectors (which reads one owner at a time): a GPU belongs to a
    billed resource by its series label, else its host's mapping, else a registered resource id
    naming the host; a GPU-hour counts its GPU's share (a MIG slice is a fraction) and only with
    utilisation samples; an owner's hours are those inside the registration's window (its own,
    else the owner's).
    """
    if not experiment_ids and not deployment_ids:
        return {}
    uses = list(
        ExperimentResource.objects.filter(experiment_id__in=experiment_ids)
        .annotate(
            owner_kind=Value("experiment"),
            owner=F("experiment_id"),
            owner_start=F("experiment__started_at"),
            owner_end=F("experiment__ended_at"),
        )
        .values_list(*USE_COLUMNS)
        .order_by()
        .union(
            DeploymentResource.objects.filter(deployment_id__in=deployment_ids)
            .annotate(
                owner_kind=Value("deployment"),
                owner=F("deployment_id"),
                owner_start=F("deployment__started_at"),
                owner_end=F("deployment__ended_at"),
            )
            .values_list(*USE_COLUMNS)
            .order_by(),
            all=True,
        )
    )
    if not uses:
        return {}
    keys = {rid for _, _, rid, *_ in uses} | {_tail(rid) for _, _, rid, *_ in uses}
    gpus = list(
        Gpu.objects.filter(
            Q(resource_label__in=keys)
            | Q(host__in=keys)
            | Q(host__in=HostMapping.objects.filter(resource_id__in=keys).values("host"))
        ).values_list("pk", "host", "resource_label")
    )
    mappings = dict(
        HostMapping.objects.filter(host__in={host for _, host, _ in gpus}).values_list(
            "host", "resource_id"
        )
    )
    by_key: dict[str, set[int]] = defaultdict(set)
    for pk, host, label in gpus:
        if label:
            resolved = label
        elif host in mappings:
            resolved = mappings[host]
        elif host in keys:
            resolved = host
        else:
            continue
        by_key[resolved].add(pk)
        by_key[_tail(resolved)].add(pk)
    windows = []  # (owner, gpu, start, end): one row per GPU of each registration
    owners: list[tuple[str, int]] = []
    for kind, owner, rid, started, ended, owner_start, owner_end in uses:
        gpu_ids = by_key.get(rid, set()) | by_key.get(_tail(rid), set())
        if not gpu_ids:
            continue
        if (kind, owner) not in owners:
            owners.append((kind, owner))
        start = started or owner_start
        start = start.replace(minute=0, second=0, microsecond=0) if start else EARLIEST
        end = ended or owner_end or LATEST
        windows += [(owners.index((kind, owner)), gpu, start, end) for gpu in sorted(gpu_ids)]
    if not windows:
        return {}
    first, last = _moments(period) if period is not None else (None, LATEST)
    # The windows go to the database as a table of their own, joined to the GPU-hours through
    # the (gpu, hour) index: one short range scan per GPU. (A SUM(CASE ...) per owner over the
    # rows of all their GPUs took 140 ms for the busiest project of a benchmark; this, 21 ms.)
    adapt = connection.ops.adapt_datetimefield_value
    params = [
        value
        for index, gpu, start, end in windows
        for value in (index, gpu, adapt(start), adapt(end))
    ]
    sql = f"""
        WITH windows (owner, gpu, start_at, end_at) AS (
            VALUES {", ".join(["(%s, %s, %s, %s)"] * len(windows))}
        )
        SELECT windows.owner, SUM(gpu.share)
        FROM windows
        JOIN {GpuHour._meta.db_table} hour ON hour.gpu_id = windows.gpu
            AND hour.hour >= windows.start_at AND hour.hour < windows.end_at
        JOIN {Gpu._meta.db_table} gpu ON gpu.id = hour.gpu_id
        WHERE hour.util_samples > 0 AND hour.hour >= %s AND hour.hour < %s
        GROUP BY windows.owner
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, adapt(first or EARLIEST), adapt(last)])
        totals = dict(cursor.fetchall())
    return {key: float(totals.get(index) or 0.0) for index, key in enumerate(owners)}


# -- Where the money goes: provider, region, service, pricing ------------------------------------


@dataclass(frozen=True)
class BreakdownRow:
    value: str
    label: str
    amount: Decimal
    share: Decimal | None


BREAKDOWNS = (
    ("provider_name", "Provider"),
    ("region_id", "Region"),
    ("service_name", "Service"),
    ("pricing_category", "Pricing"),
)


def spend_breakdown(
    *, scope: SpendScope, period: Period, dimensions: tuple[str, ...] | None = None
) -> dict[str, list[BreakdownRow]]:
    """Spend by provider, region, service and pricing category (on-demand, spot, committed), in
    one query: the combinations of a project's bill are few."""
    dimensions = dimensions or tuple(name for name, _ in BREAKDOWNS)
    rows = (
        scope.daily(period)
        .filter(billing_currency=scope.currency)
        .values(*dimensions)
        .annotate(amount=Sum("effective_cost"))
        .order_by()
    )
    sums: dict[str, dict[str, Decimal]] = {name: defaultdict(Decimal) for name in dimensions}
    total = ZERO
    for row in rows:
        total += row["amount"]
        for name in dimensions:
            sums[name][row[name]] += row["amount"]
    out = {}
    for name in dimensions:
        items = sorted(sums[name].items(), key=lambda item: (-item[1], item[0]))
        out[name] = [
            BreakdownRow(
                value=value,
                label=_breakdown_label(name, value),
                amount=amount,
                share=amount / total if total else None,
            )
            for value, amount in items
        ]
    return out


def _breakdown_label(dimension: str, value: str) -> str:
    if dimension == "pricing_category":
        return PRICING_LABELS.get(value, value)
    return value or "(none)"
