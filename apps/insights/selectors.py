"""Reads of the insights app: which findings a user sees and may act on, the waste of a period,
counted once, and realised savings."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.db.models import Q, QuerySet, Sum
from django.http import Http404

from apps.accounts.selectors import teams_led_by

# Spend reads (the integrator points these at apps.spend).
from apps.billing.models import DailyResourceCost
from apps.projects.selectors import projects_editable_by, projects_visible_to
from apps.spend.selectors import data_as_of as billing_data_as_of

from .compute import day_start
from .models import PRECEDENCE, Finding, FindingHour, Status


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
    condition = Q(project__in=projects_visible_to(user=user))
    if teams_led_by(user=user).exists():
        condition |= Q(project__isnull=True)
    return findings.filter(condition)


def can_act_on(*, user, finding: Finding) -> bool:
    if user.is_staff:
        return True
    if finding.project_id is None:
        return teams_led_by(user=user).exists()
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
        findings = findings.filter(status__in=[Status.OPEN, Status.ACKNOWLEDGED])
    elif status:
        findings = findings.filter(status=status)
    if minimum is not None:
        findings = findings.filter(rank_amount__gte=minimum)
    return findings.order_by("-rank_amount", "-pk")


def wasted_in_period(
    *, findings: QuerySet[Finding], start: date, end: date
) -> dict[int, dict[str, Decimal]]:
    """Each finding's wasted in `[start, end)`, per currency."""
    wasted: dict[int, dict[str, Decimal]] = defaultdict(dict)
    for row in (
        FindingHour.objects.filter(
            finding__in=findings, hour__gte=day_start(start), hour__lt=day_start(end)
        )
        .values("finding_id", "currency")
        .annotate(wasted=Sum("wasted"))
        .order_by()
    ):
        if row["wasted"]:
            wasted[row["finding_id"]][row["currency"]] = row["wasted"]
    return wasted


@dataclass(frozen=True)
class WasteTotals:
    wasted: dict[str, Decimal]  # counted once, per currency
    savings_per_month: dict[str, Decimal]  # per subject, the largest lever
    realised_per_month: dict[str, Decimal]


def waste_totals(
    *, findings: QuerySet[Finding], start: date | None, end: date | None, today: date
) -> WasteTotals:
    """Wasted counting each dollar of a line-hour once: where findings share a line key, hour and
    currency, they are taken in order of precedence and each adds only what the ones before it
    left of the line-hour's spend."""
    hours = FindingHour.objects.filter(finding__in=findings, wasted__gt=0)
    if start is not None:
        hours = hours.filter(hour__gte=day_start(start))
    if end is not None:
        hours = hours.filter(hour__lt=day_start(end))
    shared: dict[tuple, list[tuple[int, Decimal, Decimal]]] = defaultdict(list)
    for line_key, hour, currency, kind, amount, spend in hours.values_list(
        "line_key", "hour", "currency", "finding__kind", "wasted", "spend"
    ).iterator(chunk_size=20_000):
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
    savings: dict[str, Decimal] = defaultdict(Decimal)
    per_subject: dict[tuple[str, str], Decimal] = {}
    for finding in findings.exclude(savings_per_month={}):
        for currency, amount in finding.savings_per_month.items():
            key = (finding.resource_id or finding.subject_key, currency)
            # Levers on one subject exclude each other: the largest counts.
            per_subject[key] = max(per_subject.get(key, Decimal("0")), Decimal(amount))
    for (_subject, currency), amount in per_subject.items():
        savings[currency] += amount
    realised: dict[str, Decimal] = defaultdict(Decimal)
    as_of = data_as_of()
    for finding in findings.filter(status=Status.RESOLVED, resolved_at__isnull=False):
        for currency, amount in realised_savings(finding=finding, as_of=as_of).items():
            realised[currency] += amount
    return WasteTotals(dict(wasted), dict(savings), dict(realised))


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
    return user.is_staff or teams_led_by(user=user).exists()
