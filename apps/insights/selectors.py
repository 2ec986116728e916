"""Reads of the insights app: which findings a user sees and may act on, the waste of a period,
counted once, and realised savings."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import Count, Max, Q, QuerySet, Sum
from django.http import Http404

from apps.accounts.guards import is_staff_or_lead
from apps.accounts.selectors import leads_a_team

# Spend reads (the integrator points these at apps.spend).
from apps.billing.models import DailyResourceCost
from apps.projects.selectors import projects_editable_by, visible_project_ids
from apps.spend.selectors import data_as_of as billing_data_as_of
from costsite.months import month_start, next_month_start
from costsite.plans import serial_plans

from .compute import day_start
from .days import day_rollup_used
from .figures import cached_findings, cached_findings_by
from .models import (
    NOT_WASTE_KINDS,
    PRECEDENCE,
    Finding,
    FindingDay,
    FindingHour,
    FindingMonth,
    FindingShareDay,
    FindingSharedHour,
    FindingShareMember,
    Kind,
    Status,
)

ACTIVE = (Status.OPEN, Status.ACKNOWLEDGED)  # the findings still to act on
# A subject with at most this many findings (a GPU's instance, a run, a deployment: a handful) has
# them read whole and its section worked out from one statement of sums (_named_section).
NAMED_UP_TO = 100


def data_as_of() -> datetime | None:
    return billing_data_as_of()


def default_period(*, as_of: datetime | None, today: date) -> tuple[date, date]:
    """The 30 days ending at the bill's "data as of" (else today)."""
    end = as_of.date() if as_of is not None else today + timedelta(days=1)
    if as_of is not None and (as_of.hour or as_of.minute or as_of.second):
        end += timedelta(days=1)
    return end - timedelta(days=30), end


def findings_visible_to(*, user) -> QuerySet[Finding]:
    """Staff: all. Others: their teams' projects' findings; leads also those without a project
    (unattributed spend is visible to staff and leads)."""
    findings = Finding.objects.select_related("project", "experiment", "deployment")
    if user.is_staff:
        return findings
    # The ids rather than a subquery naming the user: a team shares its cached findings figures.
    condition = Q(project_id__in=visible_project_ids(user=user))
    if leads_a_team(user=user):
        condition |= Q(project__isnull=True)
    return findings.filter(condition)


def can_act_on(*, user, finding: Finding) -> bool:
    if user.is_staff:
        return True
    if finding.project_id is None:
        return leads_a_team(user=user)
    return projects_editable_by(user=user).filter(pk=finding.project_id).exists()


def finding_for_user(*, user, pk: int) -> Finding:
    finding = findings_visible_to(user=user).filter(pk=pk).first()
    if finding is None:
        raise Http404("No such finding.")
    return finding


def findings_filtered(
    findings: QuerySet[Finding],
    *,
    kind: str = "",
    project: str = "",
    team: str = "",
    status: str = "",
    minimum: Decimal | None = None,
) -> QuerySet[Finding]:
    if kind:
        findings = findings.filter(kind=kind)
    if project:
        findings = findings.filter(project__slug=project)
    if team:
        findings = findings.filter(project__team__slug=team)
    if status == "active":
        findings = findings.filter(status__in=ACTIVE)
    elif status:
        findings = findings.filter(status=status)
    if minimum is not None:
        findings = findings.filter(rank_amount__gte=minimum)
    return findings.order_by("-rank_amount", "-pk")


def period_rows(findings: QuerySet[Finding], *, start: date | None, end: date | None):
    """The findings' rows of `[start, end)` (None: unbounded) with `finding_id`, `currency` and
    `wasted`: their days (FindingDay) where the recompute keeps them, else their hours."""
    if day_rollup_used():
        rows = FindingDay.objects.filter(finding__in=findings)
        if start is not None:
            rows = rows.filter(day__gte=start)
        if end is not None:
            rows = rows.filter(day__lt=end)
        return rows
    rows = FindingHour.objects.filter(finding__in=findings)
    if start is not None:
        rows = rows.filter(hour__gte=day_start(start))
    if end is not None:
        rows = rows.filter(hour__lt=day_start(end))
    return rows


