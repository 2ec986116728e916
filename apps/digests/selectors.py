"""Reads of the digests app: what a person's next digest says (built from the insights and spend
selectors, the same reads the waste and spend pages make), and the alerts of a project."""

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.db.models import F, QuerySet

from apps.accounts.models import Membership, Organization
from apps.accounts.templatetags.costsite import money
from apps.deployments.models import Deployment
from apps.experiments.models import Experiment
from apps.insights.models import NOT_WASTE_KINDS, Finding, Status
from apps.insights.selectors import (
    findings_filtered,
    findings_visible_to,
    realised_savings,
    waste_totals,
    wasted_in_period,
)
from apps.projects.models import Project
from apps.projects.selectors import projects_visible_to
from apps.spend.filters import Period
from apps.spend.selectors import (
    BudgetLine,
    Change,
    SpendScope,
    UnattributedResource,
    UnattributedSummary,
    budget_lines,
    data_as_of,
    last_day_with_data,
    month_summary,
    sees_unattributed,
    spend_changes,
    unattributed_resources,
    unattributed_summary,
)

from .models import Alert, Frequency, Subscription

ZERO = Decimal("0")
TOP_FINDINGS = 10
TOP_MOVERS = 5


def period_of(*, frequency: str, day: date) -> tuple[date, date]:
    """A weekly digest sent on UTC date D covers [D − 7 days, D), a daily one [D − 1 day, D)."""
    days = 7 if frequency == Frequency.WEEKLY else 1
    return day - timedelta(days=days), day


def _chosen(subscription: Subscription) -> list[int]:
    """The projects chosen (none: all); read through a prefetch where the caller made one."""
    return [project.pk for project in subscription.projects.all()]


def subscription_projects(*, subscription: Subscription) -> QuerySet[Project]:
    """The projects a subscription covers: those chosen that the person can still see, or all
    they can see."""
    visible = projects_visible_to(user=subscription.user)
    chosen = _chosen(subscription)
    return visible.filter(pk__in=chosen) if chosen else visible


def digest_findings(*, subscription: Subscription) -> QuerySet[Finding]:
    """The findings a digest reports: what the waste page lists for the same person with status
    "active" (open or acknowledged), the same minimum, narrowed to the chosen projects."""
    findings = findings_filtered(
        findings_visible_to(user=subscription.user),
        status="active",
        minimum=subscription.minimum_amount or None,
    )
    if _chosen(subscription):
        findings = findings.filter(project__in=subscription_projects(subscription=subscription))
    return findings


@dataclass(frozen=True)
class DigestFinding:
    finding: Finding
    wasted: Decimal  # in the period, the organisation's currency
    savings_per_month: Decimal | None

    @property
    def is_waste(self) -> bool:
        """Unattributed spend is a finding (someone should claim it) but not waste."""
        return self.finding.kind not in NOT_WASTE_KINDS


@dataclass(frozen=True)
class ResolvedFinding:
    finding: Finding
    realised_per_month: Decimal | None  # None: not 14 days of bill after the resolution yet


@dataclass(frozen=True)
class Unregistered:
    kind: str  # "experiment" or "deployment"
    pk: int
    name: str
    project: str
    created_at: datetime


