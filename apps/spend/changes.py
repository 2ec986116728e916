"""Who drives the spend: changes against the period before, movers and Pareto."""

import functools
import operator
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import F, Q, QuerySet, Sum

from apps.billing.models import DailyCost, MonthlyCost
from apps.deployments.models import Deployment, Model
from apps.experiments.models import Experiment
from apps.projects.models import Project
from costsite.months import month_start, next_month_start

from .figures import cached, cached_by
from .filters import Period
from .rollup import (
    MONEY,
    PARETO_SHARE,
    ZERO,
    ZERO_MONEY,
    SpendScope,
    rollup_query,
)


@dataclass(frozen=True)
class Change:
    """One project, experiment or deployment's spend in a period and in the one before."""

    kind: str
    pk: int
    name: str
    current: Decimal
    previous: Decimal
    parent: str = ""  # a project's team, an experiment's project, a deployment's model
    slug: str = ""  # a project's

    @property
    def change(self) -> Decimal:
        return self.current - self.previous

    @property
    def change_share(self) -> Decimal | None:
        return self.change / self.previous if self.previous else None


OWNER_KEYS = ("project_id", "experiment_id", "deployment_id")


@dataclass(frozen=True)
class _Days:
    """Days [start, end) of the daily rollup, counted `current` and `previous` times (1, 0, -1)."""

    start: date
    end: date
    current: int
    previous: int


def two_periods_plan(start: date, cut: date, end: date) -> tuple[dict[date, str], list[_Days]]:
    """How to read a period, [cut, end), and the one before, [start, cut): the months read whole
    from the monthly rollup, each counted to one side ("current" or "previous"), and days.

    A month the range holds whole on one side is read whole. One it holds in part, or that the
    cut splits, is read as its days in the range, unless fewer days are read by counting the
    whole month to the side that holds more of its days and correcting it by the rest of its
    days: those on the other side moved there, those outside the range taken out. A 30-day
    period and the one before, read from 61 days of rows, then read 11 days and two months.
    """
    months: dict[date, str] = {}
    days: list[_Days] = []
    month = month_start(start)
    while month < end:
        following = next_month_start(month)
        before = (max(month, start), min(following, cut))
        after = (max(month, cut), min(following, end))
        held = {
            "previous": max((before[1] - before[0]).days, 0),
            "current": max((after[1] - after[0]).days, 0),
        }
        side = max(held, key=lambda name: (held[name], name == "current"))
        other = "previous" if side == "current" else "current"
        whole = (following - month).days
        if held[side] == whole:
            months[month] = side
        elif whole - held[side] < held[side] + held[other]:
            months[month] = side
            for outside in ((month, max(month, start)), (min(following, end), following)):
                days.append(_Days(*outside, **{side: -1, other: 0}))
            if held[other]:
                moved = after if side == "previous" else before
                days.append(_Days(*moved, **{side: -1, other: 1}))
        else:
            if held["previous"]:
                days.append(_Days(*before, current=0, previous=1))
            if held["current"]:
                days.append(_Days(*after, current=1, previous=0))
        month = following
    return months, [piece for piece in days if piece.start < piece.end]


def _two_periods_query(q: Q, start: date, cut: date, end: date) -> QuerySet:
    """The spend of `q` by project, run and deployment in [cut, end) (`current`) and [start,
    cut) (`previous`), read as two_periods_plan says: one part per side of whole months and
    per kind of days (UNION ALL; _owner_sums adds the parts up)."""
    months, days = two_periods_plan(start, cut, end)

    def counted(times: int):
        if times == 0:
            return ZERO_MONEY
        amount = F("effective_cost") if times == 1 else -F("effective_cost")
        return Sum(amount, output_field=MONEY)

    parts = []
    for side in ("current", "previous"):
        wanted = [month for month, counted_to in months.items() if counted_to == side]
        if wanted:
            rows = MonthlyCost.objects.filter(q & Q(month__in=wanted))
            parts.append(
                rows.values(*OWNER_KEYS)
                .annotate(current=counted(side == "current"), previous=counted(side == "previous"))
                .order_by()
            )
    kinds = sorted({(piece.current, piece.previous) for piece in days}, reverse=True)
    for current, previous in kinds:
        ranges = [
            Q(day__gte=piece.start, day__lt=piece.end)
            for piece in days
            if (piece.current, piece.previous) == (current, previous)
        ]
        rows = DailyCost.objects.filter(q & functools.reduce(operator.or_, ranges))
        parts.append(
            rows.values(*OWNER_KEYS)
            .annotate(current=counted(current), previous=counted(previous))
            .order_by()
        )
    return parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]


