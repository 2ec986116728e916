"""Reads of the digests app: what a person's next digest says (built from the insights and spend
selectors, the same reads the waste and spend pages make), and the alerts of a project."""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.db.models import Case, F, Q, QuerySet, Sum, Value, When

from apps.accounts.models import Membership, Organization
from apps.accounts.templatetags.costsite import money
from apps.deployments.models import Deployment
from apps.experiments.models import Experiment
from apps.insights.compute import day_start
from apps.insights.models import NOT_WASTE_KINDS, PRECEDENCE, Finding, FindingHour, Status
from apps.insights.selectors import findings_filtered, findings_visible_to, realised_savings
from apps.projects.models import Project
from apps.projects.selectors import projects_visible_to
from apps.spend.filters import Period
from apps.spend.selectors import (
    MONEY,
    BudgetLine,
    Change,
    SpendChanges,
    SpendScope,
    UnattributedResource,
    UnattributedSummary,
    budget_lines,
    data_as_of,
    last_day_with_data,
    month_summary,
    movers,
    pareto,
    rollup_query,
    sees_unattributed,
    unattributed_resources,
    unattributed_summary,
)

from .models import Alert, Frequency, Subscription

ZERO = Decimal("0")
TOP_FINDINGS = 10
TOP_MOVERS = 5
INSTANCES_FIRST = 500  # findings read at once the first time a digest lists some (DigestReads)


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