@dataclass
class Digest:
    frequency: str
    period_start: date
    period_end: date
    currency: str
    as_of: datetime | None
    covered_end: date  # spend is compared over [period_start, covered_end)
    headline: str
    projects: list[Change]
    spend: Decimal
    spend_before: Decimal
    movers: list[Change]
    budgets: list[BudgetLine]
    findings: list[DigestFinding]
    findings_count: int
    wasted: dict[str, Decimal]
    savings_per_month: dict[str, Decimal]
    resolved: list[ResolvedFinding]
    realised_per_month: dict[str, Decimal]
    unattributed: UnattributedSummary | None
    unattributed_top: list[UnattributedResource]
    unregistered: list[Unregistered] = field(default_factory=list)

    @property
    def period_label(self) -> str:
        return "last week" if self.frequency == Frequency.WEEKLY else "yesterday"

    @property
    def last_day(self) -> date:
        return self.period_end - timedelta(days=1)

    @property
    def lags(self) -> bool:
        """The bill does not cover the whole period yet."""
        return self.covered_end < self.period_end

    @property
    def covered_days(self) -> int:
        return (self.covered_end - self.period_start).days

    @property
    def wasted_amount(self) -> Decimal:
        return self.wasted.get(self.currency, ZERO)

    @property
    def savings_amount(self) -> Decimal:
        return self.savings_per_month.get(self.currency, ZERO)

    @property
    def realised_amount(self) -> Decimal | None:
        return self.realised_per_month.get(self.currency)

    @property
    def spend_change(self) -> Decimal | None:
        if not self.spend_before:
            return None
        return (self.spend - self.spend_before) / self.spend_before

    @property
    def is_empty(self) -> bool:
        """Nothing worth a mail: no spend, no findings, nothing resolved, nothing to claim."""
        return not (
            self.spend
            or self.spend_before
            or self.findings
            or self.resolved
            or (self.unattributed is not None and self.unattributed.amount)
            or self.unregistered
        )


def _covered_end(*, start: date, end: date, as_of: datetime | None) -> date:
    last = last_day_with_data(as_of, today=end - timedelta(days=1))
    if last is None:
        return start
    return max(start, min(end, last + timedelta(days=1)))


def _headline(
    *, label: str, currency: str, wasted: Decimal, top: list[DigestFinding], spend, before
) -> str:
    if wasted > 0:
        line = f"{money(wasted, currency)} was wasted {label}"
        running, count = ZERO, 0
        for item in top:
            running += item.wasted
            count += 1
            if running * 2 >= wasted:
                break
        if count == 1 and top:
            share = top[0].wasted / wasted
            finding = top[0].finding
            subject = finding.resource_id or finding.subject_key
            what = "all" if share >= 1 else f"{share * 100:.0f}%"
            return (
                f"{line}; {what} of it is one finding, {finding.get_kind_display()} on {subject}."
            )
        if running * 2 >= wasted and count < len(top) + 1:
            return f"{line}; half of it is {count} findings."
        return f"{line}."
    if spend or before:
        line = f"Spend {label} was {money(spend, currency)}"
        if before:
            change = (spend - before) / before * 100
            direction = "up" if change >= 0 else "down"
            return f"{line}, {direction} {abs(change):.0f}% on the period before; no waste found."
        return f"{line}; no waste found."
    return f"No spend and no waste {label}."