def movers(changes: list["Change"], *, limit: int | None = 10) -> list["Change"]:
    """The largest changes either way, largest first."""
    moved = [change for change in changes if change.change]
    moved.sort(key=lambda change: (-abs(change.change), change.name, change.pk))
    return moved[:limit]


@dataclass(frozen=True)
class SpendChanges:
    """Who drives the spend of a period and what changed against the period before: every
    project, experiment and deployment with spend in either (bounded by how many there are, not
    by the bill's size), and the models' spend in the period."""

    projects: list[Change]  # costliest now first
    experiments: list[Change]  # largest change first
    deployments: list[Change]
    models: "Pareto"

    def project_pareto(self) -> "Pareto":
        return pareto(
            noun="projects",
            amounts=[(c.pk, c.name, c.current, c.parent, c.slug) for c in self.projects],
        )

    def project_movers(self, limit: int | None) -> list[Change]:
        return movers(self.projects, limit=limit)

    def experiment_movers(self, limit: int) -> list[Change]:
        return movers(self.experiments, limit=limit)

    def deployment_movers(self, limit: int) -> list[Change]:
        return movers(self.deployments, limit=limit)


def spend_changes(
    *, scope: SpendScope, period: Period, names_for: int | None = 10, models: bool = True
) -> SpendChanges:
    """One grouped pass over the period and the one before it, by project and owner, summed per
    project, owner and model in the same statement; names are looked up after, for what a page
    shows.

    (Four queries, one per table of the overview, cost 3.5 times as much on the benchmark's
    year: each scanned the rollup and joined runs, deployments, models and projects.)
    `names_for` is how many of the largest changes get a name (None: all, for the CSV);
    without `models` the models' spend is left empty (a project page shows none).
    """
    previous = period.previous
    q = scope.q() & Q(billing_currency=scope.currency)
    if previous:
        query = _two_periods_query(q, previous.start, period.start, period.end)
    else:
        query = rollup_query(
            q,
            period,
            lambda rows: (
                rows.values(*OWNER_KEYS)
                .annotate(current=Sum("effective_cost"), previous=ZERO_MONEY)
                .order_by()
            ),
        )
    if query is None:
        return _changes([], names_for=names_for)
    compiler = query.query.get_compiler(using=query.db)
    try:
        compiled = compiler.as_sql()
    except EmptyResultSet:  # a filter that matches nothing (someone who sees no project)
        return _changes([], names_for=names_for)

    def compute() -> SpendChanges:
        sums = _owner_sums(query, compiler, compiled, limit=names_for, models=models)
        return _changes(sums, names_for=names_for)

    # Cached whole, names included (a rename moves the data version as a change of spend does):
    # a warm page then looks up no name and adds up no row.
    tag = f"spend-changes:{names_for}:{models}"
    return cached(tag, query, compute, compiled=compiled)