def _period_parts(findings: QuerySet[Finding], *, start: date | None, end: date | None):
    """Querysets of the findings' rows (`finding_id`, `currency`, `wasted`) that cover `[start,
    end)` once between them: on PostgreSQL the whole months it holds from their months
    (FindingMonth), its ragged ends from their days; elsewhere their hours (period_rows)."""
    if not day_rollup_used():
        return [period_rows(findings, start=start, end=end)]
    first = start if start is None or start.day == 1 else next_month_start(start)
    last = None if end is None else month_start(end)
    if first is not None and last is not None and first >= last:  # no whole month in it
        return [period_rows(findings, start=start, end=end)]
    months = FindingMonth.objects.filter(finding__in=findings)
    if first is not None:
        months = months.filter(month__gte=first)
    if last is not None:
        months = months.filter(month__lt=last)
    parts = [months]
    if start is not None and start < first:
        parts.append(period_rows(findings, start=start, end=first))
    if end is not None and last < end:
        parts.append(period_rows(findings, start=last, end=end))
    return parts


def period_sums(
    findings: QuerySet[Finding],
    *,
    start: date | None,
    end: date | None,
    by: tuple[str, ...],
    field: str = "wasted",
) -> list[tuple]:
    """`field` of the findings summed over `[start, end)` per `by` (columns of the rows), as
    tuples of `by`'s values and the sum in `by`'s order (currencies shown in a steady order),
    in one statement, cached while the findings stay as they are."""
    parts = [
        part.values(*by).annotate(amount=Sum(field)).order_by()
        for part in _period_parts(findings, start=start, end=end)
    ]
    return cached_findings("sums", parts, lambda: _sums(parts, by=by))


def _sums(parts: list[QuerySet], *, by: tuple[str, ...]) -> list[tuple]:
    if len(parts) == 1:  # through the ORM: SQLite's decimal sums are made exact by its converters
        rows = parts[0].order_by(*by)
        return [(*(row[column] for column in by), row["amount"]) for row in rows]
    try:
        sql, params = _union(parts)
    except EmptyResultSet:  # findings `pk__in=[]`: nothing to sum
        return []
    columns = ", ".join(connection.ops.quote_name(column) for column in by)
    with serial_plans(), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {columns}, sum(amount) FROM ({sql}) AS parts GROUP BY {columns}"
            f" ORDER BY {columns}",
            params,
        )
        return cursor.fetchall()


def _union(parts: list[QuerySet]) -> tuple[str, list]:
    """The parts' SQL as one UNION ALL (PostgreSQL) and its parameters."""
    compiled = [part.query.sql_with_params() for part in parts]
    sql = " UNION ALL ".join(f"({part_sql})" for part_sql, _ in compiled)
    return sql, [param for _, part_params in compiled for param in part_params]


def findings_count(findings: QuerySet[Finding]) -> int:
    """How many findings `findings` holds (cached while the findings stay as they are)."""
    return cached_findings("count", findings, findings.count)


def wasted_in_period(
    *, findings: QuerySet[Finding], start: date | None, end: date
) -> dict[int, dict[str, Decimal]]:
    """Each finding's wasted in `[start, end)` (`start` None: since the first), per currency."""
    wasted: dict[int, dict[str, Decimal]] = defaultdict(dict)
    by = ("finding_id", "currency")
    for finding_id, currency, amount in period_sums(findings, start=start, end=end, by=by):
        if amount:
            wasted[finding_id][currency] = amount
    return wasted


def wasted_counted_once(
    *, findings: QuerySet[Finding], start: date | None, end: date | None
) -> dict[str, Decimal]:
    """Wasted counting each dollar of a line-hour once: where findings share a line key, hour and
    currency, they are taken in order of precedence and each adds only what the ones before it
    left of the line-hour's spend. Unattributed spend is not waste (`NOT_WASTE_KINDS`).

    Taken in that order, a line-hour's findings add up to the least of their wasted summed and
    the line-hour's spend (the largest any of them holds), whatever the order; a line-hour one
    finding alone holds counts its wasted. On PostgreSQL the days' wasted that no other finding
    shares are summed as they are (FindingDay.alone), and only the hours two findings share are
    taken per line-hour (FindingSharedHour), in SQL; elsewhere (SQLite, whose sums are floating
    point) every hour is added here, exactly."""
    waste = findings.exclude(kind__in=NOT_WASTE_KINDS)
    if day_rollup_used():
        return _counted_once_days(waste, start=start, end=end)
    hours = FindingHour.objects.filter(finding__in=waste, wasted__gt=0)
    if start is not None:
        hours = hours.filter(hour__gte=day_start(start))
    if end is not None:
        hours = hours.filter(hour__lt=day_start(end))
    return cached_findings("counted-once", hours, lambda: _counted_once(hours))


