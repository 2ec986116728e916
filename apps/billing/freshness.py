"""How fresh the bill is, and what the sources pages read.

Per source and billing account, "data as of" is the newest end of a usage line of the current
deliveries that the source's runs loaded (`Delivery.max_usage_period_end`: ChargeCategory Usage,
usage-based where the format says; a purchase or a monthly fee covers its whole month the day it
is billed, so it would make a late bill look complete), never later than now; uploads and
command-line imports form one group of their own. An account lags when its data as of is more
than the group's lag days old (the source's `lag_days`; BILLING_FRESHNESS_LAG_DAYS for uploads).
The overall data as of is the newest over every account (`selectors.data_as_of`, what run rates
count up to); the spend pages say the oldest account's (`oldest_account`), the others a click away.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Max, OuterRef, QuerySet, Subquery
from django.utils import timezone

from costsite.dates import as_of_shown

from .models import BillingSource, Delivery, SourcePoll

UPLOADS = "Uploads and command line"
DETAIL_POLLS = 20
DETAIL_DELIVERIES = 50


@dataclass(frozen=True)
class AccountFreshness:
    billing_account_id: str
    data_as_of: datetime
    lag_days: int
    lagging: bool
    days_behind: int  # whole days between data_as_of and the moment it was judged


@dataclass(frozen=True)
class SourceFreshness:
    """One group: a source (None for uploads and the command line) and its accounts."""

    source: BillingSource | None
    name: str
    lag_days: int
    accounts: list[AccountFreshness]

    @property
    def data_as_of(self) -> datetime | None:
        return max((a.data_as_of for a in self.accounts), default=None)

    @property
    def lagging(self) -> bool:
        return any(a.lagging for a in self.accounts)


def freshness(
    *, now: datetime | None = None, source: BillingSource | None = None
) -> list[SourceFreshness]:
    """Every source (with or without data yet), then the uploads group if it loaded anything;
    with `source`, that source's group alone (a source's page)."""
    now = now or timezone.now()
    current = Delivery.objects.filter(status=Delivery.Status.CURRENT)
    sources = BillingSource.objects.order_by("name")
    if source is not None:
        current = current.filter(import_run__source=source)
        sources = sources.filter(pk=source.pk)
    newest = (
        current.exclude(max_usage_period_end=None)
        .values("import_run__source_id", "billing_account_id")
        .annotate(as_of=Max("max_usage_period_end"))
        .order_by("billing_account_id")
    )
    by_source: dict[int | None, list[tuple[str, datetime]]] = {}
    for row in newest:
        by_source.setdefault(row["import_run__source_id"], []).append(
            (row["billing_account_id"], row["as_of"])
        )
    groups = [
        _group(item, item.name, item.lag_days, by_source.pop(item.pk, []), now) for item in sources
    ]
    # Deliveries of runs without a source: uploads, the command line, or a source since deleted.
    orphans = [item for rows in by_source.values() for item in rows]
    if orphans:
        groups.append(_group(None, UPLOADS, settings.BILLING_FRESHNESS_LAG_DAYS, orphans, now))
    return groups


def _group(
    source: BillingSource | None,
    name: str,
    lag_days: int,
    rows: list[tuple[str, datetime]],
    now: datetime,
) -> SourceFreshness:
    newest: dict[str, datetime] = {}
    for account, as_of in rows:
        # Stored at the ends of time or in the future, a moment is shown clamped (costsite/dates).
        as_of = as_of_shown(as_of, now=now)
        newest[account] = max(as_of, newest.get(account, as_of))
    limit = now - timedelta(days=lag_days)
    accounts = [
        AccountFreshness(
            billing_account_id=account,
            data_as_of=as_of,
            lag_days=lag_days,
            lagging=as_of < limit,
            days_behind=max((now - as_of).days, 0),
        )
        for account, as_of in sorted(newest.items())
    ]
    return SourceFreshness(source=source, name=name, lag_days=lag_days, accounts=accounts)


def overall_as_of(groups: list[SourceFreshness]) -> datetime | None:
    return max((g.data_as_of for g in groups if g.data_as_of), default=None)


@dataclass(frozen=True)
class OldestAccount:
    """What the spend pages say of freshness: the account furthest behind, of how many."""

    billing_account_id: str
    data_as_of: datetime
    lagging: bool
    accounts: int


def oldest_account(*, now: datetime | None = None) -> OldestAccount | None:
    accounts = [a for group in freshness(now=now) for a in group.accounts]
    if not accounts:
        return None
    oldest = min(accounts, key=lambda a: (a.data_as_of, a.billing_account_id))
    return OldestAccount(
        billing_account_id=oldest.billing_account_id,
        data_as_of=oldest.data_as_of,
        lagging=oldest.lagging,
        accounts=len({a.billing_account_id for a in accounts}),
    )


@dataclass(frozen=True)
class LagWarning:
    group: str
    billing_account_id: str
    data_as_of: datetime
    lag_days: int


def lag_warnings(*, now: datetime | None = None) -> list[LagWarning]:
    """The accounts whose data lags, for the overview's warning line."""
    return [
        LagWarning(
            group=group.name,
            billing_account_id=account.billing_account_id,
            data_as_of=account.data_as_of,
            lag_days=account.lag_days,
        )
        for group in freshness(now=now)
        for account in group.accounts
        if account.lagging
    ]


# -- what the source pages show ----------------------------------------------------------------


def sources_with_last_poll(*, groups: list[SourceFreshness]) -> list[BillingSource]:
    """Every source with its latest poll as `last_poll` (None before the first) and its group
    of `groups` (from `freshness()`) as `freshness`."""
    latest = SourcePoll.objects.filter(source=OuterRef("pk")).order_by("-started_at", "-pk")
    items = list(
        BillingSource.objects.annotate(last_poll_id=Subquery(latest.values("pk")[:1])).order_by(
            "name"
        )
    )
    polls = SourcePoll.objects.in_bulk([s.last_poll_id for s in items if s.last_poll_id])
    by_source = {group.source.pk: group for group in groups if group.source is not None}
    for item in items:
        item.last_poll = polls.get(item.last_poll_id)
        item.freshness = by_source.get(item.pk)
    return items


def source_polls(*, source: BillingSource) -> QuerySet[SourcePoll]:
    return source.polls.select_related("requested_by")[:DETAIL_POLLS]


def source_deliveries(*, source: BillingSource) -> QuerySet[Delivery]:
    """The deliveries the source's runs loaded, newest period first (replaced ones too, marked)."""
    return (
        Delivery.objects.filter(import_run__source=source)
        .exclude(status=Delivery.Status.LOADING)
        .select_related("import_run")
        .order_by("-billing_period_start", "billing_account_id", "-pk")[:DETAIL_DELIVERIES]
    )