def _owner_sums(
    query: QuerySet, compiler, compiled: tuple[str, tuple], *, limit: int | None, models: bool
) -> list[tuple]:
    """`query`'s rows (by project, run and deployment, a key in each part of its UNION ALL)
    summed by the database, as (kind, pk, current, previous): every project's; the `limit`
    runs and the `limit` deployments whose spend changed most (all that changed, with None),
    ranked as _named_changes ranks them; and with `models`, each model's spend in the period
    (`previous` None), that of its runs and deployments with spend, joined to their models
    after the grouping (to the groups, not to every rollup row).

    Adding up the few thousand groups in Python, by project, run, deployment and model, took a
    tenth of a cold 12-month overview; this returns a few hundred rows. Amounts come back as
    the ORM gives them (its converters: SQLite's decimals). `compiler` and `compiled` are the
    query's compiler and its SQL and parameters."""
    sql, params = compiled
    quote = connection.ops.quote_name
    current, previous = quote("current"), quote("previous")
    ranked = "" if limit is None else f" LIMIT {int(limit)}"

    def moved(owner: str) -> str:
        key = quote(f"{owner}_id")
        return (
            f"SELECT * FROM (SELECT '{owner}', {key}, SUM({current}), SUM({previous}) "
            f"FROM grouped WHERE {key} IS NOT NULL GROUP BY {key} "
            f"HAVING SUM({current}) <> SUM({previous}) "
            f"ORDER BY ABS(SUM({current}) - SUM({previous})) DESC, {key}{ranked}) AS {owner}s"
        )

    def owned(owner: str, table: str) -> str:
        key = quote(f"{owner}_id")
        return (
            f"SELECT owners.model_id, SUM(grouped.{current}) AS amount FROM grouped "
            f"JOIN {quote(table)} owners ON owners.id = grouped.{key} "
            f"WHERE owners.model_id IS NOT NULL GROUP BY grouped.{key}, owners.model_id "
            f"HAVING SUM(grouped.{current}) <> 0"
        )

    project = quote("project_id")
    parts = [
        f"SELECT 'project', {project}, SUM({current}), SUM({previous}) FROM grouped "
        f"WHERE {project} IS NOT NULL GROUP BY {project}",
        moved("experiment"),
        moved("deployment"),
    ]
    if models:
        parts.append(
            "SELECT 'model', model_id, SUM(amount), NULL FROM ("
            f"{owned('experiment', Experiment._meta.db_table)} UNION ALL "
            f"{owned('deployment', Deployment._meta.db_table)}) AS owned GROUP BY model_id"
        )
    with connection.cursor() as cursor:
        cursor.execute(f"WITH grouped AS ({sql}) {' UNION ALL '.join(parts)}", params)
        rows = cursor.fetchall()
    inner = query.query
    names = [*inner.extra_select, *inner.values_select, *inner.annotation_select]
    expressions = [expression for expression, *_ in compiler.select]
    money = compiler.get_converters([expressions[names.index("current")]]).get(0)
    if money is None:
        return rows
    converters, expression = money

    def converted(value):
        for converter in converters:
            value = converter(value, expression, connection)
        return value

    return [(kind, pk, converted(now), converted(before)) for kind, pk, now, before in rows]


def _changes(sums: list[tuple], *, names_for: int | None) -> SpendChanges:
    by_project: dict[int, tuple[Decimal, Decimal]] = {}
    moved: dict[str, list[tuple[int, Decimal, Decimal]]] = {"experiment": [], "deployment": []}
    by_model: dict[int, Decimal] = {}
    for kind, pk, current, before in sums:
        if kind == "project":
            by_project[pk] = (current, before)
        elif kind == "model":
            by_model[pk] = current
        else:
            moved[kind].append((pk, current, before))
    projects = _names(Project.objects, list(by_project), ("name", "slug", "team__name"))
    project_changes = [
        Change(
            kind="project",
            pk=pk,
            name=projects[pk]["name"],
            current=current,
            previous=before,
            parent=projects[pk]["team__name"],
            slug=projects[pk]["slug"],
        )
        for pk, (current, before) in by_project.items()
        if pk in projects
    ]
    project_changes.sort(key=lambda change: (-change.current, change.name))
    models = _names(Model.objects, list(by_model), ("name", "project__name"))
    return SpendChanges(
        projects=project_changes,
        experiments=_named_changes(
            "experiment", moved["experiment"], Experiment.objects, "project__name", names_for
        ),
        deployments=_named_changes(
            "deployment", moved["deployment"], Deployment.objects, "model__name", names_for
        ),
        models=pareto(
            noun="models",
            amounts=[
                (pk, models[pk]["name"], amount, models[pk]["project__name"])
                for pk, amount in by_model.items()
                if pk in models
            ],
        ),
    )


