"""Reads of part 3's findings for the pages: failed runs' money (organisation-wide on the waste
page, a project's failed share of its training spend) and the coverage of GPU spend by
commitments over time (committed, on-demand, spot)."""

from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal

from django.db.models import Q, QuerySet, Sum

# Spend reads (the integrator points these at apps.spend).
from apps.billing.models import CostKind, DailyCost
from apps.experiments.models import Experiment
from apps.projects.selectors import visible_project_ids
from apps.spend.figures import cached_rows
from apps.spend.filters import Period
from apps.spend.rollup import rollup_rows

from .models import Finding, Kind
from .selectors import period_sums

TRAINING_WORKLOADS = ("training", "fine_tuning")
# FOCUS PricingCategory -> the coverage chart's series.
COVERAGE = {"Committed": "committed", "Standard": "on_demand", "Dynamic": "spot"}


def failed_wasted(
    *, findings: QuerySet[Finding], start: date | None, end: date
) -> dict[str, Decimal]:
    """What the failed runs among `findings` cost in `[start, end)`, per currency."""
    failed = findings.filter(kind=Kind.FAILED_RUN)
    return {
        currency: amount
        for currency, amount in period_sums(failed, start=start, end=end, by=("currency",))
        if amount
    }


@dataclass(frozen=True)
class FailedShare:
    currency: str
    failed: Decimal
    training: Decimal

    @property
    def percent(self) -> Decimal | None:
        if not self.training:
            return None
        return (self.failed / self.training * 100).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)


def project_failed_share(*, project, start: date | None, end: date) -> list[FailedShare]:
    """A project's failed runs' spend in `[start, end)` (from the first day with data when
    `start` is None) against its training and fine-tuning spend in the same days, per
    currency, both from the rollups in one grouped statement: whole months from the monthly
    one, the rest from the daily (the failed runs' spend there is their failed_run findings'
    money, counted by day)."""
    rows = rollup_rows(
        Q(project=project),
        Period(start, end),
        lambda rows: (
            rows.values("billing_currency")
            .annotate(
                failed=Sum("effective_cost", filter=Q(experiment__status=Experiment.Status.FAILED)),
                training=Sum("effective_cost", filter=Q(workload__in=TRAINING_WORKLOADS)),
            )
            .order_by()
        ),
    )
    sums: dict[str, list[Decimal]] = {}
    for row in rows:  # a currency comes once from the months and once from the days
        totals = sums.setdefault(row["billing_currency"], [Decimal("0"), Decimal("0")])
        totals[0] += row["failed"] or 0
        totals[1] += row["training"] or 0
    return [
        FailedShare(currency, failed, training)
        for currency, (failed, training) in sorted(sums.items())
        if failed or training
    ]


def gpu_coverage(*, user, start: date, end: date, currency: str) -> list[dict]:
    """GPU compute spend per UTC day in `[start, end)` by how it was bought: committed
    (reservations, savings plans), on-demand and spot, in `currency` (staff: the whole
    organisation; others: the projects they see). One grouped query on the daily rollup."""
    rows = DailyCost.objects.filter(
        cost_kind=CostKind.GPU_COMPUTE, day__gte=start, day__lt=end, billing_currency=currency
    )
    if not user.is_staff:
        rows = rows.filter(project_id__in=visible_project_ids(user=user))
    days: dict[date, dict[str, Decimal]] = {}
    grouped = (
        rows.values("day", "pricing_category").annotate(spend=Sum("effective_cost")).order_by("day")
    )
    for row in cached_rows(grouped):
        series = COVERAGE.get(row["pricing_category"], "other")
        day = days.setdefault(
            row["day"],
            {name: Decimal("0") for name in ("committed", "on_demand", "spot", "other")},
        )
        day[series] += row["spend"] or Decimal("0")
    return [{"day": day, **figures} for day, figures in days.items()]