def _counted_once_days(
    waste: QuerySet[Finding], *, start: date | None, end: date | None
) -> dict[str, Decimal]:
    """wasted_counted_once from the day rollup (apps/insights/days.py): the findings' wasted that
    no other finding shares, their share groups' days where the set holds all of a group's
    findings, and where it holds only some, the group's hours of those findings counted once."""
    touched = FindingShareMember.objects.filter(finding__in=waste).values("group_id")
    outside = FindingShareMember.objects.exclude(finding__in=waste).values("group_id")
    whole = FindingShareDay.objects.filter(group__in=touched).exclude(group__in=outside)
    if start is not None:
        whole = whole.filter(day__gte=start)
    if end is not None:
        whole = whole.filter(day__lt=end)
    whole = whole.values("currency").annotate(amount=Sum("counted"))
    wasted: dict[str, Decimal] = defaultdict(Decimal)
    alone = period_sums(waste, start=start, end=end, by=("currency",), field="alone")
    for currency, amount in alone:
        wasted[currency] += amount or Decimal("0")
    whole = whole.order_by("currency")
    for row in cached_findings("rows", whole, lambda: list(whole)):
        wasted[row["currency"]] += row["amount"] or Decimal("0")
    # The groups only some of whose findings are in the set (none for staff, few for a team):
    # named first, so that their hours are read by the group index.
    split = touched.filter(group_id__in=outside).distinct().order_by("group_id")
    split_groups = cached_findings("ids", split, lambda: [row["group_id"] for row in split])
    if split_groups:
        partly = FindingSharedHour.objects.filter(finding__in=waste, group_id__in=split_groups)
        if start is not None:
            partly = partly.filter(hour__gte=day_start(start))
        if end is not None:
            partly = partly.filter(hour__lt=day_start(end))
        for currency, amount in cached_findings(
            "counted-once", partly, lambda: _counted_once_sql(partly)
        ).items():
            wasted[currency] += amount or Decimal("0")
    return {currency: amount for currency, amount in wasted.items() if amount}


def _counted_once(hours: QuerySet[FindingHour]) -> dict[str, Decimal]:
    if connection.vendor == "postgresql":
        return _counted_once_sql(hours)
    shared: dict[tuple, list[tuple[int, Decimal, Decimal]]] = defaultdict(list)
    for line_key, hour, currency, kind, amount, spend in (
        hours.values_list("line_key", "hour", "currency", "finding__kind", "wasted", "spend")
        .order_by()
        .iterator(chunk_size=20_000)
    ):
        shared[(line_key, hour, currency)].append((PRECEDENCE[kind], amount, spend))
    wasted: dict[str, Decimal] = defaultdict(Decimal)
    for (_line, _hour, currency), rows in shared.items():
        if len(rows) == 1:
            wasted[currency] += rows[0][1]
            continue
        cap = max(spend for _rank, _amount, spend in rows)
        counted = Decimal("0")
        for _rank, amount, _spend in sorted(rows, key=lambda row: row[0]):
            counted += min(amount, cap - counted)
        wasted[currency] += counted
    return dict(wasted)