def digest_build(
    *,
    subscription: Subscription,
    period_start: date,
    period_end: date,
    shared: dict | None = None,
) -> Digest:
    """The digest of `subscription` for `[period_start, period_end)`.

    Waste is the waste page's: the same findings (`digest_findings`), counted once over the same
    days. Spend and its change are compared over the days the bill covers only, so a bill that
    lags reads as "data as of", never as a drop. `shared` keeps, for a run that builds many
    digests, what does not depend on who reads them (the month's figures per project, the
    unattributed spend), so it is read once.
    """
    shared = {} if shared is None else shared
    user = subscription.user
    currency = Organization.get().currency
    projects = subscription_projects(subscription=subscription)
    as_of = data_as_of()
    covered_end = _covered_end(start=period_start, end=period_end, as_of=as_of)
    # The ids first: the selectors below then filter on a plain list rather than repeating the
    # visibility joins in every query (a third of a digest's SQL time on the benchmark).
    finding_ids = list(digest_findings(subscription=subscription).values_list("pk", flat=True))
    findings = Finding.objects.filter(pk__in=finding_ids)
    totals = waste_totals(findings=findings, start=period_start, end=period_end, today=period_end)
    period_wasted = wasted_in_period(findings=findings, start=period_start, end=period_end)
    ranked = sorted(
        (
            (amounts.get(currency, ZERO), pk)
            for pk, amounts in period_wasted.items()
            if amounts.get(currency, ZERO) > 0
        ),
        reverse=True,
    )
    top_ids = [pk for _amount, pk in ranked[:TOP_FINDINGS]]
    by_pk = {f.pk: f for f in Finding.objects.filter(pk__in=top_ids).select_related("project")}
    top = [
        DigestFinding(
            finding=by_pk[pk],
            wasted=amount,
            savings_per_month=(
                Decimal(by_pk[pk].savings_per_month[currency])
                if currency in by_pk[pk].savings_per_month
                else None
            ),
        )
        for amount, pk in ranked[:TOP_FINDINGS]
        if pk in by_pk
    ]
    resolved_findings = findings_visible_to(user=user).filter(
        status=Status.RESOLVED,
        resolved_at__date__gte=period_start,
        resolved_at__date__lt=period_end,
        project__in=projects,
    )
    resolved = []
    for finding in resolved_findings.order_by("-rank_amount", "-pk")[:TOP_FINDINGS]:
        realised = realised_savings(finding=finding, as_of=as_of)
        resolved.append(ResolvedFinding(finding=finding, realised_per_month=realised.get(currency)))
    realised_total: dict[str, Decimal] = {}
    for item in resolved:
        if item.realised_per_month is not None:
            realised_total[currency] = realised_total.get(currency, ZERO) + item.realised_per_month

    scope = SpendScope(currency=currency, projects=projects)
    days = (covered_end - period_start).days
    if days > 0:
        changes = spend_changes(
            scope=scope,
            period=Period(period_start, covered_end),
            names_for=TOP_MOVERS,
            models=False,
        )
        project_changes = changes.projects
        movers = [*changes.experiment_movers(TOP_MOVERS), *changes.deployment_movers(TOP_MOVERS)]
        movers.sort(key=lambda change: (-abs(change.change), change.name))
        movers = movers[:TOP_MOVERS]
    else:
        project_changes, movers = [], []
    spend = sum((change.current for change in project_changes), ZERO)
    before = sum((change.previous for change in project_changes), ZERO)
    # A project's month so far and forecast are its own whoever reads them: read all once.
    month_key = ("month", currency, period_end, as_of)
    if month_key not in shared:
        shared[month_key] = month_summary(
            scope=SpendScope(currency=currency), today=period_end - timedelta(days=1), as_of=as_of
        )
    budgets = budget_lines(projects=projects, summary=shared[month_key])

    unattributed, unattributed_top = None, []
    if sees_unattributed(user=user) and not _chosen(subscription) and days > 0:
        window = Period(period_start, covered_end)
        key = ("unattributed", currency, period_start, covered_end)
        if key not in shared:
            shared[key] = (
                unattributed_summary(period=window, currency=currency),
                unattributed_resources(period=window, currency=currency, limit=5, detail=False),
            )
        unattributed, unattributed_top = shared[key]

    unregistered = [
        Unregistered(kind, row["pk"], row["name"], row["project__name"], row["created_at"])
        for kind, model in (("experiment", Experiment), ("deployment", Deployment))
        for row in model.objects.filter(
            project__in=projects,
            created_at__date__gte=period_start,
            created_at__date__lt=period_end,
            resources__isnull=True,
            tags={},
        )
        .values("pk", "name", "project__name", "created_at")
        .order_by("created_at", "pk")[:10]
    ]

    waste_only = [item for item in top if item.finding.kind not in NOT_WASTE_KINDS]
    label = "last week" if subscription.frequency == Frequency.WEEKLY else "yesterday"
    wasted = totals.wasted.get(currency, ZERO)
    return Digest(
        frequency=subscription.frequency,
        period_start=period_start,
        period_end=period_end,
        currency=currency,
        as_of=as_of,
        covered_end=covered_end,
        headline=_headline(
            label=label,
            currency=currency,
            wasted=wasted,
            top=waste_only,
            spend=spend,
            before=before,
        ),
        projects=project_changes,
        spend=spend,
        spend_before=before,
        movers=movers,
        budgets=budgets,
        findings=top,
        findings_count=len(ranked),
        wasted=totals.wasted,
        savings_per_month=totals.savings_per_month,
        resolved=resolved,
        realised_per_month=realised_total,
        unattributed=unattributed,
        unattributed_top=unattributed_top,
        unregistered=unregistered,
    )


