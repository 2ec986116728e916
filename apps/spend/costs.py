"""Owners' costs: experiments and deployments with their cost and GPU-hours, and where the
money goes (provider, region, service, pricing)."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, time
from decimal import Decimal

from django.db.models import Q, QuerySet, Sum

from apps.deployments.models import Deployment, TrafficHour
from apps.experiments.models import Experiment
from apps.gpu import selectors as gpu_selectors
from costsite.lookups import id_in

from .figures import cached_by, cached_rows
from .filters import Period
from .rollup import (
    PRICING_LABELS,
    ZERO,
    SpendScope,
    rollup_rows,
)


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
    """The experiments with spend in the period, costliest first (ties by name, then id), with
    GPU-hours (measured, from the GPU rollup) for those listed; and the totals by status (a
    failed run's cost is waste).

    One grouped read per experiment (whole months from the monthly rollup: all of a project's
    history is a few hundred rows), then the runs' names and statuses by id: the two grouped
    queries it replaced joined every daily row of the period to its run, twice (14 ms over all
    time for the benchmark's largest project)."""
    amounts, runs = _owners_ranked(
        scope,
        period,
        Experiment.objects.values(
            "pk", "name", "kind", "status", "project__name", "started_at", "ended_at"
        ),
    )
    total = sum(amounts.values(), ZERO)
    listed = runs[:limit] if limit is not None else runs
    ids = [run["pk"] for run in listed]
    hours = (
        # Cached with the runs they are for, under the GPU version (GPU metrics, GPUs, host
        # mappings) and the joined one (registrations, the runs' windows): a new bill leaves them.
        cached_by(
            "gpu-hours",
            ("experiments", ids, period.start, period.end),
            lambda: gpu_hours_by_owner(experiment_ids=ids, period=period),
            gpu=True,
        )
        if gpu_hours and ids
        else {}
    )
    out, running = [], ZERO
    for run in listed:
        amount = amounts[run["pk"]]
        running += amount
        out.append(
            ExperimentCost(
                pk=run["pk"],
                name=run["name"],
                kind=run["kind"],
                status=run["status"],
                project_name=run["project__name"],
                started_at=run["started_at"],
                ended_at=run["ended_at"],
                amount=amount,
                cumulative_share=running / total if total > 0 else None,
                gpu_hours=hours.get(("experiment", run["pk"])) if gpu_hours else None,
            )
        )
    failed = [run["pk"] for run in runs if run["status"] == Experiment.Status.FAILED]
    return ExperimentCosts(
        rows=out,
        runs=len(runs),
        total=total,
        failed_runs=len(failed),
        failed_total=sum((amounts[pk] for pk in failed), ZERO),
    )


def _owners_ranked(
    scope: SpendScope, period: Period, owners: QuerySet
) -> tuple[dict[int, Decimal], list[dict]]:
    """Spend per run or deployment (`owners`: values() of Experiment or Deployment with `pk` and
    `name`) of the scope's rows in the period, and those owners, costliest first, ties by name
    then id: every owner with a row in the period (an amount may be zero)."""
    owner = f"{owners.model._meta.model_name}_id"
    amounts: dict[int, Decimal] = defaultdict(Decimal)
    for row in rollup_rows(
        scope.q() & Q(billing_currency=scope.currency, **{f"{owner}__isnull": False}),
        period,
        lambda rows: rows.values(owner).annotate(amount=Sum("effective_cost")).order_by(),
    ):
        amounts[row[owner]] += row["amount"]
    # Named in the database's order of names (its collation), then ranked by amount, which a
    # stable sort does without reordering ties: as the one grouped query ordered them before.
    # A project's runs over all time are hundreds: their ids are one parameter.
    named = (
        cached_rows(owners.filter(id_in("pk", sorted(amounts))).order_by("name", "pk"))
        if amounts
        else []
    )
    return amounts, sorted(named, key=lambda row: -amounts[row["pk"]])


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
    """Deployments with spend in the period, costliest first (ties by name, then id), with the
    requests they served in it (where their serving stack reports traffic) and their measured
    GPU-hours; read as experiment_costs reads the runs."""
    amounts, ranked = _owners_ranked(
        scope, period, Deployment.objects.values("pk", "name", "model__name", "project__name")
    )
    rows = ranked[:limit] if limit is not None else ranked
    ids = [row["pk"] for row in rows]
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
    hours_by_owner = (
        cached_by(
            "gpu-hours",
            ("deployments", ids, period.start, period.end),
            lambda: gpu_hours_by_owner(deployment_ids=ids, period=period),
            gpu=True,
        )
        if gpu_hours and ids
        else {}
    )
    return [
        DeploymentCost(
            pk=row["pk"],
            name=row["name"],
            model_name=row["model__name"],
            project_name=row["project__name"],
            amount=amounts[row["pk"]],
            requests=traffic.get(row["pk"]),
            gpu_hours=hours_by_owner.get(("deployment", row["pk"])),
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


def gpu_hours_by_owner(
    *,
    experiment_ids: list[int] = (),
    deployment_ids: list[int] = (),
    period: Period | None = None,
) -> dict[tuple[str, int], float]:
    """GPU-hours measured on the resources these runs and deployments registered, in the period
    (apps.gpu's `gpu_hours_by_owner`, which holds the rules)."""
    start, end = _moments(period) if period is not None else (None, None)
    return gpu_selectors.gpu_hours_by_owner(
        experiment_ids=experiment_ids, deployment_ids=deployment_ids, start=start, end=end
    )


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
    rows = rollup_rows(
        scope.q() & Q(billing_currency=scope.currency),
        period,
        lambda rows: rows.values(*dimensions).annotate(amount=Sum("effective_cost")).order_by(),
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