def _counted_once_sql(hours: QuerySet[FindingHour]) -> dict[str, Decimal]:
    line_hours = (
        hours.values("line_key", "hour", "currency")
        .annotate(findings=Count("id"), wasted_sum=Sum("wasted"), spend_cap=Max("spend"))
        .order_by()
    )
    try:
        sql, params = line_hours.query.sql_with_params()
    except EmptyResultSet:  # findings `pk__in=[]`: no SQL to wrap, and nothing wasted
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT currency, sum(CASE WHEN findings = 1 THEN wasted_sum
                                          ELSE least(wasted_sum, spend_cap) END)
                FROM ({sql}) AS line_hours GROUP BY currency""",
            params,
        )
        return {currency: amount for currency, amount in cursor.fetchall()}


@dataclass(frozen=True)
class WasteTotals:
    wasted: dict[str, Decimal]  # counted once, per currency
    unattributed: dict[str, Decimal]  # what the unattributed findings hold, beside wasted
    savings_per_month: dict[str, Decimal]  # per subject, the largest lever
    realised_per_month: dict[str, Decimal]


def waste_totals(
    *, findings: QuerySet[Finding], start: date | None, end: date | None, today: date
) -> WasteTotals:
    """Wasted counted once (`wasted_counted_once`), savings per month (per subject, the largest
    lever) and realised savings of the findings."""
    wasted = wasted_counted_once(findings=findings, start=start, end=end)
    unattributed_findings = findings.filter(kind=Kind.UNATTRIBUTED)
    unattributed = {
        currency: amount
        for currency, amount in period_sums(
            unattributed_findings, start=start, end=end, by=("currency",)
        )
        if amount
    }
    savings: dict[str, Decimal] = defaultdict(Decimal)
    per_subject: dict[tuple[str, str], Decimal] = {}
    levers = findings.exclude(savings_per_month={}).values_list(
        "resource_id", "subject_key", "savings_per_month"
    )
    for resource_id, subject_key, savings_per_month in cached_findings(
        "rows", levers, lambda: list(levers)
    ):
        for currency, amount in savings_per_month.items():
            key = (resource_id or subject_key, currency)
            # Levers on one subject exclude each other: the largest counts.
            per_subject[key] = max(per_subject.get(key, Decimal("0")), Decimal(amount))
    for (_subject, currency), amount in per_subject.items():
        savings[currency] += amount
    realised: dict[str, Decimal] = defaultdict(Decimal)
    as_of = data_as_of()
    resolved = findings.filter(status=Status.RESOLVED, resolved_at__isnull=False)
    for finding in resolved.select_related(None).only("pk", "resource_id", "resolved_at"):
        for currency, amount in realised_savings(finding=finding, as_of=as_of).items():
            realised[currency] += amount
    return WasteTotals(wasted, unattributed, dict(savings), dict(realised))


def realised_savings(*, finding: Finding, as_of: datetime | None) -> dict[str, Decimal]:
    """(Mean daily spend of the subject in the 14 UTC days before the resolution day − the same
    in the 14 days after it) × 30, once 14 days after it are loaded; else {}."""
    if finding.resolved_at is None or as_of is None or not finding.resource_id:
        return {}
    day = finding.resolved_at.date()
    after_end = day + timedelta(days=15)
    if as_of < day_start(after_end):
        return {}
    spans = {
        "before": (day - timedelta(days=14), day),
        "after": (day + timedelta(days=1), after_end),
    }
    sums: dict[str, dict[str, Decimal]] = {"before": {}, "after": {}}
    for name, (first, last) in spans.items():
        for row in (
            DailyResourceCost.objects.filter(
                resource_id=finding.resource_id, day__gte=first, day__lt=last
            )
            .values("billing_currency")
            .annotate(spend=Sum("effective_cost"))
            .order_by()
        ):
            sums[name][row["billing_currency"]] = row["spend"]
    currencies = set(sums["before"]) | set(sums["after"])
    return {
        currency: (
            sums["before"].get(currency, Decimal("0")) - sums["after"].get(currency, Decimal("0"))
        )
        / 14
        * 30
        for currency in sorted(currencies)
    }


def finding_hours(*, finding: Finding) -> list[FindingHour]:
    return list(finding.hours.order_by("hour", "currency"))


def can_act_on_any(*, user) -> bool:
    """Staff and team leads act on findings (bulk actions are shown to them)."""
    return is_staff_or_lead(user=user)


# The findings section other pages show (the overview, a project, a run, a deployment, a GPU) --


@dataclass(frozen=True)
class FindingsSection:
    wasted: dict[str, Decimal]  # in the period, counted once, per currency
    top: list[tuple[Finding, dict[str, Decimal]]]  # open or acknowledged, by wasted in the period
    active: int  # how many findings are open or acknowledged
    query: str  # the waste page's filters that list the same findings


def findings_section(
    *,
    user,
    start: date | None,
    end: date,
    team=None,
    project=None,
    experiment=None,
    deployment=None,
    resource_id: str | None = None,
    kind: str = "",
    limit: int = 5,
) -> FindingsSection:
    """Wasted in `[start, end)` of the findings the user sees about one subject (or all of
    them), and its top open or acknowledged findings.

    Cached whole while the findings and what they join stay as they are, for everyone who sees
    the same findings: a change of spend alone (an import) leaves it, so the first page after an
    import builds none of its queries (they were a sixth of a cold overview)."""
    subject = (team, project, experiment, deployment)
    parts = (
        _findings_viewer(user),
        start,
        end,
        *(None if one is None else one.pk for one in subject),
        resource_id,
        kind,
        limit,
    )
    return cached_findings_by(
        "findings-section",
        parts,
        lambda: _findings_section(
            user=user,
            start=start,
            end=end,
            team=team,
            project=project,
            experiment=experiment,
            deployment=deployment,
            resource_id=resource_id,
            kind=kind,
            limit=limit,
        ),
    )


def _findings_viewer(user) -> tuple:
    """What decides which findings `user` sees (findings_visible_to): everything for staff; else
    the projects seen, and whether they lead a team (the findings nobody owns)."""
    if user.is_staff:
        return ("staff",)
    return (visible_project_ids(user=user), leads_a_team(user=user))


def _findings_section(
    *,
    user,
    start: date | None,
    end: date,
    team,
    project,
    experiment,
    deployment,
    resource_id: str | None,
    kind: str,
    limit: int,
) -> FindingsSection:
    findings = findings_visible_to(user=user)
    # The waste page's range is the spend pages': its last day included.
    query: dict[str, str] = (
        {"start": start.isoformat(), "end": (end - timedelta(days=1)).isoformat()} if start else {}
    )
    if team is not None:
        findings = findings.filter(project__team=team)
        query["team"] = team.slug
    if project is not None:
        findings = findings.filter(project=project)
        query["project"] = project.slug
    if experiment is not None:
        findings = findings.filter(experiment=experiment)
    if deployment is not None:
        findings = findings.filter(deployment=deployment)
    if resource_id is not None:
        findings = findings.filter(resource_id=resource_id)
    if kind:
        findings = findings.filter(kind=kind)
        query["kind"] = kind
    if resource_id is not None or experiment is not None or deployment is not None:
        named = findings.select_related("project").order_by()[: NAMED_UP_TO + 1]
        if len(named) <= NAMED_UP_TO:
            return _named_section(list(named), start=start, end=end, limit=limit, query=query)
    active = findings.filter(status__in=ACTIVE)
    # One transaction whose sums are planned without parallel workers (serial_plans).
    with serial_plans():
        top = _top_in_period(active, start=start, end=end, limit=limit)
        period = wasted_in_period(
            findings=Finding.objects.filter(pk__in=[f.pk for f in top]), start=start, end=end
        )
        return FindingsSection(
            wasted=wasted_counted_once(findings=findings, start=start, end=end),
            top=[(finding, period.get(finding.pk, {})) for finding in top],
            active=cached_findings("count", active, active.count),
            query=_query_string(query),
        )


def _query_string(query: dict[str, str]) -> str:
    return "&".join(f"{key}={value}" for key, value in query.items())


def _named_section(
    named: list[Finding], *, start: date | None, end: date, limit: int, query: dict[str, str]
) -> FindingsSection:
    """The section of a narrow subject's findings, read whole (`named`): their wasted in the
    period per finding and currency in one statement, ranked here as _top_in_period ranks them
    in SQL, and counted here. A busy GPU has no finding on its instance, and its section, nine
    statements that found nothing, took 24-35 ms of a page's first request after a recompute at
    a year of the benchmark organisation; it now reads nothing more. A subject with findings
    reads its findings, their sums and wasted_counted_once's statements (three, or four where a
    share group reaches past the subject): five or six where it read nine. On SQLite the sums
    are exact here and floating point in _ranked's SQL, so findings whose wasted differs only
    past the fifteenth digit may be ordered differently there."""
    if not named:
        return FindingsSection(wasted={}, top=[], active=0, query=_query_string(query))
    findings = Finding.objects.filter(pk__in=[finding.pk for finding in named])
    with serial_plans():
        sums = period_sums(findings, start=start, end=end, by=("finding_id", "currency"))
        wasted = wasted_counted_once(findings=findings, start=start, end=end)
    totals: dict[int, Decimal] = defaultdict(Decimal)
    period: dict[int, dict[str, Decimal]] = defaultdict(dict)
    for finding_id, currency, amount in sums:
        totals[finding_id] += amount or Decimal("0")
        if amount:
            period[finding_id][currency] = amount
    active = [finding for finding in named if finding.status in ACTIVE]
    # Those with rows in the period by their wasted there, then the rest by rank amount; ties by
    # the later id (_ranked, and the rest's order in _top_in_period).
    in_period = sorted(
        (finding for finding in active if finding.pk in totals),
        key=lambda finding: (-totals[finding.pk], -finding.rank_amount, -finding.pk),
    )
    rest = sorted(
        (finding for finding in active if finding.pk not in totals),
        key=lambda finding: (-finding.rank_amount, -finding.pk),
    )
    top = (in_period + rest)[:limit]
    return FindingsSection(
        wasted=wasted,
        top=[(finding, period.get(finding.pk, {})) for finding in top],
        active=len(active),
        query=_query_string(query),
    )


def _top_in_period(
    active: QuerySet[Finding], *, start: date | None, end: date, limit: int
) -> list[Finding]:
    """The `limit` findings with the most wasted in `[start, end)`, ties by rank amount and id
    (as the waste page ranks them), then those with no hour in the period by rank amount: the
    period's hours are summed per finding first (the hour index), not every finding's hours."""
    sums = [
        part.values("finding_id").annotate(period_wasted=Sum("wasted")).order_by()
        for part in _period_parts(active, start=start, end=end)
    ]
    ranked = cached_findings(f"top-{limit}", sums, lambda: _ranked(sums, limit=limit))
    hours = period_rows(active, start=start, end=end)
    if len(ranked) < limit:
        rest = (
            active.exclude(pk__in=hours.values("finding_id"))
            .order_by("-rank_amount", "-pk")
            .values_list("pk", flat=True)[: limit - len(ranked)]
        )
        ranked = ranked + cached_findings("ids", rest, lambda: list(rest))
    found = active.select_related("project").in_bulk(ranked)
    return [found[pk] for pk in ranked if pk in found]


def _ranked(sums: list[QuerySet], *, limit: int) -> list[int]:
    """The ids of the `limit` findings with the most `period_wasted` in `sums` (the period's
    parts, one row per finding each), ties by rank amount and id. Summed first and joined to the
    findings after: the period's days joined to their findings before adding them up took a
    third longer (86,000 days over 12 months at 10M lines)."""
    try:
        if len(sums) == 1:
            sql, params = sums[0].query.sql_with_params()
        else:
            union, params = _union(sums)
            sql = (
                f"SELECT finding_id, sum(period_wasted) AS period_wasted FROM ({union}) AS parts"
                " GROUP BY finding_id"
            )
    except EmptyResultSet:  # findings `pk__in=[]`: no SQL, and nothing ranked
        return []
    findings = connection.ops.quote_name(Finding._meta.db_table)
    with serial_plans(), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT sums.finding_id FROM ({sql}) AS sums"
            f" JOIN {findings} AS finding ON finding.id = sums.finding_id"
            " ORDER BY sums.period_wasted DESC, finding.rank_amount DESC, sums.finding_id DESC"
            " LIMIT %s",
            [*params, limit],
        )
        return [finding_id for (finding_id,) in cursor.fetchall()]


def idle_gpu_dollars(*, user, start: date | None, end: date) -> dict[str, Decimal]:
    """What the idle GPU findings the user sees wasted in the UTC days `[start, end)` (`start`
    None: since the first), per currency: the GPU fleet page's idle dollars beside its idle
    GPU-hours. From the day rollup where the recompute keeps it (a year of hours is millions of
    rows), cached while the findings stay as they are."""
    findings = findings_visible_to(user=user).filter(kind=Kind.IDLE_GPU)
    return {
        currency: amount
        for currency, amount in period_sums(findings, start=start, end=end, by=("currency",))
        if amount
    }
