"""Spend reads of the API: the billing app's rollup totals (`spend_totals`, the figures the pages
show), narrowed to one project, run, deployment or model."""

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from apps.spend.selectors import spend_totals


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


def owner_spend(
    *, by: tuple[str, ...], belongs: Callable[[tuple], bool], start: date, end: date
) -> SpendReport:
    """Spend in [start, end) of the rollup groups `by` (rollup fields) whose key `belongs`."""
    totals: dict[str, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    workloads: dict[tuple[str, str], list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    for total in spend_totals(by=(*by, "workload"), start=start, end=end):
        if not belongs(total.key[:-1]):
            continue
        for bucket in (totals[total.currency], workloads[(total.key[-1], total.currency)]):
            bucket[0] += total.effective_cost
            bucket[1] += total.billed_cost
    return SpendReport(
        start=start,
        end=end,
        totals=[
            Spend(currency=currency, effective_cost=effective, billed_cost=billed)
            for currency, (effective, billed) in sorted(totals.items())
        ],
        by_workload=[
            WorkloadSpend(
                workload=workload, currency=currency, effective_cost=effective, billed_cost=billed
            )
            for (workload, currency), (effective, billed) in sorted(workloads.items())
        ],
    )