def _names(objects: QuerySet, pks: list[int], fields: tuple[str, ...]) -> dict[int, dict]:
    """`fields` of the rows with these primary keys, by key: names and what they belong to,
    which only the joined tables hold. Cached by the joined version (a rename moves it), so a
    change of spend, after which the same projects, models and runs are named, reads none."""
    if not pks:
        return {}
    pks = sorted(pks)
    return cached_by(
        f"names:{objects.model._meta.label}",
        (pks, fields),
        lambda: {row["pk"]: row for row in objects.filter(pk__in=pks).values("pk", *fields)},
        joined=True,
    )


def _named_changes(
    kind: str, moved: list[tuple[int, Decimal, Decimal]], objects, parent: str, limit: int | None
) -> list[Change]:
    """The largest changes of one kind (all with `limit` None), with their names."""
    ranked = sorted(moved, key=lambda item: (-abs(item[1] - item[2]), item[0]))
    if limit is not None:
        ranked = ranked[:limit]
    names = _names(objects, [pk for pk, *_ in ranked], ("name", parent))
    changes = [
        Change(
            kind=kind,
            pk=pk,
            name=names[pk]["name"],
            current=current,
            previous=before,
            parent=names[pk][parent] or "",
        )
        for pk, current, before in ranked
        if pk in names
    ]
    return movers(changes, limit=len(changes))


@dataclass(frozen=True)
class ParetoItem:
    pk: int | None
    name: str
    amount: Decimal
    share: Decimal
    cumulative_share: Decimal
    parent: str = ""
    slug: str = ""


def _floor_percent(share: Decimal) -> int:
    return int((share * 100).to_integral_value(rounding="ROUND_FLOOR"))


@dataclass(frozen=True)
class Pareto:
    """Things by spend, costliest first, with each one's share and the running share."""

    noun: str  # plural: "projects"
    items: list[ParetoItem]
    total: Decimal

    @property
    def head(self) -> int:
        """How many of the costliest make up 80% of the spend."""
        for position, item in enumerate(self.items, start=1):
            if item.cumulative_share >= PARETO_SHARE:
                return position
        return len(self.items)

    @property
    def head_share(self) -> Decimal | None:
        return self.items[self.head - 1].cumulative_share if self.items else None

    @property
    def headline(self) -> str:
        if not self.items:
            return ""
        top = self.items[0]
        if len(self.items) == 1:
            return f"{top.name} is all of the spend"
        if self.head == len(self.items):
            # "3 of 3 are 100%" says nothing: when no few drive the spend, say what the largest is.
            return f"{top.name} is the largest, {_floor_percent(top.share)}% of the spend"
        share = _floor_percent(self.head_share)
        return f"{self.head} of {len(self.items)} {self.noun} are {share}% of the spend"


def pareto(*, noun: str, amounts: list[tuple]) -> Pareto:
    """(pk, name, amount, parent[, slug]) in, a Pareto out. Credits (a negative net) have no
    share."""
    positive = [item for item in amounts if item[2] > 0]
    positive.sort(key=lambda item: (-item[2], item[1]))
    total = sum((item[2] for item in positive), ZERO)
    items, running = [], ZERO
    for pk, name, amount, parent, *slug in positive:
        running += amount
        items.append(
            ParetoItem(
                pk=pk,
                name=name,
                amount=amount,
                share=amount / total,
                cumulative_share=running / total,
                parent=parent,
                slug=slug[0] if slug else "",
            )
        )
    return Pareto(noun=noun, items=items, total=total)


# -- Unattributed spend --------------------------------------------------------------------------
