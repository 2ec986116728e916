"""Owners' costs: experiments and deployments with their cost and GPU-hours, and where the
money goes (provider, region, service, pricing)."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, time
from decimal import Decimal

from django.db.models import (
    Count,
    Sum,
)

from apps.deployments.models import TrafficHour
from apps.experiments.models import Experiment
from apps.gpu import selectors as gpu_selectors

from .figures import cached, cached_rows
from .filters import Period
from .rollup import (
    PRICING_LABELS,
    ZERO,
    SpendScope,
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
    """The experiments with spend in the period, costliest first, with GPU-hours (measured, from
    the GPU rollup) for those listed; and the totals by status (a failed run's cost is waste)."""
    rows = scope.daily(period).filter(billing_currency=scope.currency, experiment__isnull=False)
    by_status = {
        row["experiment__status"]: row
        for row in cached_rows(
            rows.values("experiment__status")
            .annotate(amount=Sum("effective_cost"), runs=Count("experiment_id", distinct=True))
            .order_by()
        )
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
    listed_query = listed[:limit] if limit is not None else listed
    listed = cached_rows(listed_query)
    hours = (
        # Cached with the rows they are for: GPU metrics, registrations and host mappings all
        # move the data version.
        cached(
            "gpu-hours",
            listed_query,
            lambda: gpu_hours_by_owner(
                experiment_ids=[row["experiment_id"] for row in listed], period=period
            ),
        )
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
    rows_query = rows[:limit] if limit is not None else rows
    rows = cached_rows(rows_query)
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
    hours_by_owner = (
        cached(
            "gpu-hours", rows_query, lambda: gpu_hours_by_owner(deployment_ids=ids, period=period)
        )
        if gpu_hours
        else {}
    )
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
    rows = (
        scope.daily(period)
        .filter(billing_currency=scope.currency)
        .values(*dimensions)
        .annotate(amount=Sum("effective_cost"))
        .order_by()
    )
    sums: dict[str, dict[str, Decimal]] = {name: defaultdict(Decimal) for name in dimensions}
    total = ZERO
    for row in cached_rows(rows):
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