@dataclass(frozen=True)
class Readers:
    """Who sees which projects, read once (two queries) for a run over many subscriptions: the
    digest key of each subscription cost two queries of its own (its visible projects, whether it
    leads a team), as much as a tenth of a run on the benchmark. The same rules as
    `projects_visible_to` and `sees_unattributed`: staff see every project and unattributed
    spend, others their teams' projects, and leads of any team unattributed spend."""

    projects: tuple[int, ...]  # every project
    team_projects: dict[int, tuple[int, ...]]
    teams: dict[int, set[int]]  # user id -> the teams they belong to
    leads: set[int]  # user ids

    def visible(self, user) -> tuple[int, ...]:
        if user.is_staff:
            return self.projects
        return tuple(
            sorted(
                pk
                for team in self.teams.get(user.pk, ())
                for pk in self.team_projects.get(team, ())
            )
        )

    def sees_unattributed(self, user) -> bool:
        return user.is_staff or user.pk in self.leads


def readers_of(subscriptions: list[Subscription]) -> Readers:
    team_projects: dict[int, list[int]] = {}
    projects = []
    for pk, team in Project.objects.values_list("pk", "team_id").order_by("pk"):
        projects.append(pk)
        team_projects.setdefault(team, []).append(pk)
    teams: dict[int, set[int]] = {}
    leads: set[int] = set()
    for user, team, role in Membership.objects.filter(
        user__in=[subscription.user_id for subscription in subscriptions]
    ).values_list("user_id", "team_id", "role"):
        teams.setdefault(user, set()).add(team)
        if role == Membership.Role.LEAD:
            leads.add(user)
    return Readers(
        projects=tuple(projects),
        team_projects={team: tuple(pks) for team, pks in team_projects.items()},
        teams=teams,
        leads=leads,
    )


def digest_view_key(
    *,
    subscription: Subscription,
    period_start: date,
    period_end: date,
    readers: Readers | None = None,
) -> tuple:
    """What a digest's content depends on besides the recipient's name: two subscriptions with
    the same key get the same digest (a lead and a fellow lead of the same team), so sending
    builds it once. `readers` (for many subscriptions) saves its two queries."""
    user = subscription.user
    chosen = _chosen(subscription)
    if readers is None:
        projects = tuple(
            sorted(subscription_projects(subscription=subscription).values_list("pk", flat=True))
        )
        unattributed = sees_unattributed(user=user)
    else:
        visible = readers.visible(user)
        projects = tuple(pk for pk in visible if pk in set(chosen)) if chosen else visible
        unattributed = readers.sees_unattributed(user)
    return (
        subscription.frequency,
        period_start,
        period_end,
        user.is_staff,
        unattributed,
        projects,
        bool(chosen),
        subscription.minimum_amount,
    )


def subscriptions_due(*, frequency: str) -> QuerySet[Subscription]:
    return (
        Subscription.objects.filter(active=True, frequency=frequency, user__is_active=True)
        .exclude(user__email="")
        .select_related("user")
        .prefetch_related("projects")
        .order_by("pk")
    )


def project_alerts(*, project: Project, limit: int = 10) -> list[Alert]:
    """The project's alerts, open ones first, newest first."""
    return list(
        Alert.objects.filter(project=project).order_by(
            F("cleared_at").desc(nulls_first=True), "-opened_at", "-pk"
        )[:limit]
    )