class DigestReads:
    """What the digests of one period read, read once for all their readers.

    A run sends many digests of one period that differ only in whose projects and findings they
    add up; each digest made about 20 queries of its own (the waste page's and the spend pages'
    selectors over its projects), most of a run's time. Here the same rows are read once for
    everyone in scope: the active findings, their hours in the period (the waste page's counted
    once, `wasted_counted_once`, is then worked out per digest over its own findings, the same
    rule over the same rows), the resolved ones, the rollup's spend of the period and the one
    before by project and owner (`spend_changes`' grouped query, unscoped: each digest adds up its
    projects' rows), the month's figures and the new runs without resources. `projects` None is
    everyone's (a run); a tuple scopes the reads to those projects (one person's preview), with
    findings of no project when `unattributed`.
    """

    def __init__(
        self,
        *,
        period_start: date,
        period_end: date,
        projects: tuple[int, ...] | None = None,
        unattributed: bool = True,
    ):
        self.period_start, self.period_end = period_start, period_end
        self.currency = Organization.get().currency
        self.as_of = data_as_of()
        self.covered_end = _covered_end(start=period_start, end=period_end, as_of=self.as_of)
        self.days = (self.covered_end - period_start).days
        self.projects = projects
        self.shared: dict = {}  # unattributed spend, per window
        self._spend: dict[tuple[int, ...], tuple[list[Change], list[Change]]] = {}
        self._budgets: dict[tuple[int, ...], list[BudgetLine]] = {}
        self._budget_lines: list[BudgetLine] | None = None
        self._counted: dict[frozenset[int], dict[str, Decimal]] = {}
        self._instances: dict[int, Finding] = {}
        self._names: dict[str, dict[int, dict]] = {"experiment": {}, "deployment": {}}
        self._realised: dict[int, dict[str, Decimal]] = {}
        self._findings_read(unattributed=unattributed)
        self._spend_read()
        self.month = month_summary(
            scope=SpendScope(currency=self.currency),
            today=period_end - timedelta(days=1),
            as_of=self.as_of,
        )
        self._unregistered_read()

    def _scoped(self, model, *, unattributed: bool = False) -> QuerySet:
        rows = model.objects.all()
        if self.projects is None:
            return rows if unattributed else rows.filter(project__isnull=False)
        seen = Q(project_id__in=self.projects)
        return rows.filter(seen | Q(project__isnull=True) if unattributed else seen)

    # -- Findings ---------------------------------------------------------------------------

    def _findings_read(self, *, unattributed: bool) -> None:
        active = self._scoped(Finding, unattributed=unattributed).filter(
            status__in=[Status.OPEN, Status.ACKNOWLEDGED]
        )
        # pk -> (project id, kind, rank amount, subject, savings per month)
        self.active = {
            pk: (project, kind, rank, resource_id or subject_key, savings)
            for pk, project, kind, rank, resource_id, subject_key, savings in active.values_list(
                "pk",
                "project_id",
                "kind",
                "rank_amount",
                "resource_id",
                "subject_key",
                "savings_per_month",
            )
        }
        hours = FindingHour.objects.filter(
            finding__in=active,
            hour__gte=day_start(self.period_start),
            hour__lt=day_start(self.period_end),
        )
        # Each finding's wasted in the period (`wasted_in_period`).
        self.period_wasted: dict[int, dict[str, Decimal]] = defaultdict(dict)
        for finding, currency, amount in (
            hours.values("finding_id", "currency")
            .annotate(wasted=Sum("wasted"))
            .order_by()
            .values_list("finding_id", "currency", "wasted")
        ):
            if amount:
                self.period_wasted[finding][currency] = amount
        # The rows `wasted_counted_once` reads, by line-hour: a line-hour that one finding alone
        # holds adds its wasted whatever else a digest counts, so those are summed per finding
        # here; the shared ones are counted per digest, among its findings only.
        line_hours: dict[tuple, list[tuple[int, int, Decimal, Decimal]]] = defaultdict(list)
        for finding, line_key, hour, currency, amount, spend in (
            hours.filter(wasted__gt=0)
            .exclude(finding__kind__in=NOT_WASTE_KINDS)
            .values_list("finding_id", "line_key", "hour", "currency", "wasted", "spend")
            .iterator(chunk_size=20_000)
        ):
            rank = PRECEDENCE[self.active[finding][1]]
            line_hours[(line_key, hour, currency)].append((finding, rank, amount, spend))
        self._alone: dict[int, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
        self._shared_hours: list[tuple[str, list[tuple[int, int, Decimal, Decimal]]]] = []
        self._shared_of: dict[int, list[int]] = defaultdict(list)
        for (_line, _hour, currency), rows in line_hours.items():
            if len(rows) == 1:
                self._alone[rows[0][0]][currency] += rows[0][2]
                continue
            index = len(self._shared_hours)
            self._shared_hours.append((currency, rows))
            for finding in {row[0] for row in rows}:
                self._shared_of[finding].append(index)
        resolved = self._scoped(Finding).filter(
            status=Status.RESOLVED,
            resolved_at__date__gte=self.period_start,
            resolved_at__date__lt=self.period_end,
        )
        self.resolved = list(
            resolved.select_related("project", "experiment", "deployment").order_by(
                "-rank_amount", "-pk"
            )
        )

    def findings_of(
        self, *, visible: tuple[int, ...], unattributed: bool, chosen: bool, minimum
    ) -> list[int]:
        """The pks `digest_findings` gives: what the waste page lists for that reader with
        status "active", the same minimum, narrowed to the chosen projects (then `visible`)."""
        seen = set(visible)
        return [
            pk
            for pk, (project, _kind, rank, _subject, _savings) in self.active.items()
            if (project in seen if project is not None else unattributed and not chosen)
            and (not minimum or rank >= minimum)
        ]

    def counted_once(self, findings: list[int]) -> dict[str, Decimal]:
        """`wasted_counted_once` over these findings (the waste kinds among them)."""
        waste = frozenset(pk for pk in findings if self.active[pk][1] not in NOT_WASTE_KINDS)
        if waste in self._counted:
            return self._counted[waste]
        wasted: dict[str, Decimal] = defaultdict(Decimal)
        for pk in waste:
            for currency, amount in self._alone.get(pk, {}).items():
                wasted[currency] += amount
        for index in sorted({index for pk in waste for index in self._shared_of.get(pk, ())}):
            currency, every = self._shared_hours[index]
            rows = [row for row in every if row[0] in waste]
            if len(rows) == 1:
                wasted[currency] += rows[0][2]
                continue
            cap = max(spend for _pk, _rank, _amount, spend in rows)
            counted = ZERO
            for _pk, _rank, amount, _spend in sorted(rows, key=lambda row: row[1]):
                counted += min(amount, cap - counted)
            wasted[currency] += counted
        self._counted[waste] = dict(wasted)
        return self._counted[waste]

    def savings_per_month(self, findings: list[int]) -> dict[str, Decimal]:
        """`waste_totals`' savings per month: per subject the largest lever, summed."""
        per_subject: dict[tuple[str, str], Decimal] = {}
        for pk in findings:
            _project, _kind, _rank, subject, savings = self.active[pk]
            for currency, amount in (savings or {}).items():
                key = (subject, currency)
                per_subject[key] = max(per_subject.get(key, ZERO), Decimal(amount))
        savings: dict[str, Decimal] = defaultdict(Decimal)
        for (_subject, currency), amount in per_subject.items():
            savings[currency] += amount
        return dict(savings)

    def instances(self, pks: list[int]) -> dict[int, Finding]:
        """The findings themselves (with their project), read once whoever lists them."""
        missing = [pk for pk in pks if pk not in self._instances]
        if missing and not self._instances:
            # The first time, with the findings that waste most in the period: any digest's top
            # findings are mostly among them, so few digests need a query of their own.
            largest = sorted(
                self.period_wasted,
                key=lambda pk: -self.period_wasted[pk].get(self.currency, ZERO),
            )
            missing = sorted(set(missing) | set(largest[:INSTANCES_FIRST]))
        if missing:
            for finding in Finding.objects.filter(pk__in=missing).select_related("project"):
                self._instances[finding.pk] = finding
        return {pk: self._instances[pk] for pk in pks if pk in self._instances}

    def realised(self, finding: Finding) -> dict[str, Decimal]:
        if finding.pk not in self._realised:
            self._realised[finding.pk] = realised_savings(finding=finding, as_of=self.as_of)
        return self._realised[finding.pk]

    # -- Spend ------------------------------------------------------------------------------

    def _spend_read(self) -> None:
        """`spend_changes`' grouped rows, for every project in scope at once."""
        self.names = {
            row["pk"]: row for row in Project.objects.values("pk", "name", "slug", "team__name")
        }
        self.spend_rows: list[tuple[int, int | None, int | None, Decimal, Decimal]] = []
        if self.days <= 0:
            return
        period = Period(self.period_start, self.covered_end)
        previous = period.previous
        scoped = None if self.projects is None else tuple(sorted(self.projects))
        scope = SpendScope(currency=self.currency, project_ids=scoped)
        sums = {
            "current": Sum(
                Case(When(day__gte=period.start, then=F("effective_cost")), default=Value(ZERO)),
                output_field=MONEY,
            ),
            "previous": Sum(
                Case(When(day__lt=period.start, then=F("effective_cost")), default=Value(ZERO)),
                output_field=MONEY,
            ),
        }
        query = rollup_query(
            scope.q() & Q(billing_currency=self.currency),
            Period(previous.start, period.end),
            lambda rows: (
                rows.values("project_id", "experiment_id", "deployment_id")
                .annotate(**sums)
                .order_by()
            ),
            cuts=(period.start,),
        )
        if query is not None:
            self.spend_rows = [
                (
                    row["project_id"],
                    row["experiment_id"],
                    row["deployment_id"],
                    row["current"],
                    row["previous"],
                )
                for row in query
            ]

    def spend(self, projects: tuple[int, ...]) -> tuple[list[Change], list[Change]]:
        """`spend_changes` over these projects: each project's change and the top movers."""
        if projects in self._spend:
            return self._spend[projects]
        if self.days <= 0:
            self._spend[projects] = ([], [])
            return self._spend[projects]
        seen = set(projects)
        totals: dict[str, dict[int, list[Decimal]]] = {
            "project": defaultdict(lambda: [ZERO, ZERO]),
            "experiment": defaultdict(lambda: [ZERO, ZERO]),
            "deployment": defaultdict(lambda: [ZERO, ZERO]),
        }
        for project, experiment, deployment, current, before in self.spend_rows:
            if project not in seen:
                continue
            for kind, key in (
                ("project", project),
                ("experiment", experiment),
                ("deployment", deployment),
            ):
                if key is not None:
                    totals[kind][key][0] += current
                    totals[kind][key][1] += before
        project_changes = [
            Change(
                kind="project",
                pk=pk,
                name=self.names[pk]["name"],
                current=current,
                previous=before,
                parent=self.names[pk]["team__name"],
                slug=self.names[pk]["slug"],
            )
            for pk, (current, before) in totals["project"].items()
            if pk in self.names
        ]
        project_changes.sort(key=lambda change: (-change.current, change.name))
        changes = SpendChanges(
            projects=project_changes,
            experiments=self._named("experiment", totals["experiment"]),
            deployments=self._named("deployment", totals["deployment"]),
            models=pareto(noun="models", amounts=[]),
        )
        top = [*changes.experiment_movers(TOP_MOVERS), *changes.deployment_movers(TOP_MOVERS)]
        top.sort(key=lambda change: (-abs(change.change), change.name))
        self._spend[projects] = (project_changes, top[:TOP_MOVERS])
        return self._spend[projects]

    def _named(self, kind: str, totals: dict[int, list[Decimal]]) -> list[Change]:
        """`spend_changes`' largest changes of one kind (`names_for` TOP_MOVERS), named."""
        moved = [(pk, now, before) for pk, (now, before) in totals.items() if now != before]
        ranked = sorted(
            moved,
            key=lambda item: (-abs(item[1] - item[2]), item[0]),
        )[:TOP_MOVERS]
        names = self._names[kind]
        if not names:  # every owner with spend in the rows, named in one query
            column = 1 if kind == "experiment" else 2
            wanted = {row[column] for row in self.spend_rows if row[column] is not None}
            missing = [pk for pk, *_ in ranked] + sorted(wanted)
        else:
            missing = [pk for pk, *_ in ranked if pk not in names]
        if missing:
            model, parent = {
                "experiment": (Experiment, "project__name"),
                "deployment": (Deployment, "model__name"),
            }[kind]
            for row in model.objects.filter(pk__in=missing).values("pk", "name", parent):
                names[row["pk"]] = {"name": row["name"], "parent": row[parent] or ""}
        return movers(
            [
                Change(
                    kind=kind,
                    pk=pk,
                    name=names[pk]["name"],
                    current=current,
                    previous=before,
                    parent=names[pk]["parent"],
                )
                for pk, current, before in ranked
                if pk in names
            ],
            limit=TOP_MOVERS,
        )

    def budgets(self, projects: tuple[int, ...]) -> list[BudgetLine]:
        """`budget_lines` of these projects: the lines of every project in scope, in its order
        (a sort on each line's own figures and name), with those of other projects left out."""
        if self._budget_lines is None:
            scoped = Project.objects.all()
            if self.projects is not None:
                scoped = scoped.filter(pk__in=self.projects)
            self._budget_lines = budget_lines(projects=scoped, summary=self.month)
        if projects not in self._budgets:
            seen = set(projects)
            self._budgets[projects] = [
                line for line in self._budget_lines if line.project.pk in seen
            ]
        return self._budgets[projects]

    def _unregistered_read(self) -> None:
        self.unregistered: dict[str, list[dict]] = {}
        for kind, model in (("experiment", Experiment), ("deployment", Deployment)):
            self.unregistered[kind] = list(
                self._scoped(model)
                .filter(
                    created_at__date__gte=self.period_start,
                    created_at__date__lt=self.period_end,
                    resources__isnull=True,
                    tags={},
                )
                .values("pk", "name", "project_id", "project__name", "created_at")
                .order_by("created_at", "pk")
            )

    def unregistered_of(self, projects: tuple[int, ...]) -> list[Unregistered]:
        seen = set(projects)
        found = []
        for kind in ("experiment", "deployment"):
            rows = [row for row in self.unregistered[kind] if row["project_id"] in seen][:10]
            found += [
                Unregistered(kind, row["pk"], row["name"], row["project__name"], row["created_at"])
                for row in rows
            ]
        return found


def digest_reads(
    *, period_start: date, period_end: date, shared: dict | None, readers: "Readers", user
) -> DigestReads:
    """The reads of a run (kept in `shared`, for everyone), or of one person's digest."""
    if shared is None:
        return DigestReads(
            period_start=period_start,
            period_end=period_end,
            projects=readers.visible(user),
            unattributed=readers.sees_unattributed(user),
        )
    key = ("reads", period_start, period_end)
    if key not in shared:
        shared[key] = DigestReads(period_start=period_start, period_end=period_end)
    return shared[key]


def digest_build(
    *,
    subscription: Subscription,
    period_start: date,
    period_end: date,
    shared: dict | None = None,
    readers: "Readers | None" = None,
) -> Digest:
    """The digest of `subscription` for `[period_start, period_end)`.

    Waste is the waste page's: the same findings (`digest_findings`), counted once over the same
    days. Spend and its change are compared over the days the bill covers only, so a bill that
    lags reads as "data as of", never as a drop. `shared` keeps, for a run that builds many
    digests, the reads of the period (`DigestReads`, for everyone) so that they are made once;
    `readers` (`readers_of`) says who sees what without a query per person.
    """
    user = subscription.user
    readers = readers or readers_of([subscription])
    reads = digest_reads(
        period_start=period_start,
        period_end=period_end,
        shared=shared,
        readers=readers,
        user=user,
    )
    currency, as_of, covered_end = reads.currency, reads.as_of, reads.covered_end
    chosen = set(_chosen(subscription))
    visible = readers.visible(user)
    projects = tuple(pk for pk in visible if pk in chosen) if chosen else visible
    finding_ids = reads.findings_of(
        visible=projects,
        unattributed=readers.sees_unattributed(user),
        chosen=bool(chosen),
        minimum=subscription.minimum_amount,
    )
    ranked = sorted(
        (
            (reads.period_wasted[pk].get(currency, ZERO), pk)
            for pk in finding_ids
            if reads.period_wasted.get(pk, {}).get(currency, ZERO) > 0
        ),
        reverse=True,
    )
    by_pk = reads.instances([pk for _amount, pk in ranked[:TOP_FINDINGS]])
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
    seen = set(projects)
    resolved = [
        ResolvedFinding(finding=finding, realised_per_month=reads.realised(finding).get(currency))
        for finding in [f for f in reads.resolved if f.project_id in seen][:TOP_FINDINGS]
    ]
    realised_total: dict[str, Decimal] = {}
    for item in resolved:
        if item.realised_per_month is not None:
            realised_total[currency] = realised_total.get(currency, ZERO) + item.realised_per_month

    project_changes, top_movers = reads.spend(projects)
    spend = sum((change.current for change in project_changes), ZERO)
    before = sum((change.previous for change in project_changes), ZERO)
    budgets = reads.budgets(projects)

    unattributed, unattributed_top = None, []
    days = reads.days
    if readers.sees_unattributed(user) and not chosen and days > 0:
        window = Period(period_start, covered_end)
        key = ("unattributed", currency, period_start, covered_end)
        if key not in reads.shared:
            reads.shared[key] = (
                unattributed_summary(period=window, currency=currency),
                unattributed_resources(period=window, currency=currency, limit=5, detail=False),
            )
        unattributed, unattributed_top = reads.shared[key]

    waste_only = [item for item in top if item.finding.kind not in NOT_WASTE_KINDS]
    label = "last week" if subscription.frequency == Frequency.WEEKLY else "yesterday"
    wasted = dict(reads.counted_once(finding_ids))
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
            wasted=wasted.get(currency, ZERO),
            top=waste_only,
            spend=spend,
            before=before,
        ),
        projects=project_changes,
        spend=spend,
        spend_before=before,
        movers=top_movers,
        budgets=budgets,
        findings=top,
        findings_count=len(ranked),
        wasted=wasted,
        savings_per_month=reads.savings_per_month(finding_ids),
        resolved=resolved,
        realised_per_month=realised_total,
        unattributed=unattributed,
        unattributed_top=unattributed_top,
        unregistered=reads.unregistered_of(projects),
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
