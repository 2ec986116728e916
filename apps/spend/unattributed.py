"""Unattributed spend: the resources no rule or registration claims, and their summary."""

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from django.db.models import (
    Count,
    Max,
    Min,
    Q,
    QuerySet,
    Sum,
)
from django.db.models.functions import Coalesce

from apps.billing.models import DailyResourceCost, MonthlyResourceCost
from costsite.months import rollup_plan

from .figures import cached, cached_rows
from .filters import Period
from .rollup import (
    ZERO,
    ZERO_MONEY,
    _in_period,
    rollup_rows,
)


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


NAMES = {
    "resource_name": Max("resource_name"),
    "provider_name": Max("provider_name"),
    "billing_account_id": Max("billing_account_id"),
    "sub_account_id": Max("sub_account_id"),
    "service_name": Max("service_name"),
    "region_id": Max("region_id"),
}


def _unattributed(*, period: Period, currency: str, provider: str) -> QuerySet:
    rows = _in_period(
        DailyResourceCost.objects.filter(project__isnull=True, billing_currency=currency), period
    )
    return rows.filter(provider_name=provider) if provider else rows


def unattributed_ranked(
    *, period: Period, currency: str, provider: str = "", detail: bool = True
) -> QuerySet:
    """unattributed_rows without the names: what a page of them is counted and cut from."""
    days = (
        {"days": Count("day", distinct=True), "first_day": Min("day"), "last_day": Max("day")}
        if detail
        else {}
    )
    return (
        _unattributed(period=period, currency=currency, provider=provider)
        .values("resource_id")
        .annotate(amount=Sum("effective_cost"), **days)
        .exclude(amount=0)  # a resource whose charges net to nothing claims no attention
        .order_by("-amount", "resource_id")
    )


def unattributed_rows(
    *, period: Period, currency: str, provider: str = "", detail: bool = True
) -> QuerySet:
    """Resources with spend nobody claimed in the period, grouped, costliest first, with their
    names. Without `detail` (the overview's short list) the days each was billed are not
    counted: counting distinct days was half the query's time over a year."""
    ranked = unattributed_ranked(period=period, currency=currency, provider=provider, detail=detail)
    return ranked.annotate(**NAMES)


def _planned(
    *, period: Period, currency: str, provider: str, shape: Callable[[QuerySet], QuerySet]
) -> list[QuerySet]:
    """`shape` of the unattributed resource rows of the period, in parts: for a range longer
    than a month, its whole months from the monthly rollup (MonthlyResourceCost: 1,912 rows
    for 30,813 days over a year at 10M lines) and its ragged ends from the days; else the days.
    Both parts' rows have the names, the provider and the currency the shapes read."""
    days = DailyResourceCost.objects.filter(project__isnull=True, billing_currency=currency)
    months = MonthlyResourceCost.objects.filter(project__isnull=True, billing_currency=currency)
    if provider:
        days, months = days.filter(provider_name=provider), months.filter(provider_name=provider)
    if period.start is not None and period.days <= 31:
        return [shape(_in_period(days, period))]
    plan = rollup_plan(period.start, period.end)
    # A part per ragged end: each is a range of the partial index of unattributed days, where
    # the two ends OR'd in one filter made the planner read all of that index (30,813 rows for
    # 2,380 over 90 days).
    parts = [shape(days.filter(day__gte=start, day__lt=end)) for start, end in plan.day_ranges]
    if (wanted := plan.whole_months()) is not None:
        parts.append(shape(months.filter(wanted)))
    return parts


def _ranking(*, period: Period, currency: str, provider: str) -> list[dict]:
    """Every resource with unattributed spend in the period (`resource_id`, `amount`), costliest
    first, ties by id, those whose charges net to nothing left out: from the month rollup and
    the ragged days (unattributed_ranked's rows without the days; 19 ms for a year at 10M lines
    from the days alone)."""
    parts = _planned(
        period=period,
        currency=currency,
        provider=provider,
        shape=lambda rows: (
            rows.values("resource_id").annotate(amount=Sum("effective_cost")).order_by()
        ),
    )
    return cached_rows(
        _union(parts),
        outer="SELECT resource_id, SUM(amount) FROM parts GROUP BY resource_id"
        " HAVING SUM(amount) <> 0 ORDER BY 2 DESC, resource_id",
    )


