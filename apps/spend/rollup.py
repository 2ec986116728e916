"""The rollup query (`SpendScope`; whole months and ragged days by costsite.months' plan), the
scopes of each page, spend totals, import runs and deliveries, and how fresh the data is."""

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.core.exceptions import FieldError
from django.db.models import (
    DecimalField,
    F,
    Max,
    Q,
    QuerySet,
    Sum,
    Value,
)

from apps.accounts.guards import is_staff_or_lead
from apps.accounts.models import Team
from apps.billing.models import (
    DailyCost,
    DailyProjectCost,
    DailyResourceCost,
    Delivery,
    ImportRun,
    MonthlyCost,
)
from apps.deployments.models import Deployment, Model
from apps.experiments.models import Experiment
from apps.projects.models import Project
from apps.projects.selectors import visible_project_ids
from costsite.dates import as_of_shown
from costsite.lookups import id_in
from costsite.months import rollup_plan

from .figures import cached_rows
from .filters import Period

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


@dataclass(frozen=True)
class Spend:
    currency: str
    effective_cost: Decimal
    billed_cost: Decimal


@dataclass(frozen=True)
class WorkloadSpend(Spend):
    workload: str


@dataclass(frozen=True)
class SpendReport:
    start: date
    end: date
    totals: list[Spend]  # one per currency: other currencies are never summed into ours
    by_workload: list[WorkloadSpend]


def spend_report(*, scope: "SpendScope", start: date, end: date) -> SpendReport:
    """The scope's spend in the days [start, end), in total and per workload, every currency
    apart (all of them, not only the scope's: what the API answers), in one grouped query on the
    daily rollup."""
    rows = (
        scope.daily(Period(start=start, end=end))
        .values("workload", "billing_currency")
        .annotate(effective=Sum("effective_cost"), billed=Sum("billed_cost"))
        .order_by("workload", "billing_currency")
    )
    by_workload = [
        WorkloadSpend(
            workload=row["workload"],
            currency=row["billing_currency"],
            effective_cost=row["effective"],
            billed_cost=row["billed"],
        )
        for row in rows
    ]
    totals: dict[str, list[Decimal]] = defaultdict(lambda: [ZERO, ZERO])
    for line in by_workload:
        totals[line.currency][0] += line.effective_cost
        totals[line.currency][1] += line.billed_cost
    return SpendReport(
        start=start,
        end=end,
        totals=[
            Spend(currency=currency, effective_cost=effective, billed_cost=billed)
            for currency, (effective, billed) in sorted(totals.items())
        ],
        by_workload=by_workload,
    )


# -- Scope: which rollup rows a page adds up ---------------------------------------------------


@dataclass(frozen=True)
class SpendScope:
    """The rollup rows a page adds up: those the user may see, narrowed by the page's filters.

    `project_ids` None means every project (staff, or a page that checked access to its one
    object already); else the ids of those the user sees (`visible_project_ids`: a team's
    figures compile to the same SQL, and so share their cache entries). `unattributed` says
    whether rows without a project count (staff and team leads see unattributed spend; a team
    or project filter leaves it out, as it belongs to neither).
    DailyCost and DailyResourceCost share the field names used here, so one Q serves both.
    """

    currency: str
    project_ids: tuple[int, ...] | None = None
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
        if self.project_ids is not None:
            seen = Q(project_id__in=self.project_ids)
            q &= (seen | Q(project__isnull=True)) if self.unattributed else seen
        elif not self.unattributed:
            q &= Q(project__isnull=False)
        if self.team is not None:
            q &= Q(project__team_id=self.team.pk)
        if self.project is not None:
            q &= Q(project_id=self.project.pk)
        if self.experiment_ids is not None or self.deployment_ids is not None:
            owners = Q(pk__in=[])
            # A model's runs are hundreds: each list is one parameter (costsite.lookups).
            if self.experiment_ids:
                owners |= id_in("experiment_id", self.experiment_ids)
            if self.deployment_ids:
                owners |= id_in("deployment_id", self.deployment_ids)
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
    return [] if query is None else cached_rows(query)


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
        return daily_shaped(q, shape, period)
    plan = rollup_plan(period.start, period.end, cuts)
    parts = []
    if (days := plan.days()) is not None:
        parts.append(daily_shaped(q & days, shape))
    if (months := plan.whole_months()) is not None:
        parts.append(shape(MonthlyCost.objects.filter(q & months).annotate(day=F("month"))))
    if not parts:
        return None
    return parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]


def daily_shaped(
    q: Q, shape: Callable[[QuerySet], QuerySet], period: Period | None = None
) -> QuerySet:
    """`shape` of the daily rows of `q`: from DailyProjectCost (a third of the rows) when the
    filter and the shape name only its keys (project, workload, cost kind, provider, currency),
    else from DailyCost. A field DailyProjectCost lacks (an owner, a region, a service) is a
    FieldError as the queryset is built, before anything runs: that is the test."""
    try:
        return shape(_in_period(DailyProjectCost.objects.filter(q), period))
    except FieldError:
        return shape(_in_period(DailyCost.objects.filter(q), period))


def _in_period(rows: QuerySet, period: Period | None) -> QuerySet:
    if period is None:
        return rows
    if period.start is not None:
        rows = rows.filter(day__gte=period.start)
    return rows.filter(day__lt=period.end)


def sees_unattributed(*, user) -> bool:
    """Unattributed spend is for staff and team leads (DESIGN.md, Roles)."""
    return is_staff_or_lead(user=user)


def overview_scope(
    *,
    user,
    currency: str,
    team: Team | None = None,
    project: Project | None = None,
    provider: str = "",
    workload: str = "",
) -> SpendScope:
    """The overview's rows: staff every row; a lead or a member the team's projects. A lead's
    headline is the team's spend, the same as a member's: unattributed spend belongs to no team,
    so the overview shows it apart, as what the lead may claim."""
    return SpendScope(
        currency=currency,
        project_ids=visible_project_ids(user=user),
        unattributed=team is None and project is None and user.is_staff,
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
    visible = visible_project_ids(user=user)
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
    """The newest end of a usage line loaded (billing.freshness says why usage only): the bill
    is complete up to this moment for its freshest account."""
    # A charge stored in the future (or at the end of time) must not read as the bill's date.
    newest = deliveries_current().aggregate(newest=Max("max_usage_period_end"))["newest"]
    return as_of_shown(newest)


@dataclass(frozen=True)
class BillFreshness:
    """What the spend pages say of how far the bill has got: the account furthest behind (the
    numbers are complete up to its moment), of how many; `newest` is `data_as_of()`."""

    newest: datetime | None
    oldest: datetime | None
    oldest_account: str
    accounts: int


def bill_freshness() -> BillFreshness:
    """Per billing account the newest end of a usage line (never later than now), in one query."""
    rows = (
        deliveries_current()
        .exclude(max_usage_period_end=None)
        .values("billing_account_id")
        .annotate(as_of=Max("max_usage_period_end"))
        .order_by("billing_account_id")
    )
    per_account = [(as_of_shown(row["as_of"]), row["billing_account_id"]) for row in rows]
    if not per_account:
        return BillFreshness(newest=None, oldest=None, oldest_account="", accounts=0)
    oldest, account = min(per_account)
    return BillFreshness(
        newest=max(as_of for as_of, _ in per_account),
        oldest=oldest,
        oldest_account=account,
        accounts=len(per_account),
    )


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