def _names(
    resource_ids: list[str], *, period: Period, currency: str, provider: str
) -> dict[str, dict]:
    """The names of these resources over their unattributed rows in the period, each the
    largest (NAMES), read from the same parts as the ranking."""
    parts = _planned(
        period=period,
        currency=currency,
        provider=provider,
        shape=lambda rows: (
            rows.filter(resource_id__in=resource_ids)
            .values("resource_id")
            .annotate(**NAMES)
            .order_by()
        ),
    )
    columns = ", ".join(f"MAX({name})" for name in NAMES)
    rows = cached_rows(
        _union(parts), outer=f"SELECT resource_id, {columns} FROM parts GROUP BY resource_id"
    )
    return {row["resource_id"]: {name: row[name] for name in NAMES} for row in rows}


def _union(parts: list[QuerySet]) -> QuerySet:
    return parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]


def unattributed_resources(
    *,
    period: Period,
    currency: str,
    provider: str = "",
    limit: int | None = 10,
    offset: int = 0,
    detail: bool = True,
) -> list[UnattributedResource]:
    """A page of unattributed_rows: ranked first, then named (the six names' maxima over every
    row of every resource were half the ranking's time over a year: 34 ms against 17 at 10M
    lines); the names of the few listed come from their own rows, by resource id. Without a
    `limit` (the CSV export: every resource) they are named in the grouped query itself, so
    that no list of thousands of ids is sent back as parameters. Without `detail` (the
    overview's short list: no days counted) both read whole months from the month rollup."""
    if limit is None:
        rows = unattributed_rows(
            period=period, currency=currency, provider=provider, detail=detail
        )[offset:]
        return [UnattributedResource(**row) for row in cached_rows(rows)]
    where = {"period": period, "currency": currency, "provider": provider}
    if not detail:
        # The whole ranking, which unattributed_summary counts: one read serves both.
        rows = _ranking(**where)[offset : offset + limit]
        names = _names([row["resource_id"] for row in rows], **where) if rows else {}
        return [UnattributedResource(**row, **names[row["resource_id"]]) for row in rows]
    ranked = unattributed_ranked(period=period, currency=currency, provider=provider)
    ranked = ranked[offset : offset + limit]

    def page() -> list[UnattributedResource]:
        rows = list(ranked)
        names = {
            row.pop("resource_id"): row
            for row in _unattributed(**where)
            .filter(resource_id__in=[row["resource_id"] for row in rows])
            .values("resource_id")
            .annotate(**NAMES)
            .order_by()
        }
        return [UnattributedResource(**row, **names[row["resource_id"]]) for row in rows]

    return cached(f"unattributed-named:{offset}:{limit}", ranked, page)


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
    # Counted as the page lists them (unattributed_rows): a resource whose charges net to
    # nothing is neither listed nor counted, so the count and the list never disagree.
    ranking = _ranking(period=period, currency=currency, provider=provider)
    listed_amounts = [row["amount"] for row in ranking]
    return UnattributedSummary(
        amount=amount,
        resources=len(listed_amounts),
        without_resource_id=amount - sum(listed_amounts, ZERO),
        total=total,
        other_currencies=others,
    )


@dataclass(frozen=True)
class WithoutResourceId:
    """Unattributed spend on lines without a resource id (transfer, fees, support, taxes) of one
    service in one billing account: no resource claim reaches it, a rule (a claim) on the service
    or the account does."""

    provider_name: str
    billing_account_id: str
    service_name: str
    amount: Decimal


def unattributed_without_resource_id(
    *, period: Period, currency: str, provider: str = ""
) -> list[WithoutResourceId]:
    """Per provider, billing account and service: unattributed spend less that of its resources
    (the resource rollup holds the lines with a resource id only), costliest first."""
    q = Q(project__isnull=True, billing_currency=currency)
    if provider:
        q &= Q(provider_name=provider)
    totals: dict[tuple[str, str, str], Decimal] = defaultdict(Decimal)
    for row in rollup_rows(
        q,
        period,
        lambda rows: (
            rows.values("provider_name", "delivery__billing_account_id", "service_name")
            .annotate(amount=Sum("effective_cost"))
            .order_by()
        ),
    ):
        key = (row["provider_name"], row["delivery__billing_account_id"], row["service_name"])
        totals[key] += row["amount"]
    for row in cached_rows(
        _in_period(DailyResourceCost.objects.filter(q), period)
        .values("provider_name", "billing_account_id", "service_name")
        .annotate(amount=Sum("effective_cost"))
        .order_by()
    ):
        totals[(row["provider_name"], row["billing_account_id"], row["service_name"])] -= row[
            "amount"
        ]
    items = [
        WithoutResourceId(provider_name=p, billing_account_id=a, service_name=s, amount=amount)
        for (p, a, s), amount in totals.items()
        if amount
    ]
    return sorted(
        items,
        key=lambda i: (-i.amount, i.provider_name, i.billing_account_id, i.service_name),
    )


# -- Experiments and deployments with their cost -------------------------------------------------
